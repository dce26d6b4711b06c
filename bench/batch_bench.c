/* batch_bench.c -- the batched decode step of tq serve (tq_batch_eval), timed by batch size.
 *
 *   build/release/tests/batch_bench -m MODEL [-t THREADS] [-k 1,2,4,8] [-s STEPS] [-r ROUNDS]
 *                                   [-p PROMPT] [--kv SCHEME] [--weights native|bf16]
 *                                   [--amx 0|1]
 *
 * Creates max(k) sessions, prefills each with a PROMPT-token prompt (default 64; different
 * tokens per session), then per round and per k (interleaved: round 1 k=1,2,4,8, round 2 ...)
 * decodes STEPS steps (default 16) of k sequences x 1 token in one tq_batch_eval each (greedy
 * next token fed back), and trims the sessions back to the prompt. Prints the median over
 * rounds (default 5) of the time per step (wall, and process CPU time / threads: the latter
 * leaves out waiting for a core on a loaded machine), the aggregate tok/s and its ratio to
 * k = 1. This is the decode-only step of scripts/serve/proof.sh without HTTP, sampling or
 * scheduling (the 3x target of issue 15: 8-sequence step <= 8/3 of the 1-sequence step).
 * --amx 0: the q8 matmuls without the AMX tiles (tq_cpu_set_amx(0), as TQ_CPU=avx512vnni); the
 * header says which kernels ran. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "turboquant.h"

#define KMAX 64

static double now_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

static int usage(void)
{
    fprintf(stderr, "usage: batch_bench -m MODEL [-t THREADS] [-k 1,2,4,8] [-s STEPS] "
                    "[-r ROUNDS] [-p PROMPT] [--kv SCHEME] [--weights native|bf16] [--amx 0|1]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *kv = "bf16", *ks = "1,2,4,8", *wts = "native";
    int threads = 2, steps = 16, rounds = 5, plen = 64;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return usage();
        if (!strcmp(f, "-m"))
            path = v;
        else if (!strcmp(f, "-t"))
            threads = atoi(v);
        else if (!strcmp(f, "-k"))
            ks = v;
        else if (!strcmp(f, "-s"))
            steps = atoi(v);
        else if (!strcmp(f, "-r"))
            rounds = atoi(v);
        else if (!strcmp(f, "-p"))
            plen = atoi(v);
        else if (!strcmp(f, "--kv"))
            kv = v;
        else if (!strcmp(f, "--weights"))
            wts = v;
        else if (!strcmp(f, "--amx"))
            tq_cpu_set_amx(atoi(v) != 0);
        else
            return usage();
        i++;
    }
    int kl[16], nk = 0, kmax = 0;
    for (const char *p = ks; *p && nk < 16;) {
        kl[nk] = atoi(p);
        if (kl[nk] < 1 || kl[nk] > KMAX)
            return usage();
        kmax = kl[nk] > kmax ? kl[nk] : kmax;
        nk++;
        p = strchr(p, ',');
        if (!p)
            break;
        p++;
    }
    if (!path || nk < 1 || steps < 1 || rounds < 1 || plen < 1 || threads < 1)
        return usage();
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = threads;
    mo.weight_store = !strcmp(wts, "native") ? TQ_STORE_NATIVE : TQ_STORE_DEQUANT;
    tq_model *m = NULL;
    if (tq_model_load(path, &mo, &m)) {
        fprintf(stderr, "batch_bench: %s\n", tq_last_error());
        return 1;
    }
    tq_model_info info;
    tq_model_get_info(m, &info);
    const int V = info.vocab_size;
    tq_session_opts so;
    tq_session_opts_default(&so);
    so.n_ctx = plen + steps + 8;
    so.n_batch = plen > kmax ? plen : kmax;
    if (tq_kv_scheme_parse(kv, &so.kv)) {
        fprintf(stderr, "batch_bench: %s\n", tq_last_error());
        return 1;
    }
    tq_session *ss[KMAX];
    int32_t *prompt = malloc((size_t)plen * sizeof(int32_t));
    float *lg = malloc((size_t)kmax * V * sizeof(float));
    int32_t next[KMAX], first[KMAX];
    uint32_t seed = 12345u;
    for (int i = 0; i < kmax; i++) {
        if (tq_session_create(m, &so, &ss[i])) {
            fprintf(stderr, "batch_bench: %s\n", tq_last_error());
            return 1;
        }
        for (int t = 0; t < plen; t++) {
            seed = seed * 1664525u + 1013904223u;
            prompt[t] = (int32_t)((seed >> 8) % (uint32_t)V);
        }
        if (tq_session_eval(ss[i], prompt, plen, lg)) {
            fprintf(stderr, "batch_bench: %s\n", tq_last_error());
            return 1;
        }
        first[i] = argmax(lg, V);
    }
    double *wall = calloc((size_t)nk * rounds, sizeof(double));
    double *cpu = calloc((size_t)nk * rounds, sizeof(double));
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < nk; j++) {
            const int k = kl[j];
            const int32_t *tk[KMAX];
            int64_t nn[KMAX];
            for (int i = 0; i < k; i++) {
                next[i] = first[i];
                tk[i] = &next[i];
                nn[i] = 1;
            }
            const double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
            for (int s = 0; s < steps; s++) {
                if (tq_batch_eval(ss, tk, nn, k, lg)) {
                    fprintf(stderr, "batch_bench: %s\n", tq_last_error());
                    return 1;
                }
                for (int i = 0; i < k; i++)
                    next[i] = argmax(lg + (size_t)i * V, V);
            }
            wall[j * rounds + r] = (now_s(CLOCK_MONOTONIC) - w0) / steps;
            cpu[j * rounds + r] = (now_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / steps / threads;
            for (int i = 0; i < k; i++)
                tq_session_trim(ss[i], steps);
        }
    printf("batch_bench: %s, %d thread(s), kv %s, weights %s (%s), prompt %d, %d steps x %d "
           "rounds (medians)\n", path, threads, kv, wts, info.kernel ? info.kernel : "?", plen,
           steps, rounds);
    printf("%4s %10s %10s %12s %9s %12s %9s\n", "k", "ms/step", "cpu ms/thr", "tok/s wall",
           "x k=1", "tok/s cpu", "x k=1");
    double base_w = 0, base_c = 0;
    for (int j = 0; j < nk; j++) {
        qsort(wall + j * rounds, (size_t)rounds, sizeof(double), cmp_d);
        qsort(cpu + j * rounds, (size_t)rounds, sizeof(double), cmp_d);
        const double w = wall[j * rounds + rounds / 2], c = cpu[j * rounds + rounds / 2];
        const double tw = kl[j] / w, tc = kl[j] / c;
        if (kl[j] == 1 || j == 0) {
            base_w = tw / kl[j];
            base_c = tc / kl[j];
        }
        printf("%4d %10.2f %10.2f %12.1f %9.2f %12.1f %9.2f\n", kl[j], 1e3 * w, 1e3 * c, tw,
               tw / base_w, tc, tc / base_c);
    }
    for (int i = 0; i < kmax; i++)
        tq_session_free(ss[i]);
    tq_model_free(m);
    free(prompt);
    free(lg);
    free(wall);
    free(cpu);
    return 0;
}
