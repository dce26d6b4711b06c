/* qdot.h -- native GGUF block-format dot products and matvecs (internal; issue 14).
 *
 * Weights stay in their GGUF block layout (docs/FORMAT.md "GGUF", src/common/formats.c): one row of
 * a matrix is k / 32 packed blocks (Q8_0 34 B, Q4_0 18 B, Q4_1 20 B, Q5_0 22 B, Q5_1 24 B) or
 * k / 256 super-blocks (Q4_K 144 B, Q5_K 176 B, Q6_K 210 B); rows are row_bytes apart. Two
 * activation paths:
 *
 *   f32 path (exact):  y = sum_j w_j * x_j, w_j the fp32 value tq_ggml_dequant_ref() gives.
 *   q8 path (fast):    x is quantized once per token (int8 with one f32 scale per 32 values,
 *                      tq_q8a, for the 32-formats; per 256, tq_q8k, for the K formats), and
 *                      the weight integers meet the activation integers in int32.
 *
 * ---- the q8 activation (tq_q8a, in memory only, never on disk) -----------------------------
 * Per 32 consecutive x: amax = max |x_j|; d = amax / 127 (f32 division); id = d ? 1 / d : 0;
 * qs_j = (int) nearbyintf(clamp(x_j * id, -127, 127)) (round half to even, NaN -> -127);
 * s = d * (float)(sum_j qs_j) (for the min term of Q4_1/Q5_1). Any x_j inf/NaN makes the block's
 * result undefined (but never a crash). tq_q8k: the same rule over 256 values (one d), plus
 * bsums[g] = sum of qs[16g .. 16g+15] (int).
 *
 * ---- the reduction order (the specification; every ISA gives the same bits) ----------------
 * Weight integers per block: Q8_0 int8; Q4_0 nibble - 8; Q5_0 5-bit - 16 (signed formats);
 * Q4_1 nibble, Q5_1 5-bit (unsigned, with the f16 min m). d_w = f16 scale of the block.
 *   q8 path (per block, since session 24; llama.cpp's reference dot has the same shape):
 *     acc = 0, accm = 0; for block b = 0 .. nb-1 (in order):
 *       P_b = sum_{j<32} wq[j] * qs[j]                  (int32, exact: |P_b| < 2^24)
 *       acc = fmaf((float)P_b, d_w * d_a, acc)          (d_w * d_a rounded in f32, then one
 *                                                        fused multiply-add; ONE chain)
 *       Q4_1/Q5_1 also: accm = accm + m_w * s_a         (f32, mul then add, block order)
 *     result = acc + accm.
 *     Before session 24 the chain was per lane of 4 products (acc[b & 1][l], 16 chains, H at
 *     the end): 8x the float work per block. One (int32) sum per block lets a kernel put rows
 *     or tokens in the vector lanes (one cvt + mul + fma per block for 8-16 of them) and an
 *     AMX int8 tile compute P_b. tests/test_qdot.c pins the order with a case whose two orders
 *     differ.
 *   f32 path: w_j as the dequantizer computes it (d*q, or d*q + m, in f32); for block b and
 *     element j = 0..31:  acc[j] = fmaf(w_j, x[32b + j], acc[j])   (fused, correctly rounded)
 *     v[l] = (acc[l] + acc[8+l]) + (acc[16+l] + acc[24+l]); result = H(v).
 *   H(v) = ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)).
 *   K formats, q8 path: per super-block (in order), with the integer scale sc16[e/16] of element
 *     e (Q4_K/Q5_K: the 6-bit scale of its 32-group, twice; Q6_K: the int8 scale) and wq[e] (Q4_K
 *     nibble, Q5_K 5-bit, Q6_K 6-bit - 32):
 *       P = sum_e sc16[e/16] * wq[e] * qs[e]           (int32, exact)
 *       M = sum_g min_g * (bsums[2g] + bsums[2g+1])     (Q4_K/Q5_K, int32, exact)
 *       acc = acc + (d * d_a) * (float)P;  accm = accm + (dmin * d_a) * (float)M
 *     result = acc - accm.
 *   K formats, f32 path: as the 32-formats' f32 path (lane j % 32 of element j), with w_j the
 *     dequantizer's (d * sc) * q - dmin * m (Q4_K/Q5_K) or (d * sc) * (q - 32) (Q6_K).
 * So a row's result depends on k and the data only: never on n (tokens per call), r0/r1, the
 * thread count, or the ISA. Vector kernels must equal the scalar ones bit for bit (finite data;
 * with a NaN anywhere both give a NaN, payloads may differ: AVX2 converts fp16 scales by F16C).
 *
 * Matvec: y[t * ldy + r] = dot(row r, token t) for r in [r0, r1), t in [0, n); token t's q8
 * activation starts tq_qdot_act_bytes(type, k) * t bytes into `act`, its f32 values at
 * x + t * ldx. Pure functions, no allocation, thread-safe.
 */
#ifndef TQ_QDOT_H
#define TQ_QDOT_H

#include "common/formats.h"

#define TQ_QK 32 /* elements per block (Q8_0 .. Q5_1 and tq_q8a) */

/* H(v) above, the scalar reference's horizontal sum of 8 lanes (every scalar kernel uses it) */
static inline float tq_qdot_h8(const float *v)
{
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

/* One block of a quantized activation. */
typedef struct tq_q8a {
    float d;           /* scale: x ~ d * qs                              */
    float s;           /* d * (float)(sum of qs)                         */
    int8_t qs[TQ_QK];  /* quantized values, |qs| <= 127                  */
} tq_q8a;
_Static_assert(sizeof(tq_q8a) == 40, "tq_q8a is 40 bytes");

#define TQ_QKK 256 /* elements per K-format super-block and tq_q8k */

/* One super-block of a quantized activation for the K formats. */
typedef struct tq_q8k {
    float d;              /* scale                                           */
    int16_t bsums[16];    /* bsums[g] = sum of qs[16g .. 16g + 15]           */
    int8_t qs[TQ_QKK];
} tq_q8k;
_Static_assert(sizeof(tq_q8k) == 292, "tq_q8k is 292 bytes");

/* The packed activation of the prefill tiles (gemm_q8 below; in memory only): the q8
 * activations of TQ_Q8P_T = 16 tokens interleaved, one tq_q8p per 32-block, the tokens in the
 * lanes: qs[g][4t + e] = token t's qs[4g + e] (16 x 4 bytes per 4 elements: the B operand of an
 * int8 dot with the tokens in the columns -- one vpdpbusd zmm step, one AMX tile row); d, s:
 * the tokens' d and s; c[t] = -128 * (sum of token t's 32 qs) (int32, exact), the correction
 * when the weight integers go unsigned as w + 128. For n tokens and k values: ceil(n / 16)
 * groups of k / 32 tq_q8p (group G's block b at index G * (k / 32) + b); the lanes of tokens
 * >= n in the last group are zeros. 64-byte aligned for the tiles. */
#define TQ_Q8P_T 16
typedef struct tq_q8p {
    int8_t qs[8][4 * TQ_Q8P_T];
    float d[TQ_Q8P_T];
    float s[TQ_Q8P_T];
    int32_t c[TQ_Q8P_T];
} tq_q8p;
_Static_assert(sizeof(tq_q8p) == 704, "tq_q8p is 704 bytes");

/* tq_q8p_count() -- the tq_q8p of n tokens of k values (0 if k % 32). tq_q8p_pack() -- one
 * token's nb blocks into lane `lane` of the group at p (its nb tq_q8p); other lanes untouched. */
int64_t tq_q8p_count(int64_t k, int64_t n);
void tq_q8p_pack(const tq_q8a *a, int64_t nb, tq_q8p *p, int lane);

/* tq_qdot_act_block()/tq_qdot_act_bytes() -- the activation a weight type's q8 path reads: 32
 * (tq_q8a) or 256 (tq_q8k) values per block, and the bytes of one token of k values (k must be
 * a multiple of the block); 0 for a type without kernels. */
int64_t tq_qdot_act_block(int type);
size_t tq_qdot_act_bytes(int type, int64_t k);

/* Kernel types: common/formats.h (tq_qact_quant_fn, tq_qdot_q8_fn, tq_qdot_f32_fn, tq_qmv_*). */

/* One table per ISA, indexed by format id (common/formats.h); NULL = not provided. */
typedef struct tq_qdot_kernels {
    const char *isa;                            /* "scalar", "avx2"                     */
    tq_isa level;                               /* the tq_cpu_isa() level it needs       */
    tq_qact_quant_fn quant_q8a;                 /* x -> tq_q8a                           */
    tq_qact_quant_fn quant_q8k;                 /* x -> tq_q8k                           */
    tq_qact_quant_fn quant[TQ_FMT_LIMIT]; /* the one the type's q8 path reads      */
    tq_qdot_q8_fn dot_q8[TQ_FMT_LIMIT];
    tq_qdot_f32_fn dot_f32[TQ_FMT_LIMIT];
    tq_qmv_q8_fn mv_q8[TQ_FMT_LIMIT];
    tq_qmv_f32_fn mv_f32[TQ_FMT_LIMIT];
    tq_qmv_f32_fn gemm_f32[TQ_FMT_LIMIT];       /* prefill tile (same bits as mv_f32)    */
    tq_qmv_q8_fn gemm_q8[TQ_FMT_LIMIT];         /* prefill tile reading tq_q8p (act: the
                                                   tq_q8p_count(k, n) of n tokens; any n;
                                                   the same bits as mv_q8)                 */
} tq_qdot_kernels;

/* Tables: scalar always; avx2 NULL when this CPU (or TQ_CPU) cannot run it. */
const tq_qdot_kernels *tq_qdot_scalar(void);
const tq_qdot_kernels *tq_qdot_avx2(void);
/* tq_qdot_best() -- the highest table tq_cpu_isa() allows. */
const tq_qdot_kernels *tq_qdot_best(void);
/* tq_qdot_all() -- every table this CPU can run, scalar first (for tests). Returns the count. */
int tq_qdot_all(const tq_qdot_kernels **out, int cap);

/* The AVX2 / AVX512-VNNI tables themselves, without the CPU check (qdot.c calls them after
 * checking). */
const tq_qdot_kernels *tq_qdot_avx2_table(void);
const tq_qdot_kernels *tq_qdot_avx512_table(void);
/* tq_qdot_avx512() -- the AVX512-VNNI table, NULL unless this CPU (and TQ_CPU) allows AVX-512
 * and has VNNI. */
const tq_qdot_kernels *tq_qdot_avx512(void);

/* TQ_QDOT_FORMATS(X) -- X(ggml type, kernel name suffix, activation quantizer) for every format
 * with qdot kernels; TQ_QDOT_ROW fills one format's slots of a tq_qdot_kernels initializer from
 * the file's dot_q8_<name>, dot_f32_<name>, mv_q8_<name>, mv_f32_<name>. */
#define TQ_QDOT_FORMATS(X)                                                                         \
    X(TQ_GGML_Q8_0, q8_0, quant_q8a)                                                               \
    X(TQ_GGML_Q4_0, q4_0, quant_q8a)                                                               \
    X(TQ_GGML_Q4_1, q4_1, quant_q8a)                                                               \
    X(TQ_GGML_Q5_0, q5_0, quant_q8a)                                                               \
    X(TQ_GGML_Q5_1, q5_1, quant_q8a)                                                               \
    X(TQ_GGML_Q4_K, q4_k, quant_q8k)                                                               \
    X(TQ_GGML_Q5_K, q5_k, quant_q8k)                                                               \
    X(TQ_GGML_Q6_K, q6_k, quant_q8k)
#define TQ_QDOT_ROW(T, name, Q)                                                                    \
    .quant[T] = Q, .dot_q8[T] = dot_q8_##name, .dot_f32[T] = dot_f32_##name,                      \
    .mv_q8[T] = mv_q8_##name, .mv_f32[T] = mv_f32_##name,

#endif /* TQ_QDOT_H */
