/* test_attn_bench.c -- attention alone, one layer of the SmolLM2-135M shape (9 query heads, 3
 * kv-heads, head_dim 64), per KV scheme and depth: a decode step (one query at the last
 * position) and a prefill of the whole depth in one call, on the calling thread, timed in that
 * thread's CPU time (a shared machine disturbs it less than wall time), best of several runs.
 * The cache is filled with uniform random rows through its own append(). Asserts only that the
 * outputs are finite; the numbers are for docs/results.md ("Attention on AVX2").
 * Usage: test_attn_bench [decode_reps] [max_depth] [--cpu ISA] [--shape NH,NKV,HD]
 * (--shape 4,1,256: Gemma 3 270M). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/rng.h"
#include "model/kvcache_turbo.h"
#include "t.h"
#include "t_cpu.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_attn_bench");
    const int cpu = t_cpu_args(argc, argv);
    if (cpu)
        return cpu;
    const int reps = argc > 1 && argv[1][0] != '-' ? atoi(argv[1]) : 20;
    const int max_depth = argc > 2 ? atoi(argv[2]) : 8192;
    static const char *schemes[] = {"bf16", "f16", "kv8", "turbo", "turbo:k4v3"};
    static const int depths[] = {1024, 4096, 8192};
    int nh = 9, nkv = 3, hd = 64;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--shape") &&
            (sscanf(argv[i + 1], "%d,%d,%d", &nh, &nkv, &hd) != 3 || nh < 1 || nkv < 1 ||
             nh % nkv || hd < 8 || hd % 8)) {
            printf("FAIL: --shape NH,NKV,HD (NH a multiple of NKV, HD of 8)\n");
            return 2;
        }
    tq_rng r;
    tq_rng_seed(&r, t_seed);
    printf("isa %s; one layer, heads %d/%d, head_dim %d, 1 thread, thread CPU time, best of 5\n",
           tq_isa_name(tq_cpu_isa()), nh, nkv, hd);
    printf("%-11s %6s %14s %16s %14s\n", "scheme", "depth", "decode ms", "x30 layers ms",
           "prefill ms");
    for (int di = 0; di < 3 && depths[di] <= max_depth; di++) {
        const int n = depths[di];
        float *k = malloc((size_t)n * nkv * hd * 4), *v = malloc((size_t)n * nkv * hd * 4);
        float *q = malloc((size_t)n * nh * hd * 4), *o = malloc((size_t)n * nh * hd * 4);
        for (int64_t i = 0; i < (int64_t)n * nkv * hd; i++) {
            k[i] = tq_rng_uniform(&r) - 0.5f;
            v[i] = tq_rng_uniform(&r) - 0.5f;
        }
        for (int64_t i = 0; i < (int64_t)n * nh * hd; i++)
            q[i] = tq_rng_uniform(&r) - 0.5f;
        for (int si = 0; si < 5; si++) {
            tq_kv_scheme s;
            tq_kvcache *c = NULL;
            tq_kv_scheme_parse(schemes[si], &s);
            CHECK(tq_kvcache_create(s, 1, nh, nkv, hd, n, 0.125f, 1, &c) == TQ_OK, "%s: %s",
                  schemes[si], tq_last_error());
            if (!c)
                continue;
            c->ops->append(c, 0, 0, k, v, n);
            double dec = 1e9, pre = 1e9;
            for (int rr = 0; rr < 5; rr++) {
                const double t0 = cpu_s();
                for (int i = 0; i < reps; i++)
                    c->ops->attend(c, 0, q + (size_t)(n - 1) * nh * hd, 1, n - 1, o, NULL);
                const double t = (cpu_s() - t0) / reps;
                dec = t < dec ? t : dec;
            }
            for (int rr = 0; rr < (n > 4096 ? 1 : 2); rr++) {
                const double t0 = cpu_s();
                c->ops->attend(c, 0, q, n, 0, o, NULL);
                const double t = cpu_s() - t0;
                pre = t < pre ? t : pre;
            }
            int bad = 0;
            for (int64_t i = 0; i < (int64_t)n * nh * hd; i++)
                bad += !isfinite(o[i]);
            CHECK(bad == 0, "%s depth %d: %d non-finite outputs", schemes[si], n, bad);
            printf("%-11s %6d %14.3f %16.1f %14.1f\n", schemes[si], n, 1e3 * dec, 30e3 * dec,
                   1e3 * pre);
            tq_kvcache_free(c);
        }
        free(k);
        free(v);
        free(q);
        free(o);
    }
    return t_done();
}
