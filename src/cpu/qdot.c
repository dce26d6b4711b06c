/* qdot.c -- scalar reference kernels of qdot.h (the specification) and the table lookup.
 * No intrinsics; the library builds this with -ffp-contract=off, so every a*b+c below is a
 * rounded multiply then a rounded add, except the explicit fmaf() calls (the f32 path, and the
 * per-block chain of the 32-formats' q8 path). */
#include <math.h>

#include "core/half.h"
#include "cpu/qdot.h"

static inline float f16(const uint8_t *p)
{
    return tq_f16_to_f32(tq_rd16(p));
}

/* ---- the activation quantizer -------------------------------------------------------------- */
static void quant_q8a(const float *x, void *act, int64_t k)
{
    tq_q8a *a = act;
    for (int64_t b = 0; b < k / TQ_QK; b++, x += TQ_QK, a++) {
        float amax = 0.0f;
        for (int j = 0; j < TQ_QK; j++) {
            const float v = fabsf(x[j]);
            amax = v > amax ? v : amax; /* a NaN never wins: amax stays finite-or-inf */
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < TQ_QK; j++) {
            const float v = fminf(fmaxf(x[j] * id, -127.0f), 127.0f); /* NaN -> -127 */
            const int q = (int)nearbyintf(v);
            a->qs[j] = (int8_t)q;
            sum += q;
        }
        a->d = d;
        a->s = d * (float)sum;
    }
}

/* The tq_q8a rule over 256 values, plus the 16-value sums. */
static void quant_q8k(const float *x, void *act, int64_t k)
{
    tq_q8k *a = act;
    for (int64_t b = 0; b < k / TQ_QKK; b++, x += TQ_QKK, a++) {
        float amax = 0.0f;
        for (int j = 0; j < TQ_QKK; j++) {
            const float v = fabsf(x[j]);
            amax = v > amax ? v : amax;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < TQ_QKK; j++) {
            const float v = fminf(fmaxf(x[j] * id, -127.0f), 127.0f);
            a->qs[j] = (int8_t)(int)nearbyintf(v);
        }
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++)
                sum += a->qs[16 * g + j];
            a->bsums[g] = (int16_t)sum;
        }
        a->d = d;
    }
}

/* ---- block unpacking: the weight integers of one block ------------------------------------ */
/* Every unpacker writes wq[32] in element order and returns the byte size of the block; *d and
 * *m get the f16 scale and min (m = 0 for the signed formats). */
static void unpack_nibbles(const uint8_t *qs, int off, int8_t *wq)
{
    for (int j = 0; j < 16; j++) {
        wq[j] = (int8_t)((qs[j] & 0x0f) - off);
        wq[j + 16] = (int8_t)((qs[j] >> 4) - off);
    }
}

static void unpack_qh(uint32_t qh, int off, int8_t *wq)
{
    /* wq holds the unsigned nibble; add the 5th bit, then the offset */
    for (int j = 0; j < 32; j++)
        wq[j] = (int8_t)(wq[j] + (int)(((qh >> j) & 1u) << 4) - off);
}

static void up_q8_0(const uint8_t *b, int8_t *wq, float *d, float *m)
{
    *d = f16(b);
    *m = 0.0f;
    for (int j = 0; j < 32; j++)
        wq[j] = (int8_t)b[2 + j];
}

static void up_q4_0(const uint8_t *b, int8_t *wq, float *d, float *m)
{
    *d = f16(b);
    *m = 0.0f;
    unpack_nibbles(b + 2, 8, wq);
}

static void up_q4_1(const uint8_t *b, int8_t *wq, float *d, float *m)
{
    *d = f16(b);
    *m = f16(b + 2);
    unpack_nibbles(b + 4, 0, wq);
}

static void up_q5_0(const uint8_t *b, int8_t *wq, float *d, float *m)
{
    *d = f16(b);
    *m = 0.0f;
    unpack_nibbles(b + 6, 0, wq);
    unpack_qh(tq_rd32(b + 2), 16, wq);
}

static void up_q5_1(const uint8_t *b, int8_t *wq, float *d, float *m)
{
    *d = f16(b);
    *m = f16(b + 2);
    unpack_nibbles(b + 8, 0, wq);
    unpack_qh(tq_rd32(b + 4), 0, wq);
}

typedef void (*unpack_fn)(const uint8_t *b, int8_t *wq, float *d, float *m);

/* ---- the two dots, generic over the unpacker ----------------------------------------------- */
static inline float dot_q8(unpack_fn up, size_t bsize, int has_min, const void *w,
                           const void *act, int64_t k)
{
    const tq_q8a *a = act;
    const uint8_t *b = w;
    float acc = 0.0f;
    float accm = 0.0f;
    for (int64_t i = 0; i < k / TQ_QK; i++, b += bsize) {
        int8_t wq[32];
        float d, m;
        up(b, wq, &d, &m);
        int32_t p = 0;
        for (int j = 0; j < 32; j++)
            p += (int32_t)wq[j] * (int32_t)a[i].qs[j];
        acc = fmaf((float)p, d * a[i].d, acc);
        if (has_min)
            accm = accm + m * a[i].s;
    }
    return acc + accm;
}

static inline float dot_f32(unpack_fn up, size_t bsize, int has_min, const void *w,
                            const float *x, int64_t k)
{
    const uint8_t *b = w;
    float acc[32] = {0};
    for (int64_t i = 0; i < k / TQ_QK; i++, b += bsize, x += TQ_QK) {
        int8_t wq[32];
        float d, m;
        up(b, wq, &d, &m);
        for (int j = 0; j < 32; j++) {
            /* the dequantizer's value: d * q (Q8_0 writes q * d: the same product), + m */
            const float wj = has_min ? d * (float)wq[j] + m : d * (float)wq[j];
            acc[j] = fmaf(wj, x[j], acc[j]);
        }
    }
    float v[8];
    for (int l = 0; l < 8; l++)
        v[l] = (acc[l] + acc[8 + l]) + (acc[16 + l] + acc[24 + l]);
    return tq_qdot_h8(v);
}

#define DEFINE_FORMAT(name, bsize, has_min)                                                      \
    static float dot_q8_##name(const void *w, const void *a, int64_t k)                          \
    {                                                                                            \
        return dot_q8(up_##name, bsize, has_min, w, a, k);                                       \
    }                                                                                            \
    static float dot_f32_##name(const void *w, const float *x, int64_t k)                        \
    {                                                                                            \
        return dot_f32(up_##name, bsize, has_min, w, x, k);                                      \
    }                                                                                            \
    static void mv_q8_##name(const void *w, size_t row_bytes, int64_t k, const void *a,          \
                             int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)           \
    {                                                                                            \
        const size_t ab = (size_t)(k / ABLK) * sizeof(ATYPE);                                    \
        for (int64_t r = r0; r < r1; r++)                                                        \
            for (int64_t t = 0; t < n; t++)                                                      \
                y[t * ldy + r] = dot_q8_##name((const uint8_t *)w + (size_t)r * row_bytes,       \
                                               (const uint8_t *)a + (size_t)t * ab, k);          \
    }                                                                                            \
    static void mv_f32_##name(const void *w, size_t row_bytes, int64_t k, const float *x,        \
                              int64_t ldx, int64_t n, float *y, int64_t ldy, int64_t r0,         \
                              int64_t r1)                                                        \
    {                                                                                            \
        for (int64_t r = r0; r < r1; r++)                                                        \
            for (int64_t t = 0; t < n; t++)                                                      \
                y[t * ldy + r] =                                                                 \
                    dot_f32_##name((const uint8_t *)w + (size_t)r * row_bytes, x + t * ldx, k);  \
    }

#define ABLK TQ_QK
#define ATYPE tq_q8a
DEFINE_FORMAT(q8_0, 34, 0)
DEFINE_FORMAT(q4_0, 18, 0)
DEFINE_FORMAT(q4_1, 20, 1)
DEFINE_FORMAT(q5_0, 22, 0)
DEFINE_FORMAT(q5_1, 24, 1)
#undef ABLK
#undef ATYPE

/* ---- K formats ----------------------------------------------------------------------------- */
/* 6-bit scale and min of group g (0..7) from the 12 packed bytes of Q4_K/Q5_K. */
static void scale_min_k4(int g, const uint8_t *q, int *sc, int *m)
{
    if (g < 4) {
        *sc = q[g] & 63;
        *m = q[g + 4] & 63;
    } else {
        *sc = (q[g + 4] & 0x0f) | ((q[g - 4] >> 6) << 4);
        *m = (q[g + 4] >> 4) | ((q[g] >> 6) << 4);
    }
}

/* One super-block: wq[256], the integer scale of each 16 elements, the min of each 32 (0 for
 * Q6_K), d and dmin. */
typedef void (*unpack_k_fn)(const uint8_t *b, int *wq, int *sc16, int *min32, float *d,
                            float *dmin);

static void up_q4_k(const uint8_t *b, int *wq, int *sc16, int *min32, float *d, float *dmin)
{
    *d = f16(b);
    *dmin = f16(b + 2);
    for (int g = 0; g < 8; g++) {
        int s, m;
        scale_min_k4(g, b + 4, &s, &m);
        sc16[2 * g] = sc16[2 * g + 1] = s;
        min32[g] = m;
        const uint8_t *q = b + 16 + 32 * (g / 2);
        for (int l = 0; l < 32; l++)
            wq[32 * g + l] = (q[l] >> (4 * (g & 1))) & 0x0f;
    }
}

static void up_q5_k(const uint8_t *b, int *wq, int *sc16, int *min32, float *d, float *dmin)
{
    *d = f16(b);
    *dmin = f16(b + 2);
    for (int g = 0; g < 8; g++) {
        int s, m;
        scale_min_k4(g, b + 4, &s, &m);
        sc16[2 * g] = sc16[2 * g + 1] = s;
        min32[g] = m;
        const uint8_t *qh = b + 16;
        const uint8_t *q = b + 48 + 32 * (g / 2);
        for (int l = 0; l < 32; l++)
            wq[32 * g + l] = ((q[l] >> (4 * (g & 1))) & 0x0f) | (((qh[l] >> g) & 1) << 4);
    }
}

static void up_q6_k(const uint8_t *b, int *wq, int *sc16, int *min32, float *d, float *dmin)
{
    const uint8_t *ql = b;
    const uint8_t *qh = b + 128;
    *d = f16(b + 208);
    *dmin = 0.0f;
    for (int s = 0; s < 16; s++)
        sc16[s] = (int8_t)b[192 + s];
    for (int g = 0; g < 8; g++)
        min32[g] = 0;
    for (int e = 0; e < TQ_QKK; e++) {
        const int h = e / 128;
        const int kk = (e % 128) / 32;
        const int l = e % 32;
        const int lo = (ql[64 * h + 32 * (kk & 1) + l] >> (4 * (kk >> 1))) & 0x0f;
        const int hi = (qh[32 * h + l] >> (2 * kk)) & 3;
        wq[e] = (lo | (hi << 4)) - 32;
    }
}

static inline float dot_q8k(unpack_k_fn up, size_t bsize, int has_min, const void *w,
                            const void *act, int64_t k)
{
    const tq_q8k *a = act;
    const uint8_t *b = w;
    float acc = 0.0f;
    float accm = 0.0f;
    for (int64_t i = 0; i < k / TQ_QKK; i++, b += bsize) {
        int wq[TQ_QKK], sc16[16], min32[8];
        float d, dmin;
        up(b, wq, sc16, min32, &d, &dmin);
        int32_t P = 0;
        int32_t M = 0;
        for (int e = 0; e < TQ_QKK; e++)
            P += sc16[e / 16] * wq[e] * (int32_t)a[i].qs[e];
        for (int g = 0; g < 8; g++)
            M += min32[g] * ((int32_t)a[i].bsums[2 * g] + a[i].bsums[2 * g + 1]);
        acc = acc + (d * a[i].d) * (float)P;
        if (has_min)
            accm = accm + (dmin * a[i].d) * (float)M;
    }
    return acc - accm;
}

static inline float dot_f32k(unpack_k_fn up, size_t bsize, int has_min, const void *w,
                             const float *x, int64_t k)
{
    const uint8_t *b = w;
    float acc[32] = {0};
    for (int64_t i = 0; i < k / TQ_QKK; i++, b += bsize, x += TQ_QKK) {
        int wq[TQ_QKK], sc16[16], min32[8];
        float d, dmin;
        up(b, wq, sc16, min32, &d, &dmin);
        for (int e = 0; e < TQ_QKK; e++) {
            const float ds = d * (float)sc16[e / 16];
            const float wj = has_min ? ds * (float)wq[e] - dmin * (float)min32[e / 32]
                                     : ds * (float)wq[e];
            acc[e % 32] = fmaf(wj, x[e], acc[e % 32]);
        }
    }
    float v[8];
    for (int l = 0; l < 8; l++)
        v[l] = (acc[l] + acc[8 + l]) + (acc[16 + l] + acc[24 + l]);
    return tq_qdot_h8(v);
}

#define dot_q8 dot_q8k
#define dot_f32 dot_f32k
#define ABLK TQ_QKK
#define ATYPE tq_q8k
DEFINE_FORMAT(q4_k, 144, 1)
DEFINE_FORMAT(q5_k, 176, 1)
DEFINE_FORMAT(q6_k, 210, 0)
#undef dot_q8
#undef dot_f32
#undef ABLK
#undef ATYPE

static const tq_qdot_kernels scalar_table = {
    .isa = "scalar",
    .level = TQ_ISA_SCALAR,
    .quant_q8a = quant_q8a,
    .quant_q8k = quant_q8k,
    TQ_QDOT_FORMATS(TQ_QDOT_ROW)
};

int64_t tq_qdot_act_block(int type)
{
    if (type < 0 || type >= TQ_FMT_LIMIT || !scalar_table.dot_q8[type])
        return 0;
    return scalar_table.quant[type] == quant_q8k ? TQ_QKK : TQ_QK;
}

size_t tq_qdot_act_bytes(int type, int64_t k)
{
    const int64_t blk = tq_qdot_act_block(type);
    if (!blk || k < 0 || k % blk)
        return 0;
    return (size_t)(k / blk) * (blk == TQ_QKK ? sizeof(tq_q8k) : sizeof(tq_q8a));
}

int64_t tq_q8p_count(int64_t k, int64_t n)
{
    return k > 0 && k % TQ_QK == 0 && n > 0 ? (n + TQ_Q8P_T - 1) / TQ_Q8P_T * (k / TQ_QK) : 0;
}

void tq_q8p_pack(const tq_q8a *a, int64_t nb, tq_q8p *p, int lane)
{
    for (int64_t b = 0; b < nb; b++) {
        int32_t s = 0;
        for (int g = 0; g < 8; g++)
            for (int e = 0; e < 4; e++) {
                p[b].qs[g][4 * lane + e] = a[b].qs[4 * g + e];
                s += a[b].qs[4 * g + e];
            }
        p[b].d[lane] = a[b].d;
        p[b].s[lane] = a[b].s;
        p[b].c[lane] = -128 * s;
    }
}

const tq_qdot_kernels *tq_qdot_scalar(void)
{
    return &scalar_table;
}

const tq_qdot_kernels *tq_qdot_avx2(void)
{
    return tq_cpu_supports(TQ_ISA_AVX2) ? tq_qdot_avx2_table() : NULL;
}

const tq_qdot_kernels *tq_qdot_avx512(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (tq_cpu_supports(TQ_ISA_AVX512) && __builtin_cpu_supports("avx512vnni") &&
        __builtin_cpu_supports("avx512vl"))
        return tq_qdot_avx512_table();
#endif
    return NULL;
}

const tq_qdot_kernels *tq_qdot_best(void)
{
    if (tq_cpu_isa() >= TQ_ISA_AVX2 && tq_qdot_avx2())
        return tq_qdot_avx2();
    return tq_qdot_scalar();
}

int tq_qdot_all(const tq_qdot_kernels **out, int cap)
{
    int n = 0;
    if (n < cap)
        out[n++] = tq_qdot_scalar();
    if (n < cap && tq_qdot_avx2())
        out[n++] = tq_qdot_avx2();
    if (n < cap && tq_qdot_avx512())
        out[n++] = tq_qdot_avx512();
    return n;
}
