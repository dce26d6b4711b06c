/* kv_internal.h -- the KV codec module's internals below the public API: the rotated block
 * codes (rot: schemes, src/kv/kv_rot.c) and the one-row functions of any scheme (src/kv/kv_row.c).
 * The turbo and kv8/kv4 codecs themselves (tables, layouts, scalar references) are in
 * common/kv_codec.h, included here, so that the kernels below (cpu/, cuda/) can use them.
 *
 * Stability: names here are kept once committed; new things are added, nothing is renamed. */
#ifndef TQ_KV_INTERNAL_H
#define TQ_KV_INTERNAL_H

#include "common/kv_codec.h"

#ifdef __cplusplus
extern "C" { /* also included by CUDA sources */
#endif

/* ---- rotated block codes (TQ_KV_ROT, src/kv/kv_rot.c) -------------------------------------
 * Row = head_dim/32 blocks of the K (or V) tq_kv_code, in the rotated domain, element order.
 * Rotation: plain orthonormal Hadamard; K over tq_kv_rot_size(0, d) (largest power of two >= 64
 * dividing d), V over 64-slices (llama.cpp's choice). */
int tq_kv_rot_size(int is_v, int d);
/* tq_kv_rot_apply() -- in place, the K (is_v 0) or V rotation; its own inverse up to rounding */
void tq_kv_rot_apply(float *u, int d, int is_v);
/* tq_kv_code_ok()/tq_kv_code_name()/tq_kv_code_from_name() -- code ids (0 = not a code) */
int tq_kv_code_ok(int code);
const char *tq_kv_code_name(int code);
int tq_kv_code_from_name(const char *s, size_t len);
/* tq_kv_rot_dim_ok() -- head_dim a multiple of 64 up to TQ_KV_MAX_HEAD_DIM */
int tq_kv_rot_dim_ok(int d);
size_t tq_kv_rot_row_bytes(int code, int d);
void tq_kv_rot_encode_row_ref(int code, int is_v, const float *x, int d, uint8_t *dst);
/* tq_kv_rot_encode_row() -- the bytes of tq_kv_rot_encode_row_ref() with the vector kernels of
 * kk (cpu/kv_cpu.h: its fwht and enc_lm; NULL or missing entries: the reference's);
 * tq_kv_rot_apply_k() -- tq_kv_rot_apply() likewise (the same floats) */
struct tq_kv_kernels;
void tq_kv_rot_encode_row(const struct tq_kv_kernels *kk, int code, int is_v, const float *x,
                          int d, uint8_t *dst);
void tq_kv_rot_apply_k(const struct tq_kv_kernels *kk, float *u, int d, int is_v);
void tq_kv_rot_decode_row_ref(int code, int is_v, const uint8_t *src, int d, float *out);
/* tq_kv_rot_decode_rotated_row_ref() -- dequantize only (rotated domain) */
void tq_kv_rot_decode_rotated_row_ref(int code, const uint8_t *src, int d, float *out);
/* our codes "l<L>g<G>" (code id TQ_KV_CODE_LM + table index; kv_rot.c describes the block):
 * L levels (grid sorted, top = +1; bnd = the L-1 float32 midpoints), group G in {32, 64}. */
typedef struct tq_kv_lm_code {
    const char *name;
    int levels, group;
    const float *grid, *bnd;
} tq_kv_lm_code;
extern const tq_kv_lm_code tq_kv_lm_codes[]; /* src/kv/kv_rot_tables.c (generated) */
extern const int tq_kv_lm_n_codes;
size_t tq_kv_lm_block_bytes(const tq_kv_lm_code *c);
void tq_kv_lm_encode_block_ref(const tq_kv_lm_code *c, const float *x, uint8_t *b);
void tq_kv_lm_decode_block_ref(const tq_kv_lm_code *c, const uint8_t *b, float *y);
/* the iq4_nl grid (16 sorted int8) and ggml's nearest-index rule over it */
const int8_t *tq_kv_iq4nl_values(void);
int tq_kv_iq4nl_index(float x);

/* ---- the safe encoding of constant key groups (tq_kv_enc_mode, kv.h) ------------------------ */
/* tq_kv_turbo_k_safe_row() -- rewrite, in place, the groups of an encoded turbo K row (kb bits)
 * whose fp16 zero is not finite while every input x of the group is; returns how many. */
int64_t tq_kv_turbo_k_safe_row(const float *x, int d, int kb, uint8_t *row);

/* ---- any scheme, one row ---------------------------------------------------------------------- */
/* tq_kv_encode_row_ref() -- encode one fp32 row as K (is_v = 0) or V (is_v = 1) of scheme s.
 * The caller has validated (s, d) with tq_kv_check(). */
void tq_kv_encode_row_ref(tq_kv_scheme s, int is_v, const float *x, int d, uint8_t *dst);
void tq_kv_decode_row_ref(tq_kv_scheme s, int is_v, const uint8_t *src, int d, float *out);
/* tq_kv_row_bytes1() -- bytes of one K (is_v = 0) or V row; 0 if (s, d) is invalid. */
size_t tq_kv_row_bytes1(tq_kv_scheme s, int is_v, int d);

#ifdef __cplusplus
}
#endif
#endif /* TQ_KV_INTERNAL_H */
