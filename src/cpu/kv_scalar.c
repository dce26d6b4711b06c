/* kv_scalar.c -- the scalar kernel table: loops of the reference row functions. */
#include "core/core.h"
#include "core/half.h"
#include "cpu/kv_cpu.h"
#include "common/kv_codec.h"

static void enc_k(const float *x, int64_t n, int d, int kb, uint8_t *dst)
{
    const size_t rb = tq_kv_turbo_k_row_bytes(d, kb);
    for (int64_t r = 0; r < n; r++)
        tq_kv_turbo_encode_k_row_ref(x + r * d, d, kb, dst + (size_t)r * rb);
}
static void dec_k(const uint8_t *src, int64_t n, int d, int kb, float *out)
{
    const size_t rb = tq_kv_turbo_k_row_bytes(d, kb);
    for (int64_t r = 0; r < n; r++)
        tq_kv_turbo_decode_k_row_ref(src + (size_t)r * rb, d, kb, out + r * d);
}
static void enc_v(const float *x, int64_t n, int d, int vb, uint8_t *dst)
{
    const size_t rb = tq_kv_turbo_v_row_bytes(d, vb);
    for (int64_t r = 0; r < n; r++)
        tq_kv_turbo_encode_v_row_ref(x + r * d, d, vb, dst + (size_t)r * rb);
}
static void dec_v(const uint8_t *src, int64_t n, int d, int vb, float *out)
{
    const size_t rb = tq_kv_turbo_v_row_bytes(d, vb);
    for (int64_t r = 0; r < n; r++)
        tq_kv_turbo_decode_v_row_ref(src + (size_t)r * rb, d, vb, out + r * d);
}
static void enc_affine(const float *x, int64_t n, int d, int bits, uint8_t *dst)
{
    const size_t rb = tq_kv_affine_row_bytes(d, bits);
    for (int64_t r = 0; r < n; r++)
        tq_kv_affine_encode_row_ref(x + r * d, d, bits, dst + (size_t)r * rb);
}
static void dec_affine(const uint8_t *src, int64_t n, int d, int bits, float *out)
{
    const size_t rb = tq_kv_affine_row_bytes(d, bits);
    for (int64_t r = 0; r < n; r++)
        tq_kv_affine_decode_row_ref(src + (size_t)r * rb, d, bits, out + r * d);
}
static void enc_f16(const float *x, int64_t n, uint8_t *dst)
{
    for (int64_t i = 0; i < n; i++)
        tq_wr16(dst + 2 * i, tq_f32_to_f16(x[i]));
}
static void dec_f16(const uint8_t *src, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = tq_f16_to_f32(tq_rd16(src + 2 * i));
}

static void enc_bf16(const float *x, int64_t n, uint8_t *dst)
{
    for (int64_t i = 0; i < n; i++)
        tq_wr16(dst + 2 * i, tq_f32_to_bf16(x[i]));
}
static void dec_bf16(const uint8_t *src, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = tq_bf16_to_f32(tq_rd16(src + 2 * i));
}

const tq_kv_kernels tq_kv_kernels_scalar = {
    .isa = TQ_ISA_SCALAR,
    .enc_k = enc_k,
    .dec_k = dec_k,
    .enc_v = enc_v,
    .dec_v = dec_v,
    .enc_affine = enc_affine,
    .dec_affine = dec_affine,
    .enc_f16 = enc_f16,
    .dec_f16 = dec_f16,
    .enc_bf16 = enc_bf16,
    .dec_bf16 = dec_bf16,
};
