/* qdot_q8blk.h -- the q8 kernels of the 32-element formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * IQ4_NL) under qdot.h's per-block specification, for the AVX2 and AVX512-VNNI tables.
 * Included by qdot_avx2.c and qdot_iq4nl_avx2.c (each compiled with AVX2 flags, and again with
 * QDOT_VNNI and AVX512-VNNI flags); the including file defines, before the include,
 *     static inline __m256i QB_UP(int F, const uint8_t *b)
 * -- the block's 32 weight integers in element order (signed formats int8, Q4_1/Q5_1 0..31).
 * Internal to src/cpu/.
 *
 * Two shapes, both the reference's sequence per (row, token) and so its bits:
 *   qb_row  -- one row . one token (decode, the dots, n < TQ_Q8P_MIN): 8 blocks' int32 lanes
 *              (vpmaddubsw + vpmaddwd, or vpdpbusd) reduced to one vector of the 8 block sums
 *              P_b by a transposing add tree (qb_red8), converted at once, the 8 scale products
 *              d_w * d_a at once (two gathers), then the 8 fmas of the chain in block order.
 *   qb_tile -- R rows x the 16 tokens of a tq_q8p group (prefill, batched decode): lanes =
 *              tokens, so P_b of a (row, block) for all 16 tokens is 8 int8 dot steps (one per 4
 *              elements: the row's 4 weight bytes broadcast, the tokens' 4 bytes each) summed in
 *              int32, then ONE cvt + mul + fma per (row, block) for the 16 tokens (the per-lane
 *              spec needed 8x that float work). AVX512-VNNI: zmm, vpdpbusd with the weights
 *              offset to unsigned (w + 128) and tq_q8p's c = -128 * sum(qs) as the start;
 *              AVX2: two ymm halves of 8 tokens, vpmaddubsw(|w|, sign(a, w)) summed in int16
 *              where the format's |w| bound allows it (see qb_tile2), then vpmaddwd. */
#ifndef TQ_CPU_QDOT_Q8BLK_H
#define TQ_CPU_QDOT_Q8BLK_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "common/formats.h"
#include "cpu/qdot.h"
#include "cpu/qdot_avx2.h"

static inline __m256i QB_UP(int F, const uint8_t *b);

static inline size_t qb_bs(int F)
{
    return F == TQ_GGML_Q8_0   ? 34
           : F == TQ_GGML_Q4_1 ? 20
           : F == TQ_GGML_Q5_0 ? 22
           : F == TQ_GGML_Q5_1 ? 24
                               : 18; /* Q4_0, IQ4_NL */
}
static inline int qb_has_min(int F)
{
    return F == TQ_GGML_Q4_1 || F == TQ_GGML_Q5_1;
}

/* int32 lane l = sum of elements 4l..4l+3 of w * a (exact: |.| < 2^17) */
static inline __m256i qb_ip(int F, __m256i w, const int8_t *qs)
{
    const __m256i a = _mm256_loadu_si256((const __m256i *)qs);
#ifdef QDOT_VNNI
    if (qb_has_min(F))
        return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, a);
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w),
                               _mm256_sign_epi8(a, w));
#else
    const __m256i p16 = qb_has_min(F) ? _mm256_maddubs_epi16(w, a)
                                      : _mm256_maddubs_epi16(_mm256_sign_epi8(w, w),
                                                             _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
#endif
}

/* lane j = the sum of the 8 int32 lanes of v[j] (exact) */
static inline __m256i qb_red8(const __m256i *v)
{
#define QB_H32(x, y) _mm256_add_epi32(_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y))
#define QB_H64(x, y) _mm256_add_epi32(_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y))
    const __m256i a01 = QB_H32(v[0], v[1]), a23 = QB_H32(v[2], v[3]);
    const __m256i a45 = QB_H32(v[4], v[5]), a67 = QB_H32(v[6], v[7]);
    const __m256i b0 = QB_H64(a01, a23), b1 = QB_H64(a45, a67);
#undef QB_H32
#undef QB_H64
    return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20),
                            _mm256_permute2x128_si256(b0, b1, 0x31));
}

static inline int32_t qb_hsum(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* The scale products of nb blocks of a row: dd[i] = d_w * d_a (rounded in f32, as the
 * reference); returns accm continued over the min terms in block order (the reference's accm,
 * Q4_1/Q5_1; the others return it unchanged).
 * da/sa: the token's d and s of the same blocks, contiguous. The 4 bytes at the start of each
 * block (d, and m) come in by one vpgatherdd per 8 blocks -- which also touches every line of
 * the row up front: from DRAM a row's misses then overlap (walking the row's 8-block steps
 * instead, qdot_bench 49152 x 576 Q8_0 ran at half the speed). */
static inline __attribute__((always_inline)) float qb_scales(int F, const uint8_t *row, int64_t nb,
                                                             const float *da, const float *sa,
                                                             float *dd, float accm)
{
    const size_t bs = qb_bs(F);
    const int hm = qb_has_min(F);
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32((int)bs));
    /* bytes 0-1 of each dword (d) to the low 8 bytes of each 128-bit lane, 2-3 (m) high */
    const __m256i sh = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0,
                                        1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    int64_t j = 0;
    for (; j + 8 <= nb; j += 8) {
        const __m256i v = _mm256_i32gather_epi32((const int *)(row + (size_t)j * bs), idx, 1);
        const __m256i p = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, sh), 0xd8);
        _mm256_storeu_ps(dd + j, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(p)),
                                               _mm256_loadu_ps(da + j)));
        if (hm) {
            float mm[8];
            _mm256_storeu_ps(mm, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(p, 1)),
                                               _mm256_loadu_ps(sa + j)));
            _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) accm = accm + mm[q];
        }
    }
    for (; j < nb; j++) {
        const uint8_t *b = row + (size_t)j * bs;
        dd[j] = f16c(b) * da[j];
        if (hm)
            accm = accm + f16c(b + 2) * sa[j];
    }
    return accm;
}

/* nb blocks of one row (at b) . one token (a), dd from qb_scales: the reference's chain
 * acc = fmaf((float)P_b, dd[b], acc) continued from acc. 8 blocks at a time: their int32 lanes
 * reduced to one vector of the 8 P_b (qb_red8), converted at once. */
static inline __attribute__((always_inline)) float qb_chain(int F, const uint8_t *b,
                                                            const tq_q8a *a, int64_t nb,
                                                            const float *dd, float acc)
{
    const size_t bs = qb_bs(F);
    int64_t j = 0;
    for (; j + 8 <= nb; j += 8) {
        const uint8_t *bj = b + (size_t)j * bs;
        __m256i v[8];
        _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) v[q] =
            qb_ip(F, QB_UP(F, bj + (size_t)q * bs), a[j + q].qs);
        float pf[8];
        _mm256_storeu_ps(pf, _mm256_cvtepi32_ps(qb_red8(v)));
        _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) acc = fmaf(pf[q], dd[j + q], acc);
    }
    for (; j < nb; j++) {
        const int32_t P = qb_hsum(qb_ip(F, QB_UP(F, b + (size_t)j * bs), a[j].qs));
        acc = fmaf((float)P, dd[j], acc);
    }
    return acc;
}

/* blocks per qb_scales call (stack arrays); longer rows go in spans of this many, the chain
 * carried across (so the same sequence) */
enum { QB_MAXB = 256 };

/* the token's d and s of blocks j0 .. j0 + nb - 1, contiguous */
static inline void qb_act_scales(const tq_q8a *a, int64_t nb, float *da, float *sa)
{
    for (int64_t i = 0; i < nb; i++) {
        da[i] = a[i].d;
        sa[i] = a[i].s;
    }
}

/* one row . one token, any nb (spans of QB_MAXB blocks; the chain's acc and accm carried) */
static inline __attribute__((always_inline)) float qb_row(int F, const uint8_t *b,
                                                          const tq_q8a *a, int64_t nb)
{
    float da[QB_MAXB], sa[QB_MAXB], dd[QB_MAXB];
    float acc = 0.0f, accm = 0.0f;
    for (int64_t j0 = 0; j0 < nb; j0 += QB_MAXB) {
        const int64_t m = nb - j0 < QB_MAXB ? nb - j0 : QB_MAXB;
        const uint8_t *bj = b + (size_t)j0 * qb_bs(F);
        qb_act_scales(a + j0, m, da, sa);
        accm = qb_scales(F, bj, m, da, sa, dd, accm);
        acc = qb_chain(F, bj, a + j0, m, dd, acc);
    }
    return acc + accm;
}

/* Decode: 8 rows . one token, rows in the lanes. Per block: the 8 rows' int32 lanes reduced to
 * the vector of their 8 P_b (qb_red8), the 8 d_w (and m_w) by one vpgatherdd, then one cvt +
 * mul + fma (and the min term's mul + add) for the 8 rows: each lane is its row's chain of the
 * reference. Rows >= R repeat row R - 1 (lanes not stored). With pf, each step prefetches the
 * same block of the rows QB_PF_GROUPS groups ahead (the hardware streamer does not follow 8
 * interleaved rows). qdot_bench -n 1, 1 thread, thread CPU us, same run, old per-lane kernels
 * -> this (loaded machine, noisy): 576 x 1536 (cached) VNNI Q8_0 29.6 -> 23.0, Q4_0 40.2 ->
 * 30.7, Q4_1 33.6 -> 23.8, AVX2 43.3 / 48.6 / 53.0 -> 26.0 / 35.4 / 29.3; 49152 x 576 (DRAM)
 * about equal (Q4_1 better, Q8_0 worse, within the noise); 14336 x 1536 (DRAM) 1.2-1.9x
 * SLOWER (VNNI Q8_0 1.1-1.2 ms -> 1.9-2.3). Tried and dropped: one row at a time (8 blocks'
 * sums reduced at once, the chain's 8 fmas scalar; with or without the scales gathered for the
 * row up front): 2x slower from DRAM; a group's prefetch at its start; prefetcht1. */
#ifndef QB_PF_GROUPS
#define QB_PF_GROUPS 2
#endif
static inline __attribute__((always_inline)) void qb_rows8(int F, const uint8_t *w,
                                                           size_t row_bytes, int R,
                                                           const tq_q8a *a, int64_t nb, float *y,
                                                           int pf)
{
    const size_t bs = qb_bs(F);
    const int hm = qb_has_min(F);
    const uint8_t *rp[8];
    _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) rp[q] =
        w + (size_t)(q < R ? q : R - 1) * row_bytes;
    const __m256i ridx = _mm256_setr_epi32(
        (int)(rp[0] - w), (int)(rp[1] - w), (int)(rp[2] - w), (int)(rp[3] - w), (int)(rp[4] - w),
        (int)(rp[5] - w), (int)(rp[6] - w), (int)(rp[7] - w));
    const __m256i sh = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0,
                                        1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    const size_t pfd = (size_t)QB_PF_GROUPS * 8 * row_bytes * (size_t)pf;
    for (int64_t b = 0; b < nb; b++) {
        const size_t o = (size_t)b * bs;
        __m256i v[8];
        _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++)
        {
            _mm_prefetch((const char *)rp[q] + o + pfd, _MM_HINT_T0);
            v[q] = qb_ip(F, QB_UP(F, rp[q] + o), a[b].qs);
        }
        const __m256 p = _mm256_cvtepi32_ps(qb_red8(v));
        const __m256i g = _mm256_permute4x64_epi64(
            _mm256_shuffle_epi8(_mm256_i32gather_epi32((const int *)(w + o), ridx, 1), sh), 0xd8);
        const __m256 dd = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(g)),
                                        _mm256_set1_ps(a[b].d));
        acc = _mm256_fmadd_ps(p, dd, acc);
        if (hm)
            accm = _mm256_add_ps(accm, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(g, 1)),
                                                     _mm256_set1_ps(a[b].s)));
    }
    float v8[8];
    _mm256_storeu_ps(v8, _mm256_add_ps(acc, accm));
    for (int q = 0; q < R; q++)
        y[q] = v8[q];
}

/* mv_q8 of qdot.h: groups of 8 rows by qb_rows8 (each token; the group's rows from L1 after the
 * first, which prefetches); rows too far apart for the gather's int32 offsets one at a time by
 * qb_row. */
static inline __attribute__((always_inline)) void
qb_mv(int F, const void *w, size_t row_bytes, int64_t k, const void *act, int64_t n, float *y,
      int64_t ldy, int64_t r0, int64_t r1)
{
    const int64_t nb = k / TQ_QK;
    const tq_q8a *a = act;
    if (row_bytes > (size_t)INT32_MAX / 8) {
        for (int64_t r = r0; r < r1; r++)
            for (int64_t t = 0; t < n; t++)
                y[t * ldy + r] = qb_row(F, (const uint8_t *)w + (size_t)r * row_bytes, a + t * nb,
                                        nb);
        return;
    }
    for (int64_t r = r0; r < r1; r += 8) {
        const int R = r1 - r < 8 ? (int)(r1 - r) : 8;
        const uint8_t *rows = (const uint8_t *)w + (size_t)r * row_bytes;
        for (int64_t t = 0; t < n; t++)
            qb_rows8(F, rows, row_bytes, R, a + t * nb, nb, y + t * ldy + r, t == 0);
    }
}

/* ---- the tiles over packed activations (lanes = tokens) ------------------------------------ */
/* rows per tile, and rows per chunk: about QB_CHUNK_BYTES of weights (L2), over which every
 * token group passes before the next chunk */
#ifdef QDOT_VNNI
enum { QB_R = 8 }; /* the 8 activation zmm of a block stay in registers for the 8 rows */
#else
enum { QB_R = 4 };
#endif
#define QB_CHUNK_BYTES 131072

/* y[t * ldy + r] = lane t of v[r] for t < T */
static inline void qb_store(const float *v, int R, int T, float *y, int64_t ldy)
{
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++)
            y[t * ldy + r] = v[TQ_Q8P_T * r + t];
}

#ifdef QDOT_VNNI
/* T <= 8 tokens (batched decode without AMX): qb_tile's steps on ymm, lanes 8h .. 8h + 7 of the
 * group, so no vector work goes to 8 empty lanes. qdot_bench -n 8, 1 thread, thread CPU us, AMX
 * off, the old per-lane 8-token tile / the zmm tile / this: 1536 x 576 Q8_0 112 / 134 / 86, Q4_0
 * 116 / 131 / 88, Q4_1 122 / 140 / 102; 576 x 1536 Q8_0 105 / 234 / 95, Q4_0 115 / 219 / 92, Q4_1
 * 119 / 276 / 115. For 16 tokens two of these lost to the zmm tile (n = 512: 6.3-7.8 vs 4.4-6.1
 * ms). */
static inline __attribute__((always_inline)) void qb_tile8(int F, int R, const uint8_t *w,
                                                           size_t row_bytes, int64_t nb,
                                                           const tq_q8p *p, int h, int T,
                                                           float *y, int64_t ldy)
{
    const size_t bs = qb_bs(F);
    const int hm = qb_has_min(F);
    __m256 acc[QB_R], accm[QB_R];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r] = accm[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const tq_q8p *pb = p + b;
        const __m256i c =
            hm ? _mm256_setzero_si256() : _mm256_load_si256((const __m256i *)(pb->c + 8 * h));
        const __m256 da = _mm256_load_ps(pb->d + 8 * h);
        __m256i av[8];
        _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) av[g] =
            _mm256_load_si256((const __m256i *)(pb->qs[g] + 32 * h));
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        {
            const uint8_t *bb = w + (size_t)r * row_bytes + (size_t)b * bs;
            _mm_prefetch((const char *)bb + (size_t)QB_R * row_bytes, _MM_HINT_T0);
            __m256i u = QB_UP(F, bb);
            if (!hm)
                u = _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80));
            __m256i s0 = c, s1 = _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int g = 0; g < 8; g += 2)
            {
                s0 = _mm256_dpbusd_epi32(
                    s0, _mm256_permutevar8x32_epi32(u, _mm256_set1_epi32(g)), av[g]);
                s1 = _mm256_dpbusd_epi32(
                    s1, _mm256_permutevar8x32_epi32(u, _mm256_set1_epi32(g + 1)), av[g + 1]);
            }
            const __m256 pf = _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1));
            acc[r] = _mm256_fmadd_ps(pf, _mm256_mul_ps(_mm256_set1_ps(f16c(bb)), da), acc[r]);
            if (hm)
                accm[r] = _mm256_add_ps(
                    accm[r],
                    _mm256_mul_ps(_mm256_set1_ps(f16c(bb + 2)), _mm256_load_ps(pb->s + 8 * h)));
        }
    }
    float v[QB_R * TQ_Q8P_T];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _mm256_storeu_ps(v + TQ_Q8P_T * r, _mm256_add_ps(acc[r], accm[r]));
    qb_store(v, R, T, y + 8 * h * ldy, ldy);
}

/* R rows x the group's T <= 16 tokens, zmm lanes = tokens. Each 4 weight bytes (+ 128 for the
 * signed formats) are broadcast to the 16 lanes by vpermd (port 5, beside vpdpbusd's port 0;
 * through a stack slot and broadcast loads, store forwarding made the tile ~1.5x slower). */
static inline __attribute__((always_inline)) void qb_tile(int F, int R, const uint8_t *w,
                                                          size_t row_bytes, int64_t nb,
                                                          const tq_q8p *p, int T, float *y,
                                                          int64_t ldy)
{
    if (T <= 8) {
        qb_tile8(F, R, w, row_bytes, nb, p, 0, T, y, ldy);
        return;
    }
    const size_t bs = qb_bs(F);
    const int hm = qb_has_min(F);
    __m512 acc[QB_R], accm[QB_R];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r] = accm[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const tq_q8p *pb = p + b;
        const __m512i c = hm ? _mm512_setzero_si512() : _mm512_load_si512(pb->c);
        const __m512 da = _mm512_load_ps(pb->d);
        __m512i av[8];
        _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) av[g] = _mm512_load_si512(pb->qs[g]);
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        {
            const uint8_t *bb = w + (size_t)r * row_bytes + (size_t)b * bs;
            _mm_prefetch((const char *)bb + (size_t)QB_R * row_bytes, _MM_HINT_T0);
            __m256i u = QB_UP(F, bb);
            if (!hm)
                u = _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80));
            const __m512i uz = _mm512_castsi256_si512(u);
            __m512i s0 = c, s1 = _mm512_setzero_si512();
            _Pragma("GCC unroll 4") for (int g = 0; g < 8; g += 2)
            {
                s0 = _mm512_dpbusd_epi32(s0, _mm512_permutexvar_epi32(_mm512_set1_epi32(g), uz),
                                         av[g]);
                s1 = _mm512_dpbusd_epi32(
                    s1, _mm512_permutexvar_epi32(_mm512_set1_epi32(g + 1), uz), av[g + 1]);
            }
            const __m512 pf = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
            acc[r] = _mm512_fmadd_ps(pf, _mm512_mul_ps(_mm512_set1_ps(f16c(bb)), da), acc[r]);
            if (hm)
                accm[r] = _mm512_add_ps(
                    accm[r], _mm512_mul_ps(_mm512_set1_ps(f16c(bb + 2)), _mm512_load_ps(pb->s)));
        }
    }
    float v[QB_R * TQ_Q8P_T];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _mm512_storeu_ps(v + TQ_Q8P_T * r, _mm512_add_ps(acc[r], accm[r]));
    qb_store(v, R, T, y, ldy);
}
#else
/* AVX2: R rows x T <= 16 tokens as two ymm halves of 8. The int8 step per 4 elements is
 * vpmaddubsw(unsigned w, a): Q4_1/Q5_1 as they are, Q4_0/Q5_0 offset to w + 8 / w + 16 (and
 * P_b = the sum + c / 16 or c / 8, tq_q8p's c = -128 * sum(a): exact); int16 pairs of at most
 * 2 * 31 * 127, summed in int16 over 8 steps (max 15: 30480) or 4 (max 31: 31496) before
 * vpmaddwd. Q8_0 and IQ4_NL (|w| up to 128: w + 128 would saturate) take vpmaddubsw(|w|,
 * sign(a, w)) per step (pairs <= 32512) and vpmaddwd at once. Same bits either way (exact).
 * The 4-byte weight groups are broadcast by vpermd (port 5; the sign/multiply work is on ports
 * 0-1): through a stack slot and broadcast loads the tile was 1.07-1.24x slower (qdot_bench
 * -n 512 1536 x 576, 1 thread: Q8_0 14330 -> 11600 us, Q4_0 9000 -> 8356, Q5_0 10620 -> 9755). */
static inline int qb_off(int F)
{
    return F == TQ_GGML_Q4_0 ? 8 : F == TQ_GGML_Q5_0 ? 16 : 0;
}
static inline int qb_sum16(int F)
{
    return F == TQ_GGML_Q8_0 || F == TQ_FMT_IQ4_NL     ? 0
           : F == TQ_GGML_Q5_1 || F == TQ_GGML_Q5_0 ? 4
                                                    : 8;
}
static inline __attribute__((always_inline)) void qb_tile(int F, int R, const uint8_t *w,
                                                          size_t row_bytes, int64_t nb,
                                                          const tq_q8p *p, int T, float *y,
                                                          int64_t ldy)
{
    const size_t bs = qb_bs(F);
    const int hm = qb_has_min(F);
    const int s16 = qb_sum16(F);
    const int off = qb_off(F);
    const int uns = s16 != 0; /* the unsigned-weight step */
    const __m256i one = _mm256_set1_epi16(1);
    float v[QB_R * TQ_Q8P_T];
    for (int h = 0; h < (T > 8 ? 2 : 1); h++) {
        __m256 acc[QB_R], accm[QB_R];
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r] = accm[r] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const tq_q8p *pb = p + b;
            const __m256 da = _mm256_load_ps(pb->d + 8 * h);
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
            {
                const uint8_t *bb = w + (size_t)r * row_bytes + (size_t)b * bs;
                if (h == 0)
                    _mm_prefetch((const char *)bb + (size_t)QB_R * row_bytes, _MM_HINT_T0);
                __m256i u = QB_UP(F, bb);
                if (off)
                    u = _mm256_add_epi8(u, _mm256_set1_epi8((char)off));
                const __m256i ua = uns ? u : _mm256_abs_epi8(u);
                __m256i P = off ? _mm256_srai_epi32(
                                      _mm256_load_si256((const __m256i *)(pb->c + 8 * h)),
                                      off == 8 ? 4 : 3)
                                : _mm256_setzero_si256();
                __m256i S = _mm256_setzero_si256();
                _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++)
                {
                    const __m256i ag = _mm256_load_si256((const __m256i *)(pb->qs[g] + 32 * h));
                    const __m256i sel = _mm256_set1_epi32(g);
                    const __m256i wb = _mm256_permutevar8x32_epi32(u, sel);
                    const __m256i p16 =
                        uns ? _mm256_maddubs_epi16(wb, ag)
                           : _mm256_maddubs_epi16(_mm256_permutevar8x32_epi32(ua, sel),
                                                  _mm256_sign_epi8(ag, wb));
                    if (s16 == 0) {
                        P = _mm256_add_epi32(P, _mm256_madd_epi16(p16, one));
                    } else {
                        S = _mm256_add_epi16(S, p16);
                        if ((g + 1) % s16 == 0) {
                            P = _mm256_add_epi32(P, _mm256_madd_epi16(S, one));
                            S = _mm256_setzero_si256();
                        }
                    }
                }
                const __m256 pf = _mm256_cvtepi32_ps(P);
                acc[r] = _mm256_fmadd_ps(pf, _mm256_mul_ps(_mm256_set1_ps(f16c(bb)), da), acc[r]);
                if (hm)
                    accm[r] = _mm256_add_ps(accm[r], _mm256_mul_ps(_mm256_set1_ps(f16c(bb + 2)),
                                                                   _mm256_load_ps(pb->s + 8 * h)));
            }
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
            _mm256_storeu_ps(v + TQ_Q8P_T * r + 8 * h, _mm256_add_ps(acc[r], accm[r]));
    }
    qb_store(v, R, T, y, ldy);
}
#endif

typedef void (*qb_tile_fn)(const uint8_t *w, size_t row_bytes, int64_t nb, const tq_q8p *p,
                           int T, float *y, int64_t ldy);

/* gemm_q8 of qdot.h: chunks of rows, every token group over a chunk, row tiles of QB_R (then
 * 1). f[0]: the QB_R-row tile, f[1]: the 1-row tile. */
static inline void qb_gemm(const qb_tile_fn *f, const void *w, size_t row_bytes, int64_t k,
                           const void *act, int64_t n, float *y, int64_t ldy, int64_t r0,
                           int64_t r1)
{
    const int64_t nb = k / TQ_QK;
    int64_t chunk = (int64_t)(QB_CHUNK_BYTES / row_bytes) / QB_R * QB_R;
    if (chunk < QB_R)
        chunk = QB_R;
    const tq_q8p *p = act;
    for (int64_t rc = r0; rc < r1; rc += chunk) {
        const int64_t re = rc + chunk < r1 ? rc + chunk : r1;
        for (int64_t t = 0; t < n; t += TQ_Q8P_T) {
            const int T = n - t < TQ_Q8P_T ? (int)(n - t) : TQ_Q8P_T;
            const tq_q8p *pg = p + (t / TQ_Q8P_T) * nb;
            int64_t r = rc;
            for (; r + QB_R <= re; r += QB_R)
                f[0]((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nb, pg, T,
                     y + t * ldy + r, ldy);
            for (; r < re; r++)
                f[1]((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nb, pg, T,
                     y + t * ldy + r, ldy);
        }
    }
}

/* QB_FORMAT(F, name) -- mvq_<name> (qdot.h's mv_q8), dotq_<name> (dot_q8) and gemm_q8_<name> */
#define QB_FORMAT(F, name)                                                                       \
    static float dotq_##name(const void *w, const void *act, int64_t k)                          \
    {                                                                                            \
        return qb_row(F, w, act, k / TQ_QK);                                                     \
    }                                                                                            \
    static void mvq_##name(const void *w, size_t row_bytes, int64_t k, const void *act,          \
                           int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)             \
    {                                                                                            \
        qb_mv(F, w, row_bytes, k, act, n, y, ldy, r0, r1);                                       \
    }                                                                                            \
    static void qbt_##name##_r(const uint8_t *w, size_t row_bytes, int64_t nb, const tq_q8p *p,  \
                               int T, float *y, int64_t ldy)                                     \
    {                                                                                            \
        qb_tile(F, QB_R, w, row_bytes, nb, p, T, y, ldy);                                        \
    }                                                                                            \
    static void qbt_##name##_1(const uint8_t *w, size_t row_bytes, int64_t nb, const tq_q8p *p,  \
                               int T, float *y, int64_t ldy)                                     \
    {                                                                                            \
        qb_tile(F, 1, w, row_bytes, nb, p, T, y, ldy);                                           \
    }                                                                                            \
    static void gemm_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *act,      \
                               int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)         \
    {                                                                                            \
        static const qb_tile_fn f[2] = {qbt_##name##_r, qbt_##name##_1};                         \
        qb_gemm(f, w, row_bytes, k, act, n, y, ldy, r0, r1);                                     \
    }

#endif /* TQ_CPU_QDOT_Q8BLK_H */
