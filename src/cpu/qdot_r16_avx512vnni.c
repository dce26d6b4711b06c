/* qdot_r16_avx512vnni.c -- the decode kernel over the r16 layout (qdot_r16.h), AVX512-VNNI.
 * ISA flags: the _avx512vnni.c rule of CMakeLists.txt.
 *
 * One group (16 rows) . one token, rows in the zmm lanes: per block, the int32 P_b of the 16 rows
 * is vpdpbusd over the group block's dwords (unsigned weights) with the token's 4 activation
 * bytes broadcast, started at -8 sum(a) (Q4_0) / -128 sum(a) (Q8_0, stored w + 128) / 0 (Q4_1);
 * then acc = fma((float)P_b, d_w * d_a, acc) for the 16 rows at once (Q4_1: accm += m_w * s_a):
 * each lane is its row's chain of qdot.h in block order, so the bits of the scalar reference.
 * Up to 4 tokens per pass over a group: each block's weights are loaded and split once, then
 * every token's chain (each exactly its own, as alone). */
#include <immintrin.h>

#include "cpu/qdot.h"
#include "cpu/qdot_r16.h"

/* the activation sums' corrections of up to CB blocks per token (nb <= CB: tq_qmm_r16_ok's row
 * bound, 4096 bytes, is at most 227 blocks) */
enum { CB = 256, TMAX = 4 };

#ifndef R16_PF
#define R16_PF 4096
#endif
/* One group . T <= TMAX tokens: each block's weights loaded (and Q4 split into nibbles) once, then
 * the T tokens' chains, each token's exactly as alone (acc[t] in block order). Rows per lane. */
static inline __attribute__((always_inline)) void r16_group(int F, int T, const uint8_t *g,
                                                            int64_t nb, const tq_q8a *const *a,
                                                            const int32_t (*cor)[CB], float *y,
                                                            int64_t ldy)
{
    const size_t qb = F == TQ_GGML_Q8_0 ? 512 : 256; /* quant bytes of a group block */
    const size_t hb = F == TQ_GGML_Q4_1 ? 64 : 32;   /* header bytes of a group block */
    const uint8_t *gh = g + (size_t)nb * qb;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[TMAX], accm[TMAX];
    _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) acc[t] = accm[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *q = g + (size_t)b * qb, *h = gh + (size_t)b * hb;
        _Pragma("GCC unroll 8") for (size_t l = 0; l < qb; l += 64)
            _mm_prefetch((const char *)q + R16_PF + l, _MM_HINT_T0);
        __m512i wv[8]; /* the 8 operands: dword i (Q8_0) or nibble half of dword i & 3 (Q4) */
        if (F == TQ_GGML_Q8_0) {
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) wv[i] =
                _mm512_loadu_si512(q + 64 * i);
        } else {
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
            {
                const __m512i v = _mm512_loadu_si512(q + 64 * i);
                wv[i] = _mm512_and_si512(v, m4);
                wv[i + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
        const __m512 mw = F == TQ_GGML_Q4_1
                              ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + 32)))
                              : _mm512_setzero_ps();
        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)
        {
            const int32_t *ad = (const int32_t *)(const void *)a[t][b].qs;
            __m512i p0 = _mm512_set1_epi32(F == TQ_GGML_Q4_1 ? 0 : cor[t][b]),
                    p1 = _mm512_setzero_si512();
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i += 2)
            {
                p0 = _mm512_dpbusd_epi32(p0, wv[i], _mm512_set1_epi32(ad[i]));
                p1 = _mm512_dpbusd_epi32(p1, wv[i + 1], _mm512_set1_epi32(ad[i + 1]));
            }
            const __m512 pf = _mm512_cvtepi32_ps(_mm512_add_epi32(p0, p1));
            acc[t] = _mm512_fmadd_ps(pf, _mm512_mul_ps(dw, _mm512_set1_ps(a[t][b].d)), acc[t]);
            if (F == TQ_GGML_Q4_1)
                accm[t] = _mm512_add_ps(accm[t], _mm512_mul_ps(mw, _mm512_set1_ps(a[t][b].s)));
        }
    }
    _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)
        _mm512_storeu_ps(y + t * ldy, F == TQ_GGML_Q4_1 ? _mm512_add_ps(acc[t], accm[t]) : acc[t]);
}

/* the token's -8 sum(a) (Q4_0) / -128 sum(a) (Q8_0) per block (int32, exact) */
static inline void r16_cor(int F, const tq_q8a *a, int64_t nb, int32_t *cor)
{
    const int32_t mul = F == TQ_GGML_Q4_0 ? -8 : -128;
    for (int64_t b = 0; b < nb; b++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)a[b].qs);
        const __m256i s =
            _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), _mm256_set1_epi16(1));
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        h = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 1));
        cor[b] = mul * _mm_cvtsi128_si32(h);
    }
}

static inline __attribute__((always_inline)) void r16_mv(int F, const void *w, size_t row_bytes,
                                                         int64_t k, const void *act, int64_t n,
                                                         float *y, int64_t ldy, int64_t r0,
                                                         int64_t r1)
{
    const int64_t nb = k / TQ_QK;
    const tq_q8a *a0 = act;
    int32_t cor[TMAX][CB];
    for (int64_t t0 = 0; t0 < n; t0 += TMAX) {
        const int T = n - t0 < TMAX ? (int)(n - t0) : TMAX;
        const tq_q8a *a[TMAX];
        for (int t = 0; t < T; t++) {
            a[t] = a0 + (t0 + t) * nb;
            if (F != TQ_GGML_Q4_1)
                r16_cor(F, a[t], nb, cor[t]);
        }
        for (int64_t r = r0; r < r1; r += TQ_R16) {
            const uint8_t *g = (const uint8_t *)w + (size_t)r * row_bytes;
            float *yt = y + t0 * ldy + r;
            switch (T) { /* the token count as a constant: the loops unroll, acc stays in zmm */
            case 1:
                r16_group(F, 1, g, nb, a, (const int32_t(*)[CB])cor, yt, ldy);
                break;
            case 2:
                r16_group(F, 2, g, nb, a, (const int32_t(*)[CB])cor, yt, ldy);
                break;
            case 3:
                r16_group(F, 3, g, nb, a, (const int32_t(*)[CB])cor, yt, ldy);
                break;
            default:
                r16_group(F, 4, g, nb, a, (const int32_t(*)[CB])cor, yt, ldy);
                break;
            }
        }
    }
}

#define R16_FN(F, name)                                                                            \
    static void r16_mv_##name(const void *w, size_t row_bytes, int64_t k, const void *act,         \
                              int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)            \
    {                                                                                              \
        r16_mv(F, w, row_bytes, k, act, n, y, ldy, r0, r1);                                        \
    }
R16_FN(TQ_GGML_Q4_0, q4_0)
R16_FN(TQ_GGML_Q4_1, q4_1)
R16_FN(TQ_GGML_Q8_0, q8_0)

tq_qmv_q8_fn tq_r16_mv_avx512(int id)
{
    return id == TQ_GGML_Q4_0   ? r16_mv_q4_0
           : id == TQ_GGML_Q4_1 ? r16_mv_q4_1
           : id == TQ_GGML_Q8_0 ? r16_mv_q8_0
                                : NULL;
}

/* tq_r16_unpack_avx512() -- tq_r16_unpack (qdot_r16.c) for a whole group with 128-bit lane
 * transposes: per block, each 4 quant lines (dword i of rows 0..15) become 16 rows' 16 bytes
 * (unpack 32 / 64 within the 128-bit lanes: lane k holds rows 4k..4k+3), the f16 fields by
 * 2-byte stores; Q8_0's stored w + 128 XORed back. The same bytes as the scalar moves
 * (tests/test_qdot_r16.c: unpack(pack(rows)) == rows). */
void tq_r16_unpack_avx512(int id, const uint8_t *src, int64_t nb, uint8_t *dst)
{
    const size_t hb = id == TQ_GGML_Q4_1 ? 4 : 2, qb = id == TQ_GGML_Q8_0 ? 32 : 16;
    const size_t bs = hb + qb, rb = (size_t)nb * bs;
    const __m512i x = _mm512_set1_epi8(id == TQ_GGML_Q8_0 ? (char)0x80 : 0);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *gq = src + (size_t)b * 16 * qb;
        const uint8_t *gh = src + (size_t)nb * 16 * qb + (size_t)b * 16 * hb;
        uint8_t *o = dst + (size_t)b * bs;
        for (size_t h = 0; h < hb; h += 2)
            for (int r = 0; r < 16; r++)
                __builtin_memcpy(o + (size_t)r * rb + h, gh + 16 * h + 2 * (size_t)r, 2);
        for (size_t q4 = 0; q4 < qb / 16; q4++) { /* 4 lines -> 16 bytes of each row */
            const uint8_t *l = gq + 256 * q4;
            const __m512i l0 = _mm512_xor_si512(_mm512_loadu_si512(l), x);
            const __m512i l1 = _mm512_xor_si512(_mm512_loadu_si512(l + 64), x);
            const __m512i l2 = _mm512_xor_si512(_mm512_loadu_si512(l + 128), x);
            const __m512i l3 = _mm512_xor_si512(_mm512_loadu_si512(l + 192), x);
            const __m512i t0 = _mm512_unpacklo_epi32(l0, l1), t1 = _mm512_unpackhi_epi32(l0, l1);
            const __m512i t2 = _mm512_unpacklo_epi32(l2, l3), t3 = _mm512_unpackhi_epi32(l2, l3);
            const __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                                  _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
            uint8_t *oq = o + hb + 16 * q4;
            for (int j = 0; j < 4; j++) { /* u[j]'s 128-bit lane k = row 4k + j */
                _mm_storeu_si128((__m128i *)(oq + (size_t)j * rb), _mm512_castsi512_si128(u[j]));
                _mm_storeu_si128((__m128i *)(oq + (size_t)(4 + j) * rb),
                                 _mm512_extracti32x4_epi32(u[j], 1));
                _mm_storeu_si128((__m128i *)(oq + (size_t)(8 + j) * rb),
                                 _mm512_extracti32x4_epi32(u[j], 2));
                _mm_storeu_si128((__m128i *)(oq + (size_t)(12 + j) * rb),
                                 _mm512_extracti32x4_epi32(u[j], 3));
            }
        }
    }
}
