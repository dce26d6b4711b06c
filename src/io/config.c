/* config.c -- model hyper-parameters from GGUF metadata (`<arch>.*` keys) or from a Hugging Face
 * config.json, into one tq_model_config. Architecture defaults that neither source states (gemma3's
 * local RoPE base and layer pattern, its embedding scale) are the values the reference
 * implementations hard-code; docs/FORMAT.md "Model config" lists them. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/io_internal.h"

const char *tq_arch_name(tq_arch a)
{
    switch (a) {
    case TQ_ARCH_LLAMA:
        return "llama";
    case TQ_ARCH_MISTRAL:
        return "mistral";
    case TQ_ARCH_QWEN2:
        return "qwen2";
    case TQ_ARCH_QWEN3:
        return "qwen3";
    case TQ_ARCH_GEMMA3:
        return "gemma3";
    default:
        return "unknown";
    }
}

static tq_arch arch_from(const char *s)
{
    if (!strcmp(s, "llama"))
        return TQ_ARCH_LLAMA;
    if (!strcmp(s, "mistral"))
        return TQ_ARCH_MISTRAL;
    if (!strcmp(s, "qwen2"))
        return TQ_ARCH_QWEN2;
    if (!strcmp(s, "qwen3"))
        return TQ_ARCH_QWEN3;
    if (!strcmp(s, "gemma3") || !strcmp(s, "gemma3_text"))
        return TQ_ARCH_GEMMA3;
    return TQ_ARCH_UNKNOWN;
}

static void defaults(tq_model_config *c)
{
    memset(c, 0, sizeof(*c));
    c->rope_theta = 10000.0f;
    c->rope_factor = 1.0f;
    c->rope_order = TQ_ROPE_NEOX;
    c->rms_eps = 1e-6f;
    c->embed_scale = 1.0f;
    c->bos_id = -1;
    c->eos_id = -1;
}

/* Derived fields and arch-specific defaults once the source has been read. */
static tq_status finish(tq_model_config *c, const char *src)
{
    if (c->n_layers <= 0 || c->hidden <= 0 || c->n_heads <= 0)
        return TQ_FAIL(TQ_E_FORMAT,
                       "%s: missing or invalid layer count / hidden size / head count "
                       "(%d / %d / %d)",
                       src, c->n_layers, c->hidden, c->n_heads);
    if (c->n_kv_heads <= 0)
        c->n_kv_heads = c->n_heads;
    if (c->n_heads % c->n_kv_heads)
        return TQ_FAIL(TQ_E_FORMAT, "%s: %d query heads is not a multiple of %d kv heads", src,
                       c->n_heads, c->n_kv_heads);
    if (c->head_dim <= 0) {
        if (c->hidden % c->n_heads)
            return TQ_FAIL(TQ_E_FORMAT,
                           "%s: no head_dim and hidden %d is not a multiple of %d "
                           "heads",
                           src, c->hidden, c->n_heads);
        c->head_dim = c->hidden / c->n_heads;
    }
    if (c->rope_dim <= 0 || c->rope_dim > c->head_dim)
        c->rope_dim = c->head_dim;
    if (c->rope_theta_local <= 0)
        c->rope_theta_local = c->rope_theta;
    if (c->arch == TQ_ARCH_GEMMA3) {
        c->embed_scale = sqrtf((float)c->hidden);
        c->act_gelu = 1;
        c->qk_norm = 1;
        if (c->query_pre_attn_scalar <= 0)
            c->query_pre_attn_scalar = (float)c->head_dim;
        if (c->sliding_window_pattern <= 0)
            c->sliding_window_pattern = 6;
    }
    return TQ_OK;
}

int tq_model_config_layer_is_sliding(const tq_model_config *c, int il)
{
    if (!c || c->sliding_window <= 0)
        return 0;
    if (c->sliding_window_pattern <= 0)
        return 1; /* mistral-style: every layer */
    return (il + 1) % c->sliding_window_pattern != 0;
}

/* ---- GGUF ------------------------------------------------------------------------------------ */
static int gi(const tq_gguf *g, const char *arch, const char *suffix, int64_t *v)
{
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    return tq_gguf_find_key(g, key) >= 0 && tq_gguf_get_i64(g, key, v) == TQ_OK;
}

static int gf(const tq_gguf *g, const char *arch, const char *suffix, float *v)
{
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    return tq_gguf_find_key(g, key) >= 0 && tq_gguf_get_f32(g, key, v) == TQ_OK;
}

tq_status tq_model_config_from_gguf(const tq_gguf *g, tq_model_config *c)
{
    const char *arch = NULL;
    int64_t v;
    float f;
    tq_status st;

    if (!g || !c)
        return TQ_FAIL(TQ_E_ARG, "tq_model_config_from_gguf: NULL argument");
    defaults(c);
    if ((st = tq_gguf_get_str(g, "general.architecture", &arch, NULL)))
        return TQ_FAIL(TQ_E_FORMAT, "%s: no general.architecture string", tq_gguf_path(g));
    snprintf(c->arch_name, sizeof(c->arch_name), "%s", arch);
    c->arch = arch_from(arch);
    if (gi(g, arch, "block_count", &v))
        c->n_layers = (int)v;
    if (gi(g, arch, "embedding_length", &v))
        c->hidden = (int)v;
    if (gi(g, arch, "feed_forward_length", &v))
        c->ffn_hidden = (int)v;
    if (gi(g, arch, "attention.head_count", &v))
        c->n_heads = (int)v;
    if (gi(g, arch, "attention.head_count_kv", &v))
        c->n_kv_heads = (int)v;
    if (gi(g, arch, "attention.key_length", &v))
        c->head_dim = (int)v;
    if (gi(g, arch, "context_length", &v))
        c->max_ctx = v;
    if (gi(g, arch, "rope.dimension_count", &v))
        c->rope_dim = (int)v;
    if (gi(g, arch, "attention.sliding_window", &v))
        c->sliding_window = (int)v;
    if (gi(g, arch, "attention.sliding_window_pattern", &v))
        c->sliding_window_pattern = (int)v;
    if (gf(g, arch, "rope.freq_base", &f))
        c->rope_theta = f;
    if (gf(g, arch, "attention.layer_norm_rms_epsilon", &f))
        c->rms_eps = f;
    if (gf(g, arch, "final_logit_softcapping", &f))
        c->final_logit_softcap = f;
    if (gf(g, arch, "attn_logit_softcapping", &f))
        c->attn_logit_softcap = f;
    if (gf(g, arch, "rope.scaling.factor", &f))
        c->rope_factor = f;
    if (gi(g, arch, "rope.scaling.original_context_length", &v))
        c->rope_orig_max_pos = v;
    {
        char key[160];
        const char *s;
        snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
        if (tq_gguf_find_key(g, key) >= 0 && tq_gguf_get_str(g, key, &s, NULL) == TQ_OK) {
            if (!strcmp(s, "linear"))
                c->rope_scaling = TQ_ROPE_SCALING_LINEAR;
            else if (!strcmp(s, "yarn"))
                c->rope_scaling = TQ_ROPE_SCALING_YARN;
        }
    }
    if (gi(g, arch, "vocab_size", &v)) {
        c->vocab = (int)v;
    } else {
        int64_t n;
        if (tq_gguf_find_key(g, "tokenizer.ggml.tokens") >= 0 &&
            tq_gguf_get_arr(g, "tokenizer.ggml.tokens", NULL, &n) == TQ_OK)
            c->vocab = (int)n;
    }
    if (tq_gguf_find_key(g, "tokenizer.ggml.bos_token_id") >= 0 &&
        tq_gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &v) == TQ_OK)
        c->bos_id = (int32_t)v;
    if (tq_gguf_find_key(g, "tokenizer.ggml.eos_token_id") >= 0 &&
        tq_gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &v) == TQ_OK)
        c->eos_id = (int32_t)v;
    c->tied_embeddings = tq_gguf_find_tensor(g, "output.weight") < 0;
    c->qkv_bias = tq_gguf_find_tensor(g, "blk.0.attn_q.bias") >= 0;
    c->qk_norm = tq_gguf_find_tensor(g, "blk.0.attn_q_norm.weight") >= 0;
    if (c->arch == TQ_ARCH_GEMMA3) {
        c->rope_theta_local = 10000.0f; /* llama.cpp hard-codes it; GGUF has no key */
        c->norm_plus_one = 0;           /* the converter stored w + 1 */
    }
    if (c->arch == TQ_ARCH_UNKNOWN)
        return TQ_FAIL(TQ_E_UNSUPPORTED,
                       "%s: architecture '%s' is not supported (llama, mistral, "
                       "qwen2, qwen3, gemma3)",
                       tq_gguf_path(g), arch);
    if (tq_gguf_find_tensor(g, "rope_freqs.weight") >= 0)
        c->rope_scaling = TQ_ROPE_SCALING_LLAMA3; /* factors precomputed into that tensor */
    {
        const int64_t ti = tq_gguf_find_tensor(g, "token_embd.weight");
        tq_gguf_tensor_info info;
        if (c->vocab <= 0 && ti >= 0 && tq_gguf_tensor(g, ti, &info) == TQ_OK)
            c->vocab = (int)info.shape[0];
    }
    return finish(c, tq_gguf_path(g));
}

/* ---- config.json ----------------------------------------------------------------------------- */
static int ji(json_object *o, const char *k, int64_t *v)
{
    json_object *x;
    if (!json_object_object_get_ex(o, k, &x) || !x)
        return 0;
    if (json_object_is_type(x, json_type_array)) { /* eos_token_id: [1, 106] -> first */
        if (json_object_array_length(x) == 0)
            return 0;
        x = json_object_array_get_idx(x, 0);
    }
    if (!json_object_is_type(x, json_type_int) && !json_object_is_type(x, json_type_double))
        return 0;
    *v = json_object_get_int64(x);
    return 1;
}

static int jf(json_object *o, const char *k, float *v)
{
    json_object *x;
    if (!json_object_object_get_ex(o, k, &x) || !x)
        return 0;
    if (!json_object_is_type(x, json_type_int) && !json_object_is_type(x, json_type_double))
        return 0;
    *v = (float)json_object_get_double(x);
    return 1;
}

static int jb(json_object *o, const char *k, int *v)
{
    json_object *x;
    if (!json_object_object_get_ex(o, k, &x) || !x || !json_object_is_type(x, json_type_boolean))
        return 0;
    *v = json_object_get_boolean(x);
    return 1;
}

static const char *js(json_object *o, const char *k)
{
    json_object *x;
    if (!json_object_object_get_ex(o, k, &x) || !x || !json_object_is_type(x, json_type_string))
        return NULL;
    return json_object_get_string(x);
}

static tq_status from_json_obj(json_object *root, const char *path, tq_model_config *c)
{
    json_object *o = root;
    json_object *x;
    const char *mt;
    int64_t v;
    float f;
    int b;

    defaults(c);
    if (!json_object_is_type(root, json_type_object))
        return TQ_FAIL(TQ_E_FORMAT, "%s: top level is not a JSON object", path);
    if (json_object_object_get_ex(root, "text_config", &x) && x &&
        json_object_is_type(x, json_type_object))
        o = x; /* multimodal gemma3: the language model's parameters */
    mt = js(o, "model_type");
    if (!mt)
        mt = js(root, "model_type");
    if (!mt)
        return TQ_FAIL(TQ_E_FORMAT, "%s: no \"model_type\"", path);
    snprintf(c->arch_name, sizeof(c->arch_name), "%s", mt);
    c->arch = arch_from(mt);
    if (c->arch == TQ_ARCH_UNKNOWN)
        return TQ_FAIL(TQ_E_UNSUPPORTED,
                       "%s: model_type '%s' is not supported (llama, mistral, "
                       "qwen2, qwen3, gemma3, gemma3_text)",
                       path, mt);
    if (c->arch == TQ_ARCH_GEMMA3)
        snprintf(c->arch_name, sizeof(c->arch_name), "gemma3");
    if (ji(o, "num_hidden_layers", &v))
        c->n_layers = (int)v;
    if (ji(o, "hidden_size", &v))
        c->hidden = (int)v;
    if (ji(o, "intermediate_size", &v))
        c->ffn_hidden = (int)v;
    if (ji(o, "num_attention_heads", &v))
        c->n_heads = (int)v;
    if (ji(o, "num_key_value_heads", &v))
        c->n_kv_heads = (int)v;
    if (ji(o, "head_dim", &v))
        c->head_dim = (int)v; /* given: never derived */
    if (ji(o, "vocab_size", &v))
        c->vocab = (int)v;
    if (ji(o, "max_position_embeddings", &v))
        c->max_ctx = v;
    if (jf(o, "rope_theta", &f))
        c->rope_theta = f;
    if (jf(o, "rope_local_base_freq", &f))
        c->rope_theta_local = f;
    if (jf(o, "rms_norm_eps", &f))
        c->rms_eps = f;
    if (jf(o, "query_pre_attn_scalar", &f))
        c->query_pre_attn_scalar = f;
    if (jf(o, "final_logit_softcapping", &f))
        c->final_logit_softcap = f;
    if (jf(o, "attn_logit_softcapping", &f))
        c->attn_logit_softcap = f;
    if (jf(o, "partial_rotary_factor", &f) && f > 0 && f < 1)
        c->rope_dim = -1;                           /* resolved below once head_dim is known */
    c->tied_embeddings = c->arch == TQ_ARCH_GEMMA3; /* HF default differs per family */
    if (jb(o, "tie_word_embeddings", &b) || jb(root, "tie_word_embeddings", &b))
        c->tied_embeddings = b;
    if (c->arch == TQ_ARCH_QWEN2)
        c->qkv_bias = 1;
    if (jb(o, "attention_bias", &b))
        c->qkv_bias = b;
    if (c->arch == TQ_ARCH_QWEN3 || c->arch == TQ_ARCH_GEMMA3)
        c->qk_norm = 1;
    if (c->arch == TQ_ARCH_GEMMA3)
        c->norm_plus_one = 1;
    if (ji(o, "sliding_window", &v))
        c->sliding_window = (int)v;
    if (c->arch == TQ_ARCH_QWEN2 || c->arch == TQ_ARCH_QWEN3) {
        int use = 0;
        jb(o, "use_sliding_window", &use);
        if (!use)
            c->sliding_window = 0;
    }
    if (ji(o, "sliding_window_pattern", &v))
        c->sliding_window_pattern = (int)v;
    if (json_object_object_get_ex(o, "layer_types", &x) && x &&
        json_object_is_type(x, json_type_array)) {
        const size_t n = json_object_array_length(x);
        for (size_t i = 0; i < n; i++) {
            const char *t = json_object_get_string(json_object_array_get_idx(x, i));
            if (t && !strcmp(t, "full_attention")) {
                c->sliding_window_pattern = (int)i + 1;
                break;
            }
        }
    }
    if (ji(o, "bos_token_id", &v) || ji(root, "bos_token_id", &v))
        c->bos_id = (int32_t)v;
    if (ji(o, "eos_token_id", &v) || ji(root, "eos_token_id", &v))
        c->eos_id = (int32_t)v;
    if (json_object_object_get_ex(o, "rope_scaling", &x) && x &&
        json_object_is_type(x, json_type_object)) {
        const char *t = js(x, "rope_type");
        if (!t)
            t = js(x, "type");
        if (t && !strcmp(t, "llama3"))
            c->rope_scaling = TQ_ROPE_SCALING_LLAMA3;
        else if (t && !strcmp(t, "linear"))
            c->rope_scaling = TQ_ROPE_SCALING_LINEAR;
        else if (t && !strcmp(t, "yarn"))
            c->rope_scaling = TQ_ROPE_SCALING_YARN;
        else if (t && strcmp(t, "default"))
            return TQ_FAIL(TQ_E_UNSUPPORTED,
                           "%s: rope_scaling type '%s' is not supported "
                           "(linear, llama3, yarn)",
                           path, t);
        jf(x, "factor", &c->rope_factor);
        jf(x, "low_freq_factor", &c->rope_low_freq_factor);
        jf(x, "high_freq_factor", &c->rope_high_freq_factor);
        if (ji(x, "original_max_position_embeddings", &v))
            c->rope_orig_max_pos = v;
    }
    {
        tq_status st = finish(c, path);
        if (st)
            return st;
    }
    if (c->rope_dim < 0 || (jf(o, "partial_rotary_factor", &f) && f > 0 && f < 1))
        c->rope_dim = (int)((float)c->head_dim * f);
    return TQ_OK;
}

tq_status tq_model_config_from_json(const char *path, tq_model_config *c)
{
    json_object *root;
    tq_status st;
    FILE *fp;
    if (!path || !c)
        return TQ_FAIL(TQ_E_ARG, "tq_model_config_from_json: NULL argument");
    if (!(fp = fopen(path, "rb")))
        return TQ_FAIL(TQ_E_IO, "%s: cannot open", path);
    fclose(fp);
    root = json_object_from_file(path);
    if (!root)
        return TQ_FAIL(TQ_E_FORMAT, "%s: bad JSON: %s", path, json_util_get_last_err());
    st = from_json_obj(root, path, c);
    json_object_put(root);
    return st;
}
