/* qdot_affine_avx512.c -- AVX-512 kernels of qdot_affine.h: the same bits as the scalar
 * specification (qdot_affine.c). Two 16-lane accumulators hold lanes 0-15 and 16-31 of the spec's
 * acc[32]; w = scale * q + bias is a multiply then an add (-ffp-contract=off), then one fused
 * multiply-add with x. Codes unpacked 32 at a time as in the AVX2 file; several tokens: the row
 * is decoded once into a stack buffer (k <= 8192). */
#include <immintrin.h>

#include "core/half.h"
#include "cpu/qdot_affine.h"

#define ROW_MAX 8192

static inline __m256i unpack32(const uint8_t *c, int bits)
{
    if (bits == 8)
        return _mm256_loadu_si256((const __m256i *)(const void *)c);
    if (bits == 4) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)c);
        const __m128i m = _mm_set1_epi8(0x0f);
        const __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
        return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
    }
    _Alignas(32) uint8_t q[32];
    const int cb = 4 * bits;
    const unsigned mask = (1u << bits) - 1u;
    for (int i = 0; i < 32; i++) {
        const int bit = i * bits, by = bit / 8;
        unsigned v = c[by];
        if (by + 1 < cb)
            v |= (unsigned)c[by + 1] << 8;
        q[i] = (uint8_t)((v >> (bit % 8)) & mask);
    }
    return _mm256_load_si256((const __m256i *)(const void *)q);
}

static inline __m512 cvt16(__m128i q16)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q16));
}

static inline void chunk_w(const uint8_t *c, int bits, __m512 s, __m512 b, __m512 *w)
{
    const __m256i q = unpack32(c, bits);
    w[0] = _mm512_add_ps(_mm512_mul_ps(s, cvt16(_mm256_castsi256_si128(q))), b);
    w[1] = _mm512_add_ps(_mm512_mul_ps(s, cvt16(_mm256_extracti128_si256(q, 1))), b);
}

static inline float finish(__m512 a0, __m512 a1)
{
    const __m256 x = _mm256_add_ps(_mm512_castps512_ps256(a0), _mm512_extractf32x8_ps(a0, 1));
    const __m256 y = _mm256_add_ps(_mm512_castps512_ps256(a1), _mm512_extractf32x8_ps(a1, 1));
    const __m256 v = _mm256_add_ps(x, y);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

static inline __m512 bf16v(const uint8_t *p)
{
    return _mm512_set1_ps(tq_bf16_to_f32(tq_rd16(p)));
}

static float dot_row(const uint8_t *row, const float *x, int64_t k, int bits, int group)
{
    const size_t cb = (size_t)group * (size_t)bits / 8;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int64_t blk = 0; blk < k / group; blk++, row += 4 + cb) {
        const __m512 s = bf16v(row), b = bf16v(row + 2);
        for (int c = 0; c < group / 32; c++, x += 32) {
            __m512 w[2];
            chunk_w(row + 4 + (size_t)c * 4 * (size_t)bits, bits, s, b, w);
            a0 = _mm512_fmadd_ps(w[0], _mm512_loadu_ps(x), a0);
            a1 = _mm512_fmadd_ps(w[1], _mm512_loadu_ps(x + 16), a1);
        }
    }
    return finish(a0, a1);
}

static void decode_row(const uint8_t *row, float *out, int64_t k, int bits, int group)
{
    const size_t cb = (size_t)group * (size_t)bits / 8;
    for (int64_t blk = 0; blk < k / group; blk++, row += 4 + cb) {
        const __m512 s = bf16v(row), b = bf16v(row + 2);
        for (int c = 0; c < group / 32; c++, out += 32) {
            __m512 w[2];
            chunk_w(row + 4 + (size_t)c * 4 * (size_t)bits, bits, s, b, w);
            _mm512_storeu_ps(out, w[0]);
            _mm512_storeu_ps(out + 16, w[1]);
        }
    }
}

static float dot_f(const float *w, const float *x, int64_t k)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int64_t e = 0; e < k; e += 32) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + e), _mm512_loadu_ps(x + e), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + e + 16), _mm512_loadu_ps(x + e + 16), a1);
    }
    return finish(a0, a1);
}

static void mv_f32(const void *w, size_t row_bytes, int64_t k, const float *x, int64_t ldx,
                   int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1, int bits, int group)
{
    _Alignas(64) float buf[ROW_MAX];
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * row_bytes;
        if (n > 1 && k <= ROW_MAX) {
            decode_row(row, buf, k, bits, group);
            for (int64_t t = 0; t < n; t++)
                y[t * ldy + r] = dot_f(buf, x + t * ldx, k);
        } else {
            for (int64_t t = 0; t < n; t++)
                y[t * ldy + r] = dot_row(row, x + t * ldx, k, bits, group);
        }
    }
}

TQ_AFFINE_TABLE(table, "avx512", TQ_ISA_AVX512)

const tq_affine_kernels *tq_affine_avx512_table(void)
{
    return &table;
}
