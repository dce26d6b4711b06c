/* quant_ggml.c -- f32 -> GGUF block quantizers (the inverse direction of src/io/dequant.c),
 * written from the published block layouts (docs/FORMAT.md "GGUF block types";
 * weights-reference.md 6.2).
 *
 * Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 follow the reference rules of ggml (the ones the `gguf` Python
 * package re-implements), so their bytes equal that package's quantize() output
 * (tests/test_quant_blocks.c checks it on golden data). The K types (Q4_K Q5_K Q6_K) have no
 * reference quantizer in that package; ours is a plain min/max fit per sub-block with the
 * 6-bit (Q4_K, Q5_K) or 8-bit (Q6_K) sub-scales rounded against the super-block scale, then each
 * weight rounded to nearest with its final scale; the decoded values are checked against the
 * package's dequantization and against round-trip error bounds. No allocation; pure functions
 * (the library builds with -ffp-contract=off). */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "quant/quant_internal.h"

static void put_f16(uint8_t *p, float v)
{
    tq_wr16(p, tq_f32_to_f16(v));
}

static float get_f16(const uint8_t *p)
{
    return tq_f16_to_f32(tq_rd16(p));
}

/* ggml's roundf-style rounding (half away from zero), as in its Q8_0 reference */
static float round_away(float x)
{
    return roundf(x);
}

/* ---- 32-element blocks ---------------------------------------------------------------------- */
static void q8_0(const float *x, uint8_t *b)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float v = fabsf(x[j]);
        amax = v > amax ? v : amax;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(b, d);
    for (int j = 0; j < 32; j++)
        b[2 + j] = (uint8_t)(int8_t)round_away(x[j] * id);
}

/* the element of largest magnitude, sign kept (first one on ties) */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static int trunc_clamp(float v, int hi)
{
    int q = (int)(int8_t)v; /* ggml: (int8_t)(x * id + offset); the value is in [0, hi + 1] */
    return q < 0 ? 0 : q > hi ? hi : q;
}

static void q4_0(const float *x, uint8_t *b)
{
    const float d = signed_absmax(x, 32) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(b, d);
    for (int j = 0; j < 16; j++) {
        const int q0 = trunc_clamp(x[j] * id + 8.5f, 15);
        const int q1 = trunc_clamp(x[j + 16] * id + 8.5f, 15);
        b[2 + j] = (uint8_t)(q0 | q1 << 4);
    }
}

static void minmax(const float *x, int n, float *mn, float *mx)
{
    float lo = x[0], hi = x[0];
    for (int j = 1; j < n; j++) {
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
    }
    *mn = lo;
    *mx = hi;
}

static void q4_1(const float *x, uint8_t *b)
{
    float mn, mx;
    minmax(x, 32, &mn, &mx);
    const float d = (mx - mn) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(b, d);
    put_f16(b + 2, mn);
    for (int j = 0; j < 16; j++) {
        const int q0 = trunc_clamp((x[j] - mn) * id + 0.5f, 15);
        const int q1 = trunc_clamp((x[j + 16] - mn) * id + 0.5f, 15);
        b[4 + j] = (uint8_t)(q0 | q1 << 4);
    }
}

static void pack5(const int *q, uint8_t *qh, uint8_t *qs)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
        h |= (uint32_t)((q[j] >> 4) & 1) << j;
        h |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    tq_wr32(qh, h);
}

static void q5_0(const float *x, uint8_t *b)
{
    const float d = signed_absmax(x, 32) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    for (int j = 0; j < 32; j++)
        q[j] = trunc_clamp(x[j] * id + 16.5f, 31);
    put_f16(b, d);
    pack5(q, b + 2, b + 6);
}

static void q5_1(const float *x, uint8_t *b)
{
    float mn, mx;
    minmax(x, 32, &mn, &mx);
    const float d = (mx - mn) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    for (int j = 0; j < 32; j++)
        q[j] = trunc_clamp((x[j] - mn) * id + 0.5f, 31);
    put_f16(b, d);
    put_f16(b + 2, mn);
    pack5(q, b + 4, b + 8);
}

/* ---- K types (256-element super-blocks) ------------------------------------------------------ */
static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static int rnd(float v)
{
    return (int)nearbyintf(v);
}

/* Q4_K / Q5_K shared part: 8 sub-blocks of 32, w = d*sc*q - dmin*m, q in [0, qmax].
 * Fits sub-block scale s = (max - min') / qmax and offset m = -min' with min' = min(min, 0),
 * rounds sc, m to 6 bits against d = max(s)/63, dmin = max(m)/63, then q = round((w + M)/S)
 * with the stored (f16-rounded) values. Writes d, dmin, scales[12]; q[256] out. */
static void k_scales(const float *x, int qmax, uint8_t *b, int *q)
{
    float s[8], m[8], smax = 0.0f, mmax = 0.0f;
    for (int j = 0; j < 8; j++) {
        float mn, mx;
        minmax(x + 32 * j, 32, &mn, &mx);
        mn = mn < 0.0f ? mn : 0.0f;
        mx = mx > mn ? mx : mn;
        s[j] = (mx - mn) / (float)qmax;
        m[j] = -mn;
        smax = s[j] > smax ? s[j] : smax;
        mmax = m[j] > mmax ? m[j] : mmax;
    }
    const float d = tq_f16_to_f32(tq_f32_to_f16(smax / 63.0f));
    const float dmin = tq_f16_to_f32(tq_f32_to_f16(mmax / 63.0f));
    int sc[8], mi[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = d > 0.0f ? clampi(rnd(s[j] / d), 0, 63) : 0;
        mi[j] = dmin > 0.0f ? clampi(rnd(m[j] / dmin), 0, 63) : 0;
        /* a rounded-down scale would clip the top; take the next step up when that helps */
        if (sc[j] < 63 && d > 0.0f && d * (float)sc[j] * (float)qmax < (s[j] * (float)qmax))
            sc[j]++;
    }
    put_f16(b, d);
    put_f16(b + 2, dmin);
    uint8_t *k = b + 4;
    memset(k, 0, 12);
    for (int j = 0; j < 4; j++) {
        k[j] = (uint8_t)(sc[j] & 63);
        k[j + 4] = (uint8_t)(mi[j] & 63);
    }
    for (int j = 4; j < 8; j++) {
        k[j + 4] = (uint8_t)((sc[j] & 15) | (mi[j] & 15) << 4);
        k[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
        k[j] |= (uint8_t)((mi[j] >> 4) << 6);
    }
    for (int j = 0; j < 8; j++) {
        const float S = d * (float)sc[j];
        const float M = dmin * (float)mi[j];
        const float iS = S > 0.0f ? 1.0f / S : 0.0f;
        for (int l = 0; l < 32; l++)
            q[32 * j + l] = clampi(rnd((x[32 * j + l] + M) * iS), 0, qmax);
    }
}

static void q4_k(const float *x, uint8_t *b)
{
    int q[256];
    k_scales(x, 15, b, q);
    uint8_t *qs = b + 16;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
}

static void q5_k(const float *x, uint8_t *b)
{
    int q[256];
    k_scales(x, 31, b, q);
    uint8_t *qh = b + 16, *qs = b + 48;
    memset(qh, 0, 32);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
            qs[32 * c + l] = (uint8_t)((lo & 15) | (hi & 15) << 4);
            qh[l] |= (uint8_t)(((lo >> 4) & 1) << (2 * c));
            qh[l] |= (uint8_t)(((hi >> 4) & 1) << (2 * c + 1));
        }
}

/* Q6_K: 16 sub-blocks of 16, w = d*sc*q, sc int8, q in [-32, 31]. */
static void q6_k(const float *x, uint8_t *b)
{
    float s[16], amax = 0.0f, smax = 0.0f;
    for (int j = 0; j < 16; j++) {
        s[j] = signed_absmax(x + 16 * j, 16) / -32.0f;
        if (fabsf(s[j]) > amax) {
            amax = fabsf(s[j]);
            smax = s[j];
        }
    }
    const float d = tq_f16_to_f32(tq_f32_to_f16(smax / -128.0f));
    int8_t sc[16];
    int q[256];
    for (int j = 0; j < 16; j++) {
        sc[j] = (int8_t)(d != 0.0f ? clampi(rnd(s[j] / d), -128, 127) : 0);
        const float S = d * (float)sc[j];
        const float iS = S != 0.0f ? 1.0f / S : 0.0f;
        for (int l = 0; l < 16; l++)
            q[16 * j + l] = clampi(rnd(x[16 * j + l] * iS), -32, 31) + 32;
    }
    uint8_t *ql = b, *qh = b + 128;
    memset(qh, 0, 64);
    for (int n = 0; n < 2; n++)
        for (int l = 0; l < 32; l++) {
            const int *qq = q + 128 * n;
            const int q1 = qq[l], q2 = qq[l + 32], q3 = qq[l + 64], q4 = qq[l + 96];
            ql[64 * n + l] = (uint8_t)((q1 & 15) | (q3 & 15) << 4);
            ql[64 * n + l + 32] = (uint8_t)((q2 & 15) | (q4 & 15) << 4);
            qh[32 * n + l] = (uint8_t)((q1 >> 4) | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
        }
    memcpy(b + 192, sc, 16);
    put_f16(b + 208, d);
}

typedef void (*qblock_fn)(const float *x, uint8_t *b);

static qblock_fn block_fn(int type)
{
    switch (type) {
    case TQ_GGML_Q8_0: return q8_0;
    case TQ_GGML_Q4_0: return q4_0;
    case TQ_GGML_Q4_1: return q4_1;
    case TQ_GGML_Q5_0: return q5_0;
    case TQ_GGML_Q5_1: return q5_1;
    case TQ_GGML_Q4_K: return q4_k;
    case TQ_GGML_Q5_K: return q5_k;
    case TQ_GGML_Q6_K: return q6_k;
    default: return NULL;
    }
}

int tq_ggml_can_quantize(int type)
{
    return block_fn(type) != NULL || type == TQ_GGML_F32 || type == TQ_GGML_F16 ||
           type == TQ_GGML_BF16;
}

tq_status tq_ggml_quantize(int type, const float *src, int64_t n, void *dst, size_t dst_cap)
{
    if (!src || !dst || n < 0)
        return TQ_FAIL(TQ_E_ARG, "tq_ggml_quantize: NULL buffer or negative count");
    if (!tq_ggml_can_quantize(type))
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq_ggml_quantize: no quantizer for type %s (%d); "
                       "supported: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K",
                       tq_ggml_type_name(type), type);
    size_t need;
    tq_status st = tq_ggml_nbytes(type, n, &need);
    if (st)
        return st;
    if (dst_cap < need)
        return TQ_FAIL(TQ_E_ARG, "tq_ggml_quantize: %s of %lld values needs %zu bytes, got %zu",
                       tq_ggml_type_name(type), (long long)n, need, dst_cap);
    uint8_t *o = dst;
    if (type == TQ_GGML_F32) {
        memcpy(o, src, (size_t)n * 4);
        return TQ_OK;
    }
    if (type == TQ_GGML_F16 || type == TQ_GGML_BF16) {
        for (int64_t i = 0; i < n; i++)
            tq_wr16(o + 2 * i, type == TQ_GGML_F16 ? tq_f32_to_f16(src[i]) : tq_f32_to_bf16(src[i]));
        return TQ_OK;
    }
    const qblock_fn fn = block_fn(type);
    const int64_t bs = tq_ggml_block_size(type);
    const size_t bb = tq_ggml_type_size(type);
    for (int64_t i = 0; i < n / bs; i++)
        fn(src + i * bs, o + (size_t)i * bb);
    (void)get_f16;
    return TQ_OK;
}
