/* test_sample.c -- the sampler against distributions whose answers are known by construction:
 * greedy = argmax (ties to the lower id), top-k/top-p/min-p keep exactly the right sets (checked
 * against a brute-force sort in this file), temperature-scaled frequencies match the softmax,
 * the repetition penalty and its window, presence/frequency penalties (hand-computed logits),
 * tq_logprobs (log-softmax and top list vs a double-precision computation here), seeds, bad
 * parameters, and no allocation per token. The vector argmax kernels (cpu/argmax.h) equal the
 * scalar reference on rows with NaN, +-inf, FLT_MAX, ties and every length 0..80 plus 49152. */
#include <float.h>

#include "core/rng.h"
#include "cpu/argmax.h"
#include "t.h"
#include "turboquant.h"

/* brute force: ids sorted by logit descending, ties by id (libc qsort under a total order) */
static const float *order_l;
static int order_cmp(const void *pa, const void *pb)
{
    const int a = *(const int *)pa, b = *(const int *)pb;
    if (order_l[a] != order_l[b])
        return order_l[a] > order_l[b] ? -1 : 1;
    return (a > b) - (a < b);
}

static void order(const float *l, int n, int *ids)
{
    for (int i = 0; i < n; i++)
        ids[i] = i;
    order_l = l;
    qsort(ids, (size_t)n, sizeof(int), order_cmp);
}

static tq_sampler *make(float temp, int top_k, float top_p, float min_p, int64_t n_vocab)
{
    tq_sampler_params p = tq_sampler_params_default();
    tq_sampler *s = NULL;
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = t_seed;
    tq_status st = tq_sampler_create(&p, n_vocab, &s);
    CHECK(st == TQ_OK, "create: %s", tq_last_error());
    return s;
}

/* dist() keeps exactly the ids want[0..nw) in that order, probabilities = softmax(l/T) over them */
static void check_kept_ref(tq_sampler *s, const float *in, const float *l, float temp,
                           const int *want, int nw, const char *what)
{
    static int32_t ids[49152];
    static float pr[49152];
    int64_t n = -1;
    CHECK(tq_sampler_dist(s, in, ids, pr, 49152, &n) == TQ_OK, "%s: dist", what);
    CHECK(n == nw, "%s: kept %lld, want %d", what, (long long)n, nw);
    int same = n == nw;
    for (int i = 0; same && i < nw; i++)
        same = ids[i] == want[i];
    CHECK(same, "%s: kept set or order differs", what);
    if (!same || nw == 0)
        return;
    double z = 0;
    for (int i = 0; i < nw; i++)
        z += exp(((double)l[want[i]] - l[want[0]]) / temp);
    double err = 0;
    for (int i = 0; i < nw; i++)
        err = fmax(err, fabs(pr[i] - exp(((double)l[want[i]] - l[want[0]]) / temp) / z));
    CHECK(err < 1e-6, "%s: probabilities off by %g", what, err);
}

/* the same, when the sampler sees l itself (no penalty) */
static void check_kept(tq_sampler *s, const float *l, float temp, const int *want, int nw,
                       const char *what)
{
    check_kept_ref(s, l, l, temp, want, nw, what);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_sample");
    tq_rng r;
    tq_rng_seed(&r, t_seed);

    /* greedy = argmax over random rows; ties go to the lower id; NaN is never chosen */
    {
        enum { V = 1000 };
        static float l[V];
        tq_sampler *s = make(0.0f, 0, 1.0f, 0.0f, V);
        int bad = 0;
        for (int it = 0; it < 200; it++) {
            for (int i = 0; i < V; i++)
                l[i] = tq_rng_normal(&r) * 3;
            if (it % 3 == 0) /* a tie for the maximum at two ids */
                l[700] = l[300] = 50.0f;
            if (it % 5 == 0)
                l[10] = NAN;
            int best = 0;
            while (isnan(l[best]))
                best++;
            for (int i = 0; i < V; i++)
                if (!isnan(l[i]) && l[i] > l[best])
                    best = i;
            int32_t tok = -1;
            CHECK(tq_sampler_sample(s, l, &tok) == TQ_OK, "greedy sample");
            bad += tok != best;
        }
        CHECK(bad == 0, "greedy differs from argmax in %d of 200 rows", bad);
        /* the one-pass greedy of tq_sampler_sample (no penalty in effect) against the general
         * path (tq_sampler_dist at temperature 0: copy, NaN -> -inf, +inf -> FLT_MAX, drop -inf,
         * argmax in candidate order) on rows with NaN, +-inf, FLT_MAX and ties among them */
        static const float sp[6] = {NAN, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 0.0f};
        int diff = 0;
        for (int it = 0; it < 400; it++) {
            const int mode = it % 4;
            for (int i = 0; i < V; i++)
                l[i] = mode == 3 ? sp[tq_rng_u64(&r) % 6] : tq_rng_normal(&r) * 3;
            for (int k = 0; mode && mode < 3 && k < 1 + it % 5; k++)
                l[tq_rng_u64(&r) % V] = sp[tq_rng_u64(&r) % (mode == 1 ? 6 : 2)];
            int32_t tok = -1, ref = -1;
            float pr = 0;
            int64_t nk = 0;
            CHECK(tq_sampler_sample(s, l, &tok) == TQ_OK, "one-pass greedy");
            CHECK(tq_sampler_dist(s, l, &ref, &pr, 1, &nk) == TQ_OK && nk == 1, "greedy dist");
            diff += tok != ref;
        }
        CHECK(diff == 0, "one-pass greedy differs from the general path in %d of 400 rows", diff);
        for (int i = 0; i < V; i++)
            l[i] = i % 2 ? NAN : -INFINITY;
        int32_t tok = 7;
        CHECK(tq_sampler_sample(s, l, &tok) == TQ_E_ARG && tok == 7, "greedy: no finite logit");
        tq_sampler_free(s);
    }

    /* the argmax kernels (cpu/argmax.h) against the scalar reference, every ISA this CPU runs */
    {
        enum { V = 49152 };
        static float l[V];
        static const float special[] = {NAN, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 0.0f, -0.0f};
        int bad = 0, checked = 0;
        for (int isa = TQ_ISA_AVX2; isa < TQ_ISA_COUNT; isa++) {
            const tq_argmax_fn f = tq_argmax_kernel((tq_isa)isa);
            if (f == tq_argmax_ref || !tq_cpu_supports((tq_isa)isa))
                continue;
            for (int it = 0; it < 3000; it++) {
                const int n = it < 2900 ? it % 81 : V;
                for (int i = 0; i < n; i++) {
                    const uint64_t u = tq_rng_u64(&r);
                    l[i] = (float)(u % 7); /* few distinct values: many ties */
                    if (it % 4 == 1)
                        l[i] = tq_rng_normal(&r);
                    if (it % 4 >= 2 && u % 5 == 0)
                        l[i] = special[(u >> 8) % 7];
                    if (it % 8 == 7)
                        l[i] = u % 3 ? NAN : -INFINITY; /* mostly no finite value */
                }
                const int64_t a = tq_argmax_ref(l, n), b = f(l, n);
                if (a != b && bad++ < 3)
                    fprintf(stderr, "argmax %s n %d: %lld, scalar %lld\n",
                            tq_isa_name((tq_isa)isa), n, (long long)b, (long long)a);
                checked++;
            }
        }
        CHECK(bad == 0, "vector argmax differs from the scalar in %d of %d rows", bad, checked);
        CHECK(tq_argmax_ref(l, 0) == -1, "argmax of no values");
    }

    /* a known small distribution with shuffled ids: p = .4 .3 .15 .1 .05 */
    {
        const double p[5] = {0.4, 0.3, 0.15, 0.1, 0.05};
        const int at[5] = {3, 0, 4, 1, 2}; /* probability p[i] sits at id at[i] */
        float l[5];
        for (int i = 0; i < 5; i++)
            l[at[i]] = (float)log(p[i]);
        tq_sampler *s;
        int w2[] = {3, 0}, w3[] = {3, 0, 4}, w5[] = {3, 0, 4, 1, 2}, w1[] = {3};
        s = make(1.0f, 0, 0.69f, 0.0f, 5);
        check_kept(s, l, 1.0f, w2, 2, "top_p .69");
        tq_sampler_free(s);
        s = make(1.0f, 0, 0.71f, 0.0f, 5);
        check_kept(s, l, 1.0f, w3, 3, "top_p .71");
        tq_sampler_free(s);
        s = make(1.0f, 0, 0.1f, 0.0f, 5);
        check_kept(s, l, 1.0f, w1, 1, "top_p .1");
        tq_sampler_free(s);
        s = make(1.0f, 0, 1.0f, 0.0f, 5);
        check_kept(s, l, 1.0f, w5, 5, "no filter");
        tq_sampler_free(s);
        s = make(1.0f, 3, 1.0f, 0.0f, 5);
        check_kept(s, l, 1.0f, w3, 3, "top_k 3");
        tq_sampler_free(s);
        s = make(1.0f, 9, 1.0f, 0.0f, 5);
        check_kept(s, l, 1.0f, w5, 5, "top_k 9 > vocab");
        tq_sampler_free(s);
        s = make(1.0f, 0, 1.0f, 0.3f, 5); /* threshold .3 * .4 = .12 */
        check_kept(s, l, 1.0f, w3, 3, "min_p .3");
        tq_sampler_free(s);
        s = make(1.0f, 0, 1.0f, 0.74f, 5); /* .3/.4 = .75 >= .74 */
        check_kept(s, l, 1.0f, w2, 2, "min_p .74");
        tq_sampler_free(s);
        s = make(1.0f, 2, 0.95f, 0.0f, 5); /* top-k first, then top-p over the renormalised pair */
        check_kept(s, l, 1.0f, w2, 2, "top_k 2 + top_p .95");
        tq_sampler_free(s);
        s = make(0.0f, 3, 0.5f, 0.2f, 5);
        check_kept(s, l, 1.0f, w1, 1, "greedy ignores filters");
        tq_sampler_free(s);
        /* temperature 2 flattens: weights sqrt(p) = .632 .548 .387 .316 .224 (sum 2.107); the
         * first two hold (.632+.548)/2.107 = .56 < .6 of the mass, so top_p .6 keeps three */
        s = make(2.0f, 0, 0.6f, 0.0f, 5);
        check_kept(s, l, 2.0f, w3, 3, "temperature 2 + top_p .6");
        tq_sampler_free(s);
    }

    /* a 49152-token vocabulary: top-k, top-p and min-p against the brute-force order */
    {
        enum { V = 49152 };
        static float l[V];
        static int ord[V];
        for (int i = 0; i < V; i++)
            l[i] = tq_rng_normal(&r) * 2.5f;
        l[17] = l[18] = l[40000]; /* ties */
        order(l, V, ord);
        tq_sampler *s = make(1.0f, 40, 1.0f, 0.0f, V);
        check_kept(s, l, 1.0f, ord, 40, "top_k 40 of 49152");
        tq_sampler_free(s);

        const float temps[2] = {1.0f, 0.7f};
        const float tps[3] = {0.3f, 0.9f, 0.99f};
        static float sl[V];
        for (int ti = 0; ti < 2; ti++)
            for (int pi = 0; pi < 3; pi++) {
                /* order by the scaled float logits: l/T can round two logits to one value */
                for (int i = 0; i < V; i++)
                    sl[i] = l[i] / temps[ti];
                order(sl, V, ord);
                double z = 0, cum = 0, want;
                for (int i = 0; i < V; i++)
                    z += exp(((double)l[ord[i]] - l[ord[0]]) / temps[ti]);
                want = tps[pi] * z;
                int k = 0;
                while (k < V) {
                    cum += exp(((double)l[ord[k]] - l[ord[0]]) / temps[ti]);
                    k++;
                    if (cum >= want)
                        break;
                }
                char what[64];
                snprintf(what, sizeof(what), "T %.1f top_p %.2f (keeps %d)", temps[ti], tps[pi], k);
                s = make(temps[ti], 0, tps[pi], 0.0f, V);
                check_kept(s, l, temps[ti], ord, k, what);
                tq_sampler_free(s);
            }
        order(l, V, ord);
        int k = 0;
        while (k < V && exp(((double)l[ord[k]] - l[ord[0]]) / 1.0) >= 0.05)
            k++;
        s = make(1.0f, 0, 1.0f, 0.05f, V);
        check_kept(s, l, 1.0f, ord, k, "min_p .05 of 49152");
        tq_sampler_free(s);
    }

    /* temperature: empirical frequencies of 200000 draws match softmax(l/T) */
    {
        const float l[6] = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.5f};
        const float temps[2] = {1.0f, 0.6f};
        for (int ti = 0; ti < 2; ti++) {
            tq_sampler *s = make(temps[ti], 0, 1.0f, 0.0f, 6);
            enum { N = 200000 };
            int cnt[6] = {0};
            for (int i = 0; i < N; i++) {
                int32_t t = -1;
                tq_sampler_sample(s, l, &t);
                if (t >= 0 && t < 6)
                    cnt[t]++;
            }
            double z = 0;
            for (int i = 0; i < 6; i++)
                z += exp(l[i] / temps[ti]);
            for (int i = 0; i < 6; i++) {
                double p = exp(l[i] / temps[ti]) / z, f = (double)cnt[i] / N;
                double sigma = sqrt(p * (1 - p) / N);
                CHECK(fabs(f - p) <= 5 * sigma, "T %.1f id %d: freq %.5f want %.5f (5 sigma %.5f)",
                      temps[ti], i, f, p, 5 * sigma);
            }
            tq_sampler_free(s);
        }
    }

    /* same seed -> same sequence; reset() replays it; another seed differs */
    {
        enum { V = 300, N = 500 };
        static float l[V];
        for (int i = 0; i < V; i++)
            l[i] = tq_rng_normal(&r);
        tq_sampler_params p = tq_sampler_params_default();
        p.temperature = 1.0f;
        p.top_p = 0.95f;
        p.seed = 42;
        tq_sampler *a, *b, *c;
        tq_sampler_create(&p, V, &a);
        tq_sampler_create(&p, V, &b);
        p.seed = 43;
        tq_sampler_create(&p, V, &c);
        int32_t sa[N], sb[N], sc[N], sr[N];
        for (int i = 0; i < N; i++) {
            tq_sampler_sample(a, l, &sa[i]);
            tq_sampler_sample(b, l, &sb[i]);
            tq_sampler_sample(c, l, &sc[i]);
        }
        tq_sampler_reset(a);
        for (int i = 0; i < N; i++)
            tq_sampler_sample(a, l, &sr[i]);
        CHECK_MEMEQ(sa, sb, sizeof(sa), "same seed, different sequences");
        CHECK_MEMEQ(sa, sr, sizeof(sa), "reset does not replay the sequence");
        CHECK(memcmp(sa, sc, sizeof(sa)) != 0, "seeds 42 and 43 give the same 500 tokens");
        tq_sampler_free(a);
        tq_sampler_free(b);
        tq_sampler_free(c);
    }

    /* repetition penalty: positive logits divided, negative multiplied, each distinct token once,
     * only the last repeat_last_n accepted tokens */
    {
        const float l[4] = {2.0f, 1.0f, -1.0f, 0.5f};
        tq_sampler_params p = tq_sampler_params_default();
        p.temperature = 1.0f;
        p.repeat_penalty = 2.0f;
        p.repeat_last_n = 3;
        tq_sampler *s;
        CHECK(tq_sampler_create(&p, 4, &s) == TQ_OK, "create penalty sampler");
        /* history 0 0 2 -> penalised {0, 2}: logits 1, 1, -2, .5 */
        tq_sampler_accept(s, 0);
        tq_sampler_accept(s, 0);
        tq_sampler_accept(s, 2);
        const float pen1[4] = {1.0f, 1.0f, -2.0f, 0.5f};
        int w1[4] = {0, 1, 3, 2};
        check_kept_ref(s, l, pen1, 1.0f, w1, 4, "penalty window {0,0,2}");
        /* one more token pushes the first 0 out: history 0 2 3 -> {0, 2, 3} still */
        tq_sampler_accept(s, 3);
        const float pen2[4] = {1.0f, 1.0f, -2.0f, 0.25f};
        check_kept_ref(s, l, pen2, 1.0f, w1, 4, "penalty window {0,2,3}");
        /* two more: history 3 1 1 -> {1, 3}: logits 2, .5, -1, .25 */
        tq_sampler_accept(s, 1);
        tq_sampler_accept(s, 1);
        const float pen3[4] = {2.0f, 0.5f, -1.0f, 0.25f};
        int w3[4] = {0, 1, 3, 2};
        int32_t ids[4];
        float pr[4];
        int64_t n = 0;
        tq_sampler_dist(s, l, ids, pr, 4, &n);
        double z = 0;
        for (int i = 0; i < 4; i++)
            z += exp(pen3[i]);
        int ok = n == 4;
        for (int i = 0; ok && i < 4; i++)
            ok = ids[i] == w3[i] && fabs(pr[i] - exp(pen3[w3[i]]) / z) < 1e-6;
        CHECK(ok, "penalty window {3,1,1}: wrong distribution");
        CHECK(tq_sampler_accept(s, 4) == TQ_E_ARG, "accept of an out-of-range id");
        CHECK(tq_sampler_accept(s, -1) == TQ_E_ARG, "accept of a negative id");
        tq_sampler_free(s);

        p.temperature = 0.0f;
        p.repeat_last_n = 64;
        CHECK(tq_sampler_create(&p, 4, &s) == TQ_OK, "create greedy penalty sampler");
        int32_t t = -1;
        tq_sampler_sample(s, l, &t);
        CHECK(t == 0, "greedy without history: %d", t);
        tq_sampler_accept(s, 0); /* 2.0 -> 1.0 ties with id 1: lower id (0) still wins */
        tq_sampler_sample(s, l, &t);
        CHECK(t == 0, "greedy tie after penalty: %d", t);
        const float l2[4] = {2.0f, 1.5f, -1.0f, 0.5f};
        tq_sampler_reset(s);
        tq_sampler_accept(s, 0);
        tq_sampler_sample(s, l2, &t);
        CHECK(t == 1, "greedy after penalising the argmax: %d (want 1)", t);
        tq_sampler_free(s);
    }

    /* presence / frequency penalties (OpenAI): logit -= presence * [c > 0] + frequency * c over
     * the tokens accepted as output; prompt tokens (tq_sampler_accept) are not counted */
    {
        const float l[5] = {3.0f, 2.5f, 1.0f, -0.5f, 0.0f};
        tq_sampler_params p = tq_sampler_params_default();
        p.temperature = 1.0f;
        p.presence_penalty = 0.5f;
        p.frequency_penalty = 0.25f;
        tq_sampler *s;
        CHECK(tq_sampler_create(&p, 5, &s) == TQ_OK, "create presence/frequency sampler: %s",
              tq_last_error());
        tq_sampler_accept(s, 1); /* prompt: no effect */
        tq_sampler_accept(s, 2);
        int w0[5] = {0, 1, 2, 4, 3};
        check_kept(s, l, 1.0f, w0, 5, "prompt tokens are not penalised");
        /* output 0, 0, 3, 0: counts 0:3, 3:1 -> 3 - (.5 + .75) = 1.75, -.5 - (.5 + .25) = -1.25 */
        tq_sampler_accept_output(s, 0);
        tq_sampler_accept_output(s, 0);
        tq_sampler_accept_output(s, 3);
        tq_sampler_accept_output(s, 0);
        const float pen[5] = {1.75f, 2.5f, 1.0f, -1.25f, 0.0f};
        int w1[5] = {1, 0, 2, 4, 3};
        check_kept_ref(s, l, pen, 1.0f, w1, 5, "presence .5, frequency .25, counts {0:3, 3:1}");
        tq_sampler_reset(s); /* counts cleared */
        check_kept(s, l, 1.0f, w0, 5, "after reset");
        tq_sampler_free(s);

        /* negative values encourage repeats; with temperature 2 the penalty comes first */
        p.presence_penalty = -1.0f;
        p.frequency_penalty = -2.0f;
        p.temperature = 2.0f;
        CHECK(tq_sampler_create(&p, 5, &s) == TQ_OK, "create negative penalties");
        tq_sampler_accept_output(s, 4);
        tq_sampler_accept_output(s, 4); /* 0 - (-1 - 4) = 5 */
        const float pen2[5] = {3.0f, 2.5f, 1.0f, -0.5f, 5.0f};
        int w2[5] = {4, 0, 1, 2, 3};
        check_kept_ref(s, l, pen2, 2.0f, w2, 5, "presence -1, frequency -2, count {4:2}, T 2");
        tq_sampler_free(s);

        /* with the repetition penalty as well: it applies first (3 / 2 = 1.5), then 1.5 - 1 */
        p = tq_sampler_params_default();
        p.repeat_penalty = 2.0f;
        p.frequency_penalty = 1.0f;
        CHECK(tq_sampler_create(&p, 5, &s) == TQ_OK, "create penalty + frequency");
        int32_t tok = -1;
        tq_sampler_accept_output(s, 0);
        const float pen3[5] = {0.5f, 2.5f, 1.0f, -0.5f, 0.0f};
        int w3[5] = {1};
        check_kept_ref(s, l, pen3, 1.0f, w3, 1, "greedy after repeat 2 + frequency 1");
        CHECK(tq_sampler_sample(s, l, &tok) == TQ_OK && tok == 1, "greedy picks 1: %d", tok);
        tq_sampler_free(s);

        /* ranges: -2..2 */
        const tq_sampler_params d = tq_sampler_params_default();
        const float bad[4] = {2.01f, -2.5f, NAN, INFINITY};
        for (int i = 0; i < 4; i++) {
            p = d, p.presence_penalty = bad[i];
            s = NULL;
            CHECK(tq_sampler_create(&p, 5, &s) == TQ_E_ARG &&
                      strstr(tq_last_error(), "presence_penalty"),
                  "presence_penalty %g accepted", (double)bad[i]);
            p = d, p.frequency_penalty = bad[i];
            CHECK(tq_sampler_create(&p, 5, &s) == TQ_E_ARG &&
                      strstr(tq_last_error(), "frequency_penalty"),
                  "frequency_penalty %g accepted", (double)bad[i]);
        }
        p = d, p.presence_penalty = 2.0f, p.frequency_penalty = -2.0f;
        CHECK(tq_sampler_create(&p, 5, &s) == TQ_OK, "the ends of the range are accepted");
        tq_sampler_free(s);
    }

    /* tq_logprobs: log-softmax of the raw row in double, top list in (logit desc, id asc) order */
    {
        enum { V = 3000, K = 20 };
        static float l[V];
        for (int it = 0; it < 20; it++) {
            for (int i = 0; i < V; i++)
                l[i] = tq_rng_normal(&r) * 4;
            if (it % 2)
                l[17] = l[2500] = l[900] = 30.0f; /* a three-way tie at the top */
            if (it % 3 == 0)
                l[5] = NAN, l[6] = -INFINITY;
            double m = -INFINITY, z = 0;
            for (int i = 0; i < V; i++)
                if (!isnan(l[i]) && l[i] > m)
                    m = l[i];
            for (int i = 0; i < V; i++)
                if (!isnan(l[i]))
                    z += exp((double)l[i] - m);
            const double lz = m + log(z);
            static int ord[V];
            for (int i = 0; i < V; i++)
                if (isnan(l[i]))
                    l[i] = -INFINITY; /* the brute-force order needs a total order */
            order(l, V, ord);
            if (it % 3 == 0)
                l[5] = NAN;
            int32_t ids[K];
            float lp[K], lt = 0;
            const int32_t tok = (int32_t)(tq_rng_u64(&r) % V);
            CHECK(tq_logprobs(l, V, tok, &lt, ids, lp, K) == TQ_OK, "logprobs: %s",
                  tq_last_error());
            const double want = isnan(l[tok]) || l[tok] == -INFINITY ? -INFINITY : l[tok] - lz;
            CHECK(fabs(lt - want) < 1e-5 || (isinf(want) && lt == -INFINITY),
                  "round %d: log p(%d) = %g, want %g", it, tok, (double)lt, want);
            int ok = 1;
            for (int j = 0; j < K; j++)
                ok &= ids[j] == ord[j] && fabs(lp[j] - (l[ord[j]] - lz)) < 1e-5;
            CHECK(ok, "round %d: top %d list differs from the sorted row", it, K);
            if (it % 2)
                CHECK(ids[0] == 17 && ids[1] == 900 && ids[2] == 2500, "tie order %d %d %d",
                      ids[0], ids[1], ids[2]);
            double sum = 0; /* probabilities of the whole row add up to 1 */
            for (int i = 0; i < V; i++) {
                float x = 0;
                tq_logprobs(l, V, i, &x, NULL, NULL, 0);
                sum += exp((double)x);
            }
            CHECK(fabs(sum - 1.0) < 1e-4, "round %d: probabilities sum to %.7f", it, sum);
        }
        /* a row of two: log(1/(1+e^-1)) by hand, k = n_vocab, NaN last */
        const float two[3] = {1.0f, 0.0f, NAN};
        int32_t ids[3];
        float lp[3], x = 0;
        CHECK(tq_logprobs(two, 3, 1, &x, ids, lp, 3) == TQ_OK, "row of two");
        CHECK(fabs(x - (-1.0 - log(1.0 + exp(-1.0)))) < 1e-6 && ids[0] == 0 && ids[1] == 1 &&
                  ids[2] == 2 && fabs(lp[0] - (-log(1.0 + exp(-1.0)))) < 1e-6 &&
                  lp[2] == -INFINITY,
              "row of two: %g [%d %d %d] %g %g", (double)x, ids[0], ids[1], ids[2],
              (double)lp[0], (double)lp[2]);
        const float none[2] = {NAN, -INFINITY};
        CHECK(tq_logprobs(none, 2, 0, &x, NULL, NULL, 0) == TQ_E_ARG, "no finite logit");
        CHECK(tq_logprobs(two, 3, 3, &x, NULL, NULL, 0) == TQ_E_ARG, "token out of range");
        CHECK(tq_logprobs(two, 3, -1, NULL, ids, lp, 4) == TQ_E_ARG, "k > n_vocab");
        CHECK(tq_logprobs(two, 3, -1, NULL, NULL, lp, 1) == TQ_E_ARG, "NULL ids");
        CHECK(tq_logprobs(NULL, 3, 0, &x, NULL, NULL, 0) == TQ_E_ARG, "NULL logits");
    }

    /* no allocation per token, even with every stage on */
    {
        enum { V = 49152 };
        static float l[V];
        for (int i = 0; i < V; i++)
            l[i] = tq_rng_normal(&r) * 2;
        tq_sampler_params p = tq_sampler_params_default();
        p.temperature = 0.8f;
        p.top_k = 100;
        p.top_p = 0.9f;
        p.min_p = 0.01f;
        p.repeat_penalty = 1.1f;
        p.presence_penalty = 0.3f;
        p.frequency_penalty = 0.2f;
        p.seed = t_seed;
        tq_sampler *s;
        tq_sampler_create(&p, V, &s);
        uint64_t before = tq_alloc_count();
        for (int i = 0; i < 100; i++) {
            int32_t t;
            tq_sampler_sample(s, l, &t);
            tq_sampler_accept_output(s, t);
        }
        tq_sampler_reset(s);
        p.top_k = 0; /* top-p alone over the full vocabulary */
        p.presence_penalty = p.frequency_penalty = 0.0f;
        tq_sampler *s2;
        tq_sampler_create(&p, V, &s2);
        uint64_t before2 = tq_alloc_count();
        for (int i = 0; i < 50; i++) {
            int32_t t;
            tq_sampler_sample(s2, l, &t);
        }
        CHECK(before2 - before == 4, "sampler_create made %llu allocations, want 4",
              (unsigned long long)(before2 - before));
        CHECK(tq_alloc_count() == before2, "sampling allocated");
        tq_sampler_free(s);
        tq_sampler_free(s2);
    }

    /* bad input: each parameter out of range, NULLs, a row with no finite logit */
    {
        const tq_sampler_params d = tq_sampler_params_default();
        tq_sampler_params p;
        tq_sampler *s = (tq_sampler *)&p;
        p = d, p.temperature = -1.0f;
        CHECK(tq_sampler_create(&p, 10, &s) == TQ_E_ARG && s == NULL, "temperature -1");
        CHECK(strstr(tq_last_error(), "temperature") != NULL, "message names the field: %s",
              tq_last_error());
        p = d, p.temperature = NAN;
        CHECK(tq_sampler_create(&p, 10, &s) == TQ_E_ARG, "temperature NaN");
        p = d, p.top_k = -2;
        CHECK(tq_sampler_create(&p, 10, &s) == TQ_E_ARG, "top_k -2");
        p = d, p.top_p = 0.0f;
        CHECK(tq_sampler_create(&p, 10, &s) == TQ_E_ARG, "top_p 0");
        p = d, p.top_p = 1.5f;
        CHECK(tq_sampler_create(&p, 10, &s) == TQ_E_ARG, "top_p 1.5");
        p = d, p.min_p = 1.0f;
        CHECK(tq_sampler_create(&p, 10, &s) == TQ_E_ARG, "min_p 1");
        p = d, p.repeat_penalty = 0.0f;
        CHECK(tq_sampler_create(&p, 10, &s) == TQ_E_ARG, "repeat_penalty 0");
        p = d, p.repeat_last_n = -1;
        CHECK(tq_sampler_create(&p, 10, &s) == TQ_E_ARG, "repeat_last_n -1");
        CHECK(tq_sampler_create(&d, 0, &s) == TQ_E_ARG, "n_vocab 0");
        CHECK(tq_sampler_create(NULL, 10, &s) == TQ_E_ARG, "NULL params");
        CHECK(tq_sampler_create(&d, 10, NULL) == TQ_E_ARG, "NULL out");
        tq_sampler_free(NULL);

        float l[3] = {NAN, -INFINITY, NAN};
        int32_t t;
        p = d, p.temperature = 1.0f;
        CHECK(tq_sampler_create(&p, 3, &s) == TQ_OK, "create");
        CHECK(tq_sampler_sample(s, l, &t) == TQ_E_ARG, "all-NaN row accepted");
        l[1] = INFINITY; /* +inf is the certain winner, not a NaN probability */
        CHECK(tq_sampler_sample(s, l, &t) == TQ_OK && t == 1, "+inf logit: got %d", t);
        CHECK(tq_sampler_sample(s, NULL, &t) == TQ_E_ARG, "NULL logits");
        tq_sampler_free(s);
    }
    { /* tq_sampler_greedy_ids (the device greedy sampler's contract): the penalty formula on
       * exactly the ids it returns, then the first index of the largest key, is
       * tq_sampler_sample's greedy pick; refused when not greedy-only or over cap */
        tq_rng r;
        tq_rng_seed(&r, t_seed ^ 0x9d11u);
        enum { NV = 300 };
        float l[NV], e[NV];
        int agree = 0, cases = 0;
        for (int c = 0; c < 200; c++) {
            tq_sampler_params p = tq_sampler_params_default();
            p.repeat_penalty = c % 3 == 0 ? 1.0f : c % 3 == 1 ? 1.25f : 0.8f;
            p.repeat_last_n = 1 + (int)(tq_rng_u64(&r) % 80u);
            tq_sampler *s = NULL;
            if (tq_sampler_create(&p, NV, &s) != TQ_OK)
                break;
            for (int i = 0; i < NV; i++)
                l[i] = (float)(int)(tq_rng_normal(&r) * 64.0f) / 16.0f; /* ties happen */
            l[tq_rng_u64(&r) % NV] = NAN;
            const int nh = (int)(tq_rng_u64(&r) % 120u);
            for (int h = 0; h < nh; h++) /* repeats: ids from a small range at times */
                tq_sampler_accept(s, (int32_t)(tq_rng_u64(&r) % (c % 2 ? 40u : NV)));
            int32_t ids[64], t = -1;
            int n = -1;
            float pen = 0.0f;
            if (!tq_sampler_greedy_ids(s, ids, 64, &n, &pen)) {
                /* only a window with more than 64 distinct ids may be refused */
                CHECK(p.repeat_penalty != 1.0f && p.repeat_last_n > 64, "case %d: greedy_ids "
                      "refused (penalty %g, window %d)", c, (double)p.repeat_penalty,
                      p.repeat_last_n);
                tq_sampler_free(s);
                continue;
            }
            cases++;
            CHECK(pen == p.repeat_penalty && n >= 0 && n <= 64, "case %d: n %d penalty %g", c, n,
                  (double)pen);
            for (int i = 0; i < NV; i++)
                e[i] = isnan(l[i]) ? -INFINITY : l[i] == INFINITY ? FLT_MAX : l[i];
            for (int j = 0; j < n; j++) {
                for (int k = 0; k < j; k++)
                    CHECK(ids[k] != ids[j], "case %d: id %d twice", c, ids[j]);
                e[ids[j]] = e[ids[j]] > 0.0f ? e[ids[j]] / pen : e[ids[j]] * pen;
            }
            int b = 0;
            for (int i = 1; i < NV; i++)
                if (e[i] > e[b])
                    b = i;
            CHECK(tq_sampler_sample(s, l, &t) == TQ_OK, "case %d: sample", c);
            agree += t == b;
            CHECK(t == b, "case %d: greedy_ids + penalty picks %d, the sampler %d", c, b, t);
            tq_sampler_free(s);
        }
        CHECK(cases >= 100, "only %d of 200 cases were greedy-only", cases);
        printf("greedy_ids contract: %d/%d picks equal\n", agree, cases);
        tq_sampler_params p = tq_sampler_params_default();
        p.repeat_penalty = 1.1f;
        p.repeat_last_n = 100;
        tq_sampler *s = NULL;
        int32_t ids[65]; /* the 65-id case below fills all 65 */
        int n = 0;
        float pen = 0.0f;
        CHECK(tq_sampler_create(&p, NV, &s) == TQ_OK, "create");
        for (int h = 0; h < 65; h++)
            tq_sampler_accept(s, h);
        CHECK(!tq_sampler_greedy_ids(s, ids, 64, &n, &pen), "65 distinct ids fit a list of 64");
        CHECK(tq_sampler_greedy_ids(s, ids, 65, &n, &pen) && n == 65, "65 ids in a list of 65");
        tq_sampler_free(s);
        p = tq_sampler_params_default();
        p.temperature = 0.7f;
        CHECK(tq_sampler_create(&p, NV, &s) == TQ_OK, "create");
        CHECK(!tq_sampler_greedy_ids(s, ids, 64, &n, &pen), "temperature 0.7 taken as greedy");
        tq_sampler_free(s);
        p = tq_sampler_params_default();
        p.presence_penalty = 0.5f;
        CHECK(tq_sampler_create(&p, NV, &s) == TQ_OK, "create");
        CHECK(tq_sampler_greedy_ids(s, ids, 64, &n, &pen) && n == 0,
              "presence penalty before any output: plain greedy");
        tq_sampler_accept_output(s, 7);
        CHECK(!tq_sampler_greedy_ids(s, ids, 64, &n, &pen), "presence penalty in effect taken "
              "as greedy-only");
        tq_sampler_free(s);
        CHECK(!tq_sampler_greedy_ids(NULL, ids, 64, &n, &pen), "NULL sampler");
    }
    return t_done();
}
