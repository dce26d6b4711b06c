/* test_cuda_gen.c -- the device greedy sampler and the generation loop on the GPU (issue 16
 * item 4; label cuda; exits 77 without CUDA or a device).
 *  1. The sampler kernel (tqc_be_greedy) against tq_sampler_sample() on the same rows, seeded
 *     random logits of vocab 1 .. 262144 (1 .. 128 blocks), with ties across and inside blocks,
 *     NaN, +inf (FLT_MAX: the lower id of two wins), -inf, a row without a finite logit (-1: the
 *     CPU's error), and the repetition penalty (> 1 and < 1) on the ids tq_sampler_greedy_ids()
 *     gives for a history that holds the argmax: the same id, every row.
 *  2. The generator on the GPU (tq_generator_create_cuda, the tiny random llama with a byte
 *     tokenizer, bf16 weights and cache, greedy with repetition penalty 1.1, 40 tokens):
 *     device-picked tokens == host-sampled tokens of the same GPU forward (--host-sampler), the
 *     device sampler did run (decode graph steps), and the GPU tokens equal the CPU engine's
 *     (bf16 cache, same weights) up to the end or up to a position where the CPU's own top-2
 *     margin after the penalty is below 0.05 logits (the documented GPU/CPU tolerance of
 *     test_cuda_fwd); the streamed text is the decode of the streamed tokens.
 *  3. transformers' greedy reference of the tiny llama (ref.txt, no penalty): the GPU
 *     generator's first tokens, with the same near-tie excuse.
 *  4. Prefill chunks longer than the attention kernel's 64 / group query rows (the backend
 *     attends in blocks of queries, the cache cut at each block's last query): 100 random tokens
 *     in one forward call vs in chunks of 8 (one attention call each), bf16 cache: last logits
 *     KL < 1e-6 and the same argmax, then 4 decode steps each; and vs the CPU f32 cache (< 1e-3,
 *     the bound of test_cuda_fwd).
 *  5. Issue 16 item 6, the encoder inside the forward on the forward's own inputs: after each
 *     eval (a 20-token prefill, 4 decode steps) the last layer's K / V rows that the GPU forward
 *     appended (tq_cuda_session_debug_kv), encoded by the CPU codec (tq_kv_encode_k/v), == the
 *     bytes the device cache holds for them (tq_cuda_kv_read_rows), for kv8, turbo k8v3 and
 *     k4v3: the quantized caches' GPU/CPU drift is not the encoder.
 *  6. Issue 16 item 6's fix, exact K / V inputs: a one-layer random model of SmolLM2's shape
 *     (tests/rand_gguf.h, f32 values = bf16 weights), its V rows (the forward's own, before the
 *     encoder) after a 20-token prefill (cuBLAS: hi + lo bf16 GEMMs) and 2 decode steps (the GEMV
 *     with f32 activations) against a float64 reference from the same f32 input x / rms(x) * g:
 *     max rel L2 error < 1e-5 with the default inputs (TQ_CUDA_IN_KV_F32) and with
 *     TQ_CUDA_IN_F32; with TQ_CUDA_IN_BF16 (activations rounded to bf16, the forward before) it
 *     must be > 1e-4 (the check sees the rounding).
 *  7. (skipped with --quick) The same-scheme drift GPU vs CPU on the 30-layer random model of
 *     SmolLM2's shape (Q8_0 file, bf16 weights), 64 random prompt tokens + 8 steps fed with the
 *     CPU bf16 cache's argmax, caches bf16 / kv8 / turbo k8v3 against the CPU's same scheme, for
 *     each input rule (bf16, K/V f32, all f32): printed (KL mean / max, top-1); bounds as
 *     test_cuda_fwd (bf16 max KL < 0.01; quantized mean KL < 0.1, top-1 >= 85%: not for bf16
 *     inputs, printed only); with all-f32 inputs the bf16 cache's max KL < 1e-5 (the CPU alone,
 *     bench/cuda/cpu_drift.c: another f32 summation order 1.9e-7, bf16-rounded activations
 *     1.3e-5); the turbo k8v3 mean KL with f32 K/V inputs and with all f32 < 0.8x that with bf16
 *     inputs (measured 2026-12-03, H200: 2.2e-3 -> 1.1e-3 / 7.2e-4; the rest is the attention
 *     kernel's own error, docs/results.md). Then the same file with native weights: the Q8_0 head through the wide
 *     kernel vs the decode job (max KL < 1e-3, same top-1) and vs the CPU (< 0.05). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rng.h"
#include "cuda/backend_cuda.h"
#include "t.h"
#include "turboquant.h"

#define MODEL_DIR "tests/data/tiny/llama"

#include "byte_tokenizer.h"
#include "rand_gguf.h"
#include "logit_kl.h"

/* ---- 1. the kernel against the CPU sampler ------------------------------------------------ */

/* one row: the device pick (penalty from sampler sp's history) vs tq_sampler_sample */
static void one_row(tqc_be *b, float *dlg, const float *lg, int vocab, tq_sampler *sp,
                    const char *what)
{
    int32_t ids[TQC_GREEDY_MAX_PEN];
    int n = -1;
    float pen = 0;
    const int ok = tq_sampler_greedy_ids(sp, ids, TQC_GREEDY_MAX_PEN, &n, &pen);
    CHECK(ok, "%s: tq_sampler_greedy_ids refused a greedy sampler", what);
    if (!ok)
        return;
    tqc_greedy_pen gp = {.n = n, .penalty = pen};
    memcpy(gp.id, ids, (size_t)n * sizeof(int32_t));
    int32_t dev = -2, cpu = -1;
    tq_status st = tqc_be_upload(b, dlg, lg, (size_t)vocab * 4);
    if (st == TQ_OK)
        st = tqc_be_greedy(b, dlg, vocab, &gp);
    if (st == TQ_OK)
        st = tqc_be_greedy_fetch(b, &dev);
    CHECK(st == TQ_OK, "%s: device greedy: %s", what, tq_last_error());
    const tq_status cs = tq_sampler_sample(sp, lg, &cpu);
    if (cs != TQ_OK) {
        cpu = -1; /* no finite logit */
    }
    CHECK(dev == cpu, "%s (vocab %d, %d penalised, penalty %g): device %d, CPU sampler %d", what,
          vocab, n, (double)pen, (int)dev, (int)cpu);
}

static void kernel_cases(void)
{
    static const int V[] = {1, 2, 255, 2047, 2048, 2049, 4096, 6000, 49152, 151936, 262144};
    const int vmax = 262144;
    tqc_be *b = NULL;
    float *dlg = NULL;
    CHECK(tqc_be_create(1, 64, 64, 1, 1.0f, &b) == TQ_OK, "backend: %s", tq_last_error());
    if (!b)
        return;
    CHECK(tqc_be_alloc(b, (void **)&dlg, (size_t)vmax * 4, NULL) == TQ_OK, "alloc");
    float *lg = malloc((size_t)vmax * 4);
    tq_rng rng;
    tq_rng_seed(&rng, t_seed);
    int rows = 0;
    for (int vi = 0; vi < (int)(sizeof(V) / sizeof(V[0])); vi++) {
        const int vocab = V[vi];
        for (int kind = 0; kind < 9; kind++) {
            char what[96];
            for (int i = 0; i < vocab; i++) /* quantised to 1/64: equal values happen */
                lg[i] = (float)(int)(tq_rng_normal(&rng) * 256.0) / 64.0f;
            tq_sampler_params p = tq_sampler_params_default();
            int hist = 0;
            const int a = (int)(tq_rng_u64(&rng) % (uint64_t)vocab);
            const int c = (int)(tq_rng_u64(&rng) % (uint64_t)vocab);
            switch (kind) {
            case 0: /* plain */
                break;
            case 1: /* a tie of two ids (across blocks when far apart): the lower wins */
                lg[a] = lg[c] = 100.0f;
                break;
            case 2: /* NaN, +inf twice (both FLT_MAX: the lower id), -inf */
                for (int i = 0; i < vocab; i += 7)
                    lg[i] = NAN;
                lg[a] = INFINITY;
                lg[c] = INFINITY;
                lg[vocab - 1] = -INFINITY;
                break;
            case 3: /* no finite logit: -1 on the device, an error on the CPU */
                for (int i = 0; i < vocab; i++)
                    lg[i] = i % 2 ? NAN : -INFINITY;
                break;
            case 4: /* penalty > 1 on a history holding the argmax and 40 others */
            case 5: /* penalty < 1 (boosts positives, pushes negatives down) */
            case 6: /* penalty on a history with repeats (distinct ids only once) */
                p.repeat_penalty = kind == 5 ? 0.7f : 1.3f;
                hist = kind == 6 ? 64 : 41;
                break;
            case 7: /* all logits equal: id 0 */
                for (int i = 0; i < vocab; i++)
                    lg[i] = -3.5f;
                break;
            case 8: /* penalty where the argmax is +inf (FLT_MAX / 1.3 stays finite) */
                lg[a] = INFINITY;
                p.repeat_penalty = 1.3f;
                hist = 8;
                break;
            }
            tq_sampler *sp = NULL;
            if (tq_sampler_create(&p, vocab, &sp) != TQ_OK) {
                CHECK(0, "sampler: %s", tq_last_error());
                continue;
            }
            if (hist) { /* the argmax of the raw row first, then random ids (with repeats) */
                int am = 0;
                for (int i = 1; i < vocab; i++)
                    if (lg[i] > lg[am])
                        am = i;
                tq_sampler_accept(sp, am);
                for (int h = 1; h < hist; h++) {
                    const int id = kind == 6 ? (int)(tq_rng_u64(&rng) % 20u) % vocab
                                             : (int)(tq_rng_u64(&rng) % (uint64_t)vocab);
                    tq_sampler_accept(sp, id);
                }
            }
            snprintf(what, sizeof(what), "row kind %d", kind);
            one_row(b, dlg, lg, vocab, sp, what);
            tq_sampler_free(sp);
            rows++;
        }
    }
    { /* a greedy sampler with more distinct penalised ids than the device list: refused */
        tq_sampler_params p = tq_sampler_params_default();
        p.repeat_penalty = 1.1f;
        p.repeat_last_n = 100;
        tq_sampler *sp = NULL;
        int32_t ids[TQC_GREEDY_MAX_PEN];
        int n = 0;
        float pen = 0;
        if (tq_sampler_create(&p, 1000, &sp) == TQ_OK) {
            for (int h = 0; h < 100; h++)
                tq_sampler_accept(sp, h);
            CHECK(!tq_sampler_greedy_ids(sp, ids, TQC_GREEDY_MAX_PEN, &n, &pen),
                  "100 distinct penalised ids accepted into a list of %d", TQC_GREEDY_MAX_PEN);
            tq_sampler_free(sp);
        }
        p = tq_sampler_params_default();
        p.temperature = 0.5f;
        if (tq_sampler_create(&p, 1000, &sp) == TQ_OK) {
            CHECK(!tq_sampler_greedy_ids(sp, ids, TQC_GREEDY_MAX_PEN, &n, &pen),
                  "temperature 0.5 taken as greedy");
            tq_sampler_free(sp);
        }
    }
    printf("device greedy sampler vs tq_sampler_sample: %d rows (vocab 1..%d)\n", rows, vmax);
    tqc_be_sync(b);
    tqc_be_dfree(dlg);
    tqc_be_free(b);
    free(lg);
}

/* ---- 2./3. the generator on the GPU ----------------------------------------------------- */

typedef struct capture {
    char text[8192];
    size_t n_text;
    int32_t toks[512];
    int n_toks;
} capture;

static int cap_fn(void *user, int32_t token, const char *text, size_t len)
{
    capture *c = user;
    if (token >= 0 && c->n_toks < 512)
        c->toks[c->n_toks++] = token;
    if (c->n_text + len <= sizeof(c->text)) {
        memcpy(c->text + c->n_text, text, len);
        c->n_text += len;
    }
    return 0;
}

/* the CPU engine's top-2 margin at the next position after ids[0..n), with the repetition
 * penalty `pen` over the last 64 ids (as the sampler applies it) */
static float cpu_margin(tq_model *m, const int32_t *ids, int n, float pen)
{
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("bf16", &so.kv);
    so.n_ctx = 256;
    tq_session *s = NULL;
    float margin = INFINITY;
    tq_model_info mi;
    tq_model_get_info(m, &mi);
    float *lg = malloc((size_t)mi.vocab_size * 4);
    if (tq_session_create(m, &so, &s) == TQ_OK && tq_session_eval(s, ids, n, lg) == TQ_OK) {
        unsigned char *done = calloc((size_t)mi.vocab_size, 1);
        for (int j = n > 64 ? n - 64 : 0; j < n && pen != 1.0f; j++)
            if (!done[ids[j]]) {
                done[ids[j]] = 1;
                lg[ids[j]] = lg[ids[j]] > 0 ? lg[ids[j]] / pen : lg[ids[j]] * pen;
            }
        free(done);
        int b0 = 0;
        for (int i = 1; i < mi.vocab_size; i++)
            if (lg[i] > lg[b0])
                b0 = i;
        float second = -INFINITY;
        for (int i = 0; i < mi.vocab_size; i++)
            if (i != b0 && lg[i] > second)
                second = lg[i];
        margin = lg[b0] - second;
    }
    tq_session_free(s);
    free(lg);
    return margin;
}

/* GPU tokens vs reference tokens (same prompt): equal, or equal up to a CPU near-tie */
static void compare(tq_model *m, const int32_t *prompt, int np, const int32_t *gpu, int ng,
                    const int32_t *ref, int nr, float pen, const char *what)
{
    int n = ng < nr ? ng : nr, k = 0;
    while (k < n && gpu[k] == ref[k])
        k++;
    if (k == n) {
        printf("%s: %d of %d tokens equal\n", what, n, n);
        return;
    }
    int32_t ids[600];
    memcpy(ids, prompt, (size_t)np * 4);
    memcpy(ids + np, ref, (size_t)k * 4);
    const float mg = cpu_margin(m, ids, np + k, pen);
    printf("%s: first %d of %d tokens equal, then GPU %d vs %d at a CPU top-2 margin of %.4f\n",
           what, k, n, (int)gpu[k], (int)ref[k], (double)mg);
    CHECK(mg < 0.05f, "%s: token %d differs (GPU %d, reference %d) with a CPU margin of %.4f "
          "(>= 0.05)", what, k, (int)gpu[k], (int)ref[k], (double)mg);
}

static int run_gen(tq_model *m, tq_tokenizer *tok, int cuda, int host, float pen,
                   const int32_t *prompt, int np, int n_new, capture *c, long *graph)
{
    tq_gen_opts go;
    tq_gen_opts_default(&go);
    go.ignore_eos = 1;
    go.max_new_tokens = n_new;
    go.sampling.repeat_penalty = pen;
    go.host_sampler = host;
    tq_kv_scheme kv;
    tq_kv_scheme_parse("bf16", &kv);
    tq_session *s = NULL;
    tq_cuda_session *gs = NULL;
    tq_generator *g = NULL;
    tq_status st;
    memset(c, 0, sizeof(*c));
    if (cuda) {
        st = tq_cuda_session_create(m, kv, 128, &gs);
        if (st == TQ_OK)
            st = tq_generator_create_cuda(m, gs, tok, &go, &g);
    } else {
        tq_session_opts so;
        tq_session_opts_default(&so);
        so.kv = kv;
        so.n_ctx = 128;
        st = tq_session_create(m, &so, &s);
        if (st == TQ_OK)
            st = tq_generator_create(m, s, tok, &go, &g);
    }
    tq_gen_stats gst;
    if (st == TQ_OK)
        st = tq_generator_run(g, prompt, np, cap_fn, c, &gst);
    CHECK(st == TQ_OK, "generate (%s%s): %s", cuda ? "GPU" : "CPU", host ? ", host sampler" : "",
          tq_last_error());
    if (st == TQ_OK) {
        CHECK(gst.n_gen == n_new && c->n_toks == n_new, "%d tokens asked, %lld sampled, %d "
              "streamed", n_new, (long long)gst.n_gen, c->n_toks);
        char dec[8192];
        size_t nd = 0;
        tq_tokenizer_decode(tok, c->toks, c->n_toks, TQ_TOK_SKIP_SPECIAL, dec, sizeof(dec), &nd);
        CHECK(nd == c->n_text && !memcmp(dec, c->text, nd), "streamed text != decode(tokens)");
        if (cuda)
            CHECK(tq_cuda_session_n_past(gs) == np + n_new - 1, "GPU n_past %lld",
                  (long long)tq_cuda_session_n_past(gs));
    }
    if (graph) {
        *graph = 0;
        if (gs)
            tq_cuda_session_graph_stats(gs, graph, NULL, NULL);
    }
    tq_generator_free(g);
    tq_session_free(s);
    tq_cuda_session_free(gs);
    return st == TQ_OK;
}

static void gen_cases(void)
{
    FILE *rf = fopen(MODEL_DIR "/ref.txt", "r");
    CHECK(rf, "%s/ref.txt", MODEL_DIR);
    if (!rf)
        return;
    int32_t prompt[64], ref[64];
    int np = 0, nr = 0, mode = 0, count_next = 0;
    char word[32];
    while (fscanf(rf, "%31s", word) == 1) { /* "tokens N id..." then "greedy N id..." */
        if (!strcmp(word, "tokens") || !strcmp(word, "greedy")) {
            mode = word[0] == 't' ? 1 : 2;
            count_next = 1;
        } else if (count_next)
            count_next = 0;
        else if (mode == 1 && np < 64)
            prompt[np++] = atoi(word);
        else if (mode == 2 && nr < 64)
            ref[nr++] = atoi(word);
    }
    fclose(rf);
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_BF16;
    mo.weight_store = TQ_STORE_DEQUANT;
    tq_model *m = NULL;
    CHECK(tq_model_load(MODEL_DIR, &mo, &m) == TQ_OK, "load: %s", tq_last_error());
    tq_tokenizer *tok = byte_tokenizer();
    if (!m || !tok) {
        tq_model_free(m);
        tq_tokenizer_free(tok);
        return;
    }
    static capture dev, host, cpu, plain;
    long graph = 0;
    const int N = 40;
    if (run_gen(m, tok, 1, 0, 1.1f, prompt, np, N, &dev, &graph) &&
        run_gen(m, tok, 1, 1, 1.1f, prompt, np, N, &host, NULL)) {
        CHECK(!memcmp(dev.toks, host.toks, (size_t)N * 4), "device sampler tokens != host "
              "sampler tokens on the same GPU forward");
        printf("GPU generator, penalty 1.1: device sampler == host sampler at %d tokens "
               "(%ld decode steps as graphs)\n", N, graph);
        CHECK(graph >= N - 2, "only %ld of %d decode steps ran as graphs", graph, N - 1);
    }
    if (run_gen(m, tok, 0, 0, 1.1f, prompt, np, N, &cpu, NULL))
        compare(m, prompt, np, dev.toks, N, cpu.toks, N, 1.1f,
                "GPU (bf16 cache) vs CPU engine (bf16 cache), penalty 1.1");
    if (run_gen(m, tok, 1, 0, 1.0f, prompt, np, nr, &plain, NULL))
        compare(m, prompt, np, plain.toks, nr, ref, nr, 1.0f,
                "GPU vs transformers' greedy (ref.txt)");
    tq_tokenizer_free(tok);
    tq_model_free(m);
}

static int amax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

static void prefill_chunks(void)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_BF16;
    mo.weight_store = TQ_STORE_DEQUANT;
    tq_model *m = NULL;
    CHECK(tq_model_load(MODEL_DIR, &mo, &m) == TQ_OK, "load: %s", tq_last_error());
    if (!m)
        return;
    tq_model_info mi;
    tq_model_get_info(m, &mi);
    const int V = mi.vocab_size, N = 100;
    int32_t toks[128];
    tq_rng rng;
    tq_rng_seed(&rng, t_seed ^ 0x5eedu);
    for (int i = 0; i < N + 8; i++)
        toks[i] = (int32_t)(tq_rng_u64(&rng) % (uint64_t)V);
    tq_kv_scheme bf16, f32;
    tq_kv_scheme_parse("bf16", &bf16);
    tq_kv_scheme_parse("f32", &f32);
    tq_cuda_session *a = NULL, *b = NULL;
    tq_session *c = NULL;
    tq_session_opts so;
    tq_session_opts_default(&so);
    so.kv = f32;
    so.n_ctx = 128;
    tq_cuda_session_opts o8 = {0};
    o8.prefill_chunk = 8;
    CHECK(tq_cuda_session_create(m, bf16, 128, &a) == TQ_OK &&
              tq_cuda_session_create(m, bf16, 128, &b) == TQ_OK &&
              tq_cuda_session_set_opts(b, &o8) == TQ_OK && tq_session_create(m, &so, &c) == TQ_OK,
          "sessions: %s", tq_last_error());
    float *la = malloc((size_t)V * 4), *lb = malloc((size_t)V * 4), *lc = malloc((size_t)V * 4);
    double wab = 0, wac = 0;
    int same = 0, steps = 0;
    if (a && b && c) {
        int32_t t = 0;
        for (int s = 0; s <= 4; s++) {
            const int32_t *in = s ? &t : toks;
            const int n = s ? 1 : N;
            CHECK(tq_cuda_session_eval(a, in, n, la) == TQ_OK &&
                      tq_cuda_session_eval(b, in, n, lb) == TQ_OK &&
                      tq_session_eval(c, in, n, lc) == TQ_OK,
                  "eval step %d: %s", s, tq_last_error());
            const double kab = logit_kl(lb, la, V), kac = logit_kl(lc, la, V);
            wab = kab > wab ? kab : wab;
            wac = kac > wac ? kac : wac;
            same += amax(la, V) == amax(lb, V);
            steps++;
            t = (int32_t)amax(lc, V);
        }
        printf("prefill of %d tokens in one call (attention in blocks of queries) vs chunks of 8: "
               "max KL %.2e, argmax equal %d/%d; vs CPU f32 cache: max KL %.2e\n", N, wab, same,
               steps, wac);
        CHECK(wab < 1e-6 && same == steps, "one-call prefill vs chunks of 8: KL %.3e, argmax "
              "equal %d/%d", wab, same, steps);
        CHECK(wac < 1e-3, "GPU vs CPU f32 cache after a one-call prefill: KL %.3e", wac);
    }
    free(la);
    free(lb);
    free(lc);
    tq_cuda_session_free(a);
    tq_cuda_session_free(b);
    tq_session_free(c);
    tq_model_free(m);
}

static void encoder_in_forward(void)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_BF16;
    mo.weight_store = TQ_STORE_DEQUANT;
    tq_model *m = NULL;
    CHECK(tq_model_load(MODEL_DIR, &mo, &m) == TQ_OK, "load: %s", tq_last_error());
    if (!m)
        return;
    tq_model_info mi;
    tq_model_get_info(m, &mi);
    const int nkv = mi.n_kv_heads, hd = mi.head_dim, V = mi.vocab_size;
    /* (+rk is a cache-level variant: keys rotated before the row codec, not compared here) */
    static const char *schemes[] = {"kv8", "turbo:k8v3", "turbo:k4v3"};
    int32_t toks[24];
    tq_rng rng;
    tq_rng_seed(&rng, t_seed ^ 0xe7c0u);
    for (int i = 0; i < 24; i++)
        toks[i] = (int32_t)(tq_rng_u64(&rng) % (uint64_t)V);
    for (int si = 0; si < 3; si++) {
        tq_kv_scheme ks;
        size_t kb = 0, vb = 0;
        if (tq_kv_scheme_parse(schemes[si], &ks) != TQ_OK ||
            tq_kv_row_bytes(ks, hd, &kb, &vb) != TQ_OK || tq_cuda_kv_supported(ks, hd) != TQ_OK) {
            printf("encoder in the forward: %s skipped (%s)\n", schemes[si], tq_last_error());
            continue;
        }
        tq_cuda_session *g = NULL;
        CHECK(tq_cuda_session_create(m, ks, 64, &g) == TQ_OK, "%s session: %s", schemes[si],
              tq_last_error());
        if (!g)
            continue;
        const size_t nf = (size_t)20 * nkv * hd;
        float *k = malloc(nf * 4), *v = malloc(nf * 4);
        uint8_t *kc = malloc(20 * nkv * kb), *vc = malloc(20 * nkv * vb);
        uint8_t *kg = malloc(20 * nkv * kb), *vg = malloc(20 * nkv * vb);
        int rows = 0, same = 0;
        for (int s = 0; s < 5; s++) {
            const int n = s ? 1 : 20;
            const float *dk = NULL, *dv = NULL;
            tq_cuda_kv *kvc = NULL;
            tq_status st = tq_cuda_session_eval(g, toks + (s ? 19 + s : 0), n, NULL);
            if (st == TQ_OK)
                st = tq_cuda_session_debug_kv(g, &dk, &dv);
            if (st == TQ_OK)
                st = tq_cuda_session_debug(g, mi.n_layers - 1, &kvc, NULL, NULL);
            if (st == TQ_OK)
                st = tq_cuda_memcpy(k, dk, (size_t)n * nkv * hd * 4, 1);
            if (st == TQ_OK)
                st = tq_cuda_memcpy(v, dv, (size_t)n * nkv * hd * 4, 1);
            const int64_t t0 = tq_cuda_session_n_past(g) - n;
            if (st == TQ_OK)
                st = tq_cuda_kv_read_rows(kvc, t0, n, kg, vg);
            if (st == TQ_OK)
                st = tq_kv_encode_k(ks, hd, TQ_DTYPE_F32, k, (int64_t)n * nkv, kc, n * nkv * kb,
                                    NULL);
            if (st == TQ_OK)
                st = tq_kv_encode_v(ks, hd, TQ_DTYPE_F32, v, (int64_t)n * nkv, vc, n * nkv * vb,
                                    NULL);
            CHECK(st == TQ_OK, "%s step %d: %s", schemes[si], s, tq_last_error());
            if (st != TQ_OK)
                break;
            for (int r = 0; r < n * nkv; r++) {
                rows++;
                same += !memcmp(kc + r * kb, kg + r * kb, kb) &&
                        !memcmp(vc + r * vb, vg + r * vb, vb);
            }
        }
        printf("encoder in the forward, %s: %d/%d last-layer K+V rows of the GPU cache == the CPU "
               "codec's bytes for the forward's own rows\n", schemes[si], same, rows);
        CHECK(rows > 0 && same == rows, "%s: %d of %d rows differ from the CPU codec", schemes[si],
              rows - same, rows);
        free(k);
        free(v);
        free(kc);
        free(vc);
        free(kg);
        free(vg);
        tq_cuda_session_free(g);
    }
    tq_model_free(m);
}

/* ---- 6. exact K / V inputs ----------------------------------------------------------------- */

typedef struct {
    float *emb, *norm, *wv;
} kept;

static void keep_cb(void *ctx, const char *name, const float *x, int64_t n)
{
    kept *k = ctx;
    float **dst = !strcmp(name, "token_embd.weight")       ? &k->emb
                  : !strcmp(name, "blk.0.attn_norm.weight") ? &k->norm
                  : !strcmp(name, "blk.0.attn_v.weight")    ? &k->wv
                                                            : NULL;
    if (dst && (*dst = malloc((size_t)n * 4)))
        memcpy(*dst, x, (size_t)n * 4);
}

/* bf16 rounding, nearest even (the session's weights) */
static float bf16r(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* max over rows of ||v - ref|| / ||ref||, ref = Wv (x / rms(x) * g) in float64, x = the
 * embedding row as the session holds it (bf16) */
static double v_err(const kept *kp, const int32_t *tok, int n, const float *v, int dim, int kvd)
{
    double worst = 0.0;
    float x[576];
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < dim && i < 576; i++)
            x[i] = bf16r(kp->emb[(size_t)tok[t] * dim + i]);
        double ss = 0.0;
        for (int i = 0; i < dim; i++)
            ss += (double)x[i] * x[i];
        const double r = 1.0 / sqrt(ss / dim + 1e-5);
        double e2 = 0.0, n2 = 0.0;
        for (int o = 0; o < kvd; o++) {
            double acc = 0.0;
            for (int i = 0; i < dim; i++)
                acc += (double)bf16r(kp->wv[(size_t)o * dim + i]) * ((double)x[i] * r * kp->norm[i]);
            const double d = v[(size_t)t * kvd + o] - acc;
            e2 += d * d;
            n2 += acc * acc;
        }
        const double rel = sqrt(e2 / (n2 > 0 ? n2 : 1e-300));
        worst = rel > worst ? rel : worst;
    }
    return worst;
}

static void exact_kv_inputs(void)
{
    char path[96];
    snprintf(path, sizeof path, "/tmp/tq_cuda_gen_rand1_%d.gguf", (int)getpid());
    kept kp = {0};
    tq_status st = rand_gguf_write_ex(path, TQ_GGML_F32, 1, t_seed, keep_cb, &kp);
    CHECK(st == TQ_OK && kp.emb && kp.norm && kp.wv, "random 1-layer GGUF: %s", tq_last_error());
    tq_model *m = NULL;
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_BF16;
    mo.weight_store = TQ_STORE_DEQUANT;
    if (st == TQ_OK)
        CHECK((st = tq_model_load(path, &mo, &m)) == TQ_OK, "load %s: %s", path, tq_last_error());
    remove(path);
    if (m) {
        tq_model_info mi;
        tq_model_get_info(m, &mi);
        const int dim = mi.dim, kvd = mi.n_kv_heads * mi.head_dim;
        int32_t toks[22];
        tq_rng rng;
        tq_rng_seed(&rng, t_seed ^ 0x6ea7u);
        for (int i = 0; i < 22; i++)
            toks[i] = (int32_t)(tq_rng_u64(&rng) % (uint64_t)mi.vocab_size);
        static const struct { int in; const char *name; } M[] = {
            {TQ_CUDA_IN_BF16, "bf16 (before)"}, {TQ_CUDA_IN_KV_F32, "K/V f32 (default)"}, {TQ_CUDA_IN_F32, "all f32"}};
        double err[3][2] = {{0}};
        float *v = malloc((size_t)20 * kvd * 4);
        tq_kv_scheme ks;
        tq_kv_scheme_parse("turbo:k8v3", &ks);
        for (int mi_ = 0; mi_ < 3 && v; mi_++) {
            tq_cuda_session *g = NULL;
            tq_cuda_session_opts go = {0};
            go.inputs = M[mi_].in;
            CHECK(tq_cuda_session_create(m, ks, 64, &g) == TQ_OK && tq_cuda_session_set_opts(g, &go) == TQ_OK,
                  "session: %s", tq_last_error());
            for (int s = 0; g && s < 3; s++) { /* the prefill, then 2 decode steps (graphs) */
                const int n = s ? 1 : 20, t0 = s ? 19 + s : 0;
                const float *dk = NULL, *dv = NULL;
                st = tq_cuda_session_eval(g, toks + t0, n, NULL);
                if (st == TQ_OK)
                    st = tq_cuda_session_debug_kv(g, &dk, &dv);
                if (st == TQ_OK)
                    st = tq_cuda_memcpy(v, dv, (size_t)n * kvd * 4, 1);
                CHECK(st == TQ_OK, "%s step %d: %s", M[mi_].name, s, tq_last_error());
                if (st != TQ_OK)
                    break;
                const double e = v_err(&kp, toks + t0, n, v, dim, kvd);
                err[mi_][s > 0] = e > err[mi_][s > 0] ? e : err[mi_][s > 0];
            }
            tq_cuda_session_free(g);
            printf("exact K/V inputs: GPU inputs %-18s layer-0 V rows vs float64: max rel L2 err prefill (20 "
                   "tokens) %.2e, decode %.2e\n", M[mi_].name, err[mi_][0], err[mi_][1]);
        }
        free(v);
        for (int j = 0; j < 2; j++) {
            CHECK(err[1][j] < 1e-5 && err[2][j] < 1e-5, "%s: V rows with f32 inputs rel err %.3e / %.3e >= 1e-5",
                  j ? "decode" : "prefill", err[1][j], err[2][j]);
            CHECK(err[0][j] > 1e-4, "%s: V rows with bf16 inputs rel err %.3e <= 1e-4 (rounding not seen)",
                  j ? "decode" : "prefill", err[0][j]);
        }
    }
    tq_model_free(m);
    free(kp.emb), free(kp.norm), free(kp.wv);
}

/* ---- 7. same-scheme drift GPU vs CPU per input rule ------------------------------------------ */

static int argmax_f(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        b = x[i] > x[b] ? i : b;
    return b;
}

/* the same file with native weights: the Q8_0 head (49152 x 576, rows padded to 16 bytes on the
 * device) through the wide kernel (default) vs the decode job (no_wide_head), and vs the CPU's
 * native forward (f32 cache) */
static void native_head(const char *path)
{
    tq_model *m = NULL;
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_BF16;
    mo.weight_store = TQ_STORE_NATIVE;
    CHECK(tq_model_load(path, &mo, &m) == TQ_OK, "load native: %s", tq_last_error());
    if (!m)
        return;
    tq_model_info mi;
    tq_model_get_info(m, &mi);
    const int V = mi.vocab_size, np = 32, steps = 6;
    int32_t prompt[32];
    tq_rng rng;
    tq_rng_seed(&rng, t_seed ^ 0x4eadu);
    for (int i = 0; i < np; i++)
        prompt[i] = (int32_t)(tq_rng_u64(&rng) % (uint64_t)V);
    tq_session *c = NULL;
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("f32", &so.kv);
    so.n_ctx = np + steps + 2;
    tq_kv_scheme bf16;
    tq_kv_scheme_parse("bf16", &bf16);
    tq_cuda_session *gw = NULL, *gj = NULL;
    tq_cuda_session_opts go = {0};
    go.no_wide_head = 1;
    CHECK(tq_session_create(m, &so, &c) == TQ_OK && tq_cuda_session_create(m, bf16, np + steps + 2, &gw) == TQ_OK &&
              tq_cuda_session_create(m, bf16, np + steps + 2, &gj) == TQ_OK && tq_cuda_session_set_opts(gj, &go) == TQ_OK,
          "native sessions: %s", tq_last_error());
    float *lc = malloc((size_t)V * 4), *lw = malloc((size_t)V * 4), *lj = malloc((size_t)V * 4);
    double wj = 0, wc = 0;
    int n = 0, same = 0, samec = 0;
    for (int s = 0; c && gw && gj && lc && lw && lj && s <= steps; s++) {
        const int32_t *tok = s ? &prompt[s - 1] : prompt;
        const int k = s ? 1 : np;
        const tq_status st = tq_session_eval(c, tok, k, lc) == TQ_OK && tq_cuda_session_eval(gw, tok, k, lw) == TQ_OK &&
                                     tq_cuda_session_eval(gj, tok, k, lj) == TQ_OK
                                 ? TQ_OK
                                 : TQ_E_CUDA;
        CHECK(st == TQ_OK, "native step %d: %s", s, tq_last_error());
        if (st != TQ_OK)
            break;
        const double a = logit_kl(lj, lw, V), b = logit_kl(lc, lw, V);
        wj = a > wj ? a : wj;
        wc = b > wc ? b : wc;
        same += argmax_f(lj, V) == argmax_f(lw, V);
        samec += argmax_f(lc, V) == argmax_f(lw, V);
        n++;
    }
    printf("native Q8_0 head (random SmolLM2-shape model, %d positions; kernels: %s): wide kernel vs decode job max KL "
           "%.2e, top-1 %d/%d; vs CPU native (f32 cache) max KL %.2e, top-1 %d/%d\n", n,
           gw ? tq_cuda_session_kernels(gw) : "-", wj, same, n, wc, samec, n);
    CHECK(n == steps + 1 && wj < 1e-3 && same == n, "wide head vs decode job: max KL %.3e, top-1 %d/%d", wj, same, n);
    CHECK(wc < 0.05, "GPU native vs CPU native: max KL %.3e", wc);
    free(lc), free(lw), free(lj);
    tq_session_free(c);
    tq_cuda_session_free(gw);
    tq_cuda_session_free(gj);
    tq_model_free(m);
}

static void drift_by_inputs(void)
{
    char path[96];
    snprintf(path, sizeof path, "/tmp/tq_cuda_gen_rand30_%d.gguf", (int)getpid());
    tq_status st = rand_gguf_write(path, TQ_GGML_Q8_0, 30, t_seed);
    CHECK(st == TQ_OK, "random SmolLM2-shape GGUF: %s", tq_last_error());
    tq_model *m = NULL;
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_BF16;
    mo.weight_store = TQ_STORE_DEQUANT;
    if (st == TQ_OK)
        CHECK(tq_model_load(path, &mo, &m) == TQ_OK, "load: %s", tq_last_error());
    if (m)
        native_head(path);
    remove(path);
    if (!m)
        return;
    tq_model_info mi;
    tq_model_get_info(m, &mi);
    const int V = mi.vocab_size, np = 64, steps = 8;
    static const char *schemes[3] = {"bf16", "kv8", "turbo:k8v3"};
    static const struct { int in; const char *name; } M[] = {
        {TQ_CUDA_IN_BF16, "bf16"}, {TQ_CUDA_IN_KV_F32, "K/V f32"}, {TQ_CUDA_IN_F32, "all f32"}};
    int32_t prompt[64], stream[8];
    tq_rng rng;
    tq_rng_seed(&rng, t_seed ^ 0xd41fu);
    for (int i = 0; i < np; i++)
        prompt[i] = (int32_t)(tq_rng_u64(&rng) % (uint64_t)V);
    /* CPU logits of every scheme and position (the token stream: the CPU bf16 cache's argmax) */
    float *lc = malloc((size_t)3 * (steps + 1) * V * 4), *lg = malloc((size_t)V * 4);
    for (int si = 0; si < 3 && lc; si++) {
        tq_session_opts so;
        tq_session_opts_default(&so);
        tq_kv_scheme_parse(schemes[si], &so.kv);
        so.n_ctx = np + steps + 4;
        tq_session *c = NULL;
        CHECK(tq_session_create(m, &so, &c) == TQ_OK, "CPU %s: %s", schemes[si], tq_last_error());
        for (int s = 0; c && s <= steps; s++) {
            float *out = lc + ((size_t)si * (steps + 1) + s) * V;
            st = s ? tq_session_eval(c, &stream[s - 1], 1, out) : tq_session_eval(c, prompt, np, out);
            CHECK(st == TQ_OK, "CPU eval: %s", tq_last_error());
            if (si == 0 && s < steps)
                stream[s] = argmax_f(out, V);
        }
        tq_session_free(c);
    }
    double turbo_mean[3] = {0, 0, 0};
    for (int k = 0; k < 3 && lc; k++) {
        printf("drift GPU vs CPU (same scheme), random SmolLM2-shape model, 64 + %d positions, GPU inputs %-8s:",
               steps, M[k].name);
        for (int si = 0; si < 3; si++) {
            tq_kv_scheme ks;
            tq_kv_scheme_parse(schemes[si], &ks);
            tq_cuda_session *g = NULL;
            tq_cuda_session_opts go = {0};
            go.inputs = M[k].in;
            CHECK(tq_cuda_session_create(m, ks, np + steps + 4, &g) == TQ_OK &&
                      tq_cuda_session_set_opts(g, &go) == TQ_OK, "GPU %s: %s", schemes[si], tq_last_error());
            double sum = 0, worst = 0;
            int top1 = 0, n = 0;
            for (int s = 0; g && s <= steps; s++) {
                st = s ? tq_cuda_session_eval(g, &stream[s - 1], 1, lg) : tq_cuda_session_eval(g, prompt, np, lg);
                CHECK(st == TQ_OK, "GPU eval: %s", tq_last_error());
                if (st != TQ_OK)
                    break;
                const float *ref = lc + ((size_t)si * (steps + 1) + s) * V;
                const double kk = logit_kl(ref, lg, V);
                sum += kk;
                worst = kk > worst ? kk : worst;
                top1 += argmax_f(ref, V) == argmax_f(lg, V);
                n++;
            }
            tq_cuda_session_free(g);
            printf(" | %s KL mean %.2e max %.2e top-1 %d/%d", schemes[si], n ? sum / n : 0.0, worst, top1, n);
            CHECK(n == steps + 1, "%s / %s: %d positions ran", M[k].name, schemes[si], n);
            if (si == 0)
                CHECK(worst < 0.01, "%s inputs, bf16 cache: max KL %.3e >= 0.01", M[k].name, worst);
            else if (M[k].in != TQ_CUDA_IN_BF16) /* bf16 inputs: printed only (the drift being fixed) */
                CHECK(n && sum / n < 0.1 && top1 >= (int)(0.85 * n), "%s inputs, %s: mean KL %.3e, top-1 %d/%d",
                      M[k].name, schemes[si], n ? sum / n : 0.0, top1, n);
            if (M[k].in == TQ_CUDA_IN_F32 && si == 0) /* f32 activations everywhere: the bf16 cache then
                                                       * drifts like another f32 summation order (CPU
                                                       * avx2 vs avx512: 1.9e-7; measured 2.1e-7) */
                CHECK(worst < 1e-5, "all-f32 inputs, bf16 cache: max KL %.3e >= 1e-5", worst);
            if (si == 2)
                turbo_mean[k] = n ? sum / n : 1.0;
        }
        printf("\n");
    }
    /* the fix: f32 K/V inputs halve the turbo drift (measured 2026-12-03: 2.2e-3 -> 1.1e-3, all f32
     * 7.2e-4; what remains is the attention kernel's own ~2-8e-4 relative error, test_cuda_kv) */
    CHECK(turbo_mean[1] < 0.8 * turbo_mean[0] && turbo_mean[2] < 0.8 * turbo_mean[0],
          "turbo drift with f32 K/V inputs %.3e / all f32 %.3e not below 0.8x bf16 inputs' %.3e", turbo_mean[1],
          turbo_mean[2], turbo_mean[0]);
    free(lc);
    free(lg);
    tq_model_free(m);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_cuda_gen");
    if (!tq_cuda_compiled())
        return t_skip("built without CUDA");
    if (tq_cuda_available() < 1)
        return t_skip("no CUDA device");
    kernel_cases();
    gen_cases();
    prefill_chunks();
    encoder_in_forward();
    exact_kv_inputs();
    int quick = 0;
    for (int i = 1; i < argc; i++)
        quick |= !strcmp(argv[i], "--quick");
    if (!quick)
        drift_by_inputs();
    return t_done();
}
