/* test_engine_bench.c -- matvec/GEMM kernel timings on SmolLM2-135M shapes (label slow): decode
 * (n = 1) and prefill (n = 128) for every kernel table and weight dtype, one thread, median of 7
 * runs interleaved across kernels, in thread CPU time. One line per case: op dtype kernel m k n
 * ms GFLOP/s GB/s(weights). Used to choose the prefill GEMM (own kernels vs OpenBLAS) and the
 * bf16 kernel; see docs/results.md. Checks that every kernel agrees with the reference on the
 * timed shapes (NMSE). */
#include <stdlib.h>

#include "core/core.h"
#include "core/half.h"
#include "core/rng.h"
#include "cpu/matvec.h"
#include "t.h"

/* thread CPU time: on a shared, oversubscribed machine wall time mostly measures the scheduler */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmpd(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_engine_bench");
    const tq_mm_kernels *ks[8];
    const int nk = tq_mm_all(ks, 8);
    static const int64_t shapes[][3] = {
        {1536, 576, 1}, {576, 1536, 1}, {49152, 576, 1}, {1536, 576, 128}, {576, 1536, 128}};
    tq_rng rng;
    tq_rng_seed(&rng, t_seed);
    const int64_t maxw = 49152 * 576, maxx = 128 * 1536, maxy = 128 * 49152;
    float *wf = tq_malloc((size_t)maxw * 4);
    uint16_t *wh = tq_malloc((size_t)maxw * 2), *wb = tq_malloc((size_t)maxw * 2);
    float *x = tq_malloc((size_t)maxx * 4), *yr = tq_malloc((size_t)maxy * 4);
    float *y = tq_malloc((size_t)maxy * 4);
    uint16_t *xb = tq_malloc((size_t)maxx * 2);
    for (int64_t i = 0; i < maxw; i++) {
        const float v = (tq_rng_uniform(&rng) * 2.0f - 1.0f) * 0.05f;
        wb[i] = tq_f32_to_bf16(v);
        wf[i] = tq_bf16_to_f32(wb[i]);
        wh[i] = tq_f32_to_f16(wf[i]);
    }
    for (int64_t i = 0; i < maxx; i++)
        x[i] = tq_rng_uniform(&rng) * 2.0f - 1.0f;
    const void *W[TQ_DTYPE_COUNT] = {wf, wh, wb};
    printf("%-7s %-5s %-11s %6s %5s %4s %9s %8s %8s\n", "op", "dtype", "kernel", "m", "k", "n",
           "ms", "GFLOP/s", "GB/s");
    for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
        const int64_t m = shapes[si][0], k = shapes[si][1], n = shapes[si][2];
        tq_mm_round_x(x, k, n, k, xb);
        for (int dt = 0; dt < TQ_DTYPE_COUNT; dt++) {
            /* runs interleaved across kernels (rep-major), so load changes on a shared machine
             * hit every kernel alike; the scalar kernel is the reference, not timed at n=128 */
            const int reps = n == 1 ? (m > 10000 ? 5 : 50) : 3;
            double t[8][7];
            for (int r = 0; r < 7; r++)
                for (int i = 0; i < nk; i++) {
                    if (!ks[i]->mm[dt] || (i == 0 && n > 1))
                        continue;
                    const uint64_t t0 = cpu_ns();
                    for (int j = 0; j < reps; j++)
                        ks[i]->mm[dt](W[dt], k, x, xb, k, n, y, m, 0, m);
                    t[i][r] = (double)(cpu_ns() - t0) * 1e-6 / reps;
                }
            for (int i = 0; i < nk; i++) {
                if (!ks[i]->mm[dt] || (i == 0 && n > 1))
                    continue;
                qsort(t[i], 7, sizeof(double), cmpd);
                const double ms = t[i][3];
                printf("%-7s %-5s %-11s %6lld %5lld %4lld %9.3f %8.2f %8.2f\n",
                       n == 1 ? "decode" : "prefill", tq_dtype_name((tq_dtype)dt), ks[i]->name,
                       (long long)m, (long long)k, (long long)n, ms,
                       2.0 * (double)(m * k * n) / (ms * 1e6),
                       (double)(m * k) * (double)tq_dtype_size((tq_dtype)dt) / (ms * 1e6));
                /* agreement with the f32 reference (bf16 weights hold the same values) */
                ks[i]->mm[dt](W[dt], k, x, xb, k, n, y, m, 0, m);
                if (dt == TQ_DTYPE_F32 && i == 1)
                    memcpy(yr, y, sizeof(float) * (size_t)(m * n));
                if (i >= 1 && dt != TQ_DTYPE_F16) {
                    double num = 0, den = 0;
                    for (int64_t j = 0; j < m * n; j++) {
                        const double d = (double)y[j] - yr[j];
                        num += d * d;
                        den += (double)yr[j] * yr[j];
                    }
                    CHECK(num <= (ks[i]->needs_xb ? 1e-4 : 1e-10) * den, "%s %s m=%lld n=%lld",
                          ks[i]->name, tq_dtype_name((tq_dtype)dt), (long long)m, (long long)n);
                }
            }
        }
    }
    tq_free(wf);
    tq_free(wh);
    tq_free(wb);
    tq_free(x);
    tq_free(xb);
    tq_free(y);
    tq_free(yr);
    return t_done();
}
