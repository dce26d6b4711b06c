/* forward.c -- the forward pass of a decoder-only transformer, one readable function for every
 * architecture we run; per-architecture differences are flags of tq_model_config (io.h):
 *
 *   x = embed[token] (* embed_scale)
 *   for each layer:
 *     h = rmsnorm(x) ; q, k, v = h Wq, h Wk, h Wv (+ bias: qwen2)
 *     q, k = per-head rmsnorm (qk_norm: qwen3, gemma3) ; q, k = rope(q, k, position)
 *     cache.append(k, v) ; a = cache.attend(q)          <- K/V always read through the cache
 *     x += (post_attn_norm) (a Wo)
 *     h = rmsnorm(x) ; x += (post_ffn_norm) ((act(h Wgate) * h Wup) Wdown)   act: SiLU | GELU
 *   logits = rmsnorm(x) Wout                                (Wout = embed when tied)
 *
 * RoPE pairs element i with i + rope_dim/2 (Hugging Face rotate_half; tq_weights delivers HF
 * layout, GGUF q/k permutation already undone). Activations are f32 end to end; matrices go
 * through the model's matvec kernel (matvec.h), elementwise work runs on the calling thread.
 * Nothing here allocates. */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "model/engine.h"

/* o = x / rms(x) * w over n elements (w NULL = no weight; plus_one: gemma's (1 + w)). */
static void rmsnorm(float *o, const float *x, const float *w, int n, float eps, int plus_one)
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

/* rotate n_heads vectors of head_dim in place; cs = cos[rope_dim/2] | sin[rope_dim/2] */
static void rope(float *v, int n_heads, int head_dim, int rope_dim, const float *cs)
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

static void rope_table(const float *inv_freq, int rope_dim, int64_t pos, float *cs)
{
    const int half = rope_dim / 2;
    for (int i = 0; i < half; i++) {
        const float ang = (float)pos * inv_freq[i];
        cs[i] = cosf(ang);
        cs[half + i] = sinf(ang);
    }
}

static inline float silu(float x)
{
    return x / (1.0f + expf(-x));
}

static inline float gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

static void embed_row(const tq_model *m, int32_t tok, float *out)
{
    const int dim = m->cfg.hidden;
    const size_t off = (size_t)tok * (size_t)dim;
    if (m->q_embed.f) { /* native: decode the one row (the dequantize-at-load values) */
        m->q_embed.f->k.dequant((const uint8_t *)m->q_embed.w + (size_t)tok * m->q_embed.row_bytes,
                                out, dim);
    } else if (m->wtype == TQ_DTYPE_F32) {
        memcpy(out, (const float *)m->embed + off, (size_t)dim * sizeof(float));
    } else {
        const uint16_t *e = (const uint16_t *)m->embed + off;
        for (int i = 0; i < dim; i++)
            out[i] = m->wtype == TQ_DTYPE_F16 ? tq_f16_to_f32(e[i]) : tq_bf16_to_f32(e[i]);
    }
    if (m->cfg.embed_scale != 0.0f && m->cfg.embed_scale != 1.0f)
        for (int i = 0; i < dim; i++)
            out[i] *= m->cfg.embed_scale;
}

/* y(n, rows) = x(n, cols) W^T through the selected kernel (q: the native block weights, used
 * when q->f is set) */
static void matmul(tq_session *s, const void *w, const tq_qmat *q, int64_t rows, int64_t cols,
                   const float *x, int64_t n, float *y, int64_t ldy)
{
    tq_model *m = s->m;
    if (q->f) {
        const tq_qmm_out o = {q, y, ldy};
        tq_qmm_run(m->pool, &o, 1, x, cols, n, m->act_f32, s->rs.act_a, s->rs.act_k);
        return;
    }
    if (m->mm.needs_xb)
        tq_mm_round_x(x, cols, n, cols, s->rs.xb);
    tq_mm_run(&m->mm, m->pool, w, rows, cols, x, s->rs.xb, cols, n, y, ldy);
}

/* several products of the same x in one pool job (q/k/v, gate/up) */
static void matmul_multi(tq_session *s, const tq_mm_out *outs, const tq_qmat *const *qs,
                         int n_out, int64_t cols, const float *x, int64_t n)
{
    tq_model *m = s->m;
    tq_qmm_out qo[4];
    tq_mm_out dn[4];
    int nq = 0, nd = 0;
    for (int i = 0; i < n_out; i++) {
        if (qs[i]->f)
            qo[nq++] = (tq_qmm_out){qs[i], outs[i].y, outs[i].ldy};
        else
            dn[nd++] = outs[i];
    }
    if (nq)
        tq_qmm_run(m->pool, qo, nq, x, cols, n, m->act_f32, s->rs.act_a, s->rs.act_k);
    if (!nd)
        return;
    if (m->mm.needs_xb)
        tq_mm_round_x(x, cols, n, cols, s->rs.xb);
    tq_mm_run_multi(&m->mm, m->pool, dn, nd, cols, x, s->rs.xb, cols, n);
}

static void add_bias(float *y, const float *b, int n, int width)
{
    for (int t = 0; t < n; t++)
        for (int i = 0; i < width; i++)
            y[(size_t)t * width + i] += b[i];
}

tq_status tq_forward(tq_session *s, const int32_t *tokens, int n, float *logits, int all_logits)
{
    const tq_fwd_seq one = {s, tokens, n};
    return tq_forward_batch(s, &one, 1, logits, all_logits);
}

/* Rows of every matmul are the tokens of all sequences, one after the other; RoPE positions,
 * the cache append and attention are per sequence. A row's result does not depend on the other
 * rows (the kernels are batch-invariant), so each sequence gets the logits it would get alone. */
tq_status tq_forward_batch(tq_session *s, const tq_fwd_seq *seq, int n_seq, float *logits,
                           int all_logits)
{
    tq_model *m = s->m;
    const tq_model_config *p = &m->cfg;
    tq_run_state *r = &s->rs;
    const int dim = p->hidden, hd = p->head_dim, nh = p->n_heads, nkv = p->n_kv_heads;
    const int qd = nh * hd, kvd = nkv * hd, ffn = p->ffn_hidden, rd = p->rope_dim;
    const float eps = p->rms_eps;
    const int p1 = p->norm_plus_one;
    int n = 0;

    for (int j = 0; j < n_seq; n += seq[j++].n)
        for (int t = 0; t < seq[j].n; t++)
            embed_row(m, seq[j].tokens[t], r->x + (size_t)(n + t) * dim);

    for (int il = 0; il < p->n_layers; il++) {
        const tq_layer_weights *w = &m->layers[il];
        const int sliding = tq_model_config_layer_is_sliding(p, il);
        const float *inv_freq = sliding ? m->inv_freq_local : m->inv_freq;

        /* attention */
        for (int t = 0; t < n; t++)
            rmsnorm(r->xn + (size_t)t * dim, r->x + (size_t)t * dim, w->attn_norm, dim, eps, p1);
        const tq_mm_out qkv[3] = {{w->wq, qd, r->q, qd}, {w->wk, kvd, r->k, kvd},
                                  {w->wv, kvd, r->v, kvd}};
        matmul_multi(s, qkv, (const tq_qmat *[]){&w->q_wq, &w->q_wk, &w->q_wv}, 3, dim, r->xn, n);
        if (w->bq) {
            add_bias(r->q, w->bq, n, qd);
            add_bias(r->k, w->bk, n, kvd);
            add_bias(r->v, w->bv, n, kvd);
        }
        for (int j = 0, t = 0; j < n_seq; j++)
        for (int64_t pos = seq[j].s->n_past; pos < seq[j].s->n_past + seq[j].n; pos++, t++) {
            float *q = r->q + (size_t)t * qd, *k = r->k + (size_t)t * kvd;
            if (w->q_norm) {
                for (int h = 0; h < nh; h++)
                    rmsnorm(q + h * hd, q + h * hd, w->q_norm, hd, eps, p1);
                for (int h = 0; h < nkv; h++)
                    rmsnorm(k + h * hd, k + h * hd, w->k_norm, hd, eps, p1);
            }
            float *cs = r->cos_sin + (size_t)t * rd;
            rope_table(inv_freq, rd, pos, cs);
            rope(q, nh, hd, rd, cs);
            rope(k, nkv, hd, rd, cs);
        }
        for (int j = 0, t = 0; j < n_seq; t += seq[j++].n) {
            tq_kvcache *kv = seq[j].s->kv;
            const int64_t pos0 = seq[j].s->n_past;
            tq_status st = kv->ops->append(kv, il, pos0, r->k + (size_t)t * kvd,
                                           r->v + (size_t)t * kvd, seq[j].n);
            if (st)
                return st;
            kv->ops->attend(kv, il, r->q + (size_t)t * qd, seq[j].n, pos0,
                            r->att + (size_t)t * qd, m->pool);
        }
        matmul(s, w->wo, &w->q_wo, dim, qd, r->att, n, r->xn, dim);
        for (int t = 0; t < n; t++) {
            float *o = r->xn + (size_t)t * dim, *x = r->x + (size_t)t * dim;
            if (w->post_attn_norm)
                rmsnorm(o, o, w->post_attn_norm, dim, eps, p1);
            for (int i = 0; i < dim; i++)
                x[i] += o[i];
        }

        /* feed-forward: act(x Wgate) * (x Wup), then Wdown */
        for (int t = 0; t < n; t++)
            rmsnorm(r->xn + (size_t)t * dim, r->x + (size_t)t * dim, w->ffn_norm, dim, eps, p1);
        const tq_mm_out gu[2] = {{w->w_gate, ffn, r->h1, ffn}, {w->w_up, ffn, r->h2, ffn}};
        matmul_multi(s, gu, (const tq_qmat *[]){&w->q_gate, &w->q_up}, 2, dim, r->xn, n);
        const size_t nf = (size_t)n * ffn;
        if (p->act_gelu)
            for (size_t i = 0; i < nf; i++)
                r->h1[i] = gelu_tanh(r->h1[i]) * r->h2[i];
        else
            for (size_t i = 0; i < nf; i++)
                r->h1[i] = silu(r->h1[i]) * r->h2[i];
        matmul(s, w->w_down, &w->q_down, dim, ffn, r->h1, n, r->xn, dim);
        for (int t = 0; t < n; t++) {
            float *o = r->xn + (size_t)t * dim, *x = r->x + (size_t)t * dim;
            if (w->post_ffn_norm)
                rmsnorm(o, o, w->post_ffn_norm, dim, eps, p1);
            for (int i = 0; i < dim; i++)
                x[i] += o[i];
        }
    }

    if (logits) { /* every row, or the last row of each sequence */
        int nt = 0;
        for (int j = 0, t = 0; j < n_seq; t += seq[j++].n)
            for (int i = all_logits ? 0 : seq[j].n - 1; i < seq[j].n; i++, nt++)
                rmsnorm(r->xn + (size_t)nt * dim, r->x + (size_t)(t + i) * dim, m->final_norm,
                        dim, eps, p1);
        matmul(s, m->lm_head, &m->q_lm_head, p->vocab, dim, r->xn, nt, logits, p->vocab);
        if (p->final_logit_softcap > 0.0f) {
            const float c = p->final_logit_softcap;
            for (size_t i = 0; i < (size_t)nt * p->vocab; i++)
                logits[i] = c * tanhf(logits[i] / c);
        }
    }
    return TQ_OK;
}
