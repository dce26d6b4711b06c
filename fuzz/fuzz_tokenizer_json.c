/* fuzz_tokenizer_json.c -- libFuzzer target: a Hugging Face tokenizer.json document through the
 * tokenizer loader (include/turboquant/tokenizer.h, owned by the tokenizer module); when it loads,
 * a fixed text is encoded and decoded back. Bad input must end in a TQ_E_* status. */
#include <stdint.h>
#include <string.h>

#include "turboquant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char text[] = "Hello, world! 12345 \xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac  \n\t<s>";
    tq_tokenizer *t = NULL;
    int32_t ids[256];
    int64_t n = 0;
    char out[1024];
    size_t n_out = 0;
    if (tq_tokenizer_from_json_memory((const char *)data, size, "fuzz.tokenizer.json", &t) != TQ_OK)
        return 0;
    if (tq_tokenizer_encode(t, text, strlen(text), TQ_TOK_PARSE_SPECIAL | TQ_TOK_ADD_BOS_AUTO, ids, 256, &n) == TQ_OK)
        tq_tokenizer_decode(t, ids, n, 0, out, sizeof(out), &n_out);
    tq_tokenizer_free(t);
    return 0;
}
