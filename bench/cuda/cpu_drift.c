/* cpu_drift.c -- issue 16 item 6: how far two correct runs of one KV-cache scheme drift apart when
 * only the rounding of the forward pass differs, on the CPU engine alone. Runs the prompts of
 * tests/test_cuda_fwd.c (three texts + 300 seeded random ids) through one CPU session per scheme,
 * then 8 teacher-forced steps (fixed token ids, so every run sees the same stream), and either
 * writes every step's logits (--out) or compares them with a file written by another run (--ref):
 * mean / max KL(ref || this) and top-1 agreement per scheme. The two runs differ only in the
 * flags given, e.g. --matvec-bf16 (activations rounded to bf16 before each linear, as the GPU
 * forward did before 2026-12-03; tq_model_opts.matvec_bf16) or --isa avx2 (another summation
 * order; tq_cpu_select; avx512vnni = avx512 without AMX tiles, whose bf16 products round the
 * activations). (The library reads no environment: TQ_MATVEC / TQ_CPU no longer act here.)
 * Diagnostic program (not product, not a test).
 * usage: cpu_drift [-m MODEL] [-s SEED] [--isa NAME] [--matvec-bf16] --kv LIST (--out FILE | --ref FILE) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turboquant.h"

static const int32_t P0[] = {504, 3575, 282, 4649, 314, 7042, 30, 378, 3575, 282, 4521, 314};
static const int32_t P1[] = {1604, 3987, 46477, 24, 94, 727, 472, 585, 304, 2067, 216, 34, 42, 448, 1003, 304, 472, 1003};
static const int32_t P2[] = {6403, 1980, 253, 655, 28, 281, 253, 1165, 6560, 418, 260, 5595, 282, 253, 1109, 3150, 28,
                             665, 4161, 253, 1805, 8180, 3365};

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

static double kl(const float *p, const float *q, int n)
{
    double mp = -INFINITY, mq = -INFINITY, zp = 0, zq = 0, k = 0;
    for (int i = 0; i < n; i++) {
        mp = p[i] > mp ? p[i] : mp;
        mq = q[i] > mq ? q[i] : mq;
    }
    for (int i = 0; i < n; i++) {
        zp += exp(p[i] - mp);
        zq += exp(q[i] - mq);
    }
    for (int i = 0; i < n; i++) {
        const double lp = p[i] - mp - log(zp), lq = q[i] - mq - log(zq);
        k += exp(lp) * (lp - lq);
    }
    return k;
}

int main(int argc, char **argv)
{
    const char *path = "models/SmolLM2-135M-Instruct.Q4_1.gguf", *kvs = "f32,kv8,turbo:k8v3", *out = NULL,
               *ref = NULL;
    unsigned seed = 20261129;
    int mv_bf16 = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--matvec-bf16")) {
            mv_bf16 = 1;
            for (int j = i; j + 1 < argc; j++)
                argv[j] = argv[j + 1];
            argc--;
            break;
        }
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--isa")) {
            int ok = 0;
            const int vnni = !strcmp(argv[i + 1], "avx512vnni"); /* avx512 without the AMX tiles */
            tq_cpu_set_amx(!vnni);
            for (int k = 0; k < TQ_ISA_COUNT && !ok; k++)
                if (!strcmp(vnni ? "avx512" : argv[i + 1], tq_isa_name((tq_isa)k)))
                    ok = tq_cpu_select((tq_isa)k) == TQ_OK;
            if (!ok) {
                fprintf(stderr, "cpu_drift: --isa %s: not a level this CPU runs\n", argv[i + 1]);
                return 2;
            }
        } else if (!strcmp(argv[i], "-m"))
            path = argv[i + 1];
        else if (!strcmp(argv[i], "-s"))
            seed = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--kv"))
            kvs = argv[i + 1];
        else if (!strcmp(argv[i], "--out"))
            out = argv[i + 1];
        else if (!strcmp(argv[i], "--ref"))
            ref = argv[i + 1];
        else {
            fprintf(stderr, "cpu_drift: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!out == !ref) {
        fprintf(stderr, "usage: cpu_drift [-m MODEL] [-s SEED] --kv LIST (--out FILE | --ref FILE)\n");
        return 2;
    }
    tq_model *m = NULL;
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_BF16; /* the GPU forward's weights */
    mo.matvec_bf16 = mv_bf16;
    mo.weight_store = TQ_STORE_DEQUANT; /* bf16 rows (since native kernels, AUTO keeps q8 blocks) */
    if (tq_model_load(path, &mo, &m) != TQ_OK) {
        fprintf(stderr, "cpu_drift: %s\n", tq_last_error());
        return 1;
    }
    tq_model_info mi;
    tq_model_get_info(m, &mi);
    const int V = mi.vocab_size, steps = 8;
    int32_t rnd[300], forced[4 * 8];
    srand(seed);
    for (int i = 0; i < 300; i++)
        rnd[i] = (int32_t)(rand() % V);
    for (int i = 0; i < 4 * steps; i++)
        forced[i] = (int32_t)(rand() % V);
    const int32_t *prompts[4] = {P0, P1, P2, rnd};
    const int lens[4] = {(int)(sizeof(P0) / 4), (int)(sizeof(P1) / 4), (int)(sizeof(P2) / 4), 300};
    FILE *f = fopen(out ? out : ref, out ? "wb" : "rb");
    if (!f) {
        fprintf(stderr, "cpu_drift: cannot open %s\n", out ? out : ref);
        return 1;
    }
    float *lg = malloc((size_t)V * 4), *lr = malloc((size_t)V * 4);
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", kvs);
    int rc = 0;
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        tq_session_opts so;
        tq_session_opts_default(&so);
        tq_session *s = NULL;
        if (tq_kv_scheme_parse(name, &so.kv) != TQ_OK || (so.n_ctx = 512, tq_session_create(m, &so, &s)) != TQ_OK) {
            fprintf(stderr, "cpu_drift: %s: %s\n", name, tq_last_error());
            rc = 1;
            break;
        }
        double sum = 0, worst = 0;
        int n = 0, top1 = 0;
        for (int p = 0; p < 4; p++) {
            tq_session_reset(s);
            const int32_t *tok = prompts[p];
            int len = lens[p];
            for (int st = 0; st <= steps; st++) {
                if (tq_session_eval(s, tok, len, lg) != TQ_OK) {
                    fprintf(stderr, "cpu_drift: eval: %s\n", tq_last_error());
                    return 1;
                }
                if (out) {
                    fwrite(lg, 4, (size_t)V, f);
                } else {
                    if (fread(lr, 4, (size_t)V, f) != (size_t)V) {
                        fprintf(stderr, "cpu_drift: %s is shorter than this run (other --kv list?)\n", ref);
                        return 1;
                    }
                    const double k = kl(lr, lg, V);
                    sum += k;
                    worst = k > worst ? k : worst;
                    top1 += argmax(lr, V) == argmax(lg, V);
                    n++;
                }
                tok = &forced[p * steps + (st < steps ? st : 0)];
                len = 1;
            }
        }
        if (ref)
            printf("%-11s vs ref: KL mean %.2e max %.2e, top-1 %d/%d\n", name, sum / n, worst, top1, n);
        else
            printf("%-11s logits written\n", name);
        tq_session_free(s);
    }
    fclose(f);
    free(lg), free(lr);
    tq_model_free(m);
    return rc;
}
