/* alloc.c -- the library's only allocator entry points, counted so tests can prove that hot
 * paths never allocate. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static atomic_uint_fast64_t n_allocs;

uint64_t tq_alloc_count(void)
{
    return (uint64_t)atomic_load(&n_allocs);
}

void *tq_malloc(size_t n)
{
    atomic_fetch_add(&n_allocs, 1);
    return malloc(n ? n : 1);
}

void *tq_calloc(size_t n, size_t size)
{
    atomic_fetch_add(&n_allocs, 1);
    return calloc(n ? n : 1, size ? size : 1);
}

void *tq_realloc(void *p, size_t n)
{
    atomic_fetch_add(&n_allocs, 1);
    return realloc(p, n ? n : 1);
}

void *tq_aligned_alloc(size_t n)
{
    void *p = NULL;
    atomic_fetch_add(&n_allocs, 1);
    if (posix_memalign(&p, 64, n ? n : 64))
        return NULL;
    return p;
}

void tq_free(void *p)
{
    free(p);
}

char *tq_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = tq_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}
