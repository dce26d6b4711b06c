/* test_engine_tiny.c -- the forward pass against Hugging Face transformers on tiny random
 * Llama (Llama 3 RoPE scaling), Qwen2 (qkv bias), Qwen3 (q/k norm) and Gemma 3 (sliding window
 * shorter than the prompt, sandwich norms, GELU, embedding scale) models made by
 * tests/ref/make_tiny.py: per-position NMSE of the logits <= 1e-5 with f32 weights and an f32
 * cache (prefill in one call, in chunks, and token by token), identical greedy tokens; then the
 * other weight types and cache schemes within looser bounds, no allocation in a decode step,
 * identical logits for 1 and 2 threads, and clear errors for bad input. */
#include <stdlib.h>
#include <unistd.h>

#include "turboquant.h"
#include "t.h"

#define MAXTOK 64

typedef struct ref {
    int n_tok, n_greedy;
    int32_t tok[MAXTOK], greedy[MAXTOK];
    float *logits; /* (n_tok, vocab) */
} ref;

static int load_ref(const char *dir, int vocab, ref *r)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/ref.txt", dir);
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    int ok = fscanf(f, " tokens %d", &r->n_tok) == 1 && r->n_tok > 0 && r->n_tok <= MAXTOK;
    for (int i = 0; ok && i < r->n_tok; i++)
        ok = fscanf(f, "%d", &r->tok[i]) == 1;
    ok = ok && fscanf(f, " greedy %d", &r->n_greedy) == 1 && r->n_greedy > 0 &&
         r->n_greedy <= MAXTOK;
    for (int i = 0; ok && i < r->n_greedy; i++)
        ok = fscanf(f, "%d", &r->greedy[i]) == 1;
    fclose(f);
    if (!ok)
        return -1;
    snprintf(p, sizeof(p), "%s/logits.bin", dir);
    f = fopen(p, "rb");
    if (!f)
        return -1;
    r->logits = malloc(sizeof(float) * (size_t)r->n_tok * vocab);
    ok = fread(r->logits, sizeof(float), (size_t)r->n_tok * vocab, f) == (size_t)r->n_tok * vocab;
    fclose(f);
    return ok ? 0 : -1;
}

static double nmse(const float *ref, const float *got, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        const double d = (double)got[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

/* worst per-position NMSE of logits (n_tok, vocab) against the reference */
static double worst_nmse(const ref *r, const float *lg, int vocab)
{
    double w = 0;
    for (int t = 0; t < r->n_tok; t++) {
        const double e = nmse(r->logits + (size_t)t * vocab, lg + (size_t)t * vocab, vocab);
        w = e > w ? e : w;
    }
    return w;
}

static tq_session *new_session(tq_model *m, const char *scheme, int n_ctx, int n_batch)
{
    tq_session_opts so;
    tq_session_opts_default(&so);
    if (tq_kv_scheme_parse(scheme, &so.kv) != TQ_OK)
        return NULL;
    so.n_ctx = n_ctx;
    so.n_batch = n_batch;
    tq_session *s = NULL;
    tq_status st = tq_session_create(m, &so, &s);
    if (st)
        printf("session %s: %s: %s\n", scheme, tq_status_str(st), tq_last_error());
    return s;
}

static void check_arch(const char *arch)
{
    char dir[256];
    snprintf(dir, sizeof(dir), "tests/data/tiny/%s", arch);
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_F32;
    mo.n_threads = 1;
    tq_model *m = NULL;
    tq_status st = tq_model_load(dir, &mo, &m);
    CHECK(st == TQ_OK, "%s: load: %s %s", arch, tq_status_str(st), tq_last_error());
    if (st)
        return;
    tq_model_info info;
    CHECK(tq_model_get_info(m, &info) == TQ_OK, "info");
    const int V = info.vocab_size;
    CHECK(V == 256 && info.n_layers == 2 && info.n_heads == 4 && info.n_kv_heads == 2 &&
              info.head_dim == 64, "%s: info vocab %d layers %d heads %d/%d hd %d", arch, V,
          info.n_layers, info.n_heads, info.n_kv_heads, info.head_dim);
    ref r = {0};
    CHECK(load_ref(dir, V, &r) == 0, "%s: cannot read ref.txt/logits.bin", arch);
    if (!r.logits) {
        tq_model_free(m);
        return;
    }
    float *lg = calloc((size_t)MAXTOK * V, sizeof(float));
    float *lg2 = calloc((size_t)MAXTOK * V, sizeof(float));

    /* 1. f32 weights, f32 cache: all prompt positions in one call */
    tq_session *s = new_session(m, "f32", 64, 0);
    CHECK(s != NULL, "%s: session", arch);
    if (!s)
        goto out;
    st = tq_session_eval_all(s, r.tok, r.n_tok, lg, (int64_t)r.n_tok * V);
    CHECK(st == TQ_OK, "%s: eval_all: %s", arch, tq_last_error());
    double e = worst_nmse(&r, lg, V);
    printf("%-6s f32/f32 prefill       worst NMSE %.3g\n", arch, e);
    CHECK(e <= 1e-5, "%s: prefill NMSE %.3g > 1e-5", arch, e);
    CHECK(tq_session_n_past(s) == r.n_tok, "n_past");

    /* 2. greedy continuation, one decode step at a time, no allocation per step */
    float *last = lg2;
    memcpy(last, lg + (size_t)(r.n_tok - 1) * V, sizeof(float) * V);
    int same = 1;
    uint64_t allocs = 0;
    for (int i = 0; i < r.n_greedy; i++) {
        const int32_t next = argmax(last, V);
        same &= next == r.greedy[i];
        if (next != r.greedy[i])
            printf("%s: greedy step %d: got %d, transformers %d\n", arch, i, next, r.greedy[i]);
        const uint64_t a0 = tq_alloc_count();
        st = tq_session_eval(s, &next, 1, last);
        allocs += tq_alloc_count() - a0;
        CHECK(st == TQ_OK, "%s: decode: %s", arch, tq_last_error());
    }
    CHECK(same, "%s: greedy tokens differ from transformers", arch);
    CHECK(allocs == 0, "%s: decode steps allocated %llu times", arch, (unsigned long long)allocs);

    /* 3. the same prompt token by token, and in chunks of 5 (n_batch), after a reset */
    tq_session_reset(s);
    CHECK(tq_session_n_past(s) == 0, "reset");
    for (int t = 0; t < r.n_tok; t++)
        st |= tq_session_eval(s, &r.tok[t], 1, lg2 + (size_t)t * V);
    e = worst_nmse(&r, lg2, V);
    printf("%-6s f32/f32 token by token worst NMSE %.3g\n", arch, e);
    CHECK(st == TQ_OK && e <= 1e-5, "%s: token-by-token NMSE %.3g", arch, e);
    tq_session_free(s);
    s = new_session(m, "f32", 64, 5);
    const uint64_t a1 = tq_alloc_count();
    st = tq_session_eval_all(s, r.tok, r.n_tok, lg2, (int64_t)r.n_tok * V);
    CHECK(tq_alloc_count() == a1, "%s: prefill allocated", arch);
    e = worst_nmse(&r, lg2, V);
    printf("%-6s f32/f32 chunks of 5   worst NMSE %.3g\n", arch, e);
    CHECK(st == TQ_OK && e <= 1e-5, "%s: chunked NMSE %.3g", arch, e);

    /* 4. trim: drop the last 4 tokens, re-evaluate them, same logits */
    CHECK(tq_session_trim(s, 4) == TQ_OK && tq_session_n_past(s) == r.n_tok - 4, "trim");
    st = tq_session_eval_all(s, r.tok + r.n_tok - 4, 4, lg, 4 * (int64_t)V);
    CHECK(st == TQ_OK && nmse(lg2 + (size_t)(r.n_tok - 4) * V, lg, 4 * V) == 0.0,
          "%s: logits after trim differ", arch);
    CHECK(tq_session_trim(s, 1000) == TQ_E_ARG, "trim beyond n_past refused");

    /* 5. bad input: context overflow (nothing appended), token out of range */
    const int64_t np = tq_session_n_past(s);
    int32_t many[64] = {0};
    st = tq_session_eval(s, many, 64 - np + 1, NULL);
    CHECK(st == TQ_E_OVERFLOW, "%s: overflow gave %s", arch, tq_status_str(st));
    printf("overflow message: %s\n", tq_last_error());
    CHECK(tq_session_n_past(s) == np, "overflow changed n_past");
    int32_t bad = V;
    CHECK(tq_session_eval(s, &bad, 1, NULL) == TQ_E_ARG, "token id = vocab refused");
    bad = -1;
    CHECK(tq_session_eval(s, &bad, 1, NULL) == TQ_E_ARG, "token id -1 refused");
    tq_session_free(s);
    tq_session *tiny = new_session(m, "f32", 8, 0);
    CHECK(tiny && tq_session_eval(tiny, r.tok, r.n_tok, NULL) == TQ_E_OVERFLOW,
          "prompt longer than the context refused");
    tq_session_free(tiny);

    /* 6. other cache schemes (looser: they quantize K/V; the random tiny models, gemma3 most,
     * amplify cache error, so kv4 is only bounded loosely) and the ordering more bits -> closer:
     * f16 < bf16 < kv8 < kv4; memory accounting in real bytes */
    static const struct { const char *scheme; double lim; size_t row; } cs[] = {
        {"bf16", 2e-3, 128}, {"f16", 1e-4, 128}, {"kv8", 1e-2, 0}, {"kv4", 2.0, 0}};
    double es[4] = {0};
    for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
        s = new_session(m, cs[i].scheme, 64, 0);
        CHECK(s != NULL, "%s: session %s", arch, cs[i].scheme);
        if (!s)
            continue;
        st = tq_session_eval_all(s, r.tok, r.n_tok, lg2, (int64_t)r.n_tok * V);
        e = es[i] = worst_nmse(&r, lg2, V);
        printf("%-6s f32/%-4s prefill       worst NMSE %.3g\n", arch, cs[i].scheme, e);
        CHECK(st == TQ_OK && e <= cs[i].lim, "%s: cache %s NMSE %.3g > %.g", arch, cs[i].scheme,
              e, cs[i].lim);
        tq_kv_usage u;
        CHECK(tq_session_kv_bytes(s, &u) == TQ_OK, "kv bytes");
        tq_kv_scheme ks;
        size_t kb = 0, vb = 0;
        CHECK(tq_kv_scheme_parse(cs[i].scheme, &ks) == TQ_OK, "parse");
        if (cs[i].row)
            kb = vb = cs[i].row; /* 64 x 2-byte elements */
        else
            CHECK(tq_kv_row_bytes(ks, 64, &kb, &vb) == TQ_OK, "row bytes");
        /* 2 layers x 2 kv heads x (K + V) */
        CHECK(u.bytes_per_token == 2 * 2 * (kb + vb), "%s: %zu bytes per token, expected %zu",
              cs[i].scheme, u.bytes_per_token, 2 * 2 * (kb + vb));
        CHECK(u.bytes_used == u.bytes_per_token * (size_t)r.n_tok &&
                  u.bytes_capacity == u.bytes_per_token * 64, "%s usage", cs[i].scheme);
        tq_session_free(s);
    }

    CHECK(es[1] < es[0] && es[0] < es[2] && es[2] < es[3],
          "%s: cache error not ordered f16 %.3g < bf16 %.3g < kv8 %.3g < kv4 %.3g", arch, es[1],
          es[0], es[2], es[3]);

    /* 7. weight types: bf16 and f16 weights (the files hold bf16 values: bf16 is exact), on 1
     * and 2 threads: the two give identical bytes */
    for (int wt = TQ_DTYPE_F16; wt <= TQ_DTYPE_BF16; wt++) {
        for (int th = 1; th <= 2; th++) {
            tq_model *m2 = NULL;
            tq_model_opts o2 = mo;
            o2.weight_type = (tq_dtype)wt;
            o2.n_threads = th;
            CHECK(tq_model_load(dir, &o2, &m2) == TQ_OK, "%s: load %s", arch,
                  tq_dtype_name((tq_dtype)wt));
            if (!m2)
                continue;
            float *dst = th == 1 ? lg : lg2;
            s = new_session(m2, "f32", 64, 0);
            st = tq_session_eval_all(s, r.tok, r.n_tok, dst, (int64_t)r.n_tok * V);
            e = worst_nmse(&r, dst, V);
            printf("%-6s %-4s/f32 prefill       worst NMSE %.3g (%d threads)\n", arch,
                   tq_dtype_name((tq_dtype)wt), e, th);
            CHECK(st == TQ_OK && e <= (wt == TQ_DTYPE_BF16 ? 1e-5 : 1e-4), "%s: %s weights %.3g",
                  arch, tq_dtype_name((tq_dtype)wt), e);
            if (th == 2)
                CHECK_MEMEQ(lg, lg2, sizeof(float) * (size_t)r.n_tok * V,
                            "%s: %s weights: 1 and 2 threads differ", arch,
                            tq_dtype_name((tq_dtype)wt));
            tq_session_free(s);
            tq_model_free(m2);
        }
    }
out:
    free(lg);
    free(lg2);
    free(r.logits);
    tq_model_free(m);
}

/* a copy of the qwen3 model directory whose config.json is edited by `edit` */
static tq_status load_edited(const char *from, const char *to, const char *key, const char *val,
                             char *msg, size_t cap)
{
    char dir[64] = "/tmp/tq_tiny_XXXXXX", p[512], q[512], line[512];
    if (!mkdtemp(dir))
        return TQ_E_IO;
    snprintf(p, sizeof(p), "%s/config.json", from);
    snprintf(q, sizeof(q), "%s/config.json", dir);
    FILE *fi = fopen(p, "r"), *fo = fopen(q, "w");
    while (fi && fo && fgets(line, sizeof(line), fi)) {
        char pat[128];
        snprintf(pat, sizeof(pat), "\"%s\":", key);
        if (strstr(line, pat))
            fprintf(fo, "  \"%s\": %s,\n", key, val);
        else
            fputs(line, fo);
    }
    if (fi)
        fclose(fi);
    if (fo)
        fclose(fo);
    char src[1024];
    snprintf(p, sizeof(p), "%s/model.safetensors", dir);
    if (!realpath(from, src))
        return TQ_E_IO;
    strncat(src, "/model.safetensors", sizeof(src) - strlen(src) - 1);
    if (symlink(src, p))
        return TQ_E_IO;
    tq_model *m = NULL;
    tq_status st = tq_model_load(dir, NULL, &m);
    snprintf(msg, cap, "%s", tq_last_error());
    tq_model_free(m);
    unlink(p);
    unlink(q);
    rmdir(dir);
    (void)to;
    return st;
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_engine_tiny");
    if (access("tests/data/tiny/llama/model.safetensors", R_OK))
        return t_skip("tests/data/tiny missing (run from the repository root)");
    check_arch("llama");
    check_arch("qwen2");
    check_arch("qwen3");
    check_arch("gemma3");

    /* bad input: missing file, unsupported architecture, shape mismatch against the config */
    tq_model *m = NULL;
    char msg[512];
    CHECK(tq_model_load("tests/data/tiny/nonexistent", NULL, &m) != TQ_OK && m == NULL,
          "missing model refused");
    tq_status st = load_edited("tests/data/tiny/qwen3", NULL, "intermediate_size", "80", msg,
                               sizeof(msg));
    printf("shape mismatch: %s: %s\n", tq_status_str(st), msg);
    CHECK(st == TQ_E_FORMAT && strstr(msg, "mlp.gate_proj.weight") && strstr(msg, "80"),
          "shape mismatch gives TQ_E_FORMAT naming tensor and shapes");
    st = load_edited("tests/data/tiny/qwen3", NULL, "model_type", "\"gpt2\"", msg, sizeof(msg));
    printf("unknown arch: %s: %s\n", tq_status_str(st), msg);
    CHECK(st == TQ_E_UNSUPPORTED, "unknown architecture gives TQ_E_UNSUPPORTED");
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = (tq_dtype)7;
    CHECK(tq_model_load("tests/data/tiny/qwen3", &mo, &m) == TQ_E_ARG, "bad weight type");
    return t_done();
}
