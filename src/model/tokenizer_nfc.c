/* tokenizer_nfc.c -- NFC normalization (placeholder: identity). */
#include <string.h>

#include "tok_internal.h"

tq_status tok_nfc(const char *s, size_t n, char **out, size_t *out_n)
{
    *out = tq_malloc(n ? n : 1);
    if (!*out)
        return TQ_FAIL(TQ_E_NOMEM, "tokenizer: out of memory for NFC");
    memcpy(*out, s, n);
    *out_n = n;
    return TQ_OK;
}
