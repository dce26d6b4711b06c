/* qdot_qp512.h -- the AVX512-VNNI prefill tile of the signed 4/5-bit 32-formats (Q4_0, Q5_0,
 * IQ4_NL; Q8_0 keeps qdot_avx2.c's qt_run, faster for it) over packed activations (qdot.h
 * tq_q8p); included by qdot_avx2.c and qdot_iq4nl_avx2.c when they are compiled with QDOT_VNNI
 * (AVX512-VNNI flags). Internal.
 *
 * A tile = QP_R rows x up to QP_T tokens. One zmm per (row, token) holds both of dot_q8's
 * accumulators (lanes 0-7 acc[0] of the even blocks, 8-15 acc[1] of the odd ones); a step takes
 * blocks i and i + 1. The weight integers are offset to unsigned (w + 128) once per row and
 * step, and the token's tq_q8p pair gives, as memory operands, the int8 activation, the
 * correction c = -128 * (sum of 4 qs) per lane and the d_a pattern:
 *     p = vpdpbusd(c, w + 128, qs)          (lane l's exact int32 p of the reference)
 *     acc = fma((float)p, d_w * d_a, acc)   (d_w * d_a rounded, then vfmadd: the reference)
 * so a result equals dot_q8's bit for bit (tests/test_qdot.c, tests/test_qdot_iq4nl.c).
 * Against the tq_q8a tile (qt_tile of qdot_avx2.c), per step: no per-token unpacking (load,
 * insert, xor, d_a broadcast and insert) and no per-row correction (vpdpbusd + sub), and the
 * free registers hold 8 tokens instead of 4, so the row work (unpack, d_w permute) is shared
 * by 8. The tq_q8p rows must be 64-byte aligned (qmatmul.c's scratch is): split loads cost
 * ~25% (qdot_bench with a malloc()ed buffer). */
#ifndef TQ_CPU_QDOT_QP512_H
#define TQ_CPU_QDOT_QP512_H

#include <immintrin.h>
#include <stdint.h>

#include "common/formats.h"
#include "cpu/qdot.h"
#include "cpu/qdot_avx2.h"

/* Tile shape: 2 rows x 8 tokens (16 accumulators, no spill). Same-run qdot_bench -n 512, 4096 x
 * 640, 1 thread, two rounds, thread CPU ms (load 3-4), R x T = 4x6 / 4x4 / 3x8 / 2x8: Q8_0
 * 29.8-30.3 / 28.3-28.7 / 28.2-29.4 / 28.8-29.6, Q5_0 31.6-32.5 / 31.5-31.9 / 30.3-30.5 /
 * 30.1-30.8 (the tq_q8a tile: Q8_0 29.4-31.8, Q5_0 35.8-37.3): the shape hardly matters; the
 * vector operations per (row, token, 2 blocks) of the reference's rounding bind (measured with
 * the mul-then-add spec: five; four since the fma spec). (QP_RR,
 * QP_TT: -D overrides for such a comparison; QP_RR <= 4, QP_TT <= 8.) */
#ifndef QP_TT
#define QP_TT 8
#endif
#ifndef QP_RR
#define QP_RR 2
#endif
enum { QP_R = QP_RR, QP_T = QP_TT };
/* rows per chunk: about this many weight bytes (L2). Each chunk re-reads every token's packed
 * activations (512 tokens x k / 64 x 192 B: 2.4 MB at k = 1536), so larger chunks re-read them
 * less: qdot_bench -n 512, 1 thread, 32 -> 128 KB: 576 x 1536 Q4_0/Q5_0 11.0-12.1 -> 10.2-10.4
 * ms, 3072 x 576 19.3 -> 18.4-18.9 ms; 256 KB measured the same as 128 KB. */
#define QP_CHUNK_BYTES 131072

static inline uint32_t qp_rd32(const uint8_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

static inline size_t qp_bs(int F)
{
    return F == TQ_GGML_Q5_0 ? 22 : 18; /* Q4_0, IQ4_NL: 18 */
}

/* 16 bytes at p0 and p1 -> zmm 128-bit lanes p0 p0 p1 p1, the second copy of each shifted by 4:
 * the low nibbles (elements 0..15) then the high ones (16..31) of each block after & 0x0f */
static inline __attribute__((always_inline)) __m512i qp_nib_src(const uint8_t *q0,
                                                               const uint8_t *q1)
{
    const __m256i h = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
        _mm_loadu_si128((const __m128i *)q1), 1);
    const __m512i v =
        _mm512_shuffle_i64x2(_mm512_castsi256_si512(h), _mm512_castsi256_si512(h), 0x50);
    return _mm512_srlv_epi32(v, _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4));
}

/* The weight integers + 128 of the blocks at p0 and p1 (p1 = p0 for a lone last block), as
 * unsigned bytes: block p0's 32 elements, then p1's. */
static inline __attribute__((always_inline)) __m512i qp_up2(int F, const uint8_t *p0,
                                                            const uint8_t *p1)
{
    if (F == TQ_GGML_Q5_0) {
        /* nibble + 16 * bit - 16 + 128 = nibble | (bit ? 0x80 : 0x70) */
        const __m512i v = qp_nib_src(p0 + 6, p1 + 6);
        const __mmask64 m = (__mmask64)qp_rd32(p0 + 2) | ((__mmask64)qp_rd32(p1 + 2) << 32);
        const __m512i hi =
            _mm512_mask_blend_epi8(m, _mm512_set1_epi8(0x70), _mm512_set1_epi8((char)0x80));
        return _mm512_ternarylogic_epi32(v, _mm512_set1_epi8(0x0f), hi, 0xEA); /* (v & f) | hi */
    }
    const __m512i nib = _mm512_and_si512(qp_nib_src(p0 + 2, p1 + 2), _mm512_set1_epi8(0x0f));
    if (F == TQ_GGML_Q4_0)
        return _mm512_add_epi8(nib, _mm512_set1_epi8(120)); /* nibble - 8 + 128 */
    /* IQ4_NL: the table's values + 128 (the int8 values with the sign bit flipped) */
    const __m512i tab = _mm512_xor_si512(
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tq_iq4nl_values)),
        _mm512_set1_epi8((char)0x80));
    return _mm512_shuffle_epi8(tab, nib);
}

/* d (f16 at offset 0) of the blocks at offsets o0 and o1 of the R rows (rows >= R repeat row 0)
 * as f32 lanes 4r (o0) and 4r + 2 (o1); lanes 4r + 1, 4r + 3 hold converted bytes never read */
static inline __attribute__((always_inline)) __m512 qp_scales(int R, const uint8_t *w,
                                                              size_t row_bytes, size_t o0,
                                                              size_t o1)
{
    const uint8_t *q[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) q[r] = w + (size_t)(r < R ? r : 0) * row_bytes;
    const __m128i x01 = _mm_setr_epi32((int)qp_rd32(q[0] + o0), (int)qp_rd32(q[0] + o1),
                                       (int)qp_rd32(q[1] + o0), (int)qp_rd32(q[1] + o1));
    const __m128i x23 = _mm_setr_epi32((int)qp_rd32(q[2] + o0), (int)qp_rd32(q[2] + o1),
                                       (int)qp_rd32(q[3] + o0), (int)qp_rd32(q[3] + o1));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(x01), x23, 1));
}

/* One step over blocks i and i1 (pair j of the tokens' tq_q8p; i1 = i + 1, or i for a lone
 * last block: TWO = 0, only lanes 0-7 change). */
static inline __attribute__((always_inline)) void
qp_step(int F, int R, int T, int TWO, const uint8_t *w, size_t row_bytes,
        const tq_q8p *const *at, int64_t j, int64_t i, int64_t i1, __m512 (*acc)[QP_T])
{
    const size_t bs = qp_bs(F);
    const __m512 sc = qp_scales(R, w, row_bytes, (size_t)i * bs, (size_t)i1 * bs);
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
    {
        const uint8_t *p0 = w + (size_t)r * row_bytes + (size_t)i * bs;
        const uint8_t *p1 = w + (size_t)r * row_bytes + (size_t)i1 * bs;
        const __m512i u = qp_up2(F, p0, p1);
        const __m512 dw = _mm512_permutexvar_ps(
            _mm512_add_epi32(_mm512_set1_epi32(4 * r),
                             _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2)),
            sc);
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)
        {
            const tq_q8p *a = at[t] + j;
            const __m512i p = _mm512_dpbusd_epi32(_mm512_loadu_si512(a->c), u,
                                                  _mm512_loadu_si512(a->qs));
            const __m512 pf = _mm512_cvtepi32_ps(p);
            const __m512 dd = _mm512_mul_ps(dw, _mm512_loadu_ps(a->da));
            acc[r][t] = TWO ? _mm512_fmadd_ps(pf, dd, acc[r][t])
                            : _mm512_mask3_fmadd_ps(pf, dd, acc[r][t], 0x00ff);
        }
    }
}

/* R rows (from w) x T tokens (at[t]) -> y[t * ldy + r]. */
static inline __attribute__((always_inline)) void
qp_tile(int F, int R, int T, const uint8_t *w, size_t row_bytes, int64_t nb,
        const tq_q8p *const *at, float *y, int64_t ldy)
{
    __m512 acc[QP_R][QP_T];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
    {
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    }
    int64_t j = 0;
    for (; 2 * j + 1 < nb; j++)
        qp_step(F, R, T, 1, w, row_bytes, at, j, 2 * j, 2 * j + 1, acc);
    if (2 * j < nb)
        qp_step(F, R, T, 0, w, row_bytes, at, j, 2 * j, 2 * j, acc);
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
    {
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)
        {
            const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(acc[r][t]),
                                           _mm512_extractf32x8_ps(acc[r][t], 1));
            y[t * ldy + r] = hsum8(v);
        }
    }
}

typedef void (*qp_tile_fn)(const uint8_t *w, size_t row_bytes, int64_t nb,
                           const tq_q8p *const *at, float *y, int64_t ldy);

/* Every token of rows [r0, r1): chunks of about QP_CHUNK_BYTES of rows (from L1/L2 while every
 * token tile passes over them), token tiles of QP_T (the last of n % QP_T), row tiles of QP_R
 * (then 1). f[R == 1][T - 1] is the R x T tile. */
static inline void qp_run(const qp_tile_fn (*f)[8], const void *w, size_t row_bytes, int64_t k,
                          const void *act, int64_t n, float *y, int64_t ldy, int64_t r0,
                          int64_t r1)
{
    const int64_t nb = k / TQ_QK, np = tq_q8p_pairs(k);
    int64_t chunk = (int64_t)(QP_CHUNK_BYTES / row_bytes) / QP_R * QP_R;
    if (chunk < QP_R)
        chunk = QP_R;
    const tq_q8p *a = act;
    for (int64_t rc = r0; rc < r1; rc += chunk) {
        const int64_t re = rc + chunk < r1 ? rc + chunk : r1;
        for (int64_t t = 0; t < n; t += QP_T) {
            const int T = n - t < QP_T ? (int)(n - t) : QP_T;
            const tq_q8p *at[QP_T];
            for (int q = 0; q < QP_T; q++)
                at[q] = a + (t + (q < T ? q : 0)) * np;
            int64_t r = rc;
            for (; r + QP_R <= re; r += QP_R)
                f[0][T - 1]((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nb, at,
                            y + t * ldy + r, ldy);
            for (; r < re; r++)
                f[1][T - 1]((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nb, at,
                            y + t * ldy + r, ldy);
        }
    }
}

#define QP_TILE_FN(F, R, T, name)                                                                \
    static void name(const uint8_t *w, size_t row_bytes, int64_t nb, const tq_q8p *const *at,   \
                     float *y, int64_t ldy)                                                      \
    {                                                                                            \
        qp_tile(F, R, (T) < QP_T ? (T) : QP_T, w, row_bytes, nb, at, y, ldy);                    \
    }
/* QP_FORMAT(F, name) -- gemm_q8_<name>, qdot.h's gemm_q8 slot for format F */
#define QP_FORMAT(F, name)                                                                       \
    QP_TILE_FN(F, QP_R, 1, qp_##name##_r1)                                                       \
    QP_TILE_FN(F, QP_R, 2, qp_##name##_r2)                                                       \
    QP_TILE_FN(F, QP_R, 3, qp_##name##_r3)                                                       \
    QP_TILE_FN(F, QP_R, 4, qp_##name##_r4)                                                       \
    QP_TILE_FN(F, QP_R, 5, qp_##name##_r5)                                                       \
    QP_TILE_FN(F, QP_R, 6, qp_##name##_r6)                                                       \
    QP_TILE_FN(F, QP_R, 7, qp_##name##_r7)                                                       \
    QP_TILE_FN(F, QP_R, 8, qp_##name##_r8)                                                       \
    QP_TILE_FN(F, 1, 1, qp_##name##_11)                                                          \
    QP_TILE_FN(F, 1, 2, qp_##name##_12)                                                          \
    QP_TILE_FN(F, 1, 3, qp_##name##_13)                                                          \
    QP_TILE_FN(F, 1, 4, qp_##name##_14)                                                          \
    QP_TILE_FN(F, 1, 5, qp_##name##_15)                                                          \
    QP_TILE_FN(F, 1, 6, qp_##name##_16)                                                          \
    QP_TILE_FN(F, 1, 7, qp_##name##_17)                                                          \
    QP_TILE_FN(F, 1, 8, qp_##name##_18)                                                          \
    static void gemm_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *act,      \
                               int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)         \
    {                                                                                            \
        static const qp_tile_fn f[2][8] = {                                                      \
            {qp_##name##_r1, qp_##name##_r2, qp_##name##_r3, qp_##name##_r4, qp_##name##_r5,     \
             qp_##name##_r6, qp_##name##_r7, qp_##name##_r8},                                    \
            {qp_##name##_11, qp_##name##_12, qp_##name##_13, qp_##name##_14, qp_##name##_15,     \
             qp_##name##_16, qp_##name##_17, qp_##name##_18}};                                   \
        qp_run(f, w, row_bytes, k, act, n, y, ldy, r0, r1);                                      \
    }

#endif /* TQ_CPU_QDOT_QP512_H */
