/* qdot.c -- scalar reference kernels of qdot.h (the specification) and the table lookup.
 * No intrinsics; the library builds this with -ffp-contract=off, so every a*b+c below is a
 * rounded multiply then a rounded add, except the explicit fmaf() of the f32 path. */
#include <math.h>

#include "core/half.h"
#include "cpu/qdot.h"

static inline float f16(const uint8_t *p)
{
    return tq_f16_to_f32(tq_rd16(p));
}

/* ---- the activation quantizer -------------------------------------------------------------- */
static void quant_q8a(const float *x, tq_q8a *a, int64_t k)
{
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

/* H(v) of qdot.h */
static inline float hsum8(const float *v)
{
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

/* ---- the two dots, generic over the unpacker ----------------------------------------------- */
static inline float dot_q8(unpack_fn up, size_t bsize, int has_min, const void *w,
                           const tq_q8a *a, int64_t k)
{
    const uint8_t *b = w;
    float acc[2][8] = {{0}};
    float accm = 0.0f;
    for (int64_t i = 0; i < k / TQ_QK; i++, b += bsize) {
        int8_t wq[32];
        float d, m;
        up(b, wq, &d, &m);
        const float dd = d * a[i].d;
        for (int l = 0; l < 8; l++) {
            int32_t p = 0;
            for (int t = 0; t < 4; t++)
                p += (int32_t)wq[4 * l + t] * (int32_t)a[i].qs[4 * l + t];
            acc[i & 1][l] = acc[i & 1][l] + (float)p * dd;
        }
        if (has_min)
            accm = accm + m * a[i].s;
    }
    float v[8];
    for (int l = 0; l < 8; l++)
        v[l] = acc[0][l] + acc[1][l];
    return hsum8(v) + accm;
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
    return hsum8(v);
}

#define DEFINE_FORMAT(name, bsize, has_min)                                                      \
    static float dot_q8_##name(const void *w, const tq_q8a *a, int64_t k)                        \
    {                                                                                            \
        return dot_q8(up_##name, bsize, has_min, w, a, k);                                       \
    }                                                                                            \
    static float dot_f32_##name(const void *w, const float *x, int64_t k)                        \
    {                                                                                            \
        return dot_f32(up_##name, bsize, has_min, w, x, k);                                      \
    }                                                                                            \
    static void mv_q8_##name(const void *w, size_t row_bytes, int64_t k, const tq_q8a *a,        \
                             int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)           \
    {                                                                                            \
        for (int64_t r = r0; r < r1; r++)                                                        \
            for (int64_t t = 0; t < n; t++)                                                      \
                y[t * ldy + r] = dot_q8_##name((const uint8_t *)w + (size_t)r * row_bytes,       \
                                               a + t * (k / TQ_QK), k);                          \
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

DEFINE_FORMAT(q8_0, 34, 0)
DEFINE_FORMAT(q4_0, 18, 0)
DEFINE_FORMAT(q4_1, 20, 1)
DEFINE_FORMAT(q5_0, 22, 0)
DEFINE_FORMAT(q5_1, 24, 1)

#define ROW(T, name)                                                                             \
    .dot_q8[T] = dot_q8_##name, .dot_f32[T] = dot_f32_##name, .mv_q8[T] = mv_q8_##name,          \
    .mv_f32[T] = mv_f32_##name

static const tq_qdot_kernels scalar_table = {
    .isa = "scalar",
    .quant_q8a = quant_q8a,
    ROW(TQ_GGML_Q8_0, q8_0),
    ROW(TQ_GGML_Q4_0, q4_0),
    ROW(TQ_GGML_Q4_1, q4_1),
    ROW(TQ_GGML_Q5_0, q5_0),
    ROW(TQ_GGML_Q5_1, q5_1),
};

const tq_qdot_kernels *tq_qdot_scalar(void)
{
    return &scalar_table;
}

const tq_qdot_kernels *tq_qdot_avx2(void)
{
    return tq_cpu_supports(TQ_ISA_AVX2) ? tq_qdot_avx2_table() : NULL;
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
    return n;
}
