/* qmatmul.h -- products with weights kept in their block format (issue 14): the threaded driver
 * over the format table's kernels (common/formats.h). Plain views only: a matrix is a pointer,
 * its format row, its shape and its row stride in bytes.
 *
 *   y[t * ldy + r] = row r of W . token t of x        r in [0, rows), t in [0, n)
 *
 * Paths per format (tq_qmm_path()): Q8 -- x quantized once per call and token to int8 blocks
 * (tq_q8a / tq_q8k, cpu/qdot.h) and the format's mv_q8 kernel (from 16 tokens, where the format
 * has one, its gemm_q8 prefill tile over the same blocks packed as tq_q8p; the same bits); F32 -- the format's mv_f32
 * kernel (exact f32 activations); DEQUANT -- a format with only a dequantizer (a new row of the
 * table without kernels yet): each block is decoded on the stack and met with x in f32 (lanes
 * j % 32, fmaf). Each (row, token) result has one reduction order that depends on k only, never
 * on n or the thread split: prefill gives the bits of token-by-token decode (batch invariance).
 * Threads split rows in units of 16 per output. */
#ifndef TQ_QMATMUL_H
#define TQ_QMATMUL_H

#include "common/formats.h"

typedef struct tq_qmat {
    const void *w;          /* rows * row_bytes bytes                        */
    const tq_format *f;     /* its row of the format table (kernels filled)  */
    int64_t rows, cols;
    size_t row_bytes;
} tq_qmat;

typedef struct tq_qmm_out {
    const tq_qmat *W;
    float *y;
    int64_t ldy;
} tq_qmm_out;

typedef enum tq_qpath { TQ_QPATH_NONE = 0, TQ_QPATH_Q8, TQ_QPATH_F32, TQ_QPATH_DEQUANT } tq_qpath;

/* tq_qmm_path() -- the path format f takes with f32 (act_f32 = 1) or q8 activations; NONE if
 * f cannot run (no dequantizer, or a block over 256 elements without kernels). */
tq_qpath tq_qmm_path(const tq_format *f, int act_f32);
/* tq_qmm_kernel_name() -- "q8 avx2", "f32 scalar", "dequant scalar" ... for messages. */
const char *tq_qmm_kernel_name(const tq_format *f, int act_f32, char *buf, size_t cap);

/* tq_qmm_act_bytes() -- scratch bytes of the q8 activations of n tokens of k values (both
 * kinds, for tq_qmm_run's act_a and act_k): *a for tq_q8a and their tq_q8p packing (0 if
 * k % 32; act_a must be 64-byte aligned), *kb for tq_q8k. */
void tq_qmm_act_bytes(int64_t k, int64_t n, size_t *a, size_t *kb);

/* tq_qmm_run() -- every output of the same x (n tokens of k = W->cols floats, ldx apart) in one
 * pool job. act_a/act_k: scratch of tq_qmm_act_bytes() (unused ones may be NULL). */
void tq_qmm_run(tq_pool *pool, const tq_qmm_out *outs, int n_out, const float *x, int64_t ldx,
                int64_t n, int act_f32, void *act_a, void *act_k);

#endif /* TQ_QMATMUL_H */
