/* attn_rot_avx2.c -- AVX2+FMA+F16C kernels of the fused rot: attention (attn_rot.h; the scalar
 * spec is attn_rot.c). dec(): the same float products as the spec; pair codes are cut from the
 * bitstream 8 pairs at a time (8 pairs fill exactly pb bytes: byte shuffle + variable shift),
 * split into (i0, i1) by a float division that is exact for codes < 2^16, looked up by two
 * permutes (L <= 16), or one 64-bit gather lane per pair from the pair table (tq_rot_code.pairs).
 * block(): 8-lane float dot products (8 keys reduced together), a polynomial e^x
 * (|rel err| < 3e-7), value sums 64 dims at a time in registers. d is a multiple of 64. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "core/half.h"
#include "cpu/attn_rot.h"

void tq_attn_rot_dec_block_scalar(const tq_rot_code *c, const uint8_t *b, float *y);

static __m256i pair_shuffle(int pb, __m256i *shifts)
{
    uint8_t ctl[32];
    int32_t sh[8];
    for (int i = 0; i < 8; i++) {
        const int bit = i * pb, o = bit >> 3;
        sh[i] = bit & 7;
        for (int b = 0; b < 4; b++)
            ctl[4 * i + b] = (uint8_t)(b < 3 && o + b < 16 ? o + b : 0x80);
    }
    *shifts = _mm256_loadu_si256((const __m256i *)(const void *)sh);
    return _mm256_loadu_si256((const __m256i *)(const void *)ctl);
}

static inline __m256 lookup(const tq_rot_code *c, __m256i i, __m256 t0, __m256 t1)
{
    if (c->levels <= 8)
        return _mm256_permutevar8x32_ps(t0, i);
    if (c->levels <= 16) {
        const __m256 a = _mm256_permutevar8x32_ps(t0, i), b = _mm256_permutevar8x32_ps(t1, i);
        const __m256 hi = _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)); /* bit 3 -> sign */
        return _mm256_blendv_ps(a, b, hi);
    }
    return _mm256_i32gather_ps(c->grid, i, 4);
}

static void dec_lm(const tq_rot_code *c, const uint8_t *src, size_t rb, int n, int d, float *out)
{
    const int L = c->levels, pb = c->pair_bits, G = c->group, bb = c->block_bytes;
    __m256i shifts;
    const __m256i ctl = pair_shuffle(pb, &shifts);
    const __m256i mask = _mm256_set1_epi32((1 << pb) - 1), vL = _mm256_set1_epi32(L);
    const __m256i lmax = _mm256_set1_epi32(L - 1);
    const __m256 invL = _mm256_set1_ps(1.0f / (float)L), half = _mm256_set1_ps(0.5f);
    float g16[16] = {0};
    memcpy(g16, c->grid, (size_t)(L < 16 ? L : 16) * sizeof(float));
    const __m256 t0 = _mm256_loadu_ps(g16), t1 = _mm256_loadu_ps(g16 + 8);
    const long long *pairs = (const long long *)(const void *)c->pairs;
    const uint8_t *end = src + (size_t)n * rb;
    for (int r = 0; r < n; r++) {
        const uint8_t *row = src + (size_t)r * rb;
        for (int o = 0; o < d; o += G) {
            const uint8_t *b = row + (size_t)(o / G) * bb;
            const __m256 s = _mm256_set1_ps(tq_f16_to_f32(tq_rd16(b)));
            float *y = out + (size_t)r * d + o;
            for (int p0 = 0; p0 < G / 2; p0 += 8) {
                const uint8_t *w = b + 2 + (size_t)(p0 / 8) * pb;
                __m128i x;
                if (w + 16 <= end) {
                    x = _mm_loadu_si128((const __m128i *)(const void *)w);
                } else { /* the last row of the view: no read past it */
                    uint8_t tmp[16] = {0};
                    memcpy(tmp, w, (size_t)pb);
                    x = _mm_loadu_si128((const __m128i *)(const void *)tmp);
                }
                __m256i v = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(x), ctl);
                v = _mm256_and_si256(_mm256_srlv_epi32(v, shifts), mask);
                if (pairs) { /* 4 pairs (8 floats, in order) per 64-bit gather */
                    const __m256i g0 = _mm256_i32gather_epi64(pairs, _mm256_castsi256_si128(v), 8);
                    const __m256i g1 =
                        _mm256_i32gather_epi64(pairs, _mm256_extracti128_si256(v, 1), 8);
                    _mm256_storeu_ps(y + 2 * p0, _mm256_mul_ps(_mm256_castsi256_ps(g0), s));
                    _mm256_storeu_ps(y + 2 * p0 + 8, _mm256_mul_ps(_mm256_castsi256_ps(g1), s));
                    continue;
                }
                const __m256 f = _mm256_add_ps(_mm256_cvtepi32_ps(v), half);
                __m256i i1 = _mm256_cvttps_epi32(_mm256_mul_ps(f, invL));
                const __m256i i0 = _mm256_sub_epi32(v, _mm256_mullo_epi32(i1, vL));
                i1 = _mm256_min_epi32(i1, lmax);
                const __m256 a = _mm256_mul_ps(lookup(c, i0, t0, t1), s);
                const __m256 bq = _mm256_mul_ps(lookup(c, i1, t0, t1), s);
                const __m256 lo = _mm256_unpacklo_ps(a, bq), hi = _mm256_unpackhi_ps(a, bq);
                _mm256_storeu_ps(y + 2 * p0, _mm256_permute2f128_ps(lo, hi, 0x20));
                _mm256_storeu_ps(y + 2 * p0 + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
            }
        }
    }
}

static void dec256(const tq_rot_code *c, const uint8_t *src, size_t rb, int n, int d, float *out)
{
    if (c->kind == TQ_ROTC_LM) {
        dec_lm(c, src, rb, n, d, out);
        return;
    }
    for (int r = 0; r < n; r++) {
        const uint8_t *row = src + (size_t)r * rb;
        for (int o = 0; o < d; o += 32) {
            const uint8_t *b = row + (size_t)(o / 32) * c->block_bytes;
            float *y = out + (size_t)r * d + o;
            const __m256 s = _mm256_set1_ps(tq_f16_to_f32(tq_rd16(b)));
            if (c->kind == TQ_ROTC_Q8_0) {
                for (int h = 0; h < 4; h++) {
                    const __m128i q = _mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + 8 * h));
                    _mm256_storeu_ps(y + 8 * h,
                                     _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), s));
                }
            } else if (c->kind == TQ_ROTC_Q4_0) {
                const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + 2));
                const __m128i m = _mm_set1_epi8(15), e8 = _mm_set1_epi8(8);
                const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, m), e8);
                const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m), e8);
                const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
                for (int h = 0; h < 4; h++)
                    _mm256_storeu_ps(y + 8 * h,
                                     _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part[h])), s));
            } else {
                tq_attn_rot_dec_block_scalar(c, b, y);
            }
        }
    }
}

/* e^x for x <= 0, as the AVX-512 kernel: 2^n e^r, Taylor to degree 7; 2^n built in the
 * exponent bits (n >= -126 after the clamp) */
static inline __m256 exp256(__m256 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
                                                         _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* sc[k] = scale * dot(q, K[k]) for the 8 keys k0.. (rows past nv - 1 read row nv - 1; their
 * scores are replaced by the caller): one accumulator per key, reduced together by a tree of
 * horizontal adds (3 per key instead of a whole horizontal sum per key) */
static inline void dots8(const float *q, const float *K, int k0, int nv, int d, float scale,
                         float *sc)
{
    const float *r[8];
    for (int u = 0; u < 8; u++)
        r[u] = K + (size_t)(k0 + u < nv ? k0 + u : nv - 1) * d;
    __m256 a[8];
    for (int u = 0; u < 8; u++)
        a[u] = _mm256_setzero_ps();
    for (int c = 0; c < d; c += 8) {
        const __m256 qv = _mm256_loadu_ps(q + c);
        for (int u = 0; u < 8; u++)
            a[u] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r[u] + c), a[u]);
    }
    const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    const __m256 sum = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                                     _mm256_permute2f128_ps(u0, u1, 0x31));
    _mm256_storeu_ps(sc + k0, _mm256_mul_ps(_mm256_set1_ps(scale), sum));
}

static void block256(const float *q, const float *K, const float *V, int nv, int d, float scale,
                     float *S, float *sc)
{
    for (int k0 = 0; k0 < nv; k0 += 8)
        dots8(q, K, k0, nv, d, scale, sc);
    for (int k = nv; k < TQ_ROT_KB; k++)
        sc[k] = -INFINITY;
    float bm = -INFINITY;
    for (int k = 0; k < nv; k++)
        bm = sc[k] > bm ? sc[k] : bm;
    float *acc = S + 2;
    const float mn = bm > S[0] ? bm : S[0];
    if (mn > S[0] && S[1] != 0.0f) {
        const float corr = expf(S[0] - mn);
        S[1] *= corr;
        const __m256 vc = _mm256_set1_ps(corr);
        for (int j = 0; j < d; j += 8)
            _mm256_storeu_ps(acc + j, _mm256_mul_ps(vc, _mm256_loadu_ps(acc + j)));
    }
    S[0] = mn;
    const __m256 vm = _mm256_set1_ps(mn);
    for (int k = 0; k < TQ_ROT_KB; k += 8)
        _mm256_storeu_ps(sc + k, exp256(_mm256_sub_ps(_mm256_loadu_ps(sc + k), vm)));
    float l = S[1];
    for (int k = 0; k < nv; k++)
        l += sc[k];
    S[1] = l;
    for (int c = 0; c < d; c += 64) {
        __m256 a[8];
        for (int u = 0; u < 8; u++)
            a[u] = _mm256_loadu_ps(acc + c + 8 * u);
        for (int k = 0; k < nv; k++) {
            const __m256 w = _mm256_set1_ps(sc[k]);
            const float *v = V + (size_t)k * d + c;
            for (int u = 0; u < 8; u++)
                a[u] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * u), a[u]);
        }
        for (int u = 0; u < 8; u++)
            _mm256_storeu_ps(acc + c + 8 * u, a[u]);
    }
}

const tq_attn_rot_kernels tq_attn_rot_avx2 = {"avx2", dec256, block256};
