/* test_tok_common.h -- helpers shared by the tokenizer tests: file reading, the reference-id files
 * written by scripts/tok_ref/make_ref.py, and the paths of the shared assets. */
#ifndef TQ_TEST_TOK_COMMON_H
#define TQ_TEST_TOK_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "turboquant.h"

/* tc_read() -- whole file into a malloc'ed buffer (NUL appended); NULL if unreadable. */
static inline char *tc_read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *b;
    long sz;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[sz] = 0;
        *n = (size_t)sz;
    }
    return b;
}

/* tc_path() -- TQ_SRC_DIR (or ".") + "/" + rel into a static buffer. */
static inline const char *tc_path(const char *rel)
{
    static char buf[4][1024];
    static int k;
    const char *root = getenv("TQ_SRC_DIR");
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", root ? root : ".", rel);
    return buf[k];
}

/* tc_read_ids() -- a .tqid file: "TQID", u32 LE count, zlib(count u32 LE). NULL on error. */
static inline int32_t *tc_read_ids(const char *path, int64_t *count)
{
    size_t n = 0;
    unsigned char *f = (unsigned char *)tc_read(path, &n);
    int32_t *ids = NULL;
    uLongf out_n;
    uint32_t c;
    if (!f || n < 8 || memcmp(f, "TQID", 4)) {
        free(f);
        return NULL;
    }
    c = (uint32_t)f[4] | (uint32_t)f[5] << 8 | (uint32_t)f[6] << 16 | (uint32_t)f[7] << 24;
    unsigned char *raw = malloc((size_t)c * 4 + 1);
    out_n = (uLongf)c * 4;
    if (raw && uncompress(raw, &out_n, f + 8, (uLong)(n - 8)) == Z_OK && out_n == (uLongf)c * 4) {
        ids = malloc((size_t)c * sizeof(int32_t) + 1);
        for (uint32_t i = 0; ids && i < c; i++)
            ids[i] = (int32_t)((uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                               (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24);
        *count = c;
    }
    free(raw);
    free(f);
    return ids;
}
#endif
