/* kv_avx512.c -- AVX-512 (F/BW/DQ/VL) KV codec kernels. Byte-identical to the scalar reference
 * (src/kv/kv_ref.c) by the same rules as kv_avx2.c: same per-element IEEE operations in the same
 * order (true div/sqrt, no FMA, round-to-nearest-even), exact tree min/max with the reference's
 * NaN and signed-zero rules, the per-group sum of squares kept sequential, NaN index -> 0.
 * Compiled with the AVX-512 flags only (CMake source property). */
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

/* ---- helpers -------------------------------------------------------------------------------- */

static inline void minmax(const float *x, int nv, float *mn, float *mx)
{
    __m512 lo = _mm512_loadu_ps(x), hi = lo;
    __mmask16 nan = _mm512_cmp_ps_mask(lo, lo, _CMP_UNORD_Q);
    for (int i = 1; i < nv; i++) {
        const __m512 v = _mm512_loadu_ps(x + 16 * i);
        lo = _mm512_min_ps(lo, v);
        hi = _mm512_max_ps(hi, v);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    if (nan) {
        *mn = NAN;
        *mx = NAN;
        return;
    }
    *mn = _mm512_reduce_min_ps(lo) + 0.0f;
    *mx = _mm512_reduce_max_ps(hi) + 0.0f;
}

static inline __m512i round_clamp(__m512 t, __m512 lo, __m512 hi)
{
    __m512 r = _mm512_roundscale_ps(t, RNE);
    r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, r, _CMP_ORD_Q), r); /* NaN -> 0 */
    r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
    return _mm512_cvttps_epi32(r);
}

/* two int32 vectors (values -128..255) -> 32 index bytes in order (low byte of each) */
static inline __m256i narrow2(__m512i a, __m512i b)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(a)),
                                   _mm512_cvtepi32_epi8(b), 1);
}

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
        _mm_storeu_si128((__m128i *)dst, _mm256_cvtepi16_epi8(w));
    } else {
        pack_fold(q, bits, dst);
    }
}

/* 16 indices starting at element j (j % 16 == 0) -> int32 */
static inline __m512i load_idx16(const uint8_t *src, int j, int bits, int is_signed)
{
    if (bits == 8) {
        const __m128i b = _mm_loadu_si128((const __m128i *)(src + j));
        return is_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
    }
    if (bits == 4 || bits == 2) { /* replicate each byte 8/bits times, shift, mask */
        const __m128i b = bits == 4 ? _mm_loadl_epi64((const __m128i *)(src + j / 2))
                                    : _mm_cvtsi32_si128((int)tq_rd32(src + j / 4));
        const __m128i rep = bits == 4 ? _mm_unpacklo_epi8(b, b)
                                      : _mm_shuffle_epi8(b, _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2,
                                                                          2, 2, 2, 3, 3, 3, 3));
        const __m512i sh = bits == 4 ? _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4)
                                     : _mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6);
        return _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(rep), sh),
                                _mm512_set1_epi32((1 << bits) - 1));
    }
    const uint8_t *p = src + (size_t)j / 8 * (size_t)bits;
    const uint64_t a0 = kv_rd_le(p, bits), a1 = kv_rd_le(p + bits, bits);
    const __m512i sh = _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
                                          _mm512_set1_epi64(bits));
    const __m256i lo = _mm512_cvtepi64_epi32(_mm512_srlv_epi64(_mm512_set1_epi64((long long)a0), sh));
    const __m256i hi = _mm512_cvtepi64_epi32(_mm512_srlv_epi64(_mm512_set1_epi64((long long)a1), sh));
    const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    return _mm512_and_si512(v, _mm512_set1_epi32((1 << bits) - 1));
}

/* ---- FWHT ----------------------------------------------------------------------------------- */

static inline __m512 bfly_in(__m512 x)
{
    __m512 s = _mm512_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)); /* h = 1 */
    x = _mm512_mask_blend_ps(0xAAAA, _mm512_add_ps(x, s), _mm512_sub_ps(s, x));
    s = _mm512_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)); /* h = 2 */
    x = _mm512_mask_blend_ps(0xCCCC, _mm512_add_ps(x, s), _mm512_sub_ps(s, x));
    s = _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(2, 3, 0, 1)); /* h = 4 */
    x = _mm512_mask_blend_ps(0xF0F0, _mm512_add_ps(x, s), _mm512_sub_ps(s, x));
    s = _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(1, 0, 3, 2)); /* h = 8 */
    return _mm512_mask_blend_ps(0xFF00, _mm512_add_ps(x, s), _mm512_sub_ps(s, x));
}

static void butterflies(float *u, int n)
{
    for (int i = 0; i < n; i += 16)
        _mm512_storeu_ps(u + i, bfly_in(_mm512_loadu_ps(u + i)));
    for (int h = 16; h < n; h <<= 1)
        for (int blk = 0; blk < n; blk += 2 * h)
            for (int i = blk; i < blk + h; i += 16) {
                const __m512 a = _mm512_loadu_ps(u + i), b = _mm512_loadu_ps(u + i + h);
                _mm512_storeu_ps(u + i, _mm512_add_ps(a, b));
                _mm512_storeu_ps(u + i + h, _mm512_sub_ps(a, b));
            }
}

static void fwht512(float *u, int n)
{
    butterflies(u, n);
}

/* ---- lm<L>g<G> blocks (rot: schemes) ------------------------------------------------------------
 * tq_kv_lm_encode_block_ref() lane by lane: |x| max (NaN never wins), the first element of that
 * |x|, t = x * inv, the halving index search of the reference (the same compares, boundaries
 * gathered, or permuted from two registers when there are at most 32), products g x and g g
 * rounded one by one; only the two refit sums run in scalar, in element order. */

typedef struct lm_tabs {
    __m512 b0, b1; /* boundaries 0..31 (L - 1 <= 32), else unused */
    __m512 g0, g1; /* grid 0..31 (L <= 32), else unused */
    int small_b, small_g;
} lm_tabs;

static inline __m512 lm_bnd(const tq_kv_lm_desc *c, const lm_tabs *t, __m512i i)
{
    return t->small_b ? _mm512_permutex2var_ps(t->b0, i, t->b1) : _mm512_i32gather_ps(i, c->bnd, 4);
}

/* iv[v] = the indices of t[v] = x[v] * inv for v < nv, the nv searches in lockstep (the step
 * sizes do not depend on the data), so their dependent gathers overlap */
static inline void lm_index16(const tq_kv_lm_desc *c, const lm_tabs *t, const __m512 *x,
                              __m512 inv, int nv, __m512i *iv)
{
    __m512 tv[4];
    for (int v = 0; v < nv; v++) {
        tv[v] = _mm512_mul_ps(x[v], inv);
        iv[v] = _mm512_setzero_si512();
    }
    int len = c->levels - 1;
    while (len > 1) {
        const int h = len / 2;
        const __m512i hv = _mm512_set1_epi32(h), h1 = _mm512_set1_epi32(h - 1);
        for (int v = 0; v < nv; v++) {
            const __m512 b = lm_bnd(c, t, _mm512_add_epi32(iv[v], h1));
            iv[v] = _mm512_mask_add_epi32(iv[v], _mm512_cmp_ps_mask(tv[v], b, _CMP_GT_OQ), iv[v], hv);
        }
        len -= h;
    }
    for (int v = 0; v < nv; v++)
        iv[v] = _mm512_mask_add_epi32(iv[v], _mm512_cmp_ps_mask(tv[v], lm_bnd(c, t, iv[v]), _CMP_GT_OQ),
                                      iv[v], _mm512_set1_epi32(1));
}

static void enc_lm(const tq_kv_lm_desc *c, const float *x, int n, uint8_t *dst)
{
    const int G = c->group, nv = G / 16, L = c->levels;
    const size_t bb = 2 + (size_t)(G / 2) * (size_t)c->pair_bits / 8;
    lm_tabs t = {.small_b = L - 1 <= 32, .small_g = L <= 32};
    if (t.small_b) {
        const int nb = L - 1;
        t.b0 = _mm512_maskz_loadu_ps((__mmask16)(nb >= 16 ? 0xffff : (1u << nb) - 1u), c->bnd);
        t.b1 = nb > 16 ? _mm512_maskz_loadu_ps((__mmask16)((1u << (nb - 16)) - 1u), c->bnd + 16)
                       : _mm512_setzero_ps();
    }
    if (t.small_g) {
        t.g0 = _mm512_maskz_loadu_ps((__mmask16)(L >= 16 ? 0xffff : (1u << L) - 1u), c->grid);
        t.g1 = L > 16 ? _mm512_maskz_loadu_ps((__mmask16)(L >= 32 ? 0xffff : (1u << (L - 16)) - 1u),
                                              c->grid + 16)
                      : _mm512_setzero_ps();
    }
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int blk = 0; blk < n; blk++) {
        const float *xb = x + (size_t)blk * G;
        uint8_t *b = dst + (size_t)blk * bb;
        __m512 xv[4], av[4];
        __m512 am = _mm512_setzero_ps();
        for (int v = 0; v < nv; v++) {
            xv[v] = _mm512_loadu_ps(xb + 16 * v);
            av[v] = _mm512_and_ps(xv[v], absmask);
            am = _mm512_max_ps(av[v], am); /* a NaN |x| returns am: never wins */
        }
        const float amax = _mm512_reduce_max_ps(am);
        float m = 0.0f;
        if (amax > 0.0f) /* the first element of largest |x| */
            for (int v = 0; v < nv; v++) {
                const __mmask16 e = _mm512_cmp_ps_mask(av[v], _mm512_set1_ps(amax), _CMP_EQ_OQ);
                if (e) {
                    m = xb[16 * v + __builtin_ctz(e)];
                    break;
                }
            }
        uint16_t sh = tq_kv_f16(m);
        const float mf = tq_f16_to_f32(sh);
        __m512i iv[4];
        uint8_t idx[64];
        if (mf == 0.0f || !isfinite(mf)) {
            const __m512 zero = _mm512_setzero_ps();
            __m512i z;
            lm_index16(c, &t, &zero, zero, 1, &z);
            for (int v = 0; v < nv; v++)
                iv[v] = z;
        } else {
            lm_index16(c, &t, xv, _mm512_set1_ps(1.0f / mf), nv, iv);
            for (int r = 0; r < c->refits; r++) {
                float pn[64], pd[64], num, den;
                for (int v = 0; v < nv; v++) {
                    const __m512 g = t.small_g ? _mm512_permutex2var_ps(t.g0, iv[v], t.g1)
                                               : _mm512_i32gather_ps(iv[v], c->grid, 4);
                    _mm512_storeu_ps(pn + 16 * v, _mm512_mul_ps(g, xv[v]));
                    _mm512_storeu_ps(pd + 16 * v, _mm512_mul_ps(g, g));
                }
                lm_refit_sums(pn, pd, G, &num, &den);
                const uint16_t nh = den > 0.0f ? tq_kv_f16(num / den) : sh;
                const float nf = tq_f16_to_f32(nh);
                if (nf == 0.0f || !isfinite(nf))
                    break;
                sh = nh;
                if (r + 1 < c->refits)
                    lm_index16(c, &t, xv, _mm512_set1_ps(1.0f / nf), nv, iv);
            }
        }
        for (int v = 0; v < nv; v++)
            _mm_storeu_si128((__m128i *)(void *)(idx + 16 * v), _mm512_cvtepi32_epi8(iv[v]));
        lm_pack(idx, c, sh, b);
    }
}

/* ---- turbo keys ----------------------------------------------------------------------------- */

static void enc_k(const float *x, int64_t n, int d, int kb, uint8_t *dst)
{
    const size_t rb = tq_kv_turbo_k_row_bytes(d, kb);
    const int ng = d / TQ_KV_GROUP, sgn = kb == 8;
    const float maxv = (float)((1 << kb) - 1);
    const __m512 lo = _mm512_set1_ps(sgn ? -127.0f : 0.0f), hi = _mm512_set1_ps(sgn ? 127.0f : maxv);
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d;
        uint8_t *row = dst + (size_t)r * rb;
        uint8_t *sc = row + tq_kv_packed_bytes(d, kb), *zr = sc + 2 * (size_t)ng;
        for (int g = 0; g < ng; g++) {
            const float *xg = xr + g * TQ_KV_GROUP;
            float mn, mx, scale, zero, se;
            minmax(xg, 2, &mn, &mx);
            if (sgn) {
                scale = (mx - mn) / 254.0f;
                se = scale + tq_kv_eps;
                zero = rintf((mx + mn) / (2.0f * se));
            } else {
                scale = (mx - mn) / maxv;
                se = scale + tq_kv_eps;
                zero = rintf(mn / se);
            }
            const __m512 sev = _mm512_set1_ps(se), zv = _mm512_set1_ps(zero);
            const __m512i q0 = round_clamp(
                _mm512_sub_ps(_mm512_div_ps(_mm512_loadu_ps(xg), sev), zv), lo, hi);
            const __m512i q1 = round_clamp(
                _mm512_sub_ps(_mm512_div_ps(_mm512_loadu_ps(xg + 16), sev), zv), lo, hi);
            store_idx32(narrow2(q0, q1), kb, row + (size_t)g * 4 * (size_t)kb);
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
            const __m512 s = _mm512_set1_ps(tq_f16_to_f32(tq_rd16(sc + 2 * g)));
            const __m512 z = _mm512_set1_ps(tq_f16_to_f32(tq_rd16(zr + 2 * g)));
            for (int j = g * TQ_KV_GROUP; j < (g + 1) * TQ_KV_GROUP; j += 16) {
                const __m512 q = _mm512_cvtepi32_ps(load_idx16(row, j, kb, sgn));
                _mm512_storeu_ps(o + j, _mm512_mul_ps(_mm512_add_ps(q, z), s));
            }
        }
    }
}

/* ---- turbo values --------------------------------------------------------------------------- */

typedef struct vtab {
    __m512 b_lo, b_hi; /* boundaries padded to 32 (4/5 bits) */
    __m512 c_lo, c_hi; /* centroids padded to 32 (<= 5 bits) */
} vtab;

static void vtab_init(vtab *t, int bits)
{
    float b[32] = {0}, c[32] = {0};
    const int n = 1 << bits;
    if (bits <= 5) {
        for (int i = 0; i < n - 1; i++)
            b[i] = tq_kv_boundaries(bits)[i];
        for (int i = 0; i < n; i++)
            c[i] = tq_kv_centroids(bits)[i];
    }
    t->b_lo = _mm512_loadu_ps(b);
    t->b_hi = _mm512_loadu_ps(b + 16);
    t->c_lo = _mm512_loadu_ps(c);
    t->c_hi = _mm512_loadu_ps(c + 16);
}

/* #{ j : z > B[j] } (NaN compares false -> 0) */
static inline __m512i v_index(__m512 z, int bits, const float *bd, const vtab *t)
{
    __m512i idx = _mm512_setzero_si512();
    const __m512i one = _mm512_set1_epi32(1);
    if (bits <= 3) {
        for (int j = 0; j < (1 << bits) - 1; j++)
            idx = _mm512_mask_add_epi32(idx, _mm512_cmp_ps_mask(z, _mm512_set1_ps(bd[j]), _CMP_GT_OQ),
                                        idx, one);
        return idx;
    }
    /* binary search over the non-decreasing boundaries (the same count) */
    for (int step = 1 << (bits - 1); step >= 1; step >>= 1) {
        const __m512i cand = _mm512_add_epi32(idx, _mm512_set1_epi32(step));
        const __m512i at = _mm512_sub_epi32(cand, one);
        __m512 b;
        if (bits == 4)
            b = _mm512_permutexvar_ps(at, t->b_lo);
        else if (bits == 5)
            b = _mm512_permutex2var_ps(t->b_lo, at, t->b_hi);
        else
            b = _mm512_i32gather_ps(at, bd, 4);
        idx = _mm512_mask_mov_epi32(idx, _mm512_cmp_ps_mask(z, b, _CMP_GT_OQ), cand);
    }
    return idx;
}

static inline __m512 centroid16(__m512i idx, int bits, const float *c, const vtab *t)
{
    if (bits <= 4)
        return _mm512_permutexvar_ps(idx, t->c_lo);
    if (bits == 5)
        return _mm512_permutex2var_ps(t->c_lo, idx, t->c_hi);
    return _mm512_i32gather_ps(idx, c, 4);
}

#define VBLK 1024 /* floats per row block of the value encoder (>= TQ_KV_MAX_HEAD_DIM) */

static void enc_v(const float *x, int64_t n, int d, int vb, uint8_t *dst)
{
    const size_t rb = tq_kv_turbo_v_row_bytes(d, vb);
    const int ng = d / TQ_KV_GROUP;
    const float *sg = tq_kv_signs(d), *bd = tq_kv_boundaries(vb);
    const __m512 sd = _mm512_set1_ps(tq_kv_fwht_scale(d));
    vtab t;
    vtab_init(&t, vb);
    /* rows in blocks of VBLK floats, so the per-group sums of several rows run side by side */
    float y[VBLK] __attribute__((aligned(64)));
    float sq[VBLK] __attribute__((aligned(64)));
    float ss[VBLK / TQ_KV_GROUP];
    const int64_t per = VBLK / d;
    for (int64_t r0 = 0; r0 < n; r0 += per) {
        const int nr = (int)(n - r0 < per ? n - r0 : per);
        for (int i = 0; i < nr; i++) {
            const float *xr = x + (r0 + i) * d;
            float *yr = y + i * d;
            for (int j = 0; j < d; j += 16)
                _mm512_store_ps(yr + j, _mm512_mul_ps(_mm512_loadu_ps(xr + j), _mm512_loadu_ps(sg + j)));
            butterflies(yr, d);
            for (int j = 0; j < d; j += 16) {
                const __m512 v = _mm512_mul_ps(_mm512_load_ps(yr + j), sd);
                _mm512_store_ps(yr + j, v);
                _mm512_store_ps(sq + i * d + j, _mm512_mul_ps(v, v));
            }
        }
        group_sumsq(sq, nr * ng, ss);
        for (int i = 0; i < nr; i++) {
            uint8_t *row = dst + (size_t)(r0 + i) * rb;
            uint8_t *sc = row + tq_kv_packed_bytes(d, vb);
            for (int g = 0; g < ng; g++) {
                const float scale = sqrtf(ss[i * ng + g] * 0.03125f);
                const __m512 se = _mm512_set1_ps(scale + tq_kv_eps);
                const float *yg = y + i * d + g * TQ_KV_GROUP;
                const __m512i q0 = v_index(_mm512_div_ps(_mm512_load_ps(yg), se), vb, bd, &t);
                const __m512i q1 = v_index(_mm512_div_ps(_mm512_load_ps(yg + 16), se), vb, bd, &t);
                store_idx32(narrow2(q0, q1), vb, row + (size_t)g * 4 * (size_t)vb);
                tq_wr16(sc + 2 * g, kv_f16(scale));
            }
        }
    }
}

static void dec_v(const uint8_t *src, int64_t n, int d, int vb, float *out)
{
    const size_t rb = tq_kv_turbo_v_row_bytes(d, vb);
    const int ng = d / TQ_KV_GROUP;
    const float *sg = tq_kv_signs(d), *c = tq_kv_centroids(vb);
    const __m512 sd = _mm512_set1_ps(tq_kv_fwht_scale(d));
    vtab t;
    vtab_init(&t, vb);
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *row = src + (size_t)r * rb;
        const uint8_t *sc = row + tq_kv_packed_bytes(d, vb);
        float *o = out + r * d;
        for (int g = 0; g < ng; g++) {
            const __m512 s = _mm512_set1_ps(tq_f16_to_f32(tq_rd16(sc + 2 * g)));
            for (int j = g * TQ_KV_GROUP; j < (g + 1) * TQ_KV_GROUP; j += 16)
                _mm512_storeu_ps(o + j,
                                 _mm512_mul_ps(centroid16(load_idx16(row, j, vb, 0), vb, c, &t), s));
        }
        butterflies(o, d);
        for (int j = 0; j < d; j += 16)
            _mm512_storeu_ps(o + j, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(o + j), sd),
                                                  _mm512_loadu_ps(sg + j)));
    }
}

/* ---- kv8 / kv4 ------------------------------------------------------------------------------ */

static void enc_affine(const float *x, int64_t n, int d, int bits, uint8_t *dst)
{
    const size_t rb = tq_kv_affine_row_bytes(d, bits);
    const int ng = d / TQ_KV_AFFINE_GROUP;
    const float maxv = (float)((1 << bits) - 1);
    const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(maxv);
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d;
        uint8_t *row = dst + (size_t)r * rb;
        uint8_t *sc = row + tq_kv_packed_bytes(d, bits), *bi = sc + 2 * (size_t)ng;
        for (int g = 0; g < ng; g++) {
            const float *xg = xr + g * TQ_KV_AFFINE_GROUP;
            float mn, mx;
            minmax(xg, 4, &mn, &mx);
            const uint16_t sh = kv_f16((mx - mn) / maxv), bh = kv_f16(mn);
            const float s = tq_f16_to_f32(sh), m = tq_f16_to_f32(bh);
            uint8_t *pk = row + (size_t)g * TQ_KV_AFFINE_GROUP * (size_t)bits / 8;
            for (int h = 0; h < 2; h++) {
                __m256i qv = _mm256_setzero_si256();
                if (s > 0.0f) {
                    const __m512 sv = _mm512_set1_ps(s), mv = _mm512_set1_ps(m);
                    const __m512 v0 = _mm512_loadu_ps(xg + 32 * h), v1 = _mm512_loadu_ps(xg + 32 * h + 16);
                    qv = narrow2(round_clamp(_mm512_div_ps(_mm512_sub_ps(v0, mv), sv), lo, hi),
                                 round_clamp(_mm512_div_ps(_mm512_sub_ps(v1, mv), sv), lo, hi));
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
            const __m512 s = _mm512_set1_ps(tq_f16_to_f32(tq_rd16(sc + 2 * g)));
            const __m512 m = _mm512_set1_ps(tq_f16_to_f32(tq_rd16(bi + 2 * g)));
            for (int j = g * TQ_KV_AFFINE_GROUP; j < (g + 1) * TQ_KV_AFFINE_GROUP; j += 16) {
                const __m512 q = _mm512_cvtepi32_ps(load_idx16(row, j, bits, 0));
                _mm512_storeu_ps(o + j, _mm512_add_ps(_mm512_mul_ps(q, s), m));
            }
        }
    }
}

/* ---- f16 rows ------------------------------------------------------------------------------- */

static void enc_f16(const float *x, int64_t n, uint8_t *dst)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + 2 * i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), RNE));
    for (; i < n; i++)
        tq_wr16(dst + 2 * i, tq_f32_to_f16(x[i]));
}

static void dec_f16(const uint8_t *src, int64_t n, float *out)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + 2 * i))));
    for (; i < n; i++)
        out[i] = tq_f16_to_f32(tq_rd16(src + 2 * i));
}

/* ---- bf16 rows: RNE by integer add (tq_f32_to_bf16), NaN -> quiet, same bits ---------------- */

static void enc_bf16(const float *x, int64_t n, uint8_t *dst)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(x + i));
        const __m512i hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_srli_epi32(
            _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                                 _mm512_and_si512(hi, _mm512_set1_epi32(1)))),
            16);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(
            _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
        _mm256_storeu_si256((__m256i *)(dst + 2 * i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++)
        tq_wr16(dst + 2 * i, tq_f32_to_bf16(x[i]));
}

static void dec_bf16(const uint8_t *src, int64_t n, float *out)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + 2 * i)));
        _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
    for (; i < n; i++)
        out[i] = tq_bf16_to_f32(tq_rd16(src + 2 * i));
}

const tq_kv_kernels tq_kv_kernels_avx512 = {
    .isa = TQ_ISA_AVX512,
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
    .fwht = fwht512,
    .enc_lm = enc_lm,
};
