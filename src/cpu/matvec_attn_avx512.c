/* matvec_attn_avx512.c -- AVX-512 bodies of the engine's f32 attention over a window of f32 K/V
 * rows (src/model/kvcache.c holds the portable version and chooses). One query row:
 *     out = softmax(scale * q K^T) V      over n_keys rows of K and V (row stride hd)
 * Two ways to get the scores, both with a fixed operation order:
 *   - row form (decode): per key a 16-lane FMA chain over head_dim, then a reduction;
 *   - transposed form (prefill): the window's K is transposed once per work unit into Kt
 *     (head_dim x ldt), and 64 keys at a time get their scores as sums over d of q[d] * Kt[d]
 *     (no reductions; four independent chains).
 * Then exp (a vector exp, |rel err| < 2e-7, the same in both forms) after subtracting the max,
 * the sum in key order, and V accumulated with 16-lane FMAs, divided by the sum at the end.
 * head_dim must be a multiple of 16 (the caller checks). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/matvec.h"

/* exp(x) for x <= 0 (x = score - max): x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial, times
 * 2^n by vscalefps (underflows to 0 below about -87). */
static inline __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-100.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* sc[0..n) = exp(sc - mx) in place, returns the sum (16-lane partial sums, fixed order) */
static float exp_sum(float *sc, int64_t n, float mx)
{
    const __m512 m = _mm512_set1_ps(mx);
    __m512 acc = _mm512_setzero_ps();
    int64_t t = 0;
    for (; t + 16 <= n; t += 16) {
        const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(sc + t), m));
        _mm512_storeu_ps(sc + t, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (t < n) {
        const __mmask16 k = (__mmask16)((1u << (n - t)) - 1);
        const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, sc + t), m));
        _mm512_mask_storeu_ps(sc + t, k, e);
        acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(k, e));
    }
    return _mm512_reduce_add_ps(acc);
}

/* out = (sum_t sc[t] V[t]) / sum */
static void weighted_v(const float *V, int64_t n_keys, int hd, const float *sc, float sum,
                       float *out)
{
    const __m512 iv = _mm512_set1_ps(1.0f / sum);
    for (int d = 0; d < hd; d += 64) {
        const int w = hd - d < 64 ? hd - d : 64;
        __m512 o0 = _mm512_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
        for (int64_t t = 0; t < n_keys; t++) {
            const __m512 p = _mm512_set1_ps(sc[t]);
            const float *v = V + t * hd + d;
            o0 = _mm512_fmadd_ps(p, _mm512_loadu_ps(v), o0);
            if (w > 16)
                o1 = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 16), o1);
            if (w > 32)
                o2 = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 32), o2);
            if (w > 48)
                o3 = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 48), o3);
        }
        _mm512_storeu_ps(out + d, _mm512_mul_ps(o0, iv));
        if (w > 16)
            _mm512_storeu_ps(out + d + 16, _mm512_mul_ps(o1, iv));
        if (w > 32)
            _mm512_storeu_ps(out + d + 32, _mm512_mul_ps(o2, iv));
        if (w > 48)
            _mm512_storeu_ps(out + d + 48, _mm512_mul_ps(o3, iv));
    }
}

void tq_attn_row_avx512(const float *q, const float *K, const float *V, int64_t n_keys, int hd,
                        float scale, float *sc, float *out)
{
    float mx = -INFINITY;
    if (hd == 64) {
        const __m512 q0 = _mm512_loadu_ps(q), q1 = _mm512_loadu_ps(q + 16);
        const __m512 q2 = _mm512_loadu_ps(q + 32), q3 = _mm512_loadu_ps(q + 48);
        const __m512 sv = _mm512_set1_ps(scale);
        __m512 mxv = _mm512_set1_ps(-INFINITY);
        int64_t t = 0;
        /* 16 keys at a time: one partial vector per key, then a transposing pairwise-add tree
         * puts key u's sum in lane u (3 ops per key instead of a full reduction each) */
        for (; t + 16 <= n_keys; t += 16) {
            __m512 a[16];
            for (int u = 0; u < 16; u++) {
                const float *k = K + (t + u) * 64;
                __m512 x = _mm512_mul_ps(q0, _mm512_loadu_ps(k));
                __m512 y = _mm512_mul_ps(q1, _mm512_loadu_ps(k + 16));
                x = _mm512_fmadd_ps(q2, _mm512_loadu_ps(k + 32), x);
                y = _mm512_fmadd_ps(q3, _mm512_loadu_ps(k + 48), y);
                a[u] = _mm512_add_ps(x, y);
            }
            const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6,
                                                4, 2, 0);
            const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7,
                                                5, 3, 1);
            for (int w = 8; w >= 1; w /= 2)
                for (int i = 0; i < w; i++)
                    a[i] = _mm512_add_ps(_mm512_permutex2var_ps(a[2 * i], ev, a[2 * i + 1]),
                                         _mm512_permutex2var_ps(a[2 * i], od, a[2 * i + 1]));
            const __m512 s16 = _mm512_mul_ps(a[0], sv);
            _mm512_storeu_ps(sc + t, s16);
            mxv = _mm512_max_ps(mxv, s16);
        }
        mx = _mm512_reduce_max_ps(mxv);
        for (; t < n_keys; t++) {
            const float *k = K + t * 64;
            __m512 a = _mm512_mul_ps(q0, _mm512_loadu_ps(k));
            __m512 b = _mm512_mul_ps(q1, _mm512_loadu_ps(k + 16));
            a = _mm512_fmadd_ps(q2, _mm512_loadu_ps(k + 32), a);
            b = _mm512_fmadd_ps(q3, _mm512_loadu_ps(k + 48), b);
            sc[t] = scale * _mm512_reduce_add_ps(_mm512_add_ps(a, b));
            mx = sc[t] > mx ? sc[t] : mx;
        }
    } else {
        for (int64_t t = 0; t < n_keys; t++) {
            const float *k = K + t * hd;
            __m512 a = _mm512_setzero_ps();
            for (int d = 0; d < hd; d += 16)
                a = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), _mm512_loadu_ps(k + d), a);
            sc[t] = scale * _mm512_reduce_add_ps(a);
            mx = sc[t] > mx ? sc[t] : mx;
        }
    }
    weighted_v(V, n_keys, hd, sc, exp_sum(sc, n_keys, mx), out);
}

void tq_attn_transpose_avx512(const float *K, int64_t n_win, int hd, float *Kt, int64_t ldt)
{
    for (int64_t t = 0; t < n_win; t++)
        for (int d = 0; d < hd; d++)
            Kt[(int64_t)d * ldt + t] = K[t * hd + d];
    for (int d = 0; d < hd; d++) /* padding up to ldt: finite, never used */
        memset(Kt + (int64_t)d * ldt + n_win, 0, sizeof(float) * (size_t)(ldt - n_win));
}

void tq_attn_row_t_avx512(const float *q, const float *Kt, int64_t ldt, const float *V,
                          int64_t n_keys, int hd, float scale, float *sc, float *out)
{
    const __m512 s = _mm512_set1_ps(scale);
    __m512 mxv = _mm512_set1_ps(-INFINITY);
    for (int64_t t = 0; t < n_keys; t += 64) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const float *kt = Kt + t;
        for (int d = 0; d < hd; d++, kt += ldt) {
            const __m512 qd = _mm512_set1_ps(q[d]);
            a0 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(kt), a0);
            a1 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(kt + 16), a1);
            a2 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(kt + 32), a2);
            a3 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(kt + 48), a3);
        }
        /* sc has room for n_keys rounded up to 64; lanes past n_keys are ignored */
        const __m512 v[4] = {_mm512_mul_ps(a0, s), _mm512_mul_ps(a1, s), _mm512_mul_ps(a2, s),
                             _mm512_mul_ps(a3, s)};
        for (int b = 0; b < 4; b++) {
            const int64_t t0 = t + 16 * b;
            _mm512_storeu_ps(sc + t0, v[b]);
            if (t0 < n_keys) {
                const int64_t left = n_keys - t0;
                const __mmask16 k = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
                mxv = _mm512_mask_max_ps(mxv, k, mxv, v[b]);
            }
        }
    }
    const float mx = _mm512_reduce_max_ps(mxv);
    weighted_v(V, n_keys, hd, sc, exp_sum(sc, n_keys, mx), out);
}

void tq_attn_widen_avx512(const uint16_t *src, int64_t n, int is_f16, float *dst)
{
    int64_t i = 0;
    if (is_f16) {
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i,
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    } else {
        for (; i + 16 <= n; i += 16) {
            const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
            _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
        }
    }
    for (; i < n; i++) {
        if (is_f16) {
            dst[i] = _cvtsh_ss(src[i]);
        } else {
            const uint32_t u = (uint32_t)src[i] << 16;
            memcpy(dst + i, &u, 4);
        }
    }
}
