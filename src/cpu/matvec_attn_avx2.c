/* matvec_attn_avx2.c -- AVX2+FMA+F16C body of the engine's window attention (src/model/kvcache.c
 * holds the portable version and chooses; attn_cpu.h states the contract). One kv-head, G query
 * heads of one position, rows read in place (f32) or widened in registers (f16, bf16):
 *   1. scores: 8 keys at a time, for each head; key u's lane l is the FMA chain over
 *      d = l, l + 8, ... (the first term a plain product), lanes added as the balanced tree
 *      ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) by a transposing hadd tree; times scale;
 *   2. per head: the max, e = exp(s - max) by a polynomial, the sum in 8 lanes in key order, the
 *      same tree;
 *   3. per head: o[d] = FMA chain over the keys in order, times 1/sum.
 * Loop order (heads inside 8-key groups for K; 64-key blocks, heads in pairs, 32 dims for V) only
 * changes what is in cache: K and V are read once per call, and every float depends only on its
 * head's q and the window. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/attn_cpu.h"

static inline float tree8(__m256 v)
{
    const __m256 h = _mm256_hadd_ps(v, v);
    const __m256 h2 = _mm256_hadd_ps(h, h);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h2), _mm256_extractf128_ps(h2, 1)));
}

/* key u's lane sums in a[u] -> key u's tree8 sum in lane u */
static inline __m256 tree8x8(const __m256 *a)
{
    const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 x = _mm256_hadd_ps(h01, h23), y = _mm256_hadd_ps(h45, h67);
    return _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
}

/* 8 elements of a row at element offset i, as f32 (exact) */
static inline __m256 ld8(const void *row, int64_t i, tq_attn_rows rows)
{
    if (rows == TQ_ATTN_F32)
        return _mm256_loadu_ps((const float *)row + i);
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)row + i));
    if (rows == TQ_ATTN_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* exp(x) for x <= 0: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial, times 2^n built in the
 * exponent field (x clamped at -87, so n >= -126 and 2^n is normal) */
static inline __m256 exp256(__m256 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
                                                         _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* lanes >= live (0..8) of an 8-lane group: all ones */
static inline __m256 tail_mask(int64_t live)
{
    const __m256i lane = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)live), lane));
}

/* s[0..n) = exp(s - max) in place (lanes past n zeroed up to the next multiple of 8); returns
 * 1 / sum, the sum taken in 8 lanes in key order and added by the tree */
static float softmax8(float *s, int64_t n)
{
    __m256 mv = _mm256_set1_ps(-INFINITY);
    for (int64_t t = 0; t < n; t += 8)
        mv = _mm256_max_ps(mv, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_loadu_ps(s + t),
                                                tail_mask(n - t)));
    float mm[8], mx = -INFINITY;
    _mm256_storeu_ps(mm, mv);
    for (int l = 0; l < 8; l++)
        mx = mm[l] > mx ? mm[l] : mx;
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t t = 0; t < n; t += 8) {
        const __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_loadu_ps(s + t), vm)),
                                       tail_mask(n - t));
        _mm256_storeu_ps(s + t, e);
        acc = _mm256_add_ps(acc, e);
    }
    return 1.0f / tree8(acc);
}

static inline __attribute__((always_inline)) void
heads_body(const float *q, int G, const void *K, const void *V, tq_attn_rows rows,
           int64_t n_keys, int hd, float scale, float *sc, int64_t ldsc, float *out)
{
    const __m256 vs = _mm256_set1_ps(scale);
    /* 1. scores, 8 keys at a time; the key group stays in L1 across the heads */
    for (int64_t t = 0; t < n_keys; t += 8) {
        const int nk = n_keys - t < 8 ? (int)(n_keys - t) : 8;
        for (int h = 0; h < G; h++) {
            const float *qh = q + (size_t)h * hd;
            __m256 a[8];
            const __m256 q0 = _mm256_loadu_ps(qh);
            if (nk == 8) {
                #pragma GCC unroll 8
                for (int u = 0; u < 8; u++)
                    a[u] = _mm256_mul_ps(q0, ld8(K, (t + u) * hd, rows));
                for (int i = 8; i < hd; i += 8) {
                    const __m256 qi = _mm256_loadu_ps(qh + i);
                    #pragma GCC unroll 8
                    for (int u = 0; u < 8; u++)
                        a[u] = _mm256_fmadd_ps(qi, ld8(K, (t + u) * hd + i, rows), a[u]);
                }
            } else {
                #pragma GCC unroll 8
                for (int u = 0; u < 8; u++)
                    a[u] = u < nk ? _mm256_mul_ps(q0, ld8(K, (t + u) * hd, rows))
                                  : _mm256_setzero_ps();
                for (int i = 8; i < hd; i += 8) {
                    const __m256 qi = _mm256_loadu_ps(qh + i);
                    #pragma GCC unroll 8
                    for (int u = 0; u < nk; u++)
                        a[u] = _mm256_fmadd_ps(qi, ld8(K, (t + u) * hd + i, rows), a[u]);
                }
            }
            _mm256_storeu_ps(sc + h * ldsc + t, _mm256_mul_ps(tree8x8(a), vs));
        }
    }
    /* 2. softmax weights and 1/sum per head (inv: the last slot of the head's score row) */
    for (int h = 0; h < G; h++)
        sc[h * ldsc + ldsc - 1] = softmax8(sc + h * ldsc, n_keys);
    /* 3. weighted values, accumulated in out: blocks of 64 keys (kept in L1 across the heads and
     * dims), heads in pairs, 32 dims at a time in registers; per element still one FMA chain
     * over the keys in order */
    for (int e = 0; e < G * hd; e++)
        out[e] = 0.0f;
    for (int64_t t0 = 0; t0 < n_keys; t0 += 64) {
        const int64_t t1 = n_keys - t0 < 64 ? n_keys : t0 + 64;
        for (int h = 0; h < G; h += 2) {
            const int two = h + 1 < G;
            const float *w0 = sc + h * ldsc, *w1 = sc + (h + two) * ldsc;
            float *a0 = out + (size_t)h * hd, *a1 = out + (size_t)(h + two) * hd;
            for (int d = 0; d < hd; d += 32) {
                const int nv = hd - d < 32 ? (hd - d) / 8 : 4;
                __m256 o0[4], o1[4];
#pragma GCC unroll 4
                for (int u = 0; u < 4; u++) {
                    o0[u] = u < nv ? _mm256_loadu_ps(a0 + d + 8 * u) : _mm256_setzero_ps();
                    o1[u] = u < nv ? _mm256_loadu_ps(a1 + d + 8 * u) : _mm256_setzero_ps();
                }
                for (int64_t t = t0; t < t1; t++) {
                    const __m256 p0 = _mm256_set1_ps(w0[t]), p1 = _mm256_set1_ps(w1[t]);
#pragma GCC unroll 4
                    for (int u = 0; u < nv; u++) {
                        const __m256 v = ld8(V, t * hd + d + 8 * u, rows);
                        o0[u] = _mm256_fmadd_ps(p0, v, o0[u]);
                        if (two)
                            o1[u] = _mm256_fmadd_ps(p1, v, o1[u]);
                    }
                }
#pragma GCC unroll 4
                for (int u = 0; u < nv; u++) {
                    _mm256_storeu_ps(a0 + d + 8 * u, o0[u]);
                    if (two)
                        _mm256_storeu_ps(a1 + d + 8 * u, o1[u]);
                }
            }
        }
    }
    for (int h = 0; h < G; h++) {
        const __m256 inv = _mm256_set1_ps(sc[h * ldsc + ldsc - 1]);
        for (int d = 0; d < hd; d += 8)
            _mm256_storeu_ps(out + (size_t)h * hd + d,
                             _mm256_mul_ps(_mm256_loadu_ps(out + (size_t)h * hd + d), inv));
    }
}

void tq_attn_heads_avx2(const float *q, int G, const void *K, const void *V, tq_attn_rows rows,
                        int64_t n_keys, int hd, float scale, float *sc, int64_t ldsc, float *out)
{
    switch (rows) {
    case TQ_ATTN_F16: heads_body(q, G, K, V, TQ_ATTN_F16, n_keys, hd, scale, sc, ldsc, out); break;
    case TQ_ATTN_BF16: heads_body(q, G, K, V, TQ_ATTN_BF16, n_keys, hd, scale, sc, ldsc, out); break;
    default: heads_body(q, G, K, V, TQ_ATTN_F32, n_keys, hd, scale, sc, ldsc, out); break;
    }
}
