/* hadamard.h -- fast Walsh-Hadamard transform for n = K * 2^m (internal API of src/common/).
 *
 * The matrix. For n = K * 2^m with K from the table below (K = 1 for a power of two), x is seen
 * row-major as X[K][M], M = 2^m, and the transform is
 *     y = (H_K (x) H_M) x,   i.e.  Y = H_K X H_M,
 * H_M the Sylvester matrix in natural order (H_M[i][j] = (-1)^popcount(i & j)) and H_K one fixed
 * K x K Hadamard matrix (entries +-1, H_K H_K^T = K I). This is the layout of QuaRot/SpinQuant's
 * matmul_hadU and of MLX's hadamard_transform (weights-reference.md 1.5): a Walsh-Hadamard
 * transform of every contiguous chunk of M, then H_K across the K chunks. Our H_K are built from
 * the published constructions, not copied from Sloane's library, so for K > 1 they are NOT the
 * matrices of QuaRot/SpinQuant/MLX: a rotation folded here is reproducible only with this table
 * (record tq_hadamard_base(n) and its construction string with any fold).
 *
 * The table (scripts/gen_hadamard_tables.py builds and checks it; generated hadamard_tables.c):
 *   K = 1                     Sylvester (J. J. Sylvester, Phil. Mag. 34 (1867) 461-475)
 *   K = 12 20 44 60 68 84 108 132 140 164
 *                             Paley I, q = K - 1 prime, q = 3 mod 4 (R. E. A. C. Paley, "On
 *                             orthogonal matrices", J. Math. Phys. 12 (1933) 311-320)
 *   K = 28 36 76 124 148      Paley II, q = K/2 - 1 prime, q = 1 mod 4 (same paper)
 *   K = 52, 100               Paley II over GF(25) (x^2 = 2 over GF(5)) and GF(49) (x^2 = 3
 *                             over GF(7))
 *   K = 40                    H_2 (x) H_20 (Sylvester doubling of Paley I, q = 19)
 * Odd parts 23, 29, 39, 43 (K = 92, 116, 156, 172) need Williamson-type matrices: not supported.
 * Choice of K for n: the LARGEST K of the table with n % K == 0 and n / K a power of two (so
 * 640 = 40 * 16, not 20 * 32, as in QuaRot/SpinQuant's get_hadK; 576 = 36 * 16).
 *
 * Operation order (fixed, so results are reproducible bit for bit; no FMA can change it: the
 * library builds with -ffp-contract=off, and every product below is by +-1 or by the scale):
 *   forward (flags without TQ_HADAMARD_INVERSE), y = scale * H * diag(signs) * x:
 *     1. x[i] = x[i] * (float)signs[i]   (if signs != NULL; a multiply, not a negation: GCC folds
 *        x * -1.0f into -x, which flips the sign of a NaN, while kv_ref.c multiplies)
 *     2. tq_hadamard_butterflies() on each chunk of M elements
 *     3. if K > 1: for every column i < M and row r < K, in increasing t:
 *        acc = H_K[r][0] * X[0][i]; acc = acc + H_K[r][t] * X[t][i] for t = 1 .. K-1;
 *        Y[r][i] = acc
 *     4. x[i] = x[i] * scale                        (if TQ_HADAMARD_NORMALIZE)
 *   inverse (TQ_HADAMARD_INVERSE), x = diag(signs) * scale * H^T * y: steps 2, 3 with H_K^T
 *     (H_K[t][r]), 4, then 1 — the exact inverse of the forward up to rounding.
 *   scale = (float)(1 / sqrt((double)n)) (= tq_hadamard_scale(n)).
 * For a power of two (K = 1) this is the KV codec's order (src/common/kv_ref.c): forward with signs =
 * tq_kv_rotate_ref, inverse with signs = tq_kv_unrotate_ref, no signs = tq_kv_fwht; the f64
 * inverse with TQ_HADAMARD_SCALE_F32 = tq_kv_unrotate_f64 (tests/test_hadamard.c checks all
 * four bit for bit). The normalized transform is orthonormal; without signs and for K = 1 it is
 * its own inverse (H_M symmetric); in general use TQ_HADAMARD_INVERSE to undo it.
 *
 * Thread-safety: pure functions over the caller's buffer and a const table; no allocation (the
 * K-step gathers 8 columns at a time into a stack buffer of 8 * TQ_HADAMARD_MAX_K elements).
 */
#ifndef TQ_COMMON_HADAMARD_H
#define TQ_COMMON_HADAMARD_H

#include <stdint.h>

#include "turboquant.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TQ_HADAMARD_MAX_K 164                  /* largest K of the table                     */
#define TQ_HADAMARD_MAX_N ((int64_t)1 << 40)   /* largest n accepted                         */
#define TQ_HADAMARD_NORMALIZE 1u               /* multiply by tq_hadamard_scale(n)           */
#define TQ_HADAMARD_INVERSE 2u                 /* apply diag(signs) scale H^T (the inverse)  */
#define TQ_HADAMARD_SCALE_F32 4u               /* f64 only: scale = (double)tq_hadamard_scale */

/* One K x K base matrix: row j is `row_bytes` bytes, bit t (LSB-first) set = entry -1. */
typedef struct tq_hadamard_base {
    int k;                /* order K                                                  */
    int row_bytes;        /* ceil(K / 8)                                              */
    const uint8_t *bits;  /* K * row_bytes bytes; NULL for K = 1                      */
    const char *name;     /* construction, e.g. "Paley II, q = 13"                    */
} tq_hadamard_base;

extern const tq_hadamard_base tq_hadamard_bases[]; /* K ascending, K = 1 first               */
extern const int tq_hadamard_n_bases;

/* tq_hadamard_base_of() -- the table row used for n (the largest K with n = K * 2^m), or NULL
 * when n is not supported (n < 1, n > TQ_HADAMARD_MAX_N, or no K fits). */
const tq_hadamard_base *tq_hadamard_base_of(int64_t n);
/* tq_hadamard_supported() -- 1 when tq_hadamard_apply() accepts n, else 0. */
int tq_hadamard_supported(int64_t n);
/* tq_hadamard_entry() -- entry (i, j) of H_K of the row b: +1 or -1 (i, j < b->k). */
static inline int tq_hadamard_entry(const tq_hadamard_base *b, int i, int j)
{
    if (!b->bits)
        return 1; /* K = 1 */
    return (b->bits[(size_t)i * (size_t)b->row_bytes + (size_t)(j >> 3)] >> (j & 7)) & 1 ? -1 : 1;
}
/* tq_hadamard_scale() -- (float)(1 / sqrt(n)): the normalization (0 for n < 1). */
float tq_hadamard_scale(int64_t n);

/* tq_hadamard_butterflies() -- the unscaled power-of-two FWHT in place, in this order: for
 * h = 1, 2, 4, ... < n, for blk = 0, 2h, 4h, ... < n, for i = blk .. blk + h - 1:
 * a = x[i], b = x[i+h]; x[i] = a + b; x[i+h] = a - b. n a power of two (n = 1: nothing). */
void tq_hadamard_butterflies(float *x, int64_t n);
void tq_hadamard_butterflies_f64(double *x, int64_t n);

/* tq_hadamard_apply() -- the transform above, in place on n floats. signs: NULL or n entries
 * exactly +1 or -1. flags: TQ_HADAMARD_NORMALIZE | TQ_HADAMARD_INVERSE.
 * Returns TQ_E_ARG for x == NULL or an unsupported n (message names n and the supported form). */
tq_status tq_hadamard_apply(float *x, int64_t n, const int8_t *signs, unsigned flags);
/* tq_hadamard_apply_f64() -- the same in double (scale 1/sqrt(n) in double, or the float scale
 * widened with TQ_HADAMARD_SCALE_F32). */
tq_status tq_hadamard_apply_f64(double *x, int64_t n, const int8_t *signs, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
