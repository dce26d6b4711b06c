/* tokenizer_gguf.c -- tokenizer from GGUF metadata (tokenizer.ggml.*), and tq_tokenizer_load().
 *
 * Keys: model ("gpt2" = byte-level BPE, "llama" = SentencePiece-style), tokens, token_type,
 * scores, merges, pre, bos/eos/eot/unknown_token_id, add_bos_token, add_space_prefix,
 * tokenizer.chat_template. The pre-tokenizer regex lists per tokenizer.ggml.pre name are data taken
 * from llama.cpp's src/llama-vocab.cpp (llm_tokenizer_bpe; MIT, the ggml authors), together with
 * the per-name ignore_merges / add_bos defaults it sets.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tok_internal.h"

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                                  \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"     \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                   \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"     \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct pre_entry {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    const char *re[4];
    int ignore_merges;
    int add_bos;
} pre_entry;

static const pre_entry pre_table[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, 0, 0},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2", {RE_LLAMA3}, 1, 1},
    {"dbrx|smaug-bpe|chatglm-bpe|glm4", {RE_LLAMA3}, 0, 0},
    {"qwen2|deepseek-r1-qwen|stablelm2|megrez|hunyuan|kormo", {RE_QWEN2}, 0, 0},
    {"smollm|starcoder|refact|command-r|codeshell|exaone|minerva-7b", {"\\p{N}", RE_GPT2}, 0, 0},
    {"gpt-2|gpt2|phi-2|mpt|olmo|jais|jina-es|jina-de|exaone4|trillion|granite-docling",
     {RE_GPT2},
     0,
     0},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, 0, 0},
};

static bool name_in(const char *names, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !memcmp(p, name, n))
            return true;
        if (!bar)
            break;
        p = bar + 1;
    }
    return false;
}

static const pre_entry *pre_find(const char *pre)
{
    for (size_t i = 0; i < sizeof(pre_table) / sizeof(pre_table[0]); i++)
        if (name_in(pre_table[i].names, pre))
            return &pre_table[i];
    return NULL;
}

const char *const *tok_regex_for_pre(const char *pre, int *n)
{
    const pre_entry *e = pre_find(pre);
    if (!e)
        return NULL;
    for (*n = 0; *n < 4 && e->re[*n]; (*n)++)
        ;
    return e->re;
}

static int32_t get_id(const tq_gguf *g, const char *key, int32_t n_vocab)
{
    int64_t v;
    if (tq_gguf_find_key(g, key) < 0 || tq_gguf_get_i64(g, key, &v) || v < 0 || v >= n_vocab) {
        tq_clear_error();
        return -1;
    }
    return (int32_t)v;
}

static int get_flag(const tq_gguf *g, const char *key, int dflt)
{
    int v;
    if (tq_gguf_find_key(g, key) < 0)
        return dflt;
    if (tq_gguf_get_bool(g, key, &v)) {
        tq_clear_error();
        return dflt;
    }
    return v;
}

tq_status tq_tokenizer_from_gguf(const tq_gguf *g, tq_tokenizer **out)
{
    const char *name, *model = NULL, *pre = NULL, *tmpl = NULL;
    int elem = 0;
    int64_t n = 0;
    tq_tokenizer *t = NULL;
    int32_t *types = NULL;
    float *scores = NULL;
    tq_status st;
    tok_kind kind;

    if (!g || !out)
        return TQ_FAIL(TQ_E_ARG, "tq_tokenizer_from_gguf: NULL argument");
    *out = NULL;
    name = tq_gguf_path(g) ? tq_gguf_path(g) : "gguf";
    if (tq_gguf_find_key(g, "tokenizer.ggml.model") < 0)
        return TQ_FAIL(TQ_E_FORMAT, "%s: no tokenizer.ggml.model key (no embedded tokenizer)",
                       name);
    if ((st = tq_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL)))
        return st;
    if (!strcmp(model, "gpt2"))
        kind = TOK_BPE;
    else if (!strcmp(model, "llama"))
        kind = TOK_SPM;
    else
        return TQ_FAIL(TQ_E_UNSUPPORTED,
                       "%s: tokenizer.ggml.model \"%s\" (supported: gpt2 = byte-level BPE, llama = "
                       "SentencePiece-style)",
                       name, model);
    if (tq_gguf_find_key(g, "tokenizer.ggml.tokens") < 0)
        return TQ_FAIL(TQ_E_FORMAT,
                       "%s: tokenizer.ggml.model is \"%s\" but tokenizer.ggml.tokens "
                       "is missing",
                       name, model);
    if ((st = tq_gguf_get_arr(g, "tokenizer.ggml.tokens", &elem, &n)))
        return st;
    if (elem != TQ_GGUF_STRING || n <= 0 || n > (1 << 24))
        return TQ_FAIL(TQ_E_FORMAT, "%s: tokenizer.ggml.tokens must be 1..2^24 strings", name);
    if ((st = tok_create(kind, (int32_t)n, name, &t)))
        return st;
    types = tq_malloc((size_t)n * sizeof(int32_t));
    if (!types) {
        st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    for (int64_t i = 0; i < n; i++)
        types[i] = TOKT_NORMAL;
    if (tq_gguf_find_key(g, "tokenizer.ggml.token_type") >= 0 &&
        (st = tq_gguf_get_arr_i32(g, "tokenizer.ggml.token_type", types, n)))
        goto fail;
    if (kind == TOK_SPM) {
        scores = tq_calloc((size_t)n, sizeof(float));
        if (!scores) {
            st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", name);
            goto fail;
        }
        if (tq_gguf_find_key(g, "tokenizer.ggml.scores") >= 0 &&
            (st = tq_gguf_get_arr_f32(g, "tokenizer.ggml.scores", scores, n)))
            goto fail;
    }
    for (int64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        int ty = types[i] >= TOKT_NORMAL && types[i] <= TOKT_BYTE ? types[i] : TOKT_NORMAL;
        if ((st = tq_gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &s, &len)))
            goto fail;
        if ((st = tok_set_token(t, (int32_t)i, s, len, ty, ty == TOKT_NORMAL)))
            goto fail;
        if (ty == TOKT_CONTROL || ty == TOKT_USER)
            t->tflag[i] = TOKF_ADDED;
        if (scores)
            t->score[i] = scores[i];
    }
    if ((st = tok_finish_vocab(t)))
        goto fail;

    if (kind == TOK_BPE) {
        const pre_entry *pe;
        int64_t n_merges = 0, skipped = 0;
        if (tq_gguf_find_key(g, "tokenizer.ggml.pre") >= 0 &&
            (st = tq_gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL)))
            goto fail;
        if (!pre)
            pre = "default";
        if (!(pe = pre_find(pre))) {
            st = TQ_FAIL(TQ_E_UNSUPPORTED,
                         "%s: tokenizer.ggml.pre \"%s\" is not known (known: default, llama-bpe, "
                         "qwen2, smollm, gpt2, falcon, dbrx and their aliases)",
                         name, pre);
            goto fail;
        }
        for (int i = 0; i < 4 && pe->re[i]; i++)
            if ((st = tok_add_regex(t, pe->re[i])))
                goto fail;
        t->ignore_merges = pe->ignore_merges;
        t->add_bos = pe->add_bos;
        if (tq_gguf_find_key(g, "tokenizer.ggml.merges") < 0) {
            st = TQ_FAIL(TQ_E_FORMAT, "%s: byte-level BPE vocabulary without tokenizer.ggml.merges",
                         name);
            goto fail;
        }
        if ((st = tq_gguf_get_arr(g, "tokenizer.ggml.merges", &elem, &n_merges)))
            goto fail;
        if (elem != TQ_GGUF_STRING) {
            st = TQ_FAIL(TQ_E_FORMAT, "%s: tokenizer.ggml.merges is not a string array", name);
            goto fail;
        }
        for (int64_t i = 0; i < n_merges; i++) {
            const char *s, *sp;
            size_t len;
            if ((st = tq_gguf_get_arr_str(g, "tokenizer.ggml.merges", i, &s, &len)))
                goto fail;
            sp = memchr(s, ' ', len);
            if (!sp) {
                st = TQ_FAIL(TQ_E_FORMAT, "%s: tokenizer.ggml.merges[%lld] has no space", name,
                             (long long)i);
                goto fail;
            }
            if ((st = tok_add_merge(t, s, (size_t)(sp - s), sp + 1, len - (size_t)(sp - s) - 1,
                                    &skipped)))
                goto fail;
        }
        if (skipped)
            tq_log(TQ_LOG_WARN, "%s: %lld merges refer to tokens not in the vocabulary (ignored)",
                   name, (long long)skipped);
    } else {
        t->add_bos = 1;
        t->spm_space_prefix = 1;
    }
    t->add_bos = get_flag(g, "tokenizer.ggml.add_bos_token", t->add_bos);
    if (kind == TOK_SPM)
        t->spm_space_prefix = get_flag(g, "tokenizer.ggml.add_space_prefix", 1);
    t->bos = get_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab);
    t->eos = get_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab);
    t->unk = get_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab);
    t->eot = get_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab);
    if (t->eot < 0) {
        static const char *const eot_names[] = {"<|eot_id|>", "<|im_end|>", "<end_of_turn>",
                                                "<|end|>"};
        for (size_t i = 0; i < 4 && t->eot < 0; i++)
            t->eot = tok_find(t, eot_names[i], strlen(eot_names[i]));
        if (t->eot < 0)
            t->eot = t->eos;
    }
    if (tq_gguf_find_key(g, "tokenizer.chat_template") >= 0 &&
        tq_gguf_get_str(g, "tokenizer.chat_template", &tmpl, NULL) == TQ_OK) {
        if (!(t->chat_template = tq_strdup(tmpl))) {
            st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", name);
            goto fail;
        }
    }
    tq_clear_error();
    if ((st = tok_finish(t)))
        goto fail;
    tq_free(types);
    tq_free(scores);
    *out = t;
    return TQ_OK;
fail:
    tq_free(types);
    tq_free(scores);
    tq_tokenizer_free(t);
    return st;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* A GGUF file by its magic, whatever its name (issue 10). */
static bool has_gguf_magic(const char *path)
{
    char m[4];
    FILE *f = fopen(path, "rb");
    const bool yes = f && fread(m, 1, 4, f) == 4 && !memcmp(m, "GGUF", 4);
    if (f)
        fclose(f);
    return yes;
}

tq_status tq_tokenizer_load(const char *path, tq_tokenizer **out)
{
    size_t n;
    if (!path || !out)
        return TQ_FAIL(TQ_E_ARG, "tq_tokenizer_load: NULL path/out");
    *out = NULL;
    n = strlen(path);
    if (ends_with(path, ".gguf") || has_gguf_magic(path)) {
        tq_gguf *g = NULL;
        tq_status st = tq_gguf_open(path, &g);
        if (st)
            return st;
        st = tq_tokenizer_from_gguf(g, out);
        tq_gguf_free(g);
        return st;
    }
    {
        struct stat sb;
        const char *slash = strrchr(path, '/');
        size_t dir = n;
        char *p;
        tq_status st;
        /* weights or config of a Hugging Face directory: its tokenizer.json */
        bool sibling = ends_with(path, ".safetensors") ||
                       ends_with(path, ".safetensors.index.json") ||
                       !strcmp(slash ? slash + 1 : path, "config.json");
        if (sibling)
            dir = slash ? (size_t)(slash - path) : 0;
        else if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return tq_tokenizer_from_json(path, out); /* also reports a missing file */
        p = tq_malloc(dir + sizeof("./tokenizer.json"));
        if (!p)
            return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
        if (dir) {
            memcpy(p, path, dir);
            memcpy(p + dir, "/tokenizer.json", sizeof("/tokenizer.json"));
        } else {
            memcpy(p, sibling && slash ? "/tokenizer.json" : "tokenizer.json",
                   sibling && slash ? sizeof("/tokenizer.json") : sizeof("tokenizer.json"));
        }
        st = tq_tokenizer_from_json(p, out);
        tq_free(p);
        return st;
    }
}
