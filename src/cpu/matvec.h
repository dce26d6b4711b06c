/* matvec.h -- weight-matrix products of the forward pass (internal).
 *
 * One operation covers decode (n = 1, a matrix-vector product) and prefill (n > 1, a GEMM):
 *     y[t * ldy + r] = sum_j W[r * k + j] * x[t * ldx + j]     for r in [r0, r1), t in [0, n)
 * W has shape (m, k), row-major, elements of the weight dtype (f32, f16 or bf16); x and y are
 * f32. A kernel computes the rows [r0, r1) only, so threads split output rows and every output
 * element is produced by one thread in a fixed order: results are identical for any thread
 * count. The scalar kernels (matvec.c) are the specification: sequential f32 sums.
 *
 * Batch invariance: each kernel computes y[t, r] with one reduction order that depends on k
 * only, never on n, on the token's place among the n, on r0/r1 or on which micro-kernel (decode
 * 4 rows x 1 token, prefill register tiles) it falls in: one f32 accumulator vector per (token,
 * row) fed in column order, reduced by a fixed horizontal sum, then the k % width tail in
 * scalar order. So the logits of a token do not depend on how many tokens share its forward call
 * (tests/test_batch_invariance.c). OpenBLAS sgemm does not keep this (batch_invariant = 0) and
 * is used only when asked for (tq_mm_opts.openblas).
 *
 * Kernel tables, one per ISA file: matvec.c (scalar), matvec_avx2.c, matvec_avx512.c,
 * matvec_avx512bf16.c (vdpbf16ps: x is rounded to bf16 first, so it is the only kernel that is
 * not exact in f32 arithmetic; it is used only when asked for, see tq_mm_select()).
 */
#ifndef TQ_MATVEC_H
#define TQ_MATVEC_H

#include "core/core.h"

/* One kernel: rows [r0, r1) of y for n tokens. xb is x rounded to bf16 with the same layout
 * (ldx); only kernels with needs_xb read it (others get NULL). */
typedef void (*tq_mm_fn)(const void *w, int64_t k, const float *x, const uint16_t *xb,
                         int64_t ldx, int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1);

typedef struct tq_mm_kernels {
    const char *name;               /* "scalar", "avx2", "avx512", "avx512bf16"            */
    tq_mm_fn mm[TQ_DTYPE_COUNT];    /* per weight dtype; NULL = not provided               */
    int needs_xb;                   /* 1 if the kernels read the bf16 copy of x             */
    int batch_invariant;            /* 1: n tokens at once give the bits of n calls of one  */
} tq_mm_kernels;

/* Tables (NULL when this build or CPU cannot run them). */
const tq_mm_kernels *tq_mm_scalar(void);
const tq_mm_kernels *tq_mm_avx2(void);
const tq_mm_kernels *tq_mm_avx512(void);
const tq_mm_kernels *tq_mm_avx512bf16(void);
/* OpenBLAS cblas_sgemm (f32 weights only), single-threaded inside each of our threads. */
const tq_mm_kernels *tq_mm_openblas(void);

/* tq_mm_all() -- every table this CPU can run, scalar first (for tests). Returns the count. */
int tq_mm_all(const tq_mm_kernels **out, int cap);

/* A chosen kernel for one weight dtype. */
typedef struct tq_mm {
    tq_mm_fn fn;          /* every n (decode), and n < gemm_min_n                       */
    const char *name;
    int needs_xb;         /* fn reads the bf16 copy of x                                */
    tq_dtype wtype;
    tq_mm_fn gemm;        /* n >= gemm_min_n (prefill); == fn unless OpenBLAS is chosen */
    const char *gemm_name;
    int64_t gemm_min_n;
    int64_t gemm_blk;     /* rows per thread-split unit of gemm (fn: 16); OpenBLAS is called
                           * once per unit, so every call has the same shape whatever the
                           * thread count and the result does not depend on it */
} tq_mm;

/* Kernel options (the tool fills them from --flags / TQ_MATVEC / TQ_GEMM; the library reads no
 * environment here). All zero = the defaults. */
typedef struct tq_mm_opts {
    int bf16_act; /* 1: the bf16-activation kernel for bf16 weights (TQ_MATVEC=avx512bf16)  */
    int openblas; /* 1: OpenBLAS sgemm for f32-weight prefill (TQ_GEMM=openblas)            */
} tq_mm_opts;

/* tq_mm_select() -- the kernel for weight dtype wt on this CPU, honouring TQ_CPU (scalar, avx2,
 * avx512). opts may be NULL (defaults). The bf16-activation kernel (avx512bf16) is taken for
 * bf16 weights only when opts->bf16_act (it rounds activations to bf16). Every default choice is
 * batch-invariant. opts->openblas takes OpenBLAS sgemm for f32 weights and n >= 16 tokens
 * (prefill; measured 1.7x our kernel with an AVX2/AVX-512 OpenBLAS core), which is NOT
 * batch-invariant: a token's logits then depend on how the prompt was split into calls (a
 * warning is logged when OpenBLAS cannot be used or runs its slow generic core); the default
 * keeps our kernels. Returns TQ_E_UNSUPPORTED for an invalid dtype. */
tq_status tq_mm_select(tq_dtype wt, const tq_mm_opts *opts, tq_mm *out);

/* A product over a thread pool: y(n, m) = x(n, k) * W(m, k)^T. xb may be NULL unless
 * mm->needs_xb (then it must hold x rounded to bf16, see tq_mm_round_x()). */
void tq_mm_run(const tq_mm *mm, tq_pool *pool, const void *w, int64_t m, int64_t k,
               const float *x, const uint16_t *xb, int64_t ldx, int64_t n, float *y, int64_t ldy);

/* One output of tq_mm_run_multi(): y(n, m) = x W^T with W (m, k). */
typedef struct tq_mm_out {
    const void *w;
    int64_t m;
    float *y;
    int64_t ldy;
} tq_mm_out;

/* tq_mm_run_multi() -- several products of the same input x (q/k/v, gate/up) in ONE pool job:
 * every thread takes its row share of each matrix. Same bytes as separate tq_mm_run() calls. */
void tq_mm_run_multi(const tq_mm *mm, tq_pool *pool, const tq_mm_out *outs, int n_out, int64_t k,
                     const float *x, const uint16_t *xb, int64_t ldx, int64_t n);

/* tq_mm_round_x() -- xb[i] = bf16(x[i]) for n rows of k (leading dimension ldx). */
void tq_mm_round_x(const float *x, int64_t ldx, int64_t n, int64_t k, uint16_t *xb);

/* tq_attn_row_avx512() -- one query row of f32 attention over n_keys K/V rows (stride hd, a
 * multiple of 16): out = softmax(scale q K^T) V; sc holds n_keys scores (scratch). The portable
 * version and the choice are in src/model/kvcache.c. */
void tq_attn_row_avx512(const float *q, const float *K, const float *V, int64_t n_keys, int hd,
                        float scale, float *sc, float *out);
/* tq_attn_transpose_avx512() -- Kt (hd, ldt) = K(n_win, hd)^T, columns n_win..ldt zeroed;
 * ldt is a multiple of 64 >= n_win. tq_attn_row_t_avx512() -- the same row as
 * tq_attn_row_avx512() with scores from Kt (sc must hold n_keys rounded up to 64). */
/* tq_attn_widen_avx512() -- dst[i] = f32 of n f16 (is_f16) or bf16 values (exact). */
void tq_attn_widen_avx512(const uint16_t *src, int64_t n, int is_f16, float *dst);
void tq_attn_transpose_avx512(const float *K, int64_t n_win, int hd, float *Kt, int64_t ldt);
void tq_attn_row_t_avx512(const float *q, const float *Kt, int64_t ldt, const float *V,
                          int64_t n_keys, int hd, float scale, float *sc, float *out);

#endif /* TQ_MATVEC_H */
