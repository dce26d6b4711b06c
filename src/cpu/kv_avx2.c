/* kv_avx2.c -- AVX2 (+F16C) KV codec kernels. Byte-identical to the scalar reference
 * (src/kv/kv_ref.c): the same IEEE operations in the same order per element (true division and
 * sqrt, no FMA: built with -ffp-contract=off, rounding with round-to-nearest-even), group
 * min/max by tree (exact; signed zero canonicalised like the reference), the sequential 32-term
 * sum of squares kept sequential per group, NaN rules made explicit (NaN group -> NaN min/max,
 * NaN index -> 0, compares false on NaN). Per-group scalars (scale, zero) use the reference's
 * scalar expressions. Compiled with -mavx2 -mfma -mf16c only (CMake source property). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "core/half.h"
#include "cpu/kv_cpu.h"
#include "cpu/kv_simd_common.h"
#include "common/kv_codec.h"

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* tq_kv_f16() inline: F16C's scalar convert (RNE, same bits as tq_f32_to_f16 for every
 * non-NaN; the f16 scheme test covers all bit patterns), NaN -> the canonical 0x7E00 */
static inline uint16_t kv_f16(float x)
{
    return x != x ? (uint16_t)TQ_KV_F16_NAN : (uint16_t)_cvtss_sh(x, RNE);
}

/* ---- small helpers -------------------------------------------------------------------------- */

static inline float hmin8(__m256 m)
{
    m = _mm256_min_ps(m, _mm256_permute2f128_ps(m, m, 1));
    m = _mm256_min_ps(m, _mm256_permute_ps(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm256_min_ps(m, _mm256_permute_ps(m, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm256_cvtss_f32(m);
}

static inline float hmax8(__m256 m)
{
    m = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
    m = _mm256_max_ps(m, _mm256_permute_ps(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm256_max_ps(m, _mm256_permute_ps(m, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm256_cvtss_f32(m);
}

/* min/max of nv vectors at x (nv * 8 floats), with the reference's NaN and signed-zero rules */
static inline void minmax(const float *x, int nv, float *mn, float *mx)
{
    __m256 lo = _mm256_loadu_ps(x), hi = lo;
    __m256 nan = _mm256_cmp_ps(lo, lo, _CMP_UNORD_Q);
    for (int i = 1; i < nv; i++) {
        const __m256 v = _mm256_loadu_ps(x + 8 * i);
        lo = _mm256_min_ps(lo, v);
        hi = _mm256_max_ps(hi, v);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    if (_mm256_movemask_ps(nan)) {
        *mn = NAN;
        *mx = NAN;
        return;
    }
    *mn = hmin8(lo) + 0.0f;
    *mx = hmax8(hi) + 0.0f;
}

/* rint, NaN -> 0, clamp to [lo, hi] (lo <= hi, non-NaN), as int32 */
static inline __m256i round_clamp(__m256 t, __m256 lo, __m256 hi)
{
    __m256 r = _mm256_round_ps(t, RNE);
    r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));
    r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
    return _mm256_cvttps_epi32(r);
}

/* four int32 vectors (values in -128..255, as the low byte is wanted) -> 32 bytes in order */
static inline __m256i narrow4(__m256i a, __m256i b, __m256i c, __m256i d, int is_signed)
{
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i q = is_signed ? _mm256_packs_epi16(ab, cd) : _mm256_packus_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* 32 index bytes -> packed bits at dst (4*bits bytes) */
/* 32 index bytes (each < 2^bits) -> 4*bits bytes of bitstream: in each 64-bit lane fold byte
 * pairs, 16-bit pairs, then 32-bit halves (index k of the lane lands at bit k*bits, bits above
 * 8*bits are zero) -- the same bytes as kv_pack32() */
static inline void pack_fold(__m256i q, int bits, uint8_t *dst)
{
    const __m128i s1 = _mm_cvtsi32_si128(8 - bits), s2 = _mm_cvtsi32_si128(16 - 2 * bits),
                  s3 = _mm_cvtsi32_si128(4 * bits);
    __m256i w = _mm256_or_si256(_mm256_and_si256(q, _mm256_set1_epi64x(0x00FF00FF00FF00FFll)),
                                _mm256_srl_epi64(_mm256_and_si256(q, _mm256_set1_epi64x((long long)0xFF00FF00FF00FF00ull)), s1));
    w = _mm256_or_si256(_mm256_and_si256(w, _mm256_set1_epi64x(0x0000FFFF0000FFFFll)),
                        _mm256_srl_epi64(_mm256_and_si256(w, _mm256_set1_epi64x((long long)0xFFFF0000FFFF0000ull)), s2));
    w = _mm256_or_si256(_mm256_and_si256(w, _mm256_set1_epi64x(0xFFFFFFFFll)),
                        _mm256_sll_epi64(_mm256_srli_epi64(w, 32), s3));
    /* each chunk exactly `bits` bytes: a wider store would reach past the group (into the
     * scales already written, or past the row) */
    const uint64_t c0 = (uint64_t)_mm256_extract_epi64(w, 0), c1 = (uint64_t)_mm256_extract_epi64(w, 1),
                   c2 = (uint64_t)_mm256_extract_epi64(w, 2), c3 = (uint64_t)_mm256_extract_epi64(w, 3);
    kv_wr_le(dst, c0, bits);
    kv_wr_le(dst + bits, c1, bits);
    kv_wr_le(dst + 2 * bits, c2, bits);
    kv_wr_le(dst + 3 * bits, c3, bits);
}

static inline void store_idx32(__m256i q, int bits, uint8_t *dst)
{
    if (bits == 8) {
        _mm256_storeu_si256((__m256i *)dst, q);
    } else if (bits == 4) {
        const __m256i w = _mm256_maddubs_epi16(q, _mm256_set1_epi16(0x1001));
        const __m256i p = _mm256_packus_epi16(w, w); /* lanes: [0..7 x2][8..15 x2] */
        const __m256i o = _mm256_permute4x64_epi64(p, _MM_SHUFFLE(3, 1, 2, 0));
        _mm_storeu_si128((__m128i *)dst, _mm256_castsi256_si128(o));
    } else {
        pack_fold(q, bits, dst);
    }
}

/* 8 indices starting at element j of a packed stream -> int32 (sign-extended for signed 8) */
static inline __m256i load_idx8(const uint8_t *src, int j, int bits, int is_signed)
{
    if (bits == 8) {
        const __m128i b = _mm_loadl_epi64((const __m128i *)(src + j));
        return is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
    }
    if (bits == 4 || bits == 2) { /* replicate each byte 8/bits times, shift, mask */
        const __m128i b = bits == 4 ? _mm_cvtsi32_si128((int)tq_rd32(src + j / 2))
                                    : _mm_cvtsi32_si128((int)tq_rd16(src + j / 4));
        const __m128i rep = bits == 4 ? _mm_unpacklo_epi8(b, b)
                                      : _mm_shuffle_epi8(b, _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 0,
                                                                          0, 0, 0, 0, 0, 0, 0));
        const __m256i sh = bits == 4 ? _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4)
                                     : _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
        return _mm256_and_si256(_mm256_srlv_epi32(_mm256_cvtepu8_epi32(rep), sh),
                                _mm256_set1_epi32((1 << bits) - 1));
    }
    /* 8 elements = `bits` bytes, byte aligned since j % 8 == 0; element k at bit k*bits */
    const uint64_t acc = kv_rd_le(src + (size_t)j / 8 * (size_t)bits, bits);
    const __m256i v = _mm256_set1_epi64x((long long)acc);
    const __m256i a = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, bits, 2 * bits, 3 * bits));
    const __m256i b = _mm256_srlv_epi64(v, _mm256_setr_epi64x(4 * bits, 5 * bits, 6 * bits, 7 * bits));
    /* low dwords: a -> elements 0..3, b -> 4..7; interleave, then put in order */
    const __m256i ab = _mm256_blend_epi32(a, _mm256_slli_epi64(b, 32), 0xAA);
    const __m256i o = _mm256_permutevar8x32_epi32(ab, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    return _mm256_and_si256(o, _mm256_set1_epi32((1 << bits) - 1));
}

/* ---- FWHT ----------------------------------------------------------------------------------- */

static inline __m256 bfly_in(__m256 x)
{
    __m256 s = _mm256_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)); /* h = 1 */
    x = _mm256_blend_ps(_mm256_add_ps(x, s), _mm256_sub_ps(s, x), 0xAA);
    s = _mm256_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)); /* h = 2 */
    x = _mm256_blend_ps(_mm256_add_ps(x, s), _mm256_sub_ps(s, x), 0xCC);
    s = _mm256_permute2f128_ps(x, x, 1); /* h = 4 */
    return _mm256_blend_ps(_mm256_add_ps(x, s), _mm256_sub_ps(s, x), 0xF0);
}

static void butterflies(float *u, int n)
{
    for (int i = 0; i < n; i += 8)
        _mm256_storeu_ps(u + i, bfly_in(_mm256_loadu_ps(u + i)));
    for (int h = 8; h < n; h <<= 1)
        for (int blk = 0; blk < n; blk += 2 * h)
            for (int i = blk; i < blk + h; i += 8) {
                const __m256 a = _mm256_loadu_ps(u + i), b = _mm256_loadu_ps(u + i + h);
                _mm256_storeu_ps(u + i, _mm256_add_ps(a, b));
                _mm256_storeu_ps(u + i + h, _mm256_sub_ps(a, b));
            }
}

static void fwht256(float *u, int n)
{
    butterflies(u, n);
}

/* ---- lm<L>g<G> blocks (rot: schemes) ------------------------------------------------------------
 * tq_kv_lm_encode_block_ref() lane by lane, 8 elements per vector, as kv_avx512.c: |x| max (NaN
 * never wins), the first element of that |x|, the reference's halving index search (boundaries
 * gathered), products rounded one by one; the two refit sums in scalar, in element order. */

/* iv[v] = the indices of x[v] * inv for v < nv, the nv searches in lockstep (the step sizes do
 * not depend on the data), so their dependent gathers overlap */
static inline void lm_index8(const tq_kv_lm_desc *c, const __m256 *x, __m256 inv, int nv,
                             __m256i *iv)
{
    __m256 tv[8];
    for (int v = 0; v < nv; v++) {
        tv[v] = _mm256_mul_ps(x[v], inv);
        iv[v] = _mm256_setzero_si256();
    }
    int len = c->levels - 1;
    while (len > 1) {
        const int h = len / 2;
        const __m256i hv = _mm256_set1_epi32(h), h1 = _mm256_set1_epi32(h - 1);
        for (int v = 0; v < nv; v++) {
            const __m256 b = _mm256_i32gather_ps(c->bnd, _mm256_add_epi32(iv[v], h1), 4);
            const __m256i gt = _mm256_castps_si256(_mm256_cmp_ps(tv[v], b, _CMP_GT_OQ));
            iv[v] = _mm256_add_epi32(iv[v], _mm256_and_si256(gt, hv));
        }
        len -= h;
    }
    for (int v = 0; v < nv; v++) { /* gt lanes are -1 */
        const __m256 b = _mm256_i32gather_ps(c->bnd, iv[v], 4);
        iv[v] = _mm256_sub_epi32(iv[v], _mm256_castps_si256(_mm256_cmp_ps(tv[v], b, _CMP_GT_OQ)));
    }
}

static void enc_lm(const tq_kv_lm_desc *c, const float *x, int n, uint8_t *dst)
{
    const int G = c->group, nv = G / 8;
    const size_t bb = 2 + (size_t)(G / 2) * (size_t)c->pair_bits / 8;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int blk = 0; blk < n; blk++) {
        const float *xb = x + (size_t)blk * G;
        uint8_t *b = dst + (size_t)blk * bb;
        __m256 xv[8], av[8];
        __m256 am = _mm256_setzero_ps();
        for (int v = 0; v < nv; v++) {
            xv[v] = _mm256_loadu_ps(xb + 8 * v);
            av[v] = _mm256_and_ps(xv[v], absmask);
            am = _mm256_max_ps(av[v], am); /* a NaN |x| returns am: never wins */
        }
        __m128 h4 = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
        h4 = _mm_max_ps(h4, _mm_movehl_ps(h4, h4));
        h4 = _mm_max_ss(h4, _mm_shuffle_ps(h4, h4, 1));
        const float amax = _mm_cvtss_f32(h4);
        float m = 0.0f;
        if (amax > 0.0f) /* the first element of largest |x| */
            for (int v = 0; v < nv; v++) {
                const int e = _mm256_movemask_ps(_mm256_cmp_ps(av[v], _mm256_set1_ps(amax), _CMP_EQ_OQ));
                if (e) {
                    m = xb[8 * v + __builtin_ctz((unsigned)e)];
                    break;
                }
            }
        uint16_t sh = tq_kv_f16(m);
        const float mf = tq_f16_to_f32(sh);
        __m256i iv[8];
        uint8_t idx[64];
        if (mf == 0.0f || !isfinite(mf)) {
            const __m256 zero = _mm256_setzero_ps();
            __m256i z;
            lm_index8(c, &zero, zero, 1, &z);
            for (int v = 0; v < nv; v++)
                iv[v] = z;
        } else {
            lm_index8(c, xv, _mm256_set1_ps(1.0f / mf), nv, iv);
            for (int r = 0; r < c->refits; r++) {
                float pn[64], pd[64], num, den;
                for (int v = 0; v < nv; v++) {
                    const __m256 g = _mm256_i32gather_ps(c->grid, iv[v], 4);
                    _mm256_storeu_ps(pn + 8 * v, _mm256_mul_ps(g, xv[v]));
                    _mm256_storeu_ps(pd + 8 * v, _mm256_mul_ps(g, g));
                }
                lm_refit_sums(pn, pd, G, &num, &den);
                const uint16_t nh = den > 0.0f ? tq_kv_f16(num / den) : sh;
                const float nf = tq_f16_to_f32(nh);
                if (nf == 0.0f || !isfinite(nf))
                    break;
                sh = nh;
                if (r + 1 < c->refits)
                    lm_index8(c, xv, _mm256_set1_ps(1.0f / nf), nv, iv);
            }
        }
        for (int v = 0; v < nv; v++) {
            int32_t tmp[8];
            _mm256_storeu_si256((__m256i *)(void *)tmp, iv[v]);
            for (int k = 0; k < 8; k++)
                idx[8 * v + k] = (uint8_t)tmp[k];
        }
        lm_pack(idx, c, sh, b);
    }
}

/* ---- turbo keys ----------------------------------------------------------------------------- */

static void enc_k(const float *x, int64_t n, int d, int kb, uint8_t *dst)
{
    const size_t rb = tq_kv_turbo_k_row_bytes(d, kb);
    const int ng = d / TQ_KV_GROUP, sgn = kb == 8;
    const float maxv = (float)((1 << kb) - 1);
    const __m256 lo = _mm256_set1_ps(sgn ? -127.0f : 0.0f), hi = _mm256_set1_ps(sgn ? 127.0f : maxv);
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d;
        uint8_t *row = dst + (size_t)r * rb;
        uint8_t *sc = row + tq_kv_packed_bytes(d, kb), *zr = sc + 2 * (size_t)ng;
        for (int g = 0; g < ng; g++) {
            const float *xg = xr + g * TQ_KV_GROUP;
            float mn, mx, scale, zero, se;
            minmax(xg, 4, &mn, &mx);
            if (sgn) {
                scale = (mx - mn) / 254.0f;
                se = scale + tq_kv_eps;
                zero = rintf((mx + mn) / (2.0f * se));
            } else {
                scale = (mx - mn) / maxv;
                se = scale + tq_kv_eps;
                zero = rintf(mn / se);
            }
            const __m256 sev = _mm256_set1_ps(se), zv = _mm256_set1_ps(zero);
            __m256i q[4];
            for (int i = 0; i < 4; i++) {
                const __m256 t = _mm256_sub_ps(_mm256_div_ps(_mm256_loadu_ps(xg + 8 * i), sev), zv);
                q[i] = round_clamp(t, lo, hi);
            }
            store_idx32(narrow4(q[0], q[1], q[2], q[3], sgn), kb, row + (size_t)g * 4 * (size_t)kb);
            tq_wr16(sc + 2 * g, kv_f16(scale));
            tq_wr16(zr + 2 * g, kv_f16(zero));
        }
    }
}

static void dec_k(const uint8_t *src, int64_t n, int d, int kb, float *out)
{
    const size_t rb = tq_kv_turbo_k_row_bytes(d, kb);
    const int ng = d / TQ_KV_GROUP, sgn = kb == 8;
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *row = src + (size_t)r * rb;
        const uint8_t *sc = row + tq_kv_packed_bytes(d, kb), *zr = sc + 2 * (size_t)ng;
        float *o = out + r * d;
        for (int g = 0; g < ng; g++) {
            const __m256 s = _mm256_set1_ps(tq_f16_to_f32(tq_rd16(sc + 2 * g)));
            const __m256 z = _mm256_set1_ps(tq_f16_to_f32(tq_rd16(zr + 2 * g)));
            for (int j = g * TQ_KV_GROUP; j < (g + 1) * TQ_KV_GROUP; j += 8) {
                const __m256 q = _mm256_cvtepi32_ps(load_idx8(row, j, kb, sgn));
                _mm256_storeu_ps(o + j, _mm256_mul_ps(_mm256_add_ps(q, z), s));
            }
        }
    }
}

/* ---- turbo values --------------------------------------------------------------------------- */

/* index = #{ j : z > B[j] } for 8 lanes (NaN compares false -> 0) */
static inline __m256i v_index(__m256 z, int bits, const float *bd)
{
    __m256i idx = _mm256_setzero_si256();
    if (bits <= 4) {
        const int nb = (1 << bits) - 1;
        for (int j = 0; j < nb; j++)
            idx = _mm256_sub_epi32(
                idx, _mm256_castps_si256(_mm256_cmp_ps(z, _mm256_set1_ps(bd[j]), _CMP_GT_OQ)));
        return idx;
    }
    /* binary search over the non-decreasing boundaries (same count) */
    for (int step = 1 << (bits - 1); step >= 1; step >>= 1) {
        const __m256i cand = _mm256_add_epi32(idx, _mm256_set1_epi32(step));
        const __m256 b = _mm256_i32gather_ps(bd, _mm256_sub_epi32(cand, _mm256_set1_epi32(1)), 4);
        const __m256i m = _mm256_castps_si256(_mm256_cmp_ps(z, b, _CMP_GT_OQ));
        idx = _mm256_blendv_epi8(idx, cand, m);
    }
    return idx;
}

#define VBLK 1024 /* floats per row block of the value encoder (>= TQ_KV_MAX_HEAD_DIM) */

static void enc_v(const float *x, int64_t n, int d, int vb, uint8_t *dst)
{
    const size_t rb = tq_kv_turbo_v_row_bytes(d, vb);
    const int ng = d / TQ_KV_GROUP;
    const float *sg = tq_kv_signs(d), *bd = tq_kv_boundaries(vb);
    const __m256 sd = _mm256_set1_ps(tq_kv_fwht_scale(d));
    /* rows in blocks of VBLK floats, so the per-group sums of several rows run side by side */
    float y[VBLK] __attribute__((aligned(32)));
    float sq[VBLK] __attribute__((aligned(32)));
    float ss[VBLK / TQ_KV_GROUP];
    const int64_t per = VBLK / d;
    for (int64_t r0 = 0; r0 < n; r0 += per) {
        const int nr = (int)(n - r0 < per ? n - r0 : per);
        for (int i = 0; i < nr; i++) {
            const float *xr = x + (r0 + i) * d;
            float *yr = y + i * d;
            for (int j = 0; j < d; j += 8)
                _mm256_store_ps(yr + j, _mm256_mul_ps(_mm256_loadu_ps(xr + j), _mm256_loadu_ps(sg + j)));
            butterflies(yr, d);
            for (int j = 0; j < d; j += 8) {
                const __m256 v = _mm256_mul_ps(_mm256_load_ps(yr + j), sd);
                _mm256_store_ps(yr + j, v);
                _mm256_store_ps(sq + i * d + j, _mm256_mul_ps(v, v));
            }
        }
        group_sumsq(sq, nr * ng, ss);
        for (int i = 0; i < nr; i++) {
            uint8_t *row = dst + (size_t)(r0 + i) * rb;
            uint8_t *sc = row + tq_kv_packed_bytes(d, vb);
            for (int g = 0; g < ng; g++) {
                const float scale = sqrtf(ss[i * ng + g] * 0.03125f);
                const __m256 se = _mm256_set1_ps(scale + tq_kv_eps);
                const float *yg = y + i * d + g * TQ_KV_GROUP;
                __m256i q[4];
                for (int k = 0; k < 4; k++)
                    q[k] = v_index(_mm256_div_ps(_mm256_load_ps(yg + 8 * k), se), vb, bd);
                store_idx32(narrow4(q[0], q[1], q[2], q[3], 0), vb, row + (size_t)g * 4 * (size_t)vb);
                tq_wr16(sc + 2 * g, kv_f16(scale));
            }
        }
    }
}

/* C[idx]: one permute for <= 8 entries (table padded to 8), else a gather */
static inline __m256 centroid8(__m256i idx, int bits, const float *c, __m256 c8)
{
    if (bits <= 3)
        return _mm256_permutevar8x32_ps(c8, idx);
    return _mm256_i32gather_ps(c, idx, 4);
}

static void dec_v(const uint8_t *src, int64_t n, int d, int vb, float *out)
{
    const size_t rb = tq_kv_turbo_v_row_bytes(d, vb);
    const int ng = d / TQ_KV_GROUP;
    const float *sg = tq_kv_signs(d), *c = tq_kv_centroids(vb);
    const __m256 sd = _mm256_set1_ps(tq_kv_fwht_scale(d));
    float cpad[8] = {0};
    for (int i = 0; i < (1 << vb) && i < 8; i++)
        cpad[i] = c[i];
    const __m256 c8 = _mm256_loadu_ps(cpad);
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *row = src + (size_t)r * rb;
        const uint8_t *sc = row + tq_kv_packed_bytes(d, vb);
        float *o = out + r * d;
        for (int g = 0; g < ng; g++) {
            const __m256 s = _mm256_set1_ps(tq_f16_to_f32(tq_rd16(sc + 2 * g)));
            for (int j = g * TQ_KV_GROUP; j < (g + 1) * TQ_KV_GROUP; j += 8)
                _mm256_storeu_ps(o + j, _mm256_mul_ps(centroid8(load_idx8(row, j, vb, 0), vb, c, c8), s));
        }
        butterflies(o, d);
        for (int j = 0; j < d; j += 8)
            _mm256_storeu_ps(o + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(o + j), sd),
                                                  _mm256_loadu_ps(sg + j)));
    }
}

/* ---- kv8 / kv4 ------------------------------------------------------------------------------ */

static void enc_affine(const float *x, int64_t n, int d, int bits, uint8_t *dst)
{
    const size_t rb = tq_kv_affine_row_bytes(d, bits);
    const int ng = d / TQ_KV_AFFINE_GROUP;
    const float maxv = (float)((1 << bits) - 1);
    const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(maxv);
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d;
        uint8_t *row = dst + (size_t)r * rb;
        uint8_t *sc = row + tq_kv_packed_bytes(d, bits), *bi = sc + 2 * (size_t)ng;
        for (int g = 0; g < ng; g++) {
            const float *xg = xr + g * TQ_KV_AFFINE_GROUP;
            float mn, mx;
            minmax(xg, 8, &mn, &mx);
            const uint16_t sh = kv_f16((mx - mn) / maxv), bh = kv_f16(mn);
            const float s = tq_f16_to_f32(sh), m = tq_f16_to_f32(bh);
            uint8_t *pk = row + (size_t)g * TQ_KV_AFFINE_GROUP * (size_t)bits / 8;
            for (int h = 0; h < 2; h++) {
                __m256i qv = _mm256_setzero_si256();
                if (s > 0.0f) {
                    const __m256 sv = _mm256_set1_ps(s), mv = _mm256_set1_ps(m);
                    __m256i q[4];
                    for (int i = 0; i < 4; i++) {
                        const __m256 v = _mm256_loadu_ps(xg + 32 * h + 8 * i);
                        q[i] = round_clamp(_mm256_div_ps(_mm256_sub_ps(v, mv), sv), lo, hi);
                    }
                    qv = narrow4(q[0], q[1], q[2], q[3], 0);
                }
                store_idx32(qv, bits, pk + (size_t)h * 4 * (size_t)bits);
            }
            tq_wr16(sc + 2 * g, sh);
            tq_wr16(bi + 2 * g, bh);
        }
    }
}

static void dec_affine(const uint8_t *src, int64_t n, int d, int bits, float *out)
{
    const size_t rb = tq_kv_affine_row_bytes(d, bits);
    const int ng = d / TQ_KV_AFFINE_GROUP;
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *row = src + (size_t)r * rb;
        const uint8_t *sc = row + tq_kv_packed_bytes(d, bits), *bi = sc + 2 * (size_t)ng;
        float *o = out + r * d;
        for (int g = 0; g < ng; g++) {
            const __m256 s = _mm256_set1_ps(tq_f16_to_f32(tq_rd16(sc + 2 * g)));
            const __m256 m = _mm256_set1_ps(tq_f16_to_f32(tq_rd16(bi + 2 * g)));
            for (int j = g * TQ_KV_AFFINE_GROUP; j < (g + 1) * TQ_KV_AFFINE_GROUP; j += 8) {
                const __m256 q = _mm256_cvtepi32_ps(load_idx8(row, j, bits, 0));
                _mm256_storeu_ps(o + j, _mm256_add_ps(_mm256_mul_ps(q, s), m));
            }
        }
    }
}

/* ---- f16 rows ------------------------------------------------------------------------------- */

static void enc_f16(const float *x, int64_t n, uint8_t *dst)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), RNE));
    for (; i < n; i++)
        tq_wr16(dst + 2 * i, tq_f32_to_f16(x[i]));
}

static void dec_f16(const uint8_t *src, int64_t n, float *out)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * i))));
    for (; i < n; i++)
        out[i] = tq_f16_to_f32(tq_rd16(src + 2 * i));
}

/* ---- bf16 rows: RNE by integer add (tq_f32_to_bf16), NaN -> quiet, same bits ---------------- */

static inline __m256i bf16_bits(__m256 x)
{
    const __m256i u = _mm256_castps_si256(x);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i rne = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                             _mm256_and_si256(hi, _mm256_set1_epi32(1)))),
        16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(rne, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}

static void enc_bf16(const float *x, int64_t n, uint8_t *dst)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i a = bf16_bits(_mm256_loadu_ps(x + i)), b = bf16_bits(_mm256_loadu_ps(x + i + 8));
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i *)(dst + 2 * i), p);
    }
    for (; i < n; i++)
        tq_wr16(dst + 2 * i, tq_f32_to_bf16(x[i]));
}

static void dec_bf16(const uint8_t *src, int64_t n, float *out)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + 2 * i)));
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++)
        out[i] = tq_bf16_to_f32(tq_rd16(src + 2 * i));
}

const tq_kv_kernels tq_kv_kernels_avx2 = {
    .isa = TQ_ISA_AVX2,
    .enc_k = enc_k,
    .dec_k = dec_k,
    .enc_v = enc_v,
    .dec_v = dec_v,
    .enc_affine = enc_affine,
    .dec_affine = dec_affine,
    .enc_f16 = enc_f16,
    .dec_f16 = dec_f16,
    .enc_bf16 = enc_bf16,
    .dec_bf16 = dec_bf16,
    .fwht = fwht256,
    .enc_lm = enc_lm,
};
