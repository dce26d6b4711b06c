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

#endif /* TQ_ATTN_CPU_H */
