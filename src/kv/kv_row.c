/* kv_row.c -- one row of any KV scheme (kv_internal.h): row bytes, scalar encode and decode,
 * dispatched to the turbo/affine references (common/kv_ref.c) and the rot: codes (kv_rot.c). */
#include <string.h>

#include "core/core.h"
#include "core/half.h"
#include "kv/kv_internal.h"

/* ---- any scheme ------------------------------------------------------------------------------ */

size_t tq_kv_row_bytes1(tq_kv_scheme s, int is_v, int d)
{
    if (d <= 0)
        return 0;
    switch (s.kind) {
    case TQ_KV_F32: return (size_t)d * 4;
    case TQ_KV_F16:
    case TQ_KV_BF16: return (size_t)d * 2;
    case TQ_KV_KV8: return tq_kv_affine_row_bytes(d, 8);
    case TQ_KV_KV4: return tq_kv_affine_row_bytes(d, 4);
    case TQ_KV_TURBO:
        return is_v ? tq_kv_turbo_v_row_bytes(d, s.v_bits) : tq_kv_turbo_k_row_bytes(d, s.k_bits);
    case TQ_KV_ROT: return tq_kv_rot_row_bytes(is_v ? s.v_bits : s.k_bits, d);
    default: return 0;
    }
}

void tq_kv_encode_row_ref(tq_kv_scheme s, int is_v, const float *x, int d, uint8_t *dst)
{
    switch (s.kind) {
    case TQ_KV_F32: memcpy(dst, x, (size_t)d * 4); break;
    case TQ_KV_F16:
        for (int j = 0; j < d; j++)
            tq_wr16(dst + 2 * j, tq_f32_to_f16(x[j]));
        break;
    case TQ_KV_BF16:
        for (int j = 0; j < d; j++)
            tq_wr16(dst + 2 * j, tq_f32_to_bf16(x[j]));
        break;
    case TQ_KV_KV8: tq_kv_affine_encode_row_ref(x, d, 8, dst); break;
    case TQ_KV_KV4: tq_kv_affine_encode_row_ref(x, d, 4, dst); break;
    case TQ_KV_TURBO:
        if (is_v)
            tq_kv_turbo_encode_v_row_ref(x, d, s.v_bits, dst);
        else
            tq_kv_turbo_encode_k_row_ref(x, d, s.k_bits, dst);
        break;
    case TQ_KV_ROT: tq_kv_rot_encode_row_ref(is_v ? s.v_bits : s.k_bits, is_v, x, d, dst); break;
    default: break;
    }
}

void tq_kv_decode_row_ref(tq_kv_scheme s, int is_v, const uint8_t *src, int d, float *out)
{
    switch (s.kind) {
    case TQ_KV_F32: memcpy(out, src, (size_t)d * 4); break;
    case TQ_KV_F16:
        for (int j = 0; j < d; j++)
            out[j] = tq_f16_to_f32(tq_rd16(src + 2 * j));
        break;
    case TQ_KV_BF16:
        for (int j = 0; j < d; j++)
            out[j] = tq_bf16_to_f32(tq_rd16(src + 2 * j));
        break;
    case TQ_KV_KV8: tq_kv_affine_decode_row_ref(src, d, 8, out); break;
    case TQ_KV_KV4: tq_kv_affine_decode_row_ref(src, d, 4, out); break;
    case TQ_KV_TURBO:
        if (is_v)
            tq_kv_turbo_decode_v_row_ref(src, d, s.v_bits, out);
        else
            tq_kv_turbo_decode_k_row_ref(src, d, s.k_bits, out);
        break;
    case TQ_KV_ROT: tq_kv_rot_decode_row_ref(is_v ? s.v_bits : s.k_bits, is_v, src, d, out); break;
    default: break;
    }
}
