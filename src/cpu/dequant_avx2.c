/* dequant_avx2.c -- AVX2 (+F16C) dequantizers for the ggml block formats. Each equals the scalar
 * specification in src/common/formats.c bit for bit: integer unpacking is exact, and every float is
 * produced by the same fp32 multiply (then add/subtract) in the same order; no FMA (the library
 * builds with -ffp-contract=off and we never call an fma intrinsic). Block scales go through the
 * same scalar fp16 conversion. F16 data uses vcvtph2ps, which quiets signalling NaNs; lanes
 * holding a NaN are redone by the scalar conversion so that even NaN payloads match. */
#include <immintrin.h>

#include "core/half.h"
#include "cpu/formats_cpu.h"

#define QK_K 256

static inline float f16s(const uint8_t *p)
{
    return tq_f16_to_f32(tq_rd16(p));
}

/* 32 int8 values (as one __m256i) -> 4 x 8 floats, each multiplied by d (then + m if add). */
static inline void store_i8x32_mul(float *y, __m256i q, __m256 d)
{
    const __m128i lo = _mm256_castsi256_si128(q);
    const __m128i hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(y + 0, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
    _mm256_storeu_ps(
        y + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
    _mm256_storeu_ps(
        y + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
}

/* y = d * q + m for 32 unsigned bytes q. */
static inline void store_u8x32_mul_add(float *y, __m256i q, __m256 d, __m256 m)
{
    const __m128i lo = _mm256_castsi256_si128(q);
    const __m128i hi = _mm256_extracti128_si256(q, 1);
    __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[k]));
        _mm256_storeu_ps(y + 8 * k, _mm256_add_ps(_mm256_mul_ps(d, x), m));
    }
}

/* y = d * q - m for 32 unsigned bytes q. */
static inline void store_u8x32_mul_sub(float *y, __m256i q, __m256 d, __m256 m)
{
    const __m128i lo = _mm256_castsi256_si128(q);
    const __m128i hi = _mm256_extracti128_si256(q, 1);
    __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[k]));
        _mm256_storeu_ps(y + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d, x), m));
    }
}

/* 16 packed bytes -> 32 bytes: low nibbles (elements 0..15) then high nibbles (16..31). */
static inline __m256i nibbles(const uint8_t *p)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)p);
    const __m128i m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* Bit j of the 32-bit qh -> 0x10 in byte j. */
static inline __m256i qh_bits(uint32_t qh)
{
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll,
                                           0x0101010101010101ll, 0x0000000000000000ll);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

static void dq_q4_0(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 18, y += 32) {
        const __m256i q = _mm256_sub_epi8(nibbles(b + 2), _mm256_set1_epi8(8));
        store_i8x32_mul(y, q, _mm256_set1_ps(f16s(b)));
    }
}

static void dq_q4_1(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 20, y += 32)
        store_u8x32_mul_add(y, nibbles(b + 4), _mm256_set1_ps(f16s(b)),
                            _mm256_set1_ps(f16s(b + 2)));
}

static void dq_q5_0(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 22, y += 32) {
        __m256i q = _mm256_or_si256(nibbles(b + 6), qh_bits(tq_rd32(b + 2)));
        q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
        store_i8x32_mul(y, q, _mm256_set1_ps(f16s(b)));
    }
}

static void dq_q5_1(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 24, y += 32) {
        const __m256i q = _mm256_or_si256(nibbles(b + 8), qh_bits(tq_rd32(b + 4)));
        store_u8x32_mul_add(y, q, _mm256_set1_ps(f16s(b)), _mm256_set1_ps(f16s(b + 2)));
    }
}

static void dq_q8_0(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 34, y += 32)
        store_i8x32_mul(y, _mm256_loadu_si256((const __m256i *)(b + 2)), _mm256_set1_ps(f16s(b)));
}

static inline void scale_min_k4(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void dq_q4_k(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t i = 0; i < n / QK_K; i++, b += 144, y += QK_K) {
        const float d = f16s(b);
        const float dmin = f16s(b + 2);
        for (int j = 0; j < 4; j++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * j));
            for (int h = 0; h < 2; h++) {
                int s, m;
                scale_min_k4(2 * j + h, b + 4, &s, &m);
                const __m256i q = _mm256_and_si256(h ? _mm256_srli_epi16(v, 4) : v, m4);
                store_u8x32_mul_sub(y + 64 * j + 32 * h, q, _mm256_set1_ps(d * (float)s),
                                    _mm256_set1_ps(dmin * (float)m));
            }
        }
    }
}

static void dq_q5_k(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / QK_K; i++, b += 176, y += QK_K) {
        const float d = f16s(b);
        const float dmin = f16s(b + 2);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
        for (int j = 0; j < 4; j++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 48 + 32 * j));
            for (int h = 0; h < 2; h++) {
                const int g = 2 * j + h;
                int s, m;
                scale_min_k4(g, b + 4, &s, &m);
                __m256i q = _mm256_and_si256(h ? _mm256_srli_epi16(v, 4) : v, m4);
                /* bit g of each qh byte -> 0x10 (shift within 16-bit lanes, then mask per byte) */
                __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, g), one);
                q = _mm256_or_si256(q, _mm256_slli_epi16(hb, 4));
                store_u8x32_mul_sub(y + 32 * g, q, _mm256_set1_ps(d * (float)s),
                                    _mm256_set1_ps(dmin * (float)m));
            }
        }
    }
}

static void dq_q6_k(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i m2 = _mm256_set1_epi8(0x03);
    for (int64_t i = 0; i < n / QK_K; i++, b += 210, y += QK_K) {
        const int8_t *scales = (const int8_t *)(b + 192);
        const float d = f16s(b + 208);
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
            for (int k = 0; k < 4; k++) {
                const __m256i ql = (k & 1) ? ql1 : ql0;
                const __m256i lo = _mm256_and_si256(k >> 1 ? _mm256_srli_epi16(ql, 4) : ql, m4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m2);
                __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
                q = _mm256_sub_epi8(q, _mm256_set1_epi8(32));
                const int e = 128 * h + 32 * k;
                const __m128i q0 = _mm256_castsi256_si128(q);
                const __m128i q1 = _mm256_extracti128_si256(q, 1);
                const __m256 d0 = _mm256_set1_ps(d * (float)scales[e / 16]);
                const __m256 d1 = _mm256_set1_ps(d * (float)scales[e / 16 + 1]);
                _mm256_storeu_ps(y + e,
                                 _mm256_mul_ps(d0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0))));
                _mm256_storeu_ps(
                    y + e + 8, _mm256_mul_ps(d0, _mm256_cvtepi32_ps(
                                                     _mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8)))));
                _mm256_storeu_ps(y + e + 16,
                                 _mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1))));
                _mm256_storeu_ps(y + e + 24,
                                 _mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                                       _mm_srli_si128(q1, 8)))));
            }
        }
    }
}

static void dq_f16(const void *src, float *y, int64_t n)
{
    const uint8_t *p = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i)));
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
            for (int k = 0; k < 8; k++)
                y[i + k] = tq_f16_to_f32(tq_rd16(p + 2 * (i + k)));
        } else {
            _mm256_storeu_ps(y + i, x);
        }
    }
    for (; i < n; i++)
        y[i] = tq_f16_to_f32(tq_rd16(p + 2 * i));
}

static void dq_bf16(const void *src, float *y, int64_t n)
{
    const uint8_t *p = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++)
        y[i] = tq_bf16_to_f32(tq_rd16(p + 2 * i));
}

/* this file's row of kernels for the format table (cpu/formats_cpu.c); F32 has none: the
 * scalar copy is already memory-bound */
const tq_dequant_fn tq_dequant_avx2[TQ_FMT_LIMIT] = {
    [TQ_GGML_F16] = dq_f16,   [TQ_GGML_BF16] = dq_bf16, [TQ_GGML_Q4_0] = dq_q4_0,
    [TQ_GGML_Q4_1] = dq_q4_1, [TQ_GGML_Q5_0] = dq_q5_0, [TQ_GGML_Q5_1] = dq_q5_1,
    [TQ_GGML_Q8_0] = dq_q8_0, [TQ_GGML_Q4_K] = dq_q4_k, [TQ_GGML_Q5_K] = dq_q5_k,
    [TQ_GGML_Q6_K] = dq_q6_k,
};
