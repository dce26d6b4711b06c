/* attn_turbo.c -- fused attention over a packed TurboQuant KV cache (see cpu/attn_turbo.h and
 * model/kvcache_turbo.h).
 *
 * Work unit = (kv-head g, block of queries, chunk of keys). Per unit, for each block of
 * TQ_TURBO_KB keys:
 *   1. the packed K rows of the block are dequantized into an L1 buffer (codec kernel of this
 *      ISA, exactly the codec's (q + zero_h) * scale_h), then scored against every query row of
 *      the unit and every query head of g's GQA group: s = scale * dot(q, k) in float (the ISA's
 *      dot kernel), masked causally;
 *   2. the packed V rows are decoded to the ROTATED domain only: y[j] = C[idx_j] * scale_h;
 *   3. online softmax per (query, head), in double: m' = max(m, max_t s_t),
 *      acc = acc * e^(m - m') + sum_t e^(s_t - m') y_t, l likewise.
 * After the last chunk, partial states are merged in chunk order (double), acc / l is
 * un-rotated ONCE in double (tq_kv_unrotate_f64: butterflies, 1/sqrt(d), signs) and rounded to
 * float. sum_t w_t InvFWHT(y_t) * signs = InvFWHT(sum_t w_t y_t) * signs by linearity, so
 * deferring the inverse transform is exact up to rounding. Doing everything after the scores in
 * double makes the output the correctly rounded attention of the float scores in all but rare
 * near-tie elements, so it equals the dequantize-window reference (kvcache_turbo.c), which
 * shares the scores and nothing else (kvcache_turbo.h says why that matters).
 *
 * Keys are taken in chunks of TQ_TURBO_KC at absolute positions, and every row merges its chunk
 * states in chunk order with merge_state(): decode (n_q <= TQ_TURBO_QD) computes the chunks of
 * a kv-head in parallel (two threads share one long window) and merges afterwards; prefill
 * splits over (kv-head, query block) and runs the chunks one after the other. Both make the
 * same operations per row, so a row's floats do not depend on the call it is in (batch
 * invariance).
 * No allocation: every buffer is the caller's per-thread scratch (tq_attn_turbo_view). */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "core/half.h"
#include "common/kv_codec.h"
#include "cpu/attn_turbo.h"
#include "cpu/kv_cpu.h"

/* ---- small kernels: scalar spec ------------------------------------------------------------- */

static float dot_scalar(const float *a, const float *b, int n)
{
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* ---- V rows to the rotated domain --------------------------------------------------------- */

void tq_attn_dec_v_rot_scalar(const uint8_t *row, int d, int vb, double *out)
{
    const float *C = tq_kv_centroids(vb);
    const uint8_t *sc = tq_kv_turbo_v_scales(row, d, vb);
    uint8_t idx[TQ_KV_GROUP];
    for (int g = 0; g < d / TQ_KV_GROUP; g++) {
        const float s = tq_f16_to_f32(tq_rd16(sc + 2 * g));
        if (vb == 8)
            memcpy(idx, row + g * TQ_KV_GROUP, TQ_KV_GROUP);
        else
            kv_unpack32(row + (size_t)g * 4 * vb, vb, idx);
        double *o = out + g * TQ_KV_GROUP;
        for (int j = 0; j < TQ_KV_GROUP; j++) {
            const float y = C[idx[j]] * s; /* the float product, then widened */
            o[j] = y;
        }
    }
}

/* the scalar specification of one head's block update */
static void block_scalar(const float *q, const float *K, const double *V, int nv, int hd,
                         float scale, double *S, float *sc, double *p)
{
    float bm = -INFINITY;
    for (int k = 0; k < nv; k++) {
        sc[k] = scale * dot_scalar(q, K + (size_t)k * hd, hd);
        bm = sc[k] > bm ? sc[k] : bm;
    }
    const double mn = bm > S[0] ? bm : S[0];
    if (mn > S[0] && S[1] != 0.0) {
        const double corr = exp(S[0] - mn);
        S[1] *= corr;
        for (int d = 0; d < hd; d++)
            S[2 + d] *= corr;
    }
    S[0] = mn;
    double l = S[1];
    for (int k = 0; k < nv; k++) {
        p[k] = exp((double)sc[k] - mn);
        l += p[k];
    }
    for (int k = 0; k < nv; k++)
        for (int d = 0; d < hd; d++)
            S[2 + d] += p[k] * V[(size_t)k * hd + d];
    S[1] = l;
}

const tq_attn_kernels tq_attn_kernels_scalar = {dot_scalar, tq_attn_dec_v_rot_scalar,
                                               block_scalar, NULL};

const tq_attn_kernels *tq_attn_kernels_pick(void)
{
#if defined(__x86_64__)
    const tq_isa isa = tq_cpu_isa();
    if (isa >= TQ_ISA_AVX512)
        return &tq_attn_kernels_avx512;
    if (isa >= TQ_ISA_AVX2)
        return &tq_attn_kernels_avx2;
#endif
    return &tq_attn_kernels_scalar;
}

/* ---- the fused kernel ---------------------------------------------------------------------- */

typedef struct fjob {
    const tq_attn_turbo_view *v;
    const float *q; /* (n_q, n_heads, hd), rotated when rot_k */
    int64_t n_q, pos0;
    float *out;
    int chunked;
    int64_t n_qb, n_ch; /* query blocks, key chunks per kv-head */
    const tq_kv_kernels *kk;
    const tq_attn_kernels *ak;
} fjob;

/* A <- A merged with the partial state S of the next key chunk (state [m, l, acc[hd]], l = 0:
 * no key yet), in double. Decode (chunks computed in parallel, merged afterwards) and prefill
 * (chunks one after the other) both merge every row's chunks with this, in chunk order, so a
 * query row gets the same floats alone and inside a block of rows. */
static void merge_state(double *A, const double *S, size_t stride)
{
    if (S[1] == 0.0)
        return;
    if (A[1] == 0.0) {
        memcpy(A, S, stride * sizeof(double));
        return;
    }
    const double M = A[0] > S[0] ? A[0] : S[0];
    const double wa = exp(A[0] - M), ws = exp(S[0] - M);
    for (size_t e = 1; e < stride; e++)
        A[e] = wa * A[e] + ws * S[e];
    A[0] = M;
}

static void init_states(double *st, int64_t rows, size_t stride)
{
    for (int64_t r = 0; r < rows; r++) {
        double *S = st + (size_t)r * stride;
        S[0] = -INFINITY;
        for (size_t e = 1; e < stride; e++)
            S[e] = 0.0;
    }
}

/* state layout per row r: [m, l, acc[hd]] */
static void run_unit(const fjob *j, int64_t g, int64_t i0, int64_t i1, int64_t t0, int64_t t1,
                     double *st, const tq_turbo_fscratch *fs)
{
    const tq_attn_turbo_view *c = j->v;
    const int hd = c->head_dim, nh = c->n_heads, group = nh / c->n_kv_heads;
    const tq_kv_scheme s = c->s;
    const size_t kr = c->k_rb, vr = c->v_rb;
    const uint8_t *K = c->k + (size_t)g * (size_t)c->n_ctx * kr;
    const uint8_t *V = c->v + (size_t)g * (size_t)c->n_ctx * vr;
    const int64_t nqu = i1 - i0, rows = nqu * group;
    const size_t stride = (size_t)hd + 2;
    const float scale = c->scale;
    const tq_attn_kernels *ak = j->ak;
    float *kdec = fs->kdec;
    double *vdec = fs->vdec;
    init_states(st, rows, stride);
    const int64_t t_end = t1 < j->pos0 + i1 ? t1 : j->pos0 + i1; /* last query sees < pos0+i1 */
    /* sliding window: query p sees keys (p - W, p]; the first query's lower bound */
    const int64_t W = c->window > 0 ? c->window : 0;
    if (W && t0 < j->pos0 + i0 - W + 1)
        t0 = (j->pos0 + i0 - W + 1) / TQ_TURBO_KB * TQ_TURBO_KB > t0
                 ? (j->pos0 + i0 - W + 1) / TQ_TURBO_KB * TQ_TURBO_KB
                 : t0;
    for (int64_t tb = t0; tb < t_end; tb += TQ_TURBO_KB) {
        const int nk = (int)(t_end - tb < TQ_TURBO_KB ? t_end - tb : TQ_TURBO_KB);
        const size_t slot = (size_t)(tb % c->n_ctx); /* nk rows from here are contiguous */
        if (tb + TQ_TURBO_KB < t_end) { /* the next block's packed rows, while this one runs */
            const size_t sn = (size_t)((tb + TQ_TURBO_KB) % c->n_ctx);
            const uint8_t *kn = K + sn * kr;
            const uint8_t *vn = V + sn * vr;
            for (size_t b = 0; b < TQ_TURBO_KB * kr; b += 64)
                __builtin_prefetch(kn + b);
            for (size_t b = 0; b < TQ_TURBO_KB * vr; b += 64)
                __builtin_prefetch(vn + b);
        }
        if (s.kind == TQ_KV_TURBO) {
            (ak->dec_k ? ak->dec_k : j->kk->dec_k)(K + slot * kr, nk, hd, s.k_bits, kdec);
            for (int k = 0; k < nk; k++)
                j->ak->dec_v_rot(V + (slot + (size_t)k) * vr, hd, s.v_bits, vdec + (size_t)k * hd);
        } else { /* bf16 layer (sliding window): plain rows, no rotation */
            for (int k = 0; k < nk; k++)
                for (int d = 0; d < hd; d++) {
                    kdec[(size_t)k * hd + d] =
                        tq_bf16_to_f32(tq_rd16(K + (slot + (size_t)k) * kr + 2 * (size_t)d));
                    vdec[(size_t)k * hd + d] =
                        tq_bf16_to_f32(tq_rd16(V + (slot + (size_t)k) * vr + 2 * (size_t)d));
                }
        }
        for (int64_t i = i0; i < i1; i++) {
            const int64_t lim = j->pos0 + i; /* keys in [lo, lim] */
            const int64_t lo = W ? lim - W + 1 : 0;
            if (tb > lim || tb + nk <= lo)
                continue;
            const int off = lo > tb ? (int)(lo - tb) : 0;
            const int nv = (int)(lim - tb + 1 < nk ? lim - tb + 1 : nk) - off;
            for (int hh = 0; hh < group; hh++) {
                const int h = (int)g * group + hh;
                const float *q = j->q + ((size_t)i * nh + h) * hd;
                double *S = st + ((size_t)(i - i0) * group + hh) * stride;
                ak->block(q, kdec + (size_t)off * hd, vdec + (size_t)off * hd, nv, hd, scale, S,
                          fs->sc, fs->p);
            }
        }
    }
}

/* o = acc / l, un-rotated (turbo layers), in double; one rounding to float */
static void finish_row(const fjob *j, int rotated, const double *S, float *o)
{
    const int hd = j->v->head_dim;
    double x[TQ_KV_MAX_HEAD_DIM];
    for (int d = 0; d < hd; d++)
        x[d] = S[2 + d] / S[1];
    if (rotated)
        tq_kv_unrotate_f64(x, hd);
    for (int d = 0; d < hd; d++)
        o[d] = (float)x[d];
}

static void fused_task(void *ctx, int ith, int nth)
{
    const fjob *j = ctx;
    const tq_attn_turbo_view *c = j->v;
    const int hd = c->head_dim, nh = c->n_heads, group = nh / c->n_kv_heads;
    tq_turbo_fscratch fs;
    tq_turbo_fscratch_at(c->fscratch + (size_t)ith * c->fused_bytes, hd, group, &fs);
    const size_t stride = (size_t)hd + 2;
    const int rotated = c->s.kind == TQ_KV_TURBO;
    if (j->chunked) {
        const int64_t n_units = c->n_kv_heads * j->n_ch;
        int64_t u0, u1;
        tq_split_range(n_units, ith, nth, &u0, &u1);
        for (int64_t u = u0; u < u1; u++) {
            const int64_t g = u / j->n_ch, ch = u % j->n_ch;
            double *S = c->part + (size_t)u * (size_t)j->n_q * group * stride;
            run_unit(j, g, 0, j->n_q, ch * TQ_TURBO_KC, (ch + 1) * TQ_TURBO_KC, S, &fs);
        }
        return;
    }
    const int64_t n_units = c->n_kv_heads * j->n_qb;
    int64_t u0, u1;
    tq_split_range(n_units, ith, nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t g = u / j->n_qb, qb = u % j->n_qb;
        const int64_t i0 = qb * TQ_TURBO_QB;
        const int64_t i1 = i0 + TQ_TURBO_QB < j->n_q ? i0 + TQ_TURBO_QB : j->n_q;
        /* the same key chunks as decode, each merged into the rows' states in chunk order */
        const int64_t rows = (i1 - i0) * group;
        init_states(fs.acc, rows, stride);
        for (int64_t t0 = 0; t0 < j->pos0 + i1; t0 += TQ_TURBO_KC) {
            run_unit(j, g, i0, i1, t0, t0 + TQ_TURBO_KC, fs.st, &fs);
            for (int64_t r = 0; r < rows; r++)
                merge_state(fs.acc + (size_t)r * stride, fs.st + (size_t)r * stride, stride);
        }
        for (int64_t i = i0; i < i1; i++)
            for (int hh = 0; hh < group; hh++) {
                const int h = (int)g * group + hh;
                finish_row(j, rotated, fs.acc + ((size_t)(i - i0) * group + hh) * stride,
                           j->out + ((size_t)i * nh + h) * hd);
            }
    }
}

/* merge the chunk partials of each (query, head) in chunk order (merge_state) */
static void merge_task(void *ctx, int ith, int nth)
{
    const fjob *j = ctx;
    const tq_attn_turbo_view *c = j->v;
    const int hd = c->head_dim, nh = c->n_heads, group = nh / c->n_kv_heads;
    const size_t stride = (size_t)hd + 2;
    const int rotated = c->s.kind == TQ_KV_TURBO;
    tq_turbo_fscratch fs;
    tq_turbo_fscratch_at(c->fscratch + (size_t)ith * c->fused_bytes, hd, group, &fs);
    double *acc = fs.st; /* stride doubles */
    int64_t r0, r1;
    tq_split_range(j->n_q * nh, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i = r / nh;
        const int h = (int)(r % nh), g = h / group, hh = h % group;
        const int64_t n_keys = j->pos0 + i + 1;
        const int64_t n_ch = (n_keys + TQ_TURBO_KC - 1) / TQ_TURBO_KC;
        acc[0] = -INFINITY;
        for (size_t e = 1; e < stride; e++)
            acc[e] = 0.0;
        for (int64_t ch = 0; ch < n_ch; ch++)
            merge_state(acc, c->part + ((size_t)(g * j->n_ch + ch) * (size_t)j->n_q * group +
                                        (size_t)i * group + hh) * stride, stride);
        finish_row(j, rotated, acc, j->out + ((size_t)i * nh + h) * hd);
    }
}

void tq_attn_turbo_fused(const tq_attn_turbo_view *c, const float *q, int64_t n_q, int64_t pos0,
                         float *out, tq_pool *pool)
{
    const int hd = c->head_dim, nh = c->n_heads;
    tq_pool *p = c->n_threads > 1 ? pool : NULL;
    const tq_kv_kernels *kk = tq_kv_kernels_get(tq_cpu_isa());
    if (!kk || !kk->dec_k)
        kk = &tq_kv_kernels_scalar;
    for (int64_t s0 = 0; s0 < n_q; s0 += TQ_TURBO_QMAX) {
        const int64_t nq = n_q - s0 < TQ_TURBO_QMAX ? n_q - s0 : TQ_TURBO_QMAX;
        const float *qs = q + (size_t)s0 * nh * hd;
        if (c->rot_k && c->s.kind == TQ_KV_TURBO) {
            for (int64_t r = 0; r < nq * nh; r++)
                tq_kv_rotate_ref(qs + (size_t)r * hd, hd, c->qbuf + (size_t)r * hd);
            qs = c->qbuf;
        }
        fjob j = {.v = c, .q = qs, .n_q = nq, .pos0 = pos0 + s0,
                  .out = out + (size_t)s0 * nh * hd, .kk = kk, .ak = tq_attn_kernels_pick()};
        const int64_t n_keys = pos0 + s0 + nq;
        j.chunked = nq <= TQ_TURBO_QD;
        j.n_ch = (n_keys + TQ_TURBO_KC - 1) / TQ_TURBO_KC;
        j.n_qb = (nq + TQ_TURBO_QB - 1) / TQ_TURBO_QB;
        tq_pool_run(p, fused_task, &j);
        if (j.chunked)
            tq_pool_run(p, merge_task, &j);
    }
}
