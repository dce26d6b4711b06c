/* core.h -- internal helpers every module may use: failure reporting, allocation, checked size
 * math, logging, timing. core/ depends on nothing else in the tree. */
#ifndef TQ_CORE_H
#define TQ_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "turboquant.h"

/* TQ_FAIL(st, fmt, ...) -- record "fmt" (with file:line at debug log level) as this thread's last
 * error and evaluate to st. Use as `return TQ_FAIL(TQ_E_FORMAT, "%s: bad magic", path);`. */
#define TQ_FAIL(st, ...) tq_fail_((st), __FILE__, __LINE__, __VA_ARGS__)
tq_status tq_fail_(tq_status st, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* tq_clear_error() -- reset this thread's message to "". */
void tq_clear_error(void);

/* Allocation: every library allocation goes through these (counted; see tq_alloc_count()). */
void *tq_malloc(size_t n);
void *tq_calloc(size_t n, size_t size);
void *tq_realloc(void *p, size_t n);
/* tq_aligned_alloc() -- 64-byte aligned block; release with tq_free(). size may be 0. */
void *tq_aligned_alloc(size_t n);
void tq_free(void *p);
char *tq_strdup(const char *s);

/* Checked size math: return false (and leave *out untouched) on overflow. */
static inline bool tq_mul_ok(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return false;
    *out = r;
    return true;
}
static inline bool tq_add_ok(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_add_overflow(a, b, &r))
        return false;
    *out = r;
    return true;
}

/* Logging to stderr at the level of tq_log_set_level() (turboquant.h; default warn). */
void tq_log(tq_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool tq_log_enabled(tq_log_level lvl);

/* Monotonic clock in nanoseconds. */
static inline uint64_t tq_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Little-endian loads/stores for on-disk formats (never fread into a struct). */
static inline uint16_t tq_rd16(const void *p)
{
    const uint8_t *b = p;
    return (uint16_t)(b[0] | (b[1] << 8));
}
static inline uint32_t tq_rd32(const void *p)
{
    const uint8_t *b = p;
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}
static inline uint64_t tq_rd64(const void *p)
{
    return (uint64_t)tq_rd32(p) | ((uint64_t)tq_rd32((const uint8_t *)p + 4) << 32);
}
static inline void tq_wr16(void *p, uint16_t v)
{
    uint8_t *b = p;
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
}
static inline void tq_wr32(void *p, uint32_t v)
{
    uint8_t *b = p;
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}
static inline void tq_wr64(void *p, uint64_t v)
{
    tq_wr32(p, (uint32_t)v);
    tq_wr32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}

/* Split [0, n) into nth near-equal contiguous ranges; thread ith gets [*r0, *r1). */
static inline void tq_split_range(int64_t n, int ith, int nth, int64_t *r0, int64_t *r1)
{
    const int64_t per = (n + nth - 1) / nth;
    int64_t a = per * ith;
    int64_t b = a + per;
    *r0 = a < n ? a : n;
    *r1 = b < n ? b : n;
}

#endif /* TQ_CORE_H */
