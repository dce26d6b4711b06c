/* test_batch_invariance.c -- a token's logits do not depend on how many tokens share its forward
 * call or where the chunk boundaries fall (issue 10 item 11).
 *
 * 1. Kernels: every matvec/GEMM table this CPU runs (scalar, AVX2, AVX-512 where present), every
 *    weight dtype: the product of n tokens at once (the prefill tiles) is bit-identical, per
 *    (token, row), to n products of one token (the decode matvec), for awkward shapes and row
 *    ranges; and the same through the selected driver (tq_mm_select + tq_mm_run, the path the
 *    forward pass takes, which is where a BLAS prefill would come in).
 * 2. Engine: the tiny models (tests/data/tiny/<arch>, or the model given by -m), f32/f16/bf16
 *    weights, KV caches f32, bf16, kv8, turbo:k8v3: one prompt evaluated with n_batch 1, 7, 64
 *    and 512, and in irregular pieces, gives bit-identical logits for every token.
 * 3. Prompt cache: saved after N tokens (evaluated in chunks of 7), loaded into a fresh session
 *    and continued (rest of the prompt, then greedy decoding) gives the same logits, bit for bit,
 *    and the same greedy tokens as a never-saved run that evaluated the prompt in one call.
 *
 * Usage: test_batch_invariance [-m MODEL] [-w f32,f16,bf16] [-p PROMPT_TOKENS (100)] [-t THREADS]
 *        [-s SEED]
 * Without -m: the four tiny models (fast label). Reports the first differing token per case. */
#include <unistd.h>

#include "core/core.h"
#include "core/half.h"
#include "core/rng.h"
#include "cpu/matvec.h"
#include "model/engine.h"
#include "t.h"
#include "t_cpu.h"

/* ---- 1. kernels ------------------------------------------------------------------------- */

static void fill_w(tq_rng *r, tq_dtype t, void *w, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float v = tq_rng_uniform(r) * 2.0f - 1.0f;
        if (t == TQ_DTYPE_F32)
            ((float *)w)[i] = v;
        else if (t == TQ_DTYPE_F16)
            ((uint16_t *)w)[i] = tq_f32_to_f16(v);
        else
            ((uint16_t *)w)[i] = tq_f32_to_bf16(v);
    }
}

static const char *dt_name(int dt)
{
    return dt == TQ_DTYPE_F32 ? "f32" : dt == TQ_DTYPE_F16 ? "f16" : "bf16";
}

static void test_kernels(void)
{
    const tq_mm_kernels *ks[8];
    const int nk = tq_mm_all(ks, 8);
    static const int64_t shapes[][2] = {{1, 1}, {7, 5}, {37, 72}, {64, 64}, {50, 131}, {96, 576},
                                        {33, 1537}};
    const int64_t maxm = 96, maxk = 1537, maxn = 37;
    tq_rng rng;
    tq_rng_seed(&rng, t_seed);
    void *w = tq_malloc((size_t)(maxm * maxk * 4));
    float *x = tq_malloc((size_t)(maxn * (maxk + 3) * 4));
    uint16_t *xb = tq_malloc((size_t)(maxn * (maxk + 3) * 2));
    float *y1 = tq_malloc((size_t)(maxn * (maxm + 2) * 4));
    float *yn = tq_malloc((size_t)(maxn * (maxm + 2) * 4));
    tq_pool *pool = NULL;
    CHECK(tq_pool_create(2, &pool) == TQ_OK, "pool: %s", tq_last_error());
    for (int dt = 0; dt < TQ_DTYPE_COUNT; dt++)
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            const int64_t m = shapes[s][0], k = shapes[s][1], ldx = k + 3, ldy = m + 2;
            fill_w(&rng, (tq_dtype)dt, w, m * k);
            for (int64_t i = 0; i < maxn * ldx; i++)
                x[i] = tq_rng_uniform(&rng) * 2.0f - 1.0f;
            tq_mm_round_x(x, ldx, maxn, k, xb);
            for (int ki = 0; ki < nk; ki++) {
                const tq_mm_fn fn = ks[ki]->mm[dt];
                if (!fn)
                    continue;
                if (!ks[ki]->batch_invariant) { /* OpenBLAS: documented, used only on request */
                    if (s == 0)
                        printf("%s %s: not batch-invariant (opt-in only), not checked\n",
                               ks[ki]->name, dt_name(dt));
                    continue;
                }
                const uint16_t *xbp = ks[ki]->needs_xb ? xb : NULL;
                /* decode: one token per call, all rows */
                for (int64_t t = 0; t < maxn; t++)
                    fn(w, k, x + t * ldx, xbp ? xbp + t * ldx : NULL, ldx, 1, y1 + t * ldy, ldy,
                       0, m);
                static const int64_t ns[] = {2, 3, 4, 5, 8, 9, 16, 17, 32, 37};
                for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
                    const int64_t n = ns[ni];
                    /* prefill: n tokens, rows in two uneven ranges (a thread split) */
                    const int64_t cut = m > 5 ? 5 : m;
                    memset(yn, 0, (size_t)(maxn * ldy * 4));
                    fn(w, k, x, xbp, ldx, n, yn, ldy, 0, cut);
                    if (cut < m)
                        fn(w, k, x, xbp, ldx, n, yn, ldy, cut, m);
                    int bad = 0;
                    for (int64_t t = 0; t < n && !bad; t++)
                        bad = memcmp(y1 + t * ldy, yn + t * ldy, (size_t)m * 4) != 0;
                    CHECK(!bad, "%s %s m=%lld k=%lld: %lld tokens at once != one at a time",
                          ks[ki]->name, dt_name(dt), (long long)m, (long long)k, (long long)n);
                }
            }
            /* the driver the forward pass calls (kernel choice incl. any BLAS prefill path) */
            tq_mm mm;
            if (tq_mm_select((tq_dtype)dt, NULL, &mm))
                continue;
            for (int64_t t = 0; t < maxn; t++)
                tq_mm_run(&mm, pool, w, m, k, x + t * ldx, xb + t * ldx, ldx, 1, y1 + t * ldy,
                          ldy);
            tq_mm_run(&mm, pool, w, m, k, x, xb, ldx, maxn, yn, ldy);
            int bad = 0;
            for (int64_t t = 0; t < maxn && !bad; t++)
                bad = memcmp(y1 + t * ldy, yn + t * ldy, (size_t)m * 4) != 0;
            CHECK(!bad, "tq_mm_run %s (%s, prefill %s) m=%lld k=%lld: %lld tokens at once != "
                  "one at a time", dt_name(dt), mm.name, mm.gemm_name, (long long)m,
                  (long long)k, (long long)maxn);
        }
    tq_pool_free(pool);
    tq_free(w);
    tq_free(x);
    tq_free(xb);
    tq_free(y1);
    tq_free(yn);
}

/* ---- 2./3. engine ---------------------------------------------------------------------- */

static tq_session *mk(tq_model *m, const char *kv, int ctx, int nb)
{
    tq_session_opts o;
    tq_session_opts_default(&o);
    if (tq_kv_scheme_parse(kv, &o.kv))
        return NULL;
    o.n_ctx = ctx;
    o.n_batch = nb;
    tq_session *s = NULL;
    if (tq_session_create(m, &o, &s))
        printf("session %s n_batch %d: %s\n", kv, nb, tq_last_error());
    return s;
}

/* first token whose logits differ, or -1 */
static int64_t first_diff(const float *a, const float *b, int64_t n, int V)
{
    for (int64_t t = 0; t < n; t++)
        if (memcmp(a + t * V, b + t * V, (size_t)V * 4))
            return t;
    return -1;
}

static double max_abs_diff(const float *a, const float *b, int64_t n)
{
    double d = 0;
    for (int64_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static int argmax(const float *x, int n)
{
    int a = 0;
    for (int i = 1; i < n; i++)
        a = x[i] > x[a] ? i : a;
    return a;
}

static const char *const kvs[] = {"f32", "bf16", "kv8", "turbo:k8v3"};
#define NKV ((int)(sizeof(kvs) / sizeof(kvs[0])))

/* same prompt through every chunking: logits bit-identical to n_batch 1 */
static void test_chunks(tq_model *m, const char *name, const int32_t *prompt, int P, int V)
{
    static const int nbs[] = {1, 7, 64, 512};
    const size_t sz = (size_t)P * V;
    float *ref = malloc(sz * 4), *got = malloc(sz * 4);
    for (int kv = 0; kv < NKV; kv++) {
        int have_ref = 0;
        for (size_t b = 0; b < sizeof(nbs) / sizeof(nbs[0]); b++) {
            tq_session *s = mk(m, kvs[kv], P + 16, nbs[b]);
            CHECK(s != NULL, "%s %s: session", name, kvs[kv]);
            if (!s)
                continue;
            float *dst = have_ref ? got : ref;
            CHECK(tq_session_eval_all(s, prompt, P, dst, (int64_t)sz) == TQ_OK, "%s: eval: %s",
                  name, tq_last_error());
            if (have_ref) {
                const int64_t t = first_diff(ref, got, P, V);
                CHECK(t < 0, "%s kv %s: n_batch %d vs 1: token %lld differs first (max |d| %g)",
                      name, kvs[kv], nbs[b], (long long)t, max_abs_diff(ref, got, (int64_t)sz));
            }
            have_ref = 1;
            tq_session_free(s);
        }
        /* irregular pieces (n_batch 64): 1, 2, 3, 5, 8, ... tokens per eval call */
        tq_session *s = mk(m, kvs[kv], P + 16, 64);
        if (s && have_ref) {
            int off = 0, piece = 1, prev = 1;
            while (off < P) {
                const int c = piece < P - off ? piece : P - off;
                CHECK(tq_session_eval_all(s, prompt + off, c, got + (size_t)off * V,
                                          (int64_t)c * V) == TQ_OK, "eval: %s", tq_last_error());
                off += c;
                const int nx = piece + prev;
                prev = piece;
                piece = nx > 100 ? 1 : nx;
            }
            const int64_t t = first_diff(ref, got, P, V);
            CHECK(t < 0, "%s kv %s: irregular pieces vs n_batch 1: token %lld differs first "
                  "(max |d| %g)", name, kvs[kv], (long long)t, max_abs_diff(ref, got, (int64_t)sz));
        }
        tq_session_free(s);
    }
    free(ref);
    free(got);
}

/* save after N tokens, load, continue == never saved */
static void test_snapshot(tq_model *m, const char *name, const int32_t *prompt, int P, int V)
{
    enum { G = 16 };
    const int N = P / 3 + 1;
    char path[96];
    snprintf(path, sizeof path, "/tmp/tq_binv_%d.kv", (int)getpid());
    float *ref = malloc((size_t)(P + G) * V * 4), *got = malloc((size_t)(P + G) * V * 4);
    for (int kv = 0; kv < NKV; kv++) {
        int32_t tr[G], tg[G];
        /* never saved: the whole prompt in one call, then greedy decoding */
        tq_session *a = mk(m, kvs[kv], P + G + 8, 512);
        tq_session *b = mk(m, kvs[kv], P + G + 8, 7);
        tq_session *c = mk(m, kvs[kv], P + G + 8, 64);
        CHECK(a && b && c, "%s %s: sessions", name, kvs[kv]);
        if (!a || !b || !c)
            goto next;
        tq_session_eval_all(a, prompt, P, ref, (int64_t)P * V);
        for (int i = 0; i < G; i++) {
            tr[i] = argmax(ref + (size_t)(P - 1 + i) * V, V);
            tq_session_eval(a, &tr[i], 1, ref + (size_t)(P + i) * V);
        }
        /* N tokens in chunks of 7, saved; loaded into c; the rest, then greedy */
        tq_session_eval_all(b, prompt, N, got, (int64_t)N * V);
        CHECK(tq_session_save(b, prompt, N, path) == TQ_OK, "save: %s", tq_last_error());
        CHECK(tq_session_load(c, path, NULL, 0, NULL) == TQ_OK, "load: %s", tq_last_error());
        tq_session_eval_all(c, prompt + N, P - N, got + (size_t)N * V, (int64_t)(P - N) * V);
        for (int i = 0; i < G; i++) {
            tg[i] = argmax(got + (size_t)(P - 1 + i) * V, V);
            tq_session_eval(c, &tg[i], 1, got + (size_t)(P + i) * V);
        }
        const int64_t t = first_diff(ref, got, P + G, V);
        CHECK(t < 0, "%s kv %s: saved after %d tokens + loaded vs never saved: logits of token "
              "%lld differ first (of %d prompt + %d generated)", name, kvs[kv], N, (long long)t,
              P, G);
        CHECK(!memcmp(tr, tg, sizeof(tr)), "%s kv %s: greedy tokens differ after the load",
              name, kvs[kv]);
    next:
        tq_session_free(a);
        tq_session_free(b);
        tq_session_free(c);
    }
    unlink(path);
    free(ref);
    free(got);
}

static void test_model(const char *path, tq_dtype wt, int P, int n_threads)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = n_threads;
    mo.weight_type = wt;
    tq_model *m = NULL;
    CHECK(tq_model_load(path, &mo, &m) == TQ_OK, "load %s: %s", path, tq_last_error());
    if (!m)
        return;
    tq_model_info info;
    tq_model_get_info(m, &info);
    const int V = info.vocab_size;
    int32_t *prompt = malloc((size_t)P * 4);
    tq_rng rng;
    tq_rng_seed(&rng, t_seed ^ 0x5eedu);
    for (int i = 0; i < P; i++)
        prompt[i] = (int32_t)(tq_rng_u64(&rng) % (uint64_t)V);
    char name[256];
    snprintf(name, sizeof name, "%s (%s weights, kernels %s/%s)", path, dt_name(wt),
             info.kernel, info.gemm_kernel);
    printf("%s: %d prompt tokens\n", name, P);
    test_chunks(m, name, prompt, P, V);
    test_snapshot(m, name, prompt, P, V);
    free(prompt);
    tq_model_free(m);
}

int main(int argc, char **argv)
{
    tq_log_set_level(TQ_LOG_ERROR); /* n_ctx beyond the tiny models' trained 256 warns */
    t_init(argc, argv, "test_batch_invariance");
    const int cpu_rc = t_cpu_args(argc, argv); /* --cpu ISA */
    if (cpu_rc)
        return cpu_rc;
    const char *model = NULL, *wts = "f32,f16,bf16";
    int P = 100, nt = 1; /* one thread: the tiny models' products run on the caller anyway */
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "-m"))
            model = argv[++i];
        else if (!strcmp(argv[i], "-w"))
            wts = argv[++i];
        else if (!strcmp(argv[i], "-p"))
            P = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t"))
            nt = atoi(argv[++i]);
    }
    if (!model)
        test_kernels();
    static const char *tiny[] = {"tests/data/tiny/llama", "tests/data/tiny/qwen2",
                                 "tests/data/tiny/qwen3", "tests/data/tiny/gemma3"};
    if (model && access(model, R_OK))
        return t_skip("model file missing (scripts/get-model.sh)");
    if (!model && access("tests/data/tiny/llama/model.safetensors", R_OK))
        return t_skip("tests/data/tiny missing (run from the repository root)");
    static const tq_dtype dts[] = {TQ_DTYPE_F32, TQ_DTYPE_F16, TQ_DTYPE_BF16};
    for (int d = 0; d < 3; d++) {
        int want = 0; /* dt_name(dts[d]) is one of the comma-separated names in wts */
        for (const char *p = wts; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] ? 1 : 0)) {
            const size_t len = strcspn(p, ",");
            want |= len == strlen(dt_name(dts[d])) && !strncmp(p, dt_name(dts[d]), len);
        }
        if (!want)
            continue;
        if (model)
            test_model(model, dts[d], P, nt);
        else
            for (size_t i = 0; i < sizeof(tiny) / sizeof(tiny[0]); i++)
                test_model(tiny[i], dts[d], P, nt);
    }
    return t_done();
}
