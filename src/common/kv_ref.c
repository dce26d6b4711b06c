/* kv_ref.c -- the scalar reference of the KV codec (the specification; see kv_codec.h and
 * docs/FORMAT.md "KV rows"). Plain C, no intrinsics, no allocation, -ffp-contract=off. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "core/half.h"
#include "common/kv_codec.h"

int tq_kv_turbo_dim_ok(int d)
{
    return d == 64 || d == 128 || d == 256 || d == 512;
}

const float *tq_kv_signs(int d)
{
    switch (d) {
    case 64: return tq_kv_signs_64;
    case 128: return tq_kv_signs_128;
    case 256: return tq_kv_signs_256;
    case 512: return tq_kv_signs_512;
    default: return NULL;
    }
}

float tq_kv_fwht_scale(int d)
{
    switch (d) {
    case 64: return tq_kv_fwht_scales[0];
    case 128: return tq_kv_fwht_scales[1];
    case 256: return tq_kv_fwht_scales[2];
    case 512: return tq_kv_fwht_scales[3];
    default: return 0.0f;
    }
}

const float *tq_kv_centroids(int bits)
{
    switch (bits) {
    case 2: return tq_kv_centroids_2;
    case 3: return tq_kv_centroids_3;
    case 4: return tq_kv_centroids_4;
    case 5: return tq_kv_centroids_5;
    case 8: return tq_kv_centroids_8;
    default: return NULL;
    }
}

const float *tq_kv_boundaries(int bits)
{
    switch (bits) {
    case 2: return tq_kv_boundaries_2;
    case 3: return tq_kv_boundaries_3;
    case 4: return tq_kv_boundaries_4;
    case 5: return tq_kv_boundaries_5;
    case 8: return tq_kv_boundaries_8;
    default: return NULL;
    }
}

int tq_kv_key_bits_ok(int bits)
{
    return bits == 2 || bits == 4 || bits == 5 || bits == 8;
}

int tq_kv_value_bits_ok(int bits)
{
    return bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 8;
}

uint16_t tq_kv_f16(float x)
{
    if (x != x)
        return TQ_KV_F16_NAN;
    return tq_f32_to_f16(x);
}

/* ---- packing -------------------------------------------------------------------------------- */

void tq_kv_pack_bits(const uint8_t *idx, int n, int bits, uint8_t *dst)
{
    if (bits == 8) {
        memcpy(dst, idx, (size_t)n);
        return;
    }
    const unsigned mask = (1u << bits) - 1u;
    memset(dst, 0, (size_t)n * (size_t)bits / 8);
    for (int i = 0; i < n; i++) {
        const size_t bit = (size_t)i * (size_t)bits;
        const unsigned v = ((unsigned)idx[i] & mask) << (bit & 7);
        dst[bit >> 3] |= (uint8_t)v;
        if ((bit & 7) + (size_t)bits > 8)
            dst[(bit >> 3) + 1] |= (uint8_t)(v >> 8);
    }
}

void tq_kv_unpack_bits(const uint8_t *src, int n, int bits, uint8_t *idx)
{
    if (bits == 8) {
        memcpy(idx, src, (size_t)n);
        return;
    }
    for (int i = 0; i < n; i++)
        idx[i] = (uint8_t)tq_kv_get_bits(src, i, bits);
}

/* ---- FWHT ----------------------------------------------------------------------------------- */

void tq_kv_fwht_butterflies(float *u, int n)
{
    /* every i with (i & h) == 0, visited block by block: i = blk .. blk + h - 1 for blk a
     * multiple of 2h (the butterflies of one stage are independent, so order is free) */
    for (int h = 1; h < n; h <<= 1)
        for (int blk = 0; blk < n; blk += 2 * h)
            for (int i = blk; i < blk + h; i++) {
                const float a = u[i], b = u[i + h];
                u[i] = a + b;
                u[i + h] = a - b;
            }
}

void tq_kv_fwht(float *u, int n)
{
    const float s = tq_kv_fwht_scale(n);
    tq_kv_fwht_butterflies(u, n);
    for (int j = 0; j < n; j++)
        u[j] = u[j] * s;
}

void tq_kv_rotate_ref(const float *x, int d, float *y)
{
    const float *sg = tq_kv_signs(d);
    const float s = tq_kv_fwht_scale(d);
    for (int j = 0; j < d; j++)
        y[j] = x[j] * sg[j];
    tq_kv_fwht_butterflies(y, d);
    for (int j = 0; j < d; j++)
        y[j] = y[j] * s;
}

void tq_kv_unrotate_ref(float *v, int d)
{
    const float *sg = tq_kv_signs(d);
    const float s = tq_kv_fwht_scale(d);
    tq_kv_fwht_butterflies(v, d);
    for (int j = 0; j < d; j++)
        v[j] = (v[j] * s) * sg[j];
}

void tq_kv_unrotate_f64(double *v, int d)
{
    const float *sg = tq_kv_signs(d);
    const double s = tq_kv_fwht_scale(d);
    for (int h = 1; h < d; h <<= 1)
        for (int blk = 0; blk < d; blk += 2 * h)
            for (int i = blk; i < blk + h; i++) {
                const double a = v[i], b = v[i + h];
                v[i] = a + b;
                v[i + h] = a - b;
            }
    for (int j = 0; j < d; j++)
        v[j] = (v[j] * s) * sg[j];
}

/* ---- keys ----------------------------------------------------------------------------------- */

/* Group min and max: NaN anywhere -> both NaN; signed zero canonicalised to +0. */
static void group_minmax(const float *x, int n, float *mn_out, float *mx_out)
{
    float mn = x[0], mx = x[0];
    int nan = 0;
    for (int j = 0; j < n; j++) {
        const float v = x[j];
        if (v != v)
            nan = 1;
        if (v < mn)
            mn = v;
        if (v > mx)
            mx = v;
    }
    if (nan) {
        *mn_out = NAN;
        *mx_out = NAN;
        return;
    }
    *mn_out = mn + 0.0f;
    *mx_out = mx + 0.0f;
}

/* rint, then NaN -> 0, then clamp to [lo, hi]. */
static inline float round_clamp(float v, float lo, float hi)
{
    float q = rintf(v);
    if (q != q)
        q = 0.0f;
    q = q < lo ? lo : q;
    q = q > hi ? hi : q;
    return q;
}

void tq_kv_key_encode_row_ref(const float *x, int d, int bits, int is_signed, uint8_t *dst)
{
    const int ng = d / TQ_KV_GROUP;
    uint8_t *sc = dst + tq_kv_packed_bytes(d, bits);
    uint8_t *zr = sc + 2 * (size_t)ng;
    uint8_t idx[TQ_KV_GROUP];
    for (int g = 0; g < ng; g++) {
        const float *xg = x + g * TQ_KV_GROUP;
        float mn, mx, scale, zero;
        group_minmax(xg, TQ_KV_GROUP, &mn, &mx);
        if (is_signed) {
            scale = (mx - mn) / 254.0f;
            const float se = scale + tq_kv_eps;
            zero = rintf((mx + mn) / (2.0f * se));
            for (int j = 0; j < TQ_KV_GROUP; j++) {
                const float q = round_clamp(xg[j] / se - zero, -127.0f, 127.0f);
                idx[j] = (uint8_t)(int8_t)(int)q;
            }
        } else {
            const float maxv = (float)((1 << bits) - 1);
            scale = (mx - mn) / maxv;
            const float se = scale + tq_kv_eps;
            zero = rintf(mn / se);
            for (int j = 0; j < TQ_KV_GROUP; j++)
                idx[j] = (uint8_t)(int)round_clamp(xg[j] / se - zero, 0.0f, maxv);
        }
        tq_kv_pack_bits(idx, TQ_KV_GROUP, bits, dst + (size_t)g * 4 * (size_t)bits);
        tq_wr16(sc + 2 * g, tq_kv_f16(scale));
        tq_wr16(zr + 2 * g, tq_kv_f16(zero));
    }
}

void tq_kv_key_decode_row_ref(const uint8_t *src, int d, int bits, int is_signed, float *out)
{
    const int ng = d / TQ_KV_GROUP;
    const uint8_t *sc = src + tq_kv_packed_bytes(d, bits);
    const uint8_t *zr = sc + 2 * (size_t)ng;
    for (int g = 0; g < ng; g++) {
        const float s = tq_f16_to_f32(tq_rd16(sc + 2 * g));
        const float z = tq_f16_to_f32(tq_rd16(zr + 2 * g));
        for (int j = g * TQ_KV_GROUP; j < (g + 1) * TQ_KV_GROUP; j++) {
            const int q = (bits == 8 && is_signed) ? (int)(int8_t)src[j]
                                                   : (int)tq_kv_get_bits(src, j, bits);
            out[j] = ((float)q + z) * s;
        }
    }
}

void tq_kv_turbo_encode_k_row_ref(const float *x, int d, int k_bits, uint8_t *dst)
{
    tq_kv_key_encode_row_ref(x, d, k_bits, k_bits == 8, dst);
}

void tq_kv_turbo_decode_k_row_ref(const uint8_t *src, int d, int k_bits, float *out)
{
    tq_kv_key_decode_row_ref(src, d, k_bits, k_bits == 8, out);
}

/* ---- values --------------------------------------------------------------------------------- */

int tq_kv_v_index_ref(float z, int bits)
{
    const float *b = tq_kv_boundaries(bits);
    const int nb = (1 << bits) - 1;
    int c = 0;
    for (int j = 0; j < nb; j++)
        c += z > b[j];
    return c;
}

int tq_kv_v_index_search(float z, int bits)
{
    /* B is non-decreasing (checked by the table generator and test_kv_ref), so the predicate
     * z > B[j] is true exactly for j < count: find count by bisection, b steps. NaN -> 0. */
    const float *b = tq_kv_boundaries(bits);
    int idx = 0;
    for (int step = 1 << (bits - 1); step >= 1; step >>= 1)
        if (z > b[idx + step - 1])
            idx += step;
    return idx;
}

void tq_kv_turbo_encode_v_row_ref(const float *x, int d, int v_bits, uint8_t *dst)
{
    float y[TQ_KV_MAX_HEAD_DIM];
    uint8_t idx[TQ_KV_MAX_HEAD_DIM];
    const int ng = d / TQ_KV_GROUP;
    uint8_t *sc = dst + tq_kv_packed_bytes(d, v_bits);
    tq_kv_rotate_ref(x, d, y);
    for (int g = 0; g < ng; g++) {
        const float *yg = y + g * TQ_KV_GROUP;
        float ss = 0.0f;
        for (int k = 0; k < TQ_KV_GROUP; k++)
            ss = ss + yg[k] * yg[k];
        const float scale = sqrtf(ss * 0.03125f);
        const float se = scale + tq_kv_eps;
        for (int k = 0; k < TQ_KV_GROUP; k++)
            idx[g * TQ_KV_GROUP + k] = (uint8_t)tq_kv_v_index_search(yg[k] / se, v_bits);
        tq_wr16(sc + 2 * g, tq_kv_f16(scale));
    }
    tq_kv_pack_bits(idx, d, v_bits, dst);
}

void tq_kv_turbo_decode_v_rotated_row_ref(const uint8_t *src, int d, int v_bits, float *out)
{
    const float *c = tq_kv_centroids(v_bits);
    const uint8_t *sc = src + tq_kv_packed_bytes(d, v_bits);
    for (int g = 0; g < d / TQ_KV_GROUP; g++) {
        const float s = tq_f16_to_f32(tq_rd16(sc + 2 * g));
        for (int j = g * TQ_KV_GROUP; j < (g + 1) * TQ_KV_GROUP; j++)
            out[j] = c[tq_kv_get_bits(src, j, v_bits)] * s;
    }
}

void tq_kv_turbo_decode_v_row_ref(const uint8_t *src, int d, int v_bits, float *out)
{
    tq_kv_turbo_decode_v_rotated_row_ref(src, d, v_bits, out);
    tq_kv_unrotate_ref(out, d);
}

/* ---- kv8 / kv4 ------------------------------------------------------------------------------ */

void tq_kv_affine_encode_row_ref(const float *x, int d, int bits, uint8_t *dst)
{
    const int ng = d / TQ_KV_AFFINE_GROUP;
    const float maxv = (float)((1 << bits) - 1);
    uint8_t *sc = dst + tq_kv_packed_bytes(d, bits);
    uint8_t *bi = sc + 2 * (size_t)ng;
    uint8_t idx[TQ_KV_AFFINE_GROUP];
    for (int g = 0; g < ng; g++) {
        const float *xg = x + g * TQ_KV_AFFINE_GROUP;
        float mn, mx;
        group_minmax(xg, TQ_KV_AFFINE_GROUP, &mn, &mx);
        const uint16_t sh = tq_kv_f16((mx - mn) / maxv), bh = tq_kv_f16(mn);
        const float s = tq_f16_to_f32(sh), m = tq_f16_to_f32(bh);
        for (int j = 0; j < TQ_KV_AFFINE_GROUP; j++)
            idx[j] = s > 0.0f ? (uint8_t)(int)round_clamp((xg[j] - m) / s, 0.0f, maxv) : 0;
        tq_kv_pack_bits(idx, TQ_KV_AFFINE_GROUP, bits,
                        dst + (size_t)g * TQ_KV_AFFINE_GROUP * (size_t)bits / 8);
        tq_wr16(sc + 2 * g, sh);
        tq_wr16(bi + 2 * g, bh);
    }
}

void tq_kv_affine_decode_row_ref(const uint8_t *src, int d, int bits, float *out)
{
    const int ng = d / TQ_KV_AFFINE_GROUP;
    const uint8_t *sc = src + tq_kv_packed_bytes(d, bits);
    const uint8_t *bi = sc + 2 * (size_t)ng;
    for (int g = 0; g < ng; g++) {
        const float s = tq_f16_to_f32(tq_rd16(sc + 2 * g));
        const float m = tq_f16_to_f32(tq_rd16(bi + 2 * g));
        for (int j = g * TQ_KV_AFFINE_GROUP; j < (g + 1) * TQ_KV_AFFINE_GROUP; j++) {
            const float p = (float)tq_kv_get_bits(src, j, bits) * s;
            out[j] = p + m;
        }
    }
}
