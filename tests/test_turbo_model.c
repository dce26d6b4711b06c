/* test_turbo_model.c -- the TurboQuant cache on SmolLM2-135M-Instruct (head_dim 64, 9/3 heads):
 *  1. fused attention == dequantize-window reference on the REAL cache of a 222-token prompt,
 *     every layer, prefill and decode queries: the same floats but for rare 1-ulp near-ties
 *     (the criterion of test_turbo_attn);
 *  2. greedy text of both paths for 64 tokens on 12 prompts and three schemes: identical on
 *     most prompts (both compute the same floats, so a difference needs a near-tie rounding
 *     difference that then crosses a quantization boundary);
 *  2b. teacher-forced KL on one window: the two paths' logits agree far below the codec's error;
 *  3. no NaN anywhere in the logits for turbo k2v2 / k4v2 (the constant-block guard). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/engine.h"
#include "model/kvcache_turbo.h"
#include "t.h"

#define MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define NGEN 64

static tq_session *mk(tq_model *m, const char *kv, const char *mode, int ctx)
{
    tq_session_opts o;
    tq_session_opts_default(&o);
    tq_kv_scheme_parse(kv, &o.kv);
    o.n_ctx = ctx;
    o.turbo_attn = !strcmp(mode, "ref")    ? TQ_TURBO_ATTN_REF
                   : !strcmp(mode, "both") ? TQ_TURBO_ATTN_BOTH
                                           : TQ_TURBO_ATTN_FUSED;
    tq_session *s = NULL;
    if (tq_session_create(m, &o, &s))
        printf("session %s: %s\n", kv, tq_last_error());
    return s;
}

static int argmax(const float *x, int n)
{
    int a = 0;
    for (int i = 1; i < n; i++)
        a = x[i] > x[a] ? i : a;
    return a;
}

static int greedy(tq_session *s, const int32_t *p, int np, int V, int32_t *out)
{
    float *lg = malloc((size_t)V * sizeof(float));
    int nonfinite = 0;
    tq_session_eval(s, p, np, lg);
    for (int i = 0; i < NGEN; i++) {
        for (int v = 0; v < V; v++)
            nonfinite += !isfinite(lg[v]);
        out[i] = argmax(lg, V);
        tq_session_eval(s, &out[i], 1, lg);
    }
    free(lg);
    return nonfinite;
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_turbo_model");
    if (access(MODEL, R_OK))
        return t_skip(MODEL " missing (models/ is not committed; see README)");
    tq_model *m = NULL;
    tq_tokenizer *tok = NULL;
    CHECK(tq_model_load(MODEL, NULL, &m) == TQ_OK, "load: %s", tq_last_error());
    CHECK(tq_tokenizer_load(MODEL, &tok) == TQ_OK, "tokenizer");
    if (!m || !tok)
        return t_done();
    tq_model_info info;
    tq_model_get_info(m, &info);
    const int V = info.vocab_size;

    /* 1. real cache: fill with a 300-token text through the reference-capable cache, then
     * compare both attentions on every layer for a prefill block and a decode query */
    {
        static const char text[] =
            "The tower is 324 metres tall, about the same height as an 81-storey building, and "
            "the tallest structure in Paris. Its base is square, measuring 125 metres on each "
            "side. During its construction, the Eiffel Tower surpassed the Washington Monument "
            "to become the tallest man-made structure in the world, a title it held for 41 "
            "years until the Chrysler Building in New York City was finished in 1930. It was "
            "the first structure to reach a height of 300 metres. Due to the addition of a "
            "broadcasting aerial at the top of the tower in 1957, it is now taller than the "
            "Chrysler Building by 5.2 metres. Excluding transmitters, the Eiffel Tower is the "
            "second tallest free-standing structure in France after the Millau Viaduct. The "
            "tower has three levels for visitors, with restaurants on the first and second "
            "levels. The top level's upper platform is 276 m above the ground, the highest "
            "observation deck accessible to the public in the European Union.";
        int32_t ids[512];
        int64_t n = 0;
        CHECK(tq_tokenizer_encode(tok, text, sizeof(text) - 1, 0, ids, 512, &n) == TQ_OK, "enc");
        for (const char *kv = "turbo"; kv; kv = strcmp(kv, "turbo") ? NULL : "turbo:k4v2+rk") {
            tq_session *s = mk(m, kv, "both", 512);
            if (!s)
                continue;
            tq_session_eval(s, ids, n, NULL);
            const int hd = info.head_dim, qd = info.n_heads * hd;
            const int64_t nq = 40;
            float *q = malloc((size_t)nq * qd * sizeof(float)), *a = malloc((size_t)nq * qd * 4),
                  *b = malloc((size_t)nq * qd * 4);
            srand(t_seed);
            for (int64_t i = 0; i < nq * qd; i++)
                q[i] = 4.0f * ((float)rand() / (float)RAND_MAX - 0.5f);
            int64_t n_cmp = 0, n_diff = 0, n_far = 0;
            for (int il = 0; il < info.n_layers; il++)
                for (int pass = 0; pass < 2; pass++) {
                    const int64_t nqq = pass ? 1 : nq, pos0 = n - nqq;
                    tq_kvc_turbo_attend_fused(s->kv, il, q, nqq, pos0, a, m->pool);
                    tq_kvc_turbo_attend_ref(s->kv, il, q, nqq, pos0, b, m->pool);
                    for (int64_t i = 0; i < nqq * qd; i++) {
                        n_cmp++;
                        if (memcmp(&a[i], &b[i], sizeof(float)) == 0)
                            continue;
                        n_diff++;
                        n_far += fabs((double)a[i] - b[i]) >
                                 fabs((double)nextafterf(b[i], INFINITY) - b[i]);
                    }
                }
            printf("real cache %s (%lld tokens, %d layers): fused vs reference: %lld of %lld "
                   "floats differ, %lld by more than one ulp\n", kv, (long long)n, info.n_layers,
                   (long long)n_diff, (long long)n_cmp, (long long)n_far);
            CHECK(n_far == 0 && n_diff * 1000 <= n_cmp, "%s: real cache fused vs reference", kv);
            free(q);
            free(a);
            free(b);
            tq_session_free(s);
        }
    }

    /* 2. greedy text of both paths */
    static const char *prompts[] = {
        "The capital of France is",
        "Once upon a time, in a small village by the sea,",
        "def fibonacci(n):",
        "The three laws of thermodynamics state that",
        "Water boils at 100 degrees Celsius because",
        "My favourite recipe for chocolate cake starts with",
        "Write a short poem about the moon.",
        "The main causes of the First World War were",
        "In Python, a list comprehension is",
        "Photosynthesis is the process by which",
        "The stock market fell sharply on Monday after",
        "Here are five tips for learning a new language:",
    };
    const int np = (int)(sizeof prompts / sizeof prompts[0]);
    const char *schemes[] = {"turbo", "turbo:k4v3", "turbo:k4v2+rk"};
    for (int k = 0; k < 3; k++) {
        int same = 0;
        for (int i = 0; i < np; i++) {
            int32_t ids[128], tf[NGEN], tr[NGEN];
            int64_t n = 0;
            tq_tokenizer_encode(tok, prompts[i], strlen(prompts[i]), 0, ids, 128, &n);
            tq_session *sf = mk(m, schemes[k], "fused", 256), *sr = mk(m, schemes[k], "ref", 256);
            CHECK(greedy(sf, ids, (int)n, V, tf) == 0, "finite logits");
            greedy(sr, ids, (int)n, V, tr);
            int first = NGEN;
            for (int t = 0; t < NGEN; t++)
                if (tf[t] != tr[t]) {
                    first = t;
                    break;
                }
            same += first == NGEN;
            printf("  %-13s prompt %2d: %s (first difference at token %d)\n", schemes[k], i,
                   first == NGEN ? "identical 64 tokens" : "differs", first);
            tq_session_free(sf);
            tq_session_free(sr);
        }
        printf("%s: fused == reference greedy text on %d of %d prompts\n", schemes[k], same, np);
        /* Identical text is not guaranteed: a rare 1-ulp near-tie in one attention output can
         * move an element of the next layer's K/V across a quantization boundary, and such
         * flips cascade (docs/results.md). Most prompts must agree. */
        CHECK(2 * same > np, "%s: identical greedy text on most prompts (%d of %d)", schemes[k],
              same, np);
    }

    /* 2b. teacher-forced KL on one 256-token window: KL(ref || fused) is small next to the
     * quantization error itself, KL(f32 || ref) and KL(f32 || fused) */
    {
        static const char text[] =
            "Robert Boulter is an English film, television and theatre actor. He had a guest "
            "starring role on the television series The Bill in 2000. This was followed by a "
            "starring role in the play Herons written by Simon Stephens, which was performed in "
            "2001 at the Royal Court Theatre. He had a guest role in the television series "
            "Judge John Deed in 2002. In 2004 Boulter landed a role as Craig in the episode "
            "Teddy's Story of the television series The Long Firm; he starred alongside actors "
            "Mark Strong and Derek Jacobi. He was cast in the 2005 theatre productions of the "
            "Philip Ridley play Mercury Fur, which was performed at the Drum Theatre in "
            "Plymouth and the Menier Chocolate Factory in London. He was directed by John "
            "Tiffany and starred alongside Ben Whishaw, Shane Zaza, Harry Kent, Fraser Ayres, "
            "Sophie Stanton and Dominic Hall. In 2006, Boulter starred alongside Whishaw in the "
            "play Citizenship written by Mark Ravenhill.";
        int32_t ids[512];
        int64_t n = 0;
        tq_tokenizer_encode(tok, text, sizeof(text) - 1, 0, ids, 512, &n);
        if (n > 256)
            n = 256;
        float *L[3];
        const char *kv[3] = {"f32", "turbo", "turbo"}, *mode[3] = {"fused", "fused", "ref"};
        for (int k = 0; k < 3; k++) {
            L[k] = malloc((size_t)n * V * sizeof(float));
            tq_session *s = mk(m, kv[k], mode[k], 256);
            tq_session_eval_all(s, ids, n, L[k], n * V);
            tq_session_free(s);
        }
        double kl[3] = {0, 0, 0}; /* f32||fused, f32||ref, ref||fused */
        const int pairs[3][2] = {{0, 1}, {0, 2}, {2, 1}};
        for (int pr = 0; pr < 3; pr++)
            for (int64_t i = n / 2; i < n; i++) {
                const float *p = L[pairs[pr][0]] + i * V, *q = L[pairs[pr][1]] + i * V;
                double mp = -1e30, mq = -1e30, sp = 0, sq = 0, acc = 0;
                for (int v = 0; v < V; v++) {
                    mp = p[v] > mp ? p[v] : mp;
                    mq = q[v] > mq ? q[v] : mq;
                }
                for (int v = 0; v < V; v++) {
                    sp += exp(p[v] - mp);
                    sq += exp(q[v] - mq);
                }
                for (int v = 0; v < V; v++) {
                    const double lp = p[v] - mp - log(sp), lq = q[v] - mq - log(sq);
                    acc += exp(lp) * (lp - lq);
                }
                kl[pr] += acc / (double)(n - n / 2);
            }
        printf("k8v3, %lld tokens, scored second half: KL(f32||fused) %.5f, KL(f32||ref) %.5f, "
               "KL(ref||fused) %.5f\n", (long long)n, kl[0], kl[1], kl[2]);
        CHECK(fabs(kl[0] - kl[1]) <= 0.01 * kl[1], "fused and reference equally good");
        CHECK(kl[2] < 0.01 * kl[1], "fused-vs-reference divergence far below the quantization "
                                    "error (%g vs %g)", kl[2], kl[1]);
        for (int k = 0; k < 3; k++)
            free(L[k]);
    }

    /* 3. low-bit keys never give NaN logits */
    for (const char *kv = "turbo:k2v2"; kv; kv = strcmp(kv, "turbo:k2v2") ? NULL : "turbo:k4v2") {
        int32_t ids[128], out[NGEN];
        int64_t n = 0;
        tq_tokenizer_encode(tok, prompts[1], strlen(prompts[1]), 0, ids, 128, &n);
        tq_session *s = mk(m, kv, "fused", 256);
        CHECK(greedy(s, ids, (int)n, V, out) == 0, "%s: finite logits", kv);
        tq_session_free(s);
    }
    tq_tokenizer_free(tok);
    tq_model_free(m);
    return t_done();
}
