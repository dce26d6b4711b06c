/* test_rot_bench.c -- long-context decode speed of SmolLM2-135M-Instruct with the kept rot: KV
 * schemes (fused attention, src/cpu/attn_rot*.c) against turbo k8v3 and bf16, at 1k, 4k and 8k
 * tokens of context, 2 threads, rounds interleaved over the schemes, median of the rounds. The
 * cache is filled with synthetic K/V rows (unit normal: speed does not depend on the values)
 * through the cache's own append(); then real single-token decode steps run through the whole
 * model. Asserts only that every step succeeded with finite logits; the numbers are for
 * docs/results.md (scripts/quality/kv_speed.py interleaves this with llama.cpp's peer run).
 * Prints one JSON line per (scheme, depth): wall tok/s and process CPU ms per token (medians).
 * Usage: test_rot_bench [steps] [rounds] [scalar|avx2|avx512|native] [scheme,scheme,...]
 * (the ISA forces the kernels of that ISA everywhere, e.g. avx2 on an AVX-512 machine as the
 * proxy of an AVX2-only CPU; native = the CPU's own; the list replaces the default schemes). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/rng.h"
#include "model/engine.h"
#include "t.h"

#define MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define NS_MAX 16
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
    t_init(argc, argv, "test_rot_bench");
    if (access(MODEL, R_OK))
        return t_skip(MODEL " missing (models/ is not committed)");
    const int steps = argc > 1 && argv[1][0] != '-' ? atoi(argv[1]) : 8;
    const int rounds = argc > 2 && argv[2][0] != '-' ? atoi(argv[2]) : 3;
    if (argc > 3 && argv[3][0] != '-' && strcmp(argv[3], "native")) {
        int ok = 0;
        for (int i = 0; i < TQ_ISA_COUNT; i++)
            if (!strcmp(argv[3], tq_isa_name((tq_isa)i)))
                ok = tq_cpu_select((tq_isa)i) == TQ_OK;
        if (!ok)
            return t_skip("this CPU cannot run the requested ISA");
    }
    const char *schemes[NS_MAX] = {"bf16",           "turbo", "rot:l32g64/l11g64", "rot:l64g64/l22g64",
                                   "rot:l181g64/l32g64", "rot:q8_0/q4_0"};
    int NS = 6;
    char list[512] = "";
    if (argc > 4 && argv[4][0] != '-') {
        snprintf(list, sizeof list, "%s", argv[4]);
        NS = 0;
        for (char *tok = strtok(list, ","); tok && NS < NS_MAX; tok = strtok(NULL, ","))
            schemes[NS++] = tok;
    }
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
    printf("# decode, SmolLM2-135M-Instruct, 2 threads, %d steps x %d rounds (median), isa %s\n",
           steps, rounds, tq_isa_name(tq_cpu_isa()));
    for (int di = 0; di < ND; di++) {
        const int d = depths[di];
        tq_session *s[NS_MAX] = {0};
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
        double t[NS_MAX][32], c[NS_MAX][32];
        int bad = 0;
        for (int rr = 0; rr < rounds && rr < 32; rr++)
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
        for (int j = 0; j < NS; j++) {
            const int nr = rounds < 32 ? rounds : 32;
            qsort(t[j], (size_t)nr, sizeof(double), cmp_d);
            qsort(c[j], (size_t)nr, sizeof(double), cmp_d);
            tq_kv_usage u = {0};
            if (s[j])
                tq_session_kv_bytes(s[j], &u);
            printf("{\"engine\": \"tq\", \"isa\": \"%s\", \"kv\": \"%s\", \"depth\": %d, "
                   "\"tok_s\": %.3f, \"cpu_ms\": %.2f, \"kv_bytes_per_token\": %zu}\n",
                   tq_isa_name(tq_cpu_isa()), schemes[j], d, t[j][nr / 2], 1e3 * c[j][nr / 2],
                   (size_t)u.bytes_per_token);
            tq_session_free(s[j]);
        }
        fflush(stdout);
    }
    free(k);
    free(v);
    free(lg);
    tq_model_free(m);
    return t_done();
}
