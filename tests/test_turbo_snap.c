/* test_turbo_snap.c -- KV cache snapshots on the tiny random models (tests/data/tiny, head_dim
 * 64): save -> restore -> continue gives the same greedy tokens as never saving (turbo k8v3,
 * turbo k4v3+rk, kv8, bf16); a file of another scheme or another model, a truncated file, a
 * corrupted byte (payload and header) and trailing junk are refused, and the live cache and
 * n_past are untouched by a refused load. Plus the turbo cache through the whole engine: the
 * fused and the dequantize-window attention give the same greedy tokens. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/engine.h"
#include "model/kvcache_turbo.h"
#include "t.h"

#define NP 12 /* prompt tokens */
#define NG 24 /* generated     */

static tq_session *mk_attn(tq_model *m, const char *kv, int ctx, tq_turbo_attn attn)
{
    tq_session_opts o;
    tq_session_opts_default(&o);
    o.turbo_attn = attn;
    if (tq_kv_scheme_parse(kv, &o.kv))
        return NULL;
    o.n_ctx = ctx;
    o.n_batch = 8; /* the prompt goes through in two chunks */
    tq_session *s = NULL;
    if (tq_session_create(m, &o, &s))
        printf("session %s: %s\n", kv, tq_last_error());
    return s;
}

static tq_session *mk(tq_model *m, const char *kv, int ctx)
{
    return mk_attn(m, kv, ctx, TQ_TURBO_ATTN_FUSED);
}

static int argmax(const float *x, int n)
{
    int a = 0;
    for (int i = 1; i < n; i++)
        a = x[i] > x[a] ? i : a;
    return a;
}

/* greedy continuation of NG tokens from the session's state; first = logits of the last token */
static void greedy(tq_session *s, float *lg, int V, int32_t *out)
{
    for (int i = 0; i < NG; i++) {
        out[i] = argmax(lg, V);
        tq_session_eval(s, &out[i], 1, lg);
    }
}

static long fsize(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void flip_byte(const char *src, const char *dst, long off, long trunc_to, int junk)
{
    FILE *f = fopen(src, "rb");
    long n = fsize(src);
    unsigned char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n)
        n = 0;
    fclose(f);
    if (off >= 0 && off < n)
        b[off] ^= 0x20;
    if (trunc_to >= 0)
        n = trunc_to;
    if (junk)
        b[n++] = 0;
    f = fopen(dst, "wb");
    fwrite(b, 1, (size_t)n, f);
    fclose(f);
    free(b);
}

static void roundtrip(tq_model *m, const char *kv, int V, const int32_t *prompt, const char *path)
{
    float *lg = malloc((size_t)V * sizeof(float));
    int32_t ref[NG], got[NG], ids[64];
    int64_t nids = -1;
    /* never saved */
    tq_session *a = mk(m, kv, 64);
    CHECK(a != NULL, "%s: session", kv);
    if (!a)
        return;
    tq_session_eval(a, prompt, NP, lg);
    greedy(a, lg, V, ref);
    /* saved after the prompt, restored in a fresh session, continued */
    tq_session *b = mk(m, kv, 64), *c = mk(m, kv, 64);
    tq_session_eval(b, prompt, NP, lg);
    CHECK(tq_session_save(b, prompt, NP, path) == TQ_OK, "%s: save: %s", kv, tq_last_error());
    CHECK(access(path, R_OK) == 0, "file exists");
    CHECK(tq_session_load(c, path, ids, 64, &nids) == TQ_OK, "%s: load: %s", kv, tq_last_error());
    CHECK(nids == NP && !memcmp(ids, prompt, sizeof(int32_t) * NP), "%s: prompt ids back", kv);
    CHECK(tq_session_n_past(c) == NP, "%s: n_past %lld", kv, (long long)tq_session_n_past(c));
    /* continue: re-evaluate the last prompt token after trimming it (its logits are not stored) */
    tq_session_trim(c, 1);
    tq_session_eval(c, prompt + NP - 1, 1, lg);
    greedy(c, lg, V, got);
    CHECK(!memcmp(ref, got, sizeof(ref)), "%s: restored continuation == never saved", kv);
    tq_session_free(a);
    tq_session_free(b);
    tq_session_free(c);
    free(lg);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_turbo_snap");
    if (access("tests/data/tiny/llama/model.safetensors", R_OK))
        return t_skip("tests/data/tiny missing (run from the repository root)");
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = 2;
    tq_model *m = NULL, *m2 = NULL;
    CHECK(tq_model_load("tests/data/tiny/llama", &mo, &m) == TQ_OK, "load: %s", tq_last_error());
    CHECK(tq_model_load("tests/data/tiny/qwen2", &mo, &m2) == TQ_OK, "load 2");
    if (!m || !m2)
        return t_done();
    tq_model_info info;
    tq_model_get_info(m, &info);
    const int V = info.vocab_size;
    int32_t prompt[NP];
    for (int i = 0; i < NP; i++)
        prompt[i] = (int32_t)((t_seed + 37u * (unsigned)i) % (unsigned)V);
    char path[64], bad[80];
    snprintf(path, sizeof path, "/tmp/tq_snap_%d.kv", (int)getpid());
    snprintf(bad, sizeof bad, "%s.bad", path);

    roundtrip(m, "bf16", V, prompt, path);
    roundtrip(m, "kv8", V, prompt, path);
    roundtrip(m, "turbo:k4v3+rk", V, prompt, path);
    roundtrip(m, "turbo", V, prompt, path); /* leaves a turbo-k8v3 snapshot in path */

    /* refusals leave the live session untouched */
    float *lg = malloc((size_t)V * sizeof(float));
    tq_session *live = mk(m, "turbo", 64);
    tq_session_eval(live, prompt, 5, lg);
    tq_kvcache *kc = live->kv;
    const size_t kbytes = kc->k_row_bytes * (size_t)kc->n_ctx * kc->n_kv_heads;
    uint8_t *before = malloc(kbytes);
    memcpy(before, kc->k[0], kbytes);
    const long n = fsize(path);
    struct {
        const char *what;
        long off, trunc;
        int junk;
        tq_status want;
        const char *msg;
    } cases[] = {
        {"payload byte", n - 7, -1, 0, TQ_E_FORMAT, "checksum"},
        {"token id byte", 128 + 2, -1, 0, TQ_E_FORMAT, "checksum"},
        {"header count", 64, -1, 0, TQ_E_FORMAT, "differ"},
        {"magic", 1, -1, 0, TQ_E_FORMAT, "magic"},
        {"version", 8, -1, 0, TQ_E_FORMAT, "version"},
        {"truncated payload", -1, n - 100, 0, TQ_E_FORMAT, "truncated"},
        {"truncated header", -1, 60, 0, TQ_E_FORMAT, "truncated"},
        {"trailing junk", -1, -1, 1, TQ_E_FORMAT, "trailing"},
        {"scheme key", 16 + 7, -1, 0, TQ_E_UNSUPPORTED, "turbo-k8v3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        flip_byte(path, bad, cases[i].off, cases[i].trunc, cases[i].junk);
        tq_status st = tq_session_load(live, bad, NULL, 0, NULL);
        CHECK(st == cases[i].want && strstr(tq_last_error(), cases[i].msg),
              "%s: refused with %s: %s", cases[i].what, tq_status_str(st), tq_last_error());
        CHECK(tq_session_n_past(live) == 5, "%s: n_past untouched", cases[i].what);
        CHECK(!memcmp(before, kc->k[0], kbytes), "%s: cache bytes untouched", cases[i].what);
    }
    /* another scheme, another model, not enough room */
    tq_session *other = mk(m, "kv8", 64), *om = mk(m2, "turbo", 64), *small = mk(m, "turbo", 8);
    CHECK(tq_session_load(other, path, NULL, 0, NULL) == TQ_E_UNSUPPORTED &&
              strstr(tq_last_error(), "turbo-k8v3") && strstr(tq_last_error(), "kv8"),
          "scheme mismatch names both: %s", tq_last_error());
    CHECK(tq_session_load(om, path, NULL, 0, NULL) == TQ_E_UNSUPPORTED &&
              strstr(tq_last_error(), "another model"), "model mismatch: %s", tq_last_error());
    CHECK(tq_session_load(small, path, NULL, 0, NULL) == TQ_E_OVERFLOW, "n_ctx too small: %s",
          tq_last_error());
    CHECK(tq_session_n_past(other) == 0 && tq_session_n_past(om) == 0, "untouched");
    CHECK(tq_session_load(live, "/nonexistent/x.kv", NULL, 0, NULL) == TQ_E_IO, "missing file");
    tq_session_free(other);
    tq_session_free(om);
    tq_session_free(small);

    /* fused vs dequantize-window attention through the engine: same greedy tokens */
    {
        int32_t tf[NG], tr[NG];
        tq_session *sf = mk_attn(m, "turbo:k4v3", 64, TQ_TURBO_ATTN_FUSED);
        tq_session *sr = mk_attn(m, "turbo:k4v3", 64, TQ_TURBO_ATTN_REF);
        CHECK(sf && sr && !strcmp(sf->kv->ops->name, "turbo-fused") &&
                  !strcmp(sr->kv->ops->name, "turbo-dequant-window"), "both paths");
        tq_session_eval(sf, prompt, NP, lg);
        greedy(sf, lg, V, tf);
        tq_session_eval(sr, prompt, NP, lg);
        greedy(sr, lg, V, tr);
        CHECK(!memcmp(tf, tr, sizeof tf), "fused and reference greedy tokens equal");
        tq_session_free(sf);
        tq_session_free(sr);
    }
    /* sliding-window layers (tiny Gemma 3: window 8, head_dim 64): stored bf16, window honoured
     * by both attentions; turbo k8v8 logits close to the bf16 cache's over 24 positions */
    if (!access("tests/data/tiny/gemma3/model.safetensors", R_OK)) {
        tq_model *g3 = NULL;
        CHECK(tq_model_load("tests/data/tiny/gemma3", &mo, &g3) == TQ_OK, "gemma3: %s",
              tq_last_error());
        const tq_model_config *gc = &g3->cfg;
        tq_session *sb = mk(g3, "bf16", 64), *sf = mk(g3, "turbo:k8v8", 64);
        tq_session *sr = mk_attn(g3, "turbo:k8v8", 64, TQ_TURBO_ATTN_REF);
        int n_sl = 0, ok_kind = 1;
        for (int l = 0; l < gc->n_layers; l++) {
            const int sl = tq_model_config_layer_is_sliding(gc, l);
            n_sl += sl;
            ok_kind &= (tq_kvc_turbo_layer_scheme(sf->kv, l).kind == TQ_KV_BF16) == sl;
        }
        CHECK(n_sl > 0 && ok_kind, "gemma3: %d sliding layers stored bf16", n_sl);
        const int n = 24, GV = g3->cfg.vocab;
        float *lb = malloc((size_t)n * GV * 4), *lf = malloc((size_t)n * GV * 4),
              *lr = malloc((size_t)n * GV * 4);
        int32_t toks[24];
        for (int i = 0; i < n; i++)
            toks[i] = (int32_t)((7u * (unsigned)i + 3u) % (unsigned)GV);
        CHECK(tq_session_eval_all(sb, toks, n, lb, (int64_t)n * GV) == TQ_OK, "bf16 eval");
        CHECK(tq_session_eval_all(sf, toks, n, lf, (int64_t)n * GV) == TQ_OK, "turbo eval");
        CHECK(tq_session_eval_all(sr, toks, n, lr, (int64_t)n * GV) == TQ_OK, "ref eval");
        double num = 0, den = 0, numr = 0;
        for (int i = 0; i < n * GV; i++) {
            num += (lf[i] - lb[i]) * (double)(lf[i] - lb[i]);
            numr += (lf[i] - lr[i]) * (double)(lf[i] - lr[i]);
            den += (double)lb[i] * lb[i];
        }
        printf("gemma3 tiny (window %d): turbo k8v8 vs bf16 cache NMSE %.3g, fused vs ref %.3g\n",
               gc->sliding_window, num / den, numr / den);
        CHECK(num / den < 1e-3, "gemma3: turbo k8v8 close to bf16 (NMSE %.3g)", num / den);
        CHECK(numr / den < 1e-8, "gemma3: fused == reference within rounding (%.3g)", numr / den);
        free(lb);
        free(lf);
        free(lr);
        tq_session_free(sb);
        tq_session_free(sf);
        tq_session_free(sr);
        tq_model_free(g3);
    }
    unlink(path);
    unlink(bad);
    free(before);
    free(lg);
    tq_session_free(live);
    tq_model_free(m);
    tq_model_free(m2);
    return t_done();
}
