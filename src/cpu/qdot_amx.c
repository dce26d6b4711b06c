/* qdot_amx.c -- the AMX int8 tiles of qdot_amx.h. Compiled with -mamx-tile -mamx-int8 and the
 * AVX-512 flags when the compiler knows them (CMakeLists.txt); otherwise only the stubs. */
#include <string.h>

#include "core/core.h"
#include "cpu/qdot.h"
#include "cpu/qdot_amx.h"
#include "cpu/qdot_iq4nl.h"
#include "cpu/qdot_r16.h"

#if defined(TQ_HAVE_AMX) && defined(__x86_64__) && defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512BW__)
#include <immintrin.h>

#define MAXB (TQ_AMX_MAXK / TQ_QK) /* blocks per row */

enum { F_Q8_0, F_Q4_0, F_Q4_1, F_Q5_0, F_Q5_1, F_IQ4NL };

typedef struct tilecfg {
    uint8_t palette, start;
    uint8_t res[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

/* One block of a group of 16 tokens: qdot.h's tq_q8p (qs[k4][4 t + e] = token t's qs[4 k4 + e]:
 * the tile's B operand, 8 rows of 64 bytes; d and s per token, zeros for absent tokens). */
typedef tq_q8p amx_blk;

/* tokens [0, nt) of a (nb blocks each) -> the group p[0 .. nb) (tq_q8p_pack, absent lanes 0) */
static void pack_act(const tq_q8a *a, int64_t nb, int64_t nt, amx_blk *p)
{
    if (nt < 16)
        memset(p, 0, sizeof(*p) * (size_t)nb);
    for (int64_t t = 0; t < nt; t++)
        tq_q8p_pack(a + t * nb, nb, p, (int)t);
}

static inline size_t fmt_bytes(int F)
{
    switch (F) {
    case F_Q8_0: return 34;
    case F_Q4_1: return 20;
    case F_Q5_0: return 22;
    case F_Q5_1: return 24;
    default: return 18; /* Q4_0, IQ4_NL */
    }
}

/* Rows 2q, 2q + 1 (p1 NULL: absent) of one block -> 64 bytes of weight integers in element
 * order (row 2q's 32, then row 2q + 1's). */
static inline __attribute__((always_inline)) __m512i unpack2(int F, const uint8_t *p0,
                                                              const uint8_t *p1)
{
    if (F == F_Q8_0) {
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(p0 + 2));
        const __m256i x1 = p1 ? _mm256_loadu_si256((const __m256i *)(p1 + 2))
                              : _mm256_setzero_si256();
        return _mm512_inserti64x4(_mm512_castsi256_si512(x0), x1, 1);
    }
    const int off = F == F_Q4_1 ? 4 : F == F_Q5_0 ? 6 : F == F_Q5_1 ? 8 : 2;
    const __m128i x0 = _mm_loadu_si128((const __m128i *)(p0 + off));
    const __m128i x1 = p1 ? _mm_loadu_si128((const __m128i *)(p1 + off)) : _mm_setzero_si128();
    __m512i v = _mm512_inserti32x4(_mm512_castsi128_si512(x0), x0, 1);
    v = _mm512_inserti32x4(_mm512_inserti32x4(v, x1, 2), x1, 3);
    const __m512i sh = _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4);
    v = _mm512_and_si512(_mm512_srlv_epi32(v, sh), _mm512_set1_epi8(15));
    if (F == F_Q4_0)
        return _mm512_sub_epi8(v, _mm512_set1_epi8(8));
    if (F == F_IQ4NL)
        return _mm512_shuffle_epi8(
            _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tq_iq4nl_values)), v);
    if (F == F_Q5_0 || F == F_Q5_1) {
        const int qo = F == F_Q5_0 ? 2 : 4;
        uint32_t h0, h1 = 0;
        memcpy(&h0, p0 + qo, 4);
        if (p1)
            memcpy(&h1, p1 + qo, 4);
        const __mmask64 m = (__mmask64)h0 | (__mmask64)h1 << 32;
        v = _mm512_or_si512(v, _mm512_maskz_mov_epi8(m, _mm512_set1_epi8(16)));
        if (F == F_Q5_0)
            v = _mm512_sub_epi8(v, _mm512_set1_epi8(16));
    }
    return v;
}

/* 16 rows (nr valid) of one block (wb: row 0's block) -> dst, 16 x 32 bytes */
static inline __attribute__((always_inline)) void unpack16(int F, const uint8_t *wb, size_t rb,
                                                           int nr, int8_t *dst)
{
    for (int q = 0; q < 8; q++) {
        const int r = 2 * q;
        __m512i v = _mm512_setzero_si512();
        if (r < nr)
            v = unpack2(F, wb + (size_t)r * rb, r + 1 < nr ? wb + (size_t)(r + 1) * rb : NULL);
        _mm512_store_si512((__m512i *)(dst + 64 * q), v);
    }
}

/* transpose of a 16 x 16 float matrix in 16 zmm (block swaps at 8, 4, 2, 1) */
static inline __attribute__((always_inline)) void transpose16(__m512 *r)
{
    for (int h = 8; h >= 1; h /= 2) {
        int ia[16], ib[16];
        for (int c = 0; c < 16; c++) {
            ia[c] = (c & h) ? 16 + c - h : c;
            ib[c] = (c & h) ? 16 + c : c + h;
        }
        const __m512i xa = _mm512_loadu_si512(ia), xb = _mm512_loadu_si512(ib);
        for (int i = 0; i < 16; i++) {
            if (i & h)
                continue;
            const __m512 u = r[i], v = r[i + h];
            r[i] = _mm512_permutex2var_ps(u, xa, v);
            r[i + h] = _mm512_permutex2var_ps(u, xb, v);
        }
    }
}

/* the tile product of block b into C tile c: A (tile ta) from abuf or the weights (Q8_0 full
 * groups), B (tile tb) from the prepacked activations; tile numbers must be literals */
#define TILE_STEP(c, ta, tb, F, A_PTR, A_STRIDE, B_PTR, B_STRIDE)                                  \
    do {                                                                                           \
        _tile_loadd(ta, A_PTR, A_STRIDE);                                                          \
        _tile_loadd(tb, B_PTR, B_STRIDE);                                                          \
        _tile_zero(c);                                                                             \
        if ((F) == F_Q4_1 || (F) == F_Q5_1)                                                        \
            _tile_dpbusd(c, ta, tb);                                                               \
        else                                                                                       \
            _tile_dpbssd(c, ta, tb);                                                               \
    } while (0)

#define AI static inline __attribute__((always_inline))

/* block b's weight integers of the 16 rows into abuf[b % 3] (Q8_0 full groups: none needed) */
AI void unpack_blk(int F, int64_t b, const uint8_t *w0, size_t rb, int nr, int8_t (*abuf)[512])
{
    if (!(F == F_Q8_0 && nr == 16))
        unpack16(F, w0 + (size_t)b * fmt_bytes(F), rb, nr, abuf[b % 3]);
}

/* block b's tile product into C tile b & 1 */
AI void tile_blk(int F, int64_t b, const uint8_t *w0, size_t rb, int nr, const amx_blk *p,
                 int8_t (*abuf)[512])
{
    const void *ap = abuf[b % 3];
    long as = 32;
    if (F == F_Q8_0 && nr == 16) { /* the int8 weights straight from the rows */
        ap = w0 + (size_t)b * fmt_bytes(F) + 2;
        as = (long)rb;
    }
    if (b & 1)
        TILE_STEP(1, 3, 5, F, ap, as, p[b].qs, 64);
    else
        TILE_STEP(0, 2, 4, F, ap, as, p[b].qs, 64);
}

/* the float part of block b from its stored C (cb): per (row, token) lane
 * acc = fma((float)P, d_w * d_a, acc), accm = accm + m_w * s_a */
AI void float_blk(int F, int tw, int64_t b, const uint8_t *w0, __m512i ridx, __mmask16 rmask,
                  const amx_blk *p, const int32_t *cb, __m512 *acc, __m512 *accm)
{
    const int has_min = F == F_Q4_1 || F == F_Q5_1;
    /* d (and m) of the 16 rows' block b */
    const __m512i g = _mm512_mask_i32gather_epi32(
        _mm512_setzero_si512(), rmask, ridx, (const void *)(w0 + (size_t)b * fmt_bytes(F)), 1);
    const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
    const __m512 mw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16)));
    __m512 dav = _mm512_loadu_ps(p[b].d), sav = _mm512_loadu_ps(p[b].s);
    if (tw == 16) {
        for (int i = 0; i < 16; i++) {
            const __m512i pi = _mm512_set1_epi32(i);
            const __m512 P = _mm512_cvtepi32_ps(_mm512_load_si512(cb + 16 * i));
            const __m512 s = _mm512_mul_ps(_mm512_permutexvar_ps(pi, dw), dav);
            acc[i] = _mm512_fmadd_ps(P, s, acc[i]);
            if (has_min)
                accm[i] = _mm512_add_ps(accm[i],
                                        _mm512_mul_ps(_mm512_permutexvar_ps(pi, mw), sav));
        }
        return;
    }
    /* zmm q: rows 2q (lanes 0-7) and 2q + 1 (8-15) x tokens 0-7 */
    dav = _mm512_shuffle_f32x4(dav, dav, 0x44);
    sav = _mm512_shuffle_f32x4(sav, sav, 0x44);
    const __m512i pair = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    for (int q = 0; q < 8; q++) {
        const __m512i pi = _mm512_add_epi32(_mm512_set1_epi32(2 * q), pair);
        const __m512 P = _mm512_cvtepi32_ps(_mm512_load_si512(cb + 16 * q));
        const __m512 s = _mm512_mul_ps(_mm512_permutexvar_ps(pi, dw), dav);
        acc[q] = _mm512_fmadd_ps(P, s, acc[q]);
        if (has_min)
            accm[q] = _mm512_add_ps(accm[q], _mm512_mul_ps(_mm512_permutexvar_ps(pi, mw), sav));
    }
}

/* rows [r0, r1) x the nt tokens of p (tw = 8 or 16 tile columns) -> y (token t at y + t * ldy).
 * Pipelined so that no load reads what a store of the same step wrote (a tile store does not
 * forward to vector loads, nor vector stores to tile loads): step b issues block b+1's tile
 * product, unpacks block b+2, stores block b's C and does block b-1's float part. */
AI void run_rows(int F, int tw, const uint8_t *w, size_t rb, int64_t nb, const amx_blk *p,
                 int64_t nt, float *y, int64_t ldy, int64_t r0, int64_t r1, int pf)
{
    _Alignas(64) int8_t abuf[3][512];
    _Alignas(64) int32_t cbuf[2][256];
    const __m512i ridx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)rb));
    for (int64_t r = r0; r < r1; r += 16) {
        const int nr = r1 - r < 16 ? (int)(r1 - r) : 16;
        const __mmask16 rmask = (__mmask16)((1u << nr) - 1);
        const uint8_t *w0 = w + (size_t)r * rb;
        __m512 acc[16], accm[16];
        for (int i = 0; i < 16; i++)
            acc[i] = accm[i] = _mm512_setzero_ps();
        unpack_blk(F, 0, w0, rb, nr, abuf);
        if (nb > 1)
            unpack_blk(F, 1, w0, rb, nr, abuf);
        tile_blk(F, 0, w0, rb, nr, p, abuf);
        /* the next group's 16 rows are one contiguous run of 16 rb bytes: fetch per lines of it
         * per step (prefetches never fault; only the first token group, later ones find the
         * rows in cache) */
        const char *nx = (const char *)(w0 + 16 * rb);
        const int per = pf && r + 16 < r1 ? (int)((16 * rb + 64 * nb - 1) / (64 * nb)) : 0;
        for (int64_t b = 0; b < nb; b++) {
            for (int j = 0; j < per; j++)
                _mm_prefetch(nx + 64 * (b * per + j), _MM_HINT_T0);
            if (b + 1 < nb)
                tile_blk(F, b + 1, w0, rb, nr, p, abuf);
            if (b + 2 < nb)
                unpack_blk(F, b + 2, w0, rb, nr, abuf);
            if (b & 1)
                _tile_stored(1, cbuf[1], 4 * tw);
            else
                _tile_stored(0, cbuf[0], 4 * tw);
            if (b >= 1)
                float_blk(F, tw, b - 1, w0, ridx, rmask, p, cbuf[(b - 1) & 1], acc, accm);
        }
        float_blk(F, tw, nb - 1, w0, ridx, rmask, p, cbuf[(nb - 1) & 1], acc, accm);
        /* result = acc + accm (accm = 0 for the signed formats), to token-major y */
        __m512 o[16];
        if (tw == 16) {
            for (int i = 0; i < 16; i++)
                o[i] = _mm512_add_ps(acc[i], accm[i]);
            transpose16(o); /* o[t]: token t's 16 rows */
            for (int64_t t = 0; t < nt; t++)
                _mm512_mask_storeu_ps(y + t * ldy + r, rmask, o[t]);
        } else {
            for (int q = 0; q < 8; q++) {
                o[q] = _mm512_add_ps(acc[q], accm[q]);
                o[8 + q] = _mm512_setzero_ps();
            }
            transpose16(o); /* o[t]: row 2q of token t in lane q; o[8 + t]: row 2q + 1 */
            const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6,
                                                 22, 7, 23);
            for (int64_t t = 0; t < nt; t++)
                _mm512_mask_storeu_ps(y + t * ldy + r, rmask,
                                      _mm512_permutex2var_ps(o[t], il, o[8 + t]));
        }
    }
}

/* ---- row pairs: token groups of <= 8 tokens, 32 weight rows per tile product ----------------
 * A = 16 tile rows x 64 bytes: tile row q holds weight row q's block b (bytes 0..31) then weight
 * row 16 + q's block b (32..63); B = 16 x 64 bytes, block-diagonal: its rows 0..7 hold the
 * block's activations of tokens 0..7 in columns 0..7 (bytes 0..31) and zeros in columns 8..15,
 * rows 8..15 the same activations in columns 8..15; so C[q][t] = P_b(row q, token t) and
 * C[q][8 + t] = P_b(row 16 + q, token t), each the exact int32 sum of its 32 products: one tile
 * load pair, zero, dot product and store per 32 rows and block instead of two (K = 64). */
typedef struct amx_pb {
    int8_t qs[16][64];
    float d[16]; /* tokens 0..7, twice (lanes 8..15 = lanes 0..7) */
    float s[16];
} amx_pb;

/* tokens [0, nt <= 8) of a (nb blocks each) -> pb[0 .. nb): per block an 8 x 8 transpose of
 * the tokens' 4-byte groups (row g, column t = token t's qs[4g .. 4g + 3]) */
static void pack_pair(const tq_q8a *a, int64_t nb, int64_t nt, amx_pb *pb)
{
    for (int64_t b = 0; b < nb; b++) {
        __m256i r[8];
        float d[16] = {0}, s[16] = {0};
        for (int t = 0; t < 8; t++) {
            if (t < nt) {
                const tq_q8a *x = a + t * nb + b;
                r[t] = _mm256_loadu_si256((const __m256i *)x->qs);
                d[t] = d[8 + t] = x->d;
                s[t] = s[8 + t] = x->s;
            } else {
                r[t] = _mm256_setzero_si256();
            }
        }
        __m256i u[8], v[8];
        for (int i = 0; i < 8; i += 2) {
            u[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
            u[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
        }
        for (int h = 0; h < 8; h += 4) {
            v[h] = _mm256_unpacklo_epi64(u[h], u[h + 2]);
            v[h + 1] = _mm256_unpackhi_epi64(u[h], u[h + 2]);
            v[h + 2] = _mm256_unpacklo_epi64(u[h + 1], u[h + 3]);
            v[h + 3] = _mm256_unpackhi_epi64(u[h + 1], u[h + 3]);
        }
        amx_pb *p = pb + b;
        for (int g = 0; g < 4; g++) {
            const __m256i lo = _mm256_permute2x128_si256(v[g], v[4 + g], 0x20); /* row g */
            const __m256i hi = _mm256_permute2x128_si256(v[g], v[4 + g], 0x31); /* row 4 + g */
            _mm512_storeu_si512(p->qs[g], _mm512_zextsi256_si512(lo));
            _mm512_storeu_si512(p->qs[4 + g], _mm512_zextsi256_si512(hi));
            _mm512_storeu_si512(p->qs[8 + g],
                                _mm512_inserti64x4(_mm512_setzero_si512(), lo, 1));
            _mm512_storeu_si512(p->qs[12 + g],
                                _mm512_inserti64x4(_mm512_setzero_si512(), hi, 1));
        }
        memcpy(p->d, d, sizeof(d));
        memcpy(p->s, s, sizeof(s));
    }
}

/* a packed group of <= 8 tokens (tq_q8p, lanes 8..15 zero) -> pb[0 .. nb) */
static void pair_from_q8p(const amx_blk *p, int64_t nb, amx_pb *pb)
{
    const __m512i up = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t b = 0; b < nb; b++) {
        for (int g = 0; g < 8; g++) {
            const __m512i v = _mm512_maskz_mov_epi32(0x00ff, _mm512_loadu_si512(p[b].qs[g]));
            _mm512_storeu_si512(pb[b].qs[g], v);
            _mm512_storeu_si512(pb[b].qs[8 + g], _mm512_maskz_permutexvar_epi32(0xff00, up, v));
        }
        const __m512 d = _mm512_loadu_ps(p[b].d), s = _mm512_loadu_ps(p[b].s);
        _mm512_storeu_ps(pb[b].d, _mm512_shuffle_f32x4(d, d, 0x44));
        _mm512_storeu_ps(pb[b].s, _mm512_shuffle_f32x4(s, s, 0x44));
    }
}

/* 32 rows (nr valid) of one block (wb: row 0's block) -> dst, 16 tile rows of 64 bytes */
AI void unpack32(int F, const uint8_t *wb, size_t rb, int nr, int8_t *dst)
{
    for (int q = 0; q < 16; q++) {
        __m512i v = _mm512_setzero_si512();
        if (q < nr)
            v = unpack2(F, wb + (size_t)q * rb, q + 16 < nr ? wb + (size_t)(q + 16) * rb : NULL);
        _mm512_store_si512((__m512i *)(dst + 64 * q), v);
    }
}

/* the float part of block b of 32 rows: zmm q = rows q (lanes 0..7) and 16 + q (8..15) x tokens
 * 0..7, per lane acc = fma((float)P, d_w * d_a, acc), accm = accm + m_w * s_a */
AI void float_pair(int F, int64_t b, const uint8_t *w0, size_t rb, __m512i ridx, __mmask16 mlo,
                   __mmask16 mhi, const amx_pb *pb, const int32_t *cb, __m512 *acc, __m512 *accm)
{
    const int has_min = F == F_Q4_1 || F == F_Q5_1;
    const uint8_t *base = w0 + (size_t)b * fmt_bytes(F);
    const __m512i glo = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mlo, ridx, base, 1);
    const __m512i ghi = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mhi, ridx,
                                                    base + 16 * rb, 1);
    const __m512 dlo = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(glo));
    const __m512 dhi = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(ghi));
    const __m512 dav = _mm512_loadu_ps(pb[b].d);
    __m512 mlo_v = _mm512_setzero_ps(), mhi_v = _mm512_setzero_ps(), sav = _mm512_setzero_ps();
    if (has_min) {
        mlo_v = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(glo, 16)));
        mhi_v = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(ghi, 16)));
        sav = _mm512_loadu_ps(pb[b].s);
    }
    const __m512i hi = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16, 16);
    for (int q = 0; q < 16; q++) {
        const __m512i pi = _mm512_add_epi32(_mm512_set1_epi32(q), hi);
        const __m512 P = _mm512_cvtepi32_ps(_mm512_load_si512(cb + 16 * q));
        const __m512 s = _mm512_mul_ps(_mm512_permutex2var_ps(dlo, pi, dhi), dav);
        acc[q] = _mm512_fmadd_ps(P, s, acc[q]);
        if (has_min)
            accm[q] = _mm512_add_ps(
                accm[q], _mm512_mul_ps(_mm512_permutex2var_ps(mlo_v, pi, mhi_v), sav));
    }
}

AI void tile_pair(int F, int64_t b, const amx_pb *pb, int8_t (*abuf)[1024])
{
    if (b & 1)
        TILE_STEP(1, 3, 5, F, abuf[b % 3], 64, pb[b].qs, 64);
    else
        TILE_STEP(0, 2, 4, F, abuf[b % 3], 64, pb[b].qs, 64);
}

/* rows [r0, r1) x the nt <= 8 tokens of pb -> y; the same pipeline as run_rows */
AI void run_pairs(int F, const uint8_t *w, size_t rb, int64_t nb, const amx_pb *pb, int64_t nt,
                  float *y, int64_t ldy, int64_t r0, int64_t r1, int pf)
{
    _Alignas(64) int8_t abuf[3][1024];
    _Alignas(64) int32_t cbuf[2][256];
    const __m512i ridx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)rb));
    for (int64_t r = r0; r < r1; r += 32) {
        const int nr = r1 - r < 32 ? (int)(r1 - r) : 32;
        const __mmask16 mlo = (__mmask16)(nr >= 16 ? 0xffffu : (1u << nr) - 1);
        const __mmask16 mhi = (__mmask16)(nr <= 16 ? 0u : (1u << (nr - 16)) - 1);
        const uint8_t *w0 = w + (size_t)r * rb;
        __m512 acc[16], accm[16];
        for (int i = 0; i < 16; i++)
            acc[i] = accm[i] = _mm512_setzero_ps();
        unpack32(F, w0, rb, nr, abuf[0]);
        if (nb > 1)
            unpack32(F, w0 + fmt_bytes(F), rb, nr, abuf[1]);
        tile_pair(F, 0, pb, abuf);
        const char *nx = (const char *)(w0 + 32 * rb);
        const int per = pf && r + 32 < r1 ? (int)((32 * rb + 64 * nb - 1) / (64 * nb)) : 0;
        for (int64_t b = 0; b < nb; b++) {
            for (int j = 0; j < per; j++)
                _mm_prefetch(nx + 64 * (b * per + j), _MM_HINT_T0);
            if (b + 1 < nb)
                tile_pair(F, b + 1, pb, abuf);
            if (b + 2 < nb)
                unpack32(F, w0 + (size_t)(b + 2) * fmt_bytes(F), rb, nr, abuf[(b + 2) % 3]);
            if (b & 1)
                _tile_stored(1, cbuf[1], 64);
            else
                _tile_stored(0, cbuf[0], 64);
            if (b >= 1)
                float_pair(F, b - 1, w0, rb, ridx, mlo, mhi, pb, cbuf[(b - 1) & 1], acc, accm);
        }
        float_pair(F, nb - 1, w0, rb, ridx, mlo, mhi, pb, cbuf[(nb - 1) & 1], acc, accm);
        __m512 o[16];
        for (int i = 0; i < 16; i++)
            o[i] = _mm512_add_ps(acc[i], accm[i]);
        transpose16(o); /* o[t]: rows 0..15 of token t; o[8 + t]: rows 16..31 */
        for (int64_t t = 0; t < nt; t++) {
            _mm512_mask_storeu_ps(y + t * ldy + r, mlo, o[t]);
            if (mhi)
                _mm512_mask_storeu_ps(y + t * ldy + r + 16, mhi, o[8 + t]);
        }
    }
}

/* ---- weights as B: token groups of <= 8 tokens for the nibble formats (Q4_0, Q4_1, IQ4_NL) -----
 * The roles swap: A = the activations of a block pair, 16 x 64 bytes: tile row t (t < 8) holds
 * token t's block 2p (bytes 0..31, zeros after), tile row 8 + t its block 2p + 1 (bytes 32..63,
 * zeros before); B = 16 weight rows of both blocks in the VNNI layout (B row kk: column c =
 * bytes 4c..4c+3 = row c's elements 4kk..4kk+3 of block 2p; rows 8 + kk: block 2p + 1), so
 * C[t][c] = P_2p(row c, token t) and C[8 + t][c] = P_2p+1(row c, token t), exact int32 sums of 32
 * products each (the weight integers -8..15 / -127..113 are signed int8: TDPBSSD). One tile
 * product per 16 rows and two blocks, and the float part runs with the 16 rows in the lanes:
 * per token one cvt + mul (by the token's scale, broadcast) + fma, no shuffles, only for the
 * tokens present, and no transpose at the end. The columns hold the rows in the order
 * row(c) = 4 (c % 4) + c / 4 (what the unpack's two interleave stages leave); the scale gather
 * reads in that order and the result is permuted back once per 16 rows and token. */

/* token groups of <= 8 -> activation pairs (amx_pb reused: qs as above, d[0..7] / s[0..7] the
 * tokens' d, s of block 2p, d[8..15] / s[8..15] of block 2p + 1; zeros for absent tokens/block) */
static void tr_from_q8a(const tq_q8a *a, int64_t nb, int64_t nt, amx_pb *ap)
{
    for (int64_t p = 0; 2 * p < nb; p++) {
        amx_pb *o = ap + p;
        memset(o, 0, sizeof(*o));
        for (int h = 0; h < 2 && 2 * p + h < nb; h++)
            for (int64_t t = 0; t < nt; t++) {
                const tq_q8a *x = a + t * nb + 2 * p + h;
                memcpy(&o->qs[8 * h + t][32 * h], x->qs, 32);
                o->d[8 * h + t] = x->d;
                o->s[8 * h + t] = x->s;
            }
    }
}

static void tr_from_q8p(const amx_blk *g, int64_t nb, amx_pb *ap)
{
    for (int64_t p = 0; 2 * p < nb; p++) {
        amx_pb *o = ap + p;
        for (int h = 0; h < 2; h++) {
            __m256i r[8];
            const int64_t b = 2 * p + h;
            for (int k = 0; k < 8; k++) /* row k: dword t = token t's qs[4k .. 4k + 3] */
                r[k] = b < nb ? _mm256_loadu_si256((const __m256i *)g[b].qs[k])
                              : _mm256_setzero_si256();
            __m256i u[8], v[8];
            for (int i = 0; i < 8; i += 2) {
                u[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
                u[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
            }
            for (int q = 0; q < 8; q += 4) {
                v[q] = _mm256_unpacklo_epi64(u[q], u[q + 2]);
                v[q + 1] = _mm256_unpackhi_epi64(u[q], u[q + 2]);
                v[q + 2] = _mm256_unpacklo_epi64(u[q + 1], u[q + 3]);
                v[q + 3] = _mm256_unpackhi_epi64(u[q + 1], u[q + 3]);
            }
            for (int t = 0; t < 4; t++) {
                const __m256i x0 = _mm256_permute2x128_si256(v[t], v[4 + t], 0x20); /* token t */
                const __m256i x1 = _mm256_permute2x128_si256(v[t], v[4 + t], 0x31); /* 4 + t */
                _mm512_storeu_si512(o->qs[8 * h + t],
                                    h ? _mm512_inserti64x4(_mm512_setzero_si512(), x0, 1)
                                      : _mm512_zextsi256_si512(x0));
                _mm512_storeu_si512(o->qs[8 * h + 4 + t],
                                    h ? _mm512_inserti64x4(_mm512_setzero_si512(), x1, 1)
                                      : _mm512_zextsi256_si512(x1));
            }
            const __m256 d = b < nb ? _mm256_loadu_ps(g[b].d) : _mm256_setzero_ps();
            const __m256 s = b < nb ? _mm256_loadu_ps(g[b].s) : _mm256_setzero_ps();
            _mm256_storeu_ps(o->d + 8 * h, d);
            _mm256_storeu_ps(o->s + 8 * h, s);
        }
    }
}

/* 16 rows (nr valid) of block b (wb: row 0's block; b absent: zeros) -> 8 B rows of 64 bytes */
AI void unpack_tr(int F, const uint8_t *wb, size_t rb, int nr, int present, int8_t *dst)
{
    if (!present) {
        for (int k = 0; k < 8; k++)
            _mm512_storeu_si512(dst + 64 * k, _mm512_setzero_si512());
        return;
    }
    const int off = F == F_Q4_1 ? 4 : 2;
    __m512i z[4];
    for (int q = 0; q < 4; q++) {
        __m128i x[4];
        for (int j = 0; j < 4; j++) {
            const int c = 4 * q + j;
            x[j] = nr == 16 ? _mm_loadu_si128((const __m128i *)(wb + (size_t)c * rb + off))
                            : _mm_maskz_loadu_epi32(c < nr ? 0xf : 0,
                                                    wb + (size_t)(c < nr ? c : 0) * rb + off);
        }
        __m512i v = _mm512_castsi128_si512(x[0]);
        v = _mm512_inserti32x4(v, x[1], 1);
        v = _mm512_inserti32x4(v, x[2], 2);
        z[q] = _mm512_inserti32x4(v, x[3], 3);
    }
    const __m512i u0 = _mm512_unpacklo_epi32(z[0], z[1]), u1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i u2 = _mm512_unpacklo_epi32(z[2], z[3]), u3 = _mm512_unpackhi_epi32(z[2], z[3]);
    const __m512i v[4] = {_mm512_unpacklo_epi64(u0, u2), _mm512_unpackhi_epi64(u0, u2),
                          _mm512_unpacklo_epi64(u1, u3), _mm512_unpackhi_epi64(u1, u3)};
    const __m512i m4 = _mm512_set1_epi8(15);
    for (int i = 0; i < 4; i++) {
        __m512i lo = _mm512_and_si512(v[i], m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v[i], 4), m4);
        if (F == F_Q4_0) {
            lo = _mm512_sub_epi8(lo, _mm512_set1_epi8(8));
            hi = _mm512_sub_epi8(hi, _mm512_set1_epi8(8));
        } else if (F == F_IQ4NL) {
            const __m512i tab =
                _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tq_iq4nl_values));
            lo = _mm512_shuffle_epi8(tab, lo);
            hi = _mm512_shuffle_epi8(tab, hi);
        }
        _mm512_storeu_si512(dst + 64 * i, lo);
        _mm512_storeu_si512(dst + 64 * (4 + i), hi);
    }
}

/* the float part of pair p (blocks 2p, 2p + 1 < nb) of 16 rows for NT tokens */
AI void float_tr(int F, int NT, int64_t p, int64_t nb, const uint8_t *w0, __m512i ridx,
                 __mmask16 rmask, const amx_pb *ap, const int32_t *cb, __m512 *acc,
                 __m512 *accm)
{
    const int has_min = F == F_Q4_1;
    for (int h = 0; h < 2; h++) {
        const int64_t b = 2 * p + h;
        if (b >= nb)
            break;
        const __m512i g = _mm512_mask_i32gather_epi32(
            _mm512_setzero_si512(), rmask, ridx, (const void *)(w0 + (size_t)b * fmt_bytes(F)), 1);
        const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
        const __m512 mw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16)));
        for (int t = 0; t < NT; t++) {
            const __m512 P = _mm512_cvtepi32_ps(_mm512_loadu_si512(cb + 16 * (8 * h + t)));
            const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(ap[p].d[8 * h + t]));
            acc[t] = _mm512_fmadd_ps(P, s, acc[t]);
            if (has_min)
                accm[t] = _mm512_add_ps(accm[t],
                                        _mm512_mul_ps(mw, _mm512_set1_ps(ap[p].s[8 * h + t])));
        }
    }
}

/* pair p's B (both blocks of the 16 rows) into bbuf */
AI void unpack_tr_pair(int F, int64_t p, int64_t nb, const uint8_t *w0, size_t rb, int nr,
                       int8_t *dst)
{
    unpack_tr(F, w0 + (size_t)(2 * p) * fmt_bytes(F), rb, nr, 1, dst);
    unpack_tr(F, w0 + (size_t)(2 * p + 1) * fmt_bytes(F), rb, nr, 2 * p + 1 < nb, dst + 512);
}

AI void tile_tr(int64_t p, const amx_pb *ap, int8_t (*bbuf)[1024])
{
    if (p & 1) {
        _tile_loadd(3, ap[p].qs, 64);
        _tile_loadd(5, bbuf[p % 3], 64);
        _tile_zero(1);
        _tile_dpbssd(1, 3, 5);
    } else {
        _tile_loadd(2, ap[p].qs, 64);
        _tile_loadd(4, bbuf[p % 3], 64);
        _tile_zero(0);
        _tile_dpbssd(0, 2, 4);
    }
}

/* rows [r0, r1) x the nt <= NT tokens of ap -> y; the pipeline of run_rows over block pairs */
AI void run_tr(int F, int NT, const uint8_t *w, size_t rb, int64_t nb, const amx_pb *ap,
               int64_t nt, float *y, int64_t ldy, int64_t r0, int64_t r1, int pf)
{
    _Alignas(64) int8_t bbuf[3][1024];
    _Alignas(64) int32_t cbuf[2][256];
    const int64_t np = (nb + 1) / 2;
    /* column c holds row 4 (c % 4) + c / 4; the same map takes the columns back to rows */
    const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i ridx = _mm512_mullo_epi32(perm, _mm512_set1_epi32((int)rb));
    for (int64_t r = r0; r < r1; r += 16) {
        const int nr = r1 - r < 16 ? (int)(r1 - r) : 16;
        const __mmask16 omask = (__mmask16)((1u << nr) - 1);
        /* the gather's mask is over columns: column c is row perm[c] */
        const __mmask16 gmask =
            _mm512_cmplt_epi32_mask(perm, _mm512_set1_epi32(nr));
        const uint8_t *w0 = w + (size_t)r * rb;
        __m512 acc[8], accm[8];
        for (int i = 0; i < 8; i++)
            acc[i] = accm[i] = _mm512_setzero_ps();
        unpack_tr_pair(F, 0, nb, w0, rb, nr, bbuf[0]);
        if (np > 1)
            unpack_tr_pair(F, 1, nb, w0, rb, nr, bbuf[1]);
        tile_tr(0, ap, bbuf);
        const char *nx = (const char *)(w0 + 16 * rb);
        const int per = pf && r + 16 < r1 ? (int)((16 * rb + 64 * np - 1) / (64 * np)) : 0;
        for (int64_t p = 0; p < np; p++) {
            for (int j = 0; j < per; j++)
                _mm_prefetch(nx + 64 * (p * per + j), _MM_HINT_T0);
            if (p + 1 < np)
                tile_tr(p + 1, ap, bbuf);
            if (p + 2 < np)
                unpack_tr_pair(F, p + 2, nb, w0, rb, nr, bbuf[(p + 2) % 3]);
            if (p & 1)
                _tile_stored(1, cbuf[1], 64);
            else
                _tile_stored(0, cbuf[0], 64);
            if (p >= 1)
                float_tr(F, NT, p - 1, nb, w0, ridx, gmask, ap, cbuf[(p - 1) & 1], acc, accm);
        }
        float_tr(F, NT, np - 1, nb, w0, ridx, gmask, ap, cbuf[(np - 1) & 1], acc, accm);
        for (int64_t t = 0; t < nt; t++)
            _mm512_mask_storeu_ps(y + t * ldy + r, omask,
                                  _mm512_permutexvar_ps(perm, _mm512_add_ps(acc[t], accm[t])));
    }
}

/* tw = 8 or 16: 16 rows x 32-byte A tiles, tw-column C and B; tw = 0: the row pairs' 16 x 64
 * A, B and C */
static void config(int tw)
{
    tilecfg c;
    memset(&c, 0, sizeof(c));
    c.palette = 1;
    for (int i = 0; i < 2; i++) {
        const int cw = tw ? tw : 16;
        c.rows[i] = 16, c.colsb[i] = (uint16_t)(4 * cw);         /* C: 16 x cw int32 */
        c.rows[2 + i] = 16, c.colsb[2 + i] = tw ? 32 : 64;        /* A: 16 rows x 32 or 64 B */
        c.rows[4 + i] = tw ? 8 : 16, c.colsb[4 + i] = (uint16_t)(4 * cw); /* B: K / 4 rows */
    }
    /* gcc 12 drops the field stores above as dead (its ldtilecfg builtin does not say it reads
     * the 64 bytes): make them visible */
    __asm__ volatile("" : : "r"(&c) : "memory");
    _tile_loadconfig(&c);
}

/* rows per chunk of the packed path: every token group runs over a chunk before the next one,
 * so a chunk's weights (256 rows: 92 KB at k = 576 Q4_1, 590 KB at k = 4096 Q4_0) are read from
 * memory once, not once per 16 tokens */
#define ROW_CHUNK 256

/* n tokens in groups of 16 (group G: its nb blocks at groups + G * nb), or (groups NULL) each
 * group packed into stack (nb blocks) from the tq_q8a activations act; a last group of <= 8
 * tokens runs as row pairs (run_pairs) from pb (its nb amx_pb; NULL: the 8-column tile) */
static inline __attribute__((always_inline)) void mm_amx(int F, const void *w, size_t row_bytes,
                                                         int64_t nb, const amx_blk *groups,
                                                         const tq_q8a *act, amx_blk *stack,
                                                         amx_pb *pb, int64_t n, float *y,
                                                         int64_t ldy, int64_t r0, int64_t r1)
{
    int cur = -1;
    const int64_t t_last = (n - 1) / 16 * 16;
    if (n - t_last > 8)
        pb = NULL;
    const int tr = F == F_Q4_0 || F == F_Q4_1 || F == F_IQ4NL; /* weights as B */
    if (pb) {
        if (tr && groups)
            tr_from_q8p(groups + (t_last / 16) * nb, nb, pb);
        else if (tr)
            tr_from_q8a(act + t_last * nb, nb, n - t_last, pb);
        else if (groups)
            pair_from_q8p(groups + (t_last / 16) * nb, nb, pb);
        else
            pack_pair(act + t_last * nb, nb, n - t_last, pb);
    }
    const int64_t chunk = groups ? ROW_CHUNK : r1 - r0; /* the stack path packs per group once */
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
        const int64_t c1 = r1 - c0 < chunk ? r1 : c0 + chunk;
        for (int64_t t0 = 0; t0 < n; t0 += 16) {
            const int64_t nt = n - t0 < 16 ? n - t0 : 16;
            const int tw = pb && t0 == t_last ? 0 : nt <= 8 ? 8 : 16;
            if (tw != cur)
                config(tw), cur = tw;
            if (tw == 0) {
                float *yt = y + t0 * ldy;
                if (!tr)
                    run_pairs(F, w, row_bytes, nb, pb, nt, yt, ldy, c0, c1, t0 == 0);
                else if (nt <= 2)
                    run_tr(F, 2, w, row_bytes, nb, pb, nt, yt, ldy, c0, c1, t0 == 0);
                else if (nt <= 4)
                    run_tr(F, 4, w, row_bytes, nb, pb, nt, yt, ldy, c0, c1, t0 == 0);
                else
                    run_tr(F, 8, w, row_bytes, nb, pb, nt, yt, ldy, c0, c1, t0 == 0);
                continue;
            }
            const amx_blk *p = groups ? groups + (t0 / 16) * nb : stack;
            if (!groups && stack)
                pack_act(act + t0 * nb, nb, nt, stack);
            if (tw == 16)
                run_rows(F, 16, w, row_bytes, nb, p, nt, y + t0 * ldy, ldy, c0, c1, t0 == 0);
            else
                run_rows(F, 8, w, row_bytes, nb, p, nt, y + t0 * ldy, ldy, c0, c1, t0 == 0);
        }
    }
    _tile_release();
}

/* the AVX-512 VNNI kernel of the format (every AMX CPU has AVX512-VNNI): n < TQ_AMX_MIN_N, long rows */
static tq_qmv_q8_fn vnni_mv(int id)
{
    if (id == TQ_FMT_IQ4_NL)
        return tq_iq4nl_avx512_table()->mv_q8;
    return tq_qdot_avx512_table()->mv_q8[id];
}

#define AMX_FORMAT(name, F, FID, MINN)                                                               \
    static void mv_amx_##name(const void *w, size_t row_bytes, int64_t k, const void *act,        \
                              int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)            \
    {                                                                                              \
        if (n < (MINN) || k > TQ_AMX_MAXK || k % TQ_QK) {                                          \
            vnni_mv(FID)(w, row_bytes, k, act, n, y, ldy, r0, r1);                                 \
            return;                                                                                \
        }                                                                                          \
        _Alignas(64) union {                                                                       \
            amx_blk g[MAXB]; /* 44 KB */                                                           \
            amx_pb p[MAXB];  /* 72 KB */                                                           \
        } u;                                                                                       \
        if (n <= 8)                                                                                \
            mm_amx(F, w, row_bytes, k / TQ_QK, NULL, act, NULL, u.p, n, y, ldy, r0, r1);           \
        else                                                                                       \
            mm_amx(F, w, row_bytes, k / TQ_QK, NULL, act, u.g, NULL, n, y, ldy, r0, r1);           \
    }                                                                                              \
    static void gemm_amx_##name(const void *w, size_t row_bytes, int64_t k, const void *act,      \
                                int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)          \
    {                                                                                              \
        _Alignas(64) amx_pb pb[MAXB];                                                              \
        const int64_t nb = k / TQ_QK;                                                              \
        mm_amx(F, w, row_bytes, nb, act, NULL, NULL, nb <= MAXB ? pb : NULL, n, y, ldy, r0, r1);  \
    }
AMX_FORMAT(q8_0, F_Q8_0, TQ_GGML_Q8_0, TQ_AMX_MIN_N)
AMX_FORMAT(q4_0, F_Q4_0, TQ_GGML_Q4_0, TQ_AMX_MIN_N_NIB)
AMX_FORMAT(q4_1, F_Q4_1, TQ_GGML_Q4_1, TQ_AMX_MIN_N_NIB)
AMX_FORMAT(q5_0, F_Q5_0, TQ_GGML_Q5_0, TQ_AMX_MIN_N)
AMX_FORMAT(q5_1, F_Q5_1, TQ_GGML_Q5_1, TQ_AMX_MIN_N)
AMX_FORMAT(iq4nl, F_IQ4NL, TQ_FMT_IQ4_NL, TQ_AMX_MIN_N_NIB)

/* ---- r16 weights (cpu/qdot_r16.h), token groups of 2..8: the weights-as-B tile read in place --
 * A 16-row group holds per block b the quant bytes as dwords, dword i of the 16 rows in 64 bytes
 * (at b * 16 * qb): exactly B's row i before the nibble split (Q4_0/Q4_1: low nibbles = B row i,
 * high = B row 4 + i; Q8_0: B row i after XOR 0x80), the columns in row order; after all blocks
 * the f16 scales of the 16 rows per block (then Q4_1's mins): one 32-byte load, no gather. */
static inline size_t r16_qb(int F) /* quant bytes per row and block */
{
    return F == F_Q8_0 ? 32 : 16;
}

static inline size_t r16_hb(int F) /* f16 header bytes per row and block */
{
    return F == F_Q4_1 ? 4 : 2;
}

/* the 8 B rows of one block's quant dwords gb (NULL: zeros) */
AI void unpack_r16(int F, const uint8_t *gb, int8_t *dst)
{
    if (!gb) {
        for (int k = 0; k < 8; k++)
            _mm512_storeu_si512(dst + 64 * k, _mm512_setzero_si512());
        return;
    }
    const uint8_t *q = gb;
    if (F == F_Q8_0) {
        for (int i = 0; i < 8; i++)
            _mm512_storeu_si512(dst + 64 * i,
                                _mm512_xor_si512(_mm512_loadu_si512(q + 64 * i),
                                                 _mm512_set1_epi8((char)0x80)));
        return;
    }
    const __m512i m4 = _mm512_set1_epi8(15);
    for (int i = 0; i < 4; i++) {
        const __m512i v = _mm512_loadu_si512(q + 64 * i);
        __m512i lo = _mm512_and_si512(v, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if (F == F_Q4_0) {
            lo = _mm512_sub_epi8(lo, _mm512_set1_epi8(8));
            hi = _mm512_sub_epi8(hi, _mm512_set1_epi8(8));
        }
        _mm512_storeu_si512(dst + 64 * i, lo);
        _mm512_storeu_si512(dst + 64 * (4 + i), hi);
    }
}

AI void unpack_r16_pair(int F, int64_t p, int64_t nb, const uint8_t *g, int8_t *dst)
{
    const size_t gq = 16 * r16_qb(F); /* one block's quant dwords */
    unpack_r16(F, g + (size_t)(2 * p) * gq, dst);
    unpack_r16(F, 2 * p + 1 < nb ? g + (size_t)(2 * p + 1) * gq : NULL, dst + 512);
}

/* the float part of pair p of the group at g for NT tokens (rows in the lanes, row order) */
AI void float_r16(int F, int NT, int64_t p, int64_t nb, const uint8_t *g, const amx_pb *ap,
                  const int32_t *cb, __m512 *acc, __m512 *accm)
{
    const int has_min = F == F_Q4_1;
    for (int h = 0; h < 2; h++) {
        const int64_t b = 2 * p + h;
        if (b >= nb)
            break;
        const uint8_t *gb = g + (size_t)nb * 16 * r16_qb(F) + (size_t)b * 16 * r16_hb(F);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb));
        __m512 mw = _mm512_setzero_ps();
        if (has_min)
            mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gb + 32)));
        for (int t = 0; t < NT; t++) {
            const __m512 P = _mm512_cvtepi32_ps(_mm512_loadu_si512(cb + 16 * (8 * h + t)));
            const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(ap[p].d[8 * h + t]));
            acc[t] = _mm512_fmadd_ps(P, s, acc[t]);
            if (has_min)
                accm[t] = _mm512_add_ps(accm[t],
                                        _mm512_mul_ps(mw, _mm512_set1_ps(ap[p].s[8 * h + t])));
        }
    }
}

/* groups [r0, r1) / 16 x the nt <= NT tokens of ap -> y */
AI void run_r16(int F, int NT, const uint8_t *w, size_t rb, int64_t nb, const amx_pb *ap,
                int64_t nt, float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    _Alignas(64) int8_t bbuf[3][1024];
    _Alignas(64) int32_t cbuf[2][256];
    const int64_t np = (nb + 1) / 2;
    for (int64_t r = r0; r < r1; r += 16) {
        const uint8_t *g = w + (size_t)r * rb;
        __m512 acc[8], accm[8];
        for (int i = 0; i < 8; i++)
            acc[i] = accm[i] = _mm512_setzero_ps();
        unpack_r16_pair(F, 0, nb, g, bbuf[0]);
        if (np > 1)
            unpack_r16_pair(F, 1, nb, g, bbuf[1]);
        tile_tr(0, ap, bbuf);
        const char *nx = (const char *)(g + 16 * rb);
        const int per = r + 16 < r1 ? (int)((16 * rb + 64 * np - 1) / (64 * np)) : 0;
        for (int64_t p = 0; p < np; p++) {
            for (int j = 0; j < per; j++)
                _mm_prefetch(nx + 64 * (p * per + j), _MM_HINT_T0);
            if (p + 1 < np)
                tile_tr(p + 1, ap, bbuf);
            if (p + 2 < np)
                unpack_r16_pair(F, p + 2, nb, g, bbuf[(p + 2) % 3]);
            if (p & 1)
                _tile_stored(1, cbuf[1], 64);
            else
                _tile_stored(0, cbuf[0], 64);
            if (p >= 1)
                float_r16(F, NT, p - 1, nb, g, ap, cbuf[(p - 1) & 1], acc, accm);
        }
        float_r16(F, NT, np - 1, nb, g, ap, cbuf[(np - 1) & 1], acc, accm);
        for (int64_t t = 0; t < nt; t++)
            _mm512_storeu_ps(y + t * ldy + r, _mm512_add_ps(acc[t], accm[t]));
    }
}

#define AMX_R16(name, F, FID)                                                                      \
    static void r16_amx_##name(const void *w, size_t row_bytes, int64_t k, const void *act,       \
                               int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)           \
    {                                                                                              \
        const int64_t nb = k / TQ_QK;                                                              \
        if (n < 1 || n > 8 || k % TQ_QK || nb > MAXB) {                                            \
            tq_r16_mv_avx512(FID)(w, row_bytes, k, act, n, y, ldy, r0, r1);                        \
            return;                                                                                \
        }                                                                                          \
        _Alignas(64) amx_pb ap[MAXB / 2];                                                          \
        tr_from_q8a(act, nb, n, ap);                                                               \
        config(0);                                                                                 \
        if (n <= 2)                                                                                \
            run_r16(F, 2, w, row_bytes, nb, ap, n, y, ldy, r0, r1);                                \
        else if (n <= 4)                                                                           \
            run_r16(F, 4, w, row_bytes, nb, ap, n, y, ldy, r0, r1);                                \
        else                                                                                       \
            run_r16(F, 8, w, row_bytes, nb, ap, n, y, ldy, r0, r1);                                \
        _tile_release();                                                                           \
    }
AMX_R16(q8_0, F_Q8_0, TQ_GGML_Q8_0)
AMX_R16(q4_0, F_Q4_0, TQ_GGML_Q4_0)
AMX_R16(q4_1, F_Q4_1, TQ_GGML_Q4_1)

tq_qmv_q8_fn tq_qdot_amx_r16(int id)
{
    if (!tq_r16_mv_avx512(id))
        return NULL;
    switch (id) {
    case TQ_GGML_Q8_0: return r16_amx_q8_0;
    case TQ_GGML_Q4_0: return r16_amx_q4_0;
    case TQ_GGML_Q4_1: return r16_amx_q4_1;
    default: return NULL;
    }
}

static int fmt_index(int id)
{
    switch (id) {
    case TQ_GGML_Q8_0: return F_Q8_0;
    case TQ_GGML_Q4_0: return F_Q4_0;
    case TQ_GGML_Q4_1: return F_Q4_1;
    case TQ_GGML_Q5_0: return F_Q5_0;
    case TQ_GGML_Q5_1: return F_Q5_1;
    case TQ_FMT_IQ4_NL: return F_IQ4NL;
    default: return -1;
    }
}

int tq_qdot_amx_built(void)
{
    return 1;
}

tq_qmv_q8_fn tq_qdot_amx_mv(int id)
{
    static const tq_qmv_q8_fn mv[6] = {mv_amx_q8_0, mv_amx_q4_0, mv_amx_q4_1,
                                       mv_amx_q5_0, mv_amx_q5_1, mv_amx_iq4nl};
    const int F = fmt_index(id);
    return F < 0 || !vnni_mv(id) ? NULL : mv[F];
}

tq_qmv_q8_fn tq_qdot_amx_gemm(int id)
{
    static const tq_qmv_q8_fn gm[6] = {gemm_amx_q8_0, gemm_amx_q4_0, gemm_amx_q4_1,
                                       gemm_amx_q5_0, gemm_amx_q5_1, gemm_amx_iq4nl};
    const int F = fmt_index(id);
    return F < 0 ? NULL : gm[F];
}

void tq_qdot_amx_register(tq_isa isa, int id, tq_format_kernels *k)
{
    if (isa < TQ_ISA_AVX512 || !k->mv_q8 || !tq_cpu_amx())
        return;
    const tq_qmv_q8_fn mv = tq_qdot_amx_mv(id);
    if (!mv)
        return;
    k->mv_q8 = mv;
    k->gemm_q8 = tq_qdot_amx_gemm(id);
    k->isa_q8 = "amx-int8";
}

#else /* no AMX in this build */

int tq_qdot_amx_built(void)
{
    return 0;
}

tq_qmv_q8_fn tq_qdot_amx_mv(int id)
{
    (void)id;
    return NULL;
}

tq_qmv_q8_fn tq_qdot_amx_gemm(int id)
{
    (void)id;
    return NULL;
}

void tq_qdot_amx_register(tq_isa isa, int id, tq_format_kernels *k)
{
    (void)isa, (void)id, (void)k;
}

tq_qmv_q8_fn tq_qdot_amx_r16(int id)
{
    (void)id;
    return NULL;
}

#endif
