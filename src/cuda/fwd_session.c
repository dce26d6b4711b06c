/* fwd_session.c -- tq_cuda_session_create(): checks that the CPU engine's loaded model is one the
 * GPU forward runs (Llama-family blocks, BF16 weights) and hands its weights to fwd.cu. The rest
 * of tq_cuda_session_* lives in fwd.cu; builds without CUDA get stubs from cuda_none.c. */
#ifdef TQ_HAVE_CUDA
#include "cuda/fwd_cuda.h"
#include "model/engine.h"

tq_status tq_cuda_session_create(const tq_model *m, tq_kv_scheme kv, int64_t n_ctx, tq_cuda_session **out)
{
    if (!out)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_create: NULL out");
    *out = NULL;
    if (!m)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_create: NULL model");
    if (n_ctx < 1 || n_ctx > ((int64_t)1 << 31))
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_create: n_ctx %lld (valid: 1..2^31)", (long long)n_ctx);
    if (tq_cuda_available() < 1)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_session_create: no CUDA device");
    const tq_model_config *c = &m->cfg;
    if (m->wtype != TQ_DTYPE_BF16)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_session_create: the model was loaded with %s weights; "
                       "the GPU forward takes BF16 (tq_model_opts.weight_type = TQ_DTYPE_BF16, the default)",
                       m->wtype == TQ_DTYPE_F32 ? "F32" : "F16");
    const char *why = NULL;
    if (m->native)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_session_create: %s: the GPU forward needs bf16 "
                       "weights, this model keeps native block weights (%s); load it with "
                       "--weights bf16 (tq_model_opts.weight_store = TQ_STORE_DEQUANT)", m->path,
                       m->kernels);
    if (c->act_gelu)
        why = "GELU MLP";
    else if (c->final_logit_softcap > 0.0f)
        why = "logit soft-capping";
    else if (c->norm_plus_one)
        why = "(1 + w) RMSNorm";
    else if (c->n_heads % c->n_kv_heads)
        why = "n_heads not a multiple of n_kv_heads";
    for (int il = 0; il < c->n_layers && !why; il++) {
        const tq_layer_weights *w = &m->layers[il];
        if (w->bq || w->bk || w->bv)
            why = "q/k/v biases";
        else if (w->q_norm || w->k_norm)
            why = "per-head q/k norms";
        else if (w->post_attn_norm || w->post_ffn_norm)
            why = "post-attention / post-MLP norms";
        else if (tq_model_config_layer_is_sliding(c, il))
            why = "sliding-window layers";
    }
    if (why)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_session_create: %s model: the GPU forward does not run %s "
                       "(supported: Llama-family blocks without biases, q/k norms, post norms, soft-capping, "
                       "sliding windows)", m->info.arch_name ? m->info.arch_name : "this", why);
    tqc_fwd_layer *ls = tq_calloc((size_t)c->n_layers, sizeof(*ls));
    if (!ls)
        return TQ_FAIL(TQ_E_NOMEM, "tq_cuda_session_create: out of memory");
    for (int il = 0; il < c->n_layers; il++) {
        const tq_layer_weights *w = &m->layers[il];
        ls[il] = (tqc_fwd_layer){w->attn_norm, w->ffn_norm, w->wq, w->wk, w->wv, w->wo,
                                 w->w_gate, w->w_up, w->w_down};
    }
    tqc_fwd_desc d = {0};
    d.n_layers = c->n_layers;
    d.dim = c->hidden;
    d.n_heads = c->n_heads;
    d.n_kv_heads = c->n_kv_heads;
    d.head_dim = c->head_dim;
    d.ffn = c->ffn_hidden;
    d.vocab = c->vocab;
    d.rope_dim = c->rope_dim;
    d.eps = c->rms_eps;
    d.attn_scale = m->attn_scale;
    d.embed_scale = c->embed_scale != 0.0f ? c->embed_scale : 1.0f;
    d.embed = m->embed;
    d.lm_head = m->lm_head;
    d.final_norm = m->final_norm;
    d.inv_freq = m->inv_freq;
    d.layers = ls;
    tq_status st = tqc_fwd_create(&d, kv, n_ctx, out);
    tq_free(ls);
    return st;
}
#else
typedef int tq_fwd_session_unused; /* ISO C forbids an empty translation unit */
#endif
