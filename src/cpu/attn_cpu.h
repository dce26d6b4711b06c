/* attn_cpu.h -- per-ISA kernels of the window attention of src/model/kvcache.c (internal).
 * The AVX-512 ones are declared in cpu/matvec.h (tq_attn_row_avx512 and friends). */
#ifndef TQ_ATTN_CPU_H
#define TQ_ATTN_CPU_H

#include <stdint.h>

/* storage of the K/V rows a window kernel reads in place */
typedef enum tq_attn_rows { TQ_ATTN_F32 = 0, TQ_ATTN_F16 = 1, TQ_ATTN_BF16 = 2 } tq_attn_rows;

/* tq_attn_heads_avx2() -- G query heads of one query position against one kv-head's window:
 *     out[h] = softmax(scale * q[h] K^T) V      over n_keys >= 1 rows of K and V
 * q and out are G x hd floats (head h at h * hd); K and V are n_keys rows of hd elements stored
 * as `rows` (f16/bf16 are widened in registers, exactly); sc is scratch of G * ldsc floats with
 * ldsc > n_keys rounded up to 8 (the last float of each head's row holds its 1/sum). hd must be
 * a multiple of 8.
 * Every (head, key) score, the softmax and the weighted sum are fixed functions of that head's
 * q and the window -- not of G, of the other heads or of the caller's blocking -- so a query row
 * gets the same floats alone (decode) or inside a block of rows (prefill). Float throughout:
 * scores by 8-lane FMA chains and a fixed tree, exp by a polynomial (|rel err| < 2e-7), sums in
 * key order (8 lanes), V accumulated by FMA in key order, times 1/sum. */
void tq_attn_heads_avx2(const float *q, int G, const void *K, const void *V, tq_attn_rows rows,
                        int64_t n_keys, int hd, float scale, float *sc, int64_t ldsc, float *out);

/* Blocked prefill attention: nq consecutive query positions x G query heads of one kv-head
 * against the same K/V rows, each K/V row loaded (and widened) once per block instead of once
 * per query row. Query i (0 <= i < nq) sees keys [0, n0 + i) of K and V (n0 >= 1: causal, one
 * window origin for the block); its head h is q[i * ldq + h * hd ..] and goes to
 * out[i * ldo + h * hd ..]. sc is scratch of nq * G rows of ldsc floats, ldsc > n0 + nq - 1
 * rounded up to 8.
 * CONTRACT (batch invariance): every row's floats equal that row computed alone by the ISA's
 * decode kernel -- tq_attn_heads_avx2() with the same rows kind, tq_attn_row_avx512() over f32
 * rows -- bit for bit: the same FMA chains, trees, exp polynomial and key-order sums; the block
 * only changes the loop order (keys outside, rows inside) and shares loads.
 * tq_attn_block_avx2(): f32/f16/bf16 rows read in place, hd a multiple of 8.
 * tq_attn_block_avx512(): f32 rows (the caller widens f16/bf16 once per window), hd a multiple
 * of 16. */
void tq_attn_block_avx2(const float *q, int64_t ldq, int nq, int G, const void *K, const void *V,
                        tq_attn_rows rows, int64_t n0, int hd, float scale, float *sc,
                        int64_t ldsc, float *out, int64_t ldo);
void tq_attn_block_avx512(const float *q, int64_t ldq, int nq, int G, const float *K,
                          const float *V, int64_t n0, int hd, float scale, float *sc,
                          int64_t ldsc, float *out, int64_t ldo);

#endif /* TQ_ATTN_CPU_H */
