/* attn_rot_avx512.c -- AVX-512 kernels of the fused rot: attention (attn_rot.h; the scalar spec
 * is attn_rot.c). dec(): the same float products as the spec (so the same values); pair codes
 * are cut from the bitstream 16 pairs at a time (byte shuffle + variable shift), split into
 * (i0, i1) by a float division that is exact for codes < 2^16, looked up by permutes (L <= 128) or
 * 8-lane gathers. block(): 16-lane float dot products, a polynomial e^x (|rel err| < 3e-7), value
 * sums 64 dims at a time in registers. d is a multiple of 64. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "core/half.h"
#include "cpu/attn_rot.h"

void tq_attn_rot_dec_block_scalar(const tq_rot_code *c, const uint8_t *b, float *y);

/* shuffle control putting bytes [o, o+2] of pair i (o = i*pb/8) into 32-bit lane i % 4 of the
 * 128-bit lane holding pairs 4*(i/4).. (relative to that lane's first byte 0 = group start) */
static __m512i pair_shuffle(int pb, __m512i *shifts)
{
    uint8_t ctl[64];
    int32_t sh[16];
    for (int i = 0; i < 16; i++) {
        const int pi = i % 8, bit = pi * pb, o = bit >> 3;
        sh[i] = bit & 7;
        for (int b = 0; b < 4; b++) {
            const int idx = o + b;
            ctl[4 * i + b] = (uint8_t)(b < 3 && idx < 16 ? idx : 0x80);
        }
    }
    *shifts = _mm512_loadu_si512(sh);
    return _mm512_loadu_si512(ctl);
}

/* grid[i] for 16 indices i < L: L <= 16 one permute, L <= 128 a tree of two-table permutes
 * (np pairs of 16-float tables, picked by index bits 5 and 6), else two 8-lane gathers (on a
 * Sapphire Rapids class Xeon, ns per 64-value row with L = 181: tree of 6 pairs 33, one 16-lane
 * gather 47, two 8-lane gathers 27; L = 128: tree 25, gathers 27). Exact table values. */
static inline __attribute__((always_inline)) __m512 lookup(int L, int np, __m512i i,
                                                             const __m512 *t, const float *grid)
{
    if (L <= 16)
        return _mm512_permutexvar_ps(i, t[0]);
    if (np > 4) { /* two 8-lane gathers */
        const __m256 lo = _mm256_i32gather_ps(grid, _mm512_castsi512_si256(i), 4);
        const __m256 hi = _mm256_i32gather_ps(grid, _mm512_extracti64x4_epi64(i, 1), 4);
        return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    }
    __m512 p[4];
    for (int k = 0; k < np; k++)
        p[k] = _mm512_permutex2var_ps(t[2 * k], i, t[2 * k + 1]);
    if (np == 1)
        return p[0];
    const __mmask16 b5 = _mm512_test_epi32_mask(i, _mm512_set1_epi32(32));
    for (int k = 0; k + 1 < np; k += 2)
        p[k / 2] = _mm512_mask_blend_ps(b5, p[k], p[k + 1]);
    if (np == 2)
        return p[0];
    const __mmask16 b6 = _mm512_test_epi32_mask(i, _mm512_set1_epi32(64));
    return _mm512_mask_blend_ps(b6, p[0], np == 3 ? p[2] : p[1]);
}

static inline __attribute__((always_inline)) void
dec_lm_np(const tq_rot_code *c, const uint8_t *src, size_t rb, int n, int d, float *out,
          const int np)
{
    const int L = c->levels, pb = c->pair_bits, G = c->group, bb = c->block_bytes;
    __m512i shifts;
    const __m512i ctl = pair_shuffle(pb, &shifts);
    const __m512i mask = _mm512_set1_epi32((1 << pb) - 1), vL = _mm512_set1_epi32(L);
    const __m512i lmax = _mm512_set1_epi32(L - 1);
    int lg = 0; /* log2 L when L is a power of two whose pair codes fill pb bits exactly */
    while (lg < 8 && (1 << lg) < L)
        lg++;
    if ((1 << lg) != L || 2 * lg != pb)
        lg = 0;
    const __m512 invL = _mm512_set1_ps(1.0f / (float)L), half = _mm512_set1_ps(0.5f);
    __m512 t[8];
    for (int k = 0; k < 2 * np && k < 8; k++) {
        const int rem = L - 16 * k;
        t[k] = rem <= 0 ? _mm512_setzero_ps()
                        : _mm512_maskz_loadu_ps((__mmask16)(rem >= 16 ? 0xffff : (1u << rem) - 1u),
                                                c->grid + 16 * k);
    }
    const __m512i ilo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i ihi =
        _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const long long *pairs = (const long long *)(const void *)c->pairs;
    const uint8_t *end = src + (size_t)n * rb;
    for (int r = 0; r < n; r++) {
        const uint8_t *row = src + (size_t)r * rb;
        for (int o = 0; o < d; o += G) {
            const uint8_t *b = row + (size_t)(o / G) * bb;
            const __m512 s = _mm512_set1_ps(tq_f16_to_f32(tq_rd16(b)));
            float *y = out + (size_t)r * d + o;
            for (int p0 = 0; p0 < G / 2; p0 += 16) {
                /* 8 pairs fill exactly pb bytes: 16 pairs = two windows of 16 bytes */
                const uint8_t *w0 = b + 2 + (size_t)(p0 / 8) * pb, *w1 = w0 + pb;
                __m128i x0, x1;
                if (w1 + 16 <= end) {
                    x0 = _mm_loadu_si128((const __m128i *)(const void *)w0);
                    x1 = _mm_loadu_si128((const __m128i *)(const void *)w1);
                } else { /* the last row of the view: no read past it */
                    uint8_t tmp[32] = {0};
                    memcpy(tmp, w0, (size_t)2 * pb);
                    x0 = _mm_loadu_si128((const __m128i *)(const void *)tmp);
                    x1 = _mm_loadu_si128((const __m128i *)(const void *)(tmp + pb));
                }
                const __m256i y0 = _mm256_broadcastsi128_si256(x0);
                const __m256i y1 = _mm256_broadcastsi128_si256(x1);
                __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(y0), y1, 1);
                v = _mm512_shuffle_epi8(v, ctl);
                v = _mm512_and_si512(_mm512_srlv_epi32(v, shifts), mask);
                if (np < 0) { /* the pair table: 8 pairs (16 floats, in order) per gather */
                    const __m512i g0 = _mm512_i32gather_epi64(_mm512_castsi512_si256(v), pairs, 8);
                    const __m512i g1 = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(v, 1), pairs, 8);
                    _mm512_storeu_ps(y + 2 * p0, _mm512_mul_ps(_mm512_castsi512_ps(g0), s));
                    _mm512_storeu_ps(y + 2 * p0 + 16, _mm512_mul_ps(_mm512_castsi512_ps(g1), s));
                    continue;
                }
                __m512i i0, i1;
                if (lg > 0) { /* L = 2^lg: pb = 2 lg, so v < L * L and no clamp is needed */
                    i0 = _mm512_and_si512(v, lmax);
                    i1 = _mm512_srli_epi32(v, (unsigned)lg);
                } else {
                    const __m512 f = _mm512_add_ps(_mm512_cvtepi32_ps(v), half);
                    i1 = _mm512_cvttps_epi32(_mm512_mul_ps(f, invL));
                    i0 = _mm512_sub_epi32(v, _mm512_mullo_epi32(i1, vL));
                    i1 = _mm512_min_epi32(i1, lmax);
                }
                const __m512 a = _mm512_mul_ps(lookup(L, np, i0, t, c->grid), s);
                const __m512 bq = _mm512_mul_ps(lookup(L, np, i1, t, c->grid), s);
                _mm512_storeu_ps(y + 2 * p0, _mm512_permutex2var_ps(a, ilo, bq));
                _mm512_storeu_ps(y + 2 * p0 + 16, _mm512_permutex2var_ps(a, ihi, bq));
            }
        }
    }
}

/* one copy per table count, so the tables stay in registers */
static void dec_lm(const tq_rot_code *c, const uint8_t *src, size_t rb, int n, int d, float *out)
{
    if (c->pairs && c->levels > 32) { /* L <= 32: one permute per 16 values is cheaper */
        dec_lm_np(c, src, rb, n, d, out, -1);
        return;
    }
    switch ((c->levels + 31) / 32) {
    case 1:
        dec_lm_np(c, src, rb, n, d, out, 1);
        return;
    case 2:
        dec_lm_np(c, src, rb, n, d, out, 2);
        return;
    case 3:
        dec_lm_np(c, src, rb, n, d, out, 3);
        return;
    case 4:
        dec_lm_np(c, src, rb, n, d, out, 4);
        return;
    default:
        dec_lm_np(c, src, rb, n, d, out, 5);
        return;
    }
}

static void dec512(const tq_rot_code *c, const uint8_t *src, size_t rb, int n, int d, float *out)
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
            const __m512 s = _mm512_set1_ps(tq_f16_to_f32(tq_rd16(b)));
            if (c->kind == TQ_ROTC_Q8_0) {
                for (int h = 0; h < 2; h++) {
                    const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + 2 + 16 * h));
                    _mm512_storeu_ps(y + 16 * h,
                                     _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), s));
                }
            } else if (c->kind == TQ_ROTC_Q4_0) {
                const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + 2));
                const __m128i m = _mm_set1_epi8(15), e8 = _mm_set1_epi8(8);
                const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, m), e8);
                const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m), e8);
                _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), s));
                _mm512_storeu_ps(y + 16,
                                 _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), s));
            } else {
                tq_attn_rot_dec_block_scalar(c, b, y);
            }
        }
    }
}

/* e^x for x <= 0: 2^n e^r, n = rint(x log2 e), r = x - n ln2 (two-part ln2), e^r by Taylor to
 * degree 7 (|r| <= 0.35: truncation < 1e-8); x < -87 gives 2^-126-ish, weight 0 in effect */
static inline __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* sc[k] = scale * dot(q, K[k]) for the 16 keys k0.. (rows past nv - 1 read row nv - 1; their
 * scores are replaced by the caller): one accumulator per key, the 16 reduced together by a
 * transposing tree (about 3 operations per key instead of a whole reduce_add per key) */
static inline void dots16(const float *q, const float *K, int k0, int nv, int d, float scale,
                          float *sc)
{
    const float *r[16];
    for (int u = 0; u < 16; u++)
        r[u] = K + (size_t)(k0 + u < nv ? k0 + u : nv - 1) * d;
    __m512 a[16];
    for (int u = 0; u < 16; u++)
        a[u] = _mm512_setzero_ps();
    for (int c = 0; c < d; c += 16) {
        const __m512 qv = _mm512_loadu_ps(q + c);
        for (int u = 0; u < 16; u++)
            a[u] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(r[u] + c), a[u]);
    }
    /* pairs: per 128-bit lane [a0+a2, b0+b2, a1+a3, b1+b3] */
    __m512 x[8];
    for (int u = 0; u < 8; u++)
        x[u] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * u], a[2 * u + 1]),
                             _mm512_unpackhi_ps(a[2 * u], a[2 * u + 1]));
    /* quads: per 128-bit lane the lane sums of keys 4u..4u+3 */
    __m512 v[4];
    for (int u = 0; u < 4; u++) {
        const __m512d p = _mm512_castps_pd(x[2 * u]), o = _mm512_castps_pd(x[2 * u + 1]);
        v[u] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(p, o)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(p, o)));
    }
    /* across the four 128-bit lanes */
    const __m512 p0 = _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512 p1 = _mm512_add_ps(_mm512_shuffle_f32x4(v[2], v[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_f32x4(v[2], v[3], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512 sum = _mm512_add_ps(_mm512_shuffle_f32x4(p0, p1, _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_f32x4(p0, p1, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_ps(sc + k0, _mm512_mul_ps(_mm512_set1_ps(scale), sum));
}

static void block512(const float *q, const float *K, const float *V, int nv, int d, float scale,
                     float *S, float *sc)
{
    for (int k0 = 0; k0 < nv; k0 += 16)
        dots16(q, K, k0, nv, d, scale, sc);
    for (int k = nv; k < TQ_ROT_KB; k++)
        sc[k] = -INFINITY;
    const __m512 s0 = _mm512_loadu_ps(sc), s1 = _mm512_loadu_ps(sc + 16);
    const float bm = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1));
    float *acc = S + 2;
    const float mn = bm > S[0] ? bm : S[0];
    if (mn > S[0] && S[1] != 0.0f) {
        const float corr = expf(S[0] - mn);
        S[1] *= corr;
        const __m512 vc = _mm512_set1_ps(corr);
        for (int j = 0; j < d; j += 16)
            _mm512_storeu_ps(acc + j, _mm512_mul_ps(vc, _mm512_loadu_ps(acc + j)));
    }
    S[0] = mn;
    const __m512 vm = _mm512_set1_ps(mn);
    const __m512 p0 = exp512(_mm512_sub_ps(s0, vm)), p1 = exp512(_mm512_sub_ps(s1, vm));
    _mm512_storeu_ps(sc, p0); /* the weights replace the scores (-inf lanes give 0) */
    _mm512_storeu_ps(sc + 16, p1);
    float l = S[1];
    for (int k = 0; k < nv; k++)
        l += sc[k];
    S[1] = l;
    for (int c = 0; c < d; c += 64) {
        __m512 a0 = _mm512_loadu_ps(acc + c), a1 = _mm512_loadu_ps(acc + c + 16);
        __m512 a2 = _mm512_loadu_ps(acc + c + 32), a3 = _mm512_loadu_ps(acc + c + 48);
        for (int k = 0; k < nv; k++) {
            const __m512 w = _mm512_set1_ps(sc[k]);
            const float *v = V + (size_t)k * d + c;
            a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v), a0);
            a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 16), a1);
            a2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 32), a2);
            a3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 48), a3);
        }
        _mm512_storeu_ps(acc + c, a0);
        _mm512_storeu_ps(acc + c + 16, a1);
        _mm512_storeu_ps(acc + c + 32, a2);
        _mm512_storeu_ps(acc + c + 48, a3);
    }
}

const tq_attn_rot_kernels tq_attn_rot_avx512 = {"avx512", dec512, block512};
