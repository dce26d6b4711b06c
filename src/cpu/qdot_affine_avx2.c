/* qdot_affine_avx2.c -- AVX2 + FMA kernels of qdot_affine.h: the same bits as the scalar
 * specification (qdot_affine.c). Four 8-lane accumulators hold lanes 0-7, 8-15, 16-23, 24-31 of
 * the spec's acc[32]; w = scale * q + bias is a multiply then an add (the library builds with
 * -ffp-contract=off), then one fused multiply-add with x, as fmaf(). Codes are unpacked 32 at a
 * time (a 32-value chunk of a group is 4 * bits bytes): 8 and 4 bits with vector shuffles, the
 * other widths by 16-bit reads. Several tokens: the row is decoded once into a stack buffer
 * (k <= 8192) and every token meets the same floats. */
#include <immintrin.h>

#include "core/half.h"
#include "cpu/qdot_affine.h"

#define ROW_MAX 8192

/* the 32 codes of a chunk as bytes */
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

static inline __m256 cvt8(__m128i q8)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q8));
}

/* w of one chunk: four vectors of 8 */
static inline void chunk_w(const uint8_t *c, int bits, __m256 s, __m256 b, __m256 *w)
{
    const __m256i q = unpack32(c, bits);
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    w[0] = _mm256_add_ps(_mm256_mul_ps(s, cvt8(lo)), b);
    w[1] = _mm256_add_ps(_mm256_mul_ps(s, cvt8(_mm_srli_si128(lo, 8))), b);
    w[2] = _mm256_add_ps(_mm256_mul_ps(s, cvt8(hi)), b);
    w[3] = _mm256_add_ps(_mm256_mul_ps(s, cvt8(_mm_srli_si128(hi, 8))), b);
}

static inline float finish(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    const __m256 v = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s4, _mm_movehl_ps(s4, s4)); /* (s0 + s2, s1 + s3) */
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

static inline __m256 bf16v(const uint8_t *p)
{
    return _mm256_set1_ps(tq_bf16_to_f32(tq_rd16(p)));
}

static float dot_row(const uint8_t *row, const float *x, int64_t k, int bits, int group)
{
    const size_t cb = (size_t)group * (size_t)bits / 8;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t blk = 0; blk < k / group; blk++, row += 4 + cb) {
        const __m256 s = bf16v(row), b = bf16v(row + 2);
        for (int c = 0; c < group / 32; c++, x += 32) {
            __m256 w[4];
            chunk_w(row + 4 + (size_t)c * 4 * (size_t)bits, bits, s, b, w);
            a0 = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(x), a0);
            a1 = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(x + 8), a1);
            a2 = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(x + 16), a2);
            a3 = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(x + 24), a3);
        }
    }
    return finish(a0, a1, a2, a3);
}

static void decode_row(const uint8_t *row, float *out, int64_t k, int bits, int group)
{
    const size_t cb = (size_t)group * (size_t)bits / 8;
    for (int64_t blk = 0; blk < k / group; blk++, row += 4 + cb) {
        const __m256 s = bf16v(row), b = bf16v(row + 2);
        for (int c = 0; c < group / 32; c++, out += 32) {
            __m256 w[4];
            chunk_w(row + 4 + (size_t)c * 4 * (size_t)bits, bits, s, b, w);
            for (int i = 0; i < 4; i++)
                _mm256_storeu_ps(out + 8 * i, w[i]);
        }
    }
}

static float dot_f(const float *w, const float *x, int64_t k)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t e = 0; e < k; e += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + e), _mm256_loadu_ps(x + e), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + e + 8), _mm256_loadu_ps(x + e + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + e + 16), _mm256_loadu_ps(x + e + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + e + 24), _mm256_loadu_ps(x + e + 24), a3);
    }
    return finish(a0, a1, a2, a3);
}

static void mv_f32(const void *w, size_t row_bytes, int64_t k, const float *x, int64_t ldx,
                   int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1, int bits, int group)
{
    _Alignas(32) float buf[ROW_MAX];
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

TQ_AFFINE_TABLE(table, "avx2", TQ_ISA_AVX2)

const tq_affine_kernels *tq_affine_avx2_table(void)
{
    return &table;
}
