/* qdot_avx2.c -- AVX2 + FMA + F16C versions of the qdot.h kernels. Each gives the scalar
 * reference's bits (qdot.c) for finite data: the weight and activation integers meet in
 * vpmaddubsw + vpmaddwd, whose int32 lane l is exactly the reference's p of lane l (elements
 * 4l..4l+3; no int16 saturation: |w| <= 128, |qs| <= 127, so a pair is <= 32512); the f32
 * combination is the reference's, lane for lane (mul then add on the q8 path, vfmadd on the f32
 * path), and H() is the same tree. K formats: the super-block integers P and M are exact int32
 * sums in any order, then the same f32 steps. Block scales are converted by F16C (exact for
 * non-NaN). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/qdot.h"

static inline float f16c(const uint8_t *p)
{
    return _cvtsh_ss((unsigned short)(p[0] | (p[1] << 8)));
}

/* H(v) of qdot.h: ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)). */
static inline float hsum8(__m256 v)
{
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(t);
}

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

/* int32 lane l = sum of elements 4l..4l+3 of w * a, as f32 (exact: |sum| < 2^17). */
#ifdef QDOT_VNNI
/* qdot_avx512vnni.c: vpdpbusd (AVX512-VNNI, 256-bit) gives the same exact int32 lanes in one op */
static inline __m256 ip_signed(__m256i w, const int8_t *qs)
{
    const __m256i a = _mm256_loadu_si256((const __m256i *)qs);
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(),
                                                  _mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w)));
}
static inline __m256 ip_unsigned(__m256i w, const int8_t *qs)
{
    const __m256i a = _mm256_loadu_si256((const __m256i *)qs);
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), w, a));
}
#else
static inline __m256 ip_signed(__m256i w, const int8_t *qs)
{
    const __m256i a = _mm256_loadu_si256((const __m256i *)qs);
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}
static inline __m256 ip_unsigned(__m256i w, const int8_t *qs)
{
    const __m256i a = _mm256_loadu_si256((const __m256i *)qs);
    const __m256i p16 = _mm256_maddubs_epi16(w, a);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}
#endif

/* acc += (w . a of the block) * (d_w * d_a); the min term goes to accm. */
#define BLOCK_Q8(UP, IP, HAS_MIN, acc, i)                                                        \
    do {                                                                                         \
        const uint8_t *bb = b + (size_t)(i) * BS;                                                \
        const __m256 p = IP(UP(bb), a[i].qs);                                                    \
        acc = _mm256_add_ps(acc, _mm256_mul_ps(p, _mm256_set1_ps(f16c(bb) * a[i].d)));           \
        if (HAS_MIN)                                                                             \
            accm = accm + f16c(bb + 2) * a[i].s;                                                 \
    } while (0)

/* 32 int8 -> acc[g] = fmadd(d * q (+ m), x, acc[g]) for the 4 groups of 8. */
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

#define DEFINE_FORMAT(name, BS_, IP, HAS_MIN)                                                    \
    static float dot_q8_##name(const void *w, const void *act, int64_t k)                        \
    {                                                                                            \
        enum { BS = BS_ };                                                                       \
        const tq_q8a *a = act;                                                                   \
        const uint8_t *b = w;                                                                    \
        const int64_t nb = k / TQ_QK;                                                            \
        __m256 acc0 = _mm256_setzero_ps();                                                       \
        __m256 acc1 = _mm256_setzero_ps();                                                       \
        float accm = 0.0f;                                                                       \
        int64_t i = 0;                                                                           \
        for (; i + 1 < nb; i += 2) {                                                             \
            BLOCK_Q8(up_##name, IP, HAS_MIN, acc0, i);                                           \
            BLOCK_Q8(up_##name, IP, HAS_MIN, acc1, i + 1);                                       \
        }                                                                                        \
        if (i < nb)                                                                              \
            BLOCK_Q8(up_##name, IP, HAS_MIN, acc0, i);                                           \
        return hsum8(_mm256_add_ps(acc0, acc1)) + accm;                                          \
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
    DEFINE_MV4(name, BS_, IP, HAS_MIN)

#define DEFINE_MV(name, ATYPE, ABLK)                                                             \
    static void mv_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *a,          \
                             int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)           \
    {                                                                                            \
        const size_t ab = (size_t)(k / ABLK) * sizeof(ATYPE);                                    \
        for (int64_t r = r0; r < r1; r++)                                                        \
            for (int64_t t = 0; t < n; t++)                                                      \
                y[t * ldy + r] = dot_q8_##name((const uint8_t *)w + (size_t)r * row_bytes,       \
                                               (const uint8_t *)a + (size_t)t * ab, k);          \
    }                                                                                            \
    DEFINE_MV_F32(name)

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

/* Block i of 4 rows (b0 + q * row_bytes) into acc[q][SLOT]; SLOT is a constant and the row loop
 * is unrolled, so the 8 accumulators stay in registers. */
#define ROWS4_Q8(UP, IP, HAS_MIN, SLOT, i)                                                       \
    do {                                                                                         \
        const float da = at[i].d;                                                                \
        const float sa = at[i].s;                                                                \
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++)                                      \
        {                                                                                        \
            const uint8_t *bb = b0 + (size_t)q * row_bytes + (size_t)(i) * BS;                   \
            const __m256 p = IP(UP(bb), at[i].qs);                                               \
            acc[q][SLOT] =                                                                       \
                _mm256_add_ps(acc[q][SLOT], _mm256_mul_ps(p, _mm256_set1_ps(f16c(bb) * da)));    \
            if (HAS_MIN)                                                                         \
                accm[q] = accm[q] + f16c(bb + 2) * sa;                                           \
        }                                                                                        \
    } while (0)

/* The 32-formats' matvec: rows of >= 4096 bytes go 4 at a time (4 weight streams, one
 * activation read), each row with exactly dot_q8_##name's operation sequence (so the choice
 * changes no bit); shorter rows and the leftovers go through dot_q8_##name one at a time.
 * Same-run A/B on the 2-vCPU EPYC, thread CPU time, 1 token, weights not in cache: 4096 x
 * 14336 (Q4_0 rows of 8064 B) 1-row vs 4-row Q8_0 9.5 vs 6.4 ms, Q4_0 6.4 vs 5.9, Q4_1 6.4
 * vs 5.5; but 2048 x 2048 (1152 B rows) Q4_0 0.43 vs 0.73 ms and 576 x 1536 0.13 vs 0.25 ms:
 * short interleaved streams defeat the prefetcher, one sequential stream does not. Without
 * the unroll pragma GCC kept acc[][] in memory (3x slower). */
#define DEFINE_MV4(name, BS_, IP, HAS_MIN)                                                       \
    static void mv_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *act,        \
                             int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)           \
    {                                                                                            \
        enum { BS = BS_ };                                                                       \
        const int64_t nb = k / TQ_QK;                                                            \
        int64_t r = r0;                                                                          \
        for (; row_bytes >= 4096 && r + 4 <= r1; r += 4) {                                       \
            const uint8_t *b0 = (const uint8_t *)w + (size_t)r * row_bytes;                      \
            for (int64_t t = 0; t < n; t++) {                                                    \
                const tq_q8a *at = (const tq_q8a *)act + t * nb;                                 \
                __m256 acc[4][2];                                                                \
                float accm[4] = {0.0f, 0.0f, 0.0f, 0.0f};                                        \
                _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++)                              \
                    acc[q][0] = acc[q][1] = _mm256_setzero_ps();                                 \
                int64_t i = 0;                                                                   \
                for (; i + 1 < nb; i += 2) {                                                     \
                    ROWS4_Q8(up_##name, IP, HAS_MIN, 0, i);                                      \
                    ROWS4_Q8(up_##name, IP, HAS_MIN, 1, i + 1);                                  \
                }                                                                                \
                if (i < nb)                                                                      \
                    ROWS4_Q8(up_##name, IP, HAS_MIN, 0, i);                                      \
                _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++)                              \
                    y[t * ldy + r + q] = hsum8(_mm256_add_ps(acc[q][0], acc[q][1])) + accm[q];   \
            }                                                                                    \
        }                                                                                        \
        for (; r < r1; r++)                                                                      \
            for (int64_t t = 0; t < n; t++)                                                      \
                y[t * ldy + r] = dot_q8_##name((const uint8_t *)w + (size_t)r * row_bytes,       \
                                               (const tq_q8a *)act + t * nb, k);                 \
    }                                                                                            \
    DEFINE_MV_F32(name)

DEFINE_FORMAT(q8_0, 34, ip_signed, 0)
DEFINE_FORMAT(q4_0, 18, ip_signed, 0)
DEFINE_FORMAT(q4_1, 20, ip_unsigned, 1)
DEFINE_FORMAT(q5_0, 22, ip_signed, 0)
DEFINE_FORMAT(q5_1, 24, ip_unsigned, 1)

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

DEFINE_MV(q4_k, tq_q8k, TQ_QKK)
DEFINE_MV(q5_k, tq_q8k, TQ_QKK)
DEFINE_MV(q6_k, tq_q8k, TQ_QKK)

#ifdef QDOT_VNNI
static const tq_qdot_kernels vnni_table = {
    .isa = "avx512vnni",
    .level = TQ_ISA_AVX512,
    .quant_q8a = quant_q8a,
    .quant_q8k = quant_q8k,
    QDOT_VNNI_FORMATS(TQ_QDOT_ROW)
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
};

const tq_qdot_kernels *tq_qdot_avx2_table(void)
{
    return &avx2_table;
}
#endif
