/* quant_internal.h -- shared by src/quant/ (weights pipeline); not public. */
#ifndef TQ_QUANT_INTERNAL_H
#define TQ_QUANT_INTERNAL_H

#include "core/core.h"

/* fold.c: the rotation fold on f32 matrices (row-major, (rows, cols), HF layout (out, in)).
 * Every transform is v -> R^T v with R = diag(s) H^T / sqrt(n), evaluated in double
 * (tq_hadamard_apply_f64 forward, normalized), rounded once to f32. */
/* rows: optional gain on every column (w[r][c] *= gain[c]), then R1^T on each row (cols = n) */
tq_status tq_fold_rows(float *w, int64_t rows, int64_t cols, const float *gain,
                       const int8_t *signs);
/* columns: R1^T on each column (rows = n): a residual writer (o_proj, down_proj) */
tq_status tq_fold_cols(float *w, int64_t rows, int64_t cols, const int8_t *signs);
/* per head on the output rows: rows = heads * hd; each head's hd x cols block gets R2^T from
 * the left (v_proj weight; a bias is the cols = 1 case) */
tq_status tq_fold_head_rows(float *w, int64_t rows, int64_t cols, int hd, const int8_t *signs);
/* per head on the input columns: cols = heads * hd; every row's hd-segments get R2^T
 * (o_proj) */
tq_status tq_fold_head_cols(float *w, int64_t rows, int64_t cols, int hd, const int8_t *signs);

/* affine.c: MLX affine (uint32 LSB-first codes, f32 scale/bias per group of a row) */
int tq_affine_ok(int bits, int group);
tq_status tq_affine_quantize(const float *w, int64_t rows, int64_t cols, int bits, int group,
                             uint32_t *codes, float *scales, float *biases);
/* out = bf16(scale) * q + bf16(bias), as mlx-lm evaluates it */
void tq_affine_dequantize(const uint32_t *codes, const uint16_t *scales_bf16,
                          const uint16_t *biases_bf16, int64_t rows, int64_t cols, int bits,
                          int group, float *out);

/* quant_ggml.c: one 256-value super-block of Q4_K / Q5_K / Q6_K by the plain round-to-nearest
 * fit alone (sub-block min/max, no search): the baseline the searched quantizer of
 * tq_ggml_quantize() is tested against. -1 for any other type. */
int tq_ggml_quantize_k_rtn(int type, const float *x, uint8_t *block);
/* quant_ggml.c: one IQ4_NL block by the plain fit alone (the largest element at level -127,
 * nearest levels): the baseline the searched IQ4_NL quantizer is tested against. */
int tq_ggml_quantize_iq4_nl_plain(const float *x, uint8_t *block);
/* quant_ggml.c: as tq_ggml_quantize(), but Q4_0 Q5_0 Q4_1 Q5_1 search their block scale (and
 * offset) among candidates that include ggml's reference block: never a larger weighted error
 * per block (w = rms(block) + |x|) than tq_ggml_quantize(). Other types: tq_ggml_quantize(). */
tq_status tq_ggml_quantize_search(int type, const float *src, int64_t n, void *dst,
                                  size_t dst_cap);

#endif
