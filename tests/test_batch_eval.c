/* test_batch_eval.c -- tq_batch_eval() (several sessions in one forward pass) against the
 * oracle of each session evaluated alone with tq_session_eval(): on the four tiny random models
 * (tests/data/tiny), f32 and bf16 weights, f32 / bf16 / turbo / rot: caches, N sessions with prompts
 * of different lengths decode greedily together while the active set changes every step and a
 * prompt chunk of one or two other sessions rides along in the same pass (the server prefills
 * several prompts in one step); every logits row must be
 * bit-identical to the lone run. Then the refusals: the same session twice, a token outside
 * the vocabulary, a full context (nothing appended anywhere), too many rows. */
#include "t.h"
#include "turboquant.h"

#define NSEQ 6
#define STEPS 14
#define NRIDE 2 /* sessions fed prompt chunks inside the batched passes */

static const char *models[] = {"tests/data/tiny/llama", "tests/data/tiny/qwen2",
                               "tests/data/tiny/qwen3", "tests/data/tiny/gemma3"};

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

static uint32_t rng_next(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void run(const char *path, tq_dtype wt, const char *kv_name)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = wt;
    mo.n_threads = 2;
    tq_model *m = NULL;
    CHECK(tq_model_load(path, &mo, &m) == TQ_OK, "%s: %s", path, tq_last_error());
    if (!m)
        return;
    tq_model_info info;
    tq_model_get_info(m, &info);
    const int V = info.vocab_size;
    tq_session_opts so;
    tq_session_opts_default(&so);
    so.n_ctx = 128;
    so.n_batch = 64;
    if (tq_kv_scheme_parse(kv_name, &so.kv) != TQ_OK) {
        CHECK(0, "scheme %s", kv_name);
        tq_model_free(m);
        return;
    }
    /* batched, alone; [NSEQ..NSEQ+NRIDE) the riders */
    tq_session *a[NSEQ + NRIDE] = {0}, *b[NSEQ + NRIDE] = {0};
    for (int i = 0; i < NSEQ + NRIDE; i++) {
        if (tq_session_create(m, &so, &a[i]) || tq_session_create(m, &so, &b[i])) {
            printf("  %s kv %s: not usable here (%s), skipped\n", path, kv_name, tq_last_error());
            for (int k = 0; k <= i; k++) {
                tq_session_free(a[k]);
                tq_session_free(b[k]);
            }
            tq_model_free(m);
            return;
        }
    }
    uint32_t seed = t_seed;
    float *la = malloc((size_t)(NSEQ + NRIDE) * V * sizeof(float));
    float *lb = malloc((size_t)V * sizeof(float));
    int32_t next[NSEQ + NRIDE];
    int32_t prompt[NSEQ + NRIDE][40];
    int plen[NSEQ + NRIDE];
    /* prompts of lengths 1..33, prefilled alone in both sets (the prefill is not under test) */
    for (int i = 0; i < NSEQ; i++) {
        plen[i] = 1 + (int)(rng_next(&seed) % 33);
        for (int t = 0; t < plen[i]; t++)
            prompt[i][t] = (int32_t)(rng_next(&seed) % (uint32_t)V);
        CHECK(tq_session_eval(a[i], prompt[i], plen[i], la) == TQ_OK, "prefill a");
        CHECK(tq_session_eval(b[i], prompt[i], plen[i], lb) == TQ_OK, "prefill b");
        CHECK_MEMEQ(la, lb, (size_t)V * sizeof(float), "prefill logits differ");
        next[i] = argmax(lb, V);
    }
    /* the riders: 40-token prompts fed in chunks of 5..12 inside the batched passes, the
     * second from step 2 on (steps with one and with two prompt chunks in the pass) */
    int rider_fed[NRIDE] = {0};
    for (int q = 0; q < NRIDE; q++) {
        plen[NSEQ + q] = 40;
        for (int t = 0; t < 40; t++)
            prompt[NSEQ + q][t] = (int32_t)(rng_next(&seed) % (uint32_t)V);
    }
    int n_bad = 0, n_rows = 0, n_two = 0;
    for (int step = 0; step < STEPS; step++) {
        tq_session *ss[NSEQ + NRIDE];
        const int32_t *tk[NSEQ + NRIDE];
        int64_t nn[NSEQ + NRIDE];
        int idx[NSEQ + NRIDE], k = 0;
        for (int i = 0; i < NSEQ; i++)
            if (step == 0 || rng_next(&seed) % 4 != 0) { /* some sit out a step */
                idx[k] = i;
                ss[k] = a[i];
                tk[k] = &next[i];
                nn[k] = 1;
                k++;
            }
        int rider = -1, n_riding = 0;
        for (int q = 0; q < NRIDE; q++) {
            if (rider_fed[q] >= 40 || step < 2 * q)
                continue;
            int c = 5 + (int)(rng_next(&seed) % 8);
            if (c > 40 - rider_fed[q])
                c = 40 - rider_fed[q];
            if (rider < 0)
                rider = k;
            idx[k] = NSEQ + q;
            ss[k] = a[NSEQ + q];
            tk[k] = prompt[NSEQ + q] + rider_fed[q];
            nn[k] = c;
            k++;
            n_riding++;
        }
        n_two += n_riding == 2;
        if (k == 0)
            continue;
        /* the rider goes first or last on alternate steps: position in the batch must not matter */
        if (rider >= 0 && (step & 1) && k > 1) {
            tq_session *s0 = ss[0];
            const int32_t *t0 = tk[0];
            int64_t n0 = nn[0];
            int i0 = idx[0];
            ss[0] = ss[rider], tk[0] = tk[rider], nn[0] = nn[rider], idx[0] = idx[rider];
            ss[rider] = s0, tk[rider] = t0, nn[rider] = n0, idx[rider] = i0;
        }
        tq_status st = tq_batch_eval(ss, tk, nn, k, la);
        CHECK(st == TQ_OK, "batch step %d: %s", step, tq_last_error());
        for (int j = 0; j < k; j++) {
            const int i = idx[j];
            CHECK(tq_session_eval(b[i], tk[j], nn[j], lb) == TQ_OK, "alone");
            n_rows++;
            if (memcmp(la + (size_t)j * V, lb, (size_t)V * sizeof(float))) {
                n_bad++;
                CHECK(0, "%s w%d kv %s step %d seq %d (n %lld of %d in the pass): logits differ "
                         "from the lone run", path, (int)wt, kv_name, step, i, (long long)nn[j], k);
            }
            CHECK(tq_session_n_past(a[i]) == tq_session_n_past(b[i]), "n_past");
            if (i >= NSEQ)
                rider_fed[i - NSEQ] += (int)nn[j];
            else
                next[i] = argmax(lb, V);
        }
    }
    printf("  %-22s weights %d kv %-10s %d rows bit-identical to lone runs, %d differ (%d "
           "passes with two prompt chunks)\n", path, (int)wt, kv_name, n_rows - n_bad, n_bad,
           n_two);
    CHECK(n_two > 0, "no pass had two prompt chunks");

    /* refusals: nothing appended anywhere */
    const int64_t p0 = tq_session_n_past(a[0]), p1 = tq_session_n_past(a[1]);
    tq_session *two[2] = {a[0], a[0]};
    const int32_t tok1 = 1, badtok = V;
    const int32_t *tk2[2] = {&tok1, &tok1};
    const int64_t n1[2] = {1, 1};
    CHECK(tq_batch_eval(two, tk2, n1, 2, la) == TQ_E_ARG, "same session twice");
    tq_session *pair[2] = {a[0], a[1]};
    const int32_t *tkb[2] = {&tok1, &badtok};
    CHECK(tq_batch_eval(pair, tkb, n1, 2, la) == TQ_E_ARG, "token id = vocab");
    const int64_t big[2] = {1, 128};
    static const int32_t zeros[128];
    const int32_t *tkbig[2] = {&tok1, zeros};
    CHECK(tq_batch_eval(pair, tkbig, big, 2, la) == TQ_E_OVERFLOW, "context overflow");
    const int64_t rows[2] = {1, 64};
    CHECK(tq_batch_eval(pair, tkbig, rows, 2, la) != TQ_OK, "rows over n_batch");
    CHECK(tq_session_n_past(a[0]) == p0 && tq_session_n_past(a[1]) == p1,
          "a refused batch appended tokens");

    free(la);
    free(lb);
    for (int i = 0; i < NSEQ + NRIDE; i++) {
        tq_session_free(a[i]);
        tq_session_free(b[i]);
    }
    tq_model_free(m);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_batch_eval");
    /* rot: the default scheme (its caches run a batch's sequences in one job: kvcache_rot.c) */
    const char *kvs[] = {"f32", "bf16", "turbo", "rot:l181g64/l32g64"};
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
        for (int w = 0; w < 2; w++)
            for (int k = 0; k < 4; k++)
                run(models[i], w ? TQ_DTYPE_BF16 : TQ_DTYPE_F32, kvs[k]);
    return t_done();
}
