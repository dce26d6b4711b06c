/* test_turbo_bench.c -- long-context decode speed of SmolLM2-135M-Instruct per KV scheme (bf16,
 * kv8, turbo k8v3, turbo k4v3) at 1k, 4k and 8k tokens of context, 2 threads, as ratios to bf16
 * measured in the same run (rounds interleaved over the schemes, median of the rounds).
 * The cache is filled with synthetic K/V rows (unit normal; speed does not depend on the values)
 * through the cache's own append(), so each depth costs no prefill; then real single-token decode
 * steps run through the whole model. Asserts only that every step succeeded and logits are
 * finite; the numbers are for docs/results.md. Besides wall-clock tok/s it prints the process
 * CPU time per token (both threads), which a shared machine disturbs less.
 * Usage: test_turbo_bench [steps] [rounds]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/rng.h"
#include "model/engine.h"
#include "t.h"

#define MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define NS 4
#define ND 3

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_turbo_bench");
    if (access(MODEL, R_OK))
        return t_skip(MODEL " missing (models/ is not committed)");
    const int steps = argc > 1 && argv[1][0] != '-' ? atoi(argv[1]) : 8;
    const int rounds = argc > 2 ? atoi(argv[2]) : 3;
    const char *schemes[NS] = {"bf16", "kv8", "turbo", "turbo:k4v3"};
    const int depths[ND] = {1024, 4096, 8192};
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = 2;
    tq_model *m = NULL;
    CHECK(tq_model_load(MODEL, &mo, &m) == TQ_OK, "load: %s", tq_last_error());
    if (!m)
        return t_done();
    tq_model_info info;
    tq_model_get_info(m, &info);
    const int V = info.vocab_size, kvd = info.n_kv_heads * info.head_dim;
    float *lg = malloc((size_t)V * sizeof(float));
    tq_rng r;
    tq_rng_seed(&r, t_seed);
    const int64_t chunk = 256;
    float *k = malloc((size_t)chunk * kvd * sizeof(float)), *v = malloc((size_t)chunk * kvd * 4);
    for (int64_t i = 0; i < chunk * kvd; i++) {
        k[i] = tq_rng_normal(&r);
        v[i] = tq_rng_normal(&r);
    }
    printf("decode tok/s, SmolLM2-135M-Instruct (bf16 weights), 2 threads, %d steps x %d rounds "
           "(median); synthetic cache fill\n", steps, rounds);
    printf("%-12s %6s %12s %12s %12s %12s %10s\n", "scheme", "depth", "wall tok/s", "vs bf16",
           "CPU ms/tok", "vs bf16", "KV MiB");
    for (int di = 0; di < ND; di++) {
        const int d = depths[di];
        tq_session *s[NS] = {0};
        for (int j = 0; j < NS; j++) {
            tq_session_opts o;
            tq_session_opts_default(&o);
            tq_kv_scheme_parse(schemes[j], &o.kv);
            o.n_ctx = d + steps * rounds + 8;
            CHECK(tq_session_create(m, &o, &s[j]) == TQ_OK, "%s: %s", schemes[j], tq_last_error());
            if (!s[j])
                continue;
            for (int il = 0; il < info.n_layers; il++)
                for (int64_t p = 0; p < d; p += chunk)
                    s[j]->kv->ops->append(s[j]->kv, il, p, k, v, d - p < chunk ? d - p : chunk);
            s[j]->n_past = d;
        }
        double t[NS][16], c[NS][16];
        int bad = 0;
        for (int rr = 0; rr < rounds && rr < 16; rr++)
            for (int j = 0; j < NS; j++) {
                if (!s[j])
                    continue;
                int32_t tok = 1000 + rr;
                const double t0 = now_s(), c0 = cpu_s();
                for (int st = 0; st < steps; st++) {
                    bad += tq_session_eval(s[j], &tok, 1, lg) != TQ_OK;
                    bad += !isfinite(lg[0]);
                    tok = (tok * 7 + 13) % V;
                }
                t[j][rr] = steps / (now_s() - t0);
                c[j][rr] = (cpu_s() - c0) / steps;
            }
        CHECK(bad == 0, "depth %d: %d failed steps", d, bad);
        double med[NS], cmed[NS];
        for (int j = 0; j < NS; j++) {
            qsort(t[j], (size_t)rounds, sizeof(double), cmp_d);
            qsort(c[j], (size_t)rounds, sizeof(double), cmp_d);
            med[j] = t[j][rounds / 2];
            cmed[j] = c[j][rounds / 2];
        }
        for (int j = 0; j < NS; j++) {
            tq_kv_usage u = {0};
            if (s[j])
                tq_session_kv_bytes(s[j], &u);
            printf("%-12s %6d %12.2f %12.3f %12.1f %12.3f %10.1f\n", schemes[j], d, med[j],
                   med[j] / med[0], 1e3 * cmed[j], cmed[0] / cmed[j],
                   (double)u.bytes_per_token * d / 1048576.0);
            tq_session_free(s[j]);
        }
    }
    free(k);
    free(v);
    free(lg);
    tq_model_free(m);
    return t_done();
}
