/* attn_turbo_avx2.c -- AVX2+FMA kernels of the fused TurboQuant attention (attn_turbo.c has the
 * scalar spec, attn_turbo_avx512.c the AVX-512 ones): the score dot product (float), the V-row
 * decode to the rotated domain, and the block update (online softmax and value accumulation in
 * double). head_dim is a multiple of 32 (64..512).
 *
 * The dot product is one fixed function of (a, b): lane l (0..7) is the FMA chain over
 * d = l, l + 8, l + 16, ... (the first term a plain product), then the lanes are added as a
 * balanced tree of adjacent pairs ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). The block
 * kernel scores 8 keys at a time with the same chains and a transposing hadd tree that performs
 * exactly those additions, so its scores equal dot256() bit for bit -- the reference attention
 * (kvcache_turbo.c) calls dot256() through the same table and must see the same floats. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "cpu/exp_poly.h"
#include "cpu/kv_cpu.h"
#include "common/kv_codec.h"
#include "cpu/attn_turbo.h"

/* lanes of v added as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) */
static inline float tree8(__m256 v)
{
    const __m256 h = _mm256_hadd_ps(v, v);  /* 01 23 01 23 | 45 67 45 67 */
    const __m256 h2 = _mm256_hadd_ps(h, h); /* 0123 ... | 4567 ...     */
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h2), _mm256_extractf128_ps(h2, 1)));
}

/* a[u] holds key u's 8 lane sums; returns the 8 tree sums, key u in lane u (same additions as
 * tree8 on each a[u]: hadd pairs adjacent lanes, the last add joins the two 128-bit halves) */
static inline __m256 tree8x8(const __m256 *a)
{
    const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 x = _mm256_hadd_ps(h01, h23); /* keys 0-3: (01+23) | keys 0-3: (45+67) */
    const __m256 y = _mm256_hadd_ps(h45, h67); /* keys 4-7 likewise                     */
    return _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
}

static float dot256(const float *a, const float *b, int n)
{
    __m256 s = _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
    for (int i = 8; i < n; i += 8)
        s = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s);
    return tree8(s);
}

/* sc[k] = scale * dot256(q, K[k]) for k < nv, 8 keys at a time (8 independent chains); keys past
 * nv in the last group are computed on zeros and not stored */
static void scores8(const float *q, const float *K, int nv, int hd, float scale, float *sc)
{
    const __m256 vs = _mm256_set1_ps(scale);
    for (int k0 = 0; k0 < nv; k0 += 8) {
        const int nk = nv - k0 < 8 ? nv - k0 : 8;
        __m256 a[8];
        const __m256 q0 = _mm256_loadu_ps(q);
        #pragma GCC unroll 8
        for (int u = 0; u < 8; u++)
            a[u] = u < nk ? _mm256_mul_ps(q0, _mm256_loadu_ps(K + (size_t)(k0 + u) * hd))
                          : _mm256_setzero_ps();
        for (int i = 8; i < hd; i += 8) {
            const __m256 qi = _mm256_loadu_ps(q + i);
            #pragma GCC unroll 8
            for (int u = 0; u < nk; u++)
                a[u] = _mm256_fmadd_ps(qi, _mm256_loadu_ps(K + (size_t)(k0 + u) * hd + i), a[u]);
        }
        const __m256 s = _mm256_mul_ps(tree8x8(a), vs);
        if (nk == 8) {
            _mm256_storeu_ps(sc + k0, s);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, s);
            memcpy(sc + k0, tmp, (size_t)nk * sizeof(float));
        }
    }
}

/* V row -> rotated domain, one body per width (vb a constant after inlining): 8 indices of b
 * bits fill exactly b bytes. b <= 4: load them as a u32 (for b < 4 the load runs into the next
 * chunk or the row's scales, which follow the indices), broadcast, shift lane k right by k*b,
 * mask; b = 5: the same on a u64 in two halves of 4 lanes; b = 8: widen the bytes. The centroid
 * comes from permutes of 8-entry tables (b <= 3: one; b = 4: two and a blend on bit 3; b = 5:
 * four and blends on bits 3, 4) or a gather (b = 8). Same values as tq_attn_dec_v_rot_scalar
 * (C[idx] * scale, one float rounding, widened to double). */
static inline __attribute__((always_inline)) void dec_v_body(const uint8_t *row, int d,
                                                             const int vb, double *out)
{
    const float *C = tq_kv_centroids(vb);
    const uint8_t *sc = row + tq_kv_packed_bytes(d, vb);
    __m256 t0 = _mm256_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
    if (vb == 2)
        t0 = _mm256_maskload_ps(C, _mm256_set_epi32(0, 0, 0, 0, -1, -1, -1, -1));
    if (vb >= 3 && vb <= 5)
        t0 = _mm256_loadu_ps(C);
    if (vb == 4 || vb == 5)
        t1 = _mm256_loadu_ps(C + 8);
    if (vb == 5) {
        t2 = _mm256_loadu_ps(C + 16);
        t3 = _mm256_loadu_ps(C + 24);
    }
    const __m256i sh32 = _mm256_set_epi32(7 * vb, 6 * vb, 5 * vb, 4 * vb, 3 * vb, 2 * vb, vb, 0);
    const __m256i m32 = _mm256_set1_epi32((1 << (vb & 31)) - 1);
    const __m256i sh_lo = _mm256_set_epi64x(3 * vb, 2 * vb, vb, 0);
    const __m256i sh_hi = _mm256_set_epi64x(7 * vb, 6 * vb, 5 * vb, 4 * vb);
    const __m256i m64 = _mm256_set1_epi64x((1ll << (vb & 63)) - 1);
    for (int g = 0; g < d / TQ_KV_GROUP; g++) {
        const __m256 s = _mm256_set1_ps(_cvtsh_ss(tq_rd16(sc + 2 * g)));
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const uint8_t *p = vb == 8 ? row + g * TQ_KV_GROUP + 8 * c
                                       : row + (size_t)g * 4 * vb + (size_t)c * vb;
            __m256i idx;
            if (vb == 8) {
                idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
            } else if (vb <= 4) {
                uint32_t u;
                memcpy(&u, p, 4);
                idx = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)u), sh32), m32);
            } else {
                const __m256i u = _mm256_set1_epi64x((long long)kv_rd_le(p, vb));
                const __m256i lo = _mm256_and_si256(_mm256_srlv_epi64(u, sh_lo), m64);
                const __m256i hi = _mm256_and_si256(_mm256_srlv_epi64(u, sh_hi), m64);
                /* low halves of the 64-bit lanes: [0 1 4 5 | 2 3 6 7], then quarters in order */
                const __m256 ab = _mm256_shuffle_ps(_mm256_castsi256_ps(lo),
                                                    _mm256_castsi256_ps(hi), _MM_SHUFFLE(2, 0, 2, 0));
                idx = _mm256_permute4x64_epi64(_mm256_castps_si256(ab), 0xD8);
            }
            __m256 y;
            if (vb <= 3) {
                y = _mm256_permutevar8x32_ps(t0, idx);
            } else if (vb == 4) {
                const __m256 b3 = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));
                y = _mm256_blendv_ps(_mm256_permutevar8x32_ps(t0, idx),
                                     _mm256_permutevar8x32_ps(t1, idx), b3);
            } else if (vb == 5) {
                const __m256 b3 = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));
                const __m256 b4 = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 27));
                const __m256 lo = _mm256_blendv_ps(_mm256_permutevar8x32_ps(t0, idx),
                                                   _mm256_permutevar8x32_ps(t1, idx), b3);
                const __m256 hi = _mm256_blendv_ps(_mm256_permutevar8x32_ps(t2, idx),
                                                   _mm256_permutevar8x32_ps(t3, idx), b3);
                y = _mm256_blendv_ps(lo, hi, b4);
            } else {
                y = _mm256_i32gather_ps(C, idx, 4);
            }
            y = _mm256_mul_ps(y, s); /* the float product, then widened */
            double *o = out + g * TQ_KV_GROUP + 8 * c;
            _mm256_storeu_pd(o, _mm256_cvtps_pd(_mm256_castps256_ps128(y)));
            _mm256_storeu_pd(o + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)));
        }
    }
}

static void dec_v_rot256(const uint8_t *row, int d, int vb, double *out)
{
    switch (vb) {
    case 2: dec_v_body(row, d, 2, out); break;
    case 3: dec_v_body(row, d, 3, out); break;
    case 4: dec_v_body(row, d, 4, out); break;
    case 5: dec_v_body(row, d, 5, out); break;
    default: dec_v_body(row, d, 8, out); break;
    }
}

/* K rows of a block to floats, ((float)q + zero_h) * scale_h per 32-group: the codec's values
 * (tq_kv_key_decode_row_ref) with the width a constant after inlining and F16C for the fp16
 * scale and zero (exact; a NaN keeps NaN), indices unpacked as in dec_v_body (k8: signed
 * bytes). The fused == reference test compares the result with the codec's own decode. */
static inline __attribute__((always_inline)) void dec_k_body(const uint8_t *src, int64_t n,
                                                             int d, const int kb, float *out)
{
    const size_t rb = tq_kv_turbo_k_row_bytes(d, kb), pk = tq_kv_packed_bytes(d, kb);
    const int ng = d / TQ_KV_GROUP;
    const __m256i sh32 = _mm256_set_epi32(7 * kb, 6 * kb, 5 * kb, 4 * kb, 3 * kb, 2 * kb, kb, 0);
    const __m256i m32 = _mm256_set1_epi32((1 << (kb & 31)) - 1);
    const __m256i sh_lo = _mm256_set_epi64x(3 * kb, 2 * kb, kb, 0);
    const __m256i sh_hi = _mm256_set_epi64x(7 * kb, 6 * kb, 5 * kb, 4 * kb);
    const __m256i m64 = _mm256_set1_epi64x((1ll << (kb & 63)) - 1);
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *row = src + (size_t)r * rb, *sc = row + pk, *zr = sc + 2 * (size_t)ng;
        float *o = out + (size_t)r * d;
        for (int g = 0; g < ng; g++) {
            const __m256 s = _mm256_set1_ps(_cvtsh_ss(tq_rd16(sc + 2 * g)));
            const __m256 z = _mm256_set1_ps(_cvtsh_ss(tq_rd16(zr + 2 * g)));
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const uint8_t *p = kb == 8 ? row + g * TQ_KV_GROUP + 8 * c
                                           : row + (size_t)g * 4 * kb + (size_t)c * kb;
                __m256i idx;
                if (kb == 8) {
                    idx = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
                } else if (kb <= 4) { /* the 4-byte load stays in the row (scales follow) */
                    uint32_t u;
                    memcpy(&u, p, 4);
                    idx = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)u), sh32), m32);
                } else {
                    const __m256i u = _mm256_set1_epi64x((long long)kv_rd_le(p, kb));
                    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi64(u, sh_lo), m64);
                    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi64(u, sh_hi), m64);
                    const __m256 ab = _mm256_shuffle_ps(_mm256_castsi256_ps(lo),
                                                        _mm256_castsi256_ps(hi),
                                                        _MM_SHUFFLE(2, 0, 2, 0));
                    idx = _mm256_permute4x64_epi64(_mm256_castps_si256(ab), 0xD8);
                }
                _mm256_storeu_ps(o + g * TQ_KV_GROUP + 8 * c,
                                 _mm256_mul_ps(_mm256_add_ps(_mm256_cvtepi32_ps(idx), z), s));
            }
        }
    }
}

static void dec_k256(const uint8_t *src, int64_t n, int d, int kb, float *out)
{
    switch (kb) {
    case 2: dec_k_body(src, n, d, 2, out); break;
    case 4: dec_k_body(src, n, d, 4, out); break;
    case 5: dec_k_body(src, n, d, 5, out); break;
    default: dec_k_body(src, n, d, 8, out); break;
    }
}

/* e^x for x <= 0, 8 x 4 double lanes: the same operations as exp_pd512 (attn_turbo_avx512.c), so
 * the same values: 2^n e^r, n = rint(x log2 e), r = x - n ln2 (Cody-Waite), e^r by its degree-12
 * Taylor polynomial (Horner, FMAs); 2^n is built in the exponent field (n >= -1022 after the
 * clamp at -708, so 2^n is normal and the final product exact). */
/* (8 vectors in lockstep: the 8 Horner chains run side by side instead of one 12-FMA latency
 * chain after the other) */
static inline void exp8_pd256(__m256d *x)
{
    const double *c = tq_exp_taylor;
    __m256d n[8], r[8], p[8];
#pragma GCC unroll 8
    for (int v = 0; v < 8; v++) {
        const __m256d xv = _mm256_max_pd(x[v], _mm256_set1_pd(TQ_EXP_MIN_X));
        n[v] = _mm256_round_pd(_mm256_mul_pd(xv, _mm256_set1_pd(TQ_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r[v] = _mm256_fnmadd_pd(n[v], _mm256_set1_pd(TQ_EXP_LN2_HI), xv);
        r[v] = _mm256_fnmadd_pd(n[v], _mm256_set1_pd(TQ_EXP_LN2_LO), r[v]);
        p[v] = _mm256_set1_pd(c[TQ_EXP_DEGREE]);
    }
#pragma GCC unroll 12
    for (int k = TQ_EXP_DEGREE - 1; k >= 0; k--)
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++)
            p[v] = _mm256_fmadd_pd(p[v], r[v], _mm256_set1_pd(c[k]));
    const __m256d magic = _mm256_set1_pd(6755399441055744.0);
#pragma GCC unroll 8
    for (int v = 0; v < 8; v++) {
        const __m256i ni = _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(n[v], magic)),
                                            _mm256_castpd_si256(magic));
        x[v] = _mm256_mul_pd(p[v], _mm256_castsi256_pd(_mm256_slli_epi64(
                                       _mm256_add_epi64(ni, _mm256_set1_epi64x(1023)), 52)));
    }
}

/* one head x one key block (nv <= 32): float scores, max, then in double: rescale, weights,
 * values accumulated 32 dims at a time (8 independent FMA chains, accumulator in registers) */
static void block256(const float *q, const float *K, const double *V, int nv, int hd,
                     float scale, double *S, float *sc, double *p)
{
    scores8(q, K, nv, hd, scale, sc);
    float bm = -INFINITY;
    for (int k = 0; k < nv; k++)
        bm = sc[k] > bm ? sc[k] : bm;
    const double mn = bm > S[0] ? bm : S[0];
    double *acc = S + 2;
    if (mn > S[0] && S[1] != 0.0) {
        const double corr = exp(S[0] - mn);
        S[1] *= corr;
        const __m256d vc = _mm256_set1_pd(corr);
        for (int d = 0; d < hd; d += 4)
            _mm256_storeu_pd(acc + d, _mm256_mul_pd(vc, _mm256_loadu_pd(acc + d)));
    }
    S[0] = mn;
    /* weights of all 32 slots at once (8 independent polynomial chains; slots >= nv have score
     * -inf and get weight 0) */
    for (int k = nv; k < TQ_TURBO_KB; k++)
        sc[k] = -INFINITY;
    const __m256d vm = _mm256_set1_pd(mn);
    __m256d x[8];
#pragma GCC unroll 8
    for (int v = 0; v < 8; v++)
        x[v] = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(sc + 4 * v)), vm);
    exp8_pd256(x);
    __m256d ls = _mm256_setzero_pd();
#pragma GCC unroll 8
    for (int v = 0; v < 8; v++) {
        const __m256d keep = _mm256_cmp_pd(_mm256_cvtps_pd(_mm_loadu_ps(sc + 4 * v)),
                                           _mm256_set1_pd(-INFINITY), _CMP_NEQ_OQ);
        x[v] = _mm256_and_pd(x[v], keep);
        _mm256_storeu_pd(p + 4 * v, x[v]);
        ls = _mm256_add_pd(ls, x[v]);
    }
    /* lane sums of ls in a fixed order: (l0 + l1) + (l2 + l3) */
    double l4[4];
    _mm256_storeu_pd(l4, ls);
    S[1] += (l4[0] + l4[1]) + (l4[2] + l4[3]);
    for (int c = 0; c < hd; c += 32) {
        __m256d a[8];
        #pragma GCC unroll 8
        for (int u = 0; u < 8; u++)
            a[u] = _mm256_loadu_pd(acc + c + 4 * u);
        for (int k = 0; k < nv; k++) {
            const __m256d w = _mm256_set1_pd(p[k]);
            const double *v = V + (size_t)k * hd + c;
            #pragma GCC unroll 8
            for (int u = 0; u < 8; u++)
                a[u] = _mm256_fmadd_pd(w, _mm256_loadu_pd(v + 4 * u), a[u]);
        }
        #pragma GCC unroll 8
        for (int u = 0; u < 8; u++)
            _mm256_storeu_pd(acc + c + 4 * u, a[u]);
    }
}

const tq_attn_kernels tq_attn_kernels_avx2 = {dot256, dec_v_rot256, block256, dec_k256};
