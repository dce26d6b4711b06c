/* qdot_bench.c -- micro-benchmark of the native block kernels (src/cpu/qdot.h), 1 token.
 *
 *   build/qdot/tests/qdot_bench [-r REPS] [-t THREADS] [-n TOKENS] [-s M,K] ... [-f FMT,FMT] [-q 1]
 *
 * -f: only these formats (e.g. -f Q5_0,Q4_0); -q 1: only the vector tables' q8 paths (and q8p).
 * Rows "q8p": a table's prefill tile over packed activations (qdot.h gemm_q8 / tq_q8p; the
 * engine takes it from 16 tokens), timed with the quantizer and the packing.
 * For each shape (default 576x1536 and 4096x14336) and thread count (default 1 and 2), times
 * one product with -n tokens (default 1: a matvec; n > 1: the GEMM tiles of prefill and batched
 * decode; GB/s then counts the weight bytes once) of random weights per format (Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K), per ISA table (scalar,
 * avx2, avx512vnni where the CPU has it; a table without the format is skipped) and per activation path (q8: the quantizer is inside the timed region; f32), and the
 * existing bf16 kernel of src/cpu/matvec.h (best ISA) on the same shape as the in-run
 * reference. Configurations are interleaved round by round; the median of REPS rounds is
 * printed as time, GB/s of the weight bytes the kernel reads, and time relative to bf16
 * (x bf16 > 1 = faster than the bf16 matvec), by wall time and by the calling thread's CPU time
 * (the latter leaves out waiting for a core on a loaded machine). Weights are reused between rounds, so the small
 * shape runs from cache and the large one (33-62 MB packed, 117 MB bf16) from DRAM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/half.h"
#include "core/rng.h"
#include "cpu/matvec.h"
#include "cpu/qdot.h"
#include "cpu/qdot_amx.h"
#include "cpu/qdot_r16.h"
#include "turboquant.h"

enum { PATH_Q8, PATH_F32, PATH_BF16, PATH_GEMM };

typedef struct job {
    int path;
    const tq_qdot_kernels *K;
    const tq_mm_kernels *mm;
    int type;
    const void *w;
    size_t rb;
    int64_t m, k, n;
    const float *x;
    const void *a;
    float *y;
    void *p; /* tq_q8p groups of the n tokens (PATH_GEMM) */
} job;

static void run_job(void *ctx, int ith, int nth)
{
    const job *j = ctx;
    const int64_t r0 = j->m * ith / nth;
    const int64_t r1 = j->m * (ith + 1) / nth;
    if (j->path == PATH_Q8)
        j->K->mv_q8[j->type](j->w, j->rb, j->k, j->a, j->n, j->y, j->m, r0, r1);
    else if (j->path == PATH_GEMM)
        j->K->gemm_q8[j->type](j->w, j->rb, j->k, j->p, j->n, j->y, j->m, r0, r1);
    else if (j->path == PATH_F32)
        j->K->mv_f32[j->type](j->w, j->rb, j->k, j->x, j->k, j->n, j->y, j->m, r0, r1);
    else
        j->mm->mm[TQ_DTYPE_BF16](j->w, j->k, j->x, NULL, j->k, j->n, j->y, j->m, r0, r1);
}

/* CPU time of the calling thread: under a loaded machine it leaves out the time this thread
 * waited for a core (for 1 thread it is the whole job; for 2, the caller's half). */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define MAXCFG 16

int main(int argc, char **argv)
{
    int reps = 9;
    const char *fmt_only = NULL; /* -f Q5_0,Q4_0: only these formats                     */
    int q8only = 0;              /* -q 1: only the q8 paths of the vector tables (and q8p) */
    int64_t ntok = 1;
    int threads[4] = {1, 2};
    int n_threads = 2;
    int64_t shapes[8][2] = {{576, 1536}, {4096, 14336}};
    int n_shapes = 2;
    int user_shapes = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-f")) {
            fmt_only = argv[i + 1];
        } else if (!strcmp(argv[i], "-q")) {
            q8only = atoi(argv[i + 1]);
        } else if (!strcmp(argv[i], "-n")) {
            ntok = atoll(argv[i + 1]);
            if (ntok < 1 || ntok > 4096)
                ntok = 1;
        } else if (!strcmp(argv[i], "-r")) {
            reps = atoi(argv[i + 1]);
        } else if (!strcmp(argv[i], "-t")) {
            threads[0] = atoi(argv[i + 1]);
            n_threads = 1;
        } else if (!strcmp(argv[i], "-s") && user_shapes < 8) {
            long long m, k;
            if (sscanf(argv[i + 1], "%lld,%lld", &m, &k) != 2 || m <= 0 || k <= 0 || k % 32) {
                fprintf(stderr, "qdot_bench: -s wants M,K with K a multiple of 32\n");
                return 2;
            }
            shapes[user_shapes][0] = m;
            shapes[user_shapes][1] = k;
            n_shapes = ++user_shapes;
        } else {
            fprintf(stderr, "usage: qdot_bench [-r REPS] [-t THREADS] [-n TOKENS] [-s M,K]... [-f FMT,FMT] [-q 1]\n");
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    static const int fmts[] = {TQ_GGML_Q8_0, TQ_GGML_Q4_0, TQ_GGML_Q4_1, TQ_GGML_Q5_0,
                               TQ_GGML_Q5_1, TQ_GGML_Q4_K, TQ_GGML_Q5_K, TQ_GGML_Q6_K};
    const tq_qdot_kernels *isa[6];
    int n_isa = tq_qdot_all(isa, 4);
    static tq_qdot_kernels amx; /* the AMX tiles (cpu/qdot_amx.h) over the AVX512-VNNI table */
    if (tq_cpu_amx() && n_isa > 0 && tq_qdot_avx512()) {
        amx = *tq_qdot_avx512();
        amx.isa = "amx";
        for (int t = 0; t < TQ_FMT_LIMIT; t++) {
            amx.gemm_q8[t] = tq_qdot_amx_gemm(t); /* its q8p row: over the packed groups */
            amx.mv_q8[t] = tq_qdot_amx_mv(t);
        }
        isa[n_isa++] = &amx;
    }
    static tq_qdot_kernels r16; /* the r16 layout's decode kernel (cpu/qdot_r16.h), its own copy */
    if (tq_r16_mv(TQ_GGML_Q4_0)) {
        r16 = *tq_qdot_avx512();
        r16.isa = "r16";
        for (int t = 0; t < TQ_FMT_LIMIT; t++) {
            r16.gemm_q8[t] = NULL;
            r16.mv_q8[t] = tq_r16_format(t) ? tq_r16_mv(t) : NULL;
        }
        isa[n_isa++] = &r16;
    }
    const tq_mm_kernels *mms[8];
    const int n_mm = tq_mm_all(mms, 8);
    const tq_mm_kernels *mm = mms[0];
    for (int i = 0; i < n_mm; i++) /* the best batch-invariant bf16 kernel: the engine's default */
        if (mms[i]->mm[TQ_DTYPE_BF16] && mms[i]->batch_invariant && !mms[i]->needs_xb)
            mm = mms[i];
    printf("qdot_bench: cpu isa %s, bf16 reference kernel %s, %d rounds (median), %lld tokens\n",
           tq_isa_name(tq_cpu_isa()), mm->name, reps, (long long)ntok);
    printf("%-11s %3s %-5s %-6s %-4s %10s %8s %8s %10s %8s %8s\n", "shape", "thr", "fmt", "isa",
           "act", "wall us", "GB/s", "x bf16", "cpu us", "GB/s", "x bf16");
    tq_rng rng;
    tq_rng_seed(&rng, 1);
    for (int si = 0; si < n_shapes; si++) {
        const int64_t m = shapes[si][0], k = shapes[si][1];
        float *x = malloc(sizeof(float) * k * ntok);
        float *y = malloc(sizeof(float) * m * ntok);
        void *a = malloc(sizeof(tq_q8k) * (k / 32) * ntok); /* room for either activation */
        void *pk = aligned_alloc(64, sizeof(tq_q8p) * (size_t)tq_q8p_count(k, ntok));
        uint16_t *wb = malloc(sizeof(uint16_t) * m * k);
        if (!x || !y || !a || !wb)
            return 1;
        for (int64_t j = 0; j < k * ntok; j++)
            x[j] = tq_rng_normal(&rng);
        for (int64_t j = 0; j < m * k; j++)
            wb[j] = tq_f32_to_bf16(0.02f * tq_rng_normal(&rng));
        for (int ti = 0; ti < n_threads; ti++) {
            tq_pool *pool = NULL;
            if (threads[ti] > 1 && tq_pool_create(threads[ti], &pool))
                return 1;
            for (size_t f = 0; f < sizeof(fmts) / sizeof(fmts[0]); f++) {
                const int t = fmts[f];
                if (fmt_only && !strstr(fmt_only, tq_ggml_type_name(t)))
                    continue;
                const int64_t blk = tq_ggml_block_size(t);
                if (k % blk)
                    continue;
                const size_t rb = (size_t)(k / blk) * tq_ggml_type_size(t);
                uint8_t *w = malloc(rb * m);
                if (!w)
                    return 1;
                for (size_t j = 0; j < rb * m; j++)
                    w[j] = (uint8_t)tq_rng_u64(&rng);
                for (int64_t b = 0; b < m * (k / blk); b++) {
                    uint8_t *p = w + (size_t)b * tq_ggml_type_size(t);
                    const uint16_t d = tq_f32_to_f16(0.002f + 0.001f * tq_rng_uniform(&rng));
                    tq_wr16(p + (t == TQ_GGML_Q6_K ? 208 : 0), d);
                    if (t == TQ_GGML_Q4_1 || t == TQ_GGML_Q5_1 || t == TQ_GGML_Q4_K ||
                        t == TQ_GGML_Q5_K)
                        tq_wr16(p + 2, tq_f32_to_f16(t >= TQ_GGML_Q4_K ? 1e-4f : -0.01f));
                }
                uint8_t *wr = NULL; /* the r16 copy */
                if (r16.isa && tq_r16_format(t) && m % 16 == 0 && (wr = malloc(rb * m)))
                    for (int64_t g = 0; g < m; g += 16)
                        tq_r16_pack(t, w + (size_t)g * rb, k / 32, wr + (size_t)g * rb);
                job cfg[MAXCFG];
                int nc = 0;
                for (int i = 0; i < n_isa; i++) {
                    if (isa[i] == &r16) {
                        if (wr)
                            cfg[nc++] = (job){PATH_Q8, isa[i], mm, t, wr, rb, m, k, ntok, x, a, y, pk};
                        continue;
                    }
                    for (int p = PATH_Q8; p <= PATH_F32 && isa[i]->mv_q8[t] && !q8only; p++)
                        cfg[nc++] = (job){p, isa[i], mm, t, w, rb, m, k, ntok, x, a, y, pk};
                    if (q8only && isa[i]->mv_q8[t] && i > 0)
                        cfg[nc++] = (job){PATH_Q8, isa[i], mm, t, w, rb, m, k, ntok, x, a, y, pk};
                    if (isa[i]->gemm_q8[t])
                        cfg[nc++] = (job){PATH_GEMM, isa[i], mm, t, w, rb, m, k, ntok, x, a, y, pk};
                }
                cfg[nc++] = (job){PATH_BF16, NULL, mm, t, wb, 0, m, k, ntok, x, a, y, pk};
                double *ts = malloc(sizeof(double) * reps * nc);
                double *tc = malloc(sizeof(double) * reps * nc);
                for (int r = -1; r < reps; r++) { /* round -1 warms up */
                    for (int c = 0; c < nc; c++) {
                        const uint64_t t0 = tq_now_ns();
                        const uint64_t c0 = cpu_ns();
                        if (cfg[c].path == PATH_Q8 || cfg[c].path == PATH_GEMM)
                            cfg[c].K->quant[t](x, a, k * ntok);
                        if (cfg[c].path == PATH_GEMM)
                            for (int64_t q = 0; q < ntok; q++)
                                tq_q8p_pack((const tq_q8a *)a + q * (k / 32), k / 32,
                                            (tq_q8p *)pk + q / TQ_Q8P_T * (k / 32),
                                            (int)(q % TQ_Q8P_T));
                        tq_pool_run(pool, run_job, &cfg[c]);
                        const uint64_t c1 = cpu_ns();
                        const uint64_t t1 = tq_now_ns();
                        if (r >= 0) {
                            ts[c * reps + r] = (double)(t1 - t0) * 1e-3;
                            tc[c * reps + r] = (double)(c1 - c0) * 1e-3;
                        }
                    }
                }
                double med[MAXCFG];
                double medc[MAXCFG];
                for (int c = 0; c < nc; c++) {
                    qsort(ts + c * reps, reps, sizeof(double), cmp_d);
                    qsort(tc + c * reps, reps, sizeof(double), cmp_d);
                    med[c] = ts[c * reps + reps / 2];
                    medc[c] = tc[c * reps + reps / 2];
                }
                for (int c = 0; c < nc; c++) {
                    const int is_bf16 = cfg[c].path == PATH_BF16;
                    if (is_bf16 && f + 1 < sizeof(fmts) / sizeof(fmts[0]))
                        continue; /* print the bf16 row once per shape and thread count */
                    /* (the last format's round; every row's x bf16 uses its own round) */
                    const double bytes = is_bf16 ? 2.0 * m * k : (double)rb * m;
                    char shape[32];
                    snprintf(shape, sizeof(shape), "%lldx%lld", (long long)m, (long long)k);
                    static const char *act[] = {"q8", "f32", "f32", "q8p"};
                    printf("%-11s %3d %-5s %-6s %-4s %10.1f %8.2f %8.2f %10.1f %8.2f %8.2f\n",
                           shape, threads[ti], is_bf16 ? "BF16" : tq_ggml_type_name(t),
                           is_bf16 ? mm->name : cfg[c].K->isa, act[cfg[c].path], med[c],
                           bytes / (med[c] * 1e3), med[nc - 1] / med[c], medc[c],
                           bytes / (medc[c] * 1e3), medc[nc - 1] / medc[c]);
                }
                free(ts);
                free(tc);
                free(w);
                free(wr);
            }
            tq_pool_free(pool);
        }
        free(x);
        free(y);
        free(a);
        free(pk);
        free(wb);
    }
    return 0;
}
