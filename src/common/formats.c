/* formats.c -- the rows of the format table (formats.h) and their scalar references. Every
 * dequantizer evaluates in fp32 in the same operation order as the `gguf` Python package
 * (gguf/quants.py), so results are bit-identical to it; docs/FORMAT.md "GGUF" lists the layouts.
 * The vector kernels (src/cpu/) must match these bit for bit. */
#include <string.h>

#include "common/formats.h"
#include "core/half.h"

#define QK_K 256

/* ---- scalar kernels ------------------------------------------------------------------------ */
static inline float f16(const uint8_t *p)
{
    return tq_f16_to_f32(tq_rd16(p));
}

void tq_dq_f32(const void *src, float *y, int64_t n)
{
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++)
        y[i] = tq_bits_f32(tq_rd32(p + 4 * i));
}

void tq_dq_f16(const void *src, float *y, int64_t n)
{
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++)
        y[i] = f16(p + 2 * i);
}

void tq_dq_bf16(const void *src, float *y, int64_t n)
{
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++)
        y[i] = tq_bf16_to_f32(tq_rd16(p + 2 * i));
}

/* Q4_0: f16 d, 16 bytes of nibbles; low nibbles are elements 0..15, high 16..31; (q - 8) * d. */
void tq_dq_q4_0(const void *src, float *y, int64_t n)
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
void tq_dq_q4_1(const void *src, float *y, int64_t n)
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
void tq_dq_q5_0(const void *src, float *y, int64_t n)
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
void tq_dq_q5_1(const void *src, float *y, int64_t n)
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
void tq_dq_q8_0(const void *src, float *y, int64_t n)
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
void tq_dq_q4_k(const void *src, float *y, int64_t n)
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
void tq_dq_q5_k(const void *src, float *y, int64_t n)
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
void tq_dq_q6_k(const void *src, float *y, int64_t n)
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

/* ---- quantize references (the float formats; the block quantizers come with tq quantize) ---- */
/* IQ4_NL: f16 d, 16 bytes of nibbles as Q4_0 (low: elements 0..15, high: 16..31); each nibble
 * indexes the non-linear table tq_iq4nl_values; d * (float)value. */
const int8_t tq_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

void tq_dq_iq4_nl(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 18, y += 32) {
        const float d = f16(b);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)tq_iq4nl_values[b[2 + j] & 0x0f];
            y[j + 16] = d * (float)tq_iq4nl_values[b[2 + j] >> 4];
        }
    }
}

void tq_qz_f32(const float *x, void *dst, int64_t n)
{
    memcpy(dst, x, (size_t)n * sizeof(float));
}

void tq_qz_f16(const float *x, void *dst, int64_t n)
{
    uint16_t *o = dst;
    for (int64_t i = 0; i < n; i++)
        o[i] = tq_f32_to_f16(x[i]);
}

void tq_qz_bf16(const float *x, void *dst, int64_t n)
{
    uint16_t *o = dst;
    for (int64_t i = 0; i < n; i++)
        o[i] = tq_f32_to_bf16(x[i]);
}

/* ---- the table ------------------------------------------------------------------------------ */
#define ROW(id_, name_, blk, bytes, act_, dq, qz)                                                  \
    {.id = (id_), .name = (name_), .block = (blk), .block_bytes = (bytes), .act = (act_),         \
     .dequant_ref = (dq), .quant_ref = (qz)},
static tq_format rows[] = {
    TQ_FORMAT_ROWS(ROW)
#ifdef TQ_TEST_DUMMY_FORMAT
    TQ_TEST_DUMMY_FORMAT(ROW) /* tests/test_formats.c: one more row, nothing else */
#endif
};
#undef ROW
#define N_ROWS ((int)(sizeof(rows) / sizeof(rows[0])))

/* id -> row index + 1 (0 = no row), built on first use; the rows never change after start */
static signed char by_id[TQ_FMT_LIMIT];
static int by_id_done;

static void index_rows(void)
{
    if (__atomic_load_n(&by_id_done, __ATOMIC_ACQUIRE))
        return;
    signed char tmp[TQ_FMT_LIMIT] = {0};
    for (int i = 0; i < N_ROWS; i++)
        if (rows[i].id >= 0 && rows[i].id < TQ_FMT_LIMIT)
            tmp[rows[i].id] = (signed char)(i + 1);
    /* idempotent: racing threads write the same bytes */
    for (int i = 0; i < TQ_FMT_LIMIT; i++)
        __atomic_store_n(&by_id[i], tmp[i], __ATOMIC_RELAXED);
    __atomic_store_n(&by_id_done, 1, __ATOMIC_RELEASE);
}

const tq_format *tq_format_get(int id)
{
    if (id < 0 || id >= TQ_FMT_LIMIT)
        return NULL;
    index_rows();
    const int i = __atomic_load_n(&by_id[id], __ATOMIC_RELAXED);
    return i ? &rows[i - 1] : NULL;
}

int tq_format_count(void)
{
    return N_ROWS;
}

const tq_format *tq_format_at(int i)
{
    return i >= 0 && i < N_ROWS ? &rows[i] : NULL;
}

int tq_format_runnable(const tq_format *f)
{
    return f && f->dequant_ref;
}

const char *tq_format_list(char *buf, size_t cap, int (*want)(const tq_format *f))
{
    size_t pos = 0;
    if (!cap)
        return buf;
    buf[0] = 0;
    for (int i = 0; i < N_ROWS; i++) {
        /* the default list names GGUF types (for messages about files): not the MLX rows */
        const int mlx = rows[i].id >= TQ_FMT_MLX_AFFINE && rows[i].id < TQ_FMT_MLX_AFFINE + 18;
        if (!(want ? want(&rows[i]) : tq_format_runnable(&rows[i]) && !mlx))
            continue;
        const size_t len = strlen(rows[i].name) + (pos ? 1 : 0);
        if (pos + len + 1 > cap)
            break;
        if (pos)
            buf[pos++] = ' ';
        memcpy(buf + pos, rows[i].name, strlen(rows[i].name) + 1);
        pos += strlen(rows[i].name);
    }
    return buf;
}

size_t tq_format_row_bytes(const tq_format *f, int64_t k)
{
    size_t r;
    if (!f || k < 0 || k % f->block || !tq_mul_ok((size_t)(k / f->block), f->block_bytes, &r))
        return 0;
    return r;
}

void tq_format_set_kernels(int id, const tq_format_kernels *k)
{
    tq_format *f = (tq_format *)tq_format_get(id);
    if (f)
        f->k = *k;
}
