/* kv_rot.c -- the scalar reference of the rotated block KV schemes (TQ_KV_ROT, "rot:..."):
 * Hadamard-rotate a K or V row, then code it in 32-element blocks. The codes q8_0, q5_0, q4_0
 * and iq4_nl reproduce the bytes and the encoder semantics of ggml's reference quantizers
 * (quantize_row_*_ref in ggml-quants.c, as vendored by llama-cpp-python 0.3.36), so a rotated
 * row here is a ggml row of that type. Written from the semantics, not copied.
 *
 * Rotation (same as llama.cpp's KV cache, src/llama-kv-cache.cpp build_input_{k,v}_rot):
 * the plain (unsigned) orthonormal Walsh-Hadamard transform H = Sylvester / sqrt(n):
 *   K: one transform over n_k = the largest power of two (>= 64) that divides head_dim;
 *   V: independent transforms over consecutive 64-element slices.
 * H is symmetric and orthogonal (H H = I), so decode = dequantize, then H again. Rotating the
 * stored row and un-rotating it at decode is the same attention as llama.cpp's "rotate Q and K,
 * attend, un-rotate the output": (Hq).deq(Hk) = q.(H deq(Hk)) and sum_t w_t H deq(Hv_t) =
 * H sum_t w_t deq(Hv_t), equal up to float rounding.
 * Plain C, no intrinsics, built with -ffp-contract=off; no allocation. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "core/half.h"
#include "cpu/kv_cpu.h"
#include "kv/kv_internal.h"

/* ---- rotation ----------------------------------------------------------------------------- */

int tq_kv_rot_size(int is_v, int d)
{
    if (is_v)
        return 64;
    int n = 64;
    while (n * 2 <= d && d % (n * 2) == 0)
        n *= 2;
    return n;
}

/* in place: butterflies over each n-slice, then * float32(1/sqrt(n)) */
void tq_kv_rot_apply(float *u, int d, int is_v)
{
    const int n = tq_kv_rot_size(is_v, d);
    const float s = 1.0f / sqrtf((float)n);
    for (int o = 0; o < d; o += n) {
        tq_kv_fwht_butterflies(u + o, n);
        for (int j = 0; j < n; j++)
            u[o + j] *= s;
    }
}

/* ---- ggml block codes (32 elements) --------------------------------------------------------- */

static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

const int8_t *tq_kv_iq4nl_values(void)
{
    return iq4nl_values;
}

/* the element of largest |x| (first one on ties), and its |x|; NaN never wins (ggml) */
static float block_signed_max(const float *x, float *amax_out)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    *amax_out = amax;
    return max;
}

/* float -> int truncation toward zero for t in [lo, hi]; NaN/outside -> fallback (ggml's
 * (int8_t) cast is undefined there) */
static int trunc_in(float t, int lo, int hi, int fallback)
{
    if (!(t >= (float)lo && t < (float)hi + 1.0f))
        return fallback;
    return (int)t;
}

static void enc_q8_0(const float *x, uint8_t *b)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]); /* ggml MAX: NaN loses */
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    tq_wr16(b, tq_kv_f16(d));
    for (int j = 0; j < 32; j++) {
        const float r = roundf(x[j] * id);
        b[2 + j] = (uint8_t)(int8_t)(r == r && r >= -128.0f && r <= 127.0f ? (int)r : 0);
    }
}

static void dec_q8_0(const uint8_t *b, float *y)
{
    const float d = tq_f16_to_f32(tq_rd16(b));
    for (int j = 0; j < 32; j++)
        y[j] = (float)(int8_t)b[2 + j] * d;
}

static void enc_q4_0(const float *x, uint8_t *b)
{
    float amax;
    const float max = block_signed_max(x, &amax);
    const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    tq_wr16(b, tq_kv_f16(d));
    for (int j = 0; j < 16; j++) {
        int q0 = trunc_in(x[j] * id + 8.5f, 0, 127, 8);
        int q1 = trunc_in(x[j + 16] * id + 8.5f, 0, 127, 8);
        q0 = q0 < 15 ? q0 : 15;
        q1 = q1 < 15 ? q1 : 15;
        b[2 + j] = (uint8_t)(q0 | q1 << 4);
    }
}

static void dec_q4_0(const uint8_t *b, float *y)
{
    const float d = tq_f16_to_f32(tq_rd16(b));
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((b[2 + j] & 15) - 8) * d;
        y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

static void enc_q5_0(const float *x, uint8_t *b)
{
    float amax;
    const float max = block_signed_max(x, &amax);
    const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    uint32_t qh = 0;
    tq_wr16(b, tq_kv_f16(d));
    for (int j = 0; j < 16; j++) {
        int q0 = trunc_in(x[j] * id + 16.5f, 0, 127, 16);
        int q1 = trunc_in(x[j + 16] * id + 16.5f, 0, 127, 16);
        q0 = q0 < 31 ? q0 : 31;
        q1 = q1 < 31 ? q1 : 31;
        b[6 + j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
        qh |= (uint32_t)(q0 >> 4) << j;
        qh |= (uint32_t)(q1 >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++)
        b[2 + k] = (uint8_t)(qh >> (8 * k));
}

static void dec_q5_0(const uint8_t *b, float *y)
{
    const float d = tq_f16_to_f32(tq_rd16(b));
    const uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 |
                        (uint32_t)b[5] << 24;
    for (int j = 0; j < 16; j++) {
        const int q0 = (b[6 + j] & 15) | (int)((qh >> j) & 1u) << 4;
        const int q1 = (b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1u) << 4;
        y[j] = (float)(q0 - 16) * d;
        y[j + 16] = (float)(q1 - 16) * d;
    }
}

/* ggml best_index_int8(): nearest of the sorted grid by bisection, ties to the upper level */
int tq_kv_iq4nl_index(float x)
{
    const int8_t *v = iq4nl_values;
    if (x <= (float)v[0])
        return 0;
    if (x >= (float)v[15])
        return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (x < (float)v[mav])
            mu = mav;
        else
            ml = mav;
    }
    return x - (float)v[mu - 1] < (float)v[mu] - x ? mu - 1 : mu;
}

/* quantize_row_iq4_nl_ref(): d0 = max / -127, indices from d0, then the scale refit
 * d = sum(w q x) / sum(w q^2) with w = x^2 (the _ref path runs no extra scale trials and keeps
 * the indices of d0). A block with absmax < 1e-15 stores d = 0 and index 0 everywhere (ggml
 * zero-fills the nibbles). */
static void enc_iq4_nl(const float *x, uint8_t *b)
{
    float amax;
    const float max = block_signed_max(x, &amax);
    uint8_t L[32];
    memset(b + 2, 0, 16);
    if (amax < 1e-15f) {
        tq_wr16(b, tq_kv_f16(0.0f));
        return;
    }
    const float d0 = max / (float)iq4nl_values[0], id = 1.0f / d0;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < 32; j++) {
        const int l = tq_kv_iq4nl_index(id * x[j]);
        const float q = (float)iq4nl_values[l], w = x[j] * x[j];
        L[j] = (uint8_t)l;
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
    }
    const float d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    tq_wr16(b, tq_kv_f16(d));
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(L[j] | L[j + 16] << 4);
}

static void dec_iq4_nl(const uint8_t *b, float *y)
{
    const float d = tq_f16_to_f32(tq_rd16(b));
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)iq4nl_values[b[2 + j] & 15];
        y[j + 16] = d * (float)iq4nl_values[b[2 + j] >> 4];
    }
}

/* ---- our codes: lm<L>g<G> ----------------------------------------------------------------
 * Block of G (32 or 64) elements: [fp16 scale s][G/2 pair codes, pb bits each, little-endian
 * bitstream] with pb = bits of L*L - 1; pair p holds elements (2p, 2p+1) as i0 + L * i1.
 * Grid (L sorted floats, top = +1) and its L-1 midpoints: src/kv/kv_rot_tables.c, generated by
 * scripts/quality/kv_grid_search.py. Encode (fp32, element order):
 *   m = signed absmax (first largest |x|), mf = (float)f16(m); if mf is 0 or not finite: every
 *   index = the level nearest 0 and s = f16(mf);
 *   else t_j = x_j * (1/mf), i_j = #{k : t_j > B_k}; then TQ_KV_LM_REFITS times: the least-
 *   squares scale s = f16(sum g[i] x / sum g[i]^2) (kept only if finite and nonzero), then
 *   indices again from t_j = x_j * (1/(float)s); the last refit is not followed by new indices.
 * Decode: y_j = g[i_j] * (float)s. */
#define TQ_KV_LM_REFITS 2

static int lm_pair_bits(int L)
{
    int b = 0;
    while ((1 << b) < L * L)
        b++;
    return b;
}

static int lm_index(const tq_kv_lm_code *c, float t)
{
    /* #{k : t > B_k} over the L-1 sorted boundaries, by a halving search whose only decision is
     * a select (no data-dependent branch: encoding a 181-level code was ~8 mispredicted branches
     * per element); the answer stays in [lo, lo + len]. NaN compares false everywhere: 0. */
    int lo = 0, len = c->levels - 1;
    while (len > 1) {
        const int h = len / 2;
        lo = t > c->bnd[lo + h - 1] ? lo + h : lo;
        len -= h;
    }
    return lo + (t > c->bnd[lo]);
}

/* idx[j] = lm_index(c, x[j] * inv) for j < n (n a multiple of 8): the same halving search,
 * 8 elements in lockstep (the step sizes do not depend on the data), so their dependent load
 * chains overlap instead of running one after the other (encode was bound by that latency) */
static void lm_index_n(const tq_kv_lm_code *c, const float *x, float inv, int n, uint8_t *idx)
{
    const float *B = c->bnd;
    for (int j0 = 0; j0 < n; j0 += 8) {
        float t[8];
        int lo[8];
        for (int k = 0; k < 8; k++) {
            t[k] = x[j0 + k] * inv;
            lo[k] = 0;
        }
        int len = c->levels - 1;
        while (len > 1) {
            const int h = len / 2;
            for (int k = 0; k < 8; k++)
                lo[k] = t[k] > B[lo[k] + h - 1] ? lo[k] + h : lo[k];
            len -= h;
        }
        for (int k = 0; k < 8; k++)
            idx[j0 + k] = (uint8_t)(lo[k] + (t[k] > B[lo[k]]));
    }
}

/* nb (<= 16) bits at stream bit bitpos: touches only the (sh + nb + 7) / 8 bytes they occupy */
static void lm_put(uint8_t *p, int bitpos, unsigned v, int nb)
{
    const int sh = bitpos & 7, nbytes = (sh + nb + 7) >> 3;
    const uint32_t w = (uint32_t)v << sh;
    p += bitpos >> 3;
    for (int i = 0; i < nbytes; i++)
        p[i] |= (uint8_t)(w >> (8 * i));
}

static unsigned lm_get(const uint8_t *p, int bitpos, int nb)
{
    const int sh = bitpos & 7, nbytes = (sh + nb + 7) >> 3;
    uint32_t w = 0;
    p += bitpos >> 3;
    for (int i = 0; i < nbytes; i++)
        w |= (uint32_t)p[i] << (8 * i);
    return (unsigned)(w >> sh) & ((1u << nb) - 1u);
}

size_t tq_kv_lm_block_bytes(const tq_kv_lm_code *c)
{
    return 2 + (size_t)(c->group / 2) * (size_t)lm_pair_bits(c->levels) / 8;
}

void tq_kv_lm_encode_block_ref(const tq_kv_lm_code *c, const float *x, uint8_t *b)
{
    const int G = c->group, L = c->levels, pb = lm_pair_bits(L);
    uint8_t idx[64];
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < G; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            m = x[j];
        }
    uint16_t sh = tq_kv_f16(m);
    const float mf = tq_f16_to_f32(sh);
    if (mf == 0.0f || !isfinite(mf)) {
        const int z = lm_index(c, 0.0f);
        for (int j = 0; j < G; j++)
            idx[j] = (uint8_t)z;
    } else {
        float inv = 1.0f / mf;
        lm_index_n(c, x, inv, G, idx);
        for (int r = 0; r < TQ_KV_LM_REFITS; r++) {
            float num = 0.0f, den = 0.0f;
            for (int j = 0; j < G; j++) {
                const float g = c->grid[idx[j]];
                num += g * x[j];
                den += g * g;
            }
            const uint16_t nh = den > 0.0f ? tq_kv_f16(num / den) : sh;
            const float nf = tq_f16_to_f32(nh);
            if (nf == 0.0f || !isfinite(nf))
                break;
            sh = nh;
            if (r + 1 < TQ_KV_LM_REFITS) {
                inv = 1.0f / nf;
                lm_index_n(c, x, inv, G, idx);
            }
        }
    }
    const size_t nbytes = tq_kv_lm_block_bytes(c);
    memset(b, 0, nbytes);
    tq_wr16(b, sh);
    for (int p = 0; p < G / 2; p++)
        lm_put(b + 2, p * pb, (unsigned)idx[2 * p] + (unsigned)L * idx[2 * p + 1], pb);
}

void tq_kv_lm_decode_block_ref(const tq_kv_lm_code *c, const uint8_t *b, float *y)
{
    const int G = c->group, L = c->levels, pb = lm_pair_bits(L);
    const float s = tq_f16_to_f32(tq_rd16(b));
    for (int p = 0; p < G / 2; p++) {
        unsigned v = lm_get(b + 2, p * pb, pb);
        unsigned i0 = v % (unsigned)L, i1 = v / (unsigned)L;
        if (i1 >= (unsigned)L) /* a pair code >= L*L (never written): clamp, no out-of-range read */
            i1 = (unsigned)L - 1;
        y[2 * p] = c->grid[i0] * s;
        y[2 * p + 1] = c->grid[i1] * s;
    }
}

/* ---- code table --------------------------------------------------------------------------- */

typedef struct rot_code {
    const char *name;
    int block_bytes; /* per 32 elements */
    void (*enc)(const float *x, uint8_t *b);
    void (*dec)(const uint8_t *b, float *y);
} rot_code;

static const rot_code codes[TQ_KV_CODE_COUNT] = {
    [TQ_KV_CODE_Q8_0] = {"q8_0", 34, enc_q8_0, dec_q8_0},
    [TQ_KV_CODE_Q5_0] = {"q5_0", 22, enc_q5_0, dec_q5_0},
    [TQ_KV_CODE_Q4_0] = {"q4_0", 18, enc_q4_0, dec_q4_0},
    [TQ_KV_CODE_IQ4_NL] = {"iq4_nl", 18, enc_iq4_nl, dec_iq4_nl},
};

static const tq_kv_lm_code *lm_of(int code)
{
    const int i = code - TQ_KV_CODE_LM;
    return i >= 0 && i < tq_kv_lm_n_codes ? &tq_kv_lm_codes[i] : NULL;
}

int tq_kv_code_ok(int code)
{
    return (code > 0 && code < TQ_KV_CODE_COUNT && codes[code].name) || lm_of(code);
}

const char *tq_kv_code_name(int code)
{
    const tq_kv_lm_code *c = lm_of(code);
    if (c)
        return c->name;
    return code > 0 && code < TQ_KV_CODE_COUNT ? codes[code].name : NULL;
}

int tq_kv_code_from_name(const char *s, size_t len)
{
    for (int c = 1; c < TQ_KV_CODE_COUNT; c++)
        if (codes[c].name && strlen(codes[c].name) == len && !strncmp(codes[c].name, s, len))
            return c;
    for (int i = 0; i < tq_kv_lm_n_codes; i++)
        if (strlen(tq_kv_lm_codes[i].name) == len && !strncmp(tq_kv_lm_codes[i].name, s, len))
            return TQ_KV_CODE_LM + i;
    return 0;
}

/* elements per block and bytes per block of a code */
static int code_group(int code)
{
    const tq_kv_lm_code *c = lm_of(code);
    return c ? c->group : 32;
}

static size_t code_block_bytes(int code)
{
    const tq_kv_lm_code *c = lm_of(code);
    return c ? tq_kv_lm_block_bytes(c) : (size_t)codes[code].block_bytes;
}

size_t tq_kv_rot_row_bytes(int code, int d)
{
    if (!tq_kv_code_ok(code) || d <= 0 || d % code_group(code))
        return 0;
    return (size_t)(d / code_group(code)) * code_block_bytes(code);
}

int tq_kv_rot_dim_ok(int d)
{
    return d > 0 && d % 64 == 0 && d <= TQ_KV_MAX_HEAD_DIM;
}

void tq_kv_rot_encode_row_ref(int code, int is_v, const float *x, int d, uint8_t *dst)
{
    float u[TQ_KV_MAX_HEAD_DIM];
    const tq_kv_lm_code *lc = lm_of(code);
    const int G = code_group(code);
    const size_t bb = code_block_bytes(code);
    memcpy(u, x, (size_t)d * sizeof(float));
    tq_kv_rot_apply(u, d, is_v);
    for (int o = 0; o < d; o += G) {
        uint8_t *b = dst + (size_t)(o / G) * bb;
        if (lc)
            tq_kv_lm_encode_block_ref(lc, u + o, b);
        else
            codes[code].enc(u + o, b);
    }
}

/* ---- the same bytes with an ISA's kernels ------------------------------------------------------- */

void tq_kv_rot_apply_k(const struct tq_kv_kernels *kk, float *u, int d, int is_v)
{
    if (!kk || !kk->fwht) {
        tq_kv_rot_apply(u, d, is_v);
        return;
    }
    const int n = tq_kv_rot_size(is_v, d);
    const float s = 1.0f / sqrtf((float)n);
    for (int o = 0; o < d; o += n) {
        kk->fwht(u + o, n);
        for (int j = 0; j < n; j++)
            u[o + j] *= s;
    }
}

void tq_kv_rot_encode_row(const struct tq_kv_kernels *kk, int code, int is_v, const float *x,
                          int d, uint8_t *dst)
{
    const tq_kv_lm_code *lc = lm_of(code);
    if (!kk || !kk->enc_lm || !lc) {
        if (kk && kk->fwht && !lc) { /* ggml codes: the rotation only */
            float u[TQ_KV_MAX_HEAD_DIM];
            memcpy(u, x, (size_t)d * sizeof(float));
            tq_kv_rot_apply_k(kk, u, d, is_v);
            for (int o = 0; o < d; o += 32)
                codes[code].enc(u + o, dst + (size_t)(o / 32) * (size_t)codes[code].block_bytes);
            return;
        }
        tq_kv_rot_encode_row_ref(code, is_v, x, d, dst);
        return;
    }
    float u[TQ_KV_MAX_HEAD_DIM];
    memcpy(u, x, (size_t)d * sizeof(float));
    tq_kv_rot_apply_k(kk, u, d, is_v);
    const tq_kv_lm_desc c = {lc->levels, lc->group, lm_pair_bits(lc->levels), TQ_KV_LM_REFITS,
                             lc->grid, lc->bnd};
    kk->enc_lm(&c, u, d / lc->group, dst);
}

void tq_kv_rot_decode_rotated_row_ref(int code, const uint8_t *src, int d, float *out)
{
    const tq_kv_lm_code *lc = lm_of(code);
    const int G = code_group(code);
    const size_t bb = code_block_bytes(code);
    for (int o = 0; o < d; o += G) {
        const uint8_t *b = src + (size_t)(o / G) * bb;
        if (lc)
            tq_kv_lm_decode_block_ref(lc, b, out + o);
        else
            codes[code].dec(b, out + o);
    }
}

void tq_kv_rot_decode_row_ref(int code, int is_v, const uint8_t *src, int d, float *out)
{
    tq_kv_rot_decode_rotated_row_ref(code, src, d, out);
    tq_kv_rot_apply(out, d, is_v);
}
