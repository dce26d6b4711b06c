/* dequant.c -- ggml block formats: type table and the scalar dequantizers (the specification).
 * Every formula evaluates in fp32 in the same operation order as the `gguf` Python package
 * (gguf/quants.py), so results are bit-identical to it; docs/FORMAT.md "GGUF" lists the layouts.
 * The vector kernels live in src/cpu/dequant_avx2.c and must match these bit for bit. */
#include <string.h>

#include "core/half.h"
#include "io/io_internal.h"

#define QK_K 256

typedef struct type_info {
    const char *name;
    int64_t block;
    size_t size;
} type_info;

static const type_info types[TQ_GGML_TYPE_LIMIT] = {
    [TQ_GGML_F32] = {"F32", 1, 4},        [TQ_GGML_F16] = {"F16", 1, 2},
    [TQ_GGML_Q4_0] = {"Q4_0", 32, 18},    [TQ_GGML_Q4_1] = {"Q4_1", 32, 20},
    [TQ_GGML_Q5_0] = {"Q5_0", 32, 22},    [TQ_GGML_Q5_1] = {"Q5_1", 32, 24},
    [TQ_GGML_Q8_0] = {"Q8_0", 32, 34},    [TQ_GGML_Q8_1] = {"Q8_1", 32, 36},
    [TQ_GGML_Q2_K] = {"Q2_K", QK_K, 84},  [TQ_GGML_Q3_K] = {"Q3_K", QK_K, 110},
    [TQ_GGML_Q4_K] = {"Q4_K", QK_K, 144}, [TQ_GGML_Q5_K] = {"Q5_K", QK_K, 176},
    [TQ_GGML_Q6_K] = {"Q6_K", QK_K, 210}, [TQ_GGML_Q8_K] = {"Q8_K", QK_K, 292},
    [TQ_GGML_I8] = {"I8", 1, 1},          [TQ_GGML_I16] = {"I16", 1, 2},
    [TQ_GGML_I32] = {"I32", 1, 4},        [TQ_GGML_I64] = {"I64", 1, 8},
    [TQ_GGML_F64] = {"F64", 1, 8},        [TQ_GGML_BF16] = {"BF16", 1, 2},
};

static const type_info *info(int type)
{
    if (type < 0 || type >= TQ_GGML_TYPE_LIMIT || !types[type].name)
        return NULL;
    return &types[type];
}

const char *tq_ggml_type_name(int type)
{
    const type_info *t = info(type);
    return t ? t->name : "?";
}

int64_t tq_ggml_block_size(int type)
{
    const type_info *t = info(type);
    return t ? t->block : 0;
}

size_t tq_ggml_type_size(int type)
{
    const type_info *t = info(type);
    return t ? t->size : 0;
}

tq_status tq_ggml_nbytes(int type, int64_t n, size_t *out)
{
    const type_info *t = info(type);
    size_t r;
    if (!t)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "ggml type %d is unknown", type);
    if (n < 0 || n % t->block)
        return TQ_FAIL(TQ_E_FORMAT, "%lld elements is not a multiple of the %s block (%lld)",
                       (long long)n, t->name, (long long)t->block);
    if (!tq_mul_ok((size_t)(n / t->block), t->size, &r))
        return TQ_FAIL(TQ_E_FORMAT, "%lld elements of %s overflow size_t", (long long)n, t->name);
    *out = r;
    return TQ_OK;
}

/* ---- scalar kernels ------------------------------------------------------------------------ */
static inline float f16(const uint8_t *p)
{
    return tq_f16_to_f32(tq_rd16(p));
}

static void dq_f32(const void *src, float *y, int64_t n)
{
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++)
        y[i] = tq_bits_f32(tq_rd32(p + 4 * i));
}

static void dq_f16(const void *src, float *y, int64_t n)
{
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++)
        y[i] = f16(p + 2 * i);
}

static void dq_bf16(const void *src, float *y, int64_t n)
{
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++)
        y[i] = tq_bf16_to_f32(tq_rd16(p + 2 * i));
}

/* Q4_0: f16 d, 16 bytes of nibbles; low nibbles are elements 0..15, high 16..31; (q - 8) * d. */
static void dq_q4_0(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 18, y += 32) {
        const float d = f16(b);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)((int)(b[2 + j] & 0x0f) - 8);
            y[j + 16] = d * (float)((int)(b[2 + j] >> 4) - 8);
        }
    }
}

/* Q4_1: f16 d, f16 m, nibbles as Q4_0; d * q + m. */
static void dq_q4_1(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 20, y += 32) {
        const float d = f16(b);
        const float m = f16(b + 2);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)(b[4 + j] & 0x0f) + m;
            y[j + 16] = d * (float)(b[4 + j] >> 4) + m;
        }
    }
}

/* Q5_0: f16 d, u32 qh (bit j = 5th bit of element j), nibbles as Q4_0; (q - 16) * d. */
static void dq_q5_0(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 22, y += 32) {
        const float d = f16(b);
        const uint32_t qh = tq_rd32(b + 2);
        for (int j = 0; j < 16; j++) {
            const int q0 = (b[6 + j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
            const int q1 = (b[6 + j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            y[j] = d * (float)(q0 - 16);
            y[j + 16] = d * (float)(q1 - 16);
        }
    }
}

/* Q5_1: f16 d, f16 m, u32 qh, nibbles; d * q + m. */
static void dq_q5_1(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 24, y += 32) {
        const float d = f16(b);
        const float m = f16(b + 2);
        const uint32_t qh = tq_rd32(b + 4);
        for (int j = 0; j < 16; j++) {
            const int q0 = (b[8 + j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
            const int q1 = (b[8 + j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            y[j] = d * (float)q0 + m;
            y[j + 16] = d * (float)q1 + m;
        }
    }
}

/* Q8_0: f16 d, 32 int8; q * d. */
static void dq_q8_0(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 34, y += 32) {
        const float d = f16(b);
        for (int j = 0; j < 32; j++)
            y[j] = (float)(int8_t)b[2 + j] * d;
    }
}

/* 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes of Q4_K/Q5_K. */
static inline void scale_min_k4(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles. Sub-block g (32
 * elements) = nibble half (g & 1) of bytes [32*(g/2), +32); y = (d*sc) * q - (dmin*m). */
static void dq_q4_k(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += 144, y += QK_K) {
        const float d = f16(b);
        const float dmin = f16(b + 2);
        const uint8_t *sc = b + 4;
        const uint8_t *qs = b + 16;
        for (int g = 0; g < 8; g++) {
            int s, m;
            scale_min_k4(g, sc, &s, &m);
            const float d1 = d * (float)s;
            const float m1 = dmin * (float)m;
            const int shift = (g & 1) * 4;
            const uint8_t *q = qs + 32 * (g / 2);
            for (int l = 0; l < 32; l++)
                y[32 * g + l] = d1 * (float)((q[l] >> shift) & 0x0f) - m1;
        }
    }
}

/* Q5_K: f16 d, f16 dmin, 12 scale bytes, 32 bytes qh (bit g of qh[l] = 5th bit of element
 * 32*g + l), 128 bytes of nibbles laid out as Q4_K. */
static void dq_q5_k(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += 176, y += QK_K) {
        const float d = f16(b);
        const float dmin = f16(b + 2);
        const uint8_t *sc = b + 4;
        const uint8_t *qh = b + 16;
        const uint8_t *qs = b + 48;
        for (int g = 0; g < 8; g++) {
            int s, m;
            scale_min_k4(g, sc, &s, &m);
            const float d1 = d * (float)s;
            const float m1 = dmin * (float)m;
            const int shift = (g & 1) * 4;
            const uint8_t *q = qs + 32 * (g / 2);
            for (int l = 0; l < 32; l++) {
                const int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> g) & 1) << 4);
                y[32 * g + l] = d1 * (float)v - m1;
            }
        }
    }
}

/* Q6_K: 128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d. Half h (128 elements): element
 * 128h + 32k + l (k 0..3, l 0..31) = low nibble (k<2) or high nibble (k>=2) of ql[64h + 32(k&1)
 * + l] | ((qh[32h + l] >> 2k) & 3) << 4, minus 32; y = (d * scale[e/16]) * q. */
static void dq_q6_k(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += 210, y += QK_K) {
        const uint8_t *ql = b;
        const uint8_t *qh = b + 128;
        const int8_t *scales = (const int8_t *)(b + 192);
        const float d = f16(b + 208);
        for (int e = 0; e < QK_K; e++) {
            const int h = e / 128;
            const int k = (e % 128) / 32;
            const int l = e % 32;
            const int lo = (ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0f;
            const int hi = (qh[32 * h + l] >> (2 * k)) & 3;
            const float ds = d * (float)scales[e / 16];
            y[e] = ds * (float)((lo | (hi << 4)) - 32);
        }
    }
}

tq_dequant_fn tq_dequant_kernel_scalar(int type)
{
    switch (type) {
    case TQ_GGML_F32:
        return dq_f32;
    case TQ_GGML_F16:
        return dq_f16;
    case TQ_GGML_BF16:
        return dq_bf16;
    case TQ_GGML_Q4_0:
        return dq_q4_0;
    case TQ_GGML_Q4_1:
        return dq_q4_1;
    case TQ_GGML_Q5_0:
        return dq_q5_0;
    case TQ_GGML_Q5_1:
        return dq_q5_1;
    case TQ_GGML_Q8_0:
        return dq_q8_0;
    case TQ_GGML_Q4_K:
        return dq_q4_k;
    case TQ_GGML_Q5_K:
        return dq_q5_k;
    case TQ_GGML_Q6_K:
        return dq_q6_k;
    default:
        return NULL;
    }
}

int tq_ggml_can_dequant(int type)
{
    return tq_dequant_kernel_scalar(type) != NULL;
}

static tq_status check_args(int type, const void *src, size_t src_len, float *dst, int64_t n)
{
    size_t need;
    tq_status st;
    if (!tq_ggml_can_dequant(type))
        return TQ_FAIL(TQ_E_UNSUPPORTED,
                       "dequant: ggml type %s (%d) is not supported "
                       "(F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K)",
                       tq_ggml_type_name(type), type);
    if ((st = tq_ggml_nbytes(type, n, &need)))
        return st;
    if ((n && (!src || !dst)) || src_len < need)
        return TQ_FAIL(TQ_E_ARG, "dequant: %s source has %zu bytes, %lld elements need %zu",
                       tq_ggml_type_name(type), src_len, (long long)n, need);
    return TQ_OK;
}

tq_status tq_ggml_dequant_ref(int type, const void *src, size_t src_len, float *dst, int64_t n)
{
    tq_status st = check_args(type, src, src_len, dst, n);
    if (st)
        return st;
    tq_dequant_kernel_scalar(type)(src, dst, n);
    return TQ_OK;
}

tq_status tq_ggml_dequant_isa(tq_isa isa, int type, const void *src, size_t src_len, float *dst,
                              int64_t n)
{
    tq_status st = check_args(type, src, src_len, dst, n);
    tq_dequant_fn fn = NULL;
    if (st)
        return st;
    if (isa >= TQ_ISA_AVX2 && tq_cpu_supports(TQ_ISA_AVX2))
        fn = tq_dequant_kernel_avx2(type);
    if (!fn)
        fn = tq_dequant_kernel_scalar(type);
    fn(src, dst, n);
    return TQ_OK;
}

tq_status tq_ggml_dequant(int type, const void *src, size_t src_len, float *dst, int64_t n)
{
    return tq_ggml_dequant_isa(tq_cpu_isa(), type, src, src_len, dst, n);
}
