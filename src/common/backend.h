/* backend.h -- the operations of the one forward pass (src/model/forward.c), as a table that each
 * backend fills: the CPU (src/model/backend_cpu.c, glue over src/cpu/ kernels and the session's
 * KV cache) and CUDA (src/cuda/backend_cuda.cu, device buffers). forward.c describes every
 * architecture once and calls only these; a backend implements operations, not architectures.
 *
 * Views only: pointers in the backend's memory (host for the CPU, device for CUDA), sizes, a
 * dtype, and an opaque backend form of a matrix. Activations are f32, rows contiguous
 * (row t of a (n, width) buffer at t * width) unless an ld says otherwise. Every op is ordered
 * after the previous ones (CUDA: one stream); none allocates. Plain C, also read by C++ (only the
 * public header); common/ is below cpu/ and cuda/, so they can implement it without seeing
 * the engine. */
#ifndef TQ_BACKEND_H
#define TQ_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "turboquant.h"

/* One weight matrix (rows, cols), row-major: dense rows of dtype at w, or (native != NULL) the
 * backend's own form of it (CPU: a tq_qmat of block rows, used when its format is set; CUDA:
 * a tq_cuda_qmat of cuda/qgemv.h, packed rows in device memory). */
typedef struct tq_be_mat {
    const void *w;
    tq_dtype dtype;
    const void *native;
    int64_t rows, cols;
} tq_be_mat;

/* The input transform of a matmul (applied to x before the product):
 *   NONE: x as is;
 *   NORM: each row RMS-normalized with weight norm (eps, plus_one: (1 + w)) into xn, which is
 *         the product's input (x unchanged);
 *   SILU / GELU: x := act(x) * up elementwise (x overwritten; GELU = tanh approximation). */
enum { TQ_BE_PRE_NONE = 0, TQ_BE_PRE_NORM = 1, TQ_BE_PRE_SILU = 2, TQ_BE_PRE_GELU = 3 };

typedef struct tq_be_out {
    tq_be_mat w;
    float *y;        /* (n, ldy): y[t * ldy + r] = row r . input t */
    int64_t ldy;
} tq_be_out;

/* y_i(n, rows_i) = pre(x)(n, cols) W_i^T for every output i (one job: q/k/v, gate/up), then,
 * when res != NULL (one output only): res(n, rows) += post_norm ? rmsnorm(y) : y (the residual
 * add; y is then scratch whose content is unspecified afterwards). */
typedef struct tq_be_mm {
    float *x;
    int64_t cols, n;
    int pre;                /* TQ_BE_PRE_*                                   */
    const float *norm;      /* NORM: the (cols) weight                       */
    float eps;              /* NORM, post_norm                               */
    int plus_one;           /* NORM, post_norm: (1 + w)                      */
    float *xn;              /* NORM: (n, cols) normed rows                   */
    const float *up;        /* SILU/GELU: (n, cols)                          */
    int n_out;              /* 1..4                                          */
    tq_be_out out[4];
    float *res;             /* NULL or (n, out[0].w.rows)                    */
    const float *post_norm; /* NULL or (out[0].w.rows) norm of y before the add */
    int kv_first;           /* > 0: outputs kv_first.. are K / V rows that a KV cache's
                               codec encodes: a backend that rounds its inputs (CUDA: bf16)
                               may keep them exact there (0: none)            */
} tq_be_mm;

/* one sequence's part of attend_batch(): the arguments of attend() */
typedef struct tq_be_attn {
    void *kv;
    int64_t pos0, n;
    const float *k, *v, *q;
    float *out;
} tq_be_attn;

typedef struct tq_backend {
    const char *name;
    /* x(n, e->cols) = rows tok[0..n) of e (tok on the host, in range), times scale if != 1 */
    tq_status (*embed)(void *ctx, const tq_be_mat *e, const int32_t *tok, int n, float scale,
                       float *x);
    /* o(rows, width) = x / rms(x) * w per row (w NULL: no weight; o may be x) */
    void (*rmsnorm)(void *ctx, float *o, const float *x, const float *w, int64_t rows,
                    int width, float eps, int plus_one);
    tq_status (*matmul)(void *ctx, const tq_be_mm *a);
    /* y(n, width) += b per row */
    void (*bias)(void *ctx, float *y, const float *b, int64_t n, int width);
    /* rotate_half RoPE of q (n, nh * hd) and k (n, nkv * hd) in place, token t at position
     * pos0 + t, angle pos * inv_freq[i] on pairs (i, i + rd/2); cs: (n, rd) host scratch */
    void (*rope)(void *ctx, float *q, int nh, float *k, int nkv, int64_t n, int hd, int rd,
                 const float *inv_freq, int64_t pos0, float *cs);
    /* append k, v (n, n_kv_heads * hd) at positions [pos0, pos0 + n) of layer il of the cache
     * kv (the backend's cache handle), then out(n, nh * hd) = causal attention of q */
    tq_status (*attend)(void *ctx, void *kv, int il, int64_t pos0, const float *k, const float *v,
                        const float *q, int64_t n, float *out);
    /* y = c * tanh(y / c), n elements */
    void (*softcap)(void *ctx, float *y, int64_t n, float c);
    /* Optional (NULL: attend() per item): attend() of n items of layer il, each on its own
     * cache (distinct caches), in one go; every item's results equal its attend() alone */
    tq_status (*attend_batch)(void *ctx, int il, const tq_be_attn *it, int n);
} tq_backend;

#endif /* TQ_BACKEND_H */
