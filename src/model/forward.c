/* forward.c -- the forward pass of a decoder-only transformer, written once for every
 * architecture we run and every backend (common/backend.h: the CPU, backend_cpu.c; CUDA,
 * cuda/backend_cuda.cu). Per-architecture differences are flags of tq_model_config (io.h) and
 * optional tensors; the backend implements the operations:
 *
 *   x = embed[token] (* embed_scale)
 *   for each layer:
 *     h = rmsnorm(x) ; q, k, v = h Wq, h Wk, h Wv (+ bias: qwen2)
 *     q, k = per-head rmsnorm (qk_norm: qwen3, gemma3) ; q, k = rope(q, k, position)
 *     cache.append(k, v) ; a = cache.attend(q)          <- K/V always read through the cache
 *     x += (post_attn_norm) (a Wo)
 *     h = rmsnorm(x) ; x += (post_ffn_norm) ((act(h Wgate) * h Wup) Wdown)   act: SiLU | GELU
 *   logits = rmsnorm(x) Wout (softcap)                      (Wout = embed when tied)
 *
 * RoPE pairs element i with i + rope_dim/2 (Hugging Face rotate_half; tq_weights delivers HF
 * layout, GGUF q/k permutation already undone). Activations are f32 end to end. Sliding layers
 * (gemma3) take the local RoPE table; their window is the cache's business. Nothing here
 * allocates. */
#include "model/engine.h"

static tq_be_mat mat(const tq_fwd_weights *fw, const void *w, const tq_qmat *q, int64_t rows,
                     int64_t cols)
{
    const void *nat = q && q->f ? (fw->native_view ? q->w : (const void *)q) : NULL;
    return (tq_be_mat){w, fw->wtype, nat, rows, cols}; /* native: block rows */
}

tq_status tq_forward_run(const tq_fwd_weights *fw, const tq_backend *be, void *ctx,
                         tq_run_state *r, const tq_fwd_item *seq, int n_seq, float *logits,
                         int all_logits)
{
    const tq_model_config *p = fw->cfg;
    const int dim = p->hidden, hd = p->head_dim, nh = p->n_heads, nkv = p->n_kv_heads;
    const int qd = nh * hd, kvd = nkv * hd, ffn = p->ffn_hidden, rd = p->rope_dim;
    const float eps = p->rms_eps;
    const int p1 = p->norm_plus_one;
    tq_status st;
    int n = 0;

    const tq_be_mat emb = mat(fw, fw->embed, fw->q_embed, p->vocab, dim);
    for (int j = 0; j < n_seq; n += seq[j++].n)
        if ((st = be->embed(ctx, &emb, seq[j].tokens, seq[j].n, p->embed_scale,
                            r->x + (size_t)n * dim)))
            return st;

    for (int il = 0; il < p->n_layers; il++) {
        const tq_layer_weights *w = &fw->layers[il];
        const int sliding = tq_model_config_layer_is_sliding(p, il);
        const float *inv_freq = sliding ? fw->inv_freq_local : fw->inv_freq;

        /* attention: q, k, v = rmsnorm(x) Wq, Wk, Wv in one job */
        tq_be_mm a = {.x = r->x, .cols = dim, .n = n, .pre = TQ_BE_PRE_NORM,
                      .norm = w->attn_norm, .eps = eps, .plus_one = p1, .xn = r->xn, .n_out = 3,
                      .kv_first = 1};
        a.out[0] = (tq_be_out){mat(fw, w->wq, &w->q_wq, qd, dim), r->q, qd};
        a.out[1] = (tq_be_out){mat(fw, w->wk, &w->q_wk, kvd, dim), r->k, kvd};
        a.out[2] = (tq_be_out){mat(fw, w->wv, &w->q_wv, kvd, dim), r->v, kvd};
        if ((st = be->matmul(ctx, &a)))
            return st;
        if (w->bq) {
            be->bias(ctx, r->q, w->bq, n, qd);
            be->bias(ctx, r->k, w->bk, n, kvd);
            be->bias(ctx, r->v, w->bv, n, kvd);
        }
        if (w->q_norm) {
            be->rmsnorm(ctx, r->q, r->q, w->q_norm, (int64_t)n * nh, hd, eps, p1);
            be->rmsnorm(ctx, r->k, r->k, w->k_norm, (int64_t)n * nkv, hd, eps, p1);
        }
        /* every sequence's RoPE, then their appends + attention in one call when the backend
         * has it (the cache spreads all of them over its threads, a lone sequence's too) */
        const int together = be->attend_batch != NULL;
        tq_be_attn ai[TQ_BATCH_MAX];
        for (int j = 0, t = 0; j < n_seq; t += seq[j++].n) {
            be->rope(ctx, r->q + (size_t)t * qd, nh, r->k + (size_t)t * kvd, nkv, seq[j].n, hd,
                     rd, inv_freq, seq[j].pos, r->cos_sin ? r->cos_sin + (size_t)t * rd : NULL);
            ai[j] = (tq_be_attn){seq[j].kv, seq[j].pos, seq[j].n, r->k + (size_t)t * kvd,
                                 r->v + (size_t)t * kvd, r->q + (size_t)t * qd,
                                 r->att + (size_t)t * qd};
            if (!together && (st = be->attend(ctx, seq[j].kv, il, seq[j].pos, ai[j].k, ai[j].v,
                                              ai[j].q, seq[j].n, ai[j].out)))
                return st;
        }
        if (together && (st = be->attend_batch(ctx, il, ai, n_seq)))
            return st;
        /* x += (post_attn_norm) (att Wo) */
        a = (tq_be_mm){.x = r->att, .cols = qd, .n = n, .eps = eps, .plus_one = p1, .n_out = 1,
                       .res = r->x, .post_norm = w->post_attn_norm};
        a.out[0] = (tq_be_out){mat(fw, w->wo, &w->q_wo, dim, qd), r->xn, dim};
        if ((st = be->matmul(ctx, &a)))
            return st;

        /* feed-forward: gate, up = rmsnorm(x) Wgate, Wup; x += (post) ((act(gate) * up) Wdown) */
        a = (tq_be_mm){.x = r->x, .cols = dim, .n = n, .pre = TQ_BE_PRE_NORM,
                       .norm = w->ffn_norm, .eps = eps, .plus_one = p1, .xn = r->xn, .n_out = 2};
        a.out[0] = (tq_be_out){mat(fw, w->w_gate, &w->q_gate, ffn, dim), r->h1, ffn};
        a.out[1] = (tq_be_out){mat(fw, w->w_up, &w->q_up, ffn, dim), r->h2, ffn};
        if ((st = be->matmul(ctx, &a)))
            return st;
        a = (tq_be_mm){.x = r->h1, .cols = ffn, .n = n,
                       .pre = p->act_gelu ? TQ_BE_PRE_GELU : TQ_BE_PRE_SILU, .up = r->h2,
                       .eps = eps, .plus_one = p1, .n_out = 1, .res = r->x,
                       .post_norm = w->post_ffn_norm};
        a.out[0] = (tq_be_out){mat(fw, w->w_down, &w->q_down, dim, ffn), r->xn, dim};
        if ((st = be->matmul(ctx, &a)))
            return st;
    }

    if (!logits)
        return TQ_OK;
    /* every row, or the last row of each sequence: normed into xn (in place of the matmul's
     * own NORM input when the rows are one contiguous block) */
    const tq_be_mat head = mat(fw, fw->lm_head, fw->q_lm_head, p->vocab, dim);
    tq_be_mm a = {.cols = dim, .eps = eps, .plus_one = p1, .n_out = 1};
    if (all_logits || n_seq == 1) {
        const int first = all_logits ? 0 : n - 1;
        a.x = r->x + (size_t)first * dim;
        a.n = n - first;
        a.pre = TQ_BE_PRE_NORM;
        a.norm = fw->final_norm;
        a.xn = r->xn;
    } else {
        int nt = 0;
        for (int j = 0, t = 0; j < n_seq; t += seq[j++].n, nt++)
            be->rmsnorm(ctx, r->xn + (size_t)nt * dim, r->x + (size_t)(t + seq[j].n - 1) * dim,
                        fw->final_norm, 1, dim, eps, p1);
        a.x = r->xn;
        a.n = nt;
    }
    a.out[0] = (tq_be_out){head, logits, p->vocab};
    if ((st = be->matmul(ctx, &a)))
        return st;
    if (p->final_logit_softcap > 0.0f)
        be->softcap(ctx, logits, a.n * p->vocab, p->final_logit_softcap);
    return TQ_OK;
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
    const tq_model *m = s->m;
    if (n_seq < 1 || n_seq > TQ_BATCH_MAX)
        return TQ_FAIL(TQ_E_ARG, "tq_forward_batch: %d sequences (valid: 1..%d)", n_seq,
                       TQ_BATCH_MAX);
    tq_fwd_item it[TQ_BATCH_MAX];
    for (int j = 0; j < n_seq; j++)
        it[j] = (tq_fwd_item){seq[j].s->kv, seq[j].s->n_past, seq[j].tokens, seq[j].n};
    const tq_fwd_weights fw = {&m->cfg, m->wtype, m->layers, m->embed, m->lm_head,
                               &m->q_embed, &m->q_lm_head, m->final_norm, m->inv_freq,
                               m->inv_freq_local, 0};
    return tq_forward_run(&fw, &tq_backend_cpu, s, &s->rs, it, n_seq, logits, all_logits);
}
