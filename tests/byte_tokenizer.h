/* byte_tokenizer.h -- a byte-level BPE tokenizer without merges (token i = byte i) for tests that
 * run the tiny random models (test_gen, test_cuda_gen). Include after t.h (CHECK) and turboquant.h. */
#ifndef TQ_TEST_BYTE_TOKENIZER_H
#define TQ_TEST_BYTE_TOKENIZER_H

#include <stdio.h>

/* GPT-2 byte -> unicode code point (printable bytes map to themselves) */
static inline int byte_cp(int b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
        return b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255)))
            n++;
    return 256 + n;
}

static inline tq_tokenizer *byte_tokenizer(void)
{
    static char json[16384];
    size_t o = 0;
    o += (size_t)snprintf(json + o, sizeof(json) - o, "{\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        int cp = byte_cp(b);
        char u[8];
        if (cp < 0x80)
            snprintf(u, sizeof(u), "%c", cp);
        else
            snprintf(u, sizeof(u), "%c%c", 0xc0 | (cp >> 6), 0x80 | (cp & 0x3f));
        if (cp == '"' || cp == '\\')
            o += (size_t)snprintf(json + o, sizeof(json) - o, "%s\"\\%s\":%d", b ? "," : "", u, b);
        else
            o += (size_t)snprintf(json + o, sizeof(json) - o, "%s\"%s\":%d", b ? "," : "", u, b);
    }
    o += (size_t)snprintf(json + o, sizeof(json) - o,
                          "},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\","
                          "\"add_prefix_space\":false,\"use_regex\":false}}");
    tq_tokenizer *t = NULL;
    tq_status st = tq_tokenizer_from_json_memory(json, o, "bytes.json", &t);
    CHECK(st == TQ_OK, "byte tokenizer: %s", tq_last_error());
    return t;
}

#endif /* TQ_TEST_BYTE_TOKENIZER_H */
