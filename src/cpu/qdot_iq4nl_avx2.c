/* qdot_iq4nl_avx2.c -- AVX2 + FMA + F16C kernels of qdot_iq4nl.h (and, compiled again from
 * qdot_iq4nl_avx512vnni.c with QDOT_VNNI, the AVX512-VNNI ones). The 16 nibbles of a block
 * become the table's int8 values by one vpshufb (the table broadcast to both 128-bit lanes);
 * the weight and activation integers meet in vpmaddubsw + vpmaddwd (|w| by sign(a, w): |w| <=
 * 127, |a| <= 127, a pair <= 32258, no int16 saturation) or in vpdpbusd: int32 lane l is
 * exactly the reference's p of lane l (elements 4l..4l+3). The f32 steps are the reference's
 * lane for lane (d_w * d_a rounded, then vfmadd; vfmadd on the f32 path) and H() is the same
 * tree, so the results equal qdot_iq4nl.c's bit for bit. The matvecs decode a block once for up to 4 tokens (q8) or
 * 2 tokens (f32); each (row, token) keeps its own accumulators in the same order. */
#include <immintrin.h>

#include "cpu/qdot.h"
#include "cpu/qdot_avx2.h"
#include "cpu/qdot_iq4nl.h"

static inline __m256i table(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tq_iq4nl_values));
}

/* the block's 32 weight integers in element order: low nibbles in bytes 0..15, high 16..31 */
static inline __m256i up(const uint8_t *b, __m256i tab)
{
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b + 2)));
    const __m256i nib = _mm256_and_si256(
        _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0f));
    return _mm256_shuffle_epi8(tab, nib);
}

/* int32 lane l = sum of elements 4l..4l+3 of w * a, as f32 (exact); aw = |w| */
static inline __m256 ip(__m256i w, __m256i aw, const int8_t *qs)
{
    const __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)qs), w);
#ifdef QDOT_VNNI
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, a));
#else
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(aw, a), _mm256_set1_epi16(1)));
#endif
}

#define STEP_Q8(acc, i)                                                                          \
    do {                                                                                         \
        const uint8_t *bb = b + (size_t)(i) * 18;                                                \
        const __m256i wq = up(bb, tab);                                                          \
        const __m256 p = ip(wq, _mm256_abs_epi8(wq), a[i].qs);                                   \
        acc = _mm256_fmadd_ps(p, _mm256_set1_ps(f16c(bb) * a[i].d), acc);                        \
    } while (0)

static float dot_q8(const void *w, const void *act, int64_t k)
{
    const __m256i tab = table();
    const tq_q8a *a = act;
    const uint8_t *b = w;
    const int64_t nb = k / TQ_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        STEP_Q8(acc0, i);
        STEP_Q8(acc1, i + 1);
    }
    if (i < nb)
        STEP_Q8(acc0, i);
    return hsum8(_mm256_add_ps(acc0, acc1));
}

/* the block's values d * w in 4 groups of 8 (the dequantizer's products) */
static inline void up_f32(const uint8_t *b, __m256i tab, __m256 *wf)
{
    const __m256i wq = up(b, tab);
    const __m256 vd = _mm256_set1_ps(f16c(b));
    const __m128i lo = _mm256_castsi256_si128(wq), hi = _mm256_extracti128_si256(wq, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int g = 0; g < 4; g++)
        wf[g] = _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part[g])));
}

static float dot_f32(const void *w, const float *x, int64_t k)
{
    const __m256i tab = table();
    const uint8_t *b = w;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (int64_t i = 0; i < k / TQ_QK; i++, b += 18, x += TQ_QK) {
        __m256 wf[4];
        up_f32(b, tab, wf);
        for (int g = 0; g < 4; g++)
            acc[g] = _mm256_fmadd_ps(wf[g], _mm256_loadu_ps(x + 8 * g), acc[g]);
    }
    return hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

/* block i of one row met with 4 tokens' activations (at[u] = token u's blocks), slot SLOT */
#define STEP_Q8_4(SLOT, i)                                                                       \
    do {                                                                                         \
        const uint8_t *bb = row + (size_t)(i) * 18;                                              \
        const __m256i wq = up(bb, tab);                                                          \
        const __m256i aw = _mm256_abs_epi8(wq);                                                  \
        const float dw = f16c(bb);                                                               \
        _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++)                                      \
        {                                                                                        \
            const __m256 p = ip(wq, aw, at[u][i].qs);                                            \
            acc[u][SLOT] = _mm256_fmadd_ps(p, _mm256_set1_ps(dw * at[u][i].d), acc[u][SLOT]);     \
        }                                                                                        \
    } while (0)

#ifdef QDOT_VNNI
/* AVX512-VNNI tile: rows r and r + 1 in the two 256-bit halves of one zmm, 4 tokens. Each half
 * is lane for lane the ymm kernel's operation sequence (the product of the int8 dot, times
 * d_w * d_a rounded in f32, added to the block-parity accumulator), so the results are the
 * scalar bits. AVX-512 has no vpsignb: a is negated where w < 0 under a mask (w is never 0).
 * 8 tokens per tile: +13% prefill over 4 (same-run A/B, SmolLM2 IQ4_NL, 1 thread). */
#define QT_T 8 /* tokens per zmm tile */
#define STEP_Q8_2R(SLOT, i)                                                                      \
    do {                                                                                         \
        const uint8_t *b0 = row + (size_t)(i) * 18, *b1 = b0 + row_bytes;                        \
        const __m512i wq =                                                                       \
            _mm512_inserti64x4(_mm512_castsi256_si512(up(b0, tab)), up(b1, tab), 1);             \
        const __m512i aw = _mm512_abs_epi8(wq);                                                  \
        const __mmask64 neg = _mm512_movepi8_mask(wq);                                           \
        const __m512 dw = _mm512_insertf32x8(_mm512_set1_ps(f16c(b0)),                            \
                                             _mm256_set1_ps(f16c(b1)), 1);                        \
        _Pragma("GCC unroll 8") for (int u = 0; u < QT_T; u++)                                   \
        {                                                                                        \
            const __m512i a = _mm512_broadcast_i64x4(                                            \
                _mm256_loadu_si256((const __m256i *)at[u][i].qs));                               \
            const __m512i sa = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);          \
            const __m512 p =                                                                     \
                _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, sa));         \
            acc[u][SLOT] =                                                                       \
                _mm512_fmadd_ps(p, _mm512_mul_ps(dw, _mm512_set1_ps(at[u][i].d)), acc[u][SLOT]); \
        }                                                                                        \
    } while (0)

static inline int64_t mv_q8_2r(const uint8_t *row, size_t row_bytes, int64_t nb, const tq_q8a *A,
                               int64_t n, float *y, int64_t ldy, int64_t r, __m256i tab)
{
    int64_t t = 0;
    for (; t + QT_T <= n; t += QT_T) {
        const tq_q8a *at[QT_T];
        for (int u = 0; u < QT_T; u++)
            at[u] = A + (t + u) * nb;
        __m512 acc[QT_T][2];
        _Pragma("GCC unroll 8") for (int u = 0; u < QT_T; u++)
            acc[u][0] = acc[u][1] = _mm512_setzero_ps();
        int64_t i = 0;
        for (; i + 1 < nb; i += 2) {
            STEP_Q8_2R(0, i);
            STEP_Q8_2R(1, i + 1);
        }
        if (i < nb)
            STEP_Q8_2R(0, i);
        _Pragma("GCC unroll 8") for (int u = 0; u < QT_T; u++)
        {
            const __m512 v = _mm512_add_ps(acc[u][0], acc[u][1]);
            y[(t + u) * ldy + r] = hsum8(_mm512_castps512_ps256(v));
            y[(t + u) * ldy + r + 1] = hsum8(_mm512_extractf32x8_ps(v, 1));
        }
    }
    return t; /* tokens done for both rows */
}

/* the same for one token (decode): rows r, r + 1 in one zmm, the next pair's bytes prefetched */
static inline void mv_q8_2r1(const uint8_t *row, size_t row_bytes, int64_t nb, const tq_q8a *a,
                             float *y, __m256i tab)
{
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    for (size_t o = 0; o < 2 * row_bytes; o += 64)
        _mm_prefetch((const char *)row + 2 * row_bytes + o, _MM_HINT_T0);
    int64_t i = 0;
#define STEP_2R1(acc, i)                                                                         \
    do {                                                                                         \
        const uint8_t *b0 = row + (size_t)(i) * 18, *b1 = b0 + row_bytes;                        \
        const __m512i wq =                                                                       \
            _mm512_inserti64x4(_mm512_castsi256_si512(up(b0, tab)), up(b1, tab), 1);             \
        const __m512i aq =                                                                       \
            _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)a[i].qs));                \
        const __m512i sa = _mm512_mask_sub_epi8(aq, _mm512_movepi8_mask(wq), zero, aq);          \
        const __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, _mm512_abs_epi8(wq), sa)); \
        const __m512 dw = _mm512_insertf32x8(_mm512_set1_ps(f16c(b0)),                            \
                                             _mm256_set1_ps(f16c(b1)), 1);                        \
        acc = _mm512_fmadd_ps(p, _mm512_mul_ps(dw, _mm512_set1_ps(a[i].d)), acc);                \
    } while (0)
    for (; i + 1 < nb; i += 2) {
        STEP_2R1(acc0, i);
        STEP_2R1(acc1, i + 1);
    }
    if (i < nb)
        STEP_2R1(acc0, i);
#undef STEP_2R1
    const __m512 v = _mm512_add_ps(acc0, acc1);
    y[0] = hsum8(_mm512_castps512_ps256(v));
    y[1] = hsum8(_mm512_extractf32x8_ps(v, 1));
}
#endif

#ifndef QDOT_VNNI
/* AVX2 prefill (n >= 16): chunks of about 32 KB of rows; per row 8 tokens in two passes, the even
 * blocks (acc[0] of dot_q8, 8 accumulators) then the odd ones (acc[1]), v = acc[0] + acc[1] as
 * there: a row's lookup is shared by 8 tokens and the chunk's weights stay in cache while the
 * token tiles pass; the n % 8 rest by the dot, in the same chunk. */
#define PASS8(P0)                                                                                \
    do {                                                                                         \
        _Pragma("GCC unroll 8") for (int u = 0; u < 8; u++) acc8[u] = _mm256_setzero_ps();       \
        for (int64_t i = (P0); i < nb; i += 2) {                                                 \
            const uint8_t *bb = row + (size_t)i * 18;                                            \
            const __m256i wq = up(bb, tab);                                                      \
            const __m256i aw = _mm256_abs_epi8(wq);                                              \
            const float dw = f16c(bb);                                                           \
            _Pragma("GCC unroll 8") for (int u = 0; u < 8; u++) acc8[u] = _mm256_fmadd_ps(       \
                ip(wq, aw, at8[u][i].qs), _mm256_set1_ps(dw * at8[u][i].d), acc8[u]);           \
        }                                                                                        \
    } while (0)
static void mv_q8_prefill(const uint8_t *w, size_t row_bytes, int64_t k, const tq_q8a *A,
                          int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1, __m256i tab)
{
    const int64_t nb = k / TQ_QK;
    int64_t chunk = (int64_t)(32768 / row_bytes);
    chunk = chunk < 1 ? 1 : chunk;
    const int64_t n8 = n - n % 8;
    for (int64_t rc = r0; rc < r1; rc += chunk) {
        const int64_t re = rc + chunk < r1 ? rc + chunk : r1;
        for (int64_t t = 0; t < n8; t += 8) {
            const tq_q8a *at8[8];
            for (int u = 0; u < 8; u++)
                at8[u] = A + (t + u) * nb;
            for (int64_t r = rc; r < re; r++) {
                const uint8_t *row = w + (size_t)r * row_bytes;
                __m256 acc8[8], even[8];
                PASS8(0);
                _Pragma("GCC unroll 8") for (int u = 0; u < 8; u++) even[u] = acc8[u];
                PASS8(1);
                _Pragma("GCC unroll 8") for (int u = 0; u < 8; u++)
                    y[(t + u) * ldy + r] = hsum8(_mm256_add_ps(even[u], acc8[u]));
            }
        }
        for (int64_t r = rc; r < re; r++)
            for (int64_t t = n8; t < n; t++)
                y[t * ldy + r] = dot_q8(w + (size_t)r * row_bytes, A + t * nb, k);
    }
}
#undef PASS8
#endif

static void mv_q8(const void *w, size_t row_bytes, int64_t k, const void *act, int64_t n,
                  float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    const __m256i tab = table();
    const int64_t nb = k / TQ_QK;
    const tq_q8a *A = act;
#ifndef QDOT_VNNI
    if (n >= 16) {
        mv_q8_prefill(w, row_bytes, k, A, n, y, ldy, r0, r1, tab);
        return;
    }
#endif
#ifdef QDOT_VNNI
    if (n == 1) {
        for (; r0 + 2 <= r1; r0 += 2)
            mv_q8_2r1((const uint8_t *)w + (size_t)r0 * row_bytes, row_bytes, nb, A, y + r0, tab);
    }
    for (; n >= QT_T && r0 + 2 <= r1; r0 += 2) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r0 * row_bytes;
        const int64_t t0 = mv_q8_2r(row, row_bytes, nb, A, n, y, ldy, r0, tab);
        for (int64_t t = t0; t < n; t++)
            for (int q = 0; q < 2; q++)
                y[t * ldy + r0 + q] = dot_q8(row + (size_t)q * row_bytes, A + t * nb, k);
    }
#endif
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * row_bytes;
        if (n == 1) { /* decode: the next row's bytes prefetched */
            for (size_t o = 0; o < row_bytes; o += 64)
                _mm_prefetch((const char *)row + row_bytes + o, _MM_HINT_T0);
            y[r] = dot_q8(row, A, k);
            continue;
        }
        int64_t t = 0;
        for (; t + 4 <= n; t += 4) {
            const tq_q8a *at[4] = {A + t * nb, A + (t + 1) * nb, A + (t + 2) * nb,
                                   A + (t + 3) * nb};
            __m256 acc[4][2];
            _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++)
                acc[u][0] = acc[u][1] = _mm256_setzero_ps();
            int64_t i = 0;
            for (; i + 1 < nb; i += 2) {
                STEP_Q8_4(0, i);
                STEP_Q8_4(1, i + 1);
            }
            if (i < nb)
                STEP_Q8_4(0, i);
            _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++)
                y[(t + u) * ldy + r] = hsum8(_mm256_add_ps(acc[u][0], acc[u][1]));
        }
        for (; t < n; t++)
            y[t * ldy + r] = dot_q8(row, A + t * nb, k);
    }
}

static void mv_f32(const void *w, size_t row_bytes, int64_t k, const float *x, int64_t ldx,
                   int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    const __m256i tab = table();
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * row_bytes;
        int64_t t = 0;
        for (; t + 2 <= n; t += 2) {
            const float *x0 = x + t * ldx, *x1 = x0 + ldx;
            __m256 a0[4], a1[4];
            for (int g = 0; g < 4; g++)
                a0[g] = a1[g] = _mm256_setzero_ps();
            for (int64_t i = 0; i < k / TQ_QK; i++) {
                __m256 wf[4];
                up_f32(row + (size_t)i * 18, tab, wf);
                for (int g = 0; g < 4; g++) {
                    a0[g] = _mm256_fmadd_ps(wf[g], _mm256_loadu_ps(x0 + 32 * i + 8 * g), a0[g]);
                    a1[g] = _mm256_fmadd_ps(wf[g], _mm256_loadu_ps(x1 + 32 * i + 8 * g), a1[g]);
                }
            }
            y[t * ldy + r] =
                hsum8(_mm256_add_ps(_mm256_add_ps(a0[0], a0[1]), _mm256_add_ps(a0[2], a0[3])));
            y[(t + 1) * ldy + r] =
                hsum8(_mm256_add_ps(_mm256_add_ps(a1[0], a1[1]), _mm256_add_ps(a1[2], a1[3])));
        }
        for (; t < n; t++)
            y[t * ldy + r] = dot_f32(row, x + t * ldx, k);
    }
}

#ifdef QDOT_VNNI
#include "cpu/qdot_qp512.h"
QP_FORMAT(TQ_FMT_IQ4_NL, iq4_nl)
static const tq_iq4nl_kernels table_isa = {"avx512vnni", TQ_ISA_AVX512, dot_q8, dot_f32, mv_q8,
                                           mv_f32, gemm_q8_iq4_nl};

const tq_iq4nl_kernels *tq_iq4nl_avx512_table(void)
{
    return &table_isa;
}
#else
static const tq_iq4nl_kernels table_isa = {"avx2", TQ_ISA_AVX2, dot_q8, dot_f32, mv_q8, mv_f32,
                                           NULL};

const tq_iq4nl_kernels *tq_iq4nl_avx2_table(void)
{
    return &table_isa;
}
#endif
