/* model.c -- loading a model (config + weights through the uniform tensor source of io.h, every
 * shape checked against the config), sessions (KV cache + run state allocated once), and the
 * public eval entry points that split long inputs into n_batch chunks for tq_forward(). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/half.h"
#include "model/engine.h"
#include "model/kvcache_turbo.h"
#include "cpu/formats_cpu.h"

/* xxHash (libxxhash-dev), header-only use: no library to link */
#if !__has_include(<xxhash.h>)
#error "xxhash.h not found: install libxxhash-dev (Debian) / xxhash (the weights fingerprint)"
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

void tq_model_opts_default(tq_model_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->weight_type = TQ_DTYPE_BF16;
    o->n_threads = 0;
    o->pool = NULL;
}

void tq_session_opts_default(tq_session_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->kv.kind = TQ_KV_BF16;
    o->n_ctx = 0;
    o->n_batch = 0;
}

/* ---- loading ------------------------------------------------------------------------------ */

typedef struct loader {
    const tq_weights *src;
    tq_model *m;
    const char *path;
    int store; /* TQ_STORE_* */
} loader;

/* Read tensor `name` of the given shape (n_dims 1 or 2) as dtype into a new buffer *dst.
 * A missing optional tensor leaves *dst NULL. */
/* Kept in its block format? (a GGUF matrix whose type is not a float type) */
static int keep_native(const loader *L, const tq_weights_tensor *ti)
{
    return L->store != TQ_STORE_DEQUANT && ti->ggml_type >= 0 && ti->ggml_type != TQ_GGML_F32 &&
           ti->ggml_type != TQ_GGML_F16 && ti->ggml_type != TQ_GGML_BF16;
}

/* A matrix in its block format into a new buffer (the file's bytes, rows in HF order). */
static tq_status load_native(loader *L, const char *name, const tq_weights_tensor *ti,
                             int64_t d0, int64_t d1, void **dst, tq_qmat *q)
{
    const tq_format *f = tq_cpu_format(ti->ggml_type);
    tq_status st;
    if (!f || tq_qmm_path(f, L->m->act_f32) == TQ_QPATH_NONE) {
        char list[256];
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: tensor '%s' (%s) has type %s, which the native "
                                         "kernels do not run; supported: %s (or load with "
                                         "--weights f32|f16|bf16 if it dequantizes)", L->path,
                       name, ti->src_name, ti->src_type, tq_format_list(list, sizeof(list), NULL));
    }
    void *buf = tq_aligned_alloc(ti->src_nbytes);
    if (!buf)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory for tensor %s (%zu bytes)", L->path, name,
                       ti->src_nbytes);
    int type;
    size_t rb;
    if ((st = tq_weights_read_raw(L->src, name, &type, &rb, buf, ti->src_nbytes))) {
        tq_free(buf);
        return st;
    }
    *q = (tq_qmat){.w = buf, .f = f, .rows = d0, .cols = d1, .row_bytes = rb};
    /* decode from 16 rows interleaved (cpu/qdot_r16.h) where this CPU has the kernel: the same
     * buffer rearranged in place (one resident copy), every other reader sees the file rows
     * through qmatmul.h's unpacked view */
    tq_qmm_r16_pack(q, L->m->act_f32);
    L->m->native = 1;
    L->m->weight_bytes += ti->src_nbytes;
    L->m->tensors[L->m->n_tensors].data = buf;
    L->m->tensors[L->m->n_tensors].q = q;
    L->m->tensors[L->m->n_tensors++].bytes = ti->src_nbytes;
    *dst = buf;
    return TQ_OK;
}

static tq_status load_tensor_q(loader *L, const char *name, int optional, int n_dims, int64_t d0,
                               int64_t d1, tq_dtype dtype, void **dst, tq_qmat *q)
{
    tq_weights_tensor ti;
    *dst = NULL;
    if (tq_weights_find(L->src, name) < 0) {
        if (optional)
            return TQ_OK;
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor %s is missing (the %s architecture needs it)",
                       L->path, name, tq_arch_name(L->m->cfg.arch));
    }
    tq_status st = tq_weights_get(L->src, name, &ti);
    if (st)
        return st;
    const int64_t want[2] = {d0, d1};
    int ok = ti.n_dims == n_dims;
    for (int i = 0; ok && i < n_dims; i++)
        ok = ti.shape[i] == want[i];
    if (!ok) {
        char got[96] = "", exp[64];
        int pos = 0;
        for (int i = 0; i < ti.n_dims && i < 4 && pos < 80; i++)
            pos += snprintf(got + pos, sizeof(got) - (size_t)pos, "%s%lld", i ? ", " : "",
                            (long long)ti.shape[i]);
        if (n_dims == 1)
            snprintf(exp, sizeof(exp), "%lld", (long long)d0);
        else
            snprintf(exp, sizeof(exp), "%lld, %lld", (long long)d0, (long long)d1);
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor %s has shape [%s], expected [%s] from the config",
                       L->path, name, got, exp);
    }
    if (q && keep_native(L, &ti))
        return load_native(L, name, &ti, d0, d1, dst, q);
    if (q && L->store == TQ_STORE_NATIVE && ti.ggml_type < 0)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: --weights native needs a GGUF file with block "
                                         "formats or MLX affine matrices with BF16 scales; tensor "
                                         "%s is %s in safetensors (use --weights bf16|f16|f32)",
                       L->path, name, ti.src_type);
    size_t bytes;
    if (!tq_mul_ok((size_t)ti.n_elem, tq_dtype_size(dtype), &bytes))
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor %s is too large", L->path, name);
    void *buf = tq_aligned_alloc(bytes);
    if (!buf)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory for tensor %s (%zu bytes)", L->path, name,
                       bytes);
    if ((st = tq_weights_read(L->src, name, dtype, buf, bytes))) {
        tq_free(buf);
        return st;
    }
    L->m->weight_bytes += bytes;
    L->m->tensors[L->m->n_tensors].data = buf;
    L->m->tensors[L->m->n_tensors++].bytes = bytes;
    *dst = buf;
    return TQ_OK;
}

static tq_status load_tensor(loader *L, const char *name, int optional, int n_dims, int64_t d0,
                             int64_t d1, tq_dtype dtype, void **dst)
{
    return load_tensor_q(L, name, optional, n_dims, d0, d1, dtype, dst, NULL);
}

/* RoPE frequencies of Hugging Face: theta^(-2i/rope_dim), then the configured scaling. */
static tq_status rope_freqs(const tq_model_config *c, float theta, float *inv_freq)
{
    const int half = c->rope_dim / 2;
    for (int i = 0; i < half; i++)
        inv_freq[i] = (float)(1.0 / pow((double)theta, (double)(2 * i) / (double)c->rope_dim));
    if (c->rope_scaling == TQ_ROPE_SCALING_LINEAR) {
        for (int i = 0; i < half; i++)
            inv_freq[i] /= c->rope_factor;
    } else if (c->rope_scaling == TQ_ROPE_SCALING_LLAMA3) {
        const double f = c->rope_factor, lo = c->rope_low_freq_factor;
        const double hi = c->rope_high_freq_factor, old = (double)c->rope_orig_max_pos;
        if (f <= 0 || hi <= lo || old <= 0)
            return TQ_FAIL(TQ_E_FORMAT, "llama3 rope scaling: bad parameters (factor %g, "
                                        "low %g, high %g, original context %g)", f, lo, hi, old);
        const double lo_wl = old / lo, hi_wl = old / hi;
        for (int i = 0; i < half; i++) {
            const float fr = inv_freq[i];
            const double wl = 2.0 * M_PI / fr;
            float out = wl > lo_wl ? (float)(fr / f) : fr;
            if (!(wl < hi_wl) && !(wl > lo_wl)) {
                const double sm = (old / wl - lo) / (hi - lo);
                out = (float)((1.0 - sm) * out / f + sm * out);
            }
            inv_freq[i] = out;
        }
    } else if (c->rope_scaling != TQ_ROPE_SCALING_NONE) {
        return TQ_FAIL(TQ_E_UNSUPPORTED, "rope scaling type %d is not supported; supported: "
                                         "none, linear, llama3", (int)c->rope_scaling);
    }
    return TQ_OK;
}

/* Global-layer RoPE frequencies. A GGUF Llama 3 file carries its frequency scaling as the
 * tensor rope_freqs.weight (rope_dim/2 divisors, llama.cpp's freq_factors) instead of the
 * parameters; use it when present. */
static tq_status rope_freqs_for(const char *path, const tq_weights *src, const tq_model_config *c,
                                float *inv_freq)
{
    static const char name[] = "rope_freqs.weight";
    const tq_gguf *g = tq_weights_gguf(src);
    if (!g || tq_gguf_find_tensor(g, name) < 0)
        return rope_freqs(c, c->rope_theta, inv_freq);
    tq_weights_tensor info;
    tq_status st = tq_weights_get(src, name, &info);
    if (st)
        return st;
    const int half = c->rope_dim / 2;
    if (strcmp(info.src_type, "F32") || info.n_elem != half)
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor %s is %s with %lld elements, expected F32 with %d "
                                    "(rope_dim / 2)", path, name, info.src_type,
                       (long long)info.n_elem, half);
    tq_model_config plain = *c;
    plain.rope_scaling = TQ_ROPE_SCALING_NONE;
    if ((st = rope_freqs(&plain, c->rope_theta, inv_freq)))
        return st;
    float *f = tq_malloc((size_t)half * sizeof(float));
    if (!f)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory for %s", path, name);
    /* pread, not the mapping: a file truncated under the load gives TQ_E_IO, not SIGBUS */
    if ((st = tq_weights_read(src, name, TQ_DTYPE_F32, f, (size_t)half * sizeof(float)))) {
        tq_free(f);
        return st;
    }
    for (int i = 0; i < half; i++) {
        if (!(f[i] > 0.0f)) {
            st = TQ_FAIL(TQ_E_FORMAT, "%s: %s[%d] = %g is not positive", path, name, i, f[i]);
            break;
        }
        inv_freq[i] /= f[i];
    }
    tq_free(f);
    return st;
}

static tq_status check_config(const char *path, const tq_model_config *c)
{
    switch (c->arch) {
    case TQ_ARCH_LLAMA:
    case TQ_ARCH_MISTRAL:
    case TQ_ARCH_QWEN2:
    case TQ_ARCH_QWEN3:
        break;
    case TQ_ARCH_GEMMA3:
        break;
    default:
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: architecture '%s' is not supported; supported: "
                                         "llama, mistral, qwen2, qwen3, gemma3", path,
                       c->arch_name[0] ? c->arch_name : "(none given)");
    }
    if (c->n_layers <= 0 || c->hidden <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->head_dim <= 0 || c->ffn_hidden <= 0 || c->vocab <= 0 || c->n_layers > 4096 ||
        c->hidden > (1 << 20) || c->ffn_hidden > (1 << 22) || c->head_dim > 4096 ||
        c->n_heads > 4096 || c->vocab > (1 << 24))
        return TQ_FAIL(TQ_E_FORMAT, "%s: implausible config (layers %d, hidden %d, heads %d, "
                                    "kv heads %d, head_dim %d, ffn %d, vocab %d)", path,
                       c->n_layers, c->hidden, c->n_heads, c->n_kv_heads, c->head_dim,
                       c->ffn_hidden, c->vocab);
    if (c->attn_logit_softcap > 0.0f)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: attention logit soft-capping (gemma2 style) is not "
                                         "supported", path);
    if (c->n_heads % c->n_kv_heads)
        return TQ_FAIL(TQ_E_FORMAT, "%s: %d query heads are not a multiple of %d kv heads", path,
                       c->n_heads, c->n_kv_heads);
    if (c->rope_dim <= 0 || c->rope_dim > c->head_dim || c->rope_dim % 2)
        return TQ_FAIL(TQ_E_FORMAT, "%s: rope dimension %d must be even and in [2, head_dim %d]",
                       path, c->rope_dim, c->head_dim);
    if (!(c->rope_theta > 0.0f))
        return TQ_FAIL(TQ_E_FORMAT, "%s: rope_theta %g must be positive", path, c->rope_theta);
    return TQ_OK;
}

static size_t mat_bytes(const tq_model *m, const tq_qmat *q, int64_t rows, int64_t cols)
{
    return q->f ? (size_t)q->rows * q->row_bytes : (size_t)(rows * cols) * tq_dtype_size(m->wtype);
}

/* m->kernels: which kernel runs each native tensor type; m->weight_bytes_token */
static void describe_native(tq_model *m)
{
    const tq_model_config *c = &m->cfg;
    const int64_t dim = c->hidden, qd = (int64_t)c->n_heads * c->head_dim;
    const int64_t kvd = (int64_t)c->n_kv_heads * c->head_dim, ffn = c->ffn_hidden;
    const tq_qmat *seen[16];
    int ns = 0;
    size_t pos = 0, tok = mat_bytes(m, &m->q_lm_head, c->vocab, dim);
    m->kernels[0] = 0;
    for (int il = -1; il < c->n_layers; il++) {
        const tq_layer_weights *w = il >= 0 ? &m->layers[il] : NULL;
        const tq_qmat *qs[7] = {&m->q_lm_head};
        int nq = 1;
        if (w) {
            const tq_qmat *l[7] = {&w->q_wq, &w->q_wk, &w->q_wv, &w->q_wo, &w->q_gate, &w->q_up,
                                   &w->q_down};
            const int64_t r[7] = {qd, kvd, kvd, dim, ffn, ffn, dim};
            const int64_t k[7] = {dim, dim, dim, qd, dim, dim, ffn};
            for (int i = 0; i < 7; i++) {
                qs[i] = l[i];
                tok += mat_bytes(m, l[i], r[i], k[i]);
            }
            nq = 7;
        }
        for (int i = 0; i < nq; i++) {
            const tq_qmat *q = qs[i];
            int dup = !q->f;
            for (int j = 0; j < ns && !dup; j++)
                dup = seen[j]->f == q->f;
            if (dup || ns == 16)
                continue;
            seen[ns++] = q;
            char kn[64];
            pos += (size_t)snprintf(m->kernels + pos, sizeof(m->kernels) - pos, "%s%s %s%s",
                                    pos ? ", " : "", q->f->name,
                                    tq_qmm_kernel_name(q->f, m->act_f32, kn, sizeof(kn)),
                                    q->r16 ? " + r16 decode (16-row repack at load)" : "");
            if (pos >= sizeof(m->kernels))
                pos = sizeof(m->kernels) - 1;
        }
    }
    m->weight_bytes_token = tok;
}

tq_status tq_model_load(const char *path, const tq_model_opts *opts, tq_model **out)
{
    tq_model_opts def;
    tq_weights *src = NULL;
    tq_model *m = NULL;
    tq_status st;
    char name[160];

    if (!out)
        return TQ_FAIL(TQ_E_ARG, "tq_model_load: out is NULL");
    *out = NULL;
    if (!path)
        return TQ_FAIL(TQ_E_ARG, "tq_model_load: path is NULL");
    if (!opts) {
        tq_model_opts_default(&def);
        opts = &def;
    }
    const tq_dtype wt = opts->weight_type;
    if (wt != TQ_DTYPE_F32 && wt != TQ_DTYPE_F16 && wt != TQ_DTYPE_BF16)
        return TQ_FAIL(TQ_E_ARG, "tq_model_load: weight type %d is not one of f32, f16, bf16",
                       (int)wt);
    const uint64_t t0 = tq_now_ns();
    if ((st = tq_weights_open(path, &src)))
        return st;
    const tq_model_config *cfg = tq_weights_config(src);
    if ((st = check_config(path, cfg)))
        goto fail;
    if (!(m = tq_calloc(1, sizeof(*m)))) {
        st = TQ_FAIL(TQ_E_NOMEM, "tq_model_load: out of memory");
        goto fail;
    }
    m->cfg = *cfg;
    m->wtype = wt;
    pthread_mutex_init(&m->wh_lock, NULL);
    if (!(m->path = tq_strdup(path)) ||
        !(m->tensors = tq_calloc(3 + 16 * (size_t)cfg->n_layers, sizeof(*m->tensors))) ||
        !(m->layers = tq_calloc((size_t)cfg->n_layers, sizeof(*m->layers))) ||
        !(m->inv_freq = tq_calloc((size_t)cfg->rope_dim / 2, sizeof(float))) ||
        !(m->inv_freq_local = tq_calloc((size_t)cfg->rope_dim / 2, sizeof(float)))) {
        st = TQ_FAIL(TQ_E_NOMEM, "tq_model_load: out of memory");
        goto fail;
    }
    if (!(m->cfg.rms_eps > 0.0f))
        m->cfg.rms_eps = 1e-6f;
    if ((st = rope_freqs_for(path, src, &m->cfg, m->inv_freq)))
        goto fail;
    const float theta_local = m->cfg.rope_theta_local > 0.0f ? m->cfg.rope_theta_local
                                                              : m->cfg.rope_theta;
    if (m->cfg.sliding_window > 0 && m->cfg.sliding_window_pattern > 0) {
        /* gemma3: sliding layers use their own base and no frequency scaling */
        tq_model_config local = m->cfg;
        local.rope_scaling = TQ_ROPE_SCALING_NONE;
        if ((st = rope_freqs(&local, theta_local, m->inv_freq_local)))
            goto fail;
    } else {
        memcpy(m->inv_freq_local, m->inv_freq, sizeof(float) * (size_t)(m->cfg.rope_dim / 2));
    }
    m->attn_scale = 1.0f / sqrtf(m->cfg.query_pre_attn_scalar > 0.0f
                                     ? m->cfg.query_pre_attn_scalar
                                     : (float)m->cfg.head_dim);

    loader L = {.src = src, .m = m, .path = path, .store = opts->weight_store};
    m->act_f32 = opts->native_f32_act != 0;
    const tq_model_config *c = &m->cfg;
    const int64_t dim = c->hidden, qd = (int64_t)c->n_heads * c->head_dim;
    const int64_t kvd = (int64_t)c->n_kv_heads * c->head_dim, ffn = c->ffn_hidden;
    const tq_dtype F = TQ_DTYPE_F32;
    if ((st = load_tensor_q(&L, "model.embed_tokens.weight", 0, 2, c->vocab, dim, wt, &m->embed,
                            &m->q_embed)) ||
        (st = load_tensor(&L, "model.norm.weight", 0, 1, dim, 0, F, (void **)&m->final_norm)))
        goto fail;
    if (!c->tied_embeddings &&
        (st = load_tensor_q(&L, "lm_head.weight", 1, 2, c->vocab, dim, wt, &m->lm_head,
                            &m->q_lm_head)))
        goto fail;
    if (!m->lm_head) {
        if (!c->tied_embeddings)
            tq_log(TQ_LOG_WARN, "%s: the config says untied embeddings but there is no "
                                "lm_head.weight; using the embedding as the output layer", path);
        m->lm_head = m->embed;
        m->q_lm_head = m->q_embed;
    }
    for (int il = 0; il < c->n_layers; il++) {
        tq_layer_weights *w = &m->layers[il];
#define T(field, suffix, opt, nd, a, b, dt)                                                      \
    do {                                                                                         \
        snprintf(name, sizeof(name), "model.layers.%d.%s", il, suffix);                          \
        if ((st = load_tensor(&L, name, opt, nd, a, b, dt, (void **)&w->field)))                 \
            goto fail;                                                                           \
    } while (0)
#define M(field, qf, suffix, a, b)                                                               \
    do {                                                                                         \
        snprintf(name, sizeof(name), "model.layers.%d.%s", il, suffix);                          \
        if ((st = load_tensor_q(&L, name, 0, 2, a, b, wt, (void **)&w->field, &w->qf)))          \
            goto fail;                                                                           \
    } while (0)
        T(attn_norm, "input_layernorm.weight", 0, 1, dim, 0, F);
        M(wq, q_wq, "self_attn.q_proj.weight", qd, dim);
        M(wk, q_wk, "self_attn.k_proj.weight", kvd, dim);
        M(wv, q_wv, "self_attn.v_proj.weight", kvd, dim);
        M(wo, q_wo, "self_attn.o_proj.weight", dim, qd);
        if (c->qkv_bias) {
            T(bq, "self_attn.q_proj.bias", 0, 1, qd, 0, F);
            T(bk, "self_attn.k_proj.bias", 0, 1, kvd, 0, F);
            T(bv, "self_attn.v_proj.bias", 0, 1, kvd, 0, F);
        }
        if (c->qk_norm) {
            T(q_norm, "self_attn.q_norm.weight", 0, 1, c->head_dim, 0, F);
            T(k_norm, "self_attn.k_norm.weight", 0, 1, c->head_dim, 0, F);
        }
        if (c->arch == TQ_ARCH_GEMMA3) { /* sandwich norms around attention and MLP */
            T(post_attn_norm, "post_attention_layernorm.weight", 0, 1, dim, 0, F);
            T(ffn_norm, "pre_feedforward_layernorm.weight", 0, 1, dim, 0, F);
            T(post_ffn_norm, "post_feedforward_layernorm.weight", 0, 1, dim, 0, F);
        } else {
            T(ffn_norm, "post_attention_layernorm.weight", 0, 1, dim, 0, F);
        }
        M(w_gate, q_gate, "mlp.gate_proj.weight", ffn, dim);
        M(w_up, q_up, "mlp.up_proj.weight", ffn, dim);
        M(w_down, q_down, "mlp.down_proj.weight", dim, ffn);
#undef T
#undef M
    }

    const tq_mm_opts mmo = {.bf16_act = opts->matvec_bf16, .openblas = opts->gemm_openblas};
    if ((st = tq_mm_select(wt, &mmo, &m->mm)))
        goto fail;
    if (opts->pool) {
        m->pool = opts->pool;
    } else {
        if ((st = tq_pool_create(opts->n_threads, &m->pool)))
            goto fail;
        m->own_pool = 1;
    }
    tq_model_info *in = &m->info;
    in->arch = c->arch;
    in->arch_name = tq_arch_name(c->arch);
    in->config = &m->cfg;
    in->path = m->path;
    in->n_layers = c->n_layers;
    in->dim = c->hidden;
    in->hidden_dim = c->ffn_hidden;
    in->n_heads = c->n_heads;
    in->n_kv_heads = c->n_kv_heads;
    in->head_dim = c->head_dim;
    in->vocab_size = c->vocab;
    in->max_ctx = c->max_ctx > 0 && c->max_ctx < INT32_MAX ? (int)c->max_ctx : 4096;
    in->bos_id = c->bos_id;
    in->eos_id = c->eos_id;
    in->rope_theta = c->rope_theta;
    in->weight_type = wt;
    in->weight_bytes = m->weight_bytes;
    in->n_threads = tq_pool_size(m->pool);
    in->kernel = m->mm.name;
    in->gemm_kernel = m->mm.gemm_name;
    describe_native(m);
    in->native = m->native;
    in->native_kernels = m->kernels;
    in->weight_bytes_token = m->weight_bytes_token;
    tq_weights_free(src);
    tq_log(TQ_LOG_INFO, "%s: %s, %d layers, %s weights (%.1f MiB), kernels %s / %s (prefill), "
           "loaded in %.2f s", path, in->arch_name, c->n_layers, tq_dtype_name(wt),
           (double)m->weight_bytes / 1048576.0, m->mm.name, m->mm.gemm_name,
           (double)(tq_now_ns() - t0) * 1e-9);
    if (m->native)
        tq_log(TQ_LOG_INFO, "%s: native block weights: %s; %s matrices (if any) as %s", path,
               m->kernels, "float", tq_dtype_name(wt));
    *out = m;
    return TQ_OK;
fail:
    tq_model_free(m);
    tq_weights_free(src);
    return st;
}

void tq_model_free(tq_model *m)
{
    if (!m)
        return;
    if (m->layers) {
        for (int il = 0; il < m->cfg.n_layers; il++) {
            tq_layer_weights *w = &m->layers[il];
            void *ps[] = {w->attn_norm, w->wq, w->wk, w->wv, w->wo, w->bq, w->bk, w->bv,
                          w->q_norm, w->k_norm, w->post_attn_norm, w->ffn_norm,
                          w->post_ffn_norm, w->w_gate, w->w_up, w->w_down};
            for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
                tq_free(ps[i]);
        }
    }
    if (m->lm_head != m->embed)
        tq_free(m->lm_head);
    tq_free(m->embed);
    tq_free(m->final_norm);
    tq_free(m->layers);
    tq_free(m->inv_freq);
    tq_free(m->inv_freq_local);
    tq_free(m->path);
    tq_free(m->tensors);
    pthread_mutex_destroy(&m->wh_lock);
    if (m->own_pool)
        tq_pool_free(m->pool);
    tq_free(m);
}

void tq_model_weights_hash(const tq_model *cm, uint8_t out[16])
{
    tq_model *m = (tq_model *)cm; /* the cache is logically const: the value never changes */
    pthread_mutex_lock(&m->wh_lock);
    if (!m->wh_done) {
        const uint64_t t0 = tq_now_ns();
        XXH3_state_t st;
        XXH3_128bits_reset(&st);
        for (int i = 0; i < m->n_tensors; i++) {
            const tq_qmat *q = m->tensors[i].q;
            if (!q || !q->r16) {
                XXH3_128bits_update(&st, m->tensors[i].data, m->tensors[i].bytes);
                continue;
            }
            /* the r16 layout (cpu/qdot_r16.h) hashed as the file's rows: the same value */
            _Alignas(64) uint8_t rows[16 * TQ_QMM_R16_ROW_MAX];
            for (int64_t r = 0; r < q->rows; r += 16) {
                tq_qmm_file_rows(q, r, r + 16, rows);
                XXH3_128bits_update(&st, rows, 16 * q->row_bytes);
            }
        }
        /* what else changes the numbers for the same shapes: RoPE frequencies, scalars */
        const size_t nf = (size_t)(m->cfg.rope_dim / 2) * sizeof(float);
        XXH3_128bits_update(&st, m->inv_freq, nf);
        XXH3_128bits_update(&st, m->inv_freq_local, nf);
        const float sc[] = {m->attn_scale, m->cfg.rms_eps, m->cfg.embed_scale,
                            m->cfg.final_logit_softcap, (float)m->cfg.norm_plus_one,
                            (float)m->cfg.act_gelu, (float)m->cfg.sliding_window,
                            (float)m->cfg.sliding_window_pattern};
        XXH3_128bits_update(&st, sc, sizeof(sc));
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&st));
        memcpy(m->wh, c.digest, 16);
        m->wh_done = 1;
        tq_log(TQ_LOG_INFO, "%s: weights hash of %d tensors (%.1f MiB) in %.1f ms", m->path,
               m->n_tensors, (double)m->weight_bytes / 1048576.0,
               (double)(tq_now_ns() - t0) * 1e-6);
    }
    memcpy(out, m->wh, 16);
    pthread_mutex_unlock(&m->wh_lock);
}

const char *tq_native_kernel_name(int type, int f32_act, char *buf, size_t cap)
{
    const tq_format *f = tq_cpu_format(type);
    if (type == TQ_GGML_F32 || type == TQ_GGML_F16 || type == TQ_GGML_BF16)
        snprintf(buf, cap, "dense (dequantized to the weight dtype)");
    else if (!f || tq_qmm_path(f, f32_act) == TQ_QPATH_NONE)
        snprintf(buf, cap, "none (not supported)");
    else {
        tq_qmm_kernel_name(f, f32_act, buf, cap);
        const tq_qmat probe = {.f = f, .rows = 16, .cols = 576, .row_bytes = 18 * f->block_bytes};
        const size_t n = strlen(buf);
        if (f->block == 32 && tq_qmm_r16_ok(&probe, f32_act) && n < cap)
            snprintf(buf + n, cap - n, " + r16 decode (16-row repack at load)");
    }
    return buf;
}

tq_status tq_model_get_info(const tq_model *m, tq_model_info *out)
{
    if (!m || !out)
        return TQ_FAIL(TQ_E_ARG, "tq_model_get_info: NULL argument");
    *out = m->info;
    return TQ_OK;
}

/* ---- sessions ------------------------------------------------------------------------------ */

static void free_rs(tq_run_state *r)
{
    void *ps[] = {r->x,  r->xn, r->q,  r->k,       r->v,     r->att,
                  r->h1, r->h2, r->xb, r->cos_sin, r->act_a, r->act_k};
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
        tq_free(ps[i]);
    memset(r, 0, sizeof(*r));
}

static float *alloc_f(int nb, int64_t width)
{
    return tq_aligned_alloc((size_t)nb * (size_t)width * sizeof(float));
}

tq_status tq_session_create(tq_model *m, const tq_session_opts *opts, tq_session **out)
{
    tq_session_opts def;
    tq_status st;
    if (!out)
        return TQ_FAIL(TQ_E_ARG, "tq_session_create: out is NULL");
    *out = NULL;
    if (!m)
        return TQ_FAIL(TQ_E_ARG, "tq_session_create: model is NULL");
    if (!opts) {
        tq_session_opts_default(&def);
        opts = &def;
    }
    if (opts->n_ctx < 0 || opts->n_batch < 0)
        return TQ_FAIL(TQ_E_ARG, "tq_session_create: n_ctx %d and n_batch %d must be >= 0",
                       opts->n_ctx, opts->n_batch);
    const tq_model_config *c = &m->cfg;
    const int64_t n_ctx = opts->n_ctx ? opts->n_ctx : m->info.max_ctx;
    if (n_ctx > m->info.max_ctx)
        tq_log(TQ_LOG_WARN, "n_ctx %lld is beyond the model's trained context %d",
               (long long)n_ctx, m->info.max_ctx);
    int nb = opts->n_batch ? opts->n_batch : 256;
    if (nb > n_ctx)
        nb = (int)n_ctx;
    tq_session *s = tq_calloc(1, sizeof(*s));
    if (!s)
        return TQ_FAIL(TQ_E_NOMEM, "tq_session_create: out of memory");
    s->m = m;
    s->n_ctx = n_ctx;
    if (opts->kv.kind == TQ_KV_TURBO) { /* sliding-window layers stay bf16 unless +sq */
        uint8_t *plain = tq_calloc((size_t)c->n_layers, 1);
        if (!plain) {
            st = TQ_FAIL(TQ_E_NOMEM, "tq_session_create: out of memory");
            goto fail;
        }
        for (int l = 0; l < c->n_layers; l++)
            plain[l] = !(opts->kv.flags & TQ_KV_FLAG_SWAQ) &&
                       tq_model_config_layer_is_sliding(c, l);
        st = tq_kvcache_turbo_create(opts->kv, c->n_layers, c->n_heads, c->n_kv_heads,
                                     c->head_dim, n_ctx, m->attn_scale, tq_pool_size(m->pool),
                                     plain, &s->kv);
        tq_free(plain);
        if (st || (st = tq_kvc_turbo_set_attn(s->kv, opts->turbo_attn)))
            goto fail;
    } else if ((st = tq_kvcache_create(opts->kv, c->n_layers, c->n_heads, c->n_kv_heads,
                                       c->head_dim, n_ctx, m->attn_scale, tq_pool_size(m->pool),
                                       &s->kv)))
        goto fail;
    const int64_t dim = c->hidden, qd = (int64_t)c->n_heads * c->head_dim;
    const int64_t kvd = (int64_t)c->n_kv_heads * c->head_dim, ffn = c->ffn_hidden;
    const int64_t wide = dim > qd ? dim : qd;
    const int64_t widest = wide > ffn ? wide : ffn;
    tq_run_state *r = &s->rs;
    r->nb = nb;
    r->x = alloc_f(nb, dim);
    r->xn = alloc_f(nb, wide);
    r->q = alloc_f(nb, qd);
    r->k = alloc_f(nb, kvd);
    r->v = alloc_f(nb, kvd);
    r->att = alloc_f(nb, qd);
    r->h1 = alloc_f(nb, ffn);
    r->h2 = alloc_f(nb, ffn);
    r->cos_sin = alloc_f(nb, c->rope_dim);
    r->xb = m->mm.needs_xb ? tq_aligned_alloc((size_t)nb * (size_t)widest * 2) : NULL;
    if (m->native) {
        size_t a = 0, kb = 0;
        const int64_t ks[3] = {dim, qd, ffn};
        for (int i = 0; i < 3; i++) {
            size_t ai, ki;
            tq_qmm_act_bytes(ks[i], nb, &ai, &ki);
            a = ai > a ? ai : a;
            kb = ki > kb ? ki : kb;
        }
        r->act_a = tq_aligned_alloc(a ? a : 64);
        r->act_k = tq_aligned_alloc(kb ? kb : 64);
        if (!r->act_a || !r->act_k) {
            st = TQ_FAIL(TQ_E_NOMEM, "tq_session_create: out of memory for q8 activations");
            goto fail;
        }
    }
    if (!r->x || !r->xn || !r->q || !r->k || !r->v || !r->att || !r->h1 || !r->h2 ||
        !r->cos_sin || (m->mm.needs_xb && !r->xb)) {
        st = TQ_FAIL(TQ_E_NOMEM, "tq_session_create: out of memory for run state (%d tokens)",
                     nb);
        goto fail;
    }
    /* sliding-window layers (gemma3, mistral): the cache attends within the window */
    if (c->sliding_window > 0) {
        if (!(s->window = tq_calloc((size_t)c->n_layers, sizeof(int)))) {
            st = TQ_FAIL(TQ_E_NOMEM, "tq_session_create: out of memory");
            goto fail;
        }
        for (int l = 0; l < c->n_layers; l++)
            s->window[l] = tq_model_config_layer_is_sliding(c, l) ? c->sliding_window : 0;
        /* sliding layers keep only their window (a ring) unless swa_full */
        if ((st = tq_kvcache_set_window(s->kv, s->window, nb, opts->swa_full)))
            goto fail;
    }
    m->n_sessions++;
    *out = s;
    return TQ_OK;
fail:
    tq_kvcache_free(s->kv);
    free_rs(&s->rs);
    tq_free(s->window);
    tq_free(s);
    return st;
}

void tq_session_free(tq_session *s)
{
    if (!s)
        return;
    s->m->n_sessions--;
    tq_kvcache_free(s->kv);
    free_rs(&s->rs);
    tq_free(s->window);
    tq_free(s);
}

static tq_status eval(tq_session *s, const int32_t *tokens, int64_t n, float *logits,
                      int64_t logits_count, int all)
{
    if (!s || !tokens || n < 1)
        return TQ_FAIL(TQ_E_ARG, "tq_session_eval: need a session and n >= 1 tokens (n = %lld)",
                       (long long)n);
    const int vocab = s->m->cfg.vocab;
    if (all && logits && (logits_count / vocab < n))
        return TQ_FAIL(TQ_E_ARG, "tq_session_eval_all: logits holds %lld floats, %lld tokens "
                                 "need %lld", (long long)logits_count, (long long)n,
                       (long long)n * vocab);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return TQ_FAIL(TQ_E_ARG, "token %lld has id %d, outside the vocabulary [0, %d)",
                           (long long)i, tokens[i], vocab);
    if (n > s->n_ctx - s->n_past)
        return TQ_FAIL(TQ_E_OVERFLOW, "context overflow: %lld tokens in the cache + %lld new > "
                                      "n_ctx %lld (%lld more fit); trim, reset or use a larger "
                                      "context", (long long)s->n_past, (long long)n,
                       (long long)s->n_ctx, (long long)(s->n_ctx - s->n_past));
    const int64_t start = s->n_past;
    for (int64_t off = 0; off < n; off += s->rs.nb) {
        const int c = (int)(n - off < s->rs.nb ? n - off : s->rs.nb);
        const int last = off + c == n;
        float *lg = NULL;
        if (logits && all)
            lg = logits + off * vocab;
        else if (logits && last)
            lg = logits;
        tq_status st = tq_forward(s, tokens + off, c, lg, all);
        if (st) {
            s->n_past = start;
            return st;
        }
        s->n_past += c;
    }
    return TQ_OK;
}

tq_status tq_session_eval(tq_session *s, const int32_t *tokens, int64_t n, float *logits_last)
{
    return eval(s, tokens, n, logits_last, 0, 0);
}

tq_status tq_session_eval_all(tq_session *s, const int32_t *tokens, int64_t n, float *logits,
                              int64_t logits_count)
{
    if (!logits)
        return TQ_FAIL(TQ_E_ARG, "tq_session_eval_all: logits is NULL");
    return eval(s, tokens, n, logits, logits_count, 1);
}

tq_status tq_batch_eval(tq_session *const *ss, const int32_t *const *tokens, const int64_t *n,
                        int n_seq, float *logits)
{
    tq_fwd_seq seq[TQ_BATCH_MAX];
    int64_t rows = 0;
    if (!ss || !tokens || !n || n_seq < 1 || n_seq > TQ_BATCH_MAX || !ss[0])
        return TQ_FAIL(TQ_E_ARG, "tq_batch_eval: need 1..%d sessions, their tokens and counts "
                                 "(n_seq = %d)", TQ_BATCH_MAX, n_seq);
    const tq_model *m = ss[0]->m;
    const int vocab = m->cfg.vocab;
    for (int i = 0; i < n_seq; i++) {
        if (!ss[i] || ss[i]->m != m || !tokens[i] || n[i] < 1)
            return TQ_FAIL(TQ_E_ARG, "tq_batch_eval: sequence %d: needs a session of the same "
                                     "model as sequence 0 and n >= 1 tokens", i);
        for (int j = 0; j < i; j++)
            if (ss[j] == ss[i])
                return TQ_FAIL(TQ_E_ARG, "tq_batch_eval: sequences %d and %d are the same "
                                         "session", j, i);
        for (int64_t t = 0; t < n[i]; t++)
            if (tokens[i][t] < 0 || tokens[i][t] >= vocab)
                return TQ_FAIL(TQ_E_ARG, "tq_batch_eval: sequence %d, token %lld has id %d, "
                                         "outside the vocabulary [0, %d)", i, (long long)t,
                               tokens[i][t], vocab);
        if (n[i] > ss[i]->n_ctx - ss[i]->n_past)
            return TQ_FAIL(TQ_E_OVERFLOW, "tq_batch_eval: sequence %d: %lld tokens in the cache "
                                          "+ %lld new > n_ctx %lld; nothing was evaluated", i,
                           (long long)ss[i]->n_past, (long long)n[i], (long long)ss[i]->n_ctx);
        rows += n[i];
        seq[i] = (tq_fwd_seq){ss[i], tokens[i], (int)n[i]};
    }
    if (rows > ss[0]->rs.nb)
        return TQ_FAIL(TQ_E_ARG, "tq_batch_eval: %lld tokens in all, more than the first "
                                 "session's n_batch %d", (long long)rows, ss[0]->rs.nb);
    tq_status st = tq_forward_batch(ss[0], seq, n_seq, logits, 0);
    if (st)
        return st;
    for (int i = 0; i < n_seq; i++)
        ss[i]->n_past += n[i];
    return TQ_OK;
}

int64_t tq_session_n_past(const tq_session *s)
{
    return s ? s->n_past : 0;
}

int64_t tq_session_n_ctx(const tq_session *s)
{
    return s ? s->n_ctx : 0;
}

tq_status tq_session_trim(tq_session *s, int64_t n_drop)
{
    if (!s)
        return TQ_FAIL(TQ_E_ARG, "tq_session_trim: session is NULL");
    if (n_drop < 0 || n_drop > s->n_past)
        return TQ_FAIL(TQ_E_ARG, "tq_session_trim: cannot drop %lld of %lld tokens",
                       (long long)n_drop, (long long)s->n_past);
    const tq_status st = tq_kvcache_resume_check(s->kv, s->n_past - n_drop);
    if (st)
        return st;
    s->n_past -= n_drop;
    return TQ_OK;
}

void tq_session_reset(tq_session *s)
{
    if (s)
        s->n_past = 0;
}

tq_status tq_session_kv_bytes(const tq_session *s, tq_kv_usage *out)
{
    if (!s || !out)
        return TQ_FAIL(TQ_E_ARG, "tq_session_kv_bytes: NULL argument");
    out->bytes_per_token = tq_kvcache_token_bytes(s->kv);
    out->bytes_used = tq_kvcache_bytes_at(s->kv, s->n_past);
    out->bytes_capacity = tq_kvcache_capacity_bytes(s->kv);
    return TQ_OK;
}
