/* consumer.c -- a program built against the INSTALLED libturboquant (tests/install/run.sh). */
#include <stdio.h>
#include <string.h>
#include <turboquant.h>

int main(void)
{
    tq_kv_scheme s;
    char name[64];
    size_t kb = 0, vb = 0;
    if (tq_version() != TQ_VERSION_NUMBER || tq_kv_scheme_parse("turbo:k8v3", &s) != TQ_OK ||
        tq_kv_row_bytes(s, 128, &kb, &vb) != TQ_OK)
        return 1;
    printf("turboquant %s: %s, head_dim 128: %zu + %zu bytes\n", tq_version_string(),
           tq_kv_scheme_name(s, name, sizeof(name)), kb, vb);
    return strcmp(name, "turbo:k8v3") != 0 || kb + vb != 200; /* 128 + 16 K, 48 + 8 V */
}
