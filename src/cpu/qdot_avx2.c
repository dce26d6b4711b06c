/* qdot_avx2.c -- AVX2 + FMA + F16C versions of the qdot.h kernels. Each gives the scalar
 * reference's bits (qdot.c) for finite data: the weight and activation integers meet in
 * vpmaddubsw + vpmaddwd, whose int32 lane l is exactly the reference's p of lane l (elements
 * 4l..4l+3; no int16 saturation: |w| <= 128, |qs| <= 127, so a pair is <= 32512); the f32
 * combination is the reference's, lane for lane (d_w * d_a rounded, then vfmadd on the q8 path;
 * vfmadd on the f32 path), and H() is the same tree. K formats: the super-block integers P and M are exact int32
 * sums in any order, then the same f32 steps. Block scales are converted by F16C (exact for
 * non-NaN). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/qdot.h"
#include "cpu/qdot_avx2.h"

/* ---- the activation quantizers ------------------------------------------------------------ */
static inline __m256 absmax8(const float *x, int n8)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 mx = _mm256_setzero_ps();
    for (int g = 0; g < n8; g++)
        mx = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * g), absmask), mx);
    return mx;
}

static inline float hmax8(__m256 mx)
{
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

/* 32 values * id -> qs (clamped, rounded half to even); returns the sum of the 32 qs. */
static inline int quant32(const float *x, float id, int8_t *qs)
{
    const __m256 lo = _mm256_set1_ps(-127.0f);
    const __m256 hi = _mm256_set1_ps(127.0f);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int g = 0; g < 4; g++) {
        __m256 t = _mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * g), vid), lo); /* NaN: -127 */
        t = _mm256_min_ps(t, hi);
        t = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[g] = _mm256_cvtps_epi32(t);
    }
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    /* packs interleave the 128-bit lanes; the permutation puts the dwords back in order */
    const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]),
                                          _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256((__m256i *)qs,
                        _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    return _mm_cvtsi128_si32(s4);
}

static void quant_q8a(const float *x, void *act, int64_t k)
{
    tq_q8a *a = act;
    for (int64_t b = 0; b < k / TQ_QK; b++, x += TQ_QK, a++) {
        const float d = hmax8(absmax8(x, 4)) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const int sum = quant32(x, id, a->qs);
        a->d = d;
        a->s = d * (float)sum;
    }
}

static void quant_q8k(const float *x, void *act, int64_t k)
{
    tq_q8k *a = act;
    for (int64_t b = 0; b < k / TQ_QKK; b++, x += TQ_QKK, a++) {
        const float d = hmax8(absmax8(x, 32)) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int c = 0; c < 8; c++)
            quant32(x + 32 * c, id, a->qs + 32 * c);
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++)
                sum += a->qs[16 * g + j];
            a->bsums[g] = (int16_t)sum;
        }
        a->d = d;
    }
}

/* ---- block unpacking into 32 int8 in element order ---------------------------------------- */
/* 16 packed bytes -> low nibbles (elements 0..15) in bytes 0..15, high nibbles in 16..31: one
 * broadcast load and a per-lane shift (vpsrlvd 0 | 4). Same-run A/B against loading, masking
 * twice and vinserti128: Q4_0 576 x 1536 warm, 59 -> 50 us. */
static inline __m256i nib32(const uint8_t *p)
{
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    return _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                            _mm256_set1_epi8(0x0f));
}

/* Bit j of qh -> 0x10 in byte j. */
static inline __m256i bit5(uint32_t qh)
{
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll,
                                           0x0101010101010101ll, 0x0000000000000000ll);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

static inline uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v; /* x86 is little-endian */
}

static inline __m256i up_q8_0(const uint8_t *b)
{
    return _mm256_loadu_si256((const __m256i *)(b + 2));
}
static inline __m256i up_q4_0(const uint8_t *b)
{
    return _mm256_sub_epi8(nib32(b + 2), _mm256_set1_epi8(8));
}
static inline __m256i up_q4_1(const uint8_t *b)
{
    return nib32(b + 4);
}
static inline __m256i up_q5_0(const uint8_t *b)
{
    return _mm256_sub_epi8(_mm256_or_si256(nib32(b + 6), bit5(rd32(b + 2))),
                           _mm256_set1_epi8(16));
}
static inline __m256i up_q5_1(const uint8_t *b)
{
    return _mm256_or_si256(nib32(b + 8), bit5(rd32(b + 4)));
}

/* 32 int8 -> acc[g] = fmadd(d * q (+ m), x, acc[g]) for the 4 groups of 8 (the f32 path). */
static inline void fma_block(__m256i w, float d, float m, int has_min, const float *x,
                             __m256 *acc)
{
    const __m128i lo = _mm256_castsi256_si128(w);
    const __m128i hi = _mm256_extracti128_si256(w, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    const __m256 vd = _mm256_set1_ps(d);
    const __m256 vm = _mm256_set1_ps(m);
    for (int g = 0; g < 4; g++) {
        __m256 wf = _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part[g])));
        if (has_min)
            wf = _mm256_add_ps(wf, vm);
        acc[g] = _mm256_fmadd_ps(wf, _mm256_loadu_ps(x + 8 * g), acc[g]);
    }
}

#define DEFINE_MV_F32(name)                                                                      \
    static void mv_f32_##name(const void *w, size_t row_bytes, int64_t k, const float *x,        \
                              int64_t ldx, int64_t n, float *y, int64_t ldy, int64_t r0,         \
                              int64_t r1)                                                        \
    {                                                                                            \
        for (int64_t r = r0; r < r1; r++)                                                        \
            for (int64_t t = 0; t < n; t++)                                                      \
                y[t * ldy + r] =                                                                 \
                    dot_f32_##name((const uint8_t *)w + (size_t)r * row_bytes, x + t * ldx, k);  \
    }

/* ---- the q8 path of the 32-formats: cpu/qdot_q8blk.h (the per-block spec) ------------------ */
static inline __m256i QB_UP(int F, const uint8_t *b)
{
    switch (F) {
    case TQ_GGML_Q8_0:
        return up_q8_0(b);
    case TQ_GGML_Q4_0:
        return up_q4_0(b);
    case TQ_GGML_Q4_1:
        return up_q4_1(b);
    case TQ_GGML_Q5_0:
        return up_q5_0(b);
    default:
        return up_q5_1(b);
    }
}
#include "cpu/qdot_q8blk.h"

#define DEFINE_FORMAT(name, F, BS_, HAS_MIN)                                                     \
    QB_FORMAT(F, name)                                                                           \
    static float dot_q8_##name(const void *w, const void *act, int64_t k)                        \
    {                                                                                            \
        return dotq_##name(w, act, k);                                                           \
    }                                                                                            \
    static void mv_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *act,        \
                             int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)           \
    {                                                                                            \
        mvq_##name(w, row_bytes, k, act, n, y, ldy, r0, r1);                                     \
    }                                                                                            \
    static float dot_f32_##name(const void *w, const float *x, int64_t k)                        \
    {                                                                                            \
        const uint8_t *b = w;                                                                    \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),          \
                         _mm256_setzero_ps()};                                                   \
        for (int64_t i = 0; i < k / TQ_QK; i++, b += BS_, x += TQ_QK)                            \
            fma_block(up_##name(b), f16c(b), HAS_MIN ? f16c(b + 2) : 0.0f, HAS_MIN, x, acc);     \
        return hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))); \
    }                                                                                            \
    DEFINE_MV_F32(name)

DEFINE_FORMAT(q8_0, TQ_GGML_Q8_0, 34, 0)
DEFINE_FORMAT(q4_0, TQ_GGML_Q4_0, 18, 0)
DEFINE_FORMAT(q4_1, TQ_GGML_Q4_1, 20, 1)
DEFINE_FORMAT(q5_0, TQ_GGML_Q5_0, 22, 0)
DEFINE_FORMAT(q5_1, TQ_GGML_Q5_1, 24, 1)

/* ---- row chunks and prefetch of the K-format tiles ------------------------------------------
 * Rows are walked in chunks of about 32 KB of weights, so a chunk stays in L1/L2 while all
 * token tiles pass over it; below 16 tokens (batched decode) a chunk is one row tile, so the
 * weights' DRAM stream meets every token tile's work. */
#define QT_CHUNK_BYTES 32768
/* Software prefetch of the weights QT_PF_BYTES ahead of the row a tile starts, one row's bytes
 * (each line once as the rows advance). A tile does 4-8x a dot's work per weight byte, so the
 * out-of-order window holds fewer weight loads and, from DRAM, the tile waited on them: a 4-token
 * decode step took 2.4x the 3-token one (batch_bench; qdot_bench 49152 x 576 Q8_0 -n 4 13.6 ms
 * vs -n 3 6.0 ms thread CPU). Prefetches never fault, so past the end is harmless. */
#define QT_PF_BYTES 2048
static inline void qt_prefetch(const uint8_t *row, size_t row_bytes)
{
    const char *p = (const char *)row + QT_PF_BYTES;
    for (size_t o = 0; o < row_bytes; o += 64)
        _mm_prefetch(p + o, _MM_HINT_T0);
}
static inline int64_t qt_chunk_rows(size_t row_bytes, int64_t n)
{
    if (n < 16)
        return 4;
    int64_t c = (int64_t)(QT_CHUNK_BYTES / row_bytes) & ~(int64_t)3;
    return c < 4 ? 4 : c;
}


/* ---- K formats ----------------------------------------------------------------------------- */
static inline int32_t hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static inline void scale_min_k4(int g, const uint8_t *q, int *sc, int *m)
{
    if (g < 4) {
        *sc = q[g] & 63;
        *m = q[g + 4] & 63;
    } else {
        *sc = (q[g + 4] & 0x0f) | ((q[g - 4] >> 6) << 4);
        *m = (q[g + 4] >> 4) | ((q[g] >> 6) << 4);
    }
}

/* All 8 scales and mins of Q4_K/Q5_K from their 12 bytes, four at a time in 32-bit words:
 * groups 0-3 are the low 6 bits of bytes 0-3 / 4-7; groups 4-7 take 4 bits from bytes 8-11
 * and their top 2 bits from the top of bytes 0-3 / 4-7 (as scale_min_k4). With the mins
 * term as one vpmaddwd over the 16-value sums: same-run A/B, 2048 x 4096 warm, Q4_K 0.81 ->
 * 0.62 ms, Q5_K 0.92 -> 0.74 ms against 8 scale_min_k4() calls and a scalar mins loop. */
static inline void scales_mins_k4(const uint8_t *q, uint8_t *sc, uint8_t *mn)
{
    uint32_t u[3];
    uint32_t w[4];
    memcpy(u, q, 12);
    w[0] = u[0] & 0x3f3f3f3fu;
    w[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    w[2] = u[1] & 0x3f3f3f3fu;
    w[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    memcpy(sc, w, 8);
    memcpy(mn, w + 2, 8);
}

/* Group g (32 values) of a Q4_K (qh = NULL) or Q5_K super-block as unsigned bytes. */
static inline __m256i k_group(const uint8_t *qs, __m256i qh, int has_qh, int g)
{
    const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * (g / 2)));
    __m256i q = _mm256_and_si256(g & 1 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0f));
    if (has_qh) {
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, g), _mm256_set1_epi8(1));
        q = _mm256_or_si256(q, _mm256_slli_epi16(hb, 4));
    }
    return q;
}

/* Chunk c (32 values, 0..7) of a Q6_K super-block as unsigned 6-bit bytes (no - 32). */
static inline __m256i q6_chunk(const uint8_t *b, int c)
{
    const int h = c / 4, kk = c % 4;
    const __m256i l = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32 * (kk & 1)));
    const __m256i hv = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
    const __m256i lo = _mm256_and_si256(kk >> 1 ? _mm256_srli_epi16(l, 4) : l,
                                        _mm256_set1_epi8(0x0f));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hv, 2 * kk), _mm256_set1_epi8(3));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
}

/* acc[grp] = fmadd(w, x, acc[grp]) with w = d_lo|d_hi * q (groups 0-1 | 2-3) [- m]. */
static inline void fma_block_k(__m256i w, float dlo, float dhi, float m, int sub_min,
                               const float *x, __m256 *acc)
{
    const __m128i lo = _mm256_castsi256_si128(w);
    const __m128i hi = _mm256_extracti128_si256(w, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int g = 0; g < 4; g++) {
        const __m256 vd = _mm256_set1_ps(g < 2 ? dlo : dhi);
        __m256 wf = _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part[g])));
        if (sub_min)
            wf = _mm256_sub_ps(wf, _mm256_set1_ps(m));
        acc[g] = _mm256_fmadd_ps(wf, _mm256_loadu_ps(x + 8 * g), acc[g]);
    }
}

static inline float finish_f32(const __m256 *acc)
{
    return hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

static inline float dot_q8_q45k(const void *w, const void *act, int64_t k, int is5)
{
    const tq_q8k *a = act;
    const size_t bs = is5 ? 176 : 144;
    const uint8_t *b = w;
    float acc = 0.0f;
    float accm = 0.0f;
    for (int64_t i = 0; i < k / TQ_QKK; i++, b += bs) {
        const uint8_t *qs = b + (is5 ? 48 : 16);
        const __m256i qh = is5 ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
        uint8_t sc[8], mn[8];
        scales_mins_k4(b + 4, sc, mn);
        __m256i sumi = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++) {
            const __m256i av = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * g));
            const __m256i p16 = _mm256_maddubs_epi16(k_group(qs, qh, is5, g), av);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_set1_epi16(sc[g])));
        }
        /* M = sum_g mn[g] * (bsums[2g] + bsums[2g+1]): group sums fit int16 (|.| <= 4064) */
        const __m128i gs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a[i].bsums),
                                          _mm_loadu_si128((const __m128i *)(a[i].bsums + 8)));
        __m128i m4 = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn)), gs);
        m4 = _mm_add_epi32(m4, _mm_shuffle_epi32(m4, 0x4e));
        m4 = _mm_add_epi32(m4, _mm_shuffle_epi32(m4, 0xb1));
        const int32_t M = _mm_cvtsi128_si32(m4);
        const int32_t P = hsum_i32(sumi);
        acc = acc + (f16c(b) * a[i].d) * (float)P;
        accm = accm + (f16c(b + 2) * a[i].d) * (float)M;
    }
    return acc - accm;
}

static inline float dot_f32_q45k(const void *w, const float *x, int64_t k, int is5)
{
    const size_t bs = is5 ? 176 : 144;
    const uint8_t *b = w;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (int64_t i = 0; i < k / TQ_QKK; i++, b += bs, x += TQ_QKK) {
        const float d = f16c(b);
        const float dmin = f16c(b + 2);
        const uint8_t *qs = b + (is5 ? 48 : 16);
        const __m256i qh = is5 ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
        for (int g = 0; g < 8; g++) {
            int sc, mn;
            scale_min_k4(g, b + 4, &sc, &mn);
            const float d1 = d * (float)sc;
            fma_block_k(k_group(qs, qh, is5, g), d1, d1, dmin * (float)mn, 1, x + 32 * g, acc);
        }
    }
    return finish_f32(acc);
}

static float dot_q8_q4_k(const void *w, const void *act, int64_t k)
{
    return dot_q8_q45k(w, act, k, 0);
}
static float dot_q8_q5_k(const void *w, const void *act, int64_t k)
{
    return dot_q8_q45k(w, act, k, 1);
}
static float dot_f32_q4_k(const void *w, const float *x, int64_t k)
{
    return dot_f32_q45k(w, x, k, 0);
}
static float dot_f32_q5_k(const void *w, const float *x, int64_t k)
{
    return dot_f32_q45k(w, x, k, 1);
}

static float dot_q8_q6_k(const void *w, const void *act, int64_t k)
{
    const tq_q8k *a = act;
    const uint8_t *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < k / TQ_QKK; i++, b += 210) {
        const int8_t *sc = (const int8_t *)(b + 192);
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 8; c++) {
            const __m256i av = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * c));
            /* (q - 32) * a in pairs: |.| <= 2 * 32 * 127, no int16 saturation */
            const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q6_chunk(b, c), av),
                                                 _mm256_maddubs_epi16(_mm256_set1_epi8(32), av));
            const __m256i s16 = _mm256_set_m128i(_mm_set1_epi16(sc[2 * c + 1]),
                                                 _mm_set1_epi16(sc[2 * c]));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, s16));
        }
        acc = acc + (f16c(b + 208) * a[i].d) * (float)hsum_i32(sumi);
    }
    return acc;
}

static float dot_f32_q6_k(const void *w, const float *x, int64_t k)
{
    const uint8_t *b = w;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (int64_t i = 0; i < k / TQ_QKK; i++, b += 210, x += TQ_QKK) {
        const int8_t *sc = (const int8_t *)(b + 192);
        const float d = f16c(b + 208);
        for (int c = 0; c < 8; c++) {
            const __m256i q = _mm256_sub_epi8(q6_chunk(b, c), _mm256_set1_epi8(32));
            fma_block_k(q, d * (float)sc[2 * c], d * (float)sc[2 * c + 1], 0.0f, 0, x + 32 * c,
                        acc);
        }
    }
    return finish_f32(acc);
}

/* 4 int32 vectors (one per token, 8 lanes) -> their 4 sums. */
static inline __m128i kt_hsum4(__m256i y0, __m256i y1, __m256i y2, __m256i y3)
{
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(y0, y1), _mm256_hadd_epi32(y2, y3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* one super-block of one row into the K tiles' accumulators, the same f32 steps in the AVX512
 * and AVX2 tiles (lane = token, up to 8): acc += d * da * P, accm += dmin * da * M (Q4_K/Q5_K
 * only) */
/* 8 tokens' int32 vectors -> their 8 sums (the first T; T <= 4 leaves lanes 4-7 zero) */
static inline __attribute__((always_inline)) __m256i kt_hsum8(const __m256i *v, int T)
{
    const __m128i lo = kt_hsum4(v[0], v[1], v[2], v[3]);
    const __m128i hi = T > 4 ? kt_hsum4(v[4], v[5], v[6], v[7]) : _mm_setzero_si128();
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

static inline __attribute__((always_inline)) void kt_accumulate8(__m256 *acc, __m256 *accm,
                                                                 const __m256i *yv,
                                                                 const __m256i *mv,
                                                                 const uint8_t *b, int q6,
                                                                 __m256 da, int T)
{
    const __m256 P = _mm256_cvtepi32_ps(kt_hsum8(yv, T));
    const __m256 d = _mm256_set1_ps(f16c(b + (q6 ? 208 : 0)));
    *acc = _mm256_add_ps(*acc, _mm256_mul_ps(_mm256_mul_ps(d, da), P));
    if (!q6) {
        const __m256 M = _mm256_cvtepi32_ps(kt_hsum8(mv, T));
        const __m256 dm = _mm256_set1_ps(f16c(b + 2));
        *accm = _mm256_add_ps(*accm, _mm256_mul_ps(_mm256_mul_ps(dm, da), M));
    }
}

#ifdef QDOT_VNNI
/* ---- AVX512 tiles of the K formats (R rows x T tokens; T = 1 is the decode matvec) ----------
 * The super-block integers P and M of qdot.h are exact int32 sums, so any order gives them:
 * per 64 elements (two 32-groups) vpmaddubsw (unsigned weight x signed activation, pairs; no
 * int16 saturation: 63 * 127 * 2 < 2^15) and vpdpwssd with the 16-element scales as words
 * into one zmm per (row, token); Q6_K's weights are taken unsigned (q, not q - 32) and
 * 32 * sum_s sc[s] * bsums[s] is subtracted. Then the f32 steps of qdot.h, lane = token:
 * acc += (d * d_a) * (float)P, accm += (dmin * d_a) * (float)M, result acc - accm. */
enum { KT_R = 4, KT_T = 4, KT_T8 = 8 };

/* The 64 weights of group pair j (elements 64j .. 64j+63) of a super-block as unsigned bytes. */
static inline __attribute__((always_inline)) __m512i kt_q(int F, const uint8_t *b, int j)
{
    if (F == TQ_GGML_Q6_K) {
        const __m512i l = _mm512_loadu_si512((const void *)(b + 64 * (j / 2)));
        const __m512i lo = _mm512_and_si512(j & 1 ? _mm512_srli_epi16(l, 4) : l,
                                            _mm512_set1_epi8(0x0f));
        const __m256i h = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * (j / 2)));
        const int s = 4 * (j & 1);
        __m512i hv = _mm512_inserti64x4(_mm512_castsi256_si512(h), h, 1);
        hv = _mm512_srlv_epi16(hv, _mm512_inserti64x4(_mm512_set1_epi16((short)s),
                                                      _mm256_set1_epi16((short)(s + 2)), 1));
        hv = _mm512_and_si512(hv, _mm512_set1_epi8(3));
        return _mm512_or_si512(lo, _mm512_slli_epi16(hv, 4));
    }
    const int is5 = F == TQ_GGML_Q5_K;
    const __m256i v = _mm256_loadu_si256((const __m256i *)(b + (is5 ? 48 : 16) + 32 * j));
    __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
    q = _mm512_and_si512(q, _mm512_set1_epi8(0x0f));
    if (is5) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)(b + 16));
        __m512i hv = _mm512_inserti64x4(_mm512_castsi256_si512(h), h, 1);
        hv = _mm512_srlv_epi16(hv, _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * j)),
                                                      _mm256_set1_epi16((short)(2 * j + 1)), 1));
        hv = _mm512_and_si512(hv, _mm512_set1_epi8(1));
        q = _mm512_or_si512(q, _mm512_slli_epi16(hv, 4));
    }
    return q;
}

static inline __attribute__((always_inline)) void
kt_tile(int F, int R, int T, const uint8_t *w, size_t row_bytes, int64_t nsb,
        const tq_q8k *const *at, float *y, int64_t ldy)
{
    const int q6 = F == TQ_GGML_Q6_K;
    const size_t bs = q6 ? 210 : F == TQ_GGML_Q5_K ? 176 : 144;
    __m256 acc[KT_R], accm[KT_R];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r] = accm[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        float dav[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        __m128i gs[KT_T8]; /* Q4_K/Q5_K: the 8 group sums of each token (words) */
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)
        {
            dav[t] = at[t][i].d;
            gs[t] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)at[t][i].bsums),
                                   _mm_loadu_si128((const __m128i *)(at[t][i].bsums + 8)));
        }
        const __m256 da = _mm256_loadu_ps(dav);
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
        {
            const uint8_t *b = w + (size_t)r * row_bytes + (size_t)i * bs;
            __m512i sw[4];  /* the scale of each 16 elements of group pair j, as 32 words */
            __m256i sc16;   /* Q6_K: the 16 scales as words */
            __m128i mn = _mm_setzero_si128();
            if (q6) {
                sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
                const __m512i z = _mm512_castsi256_si512(sc16);
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
                    sw[j] = _mm512_permutexvar_epi16(
                        _mm512_inserti64x4(
                            _mm512_inserti64x4(_mm512_setzero_si512(),
                                               _mm256_set_m128i(_mm_set1_epi16((short)(4 * j + 1)),
                                                                _mm_set1_epi16((short)(4 * j))),
                                               0),
                            _mm256_set_m128i(_mm_set1_epi16((short)(4 * j + 3)),
                                             _mm_set1_epi16((short)(4 * j + 2))),
                            1),
                        z);
            } else {
                /* scales_mins_k4's words in one xmm (scales: bytes 0-7, mins: 8-15); each
                 * group pair's scale words by one vpermw (was 8 broadcasts from memory and 4
                 * inserts per super-block: Q4_K n = 512 prefill tile -7%, qdot_bench) */
                uint32_t u[3];
                memcpy(u, b + 4, 12);
                const __m128i v = _mm_setr_epi32(
                    (int)(u[0] & 0x3f3f3f3fu),
                    (int)((u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4)),
                    (int)(u[1] & 0x3f3f3f3fu),
                    (int)(((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4)));
                const __m512i z = _mm512_castsi128_si512(_mm_cvtepu8_epi16(v));
                sc16 = _mm256_setzero_si256();
                mn = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(v, v));
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
                    sw[j] = _mm512_permutexvar_epi16(
                        _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * j)),
                                           _mm256_set1_epi16((short)(2 * j + 1)), 1),
                        z);
            }
            __m512i p[KT_T8];
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) p[t] = _mm512_setzero_si512();
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
            {
                const __m512i q = kt_q(F, b, j);
                _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)
                {
                    const __m512i av = _mm512_loadu_si512((const void *)(at[t][i].qs + 64 * j));
                    p[t] = _mm512_dpwssd_epi32(p[t], _mm512_maddubs_epi16(q, av), sw[j]);
                }
            }
            __m256i yv[KT_T8], mv[KT_T8];
            _Pragma("GCC unroll 8") for (int t = 0; t < KT_T8; t++)
            {
                if (t < T) {
                    yv[t] = _mm256_add_epi32(_mm512_castsi512_si256(p[t]),
                                             _mm512_extracti64x4_epi64(p[t], 1));
                    if (q6) {
                        const __m256i c = _mm256_madd_epi16(
                            sc16, _mm256_loadu_si256((const __m256i *)at[t][i].bsums));
                        yv[t] = _mm256_sub_epi32(yv[t], _mm256_slli_epi32(c, 5));
                        mv[t] = _mm256_setzero_si256();
                    } else {
                        mv[t] = _mm256_castsi128_si256(_mm_madd_epi16(mn, gs[t]));
                        mv[t] = _mm256_inserti128_si256(mv[t], _mm_setzero_si128(), 1);
                    }
                } else {
                    yv[t] = mv[t] = _mm256_setzero_si256();
                }
            }
            kt_accumulate8(&acc[r], &accm[r], yv, mv, b, q6, da, T);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
    {
        float v[8];
        _mm256_storeu_ps(v, q6 ? acc[r] : _mm256_sub_ps(acc[r], accm[r]));
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) y[t * ldy + r] = v[t];
    }
}

#else
/* ---- AVX2 tiles of the K formats: as the AVX512 ones, per 32 elements vpmaddubsw + vpmaddwd
 * with the scale words + vpaddd into one ymm per (row, token); 2 rows x 4 tokens (x 8 from
 * 16 tokens: kt_run). ------------------------------------------------------------------- */
enum { KT_R = 2, KT_T = 4, KT_T8 = 8 };

static inline __attribute__((always_inline)) void
kt_tile(int F, int R, int T, const uint8_t *w, size_t row_bytes, int64_t nsb,
        const tq_q8k *const *at, float *y, int64_t ldy)
{
    const int q6 = F == TQ_GGML_Q6_K;
    const int is5 = F == TQ_GGML_Q5_K;
    const size_t bs = q6 ? 210 : is5 ? 176 : 144;
    __m256 acc[KT_R], accm[KT_R];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r] = accm[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        float dav[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        __m128i gs[KT_T8];
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)
        {
            dav[t] = at[t][i].d;
            gs[t] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)at[t][i].bsums),
                                   _mm_loadu_si128((const __m128i *)(at[t][i].bsums + 8)));
        }
        const __m256 da = _mm256_loadu_ps(dav);
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
        {
            const uint8_t *b = w + (size_t)r * row_bytes + (size_t)i * bs;
            uint8_t sc[8], mb[8];
            __m128i mn = _mm_setzero_si128();
            __m256i sc16 = _mm256_setzero_si256();
            if (q6) {
                sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
            } else {
                scales_mins_k4(b + 4, sc, mb);
                mn = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mb));
            }
            const __m256i qh = is5 ? _mm256_loadu_si256((const __m256i *)(b + 16))
                                   : _mm256_setzero_si256();
            __m256i p[KT_T8];
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) p[t] = _mm256_setzero_si256();
            for (int g = 0; g < 8; g++) {
                __m256i q, sw;
                if (q6) {
                    const int8_t *s8 = (const int8_t *)(b + 192);
                    q = q6_chunk(b, g);
                    sw = _mm256_set_m128i(_mm_set1_epi16(s8[2 * g + 1]), _mm_set1_epi16(s8[2 * g]));
                } else {
                    q = k_group(b + (is5 ? 48 : 16), qh, is5, g);
                    sw = _mm256_set1_epi16(sc[g]);
                }
                _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)
                {
                    const __m256i av = _mm256_loadu_si256((const __m256i *)(at[t][i].qs + 32 * g));
                    p[t] = _mm256_add_epi32(p[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, av), sw));
                }
            }
            __m256i yv[KT_T8], mv[KT_T8];
            _Pragma("GCC unroll 8") for (int t = 0; t < KT_T8; t++)
            {
                if (t < T) {
                    yv[t] = p[t];
                    if (q6) {
                        const __m256i c = _mm256_madd_epi16(
                            sc16, _mm256_loadu_si256((const __m256i *)at[t][i].bsums));
                        yv[t] = _mm256_sub_epi32(yv[t], _mm256_slli_epi32(c, 5));
                        mv[t] = _mm256_setzero_si256();
                    } else {
                        mv[t] = _mm256_inserti128_si256(
                            _mm256_castsi128_si256(_mm_madd_epi16(mn, gs[t])), _mm_setzero_si128(), 1);
                    }
                } else {
                    yv[t] = mv[t] = _mm256_setzero_si256();
                }
            }
            kt_accumulate8(&acc[r], &accm[r], yv, mv, b, q6, da, T);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
    {
        float v[8];
        _mm256_storeu_ps(v, q6 ? acc[r] : _mm256_sub_ps(acc[r], accm[r]));
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) y[t * ldy + r] = v[t];
    }
}
#endif

typedef void (*kt_tile_fn)(const uint8_t *w, size_t row_bytes, int64_t nsb,
                           const tq_q8k *const *at, float *y, int64_t ldy);
#define KT_TILE_FN(F, R, T, name)                                                                \
    static void name(const uint8_t *w, size_t row_bytes, int64_t nsb, const tq_q8k *const *at,  \
                     float *y, int64_t ldy)                                                      \
    {                                                                                            \
        kt_tile(F, R, T, w, row_bytes, nsb, at, y, ldy);                                         \
    }

/* As qt_run, for the K formats; the tokens past the last full tile go through the dot. From 16
 * tokens (prefill) with 8-token tiles (fR8, f18; NULL: none) while 8 remain: a row's per
 * super-block work (scales, unpacking, the reductions) is then shared by 8 tokens instead of 4
 * (Gemma 3 Q4_K / Q6_K prefill tiles, same-run signal in docs/results.md). */
static inline void kt_run(kt_tile_fn fRT, kt_tile_fn f1T, kt_tile_fn fR8, kt_tile_fn f18,
                          tq_qdot_q8_fn dot, const void *w, size_t row_bytes, int64_t k,
                          const void *act, int64_t n, float *y, int64_t ldy, int64_t r0,
                          int64_t r1)
{
    const int64_t nsb = k / TQ_QKK;
    const int64_t chunk = qt_chunk_rows(row_bytes, n);
    const int64_t n8 = fR8 && n >= 16 ? n - n % 8 : 0; /* tokens in 8-token tiles */
    const int64_t nt = n8 + (n - n8) - (n - n8) % KT_T; /* ... and in tiles of KT_T */
    const tq_q8k *a = act;
    for (int64_t rc = r0; rc < r1; rc += chunk) {
        const int64_t re = rc + chunk < r1 ? rc + chunk : r1;
        for (int64_t t = 0; t < nt;) {
            const int T = t < n8 ? 8 : KT_T;
            const kt_tile_fn fR = T == 8 ? fR8 : fRT, f1 = T == 8 ? f18 : f1T;
            const tq_q8k *at[8];
            for (int q = 0; q < T; q++)
                at[q] = a + (t + q) * nsb;
            int64_t r = rc;
            for (; r + KT_R <= re; r += KT_R) {
                if (t == 0)
                    qt_prefetch((const uint8_t *)w + (size_t)r * row_bytes, KT_R * row_bytes);
                fR((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nsb, at,
                   y + t * ldy + r, ldy);
            }
            for (; r < re; r++)
                f1((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nsb, at,
                   y + t * ldy + r, ldy);
            t += T;
        }
        for (int64_t r = rc; r < re; r++) { /* the leftover tokens while the chunk is in cache */
            if (nt == 0) /* no tile read the chunk: prefetch as mvs does (decode, 1-3 tokens) */
                qt_prefetch((const uint8_t *)w + (size_t)r * row_bytes, row_bytes);
            for (int64_t t = nt; t < n; t++)
                y[t * ldy + r] = dot((const uint8_t *)w + (size_t)r * row_bytes, a + t * nsb, k);
        }
    }
}

#define KT_TILES8(F, name)                                                                       \
    KT_TILE_FN(F, KT_R, 8, kt_##name##_r8)                                                       \
    KT_TILE_FN(F, 1, 8, kt_##name##_18)
#define KT_F8(name) kt_##name##_r8, kt_##name##_18
#define KT_FORMAT(F, name)                                                                       \
    KT_TILE_FN(F, KT_R, KT_T, kt_##name##_rt)                                                    \
    KT_TILE_FN(F, 1, KT_T, kt_##name##_1t)                                                       \
    KT_TILES8(F, name)                                                                           \
    static void mv_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *act,        \
                             int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)           \
    {                                                                                            \
        kt_run(kt_##name##_rt, kt_##name##_1t, KT_F8(name), dot_q8_##name, w, row_bytes, k, act, \
               n, y, ldy, r0, r1);                                                               \
    }                                                                                            \
    DEFINE_MV_F32(name)
KT_FORMAT(TQ_GGML_Q4_K, q4_k)
KT_FORMAT(TQ_GGML_Q5_K, q5_k)
KT_FORMAT(TQ_GGML_Q6_K, q6_k)

#define QB_GEMM_ROWS                                                                             \
    .gemm_q8[TQ_GGML_Q8_0] = gemm_q8_q8_0, .gemm_q8[TQ_GGML_Q4_0] = gemm_q8_q4_0,                \
    .gemm_q8[TQ_GGML_Q4_1] = gemm_q8_q4_1, .gemm_q8[TQ_GGML_Q5_0] = gemm_q8_q5_0,                \
    .gemm_q8[TQ_GGML_Q5_1] = gemm_q8_q5_1,
#ifdef QDOT_VNNI
static const tq_qdot_kernels vnni_table = {
    .isa = "avx512vnni",
    .level = TQ_ISA_AVX512,
    .quant_q8a = quant_q8a,
    .quant_q8k = quant_q8k,
    QDOT_VNNI_FORMATS(TQ_QDOT_ROW)
    QB_GEMM_ROWS
};

const tq_qdot_kernels *tq_qdot_avx512_table(void)
{
    return &vnni_table;
}
#else
static const tq_qdot_kernels avx2_table = {
    .isa = "avx2",
    .level = TQ_ISA_AVX2,
    .quant_q8a = quant_q8a,
    .quant_q8k = quant_q8k,
    TQ_QDOT_FORMATS(TQ_QDOT_ROW)
    QB_GEMM_ROWS
};

const tq_qdot_kernels *tq_qdot_avx2_table(void)
{
    return &avx2_table;
}
#endif
