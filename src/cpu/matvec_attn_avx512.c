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

#include "cpu/attn_cpu.h"
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

/* scores of keys K[0..16) (rows of 64) against q, times scale, to s[0..16): per key the row form
 * of hd 64 (four 16-lane products, two chains, one add), then a transposing pairwise-add tree
 * puts key u's sum in lane u (3 ops per key instead of a full reduction each) */
static inline __attribute__((always_inline)) __m512
scores16_64(const float *q, const float *K, __m512 sv)
{
    const __m512 q0 = _mm512_loadu_ps(q), q1 = _mm512_loadu_ps(q + 16);
    const __m512 q2 = _mm512_loadu_ps(q + 32), q3 = _mm512_loadu_ps(q + 48);
    __m512 a[16];
    for (int u = 0; u < 16; u++) {
        const float *k = K + u * 64;
        __m512 x = _mm512_mul_ps(q0, _mm512_loadu_ps(k));
        __m512 y = _mm512_mul_ps(q1, _mm512_loadu_ps(k + 16));
        x = _mm512_fmadd_ps(q2, _mm512_loadu_ps(k + 32), x);
        y = _mm512_fmadd_ps(q3, _mm512_loadu_ps(k + 48), y);
        a[u] = _mm512_add_ps(x, y);
    }
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (int w = 8; w >= 1; w /= 2)
        for (int i = 0; i < w; i++)
            a[i] = _mm512_add_ps(_mm512_permutex2var_ps(a[2 * i], ev, a[2 * i + 1]),
                                 _mm512_permutex2var_ps(a[2 * i], od, a[2 * i + 1]));
    return _mm512_mul_ps(a[0], sv);
}

/* one key of hd 64 outside a full group of 16: the same two chains, a full reduction */
static inline float score1_64(const float *q, const float *k, float scale)
{
    __m512 a = _mm512_mul_ps(_mm512_loadu_ps(q), _mm512_loadu_ps(k));
    __m512 b = _mm512_mul_ps(_mm512_loadu_ps(q + 16), _mm512_loadu_ps(k + 16));
    a = _mm512_fmadd_ps(_mm512_loadu_ps(q + 32), _mm512_loadu_ps(k + 32), a);
    b = _mm512_fmadd_ps(_mm512_loadu_ps(q + 48), _mm512_loadu_ps(k + 48), b);
    return scale * _mm512_reduce_add_ps(_mm512_add_ps(a, b));
}

/* keys [t0, t1) of any hd (a multiple of 16): per key one 16-lane FMA chain over d from zero, a
 * full reduction, times scale; four keys at a time (independent chains, same floats) */
static inline void scores_gen(const float *q, const float *K, int64_t t0, int64_t t1, int hd,
                              float scale, float *sc)
{
    int64_t t = t0;
    for (; t + 4 <= t1; t += 4) {
        const float *k = K + t * hd;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int d = 0; d < hd; d += 16) {
            const __m512 qd = _mm512_loadu_ps(q + d);
            a0 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k + d), a0);
            a1 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k + hd + d), a1);
            a2 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k + 2 * hd + d), a2);
            a3 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k + 3 * hd + d), a3);
        }
        sc[t] = scale * _mm512_reduce_add_ps(a0);
        sc[t + 1] = scale * _mm512_reduce_add_ps(a1);
        sc[t + 2] = scale * _mm512_reduce_add_ps(a2);
        sc[t + 3] = scale * _mm512_reduce_add_ps(a3);
    }
    for (; t < t1; t++) {
        const float *k = K + t * hd;
        __m512 a = _mm512_setzero_ps();
        for (int d = 0; d < hd; d += 16)
            a = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), _mm512_loadu_ps(k + d), a);
        sc[t] = scale * _mm512_reduce_add_ps(a);
    }
}

/* the max of a row's n_keys scores, in the row kernel's order: hd 64 folds its full groups of
 * 16 by vector max, then the rest one by one (the same NaN propagation alone or in a block) */
static float row_max(const float *sc, int64_t n_keys, int hd)
{
    float mx = -INFINITY;
    int64_t t = 0;
    if (hd == 64) {
        __m512 mxv = _mm512_set1_ps(-INFINITY);
        for (; t + 16 <= n_keys; t += 16)
            mxv = _mm512_max_ps(mxv, _mm512_loadu_ps(sc + t));
        mx = _mm512_reduce_max_ps(mxv);
    }
    for (; t < n_keys; t++)
        mx = sc[t] > mx ? sc[t] : mx;
    return mx;
}

void tq_attn_row_avx512(const float *q, const float *K, const float *V, int64_t n_keys, int hd,
                        float scale, float *sc, float *out)
{
    int64_t t = 0;
    if (hd == 64) {
        const __m512 sv = _mm512_set1_ps(scale);
        for (; t + 16 <= n_keys; t += 16)
            _mm512_storeu_ps(sc + t, scores16_64(q, K + t * 64, sv));
        for (; t < n_keys; t++)
            sc[t] = score1_64(q, K + t * 64, scale);
    } else {
        scores_gen(q, K, 0, n_keys, hd, scale, sc);
    }
    weighted_v(V, n_keys, hd, sc, exp_sum(sc, n_keys, row_max(sc, n_keys, hd)), out);
}

/* PV of up to 4 rows over keys [t0, e[r]) (e[r] >= t0), continuing the chains held in o[r]
 * (full: hd is a multiple of 64):
 * for each 64-dim chunk the keys common to all rows with the chunk of V loaded once for the
 * rows, then each row's own last keys; per element one FMA chain over the keys in order */
static inline __attribute__((always_inline)) void
pv_tile(const float *V, int hd, const float *const *w, const int64_t *e, int nr, int full,
        int64_t t0, float *const *o)
{
    int64_t ec = e[0];
    for (int r = 1; r < nr; r++)
        ec = e[r] < ec ? e[r] : ec;
    for (int d = 0; d < hd; d += 64) {
        const int nv = full || hd - d >= 64 ? 4 : (hd - d) / 16;
        __m512 acc[4][4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                acc[r][v] = r < nr && v < nv ? _mm512_loadu_ps(o[r] + d + 16 * v)
                                             : _mm512_setzero_ps();
        for (int64_t t = t0; t < ec; t++) {
            const float *vt = V + t * hd + d;
            __m512 x[4];
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                x[v] = v < nv ? _mm512_loadu_ps(vt + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                if (r >= nr)
                    continue;
                const __m512 p = _mm512_set1_ps(w[r][t]);
#pragma GCC unroll 4
                for (int v = 0; v < 4; v++)
                    if (v < nv)
                        acc[r][v] = _mm512_fmadd_ps(p, x[v], acc[r][v]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            if (r >= nr)
                continue;
            for (int64_t t = ec; t < e[r]; t++) {
                const __m512 p = _mm512_set1_ps(w[r][t]);
#pragma GCC unroll 4
                for (int v = 0; v < 4; v++)
                    if (v < nv)
                        acc[r][v] = _mm512_fmadd_ps(p, _mm512_loadu_ps(V + t * hd + d + 16 * v),
                                                    acc[r][v]);
            }
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                if (v < nv)
                    _mm512_storeu_ps(o[r] + d + 16 * v, acc[r][v]);
        }
    }
}

void tq_attn_block_avx512(const float *q, int64_t ldq, int nq, int G, const float *K,
                          const float *V, int64_t n0, int hd, float scale, float *sc,
                          int64_t ldsc, float *out, int64_t ldo)
{
    const int nrow = nq * G;
    const int64_t n_max = n0 + nq - 1;
    const __m512 sv = _mm512_set1_ps(scale);
    /* 1. scores: a group of 16 keys (in L1) against every row of the block */
    for (int64_t t = 0; t < n_max; t += 16)
        for (int i = 0; i < nq; i++) {
            const int64_t n = n0 + i;
            if (t >= n)
                continue;
            for (int h = 0; h < G; h++) {
                const float *qr = q + i * ldq + (int64_t)h * hd;
                float *s = sc + (int64_t)(i * G + h) * ldsc;
                if (hd != 64) {
                    scores_gen(qr, K, t, t + 16 < n ? t + 16 : n, hd, scale, s);
                } else if (t + 16 <= n) {
                    _mm512_storeu_ps(s + t, scores16_64(qr, K + t * 64, sv));
                } else {
                    for (int64_t u = t; u < n; u++)
                        s[u] = score1_64(qr, K + u * 64, scale);
                }
            }
        }
    /* 2. per row: max, weights, 1/sum (the row kernel's functions) */
    for (int r = 0; r < nrow; r++) {
        const int64_t n = n0 + r / G;
        float *s = sc + r * ldsc;
        float *o = out + (r / G) * ldo + (int64_t)(r % G) * hd;
        s[ldsc - 1] = 1.0f / exp_sum(s, n, row_max(s, n, hd));
        memset(o, 0, (size_t)hd * sizeof(float));
    }
    /* 3. PV: chunks of 64 keys (kept in L1), rows in tiles of 4 */
    for (int64_t t0 = 0; t0 < n_max; t0 += 64)
        for (int r0 = 0; r0 < nrow; r0 += 4) {
            const int nr = nrow - r0 < 4 ? nrow - r0 : 4;
            const float *w[4];
            float *o[4];
            int64_t e[4];
            int live = 0;
            for (int i = 0; i < nr; i++) {
                const int r = r0 + i;
                const int64_t n = n0 + r / G;
                w[i] = sc + r * ldsc;
                o[i] = out + (r / G) * ldo + (int64_t)(r % G) * hd;
                e[i] = n < t0 ? t0 : n < t0 + 64 ? n : t0 + 64;
                live |= e[i] > t0;
            }
            if (!live)
                continue;
            if (nr == 4 && hd % 64 == 0)
                pv_tile(V, hd, w, e, 4, 1, t0, o);
            else
                pv_tile(V, hd, w, e, nr, 0, t0, o);
        }
    /* 4. times 1/sum */
    for (int r = 0; r < nrow; r++) {
        const __m512 iv = _mm512_set1_ps(sc[r * ldsc + ldsc - 1]);
        float *o = out + (r / G) * ldo + (int64_t)(r % G) * hd;
        for (int d = 0; d < hd; d += 16)
            _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), iv));
    }
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
