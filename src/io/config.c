/* config.c -- model hyper-parameters from GGUF metadata (`<arch>.*` keys) or from a Hugging Face
 * config.json, into one tq_model_config. Architecture defaults that neither source states (gemma3's
 * local RoPE base and layer pattern, its embedding scale) are the values the reference
 * implementations hard-code; docs/FORMAT.md "Model config" lists them. */
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/io_internal.h"
#include "io/mlx.h"

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

/* Ranges of the integer sizes a source may give (inclusive). Values are read as 64-bit and a
 * value outside its range is refused naming the key, the value and the range (a 1e12 vocab
 * must not wrap into a negative int). docs/FORMAT.md "Model config". */
#define CFG_MAX_LAYERS 4096
#define CFG_MAX_DIM (1 << 20)     /* hidden size, head_dim, rope dims */
#define CFG_MAX_FFN (1 << 22)     /* MLP intermediate size */
#define CFG_MAX_HEADS 4096        /* query and kv heads */
#define CFG_MAX_VOCAB (1 << 24)   /* 16777216 rows of the embedding */
#define CFG_MAX_INT INT32_MAX     /* windows, patterns */

static tq_status set_int(const char *src, const char *key, int64_t v, int64_t lo, int64_t hi,
                         int *dst)
{
    if (v < lo || v > hi)
        return TQ_FAIL(TQ_E_FORMAT,
                       "%s: %s = %lld is outside the range this engine supports [%lld, %lld]",
                       src, key, (long long)v, (long long)lo, (long long)hi);
    *dst = (int)v;
    return TQ_OK;
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

/* An integer key `<arch>.<suffix>` into *dst when present, range-checked. */
static tq_status gsize(const tq_gguf *g, const char *arch, const char *suffix, int64_t lo,
                       int64_t hi, int *dst)
{
    char key[160];
    int64_t v;
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    if (!gi(g, arch, suffix, &v))
        return TQ_OK;
    return set_int(tq_gguf_path(g), key, v, lo, hi, dst);
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
    if ((st = gsize(g, arch, "block_count", 1, CFG_MAX_LAYERS, &c->n_layers)) ||
        (st = gsize(g, arch, "embedding_length", 1, CFG_MAX_DIM, &c->hidden)) ||
        (st = gsize(g, arch, "feed_forward_length", 1, CFG_MAX_FFN, &c->ffn_hidden)) ||
        (st = gsize(g, arch, "attention.head_count", 1, CFG_MAX_HEADS, &c->n_heads)) ||
        (st = gsize(g, arch, "attention.head_count_kv", 1, CFG_MAX_HEADS, &c->n_kv_heads)) ||
        (st = gsize(g, arch, "attention.key_length", 1, CFG_MAX_DIM, &c->head_dim)) ||
        (st = gsize(g, arch, "rope.dimension_count", 0, CFG_MAX_DIM, &c->rope_dim)) ||
        (st = gsize(g, arch, "attention.sliding_window", 0, CFG_MAX_INT, &c->sliding_window)) ||
        (st = gsize(g, arch, "attention.sliding_window_pattern", 0, CFG_MAX_INT,
                    &c->sliding_window_pattern)) ||
        (st = gsize(g, arch, "vocab_size", 1, CFG_MAX_VOCAB, &c->vocab)))
        return st;
    if (gi(g, arch, "context_length", &v))
        c->max_ctx = v;
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
    if (c->vocab <= 0) {
        int64_t n;
        if (tq_gguf_find_key(g, "tokenizer.ggml.tokens") >= 0 &&
            tq_gguf_get_arr(g, "tokenizer.ggml.tokens", NULL, &n) == TQ_OK &&
            (st = set_int(tq_gguf_path(g), "length of tokenizer.ggml.tokens", n, 1,
                          CFG_MAX_VOCAB, &c->vocab)))
            return st;
    }
    if (tq_gguf_find_key(g, "tokenizer.ggml.bos_token_id") >= 0 &&
        tq_gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &v) == TQ_OK) {
        int id = -1;
        if ((st = set_int(tq_gguf_path(g), "tokenizer.ggml.bos_token_id", v, -1, INT32_MAX, &id)))
            return st;
        c->bos_id = id;
    }
    if (tq_gguf_find_key(g, "tokenizer.ggml.eos_token_id") >= 0 &&
        tq_gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &v) == TQ_OK) {
        int id = -1;
        if ((st = set_int(tq_gguf_path(g), "tokenizer.ggml.eos_token_id", v, -1, INT32_MAX, &id)))
            return st;
        c->eos_id = id;
    }
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
        if (c->vocab <= 0 && ti >= 0 && tq_gguf_tensor(g, ti, &info) == TQ_OK &&
            (st = set_int(tq_gguf_path(g), "rows of token_embd.weight", info.shape[0], 1,
                          CFG_MAX_VOCAB, &c->vocab)))
            return st;
    }
    return finish(c, tq_gguf_path(g));
}

/* ---- config.json ----------------------------------------------------------------------------- */
/* Integer value of key k: 1 (in *v), 0 if absent or not a number, -1 if a number that is not
 * an integer within int64 (2048.5, 1e30). */
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
    if (json_object_is_type(x, json_type_double)) {
        const double d = json_object_get_double(x);
        if (!(d == floor(d)) || !(d >= -9.2e18 && d <= 9.2e18))
            return -1;
        *v = (int64_t)d;
        return 1;
    }
    if (!json_object_is_type(x, json_type_int))
        return 0;
    *v = json_object_get_int64(x); /* json-c clamps beyond int64; the range check refuses it */
    return 1;
}

/* An integer size of config.json into *dst when present, range-checked (see set_int). */
static tq_status jsize(json_object *o, const char *path, const char *k, int64_t lo, int64_t hi,
                       int *dst)
{
    int64_t v;
    const int r = ji(o, k, &v);
    if (r < 0)
        return TQ_FAIL(TQ_E_FORMAT, "%s: %s = %s is not an integer", path, k,
                       json_object_get_string(json_object_object_get(o, k)));
    return r ? set_int(path, k, v, lo, hi, dst) : TQ_OK;
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
    {
        tq_status st;
        if ((st = jsize(o, path, "num_hidden_layers", 1, CFG_MAX_LAYERS, &c->n_layers)) ||
            (st = jsize(o, path, "hidden_size", 1, CFG_MAX_DIM, &c->hidden)) ||
            (st = jsize(o, path, "intermediate_size", 1, CFG_MAX_FFN, &c->ffn_hidden)) ||
            (st = jsize(o, path, "num_attention_heads", 1, CFG_MAX_HEADS, &c->n_heads)) ||
            (st = jsize(o, path, "num_key_value_heads", 1, CFG_MAX_HEADS, &c->n_kv_heads)) ||
            (st = jsize(o, path, "head_dim", 1, CFG_MAX_DIM, &c->head_dim)) || /* never derived */
            (st = jsize(o, path, "vocab_size", 1, CFG_MAX_VOCAB, &c->vocab)) ||
            (st = jsize(o, path, "sliding_window", 0, CFG_MAX_INT, &c->sliding_window)) ||
            (st = jsize(o, path, "sliding_window_pattern", 0, CFG_MAX_INT,
                        &c->sliding_window_pattern)))
            return st;
        json_object *ids = ji(o, "bos_token_id", &v) ? o : root;
        int id = c->bos_id;
        if ((st = jsize(ids, path, "bos_token_id", -1, INT32_MAX, &id)))
            return st;
        c->bos_id = id;
        ids = ji(o, "eos_token_id", &v) ? o : root;
        id = c->eos_id;
        if ((st = jsize(ids, path, "eos_token_id", -1, INT32_MAX, &id)))
            return st;
        c->eos_id = id;
    }
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
    if (c->arch == TQ_ARCH_QWEN2 || c->arch == TQ_ARCH_QWEN3) {
        int use = 0;
        jb(o, "use_sliding_window", &use);
        if (!use)
            c->sliding_window = 0;
    }
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

#define CFG_MAX_JSON (64u << 20) /* a config.json is a few KiB */

/* Parse the JSON text of `path` (n bytes) into *out, with messages that say what is wrong and
 * where: empty, truncated (input ends inside a value, at byte n), or json-c's reason + offset. */
static tq_status parse_json_text(const char *path, const char *text, size_t n, json_object **out)
{
    json_tokener *tok = json_tokener_new();
    json_object *root;
    enum json_tokener_error e;
    size_t ws = 0;
    *out = NULL;
    if (!tok)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    while (ws < n && (text[ws] == ' ' || text[ws] == '\t' || text[ws] == '\n' || text[ws] == '\r'))
        ws++;
    if (ws == n) {
        json_tokener_free(tok);
        return TQ_FAIL(TQ_E_FORMAT, "%s: bad JSON: the file is empty (%zu bytes%s)", path, n,
                       n ? ", all white space" : "");
    }
    root = json_tokener_parse_ex(tok, text, (int)n);
    e = json_tokener_get_error(tok);
    if (!root && e == json_tokener_continue) {
        root = json_tokener_parse_ex(tok, "", 1); /* end of input: completes a bare number */
        e = json_tokener_get_error(tok);
        if (e == json_tokener_continue || (e != json_tokener_success && !root)) {
            json_tokener_free(tok);
            if (root)
                json_object_put(root);
            return TQ_FAIL(TQ_E_FORMAT,
                           "%s: bad JSON: truncated: the file ends at byte %zu inside an "
                           "unfinished value (cut short while being written or copied?)",
                           path, n);
        }
    }
    if (e != json_tokener_success) {
        const size_t at = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (root)
            json_object_put(root);
        return TQ_FAIL(TQ_E_FORMAT, "%s: bad JSON at byte %zu: %s", path, at,
                       json_tokener_error_desc(e));
    }
    for (size_t i = json_tokener_get_parse_end(tok); i < n; i++) {
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r') {
            json_tokener_free(tok);
            if (root)
                json_object_put(root);
            return TQ_FAIL(TQ_E_FORMAT, "%s: bad JSON: trailing bytes after the value at byte %zu",
                           path, i);
        }
    }
    json_tokener_free(tok);
    if (!root)
        return TQ_FAIL(TQ_E_FORMAT, "%s: the JSON value is null, not an object", path);
    *out = root;
    return TQ_OK;
}

tq_status tq_json_parse_file(const char *path, json_object **out)
{
    tq_status st;
    FILE *fp;
    char *text;
    long n;
    *out = NULL;
    if (!(fp = fopen(path, "rb")))
        return TQ_FAIL(TQ_E_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        return TQ_FAIL(TQ_E_IO, "%s: cannot read (not a regular file?)", path);
    }
    if ((unsigned long)n > CFG_MAX_JSON) {
        fclose(fp);
        return TQ_FAIL(TQ_E_FORMAT, "%s: %ld bytes is too large for a config.json (limit %u)",
                       path, n, CFG_MAX_JSON);
    }
    if (!(text = tq_malloc((size_t)n + 1))) {
        fclose(fp);
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    }
    if (fread(text, 1, (size_t)n, fp) != (size_t)n) {
        fclose(fp);
        tq_free(text);
        return TQ_FAIL(TQ_E_IO, "%s: short read (did the file change?)", path);
    }
    fclose(fp);
    text[n] = 0;
    st = parse_json_text(path, text, (size_t)n, out);
    tq_free(text);
    return st;
}

tq_status tq_model_config_from_json(const char *path, tq_model_config *c)
{
    json_object *root;
    tq_status st;
    if (!path || !c)
        return TQ_FAIL(TQ_E_ARG, "tq_model_config_from_json: NULL argument");
    if ((st = tq_json_parse_file(path, &root)))
        return st;
    st = from_json_obj(root, path, c);
    json_object_put(root);
    return st;
}
