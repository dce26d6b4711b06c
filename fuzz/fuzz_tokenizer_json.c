/* fuzz_tokenizer_json.c -- libFuzzer target: arbitrary bytes as a Hugging Face tokenizer.json
 * (tokenizer module, include/turboquant/tokenizer.h). Loading must either fail with a TQ_E_*
 * status (never crash, leak or read out of bounds) or give a tokenizer that encodes, decodes,
 * streams and renders chats without crashing; the input itself is also tokenized as text.
 * Build: cmake --preset fuzz (fuzz/CMakeLists.txt); corpus: fuzz/corpus/tokenizer_json/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "turboquant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sample[] = "Hello, world! 12345 \xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac"
                                 "  \n\t<s> \xf0\x9f\x98\x80 <|im_start|>x\xff e\xcc\x81";
    tq_tokenizer *t = NULL;
    int32_t ids[512];
    int64_t n = 0;
    char back[2048];
    size_t nb = 0;

    if (size > (1u << 20))
        return 0;
    if (tq_tokenizer_from_json_memory((const char *)data, size, "fuzz.tokenizer.json", &t) != TQ_OK)
        return 0;
    tq_tokenizer_encode(t, sample, sizeof(sample) - 1, TQ_TOK_PARSE_SPECIAL | TQ_TOK_ADD_BOS_AUTO,
                        ids, 512, &n);
    if (n > 512)
        n = 512;
    tq_tokenizer_decode(t, ids, n, 0, back, sizeof(back), &nb);
    tq_tokenizer_decode(t, ids, n, TQ_TOK_SKIP_SPECIAL, back, sizeof(back), &nb);
    {
        tq_tok_stream s;
        size_t k;
        tq_tok_stream_init(&s, t, 0);
        for (int64_t i = 0; i < n; i++)
            tq_tok_stream_put(&s, ids[i], back, sizeof(back), &k);
        tq_tok_stream_flush(&s, back, sizeof(back), &k);
    }
    if (size <= 400) { /* the input as text, too */
        tq_tokenizer_encode(t, (const char *)data, size, 0, ids, 512, &n);
        if (n > 512)
            n = 512;
        tq_tokenizer_decode(t, ids, n, 0, back, sizeof(back), &nb);
    }
    {
        tq_chat_msg m[2] = {{"system", "s"}, {"user", "u"}};
        char out[256];
        size_t no;
        tq_chat_render(t, TQ_CHAT_AUTO, m, 2, 1, out, sizeof(out), &no);
    }
    for (int32_t i = 0; i < tq_tokenizer_vocab_size(t) && i < 64; i++) {
        size_t len;
        const char *p = tq_tokenizer_piece(t, i, &len);
        if (p)
            tq_tokenizer_lookup(t, p, len);
    }
    tq_tokenizer_free(t);
    return 0;
}
