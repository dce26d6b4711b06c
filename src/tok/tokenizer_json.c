/* tokenizer_json.c -- Hugging Face tokenizer.json (+ tokenizer_config.json) -> tq_tokenizer.
 *
 * Supported: model BPE (byte-level vocabulary; "merges" as "a b" strings or [a, b] pairs;
 * ignore_merges), normalizer null / NFC / Sequence of those, pre_tokenizer Split (Regex or
 * String pattern, behavior Isolated), ByteLevel (use_regex adds GPT-2's regex; add_prefix_space),
 * Digits, Sequence; post_processor TemplateProcessing only to learn whether BOS is added.
 * Everything else is refused with TQ_E_UNSUPPORTED naming the type, never guessed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "tok_internal.h"

/* GPT-2's pattern, which ByteLevel(use_regex=true) applies (Hugging Face tokenizers). */
static const char GPT2_RE[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static tq_status read_file(const char *path, char **out, size_t *out_n)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long sz;
    *out = NULL;
    if (!f)
        return TQ_FAIL(TQ_E_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) || (sz = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fclose(f);
        return TQ_FAIL(TQ_E_IO, "%s: cannot seek: %s", path, strerror(errno));
    }
    buf = tq_malloc((size_t)sz + 1);
    if (!buf) {
        fclose(f);
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory for %ld bytes", path, sz);
    }
    if (fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
        fclose(f);
        tq_free(buf);
        return TQ_FAIL(TQ_E_IO, "%s: short read", path);
    }
    fclose(f);
    buf[sz] = 0;
    *out = buf;
    *out_n = (size_t)sz;
    return TQ_OK;
}

static tq_status parse_json(const char *text, size_t n, const char *name, json_object **out)
{
    json_tokener *tk = json_tokener_new_ex(64);
    json_object *root;
    enum json_tokener_error jerr;
    *out = NULL;
    if (!tk)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", name);
    if (n > INT32_MAX) {
        json_tokener_free(tk);
        return TQ_FAIL(TQ_E_FORMAT, "%s: %zu bytes is too large for a JSON file", name, n);
    }
    root = json_tokener_parse_ex(tk, text, (int)n);
    jerr = json_tokener_get_error(tk);
    if (!root && jerr == json_tokener_continue) {
        /* json-c cannot tell "null" or "12" from a prefix until it sees the end: say so */
        root = json_tokener_parse_ex(tk, "", 1);
        jerr = json_tokener_get_error(tk);
        if (jerr == json_tokener_success && !root) {
            json_tokener_free(tk);
            return TQ_FAIL(TQ_E_FORMAT,
                           "%s: valid JSON, but the value is null, not a tokenizer object "
                           "({\"model\": {...}, ...})",
                           name);
        }
    }
    if (!root || jerr != json_tokener_success) {
        size_t at = json_tokener_get_parse_end(tk);
        if (root)
            json_object_put(root);
        json_tokener_free(tk);
        if (jerr == json_tokener_continue)
            return TQ_FAIL(TQ_E_FORMAT,
                           "%s: not valid JSON: %s at byte %zu (truncated?)", name,
                           n ? "the input ends inside an unfinished value" : "the file is empty",
                           n);
        return TQ_FAIL(TQ_E_FORMAT, "%s: not valid JSON (%s at byte %zu)", name,
                       json_tokener_error_desc(jerr), at);
    }
    json_tokener_free(tk);
    if (!json_object_is_type(root, json_type_object)) {
        const char *what = json_type_to_name(json_object_get_type(root));
        json_object_put(root);
        return TQ_FAIL(TQ_E_FORMAT, "%s: valid JSON, but the value is a%s %s, not a tokenizer "
                       "object ({\"model\": {...}, ...})", name,
                       what && strchr("aeiou", what[0]) ? "n" : "", what ? what : "?");
    }
    *out = root;
    return TQ_OK;
}

static json_object *field(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return json_object_is_type(v, json_type_null) ? NULL : v;
}

static const char *field_str(json_object *o, const char *key)
{
    json_object *v = field(o, key);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static int field_bool(json_object *o, const char *key, int dflt)
{
    json_object *v = field(o, key);
    return v && json_object_is_type(v, json_type_boolean) ? json_object_get_boolean(v) : dflt;
}

/* A special-token entry of tokenizer_config.json: "text" or {"content": "text", ...}. */
static const char *token_text(json_object *v)
{
    if (!v)
        return NULL;
    if (json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return field_str(v, "content");
}

static tq_status add_pre(tq_tokenizer *t, json_object *p, int depth)
{
    const char *type = field_str(p, "type");
    if (depth > 4)
        return TQ_FAIL(TQ_E_FORMAT, "%s: pre_tokenizer nested too deeply", t->name);
    if (!type)
        return TQ_FAIL(TQ_E_FORMAT, "%s: pre_tokenizer without a \"type\" string", t->name);
    if (!strcmp(type, "Sequence")) {
        json_object *arr = field(p, "pretokenizers");
        tq_status st;
        if (!arr || !json_object_is_type(arr, json_type_array))
            return TQ_FAIL(TQ_E_FORMAT, "%s: pre_tokenizer Sequence without a pretokenizers array",
                           t->name);
        for (size_t i = 0; i < json_object_array_length(arr); i++)
            if ((st = add_pre(t, json_object_array_get_idx(arr, i), depth + 1)))
                return st;
        return TQ_OK;
    }
    if (!strcmp(type, "Split")) {
        json_object *pat = field(p, "pattern");
        const char *behavior = field_str(p, "behavior");
        const char *re = field_str(pat, "Regex"), *lit = field_str(pat, "String");
        if (field_bool(p, "invert", 0) || !behavior || strcmp(behavior, "Isolated"))
            return TQ_FAIL(TQ_E_UNSUPPORTED,
                           "%s: pre_tokenizer Split with behavior %s%s (supported: Isolated, "
                           "invert false)",
                           t->name, behavior ? behavior : "(missing)",
                           field_bool(p, "invert", 0) ? " and invert true" : "");
        if (re)
            return tok_add_regex(t, re);
        if (lit) {
            char buf[512];
            if (strlen(lit) + 5 > sizeof(buf) || strstr(lit, "\\E"))
                return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: Split String pattern too long", t->name);
            snprintf(buf, sizeof(buf), "\\Q%s\\E", lit);
            return tok_add_regex(t, buf);
        }
        return TQ_FAIL(TQ_E_FORMAT, "%s: pre_tokenizer Split without pattern.Regex/String",
                       t->name);
    }
    if (!strcmp(type, "ByteLevel")) {
        t->prefix_space = field_bool(p, "add_prefix_space", 0);
        return field_bool(p, "use_regex", 1) ? tok_add_regex(t, GPT2_RE) : TQ_OK;
    }
    if (!strcmp(type, "Digits"))
        return tok_add_regex(t, field_bool(p, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+");
    return TQ_FAIL(TQ_E_UNSUPPORTED,
                   "%s: pre_tokenizer type \"%s\" (supported: Split, ByteLevel, Digits, Sequence)",
                   t->name, type);
}

static tq_status set_normalizer(tq_tokenizer *t, json_object *n, int depth)
{
    const char *type;
    if (!n)
        return TQ_OK;
    type = field_str(n, "type");
    if (type && !strcmp(type, "NFC")) {
        t->nfc = 1;
        return TQ_OK;
    }
    if (type && !strcmp(type, "Sequence") && depth < 4) {
        json_object *arr = field(n, "normalizers");
        tq_status st;
        if (!arr || !json_object_is_type(arr, json_type_array))
            return TQ_FAIL(TQ_E_FORMAT, "%s: normalizer Sequence without a normalizers array",
                           t->name);
        for (size_t i = 0; i < json_object_array_length(arr); i++)
            if ((st = set_normalizer(t, json_object_array_get_idx(arr, i), depth + 1)))
                return st;
        return TQ_OK;
    }
    return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: normalizer type \"%s\" (supported: null, NFC, Sequence)",
                   t->name, type ? type : "(missing)");
}

/* get_id() -- integer id field in [0, 2^24). */
static bool get_id(json_object *v, int32_t *out)
{
    int64_t x;
    if (!v || !json_object_is_type(v, json_type_int))
        return false;
    x = json_object_get_int64(v);
    if (x < 0 || x >= (1 << 24))
        return false;
    *out = (int32_t)x;
    return true;
}

static tq_status load_merges(tq_tokenizer *t, json_object *merges)
{
    int64_t skipped = 0;
    const size_t n = json_object_array_length(merges);
    tq_status st;
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(merges, i);
        const char *a, *b;
        size_t an, bn;
        if (json_object_is_type(m, json_type_string)) {
            const char *s = json_object_get_string(m);
            const char *sp = strchr(s, ' ');
            if (!sp)
                return TQ_FAIL(TQ_E_FORMAT, "%s: model.merges[%zu] \"%.40s\" has no space", t->name,
                               i, s);
            a = s;
            an = (size_t)(sp - s);
            b = sp + 1;
            bn = strlen(b);
        } else if (json_object_is_type(m, json_type_array) && json_object_array_length(m) == 2 &&
                   json_object_is_type(json_object_array_get_idx(m, 0), json_type_string) &&
                   json_object_is_type(json_object_array_get_idx(m, 1), json_type_string)) {
            json_object *ja = json_object_array_get_idx(m, 0),
                        *jb = json_object_array_get_idx(m, 1);
            a = json_object_get_string(ja);
            an = (size_t)json_object_get_string_len(ja);
            b = json_object_get_string(jb);
            bn = (size_t)json_object_get_string_len(jb);
        } else {
            return TQ_FAIL(TQ_E_FORMAT,
                           "%s: model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", t->name,
                           i);
        }
        if ((st = tok_add_merge(t, a, an, b, bn, &skipped)))
            return st;
    }
    if (skipped)
        tq_log(TQ_LOG_WARN, "%s: %lld merges refer to tokens not in the vocabulary (ignored)",
               t->name, (long long)skipped);
    return TQ_OK;
}

static int32_t find_any(const tq_tokenizer *t, const char *const *names)
{
    for (; *names; names++) {
        int32_t id = tok_find(t, *names, strlen(*names));
        if (id >= 0)
            return id;
    }
    return -1;
}

/* apply_config() -- bos/eos/add_bos/chat template from tokenizer_config.json (may be NULL). */
static tq_status apply_config(tq_tokenizer *t, json_object *cfg)
{
    static const char *const eot_names[] = {"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>",
                                            NULL};
    static const char *const eos_names[] = {"<|end_of_text|>", "<|endoftext|>", "</s>", NULL};
    const char *s;
    json_object *ct = field(cfg, "chat_template");
    if ((s = token_text(field(cfg, "bos_token"))) && tok_find(t, s, strlen(s)) >= 0)
        t->bos = tok_find(t, s, strlen(s));
    if ((s = token_text(field(cfg, "eos_token"))) && tok_find(t, s, strlen(s)) >= 0)
        t->eos = tok_find(t, s, strlen(s));
    if ((s = token_text(field(cfg, "unk_token"))) && tok_find(t, s, strlen(s)) >= 0)
        t->unk = tok_find(t, s, strlen(s));
    if (field(cfg, "add_bos_token"))
        t->add_bos = field_bool(cfg, "add_bos_token", 0);
    if (t->eos < 0)
        t->eos = find_any(t, eos_names);
    t->eot = find_any(t, eot_names);
    if (t->eot < 0)
        t->eot = t->eos;
    if (ct && json_object_is_type(ct, json_type_array)) { /* [{"name":..,"template":..}] */
        json_object *pick = NULL;
        for (size_t i = 0; i < json_object_array_length(ct); i++) {
            json_object *e = json_object_array_get_idx(ct, i);
            const char *nm = field_str(e, "name");
            if (!pick || (nm && !strcmp(nm, "default")))
                pick = e;
        }
        ct = field(pick, "template");
    }
    if (ct && json_object_is_type(ct, json_type_string)) {
        t->chat_template = tq_strdup(json_object_get_string(ct));
        if (!t->chat_template)
            return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", t->name);
    }
    return TQ_OK;
}

static tq_status build(json_object *root, json_object *cfg, const char *name, tq_tokenizer **out)
{
    json_object *model = field(root, "model"), *vocab = field(model, "vocab");
    json_object *merges = field(model, "merges"), *added = field(root, "added_tokens");
    json_object *post = field(root, "post_processor");
    const char *mtype = field_str(model, "type");
    tq_tokenizer *t = NULL;
    int32_t n_vocab = 0;
    tq_status st;

    *out = NULL;
    if (!json_object_is_type(root, json_type_object))
        return TQ_FAIL(TQ_E_FORMAT, "%s: top level is not a JSON object", name);
    if (!model)
        return TQ_FAIL(TQ_E_FORMAT, "%s: no \"model\" object", name);
    if (mtype && strcmp(mtype, "BPE"))
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: model type \"%s\" (supported: BPE)", name, mtype);
    if (!vocab || !json_object_is_type(vocab, json_type_object))
        return TQ_FAIL(TQ_E_FORMAT, "%s: model.vocab is missing or not an object", name);
    if (!merges || !json_object_is_type(merges, json_type_array))
        return TQ_FAIL(TQ_E_FORMAT, "%s: model.merges is missing or not an array", name);
    if (field_bool(model, "byte_fallback", 0))
        return TQ_FAIL(TQ_E_UNSUPPORTED,
                       "%s: BPE with byte_fallback (SentencePiece-converted) is not supported; "
                       "load the model's GGUF instead",
                       name);
    if (added && !json_object_is_type(added, json_type_array))
        return TQ_FAIL(TQ_E_FORMAT, "%s: added_tokens is not an array", name);

    /* Vocabulary size: one past the largest id in vocab and added_tokens. */
    {
        json_object_object_foreach(vocab, key, val)
        {
            int32_t id;
            (void)key;
            if (!get_id(val, &id))
                return TQ_FAIL(TQ_E_FORMAT, "%s: model.vocab[\"%.40s\"] is not an id in [0, 2^24)",
                               name, key);
            if (id >= n_vocab)
                n_vocab = id + 1;
        }
    }
    for (size_t i = 0; added && i < json_object_array_length(added); i++) {
        json_object *a = json_object_array_get_idx(added, i);
        int32_t id;
        if (!get_id(field(a, "id"), &id) || !field_str(a, "content") || !*field_str(a, "content"))
            return TQ_FAIL(TQ_E_FORMAT,
                           "%s: added_tokens[%zu] needs an \"id\" in [0, 2^24) and a non-empty "
                           "\"content\" string",
                           name, i);
        if (id >= n_vocab)
            n_vocab = id + 1;
    }
    if ((st = tok_create(TOK_BPE, n_vocab, name, &t)))
        return st;
    {
        json_object_object_foreach(vocab, key, val)
        {
            int32_t id = 0;
            get_id(val, &id);
            if ((st = tok_set_token(t, id, key, strlen(key), TOKT_NORMAL, 1)))
                goto fail;
        }
    }
    for (size_t i = 0; added && i < json_object_array_length(added); i++) {
        json_object *a = json_object_array_get_idx(added, i), *c = field(a, "content");
        const char *s = json_object_get_string(c);
        size_t n = (size_t)json_object_get_string_len(c);
        int32_t id = 0;
        get_id(field(a, "id"), &id);
        if (t->type[id] == TOKT_NONE) {
            if ((st = tok_set_token(t, id, s, n, TOKT_USER, 0)))
                goto fail;
        } /* else: the added token is also in the vocabulary; the vocabulary text stays */
        t->type[id] = field_bool(a, "special", 0) ? TOKT_CONTROL : TOKT_USER;
        t->tflag[id] = (uint8_t)(TOKF_ADDED | (field_bool(a, "lstrip", 0) ? TOKF_LSTRIP : 0) |
                                 (field_bool(a, "rstrip", 0) ? TOKF_RSTRIP : 0));
    }
    if ((st = tok_finish_vocab(t)))
        goto fail;
    if ((st = load_merges(t, merges)))
        goto fail;
    t->ignore_merges = field_bool(model, "ignore_merges", 0);
    if ((st = set_normalizer(t, field(root, "normalizer"), 0)))
        goto fail;
    if (field(root, "pre_tokenizer") && (st = add_pre(t, field(root, "pre_tokenizer"), 0)))
        goto fail;
    /* BOS: TemplateProcessing whose "single" starts with a special token. */
    if (post && field_str(post, "type") && !strcmp(field_str(post, "type"), "TemplateProcessing")) {
        json_object *single = field(post, "single");
        json_object *first = single && json_object_is_type(single, json_type_array) &&
                                     json_object_array_length(single) > 0
                                 ? json_object_array_get_idx(single, 0)
                                 : NULL;
        const char *id = field_str(field(first, "SpecialToken"), "id");
        if (id && tok_find(t, id, strlen(id)) >= 0) {
            t->bos = tok_find(t, id, strlen(id));
            t->add_bos = 1;
        }
    }
    if ((st = apply_config(t, cfg)))
        goto fail;
    if ((st = tok_finish(t)))
        goto fail;
    *out = t;
    return TQ_OK;
fail:
    tq_tokenizer_free(t);
    return st;
}

tq_status tq_tokenizer_from_json_memory(const char *json, size_t len, const char *name,
                                        tq_tokenizer **out)
{
    json_object *root;
    tq_status st;
    if (!out || (!json && len))
        return TQ_FAIL(TQ_E_ARG, "tq_tokenizer_from_json_memory: NULL argument");
    *out = NULL;
    if (!name)
        name = "tokenizer.json";
    if ((st = parse_json(json ? json : "", len, name, &root)))
        return st;
    st = build(root, NULL, name, out);
    json_object_put(root);
    return st;
}

tq_status tq_tokenizer_from_json(const char *path, tq_tokenizer **out)
{
    char *text = NULL, *cfg_text = NULL, *cfg_path = NULL;
    size_t n = 0, cfg_n = 0;
    json_object *root = NULL, *cfg = NULL;
    tq_status st;
    if (!path || !out)
        return TQ_FAIL(TQ_E_ARG, "tq_tokenizer_from_json: NULL path/out");
    *out = NULL;
    if ((st = read_file(path, &text, &n)))
        return st;
    if ((st = parse_json(text, n, path, &root)))
        goto out;
    /* tokenizer_config.json beside it (optional; a broken one is an error). */
    {
        const char *slash = strrchr(path, '/');
        size_t dir = slash ? (size_t)(slash - path + 1) : 0;
        cfg_path = tq_malloc(dir + sizeof("tokenizer_config.json"));
        if (!cfg_path) {
            st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
            goto out;
        }
        memcpy(cfg_path, path, dir);
        memcpy(cfg_path + dir, "tokenizer_config.json", sizeof("tokenizer_config.json"));
        if (read_file(cfg_path, &cfg_text, &cfg_n) == TQ_OK) {
            if ((st = parse_json(cfg_text, cfg_n, cfg_path, &cfg)))
                goto out;
        } else {
            tq_clear_error();
        }
    }
    st = build(root, cfg, path, out);
out:
    if (cfg)
        json_object_put(cfg);
    if (root)
        json_object_put(root);
    tq_free(cfg_text);
    tq_free(cfg_path);
    tq_free(text);
    return st;
}
