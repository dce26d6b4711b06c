/* kvcache_turbo.c -- the TurboQuant KV cache: creation, append (encode only the new rows, with
 * the codec's safe encoding of constant key groups), the dequantize-window reference attention
 * (double after the scores, like the fused kernel; kvcache_turbo.h says why), memory accounting.
 * The fused attention kernel is in src/cpu/attn_turbo.c (it reads a plain view of one layer,
 * filled by tq_kvc_turbo_attend_fused() here). See kvcache_turbo.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "kv/kv_internal.h"
#include "model/kvcache_turbo.h"

/* ---- append ---------------------------------------------------------------------------------- */

/* K (rotated for +rk) with the codec's safe encoding of constant key groups (TQ_KV_ENC_SAFE,
 * kv.h: the reference's bytes would decode to NaN), then V */
static tq_status turbo_put(tq_kvcache *c, int il, const float *ks, const float *vs, uint8_t *kd,
                           uint8_t *vd, void *ctx)
{
    tq_kvc_turbo *t = (tq_kvc_turbo *)(void *)c;
    const int hd = c->head_dim;
    const tq_kv_scheme s = t->ls[il];
    float rot[TQ_KV_MAX_HEAD_DIM];
    if (s.kind == TQ_KV_TURBO && t->rot_k) {
        tq_kv_rotate_ref(ks, hd, rot);
        ks = rot;
    }
    tq_kv_encode_opts eo = {.mode = TQ_KV_ENC_SAFE};
    tq_status st = tq_kv_encode_k_opts(s, hd, TQ_DTYPE_F32, ks, 1, kd, t->k_rb[il], NULL, &eo);
    if (!st)
        st = tq_kv_encode_v(s, hd, TQ_DTYPE_F32, vs, 1, vd, t->v_rb[il], NULL);
    if (eo.n_safe && !t->n_safe_blocks)
        tq_log(TQ_LOG_WARN, "kv cache %s: a key block with a range below fp16 resolution "
                            "(constant block) would decode to NaN; stored with the safe "
                            "encoding (logged once per cache)", c->ops->name);
    t->n_safe_blocks += eo.n_safe;
    return st;
}

static tq_status turbo_append(tq_kvcache *c, int il, int64_t pos, const float *k, const float *v,
                              int64_t n)
{
    const tq_kvc_turbo *t = (const tq_kvc_turbo *)(const void *)c;
    return tq_kvc_append_rows(c, il, pos, k, v, n, t->k_rb[il], t->v_rb[il], turbo_put, NULL);
}

/* ---- dequantize-window reference ------------------------------------------------------------- */

typedef struct rjob {
    tq_kvc_turbo *t;
    int il;
    const float *q;
    int64_t n_q, pos0;
    float *out;
} rjob;

/* Per-thread scratch of the reference: scores (n_ctx floats), keys (n_ctx x hd floats), values
 * (n_ctx x hd doubles), weights (n_ctx doubles); each part 64-byte aligned. */
static size_t ref_scratch_at(unsigned char *base, int64_t n_ctx, int hd, float **sc, float **kf,
                             double **vd, double **pw)
{
    const size_t n = (size_t)n_ctx, sz[4] = {n * sizeof(float), n * (size_t)hd * sizeof(float),
                                             n * (size_t)hd * sizeof(double), n * sizeof(double)};
    void *ptr[4];
    const size_t bytes = tq_turbo_carve(base, sz, ptr, 4);
    if (base) {
        *sc = ptr[0];
        *kf = ptr[1];
        *vd = ptr[2];
        *pw = ptr[3];
    }
    return bytes;
}

/* The textbook path over the decoded window: K rows decoded by the codec, V rows decoded to
 * their exact values C[idx] * scale_h and un-rotated in double (for bf16 layers: the bf16
 * values); scores s = scale * dot(q, k) with the same float dot kernel as the fused path; then
 * in double: the max, e^(s - max), the sum, the weighted sum of the value rows, the division;
 * one rounding to float. */
static void ref_task(void *ctx, int ith, int nth)
{
    const rjob *j = ctx;
    tq_kvc_turbo *t = j->t;
    const tq_kvcache *c = &t->base;
    const int hd = c->head_dim, nh = c->n_heads, group = c->n_heads / c->n_kv_heads;
    const tq_kv_scheme s = t->ls[j->il];
    const size_t kr = t->k_rb[j->il], vr = t->v_rb[j->il];
    const tq_attn_kernels *ak = tq_attn_kernels_pick();
    float *sc = NULL, *Kf = NULL;
    double *Vd = NULL, *pw = NULL;
    ref_scratch_at(t->rscratch + (size_t)ith * t->ref_bytes, c->n_ctx, hd, &sc, &Kf, &Vd, &pw);
    float qr[TQ_KV_MAX_HEAD_DIM], y[TQ_KV_MAX_HEAD_DIM];
    double o[TQ_KV_MAX_HEAD_DIM];
    const int64_t n_win = j->pos0 + j->n_q;
    int64_t g0, g1;
    tq_split_range(c->n_kv_heads, ith, nth, &g0, &g1);
    const int64_t W = c->window && c->window[j->il] > 0 ? c->window[j->il] : 0;
    const int64_t S = tq_kvc_slots(c, j->il), u_lo = W && j->pos0 + 1 > W ? j->pos0 + 1 - W : 0;
    for (int64_t g = g0; g < g1; g++) {
        const uint8_t *K = c->k[j->il] + (size_t)g * (size_t)S * kr;
        const uint8_t *V = c->v[j->il] + (size_t)g * (size_t)S * vr;
        /* positions [u_lo, n_win) (every key a query of this call sees) by slot; scratch rows
         * by position */
        for (int64_t u = u_lo; u < n_win;) {
            const int64_t sl = u % S, run = S - sl < n_win - u ? S - sl : n_win - u;
            (void)tq_kv_decode_k(s, hd, K + (size_t)sl * kr, run, Kf + u * hd, run * hd, NULL);
            u += run;
        }
        for (int64_t u = u_lo; u < n_win; u++) {
            double *vv = Vd + u * hd;
            const uint8_t *vrow = V + (size_t)(u % S) * vr;
            if (s.kind == TQ_KV_TURBO) {
                tq_attn_dec_v_rot_scalar(vrow, hd, s.v_bits, vv);
                tq_kv_unrotate_f64(vv, hd);
            } else {
                (void)tq_kv_decode_v(s, hd, vrow, 1, y, hd, NULL);
                for (int e = 0; e < hd; e++)
                    vv[e] = y[e];
            }
        }
        for (int64_t i = 0; i < j->n_q; i++) {
            const int64_t n_keys = j->pos0 + i + 1, lo = W && n_keys > W ? n_keys - W : 0;
            for (int h = (int)g * group; h < ((int)g + 1) * group; h++) {
                const float *q = j->q + (i * nh + h) * hd;
                if (t->rot_k && s.kind == TQ_KV_TURBO) {
                    tq_kv_rotate_ref(q, hd, qr);
                    q = qr;
                }
                float mx = -INFINITY;
                for (int64_t u = lo; u < n_keys; u++) {
                    sc[u] = c->scale * ak->dot(q, Kf + u * hd, hd);
                    mx = sc[u] > mx ? sc[u] : mx;
                }
                double sum = 0.0;
                for (int64_t u = lo; u < n_keys; u++) {
                    pw[u] = exp((double)sc[u] - (double)mx);
                    sum += pw[u];
                }
                for (int e = 0; e < hd; e++)
                    o[e] = 0.0;
                for (int64_t u = lo; u < n_keys; u++) {
                    const double *vv = Vd + u * hd;
                    for (int e = 0; e < hd; e++)
                        o[e] += pw[u] * vv[e];
                }
                float *out = j->out + (i * nh + h) * hd;
                for (int e = 0; e < hd; e++)
                    out[e] = (float)(o[e] / sum);
            }
        }
    }
}

tq_status tq_kvc_turbo_attend_ref(tq_kvcache *c, int il, const float *q, int64_t n_q,
                                  int64_t pos0, float *out, tq_pool *pool)
{
    tq_kvc_turbo *t = (tq_kvc_turbo *)(void *)c;
    if (!t->rscratch)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "turbo cache: reference attention needs the cache "
                                         "set to TQ_TURBO_ATTN_REF or _BOTH");
    rjob j = {.t = t, .il = il, .q = q, .n_q = n_q, .pos0 = pos0, .out = out};
    tq_pool_run(c->n_threads > 1 ? pool : NULL, ref_task, &j);
    return TQ_OK;
}

static void ref_attend(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0,
                       float *out, tq_pool *pool)
{
    (void)tq_kvc_turbo_attend_ref(c, il, q, n_q, pos0, out, pool);
}

/* the fused kernel (src/cpu/attn_turbo.c) on a plain view of layer il */
void tq_kvc_turbo_attend_fused(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0,
                               float *out, tq_pool *pool)
{
    const tq_kvc_turbo *t = (const tq_kvc_turbo *)(const void *)c;
    const tq_attn_turbo_view v = {
        .k = c->k[il], .v = c->v[il], .k_rb = t->k_rb[il], .v_rb = t->v_rb[il],
        .n_ctx = tq_kvc_slots(c, il), .head_dim = c->head_dim, .n_heads = c->n_heads,
        .n_kv_heads = c->n_kv_heads, .scale = c->scale,
        .window = c->window && c->window[il] > 0 ? c->window[il] : 0, .s = t->ls[il],
        .rot_k = t->rot_k, .n_threads = c->n_threads, .qbuf = t->qbuf, .part = t->part,
        .fused_bytes = t->fused_bytes, .fscratch = t->fscratch};
    tq_attn_turbo_fused(&v, q, n_q, pos0, out, pool);
}

/* ---- lifetime and accounting ------------------------------------------------------------------ */

static void turbo_destroy(tq_kvcache *c)
{
    tq_kvc_turbo *t = (tq_kvc_turbo *)(void *)c;
    tq_kvc_free_rows(c);
    tq_free(t->ls);
    tq_free(t->k_rb);
    tq_free(t->v_rb);
    tq_free(t->qbuf);
    tq_free(t->part);
    tq_free(t->fscratch);
    tq_free(t->rscratch);
    tq_free(t);
}

static size_t turbo_token_bytes(const tq_kvcache *c)
{
    const tq_kvc_turbo *t = (const tq_kvc_turbo *)(const void *)c;
    size_t b = 0;
    for (int l = 0; l < c->n_layers; l++)
        b += (t->k_rb[l] + t->v_rb[l]) * (size_t)c->n_kv_heads;
    return b;
}

static const tq_kvc_ops turbo_fused_ops = {"turbo-fused", turbo_append, tq_kvc_turbo_attend_fused,
                                           turbo_destroy, turbo_token_bytes, NULL};
static const tq_kvc_ops turbo_ref_ops = {"turbo-dequant-window", turbo_append, ref_attend,
                                         turbo_destroy, turbo_token_bytes, NULL};

tq_status tq_kvcache_turbo_create(tq_kv_scheme scheme, int n_layers, int n_heads, int n_kv_heads,
                                  int head_dim, int64_t n_ctx, float scale, int n_threads,
                                  const uint8_t *plain_layers, tq_kvcache **out)
{
    char nm[48];
    *out = NULL;
    tq_kv_scheme_name(scheme, nm, sizeof(nm));
    if (scheme.kind != TQ_KV_TURBO)
        return TQ_FAIL(TQ_E_ARG, "turbo cache: scheme %s is not a turbo scheme", nm);
    tq_status st = tq_kv_check(scheme, head_dim);
    if (st)
        return st;
    if (n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads || n_ctx <= 0 ||
        n_threads <= 0)
        return TQ_FAIL(TQ_E_ARG, "kv cache: bad shape (layers %d, heads %d/%d, n_ctx %lld)",
                       n_layers, n_heads, n_kv_heads, (long long)n_ctx);
    tq_kvc_turbo *t = tq_calloc(1, sizeof(*t));
    if (!t)
        return TQ_FAIL(TQ_E_NOMEM, "kv cache: out of memory");
    tq_kvcache *c = &t->base;
    c->ops = &turbo_fused_ops;
    c->scheme = scheme;
    c->n_layers = n_layers;
    c->n_heads = n_heads;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->n_ctx = n_ctx;
    c->scale = scale;
    c->n_threads = n_threads;
    t->rot_k = (scheme.flags & TQ_KV_FLAG_ROTK) != 0;
    const int hd = head_dim, group = n_heads / n_kv_heads;
    c->k = tq_calloc((size_t)n_layers, sizeof(*c->k));
    c->v = tq_calloc((size_t)n_layers, sizeof(*c->v));
    t->ls = tq_calloc((size_t)n_layers, sizeof(*t->ls));
    t->k_rb = tq_calloc((size_t)n_layers, sizeof(size_t));
    t->v_rb = tq_calloc((size_t)n_layers, sizeof(size_t));
    if (!c->k || !c->v || !t->ls || !t->k_rb || !t->v_rb)
        goto nomem;
    int n_plain = 0;
    for (int l = 0; l < n_layers; l++) {
        tq_kv_scheme s = {.kind = TQ_KV_TURBO, .k_bits = scheme.k_bits, .v_bits = scheme.v_bits};
        if ((scheme.flags & TQ_KV_FLAG_EDGE8) && (l == 0 || l == n_layers - 1))
            s.k_bits = s.v_bits = 8;
        if (plain_layers && plain_layers[l]) {
            s = (tq_kv_scheme){.kind = TQ_KV_BF16};
            n_plain++;
        }
        t->ls[l] = s;
        if ((st = tq_kv_row_bytes(s, hd, &t->k_rb[l], &t->v_rb[l])))
            goto fail;
        size_t pk, pv;
        if (!tq_mul_ok((size_t)n_kv_heads * (size_t)n_ctx, t->k_rb[l], &pk) ||
            !tq_mul_ok((size_t)n_kv_heads * (size_t)n_ctx, t->v_rb[l], &pv))
            goto nomem;
        if (!(c->k[l] = tq_aligned_alloc(pk)) || !(c->v[l] = tq_aligned_alloc(pv)))
            goto nomem;
    }
    if (n_plain)
        tq_log(TQ_LOG_WARN, "kv cache %s: %d sliding-window layer%s kept unquantized (bf16)", nm,
               n_plain, n_plain > 1 ? "s" : "");
    c->k_row_bytes = t->k_rb[n_layers / 2];
    c->v_row_bytes = t->v_rb[n_layers / 2];
    /* fused: per thread 2 decoded key blocks + scores/weights + one query block's states */
    const size_t stride = (size_t)hd + 2;
    t->fused_bytes = tq_turbo_fscratch_at(NULL, hd, group, NULL);
    const size_t n_ch = (size_t)((n_ctx + TQ_TURBO_KC - 1) / TQ_TURBO_KC);
    t->part_doubles = (size_t)n_kv_heads * n_ch * TQ_TURBO_QD * group * stride;
    size_t qb = (size_t)TQ_TURBO_QMAX * n_heads * hd, fb;
    if (!tq_mul_ok(t->fused_bytes, (size_t)n_threads, &fb))
        goto nomem;
    t->fscratch = tq_aligned_alloc(fb);
    t->part = tq_aligned_alloc(t->part_doubles * sizeof(double));
    t->qbuf = tq_aligned_alloc(qb * sizeof(float));
    if (!t->fscratch || !t->part || !t->qbuf)
        goto nomem;
    *out = c;
    return TQ_OK;
nomem:
    st = TQ_FAIL(TQ_E_NOMEM, "kv cache: out of memory for %lld tokens of %s", (long long)n_ctx,
                 nm);
fail:
    turbo_destroy(c);
    return st;
}

tq_status tq_kvc_turbo_set_attn(tq_kvcache *c, int mode)
{
    if (!c || c->scheme.kind != TQ_KV_TURBO)
        return TQ_OK;
    tq_kvc_turbo *t = (tq_kvc_turbo *)(void *)c;
    if (mode != TQ_TURBO_ATTN_FUSED && mode != TQ_TURBO_ATTN_REF && mode != TQ_TURBO_ATTN_BOTH)
        return TQ_FAIL(TQ_E_ARG, "turbo cache: attention path %d is not one of fused (0), ref (1), "
                                 "both (2)", mode);
    if (mode != TQ_TURBO_ATTN_FUSED && !t->rscratch) {
        size_t rb;
        t->ref_bytes = ref_scratch_at(NULL, c->n_ctx, c->head_dim, NULL, NULL, NULL, NULL);
        if (!tq_mul_ok(t->ref_bytes, (size_t)c->n_threads, &rb) ||
            !(t->rscratch = tq_aligned_alloc(rb)))
            return TQ_FAIL(TQ_E_NOMEM, "turbo cache: out of memory for the reference attention's "
                                       "scratch");
    }
    t->attn_ref = mode == TQ_TURBO_ATTN_REF;
    c->ops = t->attn_ref ? &turbo_ref_ops : &turbo_fused_ops;
    return TQ_OK;
}
