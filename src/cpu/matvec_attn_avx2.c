/* matvec_attn_avx2.c -- AVX2+FMA+F16C body of the engine's window attention (src/model/kvcache.c
 * holds the portable version and chooses; attn_cpu.h states the contract). One kv-head, a block
 * of rows = nq query positions x G query heads (decode: nq = 1), K/V rows read in place (f32) or
 * widened in registers (f16, bf16):
 *   1. scores: 8 keys at a time, for each row; key u's lane l is the FMA chain over
 *      d = l, l + 8, ... (the first term a plain product), lanes added as the balanced tree
 *      ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) by a transposing hadd tree; times scale;
 *   2. per row: the max, e = exp(s - max) by a polynomial, the sum in 8 lanes in key order, the
 *      same tree;
 *   3. per row: o[d] = FMA chain over the row's keys in order, times 1/sum.
 * Loop order (rows inside 8-key groups for K; 64-key blocks, rows in pairs, 32 dims for V) only
 * changes what is in cache: K and V are read once per call, and every float depends only on its
 * row's q and its keys (query i of the block sees keys [0, n0 + i)). */
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

/* rows r = i * G + h of a block: query position i, head h */
#define QROW(q, r) ((q) + ((r) / G) * ldq + (int64_t)((r) % G) * hd)
#define OROW(o, r) ((o) + ((r) / G) * ldo + (int64_t)((r) % G) * hd)

#define AI static inline __attribute__((always_inline))

/* floats of the stack buffer that holds widened f16/bf16 K/V rows (a group of 8 keys of K, a
 * block of keys of V): rows shared by several query rows are widened once, not per row */
enum { WBUF = 4096 };

/* n rows of hd elements at Kg (stored as rows) -> f32 dst (exact) */
AI void widen_rows(const void *Kg, tq_attn_rows rows, int64_t n, int hd, float *dst)
{
    for (int64_t i = 0; i < n * hd; i += 8)
        _mm256_storeu_ps(dst + i, ld8(Kg, i, rows));
}

/* scores of keys Kg[0..nk) (nk <= 8) against one query row, times scale, to dst[0..8) */
AI void scores8(const float *qh, const void *Kg, tq_attn_rows rows, int nk, int hd, __m256 vs,
                float *dst)
{
    __m256 a[8];
    const __m256 q0 = _mm256_loadu_ps(qh);
    if (nk == 8) {
        #pragma GCC unroll 8
        for (int u = 0; u < 8; u++)
            a[u] = _mm256_mul_ps(q0, ld8(Kg, u * hd, rows));
        for (int i = 8; i < hd; i += 8) {
            const __m256 qi = _mm256_loadu_ps(qh + i);
            #pragma GCC unroll 8
            for (int u = 0; u < 8; u++)
                a[u] = _mm256_fmadd_ps(qi, ld8(Kg, u * hd + i, rows), a[u]);
        }
    } else {
        #pragma GCC unroll 8
        for (int u = 0; u < 8; u++)
            a[u] = u < nk ? _mm256_mul_ps(q0, ld8(Kg, u * hd, rows)) : _mm256_setzero_ps();
        for (int i = 8; i < hd; i += 8) {
            const __m256 qi = _mm256_loadu_ps(qh + i);
            #pragma GCC unroll 8
            for (int u = 0; u < nk; u++)
                a[u] = _mm256_fmadd_ps(qi, ld8(Kg, u * hd + i, rows), a[u]);
        }
    }
    _mm256_storeu_ps(dst, _mm256_mul_ps(tree8x8(a), vs));
}

/* PV of a row pair over keys [t0, ea) and [t0, eb) (two: the second row is live), continuing
 * the chains held in a0, a1; Vb is key t0's row. 32 dims at a time in registers: the keys both
 * rows see with each V load shared, then each row's last keys; per element one FMA chain over
 * the keys in order. */
AI void pv_pair(const void *Vb, tq_attn_rows rows, int hd, int64_t t0, int64_t ea, int64_t eb,
                int two, const float *w0, const float *w1, float *a0, float *a1)
{
    const int64_t ec = ea < eb ? ea : eb;
    for (int d = 0; d < hd; d += 32) {
        const int nv = hd - d < 32 ? (hd - d) / 8 : 4;
        __m256 o0[4], o1[4];
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            o0[u] = u < nv ? _mm256_loadu_ps(a0 + d + 8 * u) : _mm256_setzero_ps();
            o1[u] = u < nv ? _mm256_loadu_ps(a1 + d + 8 * u) : _mm256_setzero_ps();
        }
        for (int64_t t = t0; t < ec; t++) {
            const __m256 p0 = _mm256_set1_ps(w0[t]), p1 = _mm256_set1_ps(w1[t]);
#pragma GCC unroll 4
            for (int u = 0; u < nv; u++) {
                const __m256 v = ld8(Vb, (t - t0) * hd + d + 8 * u, rows);
                o0[u] = _mm256_fmadd_ps(p0, v, o0[u]);
                if (two)
                    o1[u] = _mm256_fmadd_ps(p1, v, o1[u]);
            }
        }
        for (int64_t t = ec; t < ea; t++) {
            const __m256 p0 = _mm256_set1_ps(w0[t]);
#pragma GCC unroll 4
            for (int u = 0; u < nv; u++)
                o0[u] = _mm256_fmadd_ps(p0, ld8(Vb, (t - t0) * hd + d + 8 * u, rows), o0[u]);
        }
        if (two)
            for (int64_t t = ec; t < eb; t++) {
                const __m256 p1 = _mm256_set1_ps(w1[t]);
#pragma GCC unroll 4
                for (int u = 0; u < nv; u++)
                    o1[u] = _mm256_fmadd_ps(p1, ld8(Vb, (t - t0) * hd + d + 8 * u, rows), o1[u]);
            }
#pragma GCC unroll 4
        for (int u = 0; u < nv; u++) {
            _mm256_storeu_ps(a0 + d + 8 * u, o0[u]);
            if (two)
                _mm256_storeu_ps(a1 + d + 8 * u, o1[u]);
        }
    }
}

AI void block_body(const float *q, int64_t ldq, int nq, int G, const void *K, const void *V,
                   tq_attn_rows rows, int64_t n0, int hd, float scale, float *sc, int64_t ldsc,
                   float *out, int64_t ldo)
{
    const int nrow = nq * G;
    const int64_t n_max = n0 + nq - 1; /* row r sees keys [0, n0 + r / G) */
    const size_t es = rows == TQ_ATTN_F32 ? 4 : 2;
    const __m256 vs = _mm256_set1_ps(scale);
    /* f16/bf16 rows seen by several query rows: widened once into buf (the same exact floats) */
    const int wide = rows != TQ_ATTN_F32 && nrow > 2 && nq > 1 && hd <= WBUF / 8;
    float buf[WBUF] __attribute__((aligned(32)));
    /* 1. scores, 8 keys at a time; the key group stays in L1 across the rows */
    for (int64_t t = 0; t < n_max; t += 8) {
        const void *Kg = (const unsigned char *)K + (size_t)t * hd * es;
        if (wide)
            widen_rows(Kg, rows, n_max - t < 8 ? n_max - t : 8, hd, buf);
        for (int i = 0; i < nq; i++) {
            const int64_t n = n0 + i;
            if (t >= n)
                continue;
            const int nk = n - t < 8 ? (int)(n - t) : 8;
            for (int h = 0; h < G; h++) {
                const float *qh = q + i * ldq + (int64_t)h * hd;
                float *dst = sc + (int64_t)(i * G + h) * ldsc + t;
                if (wide)
                    scores8(qh, buf, TQ_ATTN_F32, nk, hd, vs, dst);
                else
                    scores8(qh, Kg, rows, nk, hd, vs, dst);
            }
        }
    }
    /* 2. softmax weights and 1/sum per row (inv: the last slot of the row's scores) */
    for (int r = 0; r < nrow; r++) {
        sc[r * ldsc + ldsc - 1] = softmax8(sc + r * ldsc, n0 + r / G);
        float *o = OROW(out, r);
        for (int e = 0; e < hd; e++)
            o[e] = 0.0f;
    }
    /* 3. weighted values, accumulated in out: blocks of keys (64, or what buf holds; kept in L1
     * across the rows and dims), rows in pairs */
    const int64_t kb = wide && WBUF / hd < 64 ? WBUF / hd : 64;
    for (int64_t t0 = 0; t0 < n_max; t0 += kb) {
        const int64_t t1 = n_max - t0 < kb ? n_max : t0 + kb;
        const void *Vb = (const unsigned char *)V + (size_t)t0 * hd * es;
        if (wide)
            widen_rows(Vb, rows, t1 - t0, hd, buf);
        for (int r = 0; r < nrow; r += 2) {
            const int two = r + 1 < nrow;
            const int64_t na = n0 + r / G, nb = n0 + (r + two) / G;
            const int64_t ea = na < t0 ? t0 : na < t1 ? na : t1;
            const int64_t eb = nb < t0 ? t0 : nb < t1 ? nb : t1;
            if (ea == t0 && eb == t0)
                continue;
            const float *w0 = sc + r * ldsc, *w1 = sc + (r + two) * ldsc;
            float *a0 = OROW(out, r), *a1 = OROW(out, r + two);
            if (wide && two)
                pv_pair(buf, TQ_ATTN_F32, hd, t0, ea, eb, 1, w0, w1, a0, a1);
            else if (wide)
                pv_pair(buf, TQ_ATTN_F32, hd, t0, ea, eb, 0, w0, w1, a0, a1);
            else if (two)
                pv_pair(Vb, rows, hd, t0, ea, eb, 1, w0, w1, a0, a1);
            else
                pv_pair(Vb, rows, hd, t0, ea, eb, 0, w0, w1, a0, a1);
        }
    }
    for (int r = 0; r < nrow; r++) {
        const __m256 inv = _mm256_set1_ps(sc[r * ldsc + ldsc - 1]);
        float *o = OROW(out, r);
        for (int d = 0; d < hd; d += 8)
            _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), inv));
    }
}

void tq_attn_heads_avx2(const float *q, int G, const void *K, const void *V, tq_attn_rows rows,
                        int64_t n_keys, int hd, float scale, float *sc, int64_t ldsc, float *out)
{
    tq_attn_block_avx2(q, 0, 1, G, K, V, rows, n_keys, hd, scale, sc, ldsc, out, 0);
}

/* one instance per row storage, and head_dim 64 (SmolLM2) with constant offsets (except f16
 * decode, nq = 1, which measured slower so: it keeps the general one) */
#define BODY(R)                                                                                \
    do {                                                                                       \
        if (hd == 64 && (nq > 1 || R != TQ_ATTN_F16))                                          \
            block_body(q, ldq, nq, G, K, V, R, n0, 64, scale, sc, ldsc, out, ldo);             \
        else                                                                                   \
            block_body(q, ldq, nq, G, K, V, R, n0, hd, scale, sc, ldsc, out, ldo);             \
    } while (0)

void tq_attn_block_avx2(const float *q, int64_t ldq, int nq, int G, const void *K, const void *V,
                        tq_attn_rows rows, int64_t n0, int hd, float scale, float *sc,
                        int64_t ldsc, float *out, int64_t ldo)
{
    switch (rows) {
    case TQ_ATTN_F16: BODY(TQ_ATTN_F16); break;
    case TQ_ATTN_BF16: BODY(TQ_ATTN_BF16); break;
    default: BODY(TQ_ATTN_F32); break;
    }
}
