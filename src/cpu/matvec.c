/* matvec.c -- scalar weight-matrix products (the specification for every ISA variant), kernel
 * selection, and the threaded driver. See matvec.h for the operation. */
#include <pthread.h>
#include <string.h>
#ifdef TQ_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "core/half.h"
#include "cpu/matvec.h"

static void mm_f32(const void *w, int64_t k, const float *x, const uint16_t *xb, int64_t ldx,
                   int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    const float *W = w;
    for (int64_t r = r0; r < r1; r++) {
        const float *wr = W + r * k;
        for (int64_t t = 0; t < n; t++) {
            const float *xt = x + t * ldx;
            float s = 0.0f;
            for (int64_t j = 0; j < k; j++)
                s += wr[j] * xt[j];
            y[t * ldy + r] = s;
        }
    }
}

static void mm_f16(const void *w, int64_t k, const float *x, const uint16_t *xb, int64_t ldx,
                   int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    const uint16_t *W = w;
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *wr = W + r * k;
        for (int64_t t = 0; t < n; t++) {
            const float *xt = x + t * ldx;
            float s = 0.0f;
            for (int64_t j = 0; j < k; j++)
                s += tq_f16_to_f32(wr[j]) * xt[j];
            y[t * ldy + r] = s;
        }
    }
}

static void mm_bf16(const void *w, int64_t k, const float *x, const uint16_t *xb, int64_t ldx,
                    int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    const uint16_t *W = w;
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *wr = W + r * k;
        for (int64_t t = 0; t < n; t++) {
            const float *xt = x + t * ldx;
            float s = 0.0f;
            for (int64_t j = 0; j < k; j++)
                s += tq_bits_f32((uint32_t)wr[j] << 16) * xt[j];
            y[t * ldy + r] = s;
        }
    }
}

static const tq_mm_kernels scalar_table = {
    .name = "scalar",
    .mm = {[TQ_DTYPE_F32] = mm_f32, [TQ_DTYPE_F16] = mm_f16, [TQ_DTYPE_BF16] = mm_bf16},
    .needs_xb = 0,
    .batch_invariant = 1,
};

const tq_mm_kernels *tq_mm_scalar(void)
{
    return &scalar_table;
}

/* Rows per thread-split unit: 16 for our kernels (they keep their row unrolling), BLAS_BLK for
 * OpenBLAS (below). */
#define MM_BLK 16
#define BLAS_BLK 64

#ifdef TQ_HAVE_OPENBLAS
/* OpenBLAS sgemm on the thread's row slice: Y[:, r0:r1] = X W[r0:r1]^T, one call per
 * BLAS_BLK-row block (slices are whole blocks, tq_mm.gemm_blk): OpenBLAS rounds differently
 * depending on a row's place in the matrix it is given (edge tiles), so calls of a fixed shape
 * keep the result independent of the thread count. Our pool splits the rows, so OpenBLAS itself
 * must run single-threaded (its own threads would fight our pool for the same cores): set once,
 * process-wide. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single(void)
{
    openblas_set_num_threads(1);
}

static void mm_blas_f32(const void *w, int64_t k, const float *x, const uint16_t *xb, int64_t ldx,
                        int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    pthread_once(&blas_once, blas_single);
    for (int64_t b = r0; b < r1; b += BLAS_BLK) {
        const int64_t e = b + BLAS_BLK < r1 ? b + BLAS_BLK : r1;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)(e - b),
                    (blasint)k, 1.0f, x, (blasint)ldx, (const float *)w + b * k, (blasint)k,
                    0.0f, y + b, (blasint)ldy);
    }
}

static const tq_mm_kernels blas_table = {
    .name = "openblas",
    .mm = {[TQ_DTYPE_F32] = mm_blas_f32},
    .needs_xb = 0,
    .batch_invariant = 0, /* its tiling follows the call's shape (n) */
};
#endif

static const char *blas_core_name(void)
{
#ifdef TQ_HAVE_OPENBLAS
    const char *core = openblas_get_corename();
    return core ? core : "(unknown)";
#else
    return "(none)";
#endif
}

/* 1 if OpenBLAS runs a core with AVX2/AVX-512 kernels (not its generic fallback) */
static int blas_core_fast(void)
{
#ifdef TQ_HAVE_OPENBLAS
    static const char *fast[] = {"Haswell", "Skylake", "Cooperlake", "Sapphire", "Zen"};
    const char *core = openblas_get_corename();
    for (size_t i = 0; core && i < sizeof(fast) / sizeof(fast[0]); i++)
        if (strstr(core, fast[i]))
            return 1;
#endif
    return 0;
}

const tq_mm_kernels *tq_mm_openblas(void)
{
#ifdef TQ_HAVE_OPENBLAS
    return &blas_table;
#else
    return NULL;
#endif
}

static int has_bf16_dot(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return tq_cpu_supports(TQ_ISA_AVX512) && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

int tq_mm_all(const tq_mm_kernels **out, int cap)
{
    int n = 0;
    if (n < cap)
        out[n++] = tq_mm_scalar();
    if (tq_cpu_supports(TQ_ISA_AVX2) && tq_mm_avx2() && n < cap)
        out[n++] = tq_mm_avx2();
    if (tq_cpu_supports(TQ_ISA_AVX512) && tq_mm_avx512() && n < cap)
        out[n++] = tq_mm_avx512();
    if (has_bf16_dot() && tq_mm_avx512bf16() && n < cap)
        out[n++] = tq_mm_avx512bf16();
    if (tq_mm_openblas() && n < cap)
        out[n++] = tq_mm_openblas();
    return n;
}

tq_status tq_mm_select(tq_dtype wt, const tq_mm_opts *opts, tq_mm *out)
{
    const tq_mm_opts none = {0};
    if (!opts)
        opts = &none;
    if ((unsigned)wt >= TQ_DTYPE_COUNT)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "weight dtype %d: valid are f32, f16, bf16", (int)wt);
    const tq_mm_kernels *t = tq_mm_scalar();
    const tq_isa isa = tq_cpu_isa();
    if (isa >= TQ_ISA_AVX2 && tq_mm_avx2() && tq_mm_avx2()->mm[wt])
        t = tq_mm_avx2();
    if (isa >= TQ_ISA_AVX512 && tq_mm_avx512() && tq_mm_avx512()->mm[wt])
        t = tq_mm_avx512();
    if (opts->bf16_act && wt == TQ_DTYPE_BF16 && isa >= TQ_ISA_AVX512 &&
        has_bf16_dot() && tq_mm_avx512bf16())
        t = tq_mm_avx512bf16();
    out->fn = t->mm[wt];
    out->name = t->name;
    out->needs_xb = t->needs_xb;
    out->wtype = wt;
    out->gemm = out->fn;
    out->gemm_name = out->name;
    out->gemm_min_n = INT64_MAX;
    out->gemm_blk = MM_BLK;
    /* OpenBLAS only on request: its result for a token depends on how many tokens share the
     * call (its tiles and edge handling follow the matrix shape), so it is not batch-invariant */
    const int want_blas = opts->openblas;
    if (want_blas && (wt != TQ_DTYPE_F32 || !tq_mm_openblas() || isa < TQ_ISA_AVX2))
        tq_log(wt == TQ_DTYPE_F32 ? TQ_LOG_WARN : TQ_LOG_INFO, "openblas gemm: not used (%s "
               "weights, OpenBLAS %s, cpu %s); it needs f32 weights, a build with OpenBLAS and "
               "AVX2", tq_dtype_name(wt), tq_mm_openblas() ? "built in" : "not built in",
               tq_isa_name(isa));
    else if (want_blas && !blas_core_fast())
        tq_log(TQ_LOG_WARN, "openblas gemm: OpenBLAS runs its generic core %s here (slower "
               "than our kernel); set OPENBLAS_CORETYPE=Haswell or SkylakeX", blas_core_name());
    if (wt == TQ_DTYPE_F32 && tq_mm_openblas() && isa >= TQ_ISA_AVX2 && want_blas &&
        !out->needs_xb) {
        out->gemm = tq_mm_openblas()->mm[wt];
        out->gemm_name = tq_mm_openblas()->name;
        out->gemm_min_n = 16;
        out->gemm_blk = BLAS_BLK;
    }
    return TQ_OK;
}

void tq_mm_round_x(const float *x, int64_t ldx, int64_t n, int64_t k, uint16_t *xb)
{
    for (int64_t t = 0; t < n; t++)
        for (int64_t j = 0; j < k; j++) {
            const uint32_t u = tq_f32_bits(x[t * ldx + j]);
            /* round to nearest even; NaN stays NaN (quiet bit kept) */
            xb[t * ldx + j] = (u & 0x7fffffffu) > 0x7f800000u
                                  ? (uint16_t)((u >> 16) | 0x40u)
                                  : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        }
}

typedef struct mm_multi_job {
    tq_mm_fn fn;
    int64_t blk; /* rows per split unit */
    const tq_mm_out *outs;
    int n_out;
    int64_t k, ldx, n;
    const float *x;
    const uint16_t *xb;
} mm_multi_job;

static void mm_multi_task(void *ctx, int ith, int nth)
{
    const mm_multi_job *j = ctx;
    for (int o = 0; o < j->n_out; o++) {
        const tq_mm_out *q = &j->outs[o];
        const int64_t nblk = (q->m + j->blk - 1) / j->blk;
        int64_t b0, b1;
        tq_split_range(nblk, ith, nth, &b0, &b1);
        int64_t r0 = b0 * j->blk, r1 = b1 * j->blk;
        if (r1 > q->m)
            r1 = q->m;
        if (r0 < r1)
            j->fn(q->w, j->k, j->x, j->xb, j->ldx, j->n, q->y, q->ldy, r0, r1);
    }
}

void tq_mm_run_multi(const tq_mm *mm, tq_pool *pool, const tq_mm_out *outs, int n_out, int64_t k,
                     const float *x, const uint16_t *xb, int64_t ldx, int64_t n)
{
    const int g = n >= mm->gemm_min_n;
    mm_multi_job j = {.fn = g ? mm->gemm : mm->fn, .blk = g ? mm->gemm_blk : MM_BLK, .outs = outs,
                      .n_out = n_out, .k = k, .ldx = ldx, .n = n, .x = x,
                      .xb = mm->needs_xb ? xb : NULL};
    int64_t work = 0;
    for (int o = 0; o < n_out; o++)
        work += outs[o].m * k * n;
    if (work < 16384 || tq_pool_size(pool) == 1)
        mm_multi_task(&j, 0, 1);
    else
        tq_pool_run(pool, mm_multi_task, &j);
}

typedef struct mm_job {
    tq_mm_fn fn;
    int64_t blk; /* rows per split unit */
    const void *w;
    int64_t m, k, ldx, n, ldy;
    const float *x;
    const uint16_t *xb;
    float *y;
} mm_job;

static void mm_task(void *ctx, int ith, int nth)
{
    const mm_job *j = ctx;
    /* split in units of j->blk rows (MM_BLK / BLAS_BLK) */
    const int64_t nblk = (j->m + j->blk - 1) / j->blk;
    int64_t b0, b1;
    tq_split_range(nblk, ith, nth, &b0, &b1);
    int64_t r0 = b0 * j->blk, r1 = b1 * j->blk;
    if (r1 > j->m)
        r1 = j->m;
    if (r0 < r1)
        j->fn(j->w, j->k, j->x, j->xb, j->ldx, j->n, j->y, j->ldy, r0, r1);
}

void tq_mm_run(const tq_mm *mm, tq_pool *pool, const void *w, int64_t m, int64_t k,
               const float *x, const uint16_t *xb, int64_t ldx, int64_t n, float *y, int64_t ldy)
{
    const int g = n >= mm->gemm_min_n;
    mm_job j = {.fn = g ? mm->gemm : mm->fn, .blk = g ? mm->gemm_blk : MM_BLK, .w = w, .m = m, .k = k,
                .ldx = ldx, .n = n, .ldy = ldy, .x = x, .xb = mm->needs_xb ? xb : NULL, .y = y};
    if (m * k * n < 16384 || tq_pool_size(pool) == 1)
        mm_task(&j, 0, 1);
    else
        tq_pool_run(pool, mm_task, &j);
}
