/* test_cuda_fwd.c -- the engine's forward on the GPU (tq_cuda_session) against the CPU engine
 * (tq_session) on the same model and the same BF16 weights (labels cuda + model; exits 77 without
 * a device or without the model file):
 *  prompts: three short texts (token ids of the SmolLM2 tokenizer, fixed below) and 300 seeded
 *  random token ids (several prefill chunks on the GPU); after the prompt, 8 greedy decode steps
 *  (the CPU's argmax is fed to both). At every step: the CPU (f32 cache) and GPU logits are
 *  compared: KL(cpu || gpu) of the softmax and top-1 agreement. GPU caches: bf16 (the brief's
 *  proof: top-1 equal except where the CPU's own top-2 margin is below 0.05 logits, max KL
 *  < 0.01), kv8 (max KL < 0.05) and turbo:k8v3 (max KL < 0.5; quantized cache, reported).
 * Usage: test_cuda_fwd [-s SEED] [MODEL] (default models/SmolLM2-135M-Instruct.Q4_1.gguf). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "turboquant.h"

static const int32_t P0[] = {504, 3575, 282, 4649, 314, 7042, 30, 378, 3575, 282, 4521, 314};
static const int32_t P1[] = {1604, 3987, 46477, 24, 94, 727, 472, 585, 304, 2067, 216, 34, 42, 448, 1003, 304, 472, 1003};
static const int32_t P2[] = {6403, 1980, 253, 655, 28, 281, 253, 1165, 6560, 418, 260, 5595, 282, 253, 1109, 3150, 28,
                             665, 4161, 253, 1805, 8180, 3365};

static int argmax(const float *x, int n, float *margin)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    float second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != b && x[i] > second)
            second = x[i];
    if (margin)
        *margin = x[b] - second;
    return b;
}

/* KL(softmax(p) || softmax(q)) in float64 */
static double kl(const float *p, const float *q, int n)
{
    double mp = -INFINITY, mq = -INFINITY;
    for (int i = 0; i < n; i++) {
        mp = p[i] > mp ? p[i] : mp;
        mq = q[i] > mq ? q[i] : mq;
    }
    double zp = 0, zq = 0;
    for (int i = 0; i < n; i++) {
        zp += exp(p[i] - mp);
        zq += exp(q[i] - mq);
    }
    double k = 0;
    for (int i = 0; i < n; i++) {
        const double lp = p[i] - mp - log(zp), lq = q[i] - mq - log(zq);
        k += exp(lp) * (lp - lq);
    }
    return k;
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_cuda_fwd");
    const char *path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-' && (i == 1 || strcmp(argv[i - 1], "-s")))
            path = argv[i];
    if (!tq_cuda_compiled())
        return t_skip("built without CUDA");
    if (tq_cuda_available() < 1)
        return t_skip("no CUDA device");
    FILE *f = fopen(path, "rb");
    if (!f)
        return t_skip("model file not found (models/ is not committed)");
    fclose(f);

    tq_model *m = NULL;
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_BF16;
    tq_status st = tq_model_load(path, &mo, &m);
    CHECK(st == TQ_OK, "load %s: %s", path, tq_last_error());
    if (st != TQ_OK)
        return t_done();
    tq_model_info mi;
    tq_model_get_info(m, &mi);
    const int V = mi.vocab_size;

    int32_t rnd[300];
    srand(t_seed);
    for (int i = 0; i < 300; i++)
        rnd[i] = (int32_t)(rand() % V);
    const int32_t *prompts[4] = {P0, P1, P2, rnd};
    const int lens[4] = {(int)(sizeof(P0) / 4), (int)(sizeof(P1) / 4), (int)(sizeof(P2) / 4), 300};
    const char *schemes[3] = {"bf16", "kv8", "turbo:k8v3"};
    const double max_kl[3] = {0.01, 0.05, 0.5};
    const int steps = 8;

    float *lc = malloc((size_t)V * 4), *lg = malloc((size_t)V * 4);
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("f32", &so.kv);
    so.n_ctx = 512;
    tq_session *cs = NULL;
    st = tq_session_create(m, &so, &cs);
    CHECK(st == TQ_OK, "CPU session: %s", tq_last_error());
    for (int si = 0; si < 3 && cs; si++) {
        tq_kv_scheme kvs;
        tq_kv_scheme_parse(schemes[si], &kvs);
        tq_cuda_session *gs = NULL;
        st = tq_cuda_session_create(m, kvs, 512, &gs);
        CHECK(st == TQ_OK, "GPU session %s: %s", schemes[si], tq_last_error());
        if (st != TQ_OK)
            continue;
        double worst = 0, sum = 0;
        int n = 0, top1 = 0, top1_excused = 0;
        for (int p = 0; p < 4; p++) {
            tq_session_reset(cs);
            tq_cuda_session_reset(gs);
            const int32_t *tok = prompts[p];
            int len = lens[p];
            int32_t next;
            for (int s = 0; s <= steps; s++) {
                st = tq_session_eval(cs, tok, len, lc);
                CHECK(st == TQ_OK, "CPU eval: %s", tq_last_error());
                st = tq_cuda_session_eval(gs, tok, len, lg);
                CHECK(st == TQ_OK, "GPU eval %s: %s", schemes[si], tq_last_error());
                if (st != TQ_OK)
                    break;
                CHECK(tq_cuda_session_n_past(gs) == tq_session_n_past(cs), "n_past GPU %lld CPU %lld",
                      (long long)tq_cuda_session_n_past(gs), (long long)tq_session_n_past(cs));
                float margin;
                const int a = argmax(lc, V, &margin), b = argmax(lg, V, NULL);
                const double k = kl(lc, lg, V);
                int finite = 1;
                for (int i = 0; i < V; i++)
                    finite &= isfinite(lg[i]);
                CHECK(finite, "%s prompt %d step %d: non-finite GPU logits", schemes[si], p, s);
                worst = k > worst ? k : worst;
                sum += k;
                n++;
                if (a == b)
                    top1++;
                else if (margin < 0.05f)
                    top1_excused++;
                else if (si == 0)
                    CHECK(0, "%s prompt %d step %d: top-1 CPU %d GPU %d (CPU margin %.3f), KL %.2e", schemes[si],
                          p, s, a, b, margin, k);
                next = a;
                tok = &next;
                len = 1;
            }
        }
        printf("GPU %-10s vs CPU f32 cache: %d steps, top-1 equal %d (+%d near-ties), KL mean %.2e max %.2e\n",
               schemes[si], n, top1, top1_excused, n ? sum / n : 0.0, worst);
        CHECK(worst < max_kl[si], "%s: max KL %.3e >= %.3e", schemes[si], worst, max_kl[si]);
        tq_cuda_session_free(gs);
    }
    /* bad input: a token outside the vocabulary, and overflow past n_ctx */
    {
        tq_kv_scheme kvs;
        tq_kv_scheme_parse("bf16", &kvs);
        tq_cuda_session *gs = NULL;
        if (tq_cuda_session_create(m, kvs, 4, &gs) == TQ_OK) {
            const int32_t bad = V;
            CHECK(tq_cuda_session_eval(gs, &bad, 1, NULL) == TQ_E_ARG, "token == vocab is TQ_E_ARG");
            const int32_t five[5] = {1, 2, 3, 4, 5};
            CHECK(tq_cuda_session_eval(gs, five, 5, NULL) == TQ_E_OVERFLOW, "5 tokens into n_ctx 4");
            CHECK(tq_cuda_session_n_past(gs) == 0, "nothing appended on error");
            tq_cuda_session_free(gs);
        }
    }
    tq_session_free(cs);
    tq_model_free(m);
    free(lc);
    free(lg);
    return t_done();
}
