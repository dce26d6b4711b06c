/* quantize.c -- the streaming weights pipeline behind `tq quantize` (include/turboquant/
 * quantize.h; byte-level provenance and the fold: docs/FORMAT.md "Rotation fold").
 *
 * Plan first (names -> roles, output types, refusals), then one tensor at a time: read as f32,
 * fold, quantize, write, free. The small RMSNorm gain vectors are read once up front (the gamma
 * fold needs them while writing the linears). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>

#include "common/hadamard.h"
#include "core/half.h"
#include "quant/quant_internal.h"

enum role {
    R_OTHER = 0,
    R_EMBED,
    R_LMHEAD,
    R_Q,
    R_K,
    R_V,
    R_O,
    R_QB,
    R_KB,
    R_VB,
    R_GATE,
    R_UP,
    R_DOWN,
    R_ATTN_NORM, /* feeds q/k/v                                     */
    R_FFN_NORM,  /* feeds gate/up (llama post_attention_layernorm,   */
                 /* gemma3 pre_feedforward_layernorm)               */
    R_OUT_NORM,  /* feeds lm_head                                   */
    R_POST_ATTN, /* gemma3 sandwich norms on the residual writers   */
    R_POST_FFN,
    R_QK_NORM,
    R_ROPE_FREQS,
};

typedef struct qt {
    char name[160];  /* output name */
    char src[160];   /* source name read for it (the embedding for an untied lm_head) */
    int role;
    int layer;
    int n_dims;
    int64_t ne[4];   /* ggml order (ne[0] contiguous) */
    int64_t rows, cols;
    int64_t n;
    int64_t src_idx; /* index in the source file's tensor table */
    int src_type;    /* ggml type (GGUF) or tq_st_dtype (safetensors) */
    const char *src_type_name;
    size_t src_nbytes;
    int out_type;    /* ggml type (both formats: F32/F16/BF16 map to safetensors dtypes) */
    int affine;      /* MLX: written as uint32 codes + bf16 scales/biases */
    int fallback;
} qt;

typedef struct ctx {
    const tq_quantize_opts *o;
    int fd; /* GGUF source, read with pread (never through a mapping) */
    tq_weights *w;
    const tq_gguf *g;
    const tq_st *st;
    int hf; /* GGUF source, safetensors/MLX output: tensors through tq_weights (HF names, q/k
             * rows un-permuted), config.json written from the GGUF's config */
    const tq_model_config *cfg;
    qt *t;
    int64_t nt;
    unsigned fold;
    int untie;
    float *g_attn, *g_ffn, *g_out; /* effective gains (layers x hidden), hidden */
    int8_t *s1, *s2;               /* R1 signs (hidden), R2 signs (layers x head_dim) */
    char transform[512];
    char deviations[512];
} ctx;

/* ---- names -> roles ------------------------------------------------------------------------- */
static const struct {
    const char *gguf, *hf;
    int role;
} layer_names[] = {
    {"attn_norm.weight", "input_layernorm.weight", R_ATTN_NORM},
    {"attn_q.weight", "self_attn.q_proj.weight", R_Q},
    {"attn_k.weight", "self_attn.k_proj.weight", R_K},
    {"attn_v.weight", "self_attn.v_proj.weight", R_V},
    {"attn_output.weight", "self_attn.o_proj.weight", R_O},
    {"attn_q.bias", "self_attn.q_proj.bias", R_QB},
    {"attn_k.bias", "self_attn.k_proj.bias", R_KB},
    {"attn_v.bias", "self_attn.v_proj.bias", R_VB},
    {"attn_q_norm.weight", "self_attn.q_norm.weight", R_QK_NORM},
    {"attn_k_norm.weight", "self_attn.k_norm.weight", R_QK_NORM},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight", R_FFN_NORM},
    {"ffn_gate.weight", "mlp.gate_proj.weight", R_GATE},
    {"ffn_up.weight", "mlp.up_proj.weight", R_UP},
    {"ffn_down.weight", "mlp.down_proj.weight", R_DOWN},
    {"post_attention_norm.weight", "post_attention_layernorm.weight", R_POST_ATTN},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight", R_POST_FFN},
};

static int classify(const char *name, int gguf, tq_arch arch, int *layer)
{
    *layer = -1;
    if (gguf) {
        if (!strcmp(name, "token_embd.weight"))
            return R_EMBED;
        if (!strcmp(name, "output.weight"))
            return R_LMHEAD;
        if (!strcmp(name, "output_norm.weight"))
            return R_OUT_NORM;
        if (!strcmp(name, "rope_freqs.weight"))
            return R_ROPE_FREQS;
    } else {
        if (!strcmp(name, "model.embed_tokens.weight"))
            return R_EMBED;
        if (!strcmp(name, "lm_head.weight"))
            return R_LMHEAD;
        if (!strcmp(name, "model.norm.weight"))
            return R_OUT_NORM;
    }
    int l, off = 0;
    if (sscanf(name, gguf ? "blk.%d.%n" : "model.layers.%d.%n", &l, &off) != 1 || off == 0 ||
        l < 0)
        return R_OTHER;
    *layer = l;
    const char *rest = name + off;
    /* llama/qwen: post_attention_layernorm feeds the MLP; gemma3: it is the sandwich norm */
    if (!gguf && !strcmp(rest, "post_attention_layernorm.weight"))
        return arch == TQ_ARCH_GEMMA3 ? R_POST_ATTN : R_FFN_NORM;
    for (size_t i = 0; i < sizeof(layer_names) / sizeof(layer_names[0]); i++)
        if (!strcmp(rest, gguf ? layer_names[i].gguf : layer_names[i].hf))
            return layer_names[i].role;
    return R_OTHER;
}

/* ---- reading one source tensor as f32 -------------------------------------------------------- */
static char *path_join(const char *dir, const char *name)
{
    const size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* bytes [off, off + n) of GGUF tensor t, with pread (a file truncated meanwhile gives TQ_E_IO) */
static tq_status read_raw_at(const ctx *c, const qt *t, size_t at, void *dst, size_t n)
{
    tq_gguf_tensor_info gi;
    tq_status st = tq_gguf_tensor(c->g, t->src_idx, &gi);
    if (st)
        return st;
    uint8_t *b = dst;
    off_t off = (off_t)(tq_gguf_data_offset(c->g) + gi.offset + at);
    while (n > 0) {
        const ssize_t r = pread(c->fd, b, n, off);
        if (r <= 0)
            return TQ_FAIL(TQ_E_IO, "%s: reading tensor '%s' failed: %s", c->o->src, t->src,
                           r < 0 ? strerror(errno) : "the file is shorter than its header says");
        b += r;
        n -= (size_t)r;
        off += r;
    }
    return TQ_OK;
}

static tq_status read_raw(const ctx *c, const qt *t, void *dst, size_t n)
{
    return read_raw_at(c, t, 0, dst, n);
}

static tq_status read_f32(const ctx *c, const qt *t, float *dst)
{
    if (c->g && !c->hf) {
        void *raw = tq_malloc(t->src_nbytes ? t->src_nbytes : 1);
        if (!raw)
            return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory reading '%s' (%zu bytes)", c->o->src,
                           t->src, t->src_nbytes);
        tq_status st = read_raw(c, t, raw, t->src_nbytes);
        if (!st)
            st = tq_ggml_dequant(t->src_type, raw, t->src_nbytes, dst, t->n);
        tq_free(raw);
        return st;
    }
    return tq_weights_read(c->w, t->src, TQ_DTYPE_F32, dst, (size_t)t->n * sizeof(float));
}

/* rows [r0, r0 + nr) of a GGUF tensor as f32 (rows are whole blocks: ne[0] % block == 0) */
static tq_status read_rows_f32(const ctx *c, const qt *t, int64_t r0, int64_t nr, float *dst)
{
    const size_t rb = t->src_nbytes / (size_t)t->rows;
    void *raw = tq_malloc(rb * (size_t)nr);
    if (!raw)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory reading '%s'", t->src);
    tq_status st = read_raw_at(c, t, rb * (size_t)r0, raw, rb * (size_t)nr);
    if (!st)
        st = tq_ggml_dequant(t->src_type, raw, rb * (size_t)nr, dst, nr * t->cols);
    tq_free(raw);
    return st;
}

static int below_8_bits(const ctx *c, int type)
{
    if (!c->g)
        return 0; /* safetensors: f32/f16/bf16 (others refused by the reader) */
    return !(type == TQ_GGML_F32 || type == TQ_GGML_F16 || type == TQ_GGML_BF16 ||
             type == TQ_GGML_Q8_0);
}

/* ---- planning ------------------------------------------------------------------------------- */
static int fallback_type(int type, int64_t row)
{
    if (tq_ggml_block_size(type) > 0 && row % tq_ggml_block_size(type) == 0)
        return type;
    int fb = TQ_GGML_F16;
    if (type == TQ_GGML_Q4_K)
        fb = TQ_GGML_Q5_0; /* llama.cpp's own choice for K types on rows of 32 * odd */
    else if (type == TQ_GGML_Q5_K)
        fb = TQ_GGML_Q5_1;
    else if (type == TQ_GGML_Q6_K)
        fb = TQ_GGML_Q8_0;
    return row % tq_ggml_block_size(fb) == 0 ? fb : TQ_GGML_F16;
}

static tq_status add_tensor(ctx *c, const qt *t)
{
    qt *nt = tq_realloc(c->t, (size_t)(c->nt + 1) * sizeof(*nt));
    if (!nt)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    c->t = nt;
    c->t[c->nt++] = *t;
    return TQ_OK;
}

static int is_norm(int role)
{
    return role == R_ATTN_NORM || role == R_FFN_NORM || role == R_OUT_NORM ||
           role == R_POST_ATTN || role == R_POST_FFN || role == R_QK_NORM;
}

static int is_matrix(int role)
{
    return role == R_EMBED || role == R_LMHEAD || (role >= R_Q && role <= R_O) ||
           (role >= R_GATE && role <= R_DOWN) || role == R_OTHER;
}

/* llama-quantize's rule for layer i of n: the first and last eighth, every third between */
static int more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* the type of a matrix under o->mix before the fallback (llama.cpp's llama_tensor_get_type for
 * the file types we write, no imatrix, no experts); as_output: the lm_head, or the embedding
 * of a tied model (llama.cpp quantizes that one as the output) */
static int mix_type(const ctx *c, const qt *t, int as_output)
{
    const tq_quantize_opts *o = c->o;
    const int T = o->type, n = c->cfg->n_layers;
    if (o->mix == TQ_QMIX_PURE || tq_ggml_block_size(T) <= 1)
        return T;
    if (as_output) {
        if (T == TQ_GGML_Q8_0)
            return T;
        return t->ne[0] % tq_ggml_block_size(T) != 0 ? TQ_GGML_Q8_0 : TQ_GGML_Q6_K;
    }
    const int kq = T == TQ_GGML_Q4_K || T == TQ_GGML_Q5_K, l = t->layer;
    if (T == TQ_GGML_IQ4_NL && l >= 0) { /* llama-quantize IQ4_NL (one file type, no _S/_M) */
        const int gqa = c->cfg->n_kv_heads > 0 ? c->cfg->n_heads / c->cfg->n_kv_heads : 1;
        if ((t->role == R_V && gqa >= 4) || (t->role == R_DOWN && l < n / 8))
            return TQ_GGML_Q5_K;
        return T;
    }
    if (!kq || l < 0)
        return T;
    if (o->mix == TQ_QMIX_LLAMA) { /* Q4_K_M, Q5_K_M */
        if ((t->role == R_V || t->role == R_DOWN) && more_bits(l, n))
            return TQ_GGML_Q6_K;
        return T;
    }
    if (T == TQ_GGML_Q4_K && ((t->role == R_V && l < 4) || (t->role == R_DOWN && l < n / 8)))
        return TQ_GGML_Q5_K; /* Q4_K_S */
    return T;
}

static void choose_type(const ctx *c, qt *t, int as_output)
{
    const tq_quantize_opts *o = c->o;
    if (o->format == TQ_QFORMAT_MLX) {
        t->out_type = TQ_GGML_BF16;
        t->affine = 0;
        if (t->n_dims == 2 && is_matrix(t->role) && t->role != R_OTHER &&
            !(o->keep_embed && (t->role == R_EMBED || t->role == R_LMHEAD))) {
            t->affine = t->cols % o->group == 0;
            t->fallback = !t->affine;
        }
        return;
    }
    if (t->n_dims < 2 || !is_matrix(t->role)) {
        t->out_type = o->format == TQ_QFORMAT_GGUF ? TQ_GGML_F32 : o->type;
        return;
    }
    int type = mix_type(c, t, as_output || t->role == R_LMHEAD);
    if (o->keep_embed && (t->role == R_EMBED || t->role == R_LMHEAD))
        type = TQ_GGML_F16;
    t->out_type = fallback_type(type, t->ne[0]);
    t->fallback = t->out_type != type;
}

static tq_status plan(ctx *c)
{
    const tq_quantize_opts *o = c->o;
    const int gguf = c->g != NULL && !c->hf;
    const int64_t nsrc = gguf    ? tq_gguf_n_tensors(c->g)
                         : c->hf ? tq_weights_count(c->w)
                                 : tq_st_n_tensors(c->st);
    int have_lm = 0;
    int64_t embed_at = -1;
    for (int64_t i = 0; i < nsrc; i++) {
        qt t;
        memset(&t, 0, sizeof(t));
        const char *name;
        if (gguf) {
            tq_gguf_tensor_info gi;
            tq_status st = tq_gguf_tensor(c->g, i, &gi);
            if (st)
                return st;
            name = gi.name;
            t.n_dims = gi.n_dims;
            for (int d = 0; d < 4; d++)
                t.ne[d] = gi.ne[d];
            t.src_type = gi.type;
            t.src_type_name = tq_ggml_type_name(gi.type);
            t.src_nbytes = gi.nbytes;
            t.n = gi.n_elem;
            if (!tq_ggml_can_dequant(gi.type))
                return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: tensor '%s' has type %s, which this "
                               "library cannot decode", o->src, name, t.src_type_name);
        } else if (c->hf) { /* GGUF read as Hugging Face tensors (weights.c) */
            tq_weights_tensor wi;
            tq_status st = tq_weights_tensor_at(c->w, i, &wi);
            if (st)
                return st;
            name = wi.name;
            if (!strcmp(name, "rope_freqs.weight"))
                return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: GGUF -> safetensors: the Llama 3 RoPE "
                               "scaling tensor rope_freqs.weight has no Hugging Face tensor "
                               "(write GGUF, or start from the Hugging Face directory)", o->src);
            if (wi.n_dims < 1 || wi.n_dims > 4 || !tq_ggml_can_dequant(wi.ggml_type))
                return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: tensor '%s' has type %s, which this "
                               "library cannot decode", o->src, wi.src_name, wi.src_type);
            t.n_dims = wi.n_dims;
            for (int d = 0; d < 4; d++)
                t.ne[d] = d < wi.n_dims ? wi.shape[wi.n_dims - 1 - d] : 1;
            t.src_type = wi.ggml_type;
            t.src_type_name = wi.src_type;
            t.src_nbytes = wi.src_nbytes;
            t.n = wi.n_elem;
        } else {
            tq_st_tensor_info si;
            tq_status st = tq_st_tensor(c->st, i, &si);
            if (st)
                return st;
            name = si.name;
            if (si.n_dims < 1 || si.n_dims > 4)
                return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: tensor '%s' has %d dimensions (1..4)",
                               o->src, name, si.n_dims);
            if (si.dtype != TQ_ST_F32 && si.dtype != TQ_ST_F16 && si.dtype != TQ_ST_BF16)
                return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: tensor '%s' has dtype %s (F32/F16/BF16 "
                               "sources only)", o->src, name, tq_st_dtype_name(si.dtype));
            t.n_dims = si.n_dims;
            for (int d = 0; d < 4; d++)
                t.ne[d] = d < si.n_dims ? si.shape[si.n_dims - 1 - d] : 1;
            t.src_type = si.dtype;
            t.src_type_name = tq_st_dtype_name(si.dtype);
            t.src_nbytes = si.nbytes;
            t.n = si.n_elem;
        }
        if (strlen(name) >= sizeof(t.name))
            return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: tensor name too long: '%s'", o->src, name);
        snprintf(t.name, sizeof(t.name), "%s", name);
        snprintf(t.src, sizeof(t.src), "%s", name);
        t.src_idx = i;
        t.cols = t.ne[0];
        t.rows = t.n / (t.cols ? t.cols : 1);
        t.role = classify(name, gguf, c->cfg->arch, &t.layer);
        if (t.layer >= c->cfg->n_layers)
            return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s' names layer %d of %d", o->src, name,
                           t.layer, c->cfg->n_layers);
        if (o->rotate) {
            if (t.role == R_OTHER)
                return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: --rotate: tensor '%s' has no known place "
                               "in the %s fold (unknown tensor; not rotated models only)", o->src,
                               name, tq_arch_name(c->cfg->arch));
            if (below_8_bits(c, t.src_type) && !o->dequantize_source)
                return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: rotation needs full-precision source "
                               "weights: tensor '%s' is %s; pass --dequantize-source to fold the "
                               "dequantized values (the teacher is then the dequantized source)",
                               o->src, name, t.src_type_name);
        }
        if (t.role == R_LMHEAD)
            have_lm = 1;
        choose_type(c, &t, 0);
        tq_status st = add_tensor(c, &t);
        if (st)
            return st;
        if (t.role == R_EMBED)
            embed_at = c->nt - 1;
    }
    if (c->untie && !have_lm) {
        if (embed_at < 0)
            return TQ_FAIL(TQ_E_FORMAT, "%s: tied embeddings but no embedding tensor", o->src);
        qt t = c->t[embed_at];
        snprintf(t.name, sizeof(t.name), "%s", gguf ? "output.weight" : "lm_head.weight");
        t.role = R_LMHEAD;
        t.fallback = 0;
        choose_type(c, &t, 1);
        tq_status st = add_tensor(c, &t);
        if (st)
            return st;
    } else {
        c->untie = 0;
        if (!have_lm && embed_at >= 0) { /* tied: the embedding is the output too */
            c->t[embed_at].fallback = 0;
            choose_type(c, &c->t[embed_at], 1);
        }
    }
    return TQ_OK;
}

/* ---- the fold ------------------------------------------------------------------------------- */
static float eff_gain(const ctx *c, float stored)
{
    return c->cfg->norm_plus_one ? 1.0f + stored : stored;
}

static tq_status load_gains(ctx *c)
{
    const int H = c->cfg->hidden, L = c->cfg->n_layers;
    c->g_attn = tq_malloc((size_t)L * H * sizeof(float));
    c->g_ffn = tq_malloc((size_t)L * H * sizeof(float));
    c->g_out = tq_malloc((size_t)H * sizeof(float));
    if (!c->g_attn || !c->g_ffn || !c->g_out)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    int found_out = 0;
    int *found = tq_calloc((size_t)L * 2, sizeof(int));
    if (!found)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    for (int64_t i = 0; i < c->nt && !st; i++) {
        const qt *t = &c->t[i];
        float *dst = NULL;
        if (t->role == R_ATTN_NORM)
            dst = c->g_attn + (size_t)t->layer * H, found[2 * t->layer] = 1;
        else if (t->role == R_FFN_NORM)
            dst = c->g_ffn + (size_t)t->layer * H, found[2 * t->layer + 1] = 1;
        else if (t->role == R_OUT_NORM)
            dst = c->g_out, found_out = 1;
        if (!dst)
            continue;
        if (t->n != H) {
            st = TQ_FAIL(TQ_E_FORMAT, "%s: norm '%s' has %lld elements, hidden is %d",
                         c->o->src, t->name, (long long)t->n, H);
            break;
        }
        if ((st = read_f32(c, t, dst)))
            break;
        for (int j = 0; j < H; j++)
            dst[j] = eff_gain(c, dst[j]);
    }
    for (int l = 0; l < L && !st; l++)
        if (!found[2 * l] || !found[2 * l + 1])
            st = TQ_FAIL(TQ_E_FORMAT, "%s: layer %d lacks its %s norm (gamma fold)", c->o->src,
                         l, found[2 * l] ? "MLP input" : "attention input");
    if (!st && !found_out)
        st = TQ_FAIL(TQ_E_FORMAT, "%s: no final norm (gamma fold)", c->o->src);
    tq_free(found);
    return st;
}

/* Apply every fold that touches tensor t (data: rows x cols f32). Returns 1 in *changed if
 * anything did. */
static tq_status fold_tensor(const ctx *c, const qt *t, float *x, int *changed)
{
    const unsigned f = c->fold;
    const int H = c->cfg->hidden, hd = c->cfg->head_dim;
    const int l = t->layer;
    const int8_t *s1 = (f & TQ_FOLD_R1) ? c->s1 : NULL;
    const int8_t *s2 = (f & TQ_FOLD_R2) && l >= 0 ? c->s2 + (size_t)l * hd : NULL;
    const int gam = (f & TQ_FOLD_GAMMA) != 0;
    tq_status st = TQ_OK;
    *changed = 0;
    if (!c->o->rotate)
        return TQ_OK;
    if ((t->role >= R_Q && t->role <= R_O) || (t->role >= R_GATE && t->role <= R_DOWN) ||
        t->role == R_EMBED || t->role == R_LMHEAD) {
        const int64_t in = t->cols, out = t->rows;
        const int reader = t->role != R_O && t->role != R_DOWN && t->role != R_EMBED;
        if ((reader || t->role == R_EMBED) ? in != H : out != H)
            return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s' (%lld, %lld) does not have the hidden "
                           "size %d where the fold needs it", c->o->src, t->name, (long long)out,
                           (long long)in, H);
    }
    switch (t->role) {
    case R_EMBED:
        if (s1)
            st = tq_fold_rows(x, t->rows, t->cols, NULL, s1), *changed = 1;
        break;
    case R_LMHEAD:
        if (s1 || gam)
            st = tq_fold_rows(x, t->rows, t->cols, gam ? c->g_out : NULL, s1), *changed = 1;
        break;
    case R_Q:
    case R_K:
    case R_V:
        if (s1 || gam)
            st = tq_fold_rows(x, t->rows, t->cols, gam ? c->g_attn + (size_t)l * H : NULL, s1),
            *changed = 1;
        if (!st && t->role == R_V && s2)
            st = tq_fold_head_rows(x, t->rows, t->cols, hd, s2), *changed = 1;
        break;
    case R_VB:
        if (s2)
            st = tq_fold_head_rows(x, t->n, 1, hd, s2), *changed = 1;
        break;
    case R_O:
        if (s2)
            st = tq_fold_head_cols(x, t->rows, t->cols, hd, s2), *changed = 1;
        if (!st && s1)
            st = tq_fold_cols(x, t->rows, t->cols, s1), *changed = 1;
        break;
    case R_GATE:
    case R_UP:
        if (s1 || gam)
            st = tq_fold_rows(x, t->rows, t->cols, gam ? c->g_ffn + (size_t)l * H : NULL, s1),
            *changed = 1;
        break;
    case R_DOWN:
        if (s1)
            st = tq_fold_cols(x, t->rows, t->cols, s1), *changed = 1;
        break;
    case R_ATTN_NORM:
    case R_FFN_NORM:
    case R_OUT_NORM:
        if (gam) {
            /* effective gain 1: stored 0 under the (1 + w) convention, else 1 */
            const float one = c->cfg->norm_plus_one ? 0.0f : 1.0f;
            for (int64_t i = 0; i < t->n; i++)
                x[i] = one;
            *changed = 1;
        }
        break;
    default:
        break;
    }
    return st;
}

/* ---- statistics ----------------------------------------------------------------------------- */
typedef struct mom {
    double n, s1, s2, s3, s4, mx;
} mom;

static void mom_add(mom *m, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const double v = x[i], v2 = v * v;
        m->s1 += v;
        m->s2 += v2;
        m->s3 += v2 * v;
        m->s4 += v2 * v2;
        m->mx = fabs(v) > m->mx ? fabs(v) : m->mx;
    }
    m->n += (double)n;
}

/* max |x| and excess kurtosis from raw power sums (central moments expanded) */
static void mom_get(const mom *m, double *maxabs, double *kurt)
{
    *maxabs = m->mx;
    *kurt = 0;
    if (m->n <= 0)
        return;
    const double mu = m->s1 / m->n, e2 = m->s2 / m->n, e3 = m->s3 / m->n, e4 = m->s4 / m->n;
    const double var = e2 - mu * mu;
    const double c4 = e4 - 4 * mu * e3 + 6 * mu * mu * e2 - 3 * mu * mu * mu * mu;
    *kurt = var > 0 ? c4 / (var * var) - 3.0 : 0;
}


/* ---- provenance ----------------------------------------------------------------------------- */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* FNV-1a 64 over every source tensor's "name type dims nbytes" line and its first (up to) 4096
 * data bytes, in file order (docs/FORMAT.md "Provenance"). */
static tq_status fingerprint(const ctx *c, char out[17])
{
    uint64_t h = 0xcbf29ce484222325ull;
    uint8_t buf[4096];
    for (int64_t i = 0; i < c->nt; i++) {
        const qt *t = &c->t[i];
        if (strcmp(t->name, t->src) != 0)
            continue; /* synthesized (untied lm_head) */
        char line[256];
        const int n = snprintf(line, sizeof(line), "%s %s %lld %lld %lld %lld %zu\n", t->src,
                               t->src_type_name, (long long)t->ne[0], (long long)t->ne[1],
                               (long long)t->ne[2], (long long)t->ne[3], t->src_nbytes);
        h = fnv(h, line, (size_t)n);
        size_t k = t->src_nbytes < sizeof(buf) ? t->src_nbytes : sizeof(buf);
        tq_status st;
        if (c->g && !c->hf) {
            st = read_raw(c, t, buf, k);
        } else { /* the first row as f32 (exact for f16/bf16/f32) */
            k = (size_t)t->cols * sizeof(float);
            k = k < sizeof(buf) ? k : sizeof(buf);
            float row[1024];
            st = t->cols <= 1024 ? tq_weights_read_rows(c->w, t->src, 0, 1, TQ_DTYPE_F32, row,
                                                        sizeof(row))
                                 : TQ_OK;
            if (t->cols > 1024)
                k = 0;
            else
                memcpy(buf, row, k);
        }
        if (st)
            return st;
        h = fnv(h, buf, k);
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return TQ_OK;
}

/* ---- output helpers ------------------------------------------------------------------------- */
static int path_exists(const char *p)
{
    struct stat sb;
    return lstat(p, &sb) == 0;
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        unlink(dir);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *p = path_join(dir, e->d_name);
        if (p) {
            struct stat sb;
            if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
                remove_tree(p);
            else
                unlink(p);
            free(p);
        }
    }
    closedir(d);
    rmdir(dir);
}

static tq_status copy_file(const char *from, const char *to, int untie, const char *insert)
{
    FILE *f = fopen(from, "rb");
    if (!f)
        return TQ_FAIL(TQ_E_IO, "%s: cannot read: %s", from, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
            } else {
                b = nb;
            }
        }
    }
    fclose(f);
    if (b) { /* NUL-terminated for strstr */
        char *nb = realloc(b, n + 1);
        if (!nb)
            free(b);
        b = nb;
    }
    if (!b)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory copying %s", from);
    b[n] = 0;
    tq_atomic_file *af;
    tq_status st = tq_atomic_file_open(to, &af);
    if (st) {
        free(b);
        return st;
    }
    FILE *o = tq_atomic_file_stream(af);
    int ok = o != NULL;
    /* config.json: `insert` goes right after the opening brace; an untied copy says so
     * ("tie_word_embeddings": false, replacing true or added when the key is absent: the
     * family default may be tied) */
    const char *key = "\"tie_word_embeddings\"";
    char *brace = (insert || untie) ? memchr(b, '{', n) : NULL;
    size_t done = 0;
    if (ok && brace) {
        done = (size_t)(brace - b) + 1;
        ok = fwrite(b, 1, done, o) == done && (!insert || fputs(insert, o) >= 0);
    }
    char *p = untie ? strstr(b, key) : NULL;
    if (ok && untie && !p && brace)
        ok = fputs("\n  \"tie_word_embeddings\": false,", o) >= 0;
    if (ok && p && (size_t)(p - b) >= done) {
        char *v = p + strlen(key);
        while (v < b + n && (*v == ' ' || *v == ':' || *v == '\t'))
            v++;
        if (!strncmp(v, "true", 4)) {
            ok = fwrite(b + done, 1, (size_t)(v - b) - done, o) == (size_t)(v - b) - done &&
                 fputs("false", o) >= 0;
            done = (size_t)(v - b) + 4;
        }
    }
    ok = ok && fwrite(b + done, 1, n - done, o) == n - done;
    free(b);
    if (!ok) {
        tq_atomic_file_abort(af);
        return TQ_FAIL(TQ_E_IO, "%s: write failed", to);
    }
    return tq_atomic_file_commit(af);
}

static int ggml_to_st(int type)
{
    return type == TQ_GGML_F32 ? TQ_ST_F32 : type == TQ_GGML_F16 ? TQ_ST_F16 : TQ_ST_BF16;
}

/* llama.cpp's llama_ftype for general.file_type (informational) */
static uint32_t file_type_of(int type, int mix)
{
    if (mix == TQ_QMIX_LLAMA_S && (type == TQ_GGML_Q4_K || type == TQ_GGML_Q5_K))
        return type == TQ_GGML_Q4_K ? 14 : 16;
    switch (type) {
    case TQ_GGML_F32: return 0;
    case TQ_GGML_F16: return 1;
    case TQ_GGML_Q4_0: return 2;
    case TQ_GGML_Q4_1: return 3;
    case TQ_GGML_Q8_0: return 7;
    case TQ_GGML_Q5_0: return 8;
    case TQ_GGML_Q5_1: return 9;
    case TQ_GGML_Q4_K: return 15; /* Q4_K_M */
    case TQ_GGML_Q5_K: return 17; /* Q5_K_M */
    case TQ_GGML_Q6_K: return 18;
    case TQ_GGML_IQ4_NL: return 25;
    case TQ_GGML_BF16: return 32;
    default: return 0;
    }
}

void tq_quantize_opts_default(tq_quantize_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->format = TQ_QFORMAT_GGUF;
    o->type = TQ_GGML_Q8_0;
    o->seed = 42;
    o->bits = 4;
    o->group = 64;
}

/* ---- setup of the fold ---------------------------------------------------------------------- */
static tq_status setup_fold(ctx *c)
{
    const tq_quantize_opts *o = c->o;
    const tq_model_config *cfg = c->cfg;
    c->fold = o->fold ? o->fold : (TQ_FOLD_GAMMA | TQ_FOLD_R1 | TQ_FOLD_R2);
    if (c->fold & TQ_FOLD_R1)
        c->fold |= TQ_FOLD_GAMMA; /* R1 commutes only with gain-free RMSNorms */
    snprintf(c->deviations, sizeof(c->deviations),
             "no embedding mean-centering; no R4 half-fold on down_proj; no R3; RMSNorm gains "
             "kept as ones (eps kept); R2 = SpinQuant's per-head v/o; fold in f64, rounded once "
             "to f32; H_K from our table (hadamard.h), not QuaRot's");
    if (!o->rotate) {
        snprintf(c->transform, sizeof(c->transform), "none");
        return TQ_OK;
    }
    if (cfg->arch == TQ_ARCH_GEMMA3 && (c->fold & TQ_FOLD_R1)) {
        if (o->fold & TQ_FOLD_R1)
            return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: gemma3: R1 (residual rotation) is not exact: "
                           "the post_attention/post_feedforward norms scale the residual "
                           "writers' output element-wise after normalizing it, which does not "
                           "commute with a rotation (docs/FORMAT.md)", o->src);
        c->fold &= ~TQ_FOLD_R1;
        /* without R1 the gamma fold only moves Gemma's large norm gains into the weights
         * (max|w| 20-50x larger on Gemma 3 270M, docs/results.md): exact but harmful to
         * quantization, so only on request (fold = TQ_FOLD_GAMMA) */
        if (!(o->fold & TQ_FOLD_GAMMA))
            c->fold &= ~TQ_FOLD_GAMMA;
        snprintf(c->deviations + strlen(c->deviations),
                 sizeof(c->deviations) - strlen(c->deviations),
                 "; gemma3: R1 refused (post-norms scale element-wise after normalizing the "
                 "residual writers' output: not rotation-invariant); %s",
                 (c->fold & TQ_FOLD_GAMMA) ? "gamma fold and R2 applied"
                                           : "R2 only (gamma fold without R1 raises max|w|)");
    }
    if ((c->fold & TQ_FOLD_R1) && !tq_hadamard_supported(cfg->hidden))
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: --rotate: hidden size n = %d has no Hadamard "
                       "construction (supported: n = K * 2^m, K in 1 12 20 28 36 40 44 52 60 68 "
                       "76 84 100 108 124 132 140 148 164)", o->src, cfg->hidden);
    if ((c->fold & TQ_FOLD_R2) && !tq_hadamard_supported(cfg->head_dim))
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: --rotate: head_dim n = %d has no Hadamard "
                       "construction (supported: n = K * 2^m, K in 1 12 20 28 36 40 44 52 60 68 "
                       "76 84 100 108 124 132 140 148 164)", o->src, cfg->head_dim);
    c->untie = cfg->tied_embeddings && (c->fold & (TQ_FOLD_GAMMA | TQ_FOLD_R1));
    c->s1 = tq_malloc((size_t)cfg->hidden);
    c->s2 = tq_malloc((size_t)cfg->n_layers * (size_t)cfg->head_dim);
    if (!c->s1 || !c->s2)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    tq_rotation_signs(o->seed, 0, cfg->hidden, c->s1);
    for (int l = 0; l < cfg->n_layers; l++)
        tq_rotation_signs(o->seed, 1 + (uint64_t)l, cfg->head_dim,
                          c->s2 + (size_t)l * cfg->head_dim);
    const tq_hadamard_base *b1 = tq_hadamard_base_of(cfg->hidden);
    const tq_hadamard_base *b2 = tq_hadamard_base_of(cfg->head_dim);
    snprintf(c->transform, sizeof(c->transform),
             "rotation.hadamard.v1: %s%s%s%s; R = diag(s) H^T/sqrt(n), H = H_K (x) H_2^m; "
             "R1 n=%d K=%d (%s); R2 n=%d K=%d (%s); signs splitmix64 seed %llu",
             c->untie ? "untie, " : "", (c->fold & TQ_FOLD_GAMMA) ? "gamma" : "",
             (c->fold & TQ_FOLD_R1) ? ", R1" : "", (c->fold & TQ_FOLD_R2) ? ", R2" : "",
             cfg->hidden, b1 ? b1->k : 0, b1 ? b1->name : "-", cfg->head_dim, b2 ? b2->k : 0,
             b2 ? b2->name : "-", (unsigned long long)o->seed);
    return TQ_OK;
}

/* ---- the run -------------------------------------------------------------------------------- */
static void ctx_free(ctx *c)
{
    tq_free(c->t);
    tq_free(c->g_attn);
    tq_free(c->g_ffn);
    tq_free(c->g_out);
    tq_free(c->s1);
    tq_free(c->s2);
    tq_weights_free(c->w);
    if (c->fd >= 0)
        close(c->fd);
}

static tq_status meta_gguf(ctx *c, tq_gguf_writer *gw, const char *fp)
{
    tq_status st = tq_gguf_writer_set_alignment(gw, tq_gguf_alignment(c->g));
    for (int64_t i = 0; !st && i < tq_gguf_n_kv(c->g); i++) {
        const char *k = tq_gguf_kv_key(c->g, i);
        if (!strncmp(k, "turboquant.", 11))
            continue;
        st = tq_gguf_writer_copy_kv(gw, c->g, i);
    }
    if (!st)
        st = tq_gguf_writer_set_u32(gw, "general.file_type", file_type_of(c->o->type, c->o->mix));
    if (!st)
        st = tq_gguf_writer_set_u32(gw, "general.quantization_version", 2);
    char seed[32];
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)c->o->seed);
    const char *kv[][2] = {
        {"turboquant.version", tq_version_string()},
        {"turboquant.command", c->o->command_line ? c->o->command_line : ""},
        {"turboquant.source_fingerprint", fp},
        {"turboquant.transform", c->transform},
        {"turboquant.seed", c->o->rotate ? seed : ""},
        {"turboquant.deviations", c->o->rotate ? c->deviations : ""},
    };
    for (size_t i = 0; !st && i < sizeof(kv) / sizeof(kv[0]); i++)
        st = tq_gguf_writer_set_str(gw, kv[i][0], kv[i][1]);
    return st;
}

static tq_status meta_st(ctx *c, tq_st_writer *sw, const char *fp)
{
    char seed[32];
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)c->o->seed);
    const char *kv[][2] = {
        {"format", "pt"},
        {"turboquant.version", tq_version_string()},
        {"turboquant.command", c->o->command_line ? c->o->command_line : ""},
        {"turboquant.source_fingerprint", fp},
        {"turboquant.transform", c->transform},
        {"turboquant.seed", c->o->rotate ? seed : ""},
        {"turboquant.deviations", c->o->rotate ? c->deviations : ""},
    };
    tq_status st = TQ_OK;
    for (size_t i = 0; !st && i < sizeof(kv) / sizeof(kv[0]); i++)
        st = tq_st_writer_set_metadata(sw, kv[i][0], kv[i][1]);
    return st;
}

static tq_status check_finite(const ctx *c, const qt *t, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s' holds a non-finite value at element "
                           "%lld", c->o->src, t->src, (long long)i);
    return TQ_OK;
}

/* MLX affine: "<m>.weight" uint32 codes (rows, cols*bits/32), "<m>.scales"/"<m>.biases" bf16
 * (rows, cols/group). *ob receives the bytes written; rel (optional) the relative RMS error of
 * bf16(s)*q + bf16(b) against x. */
static tq_status write_affine(const ctx *c, const qt *t, const float *x, tq_st_writer *sw,
                              double *rel, size_t *ob)
{
    const int bits = c->o->bits, group = c->o->group;
    const int64_t words = t->cols * bits / 32, ng = t->cols / group;
    const size_t n_codes = (size_t)(t->rows * words), n_g = (size_t)(t->rows * ng);
    uint32_t *codes = tq_malloc(n_codes * sizeof(uint32_t));
    float *sc = tq_malloc(n_g * sizeof(float)), *bi = tq_malloc(n_g * sizeof(float));
    uint16_t *sc16 = tq_malloc(n_g * 2), *bi16 = tq_malloc(n_g * 2);
    tq_status st = TQ_OK;
    if (!codes || !sc || !bi || !sc16 || !bi16)
        st = TQ_FAIL(TQ_E_NOMEM, "out of memory for tensor '%s'", t->name);
    if (!st)
        st = tq_affine_quantize(x, t->rows, t->cols, bits, group, codes, sc, bi);
    for (size_t i = 0; !st && i < n_g; i++) {
        sc16[i] = tq_f32_to_bf16(sc[i]);
        bi16[i] = tq_f32_to_bf16(bi[i]);
    }
    char base[160], name[176];
    const size_t bl = strlen(t->name);
    snprintf(base, sizeof(base), "%.*s", (int)(bl > 7 && !strcmp(t->name + bl - 7, ".weight")
                                                   ? bl - 7 : bl), t->name);
    const int64_t shp_c[2] = {t->rows, words}, shp_g[2] = {t->rows, ng};
    if (!st)
        st = tq_st_writer_add(sw, t->name, TQ_ST_U32, 2, shp_c, codes, n_codes * 4);
    snprintf(name, sizeof(name), "%s.scales", base);
    if (!st)
        st = tq_st_writer_add(sw, name, TQ_ST_BF16, 2, shp_g, sc16, n_g * 2);
    snprintf(name, sizeof(name), "%s.biases", base);
    if (!st)
        st = tq_st_writer_add(sw, name, TQ_ST_BF16, 2, shp_g, bi16, n_g * 2);
    *ob = n_codes * 4 + n_g * 4;
    if (!st && rel) {
        float *y = tq_malloc((size_t)t->n * sizeof(float));
        if (y) {
            tq_affine_dequantize(codes, sc16, bi16, t->rows, t->cols, bits, group, y);
            double e = 0, d = 0;
            for (int64_t j = 0; j < t->n; j++) {
                e += ((double)y[j] - x[j]) * ((double)y[j] - x[j]);
                d += (double)x[j] * x[j];
            }
            *rel = d > 0 ? sqrt(e / d) : sqrt(e);
        }
        tq_free(y);
    }
    tq_free(codes);
    tq_free(sc);
    tq_free(bi);
    tq_free(sc16);
    tq_free(bi16);
    return st;
}

/* Big tensors whose fold is row-local (everything but the residual writers under R1 and o_proj
 * under R2) are streamed in chunks of rows from a GGUF source into a GGUF output, so peak memory
 * follows the chunk, not the embedding. */
#define CHUNK_ELEMS ((int64_t)1 << 21) /* 8 MiB of f32 */

static int64_t chunk_rows(const ctx *c, const qt *t, int gguf_out)
{
    const int64_t ce = c->o->chunk_elems > 0 ? c->o->chunk_elems : CHUNK_ELEMS;
    if (!gguf_out || !c->g || t->n <= ce || t->n_dims < 2)
        return t->rows;
    if (c->o->rotate) {
        const int r1 = (c->fold & TQ_FOLD_R1) != 0, r2 = (c->fold & TQ_FOLD_R2) != 0;
        if (t->role == R_DOWN ? r1 : t->role == R_O ? (r1 || r2) : 0)
            return t->rows; /* column transforms need the whole matrix */
        if (!(t->role == R_EMBED || t->role == R_LMHEAD || t->role == R_Q || t->role == R_K ||
              t->role == R_V || t->role == R_GATE || t->role == R_UP))
            return t->rows;
    }
    int64_t step = ce / t->cols;
    step = step < 1 ? 1 : step;
    if (t->role == R_V && c->o->rotate && (c->fold & TQ_FOLD_R2)) {
        const int hd = c->cfg->head_dim;
        step = step < hd ? hd : step / hd * hd; /* whole heads */
    }
    return step < t->rows ? step : t->rows;
}

static tq_status run_tensors(ctx *c, tq_gguf_writer *gw, tq_st_writer *sw, tq_quantize_result *r)
{
    const tq_quantize_opts *o = c->o;
    uint64_t bytes_in = 0, done_in = 0;
    for (int64_t i = 0; i < c->nt; i++)
        bytes_in += c->t[i].src_nbytes;
    tq_status st = TQ_OK;
    for (int64_t i = 0; i < c->nt && !st; i++) {
        const qt *t = &c->t[i];
        const int64_t step = chunk_rows(c, t, gw != NULL);
        const int64_t cn = step * t->cols; /* elements per chunk */
        size_t ob = 0, cb;
        if ((st = tq_ggml_nbytes(t->out_type, cn, &cb)))
            break;
        float *x = tq_malloc((size_t)cn * sizeof(float));
        void *q = tq_malloc(cb ? cb : 1);
        float *y = o->stats ? tq_malloc((size_t)cn * sizeof(float)) : NULL;
        if (!x || !q || (o->stats && !y)) {
            tq_free(x);
            tq_free(q);
            tq_free(y);
            st = TQ_FAIL(TQ_E_NOMEM, "out of memory for tensor '%s' (%lld elements)", t->name,
                         (long long)cn);
            break;
        }
        tq_quantize_tensor_stats s;
        memset(&s, 0, sizeof(s));
        s.name = t->name;
        s.src_type = t->src_type_name;
        s.out_type = tq_ggml_type_name(t->out_type);
        s.n = t->n;
        mom mi = {0}, mo = {0};
        double e = 0, d = 0;
        for (int64_t r0 = 0; r0 < t->rows && !st; r0 += step) {
            qt v = *t; /* this chunk's view: nr rows */
            v.rows = t->rows - r0 < step ? t->rows - r0 : step;
            v.n = v.rows * t->cols;
            if (step == t->rows) {
                v = *t;
                st = read_f32(c, t, x);
            } else {
                st = read_rows_f32(c, t, r0, v.rows, x);
            }
            if (!st)
                st = check_finite(c, t, x, v.n);
            if (!st && o->stats)
                mom_add(&mi, x, v.n);
            int folded = 0;
            if (!st)
                st = fold_tensor(c, &v, x, &folded);
            s.folded |= folded;
            if (!st && c->hf && c->cfg->arch == TQ_ARCH_GEMMA3 && is_norm(t->role))
                for (int64_t j = 0; j < v.n; j++) /* GGUF stores 1 + w, Hugging Face w */
                    x[j] -= 1.0f;
            if (!st && o->stats)
                mom_add(&mo, x, v.n);
            if (!st && t->affine) { /* whole tensor (safetensors output is never chunked) */
                st = write_affine(c, t, x, sw, o->stats ? &s.rel_rmse : NULL, &ob);
                s.out_type = "affine";
                break;
            }
            size_t vb = 0;
            if (!st)
                st = tq_ggml_nbytes(t->out_type, v.n, &vb);
            if (!st)
                st = o->ref_blocks ? tq_ggml_quantize(t->out_type, x, v.n, q, vb)
                                   : tq_ggml_quantize_search(t->out_type, x, v.n, q, vb);
            if (!st && o->stats && tq_ggml_dequant(t->out_type, q, vb, y, v.n) == TQ_OK)
                for (int64_t j = 0; j < v.n; j++) {
                    e += ((double)y[j] - x[j]) * ((double)y[j] - x[j]);
                    d += (double)x[j] * x[j];
                }
            if (!st && gw)
                st = tq_gguf_writer_write(gw, q, vb);
            if (!st && sw) {
                int64_t shape[4];
                for (int k = 0; k < t->n_dims; k++)
                    shape[k] = t->ne[t->n_dims - 1 - k];
                st = tq_st_writer_add(sw, t->name, ggml_to_st(t->out_type), t->n_dims, shape, q,
                                      vb);
            }
            ob += vb;
        }
        if (o->stats) {
            mom_get(&mi, &s.maxabs_in, &s.kurt_in);
            mom_get(&mo, &s.maxabs_out, &s.kurt_out);
            if (!t->affine)
                s.rel_rmse = d > 0 ? sqrt(e / d) : sqrt(e);
        }
        tq_free(x);
        tq_free(q);
        tq_free(y);
        if (st)
            break;
        r->bytes_out += ob;
        r->n_fallback += t->fallback;
        done_in += t->src_nbytes;
        if (o->on_tensor)
            o->on_tensor(o->ctx, &s);
        if (o->on_progress) {
            tq_quantize_progress p = {i + 1, c->nt, done_in, bytes_in, t->name};
            o->on_progress(o->ctx, &p);
        }
    }
    r->bytes_in = bytes_in;
    r->n_tensors = c->nt;
    return st;
}

/* config.json of a GGUF source (c->hf): the Hugging Face keys of its config, so that stock tools
 * (transformers, mlx-lm) build the same model; `insert` (the MLX quantization entry) first. No
 * tokenizer files are written (the GGUF holds the vocabulary in another form). */
static int write_config_gemma3(FILE *f, const tq_model_config *g, int tied, const char *insert);

static tq_status write_config(const ctx *c, const char *dir, const char *insert)
{
    const tq_model_config *g = c->cfg;
    char *path = path_join(dir, "config.json");
    if (!path)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    tq_atomic_file *af;
    tq_status st = tq_atomic_file_open(path, &af);
    free(path);
    if (st)
        return st;
    FILE *f = tq_atomic_file_stream(af);
    static const char *const arch[] = {[TQ_ARCH_LLAMA] = "llama", [TQ_ARCH_MISTRAL] = "mistral",
                                       [TQ_ARCH_QWEN2] = "qwen2", [TQ_ARCH_QWEN3] = "qwen3"};
    const char *mt = g->arch < (int)(sizeof(arch) / sizeof(arch[0])) && arch[g->arch]
                         ? arch[g->arch] : "llama";
    const char *cls = g->arch == TQ_ARCH_QWEN2   ? "Qwen2ForCausalLM"
                      : g->arch == TQ_ARCH_QWEN3 ? "Qwen3ForCausalLM"
                      : g->arch == TQ_ARCH_MISTRAL ? "MistralForCausalLM"
                                                   : "LlamaForCausalLM";
    const int tied = g->tied_embeddings && !c->untie;
    int ok = f && g->arch == TQ_ARCH_GEMMA3 ? write_config_gemma3(f, g, tied, insert)
             : f && fprintf(f, "{%s\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n"
                             "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n"
                             "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
                             "  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
                             "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %lld,\n"
                             "  \"rms_norm_eps\": %.9g,\n  \"rope_theta\": %.9g,\n"
                             "  \"tie_word_embeddings\": %s,\n  \"attention_bias\": %s,\n"
                             "  \"hidden_act\": \"silu\",\n  \"bos_token_id\": %d,\n"
                             "  \"eos_token_id\": %d,\n  \"torch_dtype\": \"bfloat16\",\n"
                             "  \"turboquant_source\": \"GGUF, written by tq quantize\"\n}\n",
                          insert ? insert : "", cls, mt, g->hidden, g->ffn_hidden, g->n_layers,
                          g->n_heads, g->n_kv_heads, g->head_dim, g->vocab,
                          (long long)(g->max_ctx > 0 ? g->max_ctx : 2048), (double)g->rms_eps,
                          (double)g->rope_theta, tied ? "true" : "false",
                          g->qkv_bias ? "true" : "false", g->bos_id, g->eos_id) > 0;
    if (!ok) {
        tq_atomic_file_abort(af);
        return TQ_FAIL(TQ_E_IO, "%s/config.json: write failed", dir);
    }
    return tq_atomic_file_commit(af);
}

/* gemma3 as transformers' Gemma3TextConfig (model_type gemma3_text) spells it; the norms are
 * written as w (the GGUF's 1 + w minus 1, see run_tensors) */
static int write_config_gemma3(FILE *f, const tq_model_config *g, int tied, const char *insert)
{
    char softcap[2][32];
    snprintf(softcap[0], sizeof(softcap[0]), "%.9g", (double)g->final_logit_softcap);
    snprintf(softcap[1], sizeof(softcap[1]), "%.9g", (double)g->attn_logit_softcap);
    int ok = fprintf(f, "{%s\n  \"architectures\": [\"Gemma3ForCausalLM\"],\n"
                        "  \"model_type\": \"gemma3_text\",\n  \"hidden_size\": %d,\n"
                        "  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n"
                        "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n"
                        "  \"head_dim\": %d,\n  \"vocab_size\": %d,\n"
                        "  \"max_position_embeddings\": %lld,\n  \"rms_norm_eps\": %.9g,\n"
                        "  \"rope_theta\": %.9g,\n  \"rope_local_base_freq\": %.9g,\n"
                        "  \"rope_scaling\": null,\n  \"sliding_window\": %d,\n"
                        "  \"sliding_window_pattern\": %d,\n  \"query_pre_attn_scalar\": %.9g,\n"
                        "  \"final_logit_softcapping\": %s,\n  \"attn_logit_softcapping\": %s,\n"
                        "  \"hidden_activation\": \"gelu_pytorch_tanh\",\n"
                        "  \"tie_word_embeddings\": %s,\n  \"attention_bias\": false,\n"
                        "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n"
                        "  \"torch_dtype\": \"bfloat16\",\n  \"layer_types\": [",
                     insert ? insert : "", g->hidden, g->ffn_hidden, g->n_layers, g->n_heads,
                     g->n_kv_heads, g->head_dim, g->vocab,
                     (long long)(g->max_ctx > 0 ? g->max_ctx : 32768), (double)g->rms_eps,
                     (double)g->rope_theta, (double)g->rope_theta_local, g->sliding_window,
                     g->sliding_window_pattern,
                     (double)(g->query_pre_attn_scalar > 0 ? g->query_pre_attn_scalar
                                                           : (float)g->head_dim),
                     g->final_logit_softcap > 0 ? softcap[0] : "null",
                     g->attn_logit_softcap > 0 ? softcap[1] : "null", tied ? "true" : "false",
                     g->bos_id, g->eos_id) > 0;
    for (int l = 0; ok && l < g->n_layers; l++)
        ok = fprintf(f, "%s\"%s\"", l ? ", " : "",
                     tq_model_config_layer_is_sliding(g, l) ? "sliding_attention"
                                                            : "full_attention") > 0;
    return ok && fprintf(f, "],\n  \"turboquant_source\": \"GGUF, written by tq quantize\"\n}\n") > 0;
}

static const char *const hf_side_files[] = {
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "generation_config.json", "tokenizer.model", "chat_template.jinja",
};

tq_status tq_quantize(const tq_quantize_opts *o, tq_quantize_result *res)
{
    if (!o || !o->src || !o->out || !res)
        return TQ_FAIL(TQ_E_ARG, "tq_quantize: NULL argument");
    memset(res, 0, sizeof(*res));
    if (o->format != TQ_QFORMAT_GGUF && o->format != TQ_QFORMAT_SAFETENSORS &&
        o->format != TQ_QFORMAT_MLX)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq quantize: output format %d not supported (gguf, "
                       "safetensors, mlx)", (int)o->format);
    if (o->format == TQ_QFORMAT_MLX && !tq_affine_ok(o->bits, o->group))
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq quantize: MLX affine --bits %d --group %d: bits 2 3 "
                       "4 5 6 8, group 32 64 128", o->bits, o->group);
    if (!tq_ggml_can_quantize(o->type))
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq quantize: no quantizer for type %s; supported: F32 "
                       "F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K IQ4_NL",
                       tq_ggml_type_name(o->type));
    if (o->format == TQ_QFORMAT_SAFETENSORS && o->type != TQ_GGML_F32 &&
        o->type != TQ_GGML_F16 && o->type != TQ_GGML_BF16)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq quantize: safetensors output is unquantized: --type "
                       "F32, F16 or BF16 (block types: --format gguf)");
    if (path_exists(o->out) && !o->force)
        return TQ_FAIL(TQ_E_ARG, "%s: output exists; pass --force to replace it", o->out);
    if (!strcmp(o->src, o->out))
        return TQ_FAIL(TQ_E_ARG, "%s: output and source are the same path", o->out);

    ctx c;
    memset(&c, 0, sizeof(c));
    c.o = o;
    c.fd = -1;
    tq_status st = tq_weights_open(o->src, &c.w);
    if (st)
        return st;
    c.g = tq_weights_gguf(c.w);
    if (c.g && (c.fd = open(tq_gguf_path(c.g), O_RDONLY | O_CLOEXEC)) < 0) {
        st = TQ_FAIL(TQ_E_IO, "%s: cannot open: %s", o->src, strerror(errno));
        goto out;
    }
    c.st = tq_weights_st(c.w);
    c.cfg = tq_weights_config(c.w);
    if (c.cfg->arch == TQ_ARCH_UNKNOWN) {
        st = TQ_FAIL(TQ_E_UNSUPPORTED, "%s: architecture '%s' is not supported (llama, mistral, "
                     "qwen2, qwen3, gemma3)", o->src, c.cfg->arch_name);
        goto out;
    }
    if (o->format == TQ_QFORMAT_GGUF && !c.g) {
        st = TQ_FAIL(TQ_E_UNSUPPORTED, "%s: GGUF output needs a GGUF source (its metadata and "
                     "tokenizer are copied); convert with llama.cpp's convert_hf_to_gguf.py first, "
                     "or use --format safetensors", o->src);
        goto out;
    }
    c.hf = c.g && o->format != TQ_QFORMAT_GGUF;
    if (c.hf && (c.cfg->rope_scaling != TQ_ROPE_SCALING_NONE ||
                 (c.cfg->sliding_window > 0 && c.cfg->arch != TQ_ARCH_GEMMA3))) {
        st = TQ_FAIL(TQ_E_UNSUPPORTED, "%s: GGUF -> safetensors/MLX is written for llama, "
                     "mistral, qwen2 and qwen3 without RoPE scaling or sliding windows, and "
                     "gemma3; this is %s%s: write GGUF, or start from the Hugging Face directory",
                     o->src, tq_arch_name(c.cfg->arch),
                     c.cfg->rope_scaling != TQ_ROPE_SCALING_NONE ? " with RoPE scaling"
                                                                : " with sliding windows");
        goto out;
    }
    if ((st = setup_fold(&c)) || (st = plan(&c)))
        goto out;
    if (o->rotate && (c.fold & TQ_FOLD_GAMMA) && (st = load_gains(&c)))
        goto out;
    char fp[17];
    if ((st = fingerprint(&c, fp)))
        goto out;
    snprintf(res->transform, sizeof(res->transform), "%s", c.transform);

    if (o->format == TQ_QFORMAT_GGUF) {
        tq_gguf_writer *gw = NULL;
        if ((st = tq_gguf_writer_create(o->out, &gw)))
            goto out;
        st = meta_gguf(&c, gw, fp);
        for (int64_t i = 0; !st && i < c.nt; i++)
            st = tq_gguf_writer_add_tensor(gw, c.t[i].name, c.t[i].out_type, c.t[i].n_dims,
                                           c.t[i].ne);
        if (!st)
            st = tq_gguf_writer_begin(gw);
        if (!st)
            st = run_tensors(&c, gw, NULL, res);
        if (!st)
            st = tq_gguf_writer_finish(gw);
        tq_gguf_writer_free(gw);
        goto out;
    }

    /* safetensors directory: build OUT.tmp.<pid>, rename into place at the end */
    char quant_json[256] = "";
    if (o->format == TQ_QFORMAT_MLX)
        snprintf(quant_json, sizeof(quant_json),
                 "\n  \"quantization\": {\"group_size\": %d, \"bits\": %d, \"mode\": "
                 "\"affine\"},\n  \"quantization_config\": {\"group_size\": %d, \"bits\": "
                 "%d, \"mode\": \"affine\"},", o->group, o->bits, o->group, o->bits);
    char tmp[4096], old[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", o->out, (long)getpid());
    snprintf(old, sizeof(old), "%s.old.%ld", o->out, (long)getpid());
    remove_tree(tmp);
    if (mkdir(tmp, 0777) != 0) {
        st = TQ_FAIL(TQ_E_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    tq_st_writer *sw = NULL;
    char *stp = path_join(tmp, "model.safetensors");
    st = stp ? tq_st_writer_create(stp, 0, &sw) : TQ_FAIL(TQ_E_NOMEM, "out of memory");
    free(stp);
    if (!st)
        st = meta_st(&c, sw, fp);
    if (!st)
        st = run_tensors(&c, NULL, sw, res);
    if (!st)
        st = tq_st_writer_finish(sw);
    tq_st_writer_free(sw);
    const char *srcdir = o->src;
    char dirbuf[4096];
    if (!is_dir(srcdir)) {
        snprintf(dirbuf, sizeof(dirbuf), "%s", o->src);
        char *slash = strrchr(dirbuf, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(dirbuf, sizeof(dirbuf), ".");
        srcdir = dirbuf;
    }
    if (!st && c.hf)
        st = write_config(&c, tmp, quant_json);
    for (size_t i = 0; !st && !c.hf && i < sizeof(hf_side_files) / sizeof(hf_side_files[0]);
         i++) {
        char *from = path_join(srcdir, hf_side_files[i]);
        char *to = path_join(tmp, hf_side_files[i]);
        if (!from || !to)
            st = TQ_FAIL(TQ_E_NOMEM, "out of memory");
        else if (path_exists(from))
            st = copy_file(from, to, c.untie && i == 0, i == 0 && *quant_json ? quant_json : NULL);
        free(from);
        free(to);
    }
    if (!st && path_exists(o->out)) {
        if (rename(o->out, old) != 0)
            st = TQ_FAIL(TQ_E_IO, "%s: cannot move the old output aside: %s", o->out,
                         strerror(errno));
    }
    if (!st && rename(tmp, o->out) != 0) {
        st = TQ_FAIL(TQ_E_IO, "%s: cannot rename %s into place: %s", o->out, tmp,
                     strerror(errno));
        rename(old, o->out);
    }
    if (!st)
        remove_tree(old);
    else
        remove_tree(tmp);
out:
    ctx_free(&c);
    return st;
}
