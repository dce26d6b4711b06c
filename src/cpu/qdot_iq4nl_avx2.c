/* qdot_iq4nl_avx2.c -- AVX2 + FMA + F16C kernels of qdot_iq4nl.h (and, compiled again from
 * qdot_iq4nl_avx512vnni.c with QDOT_VNNI, the AVX512-VNNI ones). The 16 nibbles of a block
 * become the table's int8 values by one vpshufb (the table broadcast to both 128-bit lanes);
 * the weight and activation integers meet in vpmaddubsw + vpmaddwd (|w| by sign(a, w): |w| <=
 * 127, |a| <= 127, a pair <= 32258, no int16 saturation) or in vpdpbusd: int32 lane l is
 * exactly the reference's p of lane l (elements 4l..4l+3). The f32 steps are the reference's
 * lane for lane (d_w * d_a rounded, then vfmadd; vfmadd on the f32 path) and H() is the same
 * tree, so the results equal qdot_iq4nl.c's bit for bit. The matvecs decode a block once for up to 4 tokens (q8) or
 * 2 tokens (f32); each (row, token) keeps its own accumulators in the same order. */
#include <immintrin.h>

#include "cpu/qdot.h"
#include "cpu/qdot_avx2.h"
#include "cpu/qdot_iq4nl.h"

static inline __m256i table(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tq_iq4nl_values));
}

/* the block's 32 weight integers in element order: low nibbles in bytes 0..15, high 16..31 */
static inline __m256i up(const uint8_t *b, __m256i tab)
{
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b + 2)));
    const __m256i nib = _mm256_and_si256(
        _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0f));
    return _mm256_shuffle_epi8(tab, nib);
}

/* the block's values d * w in 4 groups of 8 (the dequantizer's products) */
static inline void up_f32(const uint8_t *b, __m256i tab, __m256 *wf)
{
    const __m256i wq = up(b, tab);
    const __m256 vd = _mm256_set1_ps(f16c(b));
    const __m128i lo = _mm256_castsi256_si128(wq), hi = _mm256_extracti128_si256(wq, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int g = 0; g < 4; g++)
        wf[g] = _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part[g])));
}

static float dot_f32(const void *w, const float *x, int64_t k)
{
    const __m256i tab = table();
    const uint8_t *b = w;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (int64_t i = 0; i < k / TQ_QK; i++, b += 18, x += TQ_QK) {
        __m256 wf[4];
        up_f32(b, tab, wf);
        for (int g = 0; g < 4; g++)
            acc[g] = _mm256_fmadd_ps(wf[g], _mm256_loadu_ps(x + 8 * g), acc[g]);
    }
    return hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

/* ---- the q8 path: cpu/qdot_q8blk.h (the per-block spec) ------------------------------------ */
static inline __m256i QB_UP(int F, const uint8_t *b)
{
    (void)F;
    return up(b, table());
}
#include "cpu/qdot_q8blk.h"
QB_FORMAT(TQ_FMT_IQ4_NL, iq4_nl)

static void mv_f32(const void *w, size_t row_bytes, int64_t k, const float *x, int64_t ldx,
                   int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    const __m256i tab = table();
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * row_bytes;
        int64_t t = 0;
        for (; t + 2 <= n; t += 2) {
            const float *x0 = x + t * ldx, *x1 = x0 + ldx;
            __m256 a0[4], a1[4];
            for (int g = 0; g < 4; g++)
                a0[g] = a1[g] = _mm256_setzero_ps();
            for (int64_t i = 0; i < k / TQ_QK; i++) {
                __m256 wf[4];
                up_f32(row + (size_t)i * 18, tab, wf);
                for (int g = 0; g < 4; g++) {
                    a0[g] = _mm256_fmadd_ps(wf[g], _mm256_loadu_ps(x0 + 32 * i + 8 * g), a0[g]);
                    a1[g] = _mm256_fmadd_ps(wf[g], _mm256_loadu_ps(x1 + 32 * i + 8 * g), a1[g]);
                }
            }
            y[t * ldy + r] =
                hsum8(_mm256_add_ps(_mm256_add_ps(a0[0], a0[1]), _mm256_add_ps(a0[2], a0[3])));
            y[(t + 1) * ldy + r] =
                hsum8(_mm256_add_ps(_mm256_add_ps(a1[0], a1[1]), _mm256_add_ps(a1[2], a1[3])));
        }
        for (; t < n; t++)
            y[t * ldy + r] = dot_f32(row, x + t * ldx, k);
    }
}

#ifdef QDOT_VNNI
static const tq_iq4nl_kernels table_isa = {"avx512vnni", TQ_ISA_AVX512, dotq_iq4_nl, dot_f32,
                                           mvq_iq4_nl, mv_f32, gemm_q8_iq4_nl};

const tq_iq4nl_kernels *tq_iq4nl_avx512_table(void)
{
    return &table_isa;
}
#else
static const tq_iq4nl_kernels table_isa = {"avx2", TQ_ISA_AVX2, dotq_iq4_nl, dot_f32,
                                           mvq_iq4_nl, mv_f32, gemm_q8_iq4_nl};

const tq_iq4nl_kernels *tq_iq4nl_avx2_table(void)
{
    return &table_isa;
}
#endif
