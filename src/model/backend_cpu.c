/* backend_cpu.c -- the CPU backend of the one forward (common/backend.h): host buffers, the
 * model's matvec / native block kernels (src/cpu/) on its pool, the session's KV cache
 * (kv->ops->append / attend); elementwise work on the calling thread (a matmul's pre-norm, gated
 * activation and residual on the pool from 16 tokens). The context is the
 * tq_session whose run state is the work space (its model's kernels and pool). This is the
 * arithmetic the forward always had: every CPU result is bit-identical to it, except the gated
 * activation (GELU/SiLU), since 2026-12-03 cpu/act.h's vectorized own e^x (a few ulp from
 * libm's tanhf/expf; the same bits at every ISA and batch size). */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "cpu/act.h"
#include "model/engine.h"

/* o = x / rms(x) * w over n elements (w NULL = no weight; plus_one: gemma's (1 + w)). */
static void rmsnorm1(float *o, const float *x, const float *w, int n, float eps, int plus_one)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float r = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) {
        const float y = x[i] * r;
        o[i] = w ? y * (plus_one ? 1.0f + w[i] : w[i]) : y;
    }
}

/* rmsnorm1() of `rows` rows (o and x of stride n, o may be x): four rows at a time, so their
 * double sums of squares run as four independent chains (one row's sum is a chain of dependent
 * adds); each row's floats are rmsnorm1's, in the same order */
static void rmsnorm_rows(float *o, const float *x, int64_t rows, const float *w, int n,
                         float eps, int plus_one)
{
    int64_t t = 0;
    for (; t + 4 <= rows; t += 4) {
        const float *x0 = x + t * n, *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        for (int i = 0; i < n; i++) {
            s0 += (double)x0[i] * x0[i];
            s1 += (double)x1[i] * x1[i];
            s2 += (double)x2[i] * x2[i];
            s3 += (double)x3[i] * x3[i];
        }
        const double ss[4] = {s0, s1, s2, s3};
        for (int u = 0; u < 4; u++) {
            const float r = 1.0f / sqrtf((float)(ss[u] / n) + eps);
            const float *xu = x + (t + u) * n;
            float *ou = o + (t + u) * n;
            for (int i = 0; i < n; i++) {
                const float y = xu[i] * r;
                ou[i] = w ? y * (plus_one ? 1.0f + w[i] : w[i]) : y;
            }
        }
    }
    for (; t < rows; t++)
        rmsnorm1(o + t * n, x + t * n, w, n, eps, plus_one);
}

static void cpu_rmsnorm(void *ctx, float *o, const float *x, const float *w, int64_t rows,
                        int width, float eps, int plus_one)
{
    rmsnorm_rows(o, x, rows, w, width, eps, plus_one);
}

/* rotate n_heads vectors of head_dim in place; cs = cos[rope_dim/2] | sin[rope_dim/2] */
static void rope1(float *v, int n_heads, int head_dim, int rope_dim, const float *cs)
{
    const int half = rope_dim / 2;
    const float *c = cs, *s = cs + half;
    for (int h = 0; h < n_heads; h++) {
        float *x = v + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            const float a = x[i], b = x[i + half];
            x[i] = a * c[i] - b * s[i];
            x[i + half] = b * c[i] + a * s[i];
        }
    }
}

typedef struct rope_job {
    float *q, *k, *cs_all;
    const float *inv_freq;
    int nh, nkv, hd, rd;
    int64_t n, pos0;
} rope_job;

static void rope_tokens(const rope_job *j, int64_t t0, int64_t t1)
{
    const int half = j->rd / 2;
    for (int64_t t = t0; t < t1; t++) {
        float *cs = j->cs_all + t * j->rd;
        const int64_t pos = j->pos0 + t;
        for (int i = 0; i < half; i++) {
            const float ang = (float)pos * j->inv_freq[i];
            cs[i] = cosf(ang);
            cs[half + i] = sinf(ang);
        }
        rope1(j->q + t * j->nh * j->hd, j->nh, j->hd, j->rd, cs);
        rope1(j->k + t * j->nkv * j->hd, j->nkv, j->hd, j->rd, cs);
    }
}

static void rope_task(void *ctx, int ith, int nth)
{
    const rope_job *j = ctx;
    int64_t t0, t1;
    tq_split_range(j->n, ith, nth, &t0, &t1);
    rope_tokens(j, t0, t1);
}

/* prefill (16 tokens or more) on the pool, split by tokens: a token's cos/sin (libm, per layer)
 * and rotation are the same whoever computes them; serial, Gemma 3's 128 angle pairs per token
 * and layer were several % of a 2-thread prefill */
static void cpu_rope(void *ctx, float *q, int nh, float *k, int nkv, int64_t n, int hd, int rd,
                     const float *inv_freq, int64_t pos0, float *cs_all)
{
    const tq_session *s = ctx;
    rope_job j = {.q = q, .k = k, .cs_all = cs_all, .inv_freq = inv_freq, .nh = nh, .nkv = nkv,
                  .hd = hd, .rd = rd, .n = n, .pos0 = pos0};
    if (n >= 16 && tq_pool_size(s->m->pool) > 1)
        tq_pool_run(s->m->pool, rope_task, &j);
    else
        rope_tokens(&j, 0, n);
}

static tq_status cpu_embed(void *ctx, const tq_be_mat *e, const int32_t *tok, int n, float scale,
                           float *x)
{
    const int64_t dim = e->cols;
    const tq_qmat *q = e->native;
    for (int t = 0; t < n; t++) {
        float *out = x + (size_t)t * dim;
        const size_t off = (size_t)tok[t] * (size_t)dim;
        if (q && q->f) { /* native: decode the one row (the dequantize-at-load values) */
            _Alignas(64) uint8_t row[TQ_QMM_R16_ROW_MAX]; /* an r16 row's file bytes */
            q->f->k.dequant(tq_qmm_file_row(q, tok[t], row), out, dim);
        } else if (e->dtype == TQ_DTYPE_F32) {
            memcpy(out, (const float *)e->w + off, (size_t)dim * sizeof(float));
        } else {
            const uint16_t *r = (const uint16_t *)e->w + off;
            for (int64_t i = 0; i < dim; i++)
                out[i] = e->dtype == TQ_DTYPE_F16 ? tq_f16_to_f32(r[i]) : tq_bf16_to_f32(r[i]);
        }
        if (scale != 0.0f && scale != 1.0f)
            for (int64_t i = 0; i < dim; i++)
                out[i] *= scale;
    }
    return TQ_OK;
}

static const tq_qmat *qmat_of(const tq_be_mat *m)
{
    const tq_qmat *q = m->native;
    return q && q->f ? q : NULL;
}

/* A matmul's elementwise steps of tokens [t0, t1): the pre-op (norm or gated activation) or,
 * with post = 1, the post-norm and residual add. Each token's floats are the same whoever
 * computes them (rmsnorm1 per token; cpu/act.h's e^x is elementwise, the same bits at every
 * ISA and length). */
typedef struct ew_job {
    const tq_be_mm *a;
    int post;
} ew_job;

static void ew_tokens(const tq_be_mm *a, int post, int64_t t0, int64_t t1)
{
    const int64_t cols = a->cols;
    if (post) {
        const tq_be_out *o = &a->out[0];
        const int64_t rows = o->w.rows;
        if (a->post_norm && o->ldy == rows)
            rmsnorm_rows(o->y + t0 * rows, o->y + t0 * rows, t1 - t0, a->post_norm, (int)rows,
                         a->eps, a->plus_one);
        for (int64_t t = t0; t < t1; t++) {
            float *y = o->y + t * o->ldy, *r = a->res + t * rows;
            if (a->post_norm && o->ldy != rows)
                rmsnorm1(y, y, a->post_norm, (int)rows, a->eps, a->plus_one);
            for (int64_t i = 0; i < rows; i++)
                r[i] += y[i];
        }
    } else if (a->pre == TQ_BE_PRE_NORM) {
        rmsnorm_rows(a->xn + t0 * cols, a->x + t0 * cols, t1 - t0, a->norm, (int)cols, a->eps,
                     a->plus_one);
    } else if (a->pre == TQ_BE_PRE_SILU || a->pre == TQ_BE_PRE_GELU) {
        /* cpu/act.h: one float e^x of our own, the same bits at every ISA */
        tq_act_glu(a->x + t0 * cols, a->up + t0 * cols, (size_t)(t1 - t0) * (size_t)cols,
                   a->pre == TQ_BE_PRE_GELU);
    }
}

static void ew_task(void *ctx, int ith, int nth)
{
    const ew_job *j = ctx;
    int64_t t0, t1;
    tq_split_range(j->a->n, ith, nth, &t0, &t1);
    ew_tokens(j->a, j->post, t0, t1);
}

/* prefill (16 tokens or more): the elementwise steps on the pool, split by tokens (serial they
 * were ~5% of a 2-thread prefill: the gated activation alone is n x ffn e^x) */
static void ew_run(tq_pool *pool, const tq_be_mm *a, int post)
{
    ew_job j = {a, post};
    if (a->n >= 16 && tq_pool_size(pool) > 1)
        tq_pool_run(pool, ew_task, &j);
    else
        ew_tokens(a, post, 0, a->n);
}

static tq_status cpu_matmul(void *ctx, const tq_be_mm *a)
{
    tq_session *s = ctx;
    tq_model *m = s->m;
    const int64_t cols = a->cols, n = a->n;
    const float *x = a->x;
    if (a->pre == TQ_BE_PRE_NORM || a->pre == TQ_BE_PRE_SILU || a->pre == TQ_BE_PRE_GELU)
        ew_run(m->pool, a, 0);
    if (a->pre == TQ_BE_PRE_NORM)
        x = a->xn;
    if (a->n_out == 1) { /* one product: the single-output kernels */
        const tq_be_out *o = &a->out[0];
        const tq_qmat *q = qmat_of(&o->w);
        if (q) {
            const tq_qmm_out qo = {q, o->y, o->ldy};
            tq_qmm_run(m->pool, &qo, 1, x, cols, n, m->act_f32, s->rs.act_a, s->rs.act_k);
        } else {
            if (m->mm.needs_xb)
                tq_mm_round_x(x, cols, n, cols, s->rs.xb);
            tq_mm_run(&m->mm, m->pool, o->w.w, o->w.rows, cols, x, s->rs.xb, cols, n, o->y,
                      o->ldy);
        }
    } else { /* several products of the same x in one pool job (q/k/v, gate/up) */
        tq_qmm_out qo[4];
        tq_mm_out dn[4];
        int nq = 0, nd = 0;
        for (int i = 0; i < a->n_out && i < 4; i++) {
            const tq_be_out *o = &a->out[i];
            const tq_qmat *q = qmat_of(&o->w);
            if (q)
                qo[nq++] = (tq_qmm_out){q, o->y, o->ldy};
            else
                dn[nd++] = (tq_mm_out){o->w.w, o->w.rows, o->y, o->ldy};
        }
        if (nq)
            tq_qmm_run(m->pool, qo, nq, x, cols, n, m->act_f32, s->rs.act_a, s->rs.act_k);
        if (nd) {
            if (m->mm.needs_xb)
                tq_mm_round_x(x, cols, n, cols, s->rs.xb);
            tq_mm_run_multi(&m->mm, m->pool, dn, nd, cols, x, s->rs.xb, cols, n);
        }
    }
    if (a->res)
        ew_run(m->pool, a, 1);
    return TQ_OK;
}

static void cpu_bias(void *ctx, float *y, const float *b, int64_t n, int width)
{
    for (int64_t t = 0; t < n; t++)
        for (int i = 0; i < width; i++)
            y[t * width + i] += b[i];
}

static tq_status cpu_attend(void *ctx, void *kvp, int il, int64_t pos0, const float *k,
                            const float *v, const float *q, int64_t n, float *out)
{
    tq_session *s = ctx;
    tq_kvcache *kv = kvp;
    tq_status st = kv->ops->append(kv, il, pos0, k, v, n);
    if (st)
        return st;
    kv->ops->attend(kv, il, q, n, pos0, out, s->m->pool);
    return TQ_OK;
}

static tq_status cpu_attend_batch(void *ctx, int il, const tq_be_attn *it, int n)
{
    tq_session *s = ctx;
    tq_kvc_item ki[64];
    for (int a0 = 0; a0 < n; a0 += 64) {
        const int m = n - a0 < 64 ? n - a0 : 64;
        for (int a = 0; a < m; a++) {
            const tq_be_attn *e = &it[a0 + a];
            ki[a] = (tq_kvc_item){e->kv, e->pos0, e->n, e->k, e->v, e->q, e->out};
        }
        tq_status st = tq_kvcache_attend_batch(ki, m, il, s->m->pool);
        if (st)
            return st;
    }
    return TQ_OK;
}

static void cpu_softcap(void *ctx, float *y, int64_t n, float c)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = c * tanhf(y[i] / c);
}

const tq_backend tq_backend_cpu = {
    .name = "cpu",
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul,
    .bias = cpu_bias,
    .rope = cpu_rope,
    .attend = cpu_attend,
    .attend_batch = cpu_attend_batch,
    .softcap = cpu_softcap,
};
