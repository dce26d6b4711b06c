/* t.h -- the whole test harness. CHECK* count failures and keep going; t_done() prints the
 * summary line and returns the exit code. Seeds are fixed, printed, and overridable with -s N. */
#ifndef TQ_T_H
#define TQ_T_H
#undef NDEBUG
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_fail, t_pass;
static unsigned t_seed = 20261129u;

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (cond) {                                                                           \
            t_pass++;                                                                         \
        } else {                                                                              \
            t_fail++;                                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                  \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, " (seed %u)\n", t_seed);                                          \
        }                                                                                     \
    } while (0)
#define CHECK_NEAR(a, b, tol, ...) CHECK(fabs((double)(a) - (double)(b)) <= (tol), __VA_ARGS__)
#define CHECK_MEMEQ(a, b, n, ...) CHECK(memcmp((a), (b), (n)) == 0, __VA_ARGS__)

/* t_init() -- parse -s SEED; print the seed. */
static inline void t_init(int argc, char **argv, const char *name)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-s"))
            t_seed = (unsigned)strtoul(argv[i + 1], NULL, 0);
    printf("%s: seed = %u (rerun with -s %u)\n", name, t_seed, t_seed);
}

/* t_skip() -- exit 77 (ctest SKIP) with the reason. */
static inline int t_skip(const char *why)
{
    printf("SKIP: %s\n", why);
    return 77;
}

static inline int t_done(void)
{
    printf("%d passed, %d failed\n", t_pass, t_fail);
    return t_fail ? 1 : (t_pass ? 0 : 1); /* a test with no assertion fails */
}
#endif
