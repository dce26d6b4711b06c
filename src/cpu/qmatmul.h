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
 * Threads split rows in units of 16 per output.
 * Layout: a matrix is either the file's rows or (q->r16) the r16 groups of cpu/qdot_r16.h; an r16
 * matrix runs decode (n <= 7 tokens, QMM_R16_MAX_N) on the r16 kernel and every other kernel on an
 * unpacked view (16-row groups back to the file layout on the stack, per call) -- the same bits. */
#ifndef TQ_QMATMUL_H
#define TQ_QMATMUL_H

#include "common/formats.h"

typedef struct tq_qmat {
    const void *w;          /* rows * row_bytes bytes                        */
    const tq_format *f;     /* its row of the format table (kernels filled)  */
    int64_t rows, cols;
    size_t row_bytes;
    int r16;                /* 1: the r16 layout of cpu/qdot_r16.h (tq_qmm_r16_pack()), 0: the
                               file's rows                                       */
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

/* tq_qmm_r16_ok() -- 1 if q (file layout) would run decode from the r16 layout here: a Q4_0 /
 * Q4_1 / Q8_0 matrix of rows % 16 == 0 and 16 rows <= TQ_R16_MAX_GROUP bytes, on the q8 path,
 * with this CPU's r16 kernel (AVX512-VNNI). */
int tq_qmm_r16_ok(const tq_qmat *q, int act_f32);
#define TQ_QMM_R16_ROW_MAX 4096 /* the widest row (bytes) of an r16 matrix */
/* tq_qmm_r16_pack() -- rearrange q's bytes in place into the r16 layout (q->r16 = 1; needs
 * tq_qmm_r16_ok()). One resident copy: the same bytes, the same size. Returns 0, or -1 (left
 * as it was) if not ok. */
int tq_qmm_r16_pack(tq_qmat *q, int act_f32);
/* tq_qmm_file_rows() -- rows [r0, r1) of q in the file layout into dst ((r1 - r0) row_bytes;
 * r0, r1 multiples of 16 for an r16 matrix, or any for a file-layout one). */
void tq_qmm_file_rows(const tq_qmat *q, int64_t r0, int64_t r1, void *dst);
/* tq_qmm_file_row() -- row r of q in the file layout: a pointer into q, or dst (row_bytes) filled
 * from the r16 layout. */
const void *tq_qmm_file_row(const tq_qmat *q, int64_t r, void *dst);
/* tq_qmm_layout_name() -- "r16" or "file". */
const char *tq_qmm_layout_name(const tq_qmat *q);

/* tq_qmm_run() -- every output of the same x (n tokens of k = W->cols floats, ldx apart) in one
 * pool job. act_a/act_k: scratch of tq_qmm_act_bytes() (unused ones may be NULL). */
void tq_qmm_run(tq_pool *pool, const tq_qmm_out *outs, int n_out, const float *x, int64_t ldx,
                int64_t n, int act_f32, void *act_a, void *act_k);

#endif /* TQ_QMATMUL_H */
