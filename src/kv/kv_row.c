/* kv_row.c -- one row of any KV scheme (kv_internal.h): row bytes, scalar encode and decode,
 * dispatched to the turbo/affine references (common/kv_ref.c) and the rot: codes (kv_rot.c);
 * and the safe encoding of constant key groups (TQ_KV_ENC_SAFE, kv.h). */
#include <math.h>
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

/* ---- safe encoding of constant key groups ------------------------------------------------ */

int64_t tq_kv_turbo_k_safe_row(const float *x, int d, int kb, uint8_t *row)
{
    uint8_t *zeros = row + tq_kv_packed_bytes(d, kb) + 2 * (size_t)(d / TQ_KV_GROUP);
    uint8_t *scales = row + tq_kv_packed_bytes(d, kb);
    int64_t fixed = 0;
    for (int g = 0; g < d / TQ_KV_GROUP; g++) {
        const uint16_t z = tq_rd16(zeros + 2 * g);
        if ((z & 0x7c00u) != 0x7c00u)
            continue; /* finite zero: the reference's bytes decode fine */
        const float *xs = x + g * TQ_KV_GROUP;
        float mn = xs[0], mx = xs[0];
        int finite = 1;
        for (int j = 0; j < TQ_KV_GROUP; j++) {
            finite &= isfinite(xs[j]) != 0;
            mn = xs[j] < mn ? xs[j] : mn;
            mx = xs[j] > mx ? xs[j] : mx;
        }
        if (!finite)
            continue; /* a non-finite input is the model's problem; keep the reference bytes */
        const int qmax = kb == 8 ? 127 : (1 << kb) - 1;
        const float mid = 0.5f * mn + 0.5f * mx;
        if (kb == 8)
            memset(row + (size_t)g * TQ_KV_GROUP, 127, TQ_KV_GROUP);
        else
            memset(row + (size_t)g * 4 * kb, 0xff, (size_t)4 * kb);
        tq_wr16(zeros + 2 * g, 0);
        tq_wr16(scales + 2 * g, tq_kv_f16(mid / (float)qmax));
        fixed++;
    }
    return fixed;
}
