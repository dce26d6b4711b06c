/* kvcache_rot.c -- the rot: KV cache (rotated block codes, src/kv/kv_rot.c) with fused attention:
 * rows stay packed (the codec's bytes, head-major like every scheme); append() encodes only the
 * new rows; attend() rotates the queries once (the K rotation), runs the fused kernel of
 * src/cpu/attn_rot*.c over the packed blocks (scores against the rotated query, online softmax,
 * values summed in the rotated domain) and un-rotates each output row once (the V rotation).
 * The dequantize-window path of kvcache.c (tq_kvcache_window_create) is its reference. */
#include <string.h>

#include "cpu/attn_rot.h"
#include "cpu/kv_cpu.h"
#include "kv/kv_internal.h"
#include "model/kvcache.h"

#define ROT_QMAX 256 /* queries per attend slice (rotated-query buffer) */

typedef struct tq_kvc_rot {
    tq_kvcache base;            /* first member                                       */
    tq_rot_code kc, vc;         /* the K and V codes as plain descriptors              */
    float iq4[16];              /* iq4_nl grid as floats (descriptor storage)          */
    float *kpairs, *vpairs;     /* the LM codes' pair tables (NULL for the other codes) */
    const tq_attn_rot_kernels *kern;
    const tq_kv_kernels *kk;    /* encoder + rotation kernels (the reference's bytes)      */
    unsigned char *scratch;     /* n_threads x tq_attn_rot_scratch_bytes               */
    float *part;                /* decode partial states                               */
    float *qbuf;                /* ROT_QMAX x n_heads x head_dim rotated queries       */
} tq_kvc_rot;

static void code_of(int code, float *iq4, tq_rot_code *o)
{
    memset(o, 0, sizeof(*o));
    if (code >= TQ_KV_CODE_LM) {
        const tq_kv_lm_code *c = &tq_kv_lm_codes[code - TQ_KV_CODE_LM];
        int pb = 0;
        while ((1 << pb) < c->levels * c->levels)
            pb++;
        *o = (tq_rot_code){TQ_ROTC_LM, c->group, (int)tq_kv_lm_block_bytes(c), c->levels, pb,
                           c->grid, NULL};
        return;
    }
    o->group = 32;
    o->block_bytes = (int)tq_kv_rot_row_bytes(code, 64) / 2;
    switch (code) {
    case TQ_KV_CODE_Q8_0:
        o->kind = TQ_ROTC_Q8_0;
        break;
    case TQ_KV_CODE_Q5_0:
        o->kind = TQ_ROTC_Q5_0;
        break;
    case TQ_KV_CODE_Q4_0:
        o->kind = TQ_ROTC_Q4_0;
        break;
    default:
        o->kind = TQ_ROTC_IQ4_NL;
        for (int i = 0; i < 16; i++)
            iq4[i] = (float)tq_kv_iq4nl_values()[i];
        o->grid = iq4;
        break;
    }
}

static tq_status rot_put(tq_kvcache *c, int il, const float *ks, const float *vs, uint8_t *kd,
                         uint8_t *vd, void *ctx)
{
    (void)il;
    (void)ctx;
    const tq_kv_kernels *kk = ((tq_kvc_rot *)(void *)c)->kk;
    tq_kv_rot_encode_row(kk, c->scheme.k_bits, 0, ks, c->head_dim, kd);
    tq_kv_rot_encode_row(kk, c->scheme.v_bits, 1, vs, c->head_dim, vd);
    return TQ_OK;
}

static tq_status rot_append(tq_kvcache *c, int il, int64_t pos, const float *k, const float *v,
                            int64_t n)
{
    return tq_kvc_append_rows(c, il, pos, k, v, n, c->k_row_bytes, c->v_row_bytes, rot_put, NULL);
}

/* the attention job of nq rotated queries (r->qbuf) at pos0 of layer il, outputs to o */
static tq_attn_rot_job job_of(tq_kvc_rot *r, int il, int64_t nq, int64_t pos0, float *o)
{
    const tq_kvcache *c = &r->base;
    return (tq_attn_rot_job){
        .kern = r->kern, .kc = &r->kc, .vc = &r->vc, .k = c->k[il], .v = c->v[il],
        .k_rb = c->k_row_bytes, .v_rb = c->v_row_bytes,
        .k_head_stride = (size_t)tq_kvc_slots(c, il) * c->k_row_bytes,
        .v_head_stride = (size_t)tq_kvc_slots(c, il) * c->v_row_bytes,
        .slots = tq_kvc_slots(c, il),
        .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .hd = c->head_dim,
        .scale = c->scale, .window = c->window && c->window[il] > 0 ? c->window[il] : 0,
        .q = r->qbuf, .n_q = nq, .pos0 = pos0, .out = o, .scratch = r->scratch,
        .part = r->part};
}

static void rot_attend(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0,
                       float *out, tq_pool *pool)
{
    tq_kvc_rot *r = (tq_kvc_rot *)(void *)c;
    const int hd = c->head_dim, nh = c->n_heads;
    tq_pool *p = c->n_threads > 1 ? pool : NULL;
    for (int64_t s0 = 0; s0 < n_q; s0 += ROT_QMAX) {
        const int64_t nq = n_q - s0 < ROT_QMAX ? n_q - s0 : ROT_QMAX;
        for (int64_t i = 0; i < nq * nh; i++) {
            float *qr = r->qbuf + (size_t)i * hd;
            memcpy(qr, q + ((size_t)s0 * nh + (size_t)i) * hd, (size_t)hd * sizeof(float));
            tq_kv_rot_apply_k(r->kk, qr, hd, 0);
        }
        float *o = out + (size_t)s0 * nh * hd;
        const tq_attn_rot_job j = job_of(r, il, nq, pos0 + s0, o);
        tq_attn_rot_run(&j, p);
        for (int64_t i = 0; i < nq * nh; i++) /* the one inverse rotation per output row */
            tq_kv_rot_apply_k(r->kk, o + (size_t)i * hd, hd, 1);
    }
}

/* ---- batched step: one unit per (sequence, kv-head) ---------------------------------------------
 * A unit encodes its kv-head's new K/V rows, rotates its query heads, runs the attention of
 * its kv-head (tq_attn_rot_run_head: every chunk in order, the decode form's floats) and
 * un-rotates its outputs: the same functions on the same rows as append() + attend() of that
 * sequence alone, so the same bytes and floats. The units of all the sequences share one pool
 * job per layer (a sequence alone: 1-2 jobs of n_kv_heads units, the encode on one thread). */
enum { BMAX = 256 };

typedef struct rot_batch {
    const tq_kvc_item *it;
    int il, n;
    int64_t uoff[BMAX + 1]; /* units of item a: [uoff[a], uoff[a + 1])     */
    double cost[BMAX];      /* estimated cost of one unit of item a         */
    double total;
} rot_batch;

static void rot_unit(const tq_kvc_item *it, int il, int g, int ith)
{
    tq_kvcache *c = it->c;
    tq_kvc_rot *r = (tq_kvc_rot *)(void *)c;
    const int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, group = nh / nkv;
    const int64_t S = tq_kvc_slots(c, il);
    for (int64_t t = 0; t < it->n; t++) {
        const size_t row = (size_t)g * (size_t)S + (size_t)((it->pos + t) % S);
        rot_put(c, il, it->k + ((size_t)t * nkv + g) * hd, it->v + ((size_t)t * nkv + g) * hd,
                c->k[il] + row * c->k_row_bytes, c->v[il] + row * c->v_row_bytes, NULL);
    }
    for (int64_t i = 0; i < it->n; i++)
        for (int h = g * group; h < (g + 1) * group; h++) {
            float *qr = r->qbuf + ((size_t)i * nh + h) * hd;
            memcpy(qr, it->q + ((size_t)i * nh + h) * hd, (size_t)hd * sizeof(float));
            tq_kv_rot_apply_k(r->kk, qr, hd, 0);
        }
    const tq_attn_rot_job j = job_of(r, il, it->n, it->pos, it->out);
    tq_attn_rot_run_head(&j, g, r->scratch + (size_t)ith * tq_attn_rot_scratch_bytes(hd, group));
    for (int64_t i = 0; i < it->n; i++)
        for (int h = g * group; h < (g + 1) * group; h++)
            tq_kv_rot_apply_k(r->kk, it->out + ((size_t)i * nh + h) * hd, hd, 1);
}

static void batch_task(void *ctx, int ith, int nth)
{
    const rot_batch *b = ctx;
    double before = 0.0; /* a unit goes to the thread its cost midpoint falls in: contiguous */
    for (int a = 0; a < b->n; a++)
        for (int64_t u = b->uoff[a]; u < b->uoff[a + 1]; u++) {
            const double mid = before + 0.5 * b->cost[a];
            before += b->cost[a];
            int t = (int)(mid / b->total * nth);
            if ((t < nth ? t : nth - 1) == ith)
                rot_unit(&b->it[a], b->il, (int)(u - b->uoff[a]), ith);
        }
}

static tq_status rot_batch_run(const tq_kvc_item *it, int n, int il, tq_pool *pool)
{
    rot_batch b = {.it = it, .il = il};
    tq_kvc_item small[BMAX];
    tq_pool *p = pool;
    double work = 0.0;
    for (int a = 0; a < n; a++) { /* decode-sized items join the shared job */
        tq_kvcache *c = it[a].c;
        if (it[a].n > TQ_ROT_QD || b.n == BMAX)
            continue;
        tq_status st = tq_kvc_append_check(c, il, it[a].pos, it[a].n);
        if (st)
            return st;
        if (tq_pool_size(pool) > c->n_threads) /* the cache's scratch is per thread */
            p = NULL;
        const int64_t W = c->window && c->window[il] > 0 ? c->window[il] : 0;
        const int64_t keys = W && it[a].pos + it[a].n > W ? W : it[a].pos + it[a].n;
        small[b.n] = it[a];
        b.uoff[b.n + 1] = b.uoff[b.n] + c->n_kv_heads;
        b.cost[b.n] = (double)it[a].n * (double)(keys + 64) * (double)(c->n_heads / c->n_kv_heads);
        work += (double)it[a].n * (double)keys * (double)c->n_heads * (double)c->head_dim;
        b.total += b.cost[b.n] * (double)c->n_kv_heads;
        b.n++;
    }
    b.it = small;
    if (b.n) /* little work (short windows): the caller alone, as tq_attn_rot_run() decides */
        tq_pool_run(work >= 32768.0 ? p : NULL, batch_task, &b);
    for (int a = 0, m = 0; a < n; a++) { /* the others alone */
        if (it[a].n <= TQ_ROT_QD && m < BMAX) {
            m++;
            continue;
        }
        tq_kvcache *c = it[a].c;
        tq_status st = rot_append(c, il, it[a].pos, it[a].k, it[a].v, it[a].n);
        if (st)
            return st;
        rot_attend(c, il, it[a].q, it[a].n, it[a].pos, it[a].out, pool);
    }
    return TQ_OK;
}

static void rot_destroy(tq_kvcache *c)
{
    tq_kvc_rot *r = (tq_kvc_rot *)(void *)c;
    tq_kvc_free_rows(c);
    tq_free(r->scratch);
    tq_free(r->part);
    tq_free(r->qbuf);
    tq_free(r->kpairs);
    tq_free(r->vpairs);
    tq_free(r);
}

static const tq_kvc_ops rot_ops = {"rot-fused", rot_append, rot_attend, rot_destroy, NULL,
                                   rot_batch_run};

tq_status tq_kvcache_rot_create(tq_kv_scheme scheme, int n_layers, int n_heads, int n_kv_heads,
                                int head_dim, int64_t n_ctx, float scale, int n_threads,
                                tq_kvcache **out)
{
    char nm[48];
    *out = NULL;
    tq_kv_scheme_name(scheme, nm, sizeof(nm));
    tq_status st = tq_kv_check(scheme, head_dim);
    if (st)
        return st;
    if (scheme.kind != TQ_KV_ROT)
        return TQ_FAIL(TQ_E_ARG, "rot cache: scheme %s is not a rot: scheme", nm);
    tq_kvc_rot *r = tq_calloc(1, sizeof(*r));
    if (!r)
        return TQ_FAIL(TQ_E_NOMEM, "kv cache: out of memory");
    tq_kvcache *c = &r->base;
    c->ops = &rot_ops;
    c->scheme = scheme;
    c->n_layers = n_layers;
    c->n_heads = n_heads;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->n_ctx = n_ctx;
    c->scale = scale;
    c->n_threads = n_threads;
    c->k_row_bytes = tq_kv_rot_row_bytes(scheme.k_bits, head_dim);
    c->v_row_bytes = tq_kv_rot_row_bytes(scheme.v_bits, head_dim);
    code_of(scheme.k_bits, r->iq4, &r->kc);
    code_of(scheme.v_bits, r->iq4, &r->vc);
    if (!tq_rot_code_row_ok(&r->kc, head_dim) || !tq_rot_code_row_ok(&r->vc, head_dim)) {
        tq_free(r);
        return TQ_FAIL(TQ_E_UNSUPPORTED, "kv cache %s: the fused attention does not support "
                                         "head_dim %d with these codes", nm, head_dim);
    }
    r->kern = tq_attn_rot_kernels_for(tq_cpu_isa());
    r->kk = tq_kv_kernels_get(tq_cpu_isa());
    const int group = n_heads / n_kv_heads;
    size_t per_k, per_v, sb;
    c->k = tq_calloc((size_t)n_layers, sizeof(*c->k));
    c->v = tq_calloc((size_t)n_layers, sizeof(*c->v));
    if (!c->k || !c->v || !tq_mul_ok((size_t)n_kv_heads * (size_t)n_ctx, c->k_row_bytes, &per_k) ||
        !tq_mul_ok((size_t)n_kv_heads * (size_t)n_ctx, c->v_row_bytes, &per_v) ||
        !tq_mul_ok(tq_attn_rot_scratch_bytes(head_dim, group), (size_t)n_threads, &sb))
        goto nomem;
    for (int l = 0; l < n_layers; l++)
        if (!(c->k[l] = tq_aligned_alloc(per_k)) || !(c->v[l] = tq_aligned_alloc(per_v)))
            goto nomem;
    r->scratch = tq_aligned_alloc(sb);
    r->part = tq_aligned_alloc(tq_attn_rot_part_floats(n_kv_heads, group, head_dim, n_ctx) *
                               sizeof(float));
    r->qbuf = tq_aligned_alloc((size_t)ROT_QMAX * n_heads * head_dim * sizeof(float));
    if (!r->scratch || !r->part || !r->qbuf)
        goto nomem;
    /* the pair tables (at most 2^16 x 8 bytes each; one per cache, shared by the layers) */
    if (tq_rot_code_pairs_floats(&r->kc)) {
        if (!(r->kpairs = tq_malloc(tq_rot_code_pairs_floats(&r->kc) * sizeof(float))))
            goto nomem;
        tq_rot_code_fill_pairs(&r->kc, r->kpairs);
        r->kc.pairs = r->kpairs;
    }
    if (tq_rot_code_pairs_floats(&r->vc)) {
        if (!(r->vpairs = tq_malloc(tq_rot_code_pairs_floats(&r->vc) * sizeof(float))))
            goto nomem;
        tq_rot_code_fill_pairs(&r->vc, r->vpairs);
        r->vc.pairs = r->vpairs;
    }
    *out = c;
    return TQ_OK;
nomem:
    rot_destroy(c);
    return TQ_FAIL(TQ_E_NOMEM, "kv cache: out of memory for %lld tokens of %s", (long long)n_ctx,
                   nm);
}
