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

/* acc = fma(w . a of the block, d_w * d_a, acc); the min term goes to accm. */
#define BLOCK_Q8(UP, IP, HAS_MIN, acc, i)                                                        \
    do {                                                                                         \
        const uint8_t *bb = b + (size_t)(i) * BS;                                                \
        const __m256 p = IP(UP(bb), a[i].qs);                                                    \
        acc = _mm256_fmadd_ps(p, _mm256_set1_ps(f16c(bb) * a[i].d), acc);                        \
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
            acc[q][SLOT] = _mm256_fmadd_ps(p, _mm256_set1_ps(f16c(bb) * da), acc[q][SLOT]);       \
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
    static void mv1_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *act,       \
                              int64_t t0, int64_t n, float *y, int64_t ldy, int64_t r0,          \
                              int64_t r1)                                                        \
    {                                                                                            \
        enum { BS = BS_ };                                                                       \
        const int64_t nb = k / TQ_QK;                                                            \
        int64_t r = r0;                                                                          \
        for (; row_bytes >= 4096 && r + 4 <= r1; r += 4) {                                       \
            const uint8_t *b0 = (const uint8_t *)w + (size_t)r * row_bytes;                      \
            for (int64_t t = t0; t < n; t++) {                                                   \
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
            for (int64_t t = t0; t < n; t++)                                                     \
                y[t * ldy + r] = dot_q8_##name((const uint8_t *)w + (size_t)r * row_bytes,       \
                                               (const tq_q8a *)act + t * nb, k);                 \
    }                                                                                            \
    DEFINE_MVS(name, BS_, IP, HAS_MIN)                                                           \
    static void mv_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *act,        \
                             int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)           \
    {                                                                                            \
        const int64_t t0 = TILE_Q8(name, w, row_bytes, k, act, n, y, ldy, r0, r1);               \
        if (t0 < n)                                                                              \
            MV1_Q8(name, HAS_MIN)(w, row_bytes, k, act, t0, n, y, ldy, r0, r1);                  \
    }                                                                                            \
    DEFINE_MV_F32(name)

/* One token, one row at a time, with the block scales of the row converted 8 at a time first:
 * dd[i] = d_w(i) * d_a(i) and the min terms mw(i) * s_a(i) (the same f32 products as dot_q8's),
 * the min terms summed in block order (dot_q8's accm). The main loop then takes its scale by a
 * broadcast load. The 4 bytes at the start of each block (d, and m for Q4_1/Q5_1) come in by
 * one vpgatherdd per 8 blocks. Rows of more than MVS_MAXB blocks go through mv1. Callgrind,
 * AVX2 table, 1536 x 576, 1 token (instructions per block, mv1 -> mvs): Q4_1 24 -> 19, Q8_0
 * 19 -> 18, Q4_0 23 -> 21, Q5_0 29 -> 28; user CPU time of 150 matvecs of 49152 x 576 Q4_1
 * (loaded box, 3 interleaved runs): AVX2 0.49-0.50 -> 0.44-0.47 s, VNNI 0.46-0.48 -> 0.43-0.44 s.
 * Each row starts by prefetching the bytes QT_PF_BYTES ahead (qt_prefetch): AVX2 table, 40
 * matvecs of 262144 x 576 (94 MB of Q4_1, from DRAM), user CPU s, 3 interleaved runs: Q4_1
 * 0.64-0.67 -> 0.36-0.47, Q8_0 0.76-0.77 -> 0.60-0.65; 1536 x 576 (cached) unchanged. */
enum { MVS_MAXB = 512 };
static inline void mvs_scales(const uint8_t *row, int bs, int has_min, int64_t nb,
                              const float *da, const float *sa, float *dd, float *accm_out)
{
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32(bs));
    /* bytes 0-1 of each dword (d) to the low 8 bytes of each 128-bit lane, 2-3 (m) to the high */
    const __m256i sh = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1,
                                        4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    float accm = 0.0f;
    int64_t j = 0;
    for (; j + 8 <= nb; j += 8) {
        const __m256i v = _mm256_i32gather_epi32((const int *)(row + (size_t)j * bs), idx, 1);
        const __m256i p = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, sh), 0xd8);
        const __m256 d = _mm256_cvtph_ps(_mm256_castsi256_si128(p));
        _mm256_storeu_ps(dd + j, _mm256_mul_ps(d, _mm256_loadu_ps(da + j)));
        if (has_min) {
            float mm[8];
            const __m256 m = _mm256_cvtph_ps(_mm256_extracti128_si256(p, 1));
            _mm256_storeu_ps(mm, _mm256_mul_ps(m, _mm256_loadu_ps(sa + j)));
            for (int q = 0; q < 8; q++)
                accm = accm + mm[q];
        }
    }
    for (; j < nb; j++) {
        const uint8_t *b = row + (size_t)j * bs;
        dd[j] = f16c(b) * da[j];
        if (has_min)
            accm = accm + f16c(b + 2) * sa[j];
    }
    *accm_out = accm;
}

#define MVS_BLOCK(UP, IP, acc, i)                                                                \
    acc = _mm256_fmadd_ps(IP(UP(b + (size_t)(i) * BS), a[i].qs), _mm256_broadcast_ss(dd + (i)),  \
                          acc)

#define DEFINE_MVS(name, BS_, IP, HAS_MIN)                                                       \
    static void mvs_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *act,       \
                              int64_t t0, int64_t n, float *y, int64_t ldy, int64_t r0,          \
                              int64_t r1)                                                        \
    {                                                                                            \
        enum { BS = BS_ };                                                                       \
        const int64_t nb = k / TQ_QK;                                                            \
        if (nb > MVS_MAXB) {                                                                     \
            mv1_q8_##name(w, row_bytes, k, act, t0, n, y, ldy, r0, r1);                          \
            return;                                                                              \
        }                                                                                        \
        float da[MVS_MAXB], sa[MVS_MAXB], dd[MVS_MAXB];                                          \
        for (int64_t t = t0; t < n; t++) {                                                       \
            const tq_q8a *a = (const tq_q8a *)act + t * nb;                                      \
            for (int64_t i = 0; i < nb; i++) {                                                   \
                da[i] = a[i].d;                                                                  \
                sa[i] = a[i].s;                                                                  \
            }                                                                                    \
            for (int64_t r = r0; r < r1; r++) {                                                  \
                const uint8_t *b = (const uint8_t *)w + (size_t)r * row_bytes;                   \
                qt_prefetch(b, row_bytes);                                                       \
                float accm;                                                                      \
                mvs_scales(b, BS, HAS_MIN, nb, da, sa, dd, &accm);                               \
                __m256 acc0 = _mm256_setzero_ps();                                               \
                __m256 acc1 = _mm256_setzero_ps();                                               \
                int64_t i = 0;                                                                   \
                for (; i + 1 < nb; i += 2) {                                                     \
                    MVS_BLOCK(up_##name, IP, acc0, i);                                           \
                    MVS_BLOCK(up_##name, IP, acc1, i + 1);                                       \
                }                                                                                \
                if (i < nb)                                                                      \
                    MVS_BLOCK(up_##name, IP, acc0, i);                                           \
                y[t * ldy + r] = hsum8(_mm256_add_ps(acc0, acc1)) + (HAS_MIN ? accm : 0.0f);     \
            }                                                                                    \
        }                                                                                        \
    }

/* ---- GEMM tiles of the 32-formats (prefill and batched decode; issue 14) --------------------
 * A tile = R rows x T tokens: each weight block is decoded once and met with the T tokens'
 * activations; each (row, token) keeps its own accumulators with exactly dot_q8's operation
 * sequence (acc[block & 1] lanes, fma by d_w * d_a, the min term in block order, H() at the end),
 * so the tile's result equals the per-token dot bit for bit (tests/test_qdot.c): batch
 * invariance holds whatever n is. Rows are walked in chunks of about 32 KB of weights, so a
 * chunk stays in L1/L2 while all token tiles pass over it; below 16 tokens (batched decode) a
 * chunk is one row tile, so the weights' DRAM stream meets every token tile's work. */
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

#ifdef QDOT_VNNI
/* AVX512-VNNI: one zmm per (row, token) holds both of dot_q8's accumulators: lanes 0-7 the even
 * blocks' acc[0], lanes 8-15 the odd blocks' acc[1]; a step takes blocks i and i+1 at once.
 * vpdpbusd multiplies unsigned by signed bytes. Q4_1/Q5_1 (unsigned weights): vpdpbusd(0, w, a).
 * Signed formats (Q8_0, Q4_0, Q5_0): the activation goes unsigned, a + 128 (a ^ 0x80, once per
 * token), and vpdpbusd(-(128 . w), a + 128, w) (the correction once per row) is the exact int32
 * sum of w * a over each 4 elements (no saturation: |.| < 2^17), the lane l of dot_q8's p.
 * Same-run A/B (qdot_bench -n 64, 2048 x 640 Q5_0): the first version, with the offset on the
 * weight side, kept 6 of the 16 accumulators in memory (33 live zmm). */
enum { QT_R = 4, QT_T = 4 };

static inline int qt_signed(int F)
{
    return F == TQ_GGML_Q8_0 || F == TQ_GGML_Q4_0 || F == TQ_GGML_Q5_0;
}

/* The weight integers of the blocks at p0 and p1 (p1 = p0 for a lone last block), 64 bytes
 * (signed for qt_signed formats). */
static inline __attribute__((always_inline)) __m512i qt_up2(int F, const uint8_t *p0,
                                                            const uint8_t *p1)
{
    if (F == TQ_GGML_Q8_0) {
        return _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p0 + 2))),
            _mm256_loadu_si256((const __m256i *)(p1 + 2)), 1);
    }
    const int qo = F == TQ_GGML_Q4_0 ? 2 : F == TQ_GGML_Q4_1 ? 4 : F == TQ_GGML_Q5_0 ? 6 : 8;
    const __m256i h = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p0 + qo))),
        _mm_loadu_si128((const __m128i *)(p1 + qo)), 1);
    /* 128-bit lanes: p0 p0 p1 p1; shift the second copy of each by 4: low | high nibbles */
    __m512i v = _mm512_shuffle_i64x2(_mm512_castsi256_si512(h), _mm512_castsi256_si512(h), 0x50);
    v = _mm512_and_si512(
        _mm512_srlv_epi32(v, _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4)),
        _mm512_set1_epi8(0x0f));
    if (F == TQ_GGML_Q5_0 || F == TQ_GGML_Q5_1) {
        const int ho = F == TQ_GGML_Q5_0 ? 2 : 4;
        const __mmask64 m = (__mmask64)rd32(p0 + ho) | ((__mmask64)rd32(p1 + ho) << 32);
        v = _mm512_mask_add_epi8(v, m, v, _mm512_set1_epi8(16));
    }
    if (F == TQ_GGML_Q4_0)
        v = _mm512_sub_epi8(v, _mm512_set1_epi8(8));
    if (F == TQ_GGML_Q5_0)
        v = _mm512_sub_epi8(v, _mm512_set1_epi8(16));
    return v;
}

/* The f16 pairs at p0 and p1 of the R rows (row r: w + r * row_bytes; rows >= R repeat row
 * 0) as f32 lanes 4r..4r+3: p0[0..1], p0[2..3], p1[0..1], p1[2..3] (the scale d and, for Q4_1 /
 * Q5_1, the min m of both blocks; other bytes are converted and never read). One conversion
 * for the 4 rows instead of 3 per row. */
static inline __attribute__((always_inline)) __m512 qt_scales(int R, const uint8_t *w,
                                                              size_t row_bytes, size_t o0,
                                                              size_t o1)
{
    const uint8_t *q[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) q[r] = w + (size_t)(r < R ? r : 0) * row_bytes;
    const __m128i x01 = _mm_setr_epi32((int)rd32(q[0] + o0), (int)rd32(q[0] + o1),
                                       (int)rd32(q[1] + o0), (int)rd32(q[1] + o1));
    const __m128i x23 = _mm_setr_epi32((int)rd32(q[2] + o0), (int)rd32(q[2] + o1),
                                       (int)rd32(q[3] + o0), (int)rd32(q[3] + o1));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(x01), x23, 1));
}

/* One step over blocks i and i1 (i1 = i + 1, or i for a lone last block: TWO = 0, only lanes
 * 0-7 change) of R rows x T tokens. The min terms of Q4_1/Q5_1 of all R rows x 4 tokens live
 * in one zmm (lane 4r + t), each lane with dot_q8's accm sequence. */
static inline __attribute__((always_inline)) void
qt_step(int F, int R, int T, int TWO, const uint8_t *w, size_t row_bytes, size_t bs,
        const tq_q8a *const *at, int64_t i, int64_t i1, __m512 (*acc)[QT_T], __m512 *accm)
{
    const int sgn = qt_signed(F);
    const int has_min = F == TQ_GGML_Q4_1 || F == TQ_GGML_Q5_1;
    __m512i a[QT_T];
    __m512 da[QT_T];
    _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)
    {
        a[t] = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)at[t][i].qs)),
            _mm256_loadu_si256((const __m256i *)at[t][i1].qs), 1);
        da[t] = _mm512_insertf32x8(_mm512_set1_ps(at[t][i].d), _mm256_set1_ps(at[t][i1].d), 1);
        if (sgn)
            a[t] = _mm512_xor_si512(a[t], _mm512_set1_epi8((char)0x80));
    }
    const __m512 sc = qt_scales(R, w, row_bytes, (size_t)i * bs, (size_t)i1 * bs);
    if (has_min) {
        const __m128 s0 = _mm_setr_ps(at[0][i].s, at[T > 1][i].s, at[T > 2 ? 2 : 0][i].s,
                                      at[T > 3 ? 3 : 0][i].s);
        *accm = _mm512_add_ps(*accm, _mm512_mul_ps(_mm512_permute_ps(sc, 0x55),
                                                   _mm512_broadcast_f32x4(s0)));
        if (TWO) {
            const __m128 s1 = _mm_setr_ps(at[0][i1].s, at[T > 1][i1].s, at[T > 2 ? 2 : 0][i1].s,
                                          at[T > 3 ? 3 : 0][i1].s);
            *accm = _mm512_add_ps(*accm, _mm512_mul_ps(_mm512_permute_ps(sc, 0xff),
                                                       _mm512_broadcast_f32x4(s1)));
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
    {
        const uint8_t *p0 = w + (size_t)r * row_bytes + (size_t)i * bs;
        const uint8_t *p1 = w + (size_t)r * row_bytes + (size_t)i1 * bs;
        /* the next row tile's bytes at this step, as the step reads them (see qt_prefetch) */
        _mm_prefetch((const char *)p0 + (size_t)QT_R * row_bytes, _MM_HINT_T0);
        _mm_prefetch((const char *)p1 + bs - 1 + (size_t)QT_R * row_bytes, _MM_HINT_T0);
        const __m512i u = qt_up2(F, p0, p1);
        /* lanes 0-7: d of block i (lane 4r), 8-15: d of block i1 (lane 4r + 2) */
        const __m512 dw = _mm512_permutexvar_ps(
            _mm512_add_epi32(_mm512_set1_epi32(4 * r),
                             _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2)),
            sc);
        const __m512i c = sgn ? _mm512_sub_epi32(_mm512_setzero_si512(),
                                                 _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                                                     _mm512_set1_epi8((char)0x80), u))
                              : _mm512_setzero_si512();
        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)
        {
            const __m512 p = _mm512_cvtepi32_ps(sgn ? _mm512_dpbusd_epi32(c, a[t], u)
                                                    : _mm512_dpbusd_epi32(c, u, a[t]));
            const __m512 dd = _mm512_mul_ps(dw, da[t]);
            acc[r][t] = TWO ? _mm512_fmadd_ps(p, dd, acc[r][t])
                            : _mm512_mask3_fmadd_ps(p, dd, acc[r][t], 0x00ff);
        }
    }
}

/* R rows (from w) x T tokens (at[t]) -> y[t * ldy + r]. */
static inline __attribute__((always_inline)) void
qt_tile(int F, int R, int T, const uint8_t *w, size_t row_bytes, int64_t nb,
        const tq_q8a *const *at, float *y, int64_t ldy)
{
    const size_t bs = F == TQ_GGML_Q8_0 ? 34 : F == TQ_GGML_Q4_0 ? 18 : F == TQ_GGML_Q4_1 ? 20
                    : F == TQ_GGML_Q5_0 ? 22 : 24;
    __m512 acc[QT_R][QT_T];
    __m512 accm = _mm512_setzero_ps();
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
    {
        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 1 < nb; i += 2)
        qt_step(F, R, T, 1, w, row_bytes, bs, at, i, i + 1, acc, &accm);
    if (i < nb)
        qt_step(F, R, T, 0, w, row_bytes, bs, at, i, i, acc, &accm);
    float m[16];
    _mm512_storeu_ps(m, accm);
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
    {
        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)
        {
            const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(acc[r][t]),
                                           _mm512_extractf32x8_ps(acc[r][t], 1));
            y[t * ldy + r] = hsum8(v) + m[4 * r + t];
        }
    }
}

#define QT_TILE_FN(F, R, T, name)                                                                \
    static void name(const uint8_t *w, size_t row_bytes, int64_t nb, const tq_q8a *const *at,   \
                     float *y, int64_t ldy)                                                      \
    {                                                                                            \
        qt_tile(F, R, T, w, row_bytes, nb, at, y, ldy);                                          \
    }
typedef void (*qt_tile_fn)(const uint8_t *w, size_t row_bytes, int64_t nb,
                           const tq_q8a *const *at, float *y, int64_t ldy);
/* Every token of every row: chunks of rows, token tiles of QT_T (the last one of n % QT_T
 * tokens, inside the same chunk, so its weights come from cache), row tiles of QT_R (then 1).
 * f[R == 1][T - 1] is the R x T tile. Returns n. */
static inline int64_t qt_run(const qt_tile_fn (*f)[QT_T], const void *w, size_t row_bytes,
                             int64_t k, const void *act, int64_t n, float *y, int64_t ldy,
                             int64_t r0, int64_t r1)
{
    const int64_t nb = k / TQ_QK;
    const int64_t chunk = qt_chunk_rows(row_bytes, n);
    const tq_q8a *a = act;
    for (int64_t rc = r0; rc < r1; rc += chunk) {
        const int64_t re = rc + chunk < r1 ? rc + chunk : r1;
        for (int64_t t = 0; t < n; t += QT_T) {
            const int T = n - t < QT_T ? (int)(n - t) : QT_T;
            const tq_q8a *at[QT_T];
            for (int q = 0; q < QT_T; q++)
                at[q] = a + (t + (q < T ? q : 0)) * nb;
            int64_t r = rc;
            for (; r + QT_R <= re; r += QT_R) {
                f[0][T - 1]((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nb, at,
                            y + t * ldy + r, ldy);
            }
            for (; r < re; r++)
                f[1][T - 1]((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nb, at,
                            y + t * ldy + r, ldy);
        }
    }
    return n;
}
/* The batched-decode tile of 8 tokens (8 <= n < 16: tq serve's 8-sequence step). The 8
 * tokens' activations are prepacked once per call, per block pair: the two blocks' 64 bytes
 * (+ 128 for the signed formats), the two scales as one zmm, the two s of the 8 tokens; a step
 * then reads them as memory operands instead of rebuilding them for every row tile. A tile is
 * Q8_R = 3 rows x 8 tokens (24 accumulators), so a weight block pair is unpacked once for the 8
 * tokens instead of twice. Each (row, token) zmm is qt_step's (lanes 0-7 acc[0], 8-15 acc[1],
 * the same fma), and the min terms are dot_q8's accm sequence per lane (8r + t): the scalar
 * bits. The prepack is on the stack (Q8_PK_MAXP pairs: k <= 2048, 34 KB); a longer row goes
 * through qt_run. Rows go in chunks of Q8_RC: the tokens past 8 then meet the chunk's
 * weights from cache (qt_run's tiles), no second DRAM pass. */
enum { Q8_T = 8, Q8_R = 3, Q8_RC = 12, Q8_PK_MAXP = 32 };
typedef struct q8_pk {
    __m512i q[Q8_T]; /* blocks i | i1 of token t (a ^ 0x80 for the signed formats) */
    __m512 d[Q8_T];  /* d_a of block i (lanes 0-7) | i1 (8-15)                      */
    float s[2][Q8_T]; /* s of block i, i1 per token                                 */
} q8_pk;

static void q8_prepack(int sgn, const tq_q8a *a, int64_t nb, q8_pk *pk)
{
    for (int64_t j = 0; 2 * j < nb; j++) {
        const int64_t i = 2 * j, i1 = i + 1 < nb ? i + 1 : i;
        for (int t = 0; t < Q8_T; t++) {
            const tq_q8a *at = a + t * nb;
            __m512i q = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)at[i].qs)),
                _mm256_loadu_si256((const __m256i *)at[i1].qs), 1);
            if (sgn)
                q = _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80));
            pk[j].q[t] = q;
            pk[j].d[t] = _mm512_insertf32x8(_mm512_set1_ps(at[i].d), _mm256_set1_ps(at[i1].d), 1);
            pk[j].s[0][t] = at[i].s;
            pk[j].s[1][t] = at[i1].s;
        }
    }
}

static inline __attribute__((always_inline)) void
q8_step(int F, int R, int TWO, const uint8_t *w, size_t row_bytes, size_t bs, const q8_pk *pk,
        int64_t i, int64_t i1, __m512 (*acc)[Q8_T], __m512 *accm)
{
    const int sgn = qt_signed(F);
    const int has_min = F == TQ_GGML_Q4_1 || F == TQ_GGML_Q5_1;
    const __m512 sc = qt_scales(R, w, row_bytes, (size_t)i * bs, (size_t)i1 * bs);
    if (has_min) {
        /* accm[0] lanes 8r + t: rows 0, 1; accm[1] lanes t: row 2 (lanes 8-15 unread) */
        const __m512 s0 = _mm512_broadcast_f32x8(_mm256_loadu_ps(pk->s[0]));
        const __m512i m01 = _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 5, 5, 5, 5, 5, 5, 5, 5);
        const __m512i m2 = _mm512_set1_epi32(9);
        accm[0] = _mm512_add_ps(accm[0], _mm512_mul_ps(_mm512_permutexvar_ps(m01, sc), s0));
        if (R > 2)
            accm[1] = _mm512_add_ps(accm[1], _mm512_mul_ps(_mm512_permutexvar_ps(m2, sc), s0));
        if (TWO) {
            const __m512 s1 = _mm512_broadcast_f32x8(_mm256_loadu_ps(pk->s[1]));
            const __m512i two = _mm512_set1_epi32(2);
            accm[0] = _mm512_add_ps(
                accm[0],
                _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_add_epi32(m01, two), sc), s1));
            if (R > 2)
                accm[1] = _mm512_add_ps(
                    accm[1],
                    _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_add_epi32(m2, two), sc), s1));
        }
    }
    _Pragma("GCC unroll 3") for (int r = 0; r < R; r++)
    {
        const uint8_t *p0 = w + (size_t)r * row_bytes + (size_t)i * bs;
        const uint8_t *p1 = w + (size_t)r * row_bytes + (size_t)i1 * bs;
        /* the next row tile's bytes at this step (see qt_step) */
        _mm_prefetch((const char *)p0 + (size_t)R * row_bytes, _MM_HINT_T0);
        _mm_prefetch((const char *)p1 + bs - 1 + (size_t)R * row_bytes, _MM_HINT_T0);
        const __m512i u = qt_up2(F, p0, p1);
        const __m512 dw = _mm512_permutexvar_ps(
            _mm512_add_epi32(_mm512_set1_epi32(4 * r),
                             _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2)),
            sc);
        const __m512i c = sgn ? _mm512_sub_epi32(_mm512_setzero_si512(),
                                                 _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                                                     _mm512_set1_epi8((char)0x80), u))
                              : _mm512_setzero_si512();
        _Pragma("GCC unroll 8") for (int t = 0; t < Q8_T; t++)
        {
            const __m512 p = _mm512_cvtepi32_ps(sgn ? _mm512_dpbusd_epi32(c, pk->q[t], u)
                                                    : _mm512_dpbusd_epi32(c, u, pk->q[t]));
            const __m512 dd = _mm512_mul_ps(dw, pk->d[t]);
            acc[r][t] = TWO ? _mm512_fmadd_ps(p, dd, acc[r][t])
                            : _mm512_mask3_fmadd_ps(p, dd, acc[r][t], 0x00ff);
        }
    }
}

/* R rows (from w) x the 8 prepacked tokens -> y[t * ldy + r]. */
static inline __attribute__((always_inline)) void q8_tile(int F, int R, const uint8_t *w,
                                                          size_t row_bytes, int64_t nb,
                                                          const q8_pk *pk, float *y, int64_t ldy)
{
    const size_t bs = F == TQ_GGML_Q8_0 ? 34 : F == TQ_GGML_Q4_0 ? 18 : F == TQ_GGML_Q4_1 ? 20
                    : F == TQ_GGML_Q5_0 ? 22 : 24;
    __m512 acc[Q8_R][Q8_T];
    __m512 accm[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    _Pragma("GCC unroll 3") for (int r = 0; r < R; r++)
    {
        _Pragma("GCC unroll 8") for (int t = 0; t < Q8_T; t++) acc[r][t] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 1 < nb; i += 2)
        q8_step(F, R, 1, w, row_bytes, bs, pk + i / 2, i, i + 1, acc, accm);
    if (i < nb)
        q8_step(F, R, 0, w, row_bytes, bs, pk + i / 2, i, i, acc, accm);
    float m[32];
    _mm512_storeu_ps(m, accm[0]);
    _mm512_storeu_ps(m + 16, accm[1]);
    _Pragma("GCC unroll 3") for (int r = 0; r < R; r++)
    {
        _Pragma("GCC unroll 8") for (int t = 0; t < Q8_T; t++)
        {
            const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(acc[r][t]),
                                           _mm512_extractf32x8_ps(acc[r][t], 1));
            y[t * ldy + r] = hsum8(v) + m[8 * r + t];
        }
    }
}

#define Q8_TILE_FN(F, R, name)                                                                   \
    static void name(const uint8_t *w, size_t row_bytes, int64_t nb, const q8_pk *pk, float *y,  \
                     int64_t ldy)                                                                \
    {                                                                                            \
        q8_tile(F, R, w, row_bytes, nb, pk, y, ldy);                                             \
    }
typedef void (*q8_tile_fn)(const uint8_t *w, size_t row_bytes, int64_t nb, const q8_pk *pk,
                           float *y, int64_t ldy);
/* n >= 8 tokens, k <= 64 * Q8_PK_MAXP: the 8-token tiles (f8[0]: Q8_R rows, f8[1]: 1 row) for
 * the tokens in whole 8s, qt_run's tiles (f) for the rest, all in the same chunk of rows. Below
 * 16 tokens (batched decode) a chunk is Q8_RC rows and the 8 tokens are prepacked once; from 16
 * (prefill: the unsigned formats, which gemm_q8 does not take) a chunk is about QT_CHUNK_BYTES
 * of weights, which stays in cache while every 8-token tile (prepacked per chunk) passes. */
static inline int64_t q8_run(int sgn, const q8_tile_fn *f8, const qt_tile_fn (*f)[QT_T],
                             const void *w, size_t row_bytes, int64_t k, const void *act,
                             int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    const int64_t nb = k / TQ_QK;
    const int64_t n8 = n - n % Q8_T;
    int64_t chunk = Q8_RC;
    if (n >= 16) {
        chunk = (int64_t)(QT_CHUNK_BYTES / row_bytes) / Q8_RC * Q8_RC;
        chunk = chunk < Q8_RC ? Q8_RC : chunk;
    }
    const tq_q8a *a = act;
    q8_pk pk[Q8_PK_MAXP];
    if (n8 == Q8_T)
        q8_prepack(sgn, a, nb, pk);
    for (int64_t rc = r0; rc < r1; rc += chunk) {
        const int64_t re = rc + chunk < r1 ? rc + chunk : r1;
        int64_t r;
        for (int64_t t = 0; t < n8; t += Q8_T) {
            if (n8 > Q8_T)
                q8_prepack(sgn, a + t * nb, nb, pk);
            float *yt = y + t * ldy;
            for (r = rc; r + Q8_R <= re; r += Q8_R)
                f8[0]((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nb, pk, yt + r, ldy);
            for (; r < re; r++)
                f8[1]((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nb, pk, yt + r, ldy);
        }
        for (int64_t t = n8; t < n; t += QT_T) {
            const int T = n - t < QT_T ? (int)(n - t) : QT_T;
            const tq_q8a *at[QT_T];
            for (int q = 0; q < QT_T; q++)
                at[q] = a + (t + (q < T ? q : 0)) * nb;
            r = rc;
            for (; r + QT_R <= re; r += QT_R)
                f[0][T - 1]((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nb, at,
                            y + t * ldy + r, ldy);
            for (; r < re; r++)
                f[1][T - 1]((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nb, at,
                            y + t * ldy + r, ldy);
        }
    }
    return n;
}
#define QT_FORMAT(F, name)                                                                       \
    QT_TILE_FN(F, QT_R, 1, qt_##name##_r1)                                                       \
    QT_TILE_FN(F, QT_R, 2, qt_##name##_r2)                                                       \
    QT_TILE_FN(F, QT_R, 3, qt_##name##_r3)                                                       \
    QT_TILE_FN(F, QT_R, 4, qt_##name##_r4)                                                       \
    QT_TILE_FN(F, 1, 1, qt_##name##_11)                                                          \
    QT_TILE_FN(F, 1, 2, qt_##name##_12)                                                          \
    QT_TILE_FN(F, 1, 3, qt_##name##_13)                                                          \
    QT_TILE_FN(F, 1, 4, qt_##name##_14)                                                          \
    Q8_TILE_FN(F, Q8_R, q8_##name##_r)                                                           \
    Q8_TILE_FN(F, 1, q8_##name##_1)                                                              \
    static int64_t tile_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *act,   \
                                  int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)      \
    {                                                                                            \
        static const qt_tile_fn f[2][QT_T] = {                                                   \
            {qt_##name##_r1, qt_##name##_r2, qt_##name##_r3, qt_##name##_r4},                    \
            {qt_##name##_11, qt_##name##_12, qt_##name##_13, qt_##name##_14}};                   \
        static const q8_tile_fn f8[2] = {q8_##name##_r, q8_##name##_1};                          \
        if (n >= Q8_T && k <= 64 * Q8_PK_MAXP && (n < 16 || !qt_signed(F)))                      \
            return q8_run(qt_signed(F), f8, f, w, row_bytes, k, act, n, y, ldy, r0, r1);         \
        return qt_run(f, w, row_bytes, k, act, n, y, ldy, r0, r1);                               \
    }
QT_FORMAT(TQ_GGML_Q8_0, q8_0)
QT_FORMAT(TQ_GGML_Q4_0, q4_0)
QT_FORMAT(TQ_GGML_Q4_1, q4_1)
QT_FORMAT(TQ_GGML_Q5_0, q5_0)
QT_FORMAT(TQ_GGML_Q5_1, q5_1)
/* prefill (n >= 16) of Q4_0 / Q5_0: the packed-activation tile of qdot_qp512.h. Q8_0 keeps
 * qt_run: its row unpacking is one xor, and under the fma spec the packed tile was 2-6% slower
 * for it (qdot_bench -n 512, 2048 x 576 and 1536 x 640, 1 thread, two rounds; Q4_0 -13..-15%,
 * Q5_0 -16..-17% there) */
#include "cpu/qdot_qp512.h"
QP_FORMAT(TQ_GGML_Q4_0, q4_0)
QP_FORMAT(TQ_GGML_Q5_0, q5_0)
#endif
/* AVX2: a tile is 1 row x 4 tokens (8 ymm accumulators: acc[token][block & 1]); the block is
 * unpacked (and its scale converted) once for the 4 tokens. Tokens past the last full tile go
 * through mv1 (the same bits). */
enum { QT2_T = 4 };
#define QT2_STEP(UP, IP, HAS_MIN, SLOT, i)                                                       \
    do {                                                                                         \
        const uint8_t *bb = wr + (size_t)(i) * BS;                                               \
        const __m256i wv = UP(bb);                                                               \
        const float dw = f16c(bb);                                                               \
        const float mw = HAS_MIN ? f16c(bb + 2) : 0.0f;                                          \
        _Pragma("GCC unroll 4") for (int q = 0; q < QT2_T; q++)                                   \
        {                                                                                        \
            const __m256 p = IP(wv, at[q][i].qs);                                                \
            acc[q][SLOT] = _mm256_fmadd_ps(p, _mm256_set1_ps(dw * at[q][i].d), acc[q][SLOT]);     \
            if (HAS_MIN)                                                                         \
                accm[q] = accm[q] + mw * at[q][i].s;                                             \
        }                                                                                        \
    } while (0)
/* Prefill (n >= 16) of the signed formats (no min term): 1 row x 8 tokens in two passes over the
 * row, the even blocks (acc[0] of dot_q8, 8 accumulators), then the odd ones (acc[1]); each
 * accumulator's sequence is dot_q8's, and v = acc[0] + acc[1] as there. A row's unpacking is
 * then shared by 8 tokens instead of 4 within 16 ymm registers. */
#define QT8_PASS(UP, IP, P0)                                                                     \
    do {                                                                                         \
        _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) acc8[q] = _mm256_setzero_ps();       \
        for (int64_t i = (P0); i < nb; i += 2) {                                                 \
            const uint8_t *bb = wr + (size_t)i * BS;                                             \
            const __m256i wv = UP(bb);                                                           \
            const float dw = f16c(bb);                                                           \
            _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) acc8[q] = _mm256_fmadd_ps(       \
                IP(wv, at8[q][i].qs), _mm256_set1_ps(dw * at8[q][i].d), acc8[q]);               \
        }                                                                                        \
    } while (0)
#define QT2_FORMAT(name, BS_, IP, HAS_MIN)                                                       \
    static int64_t tile2_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *act,  \
                                   int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)     \
    {                                                                                            \
        enum { BS = BS_ };                                                                       \
        const int64_t nb = k / TQ_QK;                                                            \
        const int64_t chunk = qt_chunk_rows(row_bytes, n);                                          \
        const int64_t n8 = !(HAS_MIN) && n >= 16 ? n - n % 8 : 0; /* tokens in 8-tiles */        \
        const int64_t nt = n8 + (n - n8) - (n - n8) % QT2_T;                                     \
        for (int64_t rc = r0; rc < r1; rc += chunk) {                                            \
            const int64_t re = rc + chunk < r1 ? rc + chunk : r1;                                \
            for (int64_t t = 0; t < n8; t += 8) {                                                \
                const tq_q8a *at8[8];                                                            \
                for (int q = 0; q < 8; q++)                                                      \
                    at8[q] = (const tq_q8a *)act + (t + q) * nb;                                 \
                for (int64_t r = rc; r < re; r++) {                                              \
                    const uint8_t *wr = (const uint8_t *)w + (size_t)r * row_bytes;              \
                    if (t == 0)                                                                  \
                        qt_prefetch(wr, row_bytes);                                              \
                    __m256 acc8[8], even[8];                                                     \
                    QT8_PASS(up_##name, IP, 0);                                                  \
                    _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) even[q] = acc8[q];       \
                    QT8_PASS(up_##name, IP, 1);                                                  \
                    _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++)                          \
                        y[(t + q) * ldy + r] = hsum8(_mm256_add_ps(even[q], acc8[q]));           \
                }                                                                                \
            }                                                                                    \
            for (int64_t t = n8; t < nt; t += QT2_T) {                                            \
                const tq_q8a *at[QT2_T];                                                          \
                for (int q = 0; q < QT2_T; q++)                                                   \
                    at[q] = (const tq_q8a *)act + (t + q) * nb;                                  \
                for (int64_t r = rc; r < re; r++) {                                              \
                    const uint8_t *wr = (const uint8_t *)w + (size_t)r * row_bytes;              \
                    qt_prefetch(wr, row_bytes);                                                  \
                    __m256 acc[QT2_T][2];                                                         \
                    float accm[QT2_T];                                                            \
                    _Pragma("GCC unroll 4") for (int q = 0; q < QT2_T; q++)                       \
                    {                                                                            \
                        acc[q][0] = acc[q][1] = _mm256_setzero_ps();                             \
                        accm[q] = 0.0f;                                                          \
                    }                                                                            \
                    int64_t i = 0;                                                               \
                    for (; i + 1 < nb; i += 2) {                                                 \
                        QT2_STEP(up_##name, IP, HAS_MIN, 0, i);                                  \
                        QT2_STEP(up_##name, IP, HAS_MIN, 1, i + 1);                              \
                    }                                                                            \
                    if (i < nb)                                                                  \
                        QT2_STEP(up_##name, IP, HAS_MIN, 0, i);                                  \
                    _Pragma("GCC unroll 4") for (int q = 0; q < QT2_T; q++)                       \
                        y[(t + q) * ldy + r] =                                                   \
                            hsum8(_mm256_add_ps(acc[q][0], acc[q][1])) + accm[q];                \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        return nt;                                                                               \
    }
QT2_FORMAT(q8_0, 34, ip_signed, 0)
QT2_FORMAT(q4_0, 18, ip_signed, 0)
QT2_FORMAT(q4_1, 20, ip_unsigned, 1)
QT2_FORMAT(q5_0, 22, ip_signed, 0)
QT2_FORMAT(q5_1, 24, ip_unsigned, 1)
#ifdef QDOT_VNNI
/* The VNNI build has both tiles (the ymm one with vpdpbusd as its int8 dot). On the 2-vCPU
 * EPYC of the first version (its 512-bit ops split in two) the ymm tile was faster for batched
 * decode (-n 8, 65536 x 640 Q8_0 zmm 3.14 vs ymm 4.30 GB/s). On this Intel Xeon (512-bit
 * units) the zmm tile wins from 2 tokens on, with its n % 4 leftover tokens in the same row
 * chunk (weights from cache) instead of mv1's second pass over the weights: qdot_bench thread
 * CPU us, 1 thread, load 6, ymm+mv1 vs zmm: -n 2 1536 x 576 Q8_0 66 vs 48, 49152 x 576 Q8_0
 * 5456 vs 3331, Q4_1 4528 vs 2609; -n 3 Q4_1 5335 vs 3163; -n 5 Q8_0 8890 vs 5495; -n 8
 * 1536 x 576 Q8_0 190 vs 142, Q4_1 230 vs 200. Either gives the same bits. */
/* One token too since the zmm tile prefetches the next row tile step by step: batch_bench
 * SmolLM2 Q4_1 2 threads, 1-sequence step 9.2 -> 4.3 ms (the dot path waited on DRAM; the
 * 2-token tile was already faster than it). The ymm tile (and mv1) remain for the non-VNNI
 * build. */
#define TILE_Q8(name, w, rb, k, act, n, ...)                                                     \
    ((n) >= 1 ? tile_q8_##name(w, rb, k, act, n, __VA_ARGS__)                                    \
              : tile2_q8_##name(w, rb, k, act, n, __VA_ARGS__))
/* (the tokens the tile leaves: none, since every n >= 1 goes to the tile) */
#define MV1_Q8(name, HAS_MIN) mvs_q8_##name
#else
#define TILE_Q8(name, ...) tile2_q8_##name(__VA_ARGS__)
#define MV1_Q8(name, HAS_MIN) mvs_q8_##name
#endif

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

#ifdef QDOT_VNNI
static const tq_qdot_kernels vnni_table = {
    .isa = "avx512vnni",
    .level = TQ_ISA_AVX512,
    .quant_q8a = quant_q8a,
    .quant_q8k = quant_q8k,
    QDOT_VNNI_FORMATS(TQ_QDOT_ROW)
    .gemm_q8[TQ_GGML_Q4_0] = gemm_q8_q4_0,
    .gemm_q8[TQ_GGML_Q5_0] = gemm_q8_q5_0,
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
