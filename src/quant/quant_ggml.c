/* quant_ggml.c -- f32 -> GGUF block quantizers (the inverse direction of src/io/dequant.c),
 * written from the published block layouts (docs/FORMAT.md "GGUF block types";
 * weights-reference.md 6.2).
 *
 * Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 follow the reference rules of ggml (the ones the `gguf` Python
 * package re-implements), so their bytes equal that package's quantize() output
 * (tests/test_quant_blocks.c checks it on golden data). The K types (Q4_K Q5_K Q6_K) have no
 * reference quantizer in that package; ours searches the sub-block scales (see "K types"
 * below) and never writes a block with a larger weighted error than the plain min/max fit;
 * the decoded values are checked against the package's dequantization and against round-trip
 * error bounds. IQ4_NL (no reference quantizer in that package either): a scale search, see
 * "IQ4_NL" below. No allocation; pure functions
 * (the library builds with -ffp-contract=off). */
#include <math.h>
#include <string.h>

#include "common/formats.h"
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

/* ---- K types (256-element super-blocks) ------------------------------------------------------
 * Two candidates per super-block, the one with the smaller weighted squared error is written:
 *  RTN:    per sub-block min/max fit, sub-scales rounded against the super-block scale, every
 *          weight rounded to nearest (the first quantizer of this file);
 *  search: per sub-block a search over the scale (a few grid points around the min/max fit,
 *          each followed by a weighted least-squares fit of scale and offset to the codes it
 *          gives), the idea of ggml's make_qkx2_quants / make_qx_quants (its reference
 *          quantizers, which llama-quantize uses without an imatrix); then the sub-scales are
 *          rounded to their 6/8-bit codes and, ours, the super-block scales (d, dmin) are
 *          refitted by least squares to the final codes, kept while that lowers the error.
 * Weights of the error (ggml's choice for K types): w = rms(sub-block) + |x|. So the written
 * block never has a larger weighted error than RTN (tests/test_quant_blocks.c checks it). */
static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static int rnd(float v)
{
    return (int)nearbyintf(v);
}

static float f16r(float v)
{
    return tq_f16_to_f32(tq_f32_to_f16(v));
}

/* the error weights of one sub-block of n */
static void err_weights(const float *x, int n, float *w)
{
    float s2 = 0.0f;
    for (int l = 0; l < n; l++)
        s2 += x[l] * x[l];
    const float av = sqrtf(s2 / (float)n);
    for (int l = 0; l < n; l++)
        w[l] = av + fabsf(x[l]);
}

/* A Q4_K / Q5_K super-block before packing: w = d*sc*q - dmin*m, q in [0, qmax]. */
typedef struct kblk {
    float d, dmin; /* f16-exact */
    int sc[8], mi[8], q[256];
} kblk;

static double kblk_err(const kblk *k, const float *x, const float *w)
{
    double e = 0.0;
    for (int j = 0; j < 8; j++) {
        const float S = k->d * (float)k->sc[j], M = k->dmin * (float)k->mi[j];
        for (int l = 0; l < 32; l++) {
            const double r = (double)(S * (float)k->q[32 * j + l] - M) - x[32 * j + l];
            e += w[32 * j + l] * r * r;
        }
    }
    return e;
}

/* codes for fixed d, dmin, sc, mi */
static void kblk_codes(kblk *k, const float *x, int qmax)
{
    for (int j = 0; j < 8; j++) {
        const float S = k->d * (float)k->sc[j], M = k->dmin * (float)k->mi[j];
        const float iS = S > 0.0f ? 1.0f / S : 0.0f;
        for (int l = 0; l < 32; l++)
            k->q[32 * j + l] = S > 0.0f ? clampi(rnd((x[32 * j + l] + M) * iS), 0, qmax) : 0;
    }
}

/* RTN: min/max fit (the offset never above 0), sub-scales against d = max/63 */
static void k_rtn(const float *x, int qmax, kblk *k)
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
    k->d = f16r(smax / 63.0f);
    k->dmin = f16r(mmax / 63.0f);
    for (int j = 0; j < 8; j++) {
        k->sc[j] = k->d > 0.0f ? clampi(rnd(s[j] / k->d), 0, 63) : 0;
        k->mi[j] = k->dmin > 0.0f ? clampi(rnd(m[j] / k->dmin), 0, 63) : 0;
        /* a rounded-down scale would clip the top; take the next step up when that helps */
        if (k->sc[j] < 63 && k->d > 0.0f && k->d * (float)k->sc[j] * (float)qmax < s[j] * (float)qmax)
            k->sc[j]++;
    }
    kblk_codes(k, x, qmax);
}

/* one sub-block of n: the (scale, offset <= 0) of least weighted error over a grid of inverse
 * scales (qmax + rmin + rdelta * i) / (max - min), i = 0..nstep, and the min/max fit itself */
static float fit_min_scale(const float *x, const float *w, int n, int qmax, float rmin,
                           float rdelta, int nstep, float *off)
{
    float lo = x[0], hi = x[0], sw = 0.0f, swx = 0.0f;
    for (int l = 0; l < n; l++) {
        lo = x[l] < lo ? x[l] : lo;
        hi = x[l] > hi ? x[l] : hi;
        sw += w[l];
        swx += w[l] * x[l];
    }
    lo = lo < 0.0f ? lo : 0.0f;
    if (hi <= lo) {
        *off = lo;
        return 0.0f;
    }
    float bs = (hi - lo) / (float)qmax, bo = lo, best = 0.0f;
    for (int l = 0; l < n; l++) {
        const int q = clampi(rnd((x[l] - lo) / bs), 0, qmax);
        const float r = bs * (float)q + lo - x[l];
        best += w[l] * r * r;
    }
    for (int i = 0; i <= nstep; i++) {
        const float is = ((float)qmax + rmin + rdelta * (float)i) / (hi - lo);
        float sl = 0.0f, sl2 = 0.0f, sxl = 0.0f;
        int q[32];
        for (int l = 0; l < n; l++) {
            q[l] = clampi(rnd((x[l] - lo) * is), 0, qmax);
            sl += w[l] * (float)q[l];
            sl2 += w[l] * (float)(q[l] * q[l]);
            sxl += w[l] * (float)q[l] * x[l];
        }
        const float D = sw * sl2 - sl * sl;
        if (!(D > 0.0f))
            continue;
        float s = (sw * sxl - swx * sl) / D, o = (sl2 * swx - sl * sxl) / D;
        if (o > 0.0f) {
            o = 0.0f;
            s = sxl / sl2;
        }
        if (!(s > 0.0f))
            continue;
        float e = 0.0f;
        for (int l = 0; l < n; l++) {
            const float r = s * (float)q[l] + o - x[l];
            e += w[l] * r * r;
        }
        if (e < best) {
            best = e;
            bs = s;
            bo = o;
        }
    }
    *off = bo;
    return bs;
}

/* least-squares refit of (d, dmin) to the codes; kept while it lowers the error */
static void k_refit(kblk *k, const float *x, const float *w, int qmax, double *err)
{
    for (int it = 0; it < 3; it++) {
        double aa = 0, ab = 0, bb = 0, ax = 0, bx = 0;
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++) {
                const double a = (double)k->sc[j] * k->q[32 * j + l], b = -(double)k->mi[j];
                const double wx = w[32 * j + l], xv = x[32 * j + l];
                aa += wx * a * a;
                ab += wx * a * b;
                bb += wx * b * b;
                ax += wx * a * xv;
                bx += wx * b * xv;
            }
        const double D = aa * bb - ab * ab;
        if (!(D > 0.0))
            return;
        kblk t = *k;
        t.d = f16r((float)((ax * bb - ab * bx) / D));
        t.dmin = f16r((float)((aa * bx - ab * ax) / D));
        if (!(t.d > 0.0f) || !(t.dmin >= 0.0f))
            return;
        kblk_codes(&t, x, qmax);
        const double e = kblk_err(&t, x, w);
        if (!(e < *err))
            return;
        *k = t;
        *err = e;
    }
}

static void k_search(const float *x, const float *w, int qmax, kblk *k)
{
    float s[8], m[8], smax = 0.0f, mmax = 0.0f;
    const float rmin = qmax == 15 ? -1.0f : -0.5f;
    const int nstep = qmax == 15 ? 20 : 15;
    for (int j = 0; j < 8; j++) {
        float o;
        s[j] = fit_min_scale(x + 32 * j, w + 32 * j, 32, qmax, rmin, 0.1f, nstep, &o);
        m[j] = -o;
        smax = s[j] > smax ? s[j] : smax;
        mmax = m[j] > mmax ? m[j] : mmax;
    }
    const float is = smax > 0.0f ? 63.0f / smax : 0.0f, im = mmax > 0.0f ? 63.0f / mmax : 0.0f;
    k->d = f16r(smax / 63.0f);
    k->dmin = f16r(mmax / 63.0f);
    for (int j = 0; j < 8; j++) {
        k->sc[j] = clampi(rnd(is * s[j]), 0, 63);
        k->mi[j] = clampi(rnd(im * m[j]), 0, 63);
    }
    kblk_codes(k, x, qmax);
}

/* the better of RTN and the search (weighted error); writes d, dmin, scales[12]; q out */
static void k_scales(const float *x, int qmax, uint8_t *b, int *q, int search)
{
    float w[256];
    for (int j = 0; j < 8; j++)
        err_weights(x + 32 * j, 32, w + 32 * j);
    kblk r, s;
    k_rtn(x, qmax, &r);
    const kblk *k = &r;
    if (search) {
        k_search(x, w, qmax, &s);
        double es = kblk_err(&s, x, w);
        k_refit(&s, x, w, qmax, &es);
        k = es < kblk_err(&r, x, w) ? &s : &r;
    }
    put_f16(b, k->d);
    put_f16(b + 2, k->dmin);
    uint8_t *o = b + 4;
    memset(o, 0, 12);
    for (int j = 0; j < 4; j++) {
        o[j] = (uint8_t)(k->sc[j] & 63);
        o[j + 4] = (uint8_t)(k->mi[j] & 63);
    }
    for (int j = 4; j < 8; j++) {
        o[j + 4] = (uint8_t)((k->sc[j] & 15) | (k->mi[j] & 15) << 4);
        o[j - 4] |= (uint8_t)((k->sc[j] >> 4) << 6);
        o[j] |= (uint8_t)((k->mi[j] >> 4) << 6);
    }
    memcpy(q, k->q, sizeof(k->q));
}

static void q4_k_impl(const float *x, uint8_t *b, int search)
{
    int q[256];
    k_scales(x, 15, b, q, search);
    uint8_t *qs = b + 16;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
}

static void q5_k_impl(const float *x, uint8_t *b, int search)
{
    int q[256];
    k_scales(x, 31, b, q, search);
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
typedef struct k6blk {
    float d;
    int sc[16], q[256]; /* q signed, [-32, 31] */
} k6blk;

static double k6_err(const k6blk *k, const float *x, const float *w)
{
    double e = 0.0;
    for (int j = 0; j < 16; j++) {
        const float S = k->d * (float)k->sc[j];
        for (int l = 0; l < 16; l++) {
            const double r = (double)(S * (float)k->q[16 * j + l]) - x[16 * j + l];
            e += w[16 * j + l] * r * r;
        }
    }
    return e;
}

static void k6_codes(k6blk *k, const float *x)
{
    for (int j = 0; j < 16; j++) {
        const float S = k->d * (float)k->sc[j];
        const float iS = S != 0.0f ? 1.0f / S : 0.0f;
        for (int l = 0; l < 16; l++)
            k->q[16 * j + l] = S != 0.0f ? clampi(rnd(x[16 * j + l] * iS), -32, 31) : 0;
    }
}

/* sub-scales -> int8 codes against d = smax / -128 (smax: the sub-scale of largest magnitude) */
static void k6_from_scales(k6blk *k, const float *s, const float *x)
{
    float amax = 0.0f, smax = 0.0f;
    for (int j = 0; j < 16; j++)
        if (fabsf(s[j]) > amax) {
            amax = fabsf(s[j]);
            smax = s[j];
        }
    k->d = f16r(smax / -128.0f);
    for (int j = 0; j < 16; j++)
        k->sc[j] = k->d != 0.0f ? clampi(rnd(s[j] / k->d), -128, 127) : 0;
    k6_codes(k, x);
}

/* one sub-block of 16, symmetric: the signed scale of least x^2-weighted error over inverse
 * scales -(32 + 0.1 i) / max, i = -9..9 (max: the element of largest magnitude, sign kept) */
static float fit_sym_scale(const float *x, int n)
{
    const float mx = signed_absmax(x, n);
    if (mx == 0.0f)
        return 0.0f;
    float best = -1.0f, bs = mx / -32.0f;
    for (int i = -9; i <= 9; i++) {
        const float is = -(32.0f + 0.1f * (float)i) / mx;
        float sxl = 0.0f, sl2 = 0.0f;
        for (int l = 0; l < n; l++) {
            const int q = clampi(rnd(is * x[l]), -32, 31);
            const float wl = x[l] * x[l];
            sxl += wl * x[l] * (float)q;
            sl2 += wl * (float)(q * q);
        }
        /* the error at the optimal scale sxl/sl2 is sum w x^2 - sxl^2/sl2: maximise sxl^2/sl2 */
        if (sl2 > 0.0f && sxl * sxl / sl2 > best) {
            best = sxl * sxl / sl2;
            bs = sxl / sl2;
        }
    }
    return bs;
}

static void q6_k_impl(const float *x, uint8_t *b, int search)
{
    float w[256], s[16];
    for (int j = 0; j < 16; j++)
        err_weights(x + 16 * j, 16, w + 16 * j);
    k6blk r, k;
    for (int j = 0; j < 16; j++)
        s[j] = signed_absmax(x + 16 * j, 16) / -32.0f;
    k6_from_scales(&r, s, x);
    for (int j = 0; j < 16; j++)
        s[j] = search ? fit_sym_scale(x + 16 * j, 16) : s[j];
    k6_from_scales(&k, s, x);
    double es = k6_err(&k, x, w);
    for (int it = 0; search && it < 3; it++) { /* refit d to the codes */
        double aa = 0.0, ax = 0.0;
        for (int j = 0; j < 16; j++)
            for (int l = 0; l < 16; l++) {
                const double a = (double)k.sc[j] * k.q[16 * j + l];
                aa += w[16 * j + l] * a * a;
                ax += w[16 * j + l] * a * x[16 * j + l];
            }
        if (!(aa > 0.0))
            break;
        k6blk t = k;
        t.d = f16r((float)(ax / aa));
        k6_codes(&t, x);
        const double e = k6_err(&t, x, w);
        if (!(e < es))
            break;
        k = t;
        es = e;
    }
    const k6blk *o = search && es < k6_err(&r, x, w) ? &k : &r;
    int q[256];
    for (int i = 0; i < 256; i++)
        q[i] = o->q[i] + 32;
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
    for (int j = 0; j < 16; j++)
        b[192 + j] = (uint8_t)(int8_t)o->sc[j];
    put_f16(b + 208, o->d);
}

static void q4_k(const float *x, uint8_t *b)
{
    q4_k_impl(x, b, 1);
}

static void q5_k(const float *x, uint8_t *b)
{
    q5_k_impl(x, b, 1);
}

static void q6_k(const float *x, uint8_t *b)
{
    q6_k_impl(x, b, 1);
}

int tq_ggml_quantize_k_rtn(int type, const float *x, uint8_t *block)
{
    switch (type) {
    case TQ_GGML_Q4_K: q4_k_impl(x, block, 0); return 0;
    case TQ_GGML_Q5_K: q5_k_impl(x, block, 0); return 0;
    case TQ_GGML_Q6_K: q6_k_impl(x, block, 0); return 0;
    default: return -1;
    }
}

/* ---- searched 32-blocks (the pipeline's default; tq_ggml_quantize() keeps ggml's rules) ----
 * Q4_0 / Q5_0: candidate scales d = max / -(nmax + 0.1 i), i = -9..9 (max: the element of
 * largest magnitude, sign kept), each followed by the weighted least-squares d for the codes
 * it gives (rounded to f16, codes re-rounded); Q4_1 / Q5_1: the grid and two-parameter fit of
 * the K types without the offset <= 0 limit. The reference block (ggml's rule) is a candidate
 * too, so the written block never has a larger weighted error (w = rms(block) + |x|) than the
 * one llama-quantize writes without an imatrix: same bytes per block, less error. */
static double blk_err(int type, const uint8_t *b, const float *x, const float *w)
{
    float y[32];
    tq_ggml_dequant_ref(type, b, tq_ggml_type_size(type), y, 32);
    double e = 0.0;
    for (int l = 0; l < 32; l++)
        e += w[l] * ((double)y[l] - x[l]) * ((double)y[l] - x[l]);
    return e;
}

/* symmetric: codes q in [-nmax, nmax - 1] stored as q + nmax, w = d * q */
static void put_sym(int type, float d, const float *x, uint8_t *b)
{
    const int nmax = type == TQ_GGML_Q4_0 ? 8 : 16;
    d = f16r(d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    for (int l = 0; l < 32; l++)
        q[l] = clampi(rnd(x[l] * id), -nmax, nmax - 1) + nmax;
    put_f16(b, d);
    if (type == TQ_GGML_Q4_0)
        for (int j = 0; j < 16; j++)
            b[2 + j] = (uint8_t)(q[j] | q[j + 16] << 4);
    else
        pack5(q, b + 2, b + 6);
}

/* asymmetric: w = d * q + m, q in [0, qmax] */
static void put_asym(int type, float d, float m, const float *x, uint8_t *b)
{
    const int qmax = type == TQ_GGML_Q4_1 ? 15 : 31;
    d = f16r(d);
    m = f16r(m);
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    for (int l = 0; l < 32; l++)
        q[l] = clampi(rnd((x[l] - m) * id), 0, qmax);
    put_f16(b, d);
    put_f16(b + 2, m);
    if (type == TQ_GGML_Q4_1)
        for (int j = 0; j < 16; j++)
            b[4 + j] = (uint8_t)(q[j] | q[j + 16] << 4);
    else
        pack5(q, b + 4, b + 8);
}

static void search32(int type, const float *x, uint8_t *b)
{
    float w[32];
    err_weights(x, 32, w);
    uint8_t t[24];
    const size_t bb = tq_ggml_type_size(type);
    switch (type) { /* the reference block first */
    case TQ_GGML_Q4_0: q4_0(x, b); break;
    case TQ_GGML_Q5_0: q5_0(x, b); break;
    case TQ_GGML_Q4_1: q4_1(x, b); break;
    default: q5_1(x, b); break;
    }
    double best = blk_err(type, b, x, w);
    if (type == TQ_GGML_Q4_0 || type == TQ_GGML_Q5_0) {
        const int nmax = type == TQ_GGML_Q4_0 ? 8 : 16;
        const float mx = signed_absmax(x, 32);
        if (mx == 0.0f)
            return;
        for (int i = -9; i <= 9; i++) {
            const float is = -((float)nmax + 0.1f * (float)i) / mx;
            float sxl = 0.0f, sl2 = 0.0f;
            for (int l = 0; l < 32; l++) {
                const int q = clampi(rnd(is * x[l]), -nmax, nmax - 1);
                sxl += w[l] * x[l] * (float)q;
                sl2 += w[l] * (float)(q * q);
            }
            const float cand[2] = {1.0f / is, sl2 > 0.0f ? sxl / sl2 : 0.0f};
            for (int k = 0; k < 2; k++) {
                if (cand[k] == 0.0f)
                    continue;
                put_sym(type, cand[k], x, t);
                const double e = blk_err(type, t, x, w);
                if (e < best) {
                    best = e;
                    memcpy(b, t, bb);
                }
            }
        }
        return;
    }
    const int qmax = type == TQ_GGML_Q4_1 ? 15 : 31;
    float lo, hi, sw = 0.0f, swx = 0.0f;
    minmax(x, 32, &lo, &hi);
    if (hi <= lo)
        return;
    for (int l = 0; l < 32; l++) {
        sw += w[l];
        swx += w[l] * x[l];
    }
    for (int i = 0; i <= 20; i++) {
        const float is = ((float)qmax - 1.0f + 0.1f * (float)i) / (hi - lo);
        float sl = 0.0f, sl2 = 0.0f, sxl = 0.0f;
        for (int l = 0; l < 32; l++) {
            const int q = clampi(rnd((x[l] - lo) * is), 0, qmax);
            sl += w[l] * (float)q;
            sl2 += w[l] * (float)(q * q);
            sxl += w[l] * (float)q * x[l];
        }
        const float D = sw * sl2 - sl * sl;
        if (!(D > 0.0f))
            continue;
        const float d = (sw * sxl - swx * sl) / D, m = (sl2 * swx - sl * sxl) / D;
        if (!(d > 0.0f))
            continue;
        put_asym(type, d, m, x, t);
        const double e = blk_err(type, t, x, w);
        if (e < best) {
            best = e;
            memcpy(b, t, bb);
        }
    }
}

tq_status tq_ggml_quantize_search(int type, const float *src, int64_t n, void *dst, size_t dst_cap)
{
    if (type != TQ_GGML_Q4_0 && type != TQ_GGML_Q5_0 && type != TQ_GGML_Q4_1 &&
        type != TQ_GGML_Q5_1)
        return tq_ggml_quantize(type, src, n, dst, dst_cap);
    size_t need;
    if (!src || !dst || n < 0 || tq_ggml_nbytes(type, n, &need) || dst_cap < need)
        return tq_ggml_quantize(type, src, n, dst, dst_cap); /* its error message */
    uint8_t *o = dst;
    for (int64_t i = 0; i < n / 32; i++)
        search32(type, src + 32 * i, o + (size_t)i * tq_ggml_type_size(type));
    return TQ_OK;
}

/* ---- IQ4_NL ----------------------------------------------------------------------------------
 * w = d * v[q], v = tq_iq4nl_values (16 non-linear int8 levels, -127 .. 113: not symmetric, so
 * the sign of d picks which end of the table the block's largest element lands on). The gguf
 * package has no quantizer for it (dequantization only); ours, written from the layout: for
 * both signs of d and 9 stretches (the element of largest magnitude mapped to -127 or 113,
 * times 1 + 0.025 i, i = -4..4), the nearest levels, then the weighted least-squares d for
 * those levels; every candidate d is rounded to f16 and the levels re-chosen for it; the block
 * with the least weighted error (w = rms(block) + |x|, as the searched 32-blocks) is written.
 * The plain fit (largest element at -127) is one of the candidates (test_quant_blocks). */
/* index of the level nearest t (ties: the lower one). lower[c + 128] = the largest k with
 * v[k] <= c for the integer c = floor(t) in [-127, 113): then v[k] <= t < v[k + 1] (the levels
 * are integers), and one comparison picks between them. */
static int iq4_nearest(float t)
{
    const int8_t *const v = tq_iq4nl_values;
    if (!(t > (float)v[0]))
        return 0; /* also NaN */
    if (t >= (float)v[15])
        return 15;
    static _Thread_local int8_t lower[256];
    static _Thread_local int init;
    if (!init) {
        for (int c = -128, k = 0; c < 128; c++) {
            while (k < 15 && v[k + 1] <= c)
                k++;
            lower[c + 128] = (int8_t)k;
        }
        init = 1;
    }
    const int k = lower[(int)floorf(t) + 128];
    return t - (float)v[k] <= (float)v[k + 1] - t ? k : k + 1;
}

/* the block of scale f16(d) with each element's nearest level; returns its weighted error */
static double iq4_put(float d, const float *x, const float *w, uint8_t *b)
{
    d = f16r(d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    double e = 0.0;
    for (int l = 0; l < 32; l++) {
        q[l] = iq4_nearest(x[l] * id);
        const double r = (double)(d * (float)tq_iq4nl_values[q[l]]) - x[l];
        e += w[l] * r * r;
    }
    put_f16(b, d);
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(q[j] | q[j + 16] << 4);
    return e;
}

static void iq4_nl(const float *x, uint8_t *b)
{
    float w[32];
    err_weights(x, 32, w);
    const float mx = signed_absmax(x, 32);
    double best = iq4_put(mx / -127.0f, x, w, b); /* the plain fit */
    if (mx == 0.0f)
        return;
    uint8_t t[18];
    for (int end = 0; end < 2; end++)
        for (int i = -4; i <= 4; i++) {
            const float lv = end ? 113.0f : -127.0f;
            const float is = lv * (1.0f + 0.025f * (float)i) / mx;
            float sxv = 0.0f, sv2 = 0.0f;
            for (int l = 0; l < 32; l++) {
                const float v = (float)tq_iq4nl_values[iq4_nearest(x[l] * is)];
                sxv += w[l] * x[l] * v;
                sv2 += w[l] * v * v;
            }
            const float cand[2] = {1.0f / is, sv2 > 0.0f ? sxv / sv2 : 0.0f};
            for (int k = 0; k < 2; k++) {
                if (!(cand[k] != 0.0f) || !isfinite(cand[k]))
                    continue;
                const double e = iq4_put(cand[k], x, w, t);
                if (e < best) {
                    best = e;
                    memcpy(b, t, 18);
                }
            }
        }
}

int tq_ggml_quantize_iq4_nl_plain(const float *x, uint8_t *block)
{
    float w[32];
    err_weights(x, 32, w);
    iq4_put(signed_absmax(x, 32) / -127.0f, x, w, block);
    return 0;
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
    case TQ_GGML_IQ4_NL: return iq4_nl;
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
                       "supported: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K IQ4_NL",
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
