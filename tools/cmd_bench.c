/* cmd_bench.c -- `tq bench`: engine speed on one model: prefill tok/s (one forward pass over N
 * prompt tokens), decode tok/s (single-token steps) at several cache depths, peak memory and KV
 * bytes per token. Medians of --runs repetitions. scripts/llamacpp/bench.py runs it next to
 * llama.cpp and prints the ratios. */
#include "cmd_generate.h"
#include "env_opts.h"

#include <time.h>

#define MAX_DEPTHS 16
#define BENCH_MAX_TOKENS (1 << 24) /* the most tokens --prefill/--decode/--batch/--depths take */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tq bench [-m MODEL] [options]\n\n"
            "Measure the engine: prefill speed (one forward pass over --prefill tokens from an\n"
            "empty cache), decode speed (--decode single-token steps after a prompt of each\n"
            "--depths length, with the output layer), peak resident memory (VmHWM) and KV-cache\n"
            "bytes per token. Each number is the median of --runs repetitions. Token ids are a\n"
            "fixed pseudo-random sequence (speed does not depend on them).\n\n"
            "bench:\n"
            "  --prefill N           prompt length for the prefill measurement (default 512)\n"
            "  --decode N            decode steps per depth (default 32)\n"
            "  --depths LIST         up to 16 comma-separated cache depths for decode\n"
            "                        (default 0,128,512,1024)\n"
            "  --batch N             tokens per forward chunk in prefill (default 512)\n"
            "                        (--prefill, --decode, --batch: 1..16777216; depths from 0)\n"
            "  --runs N              repetitions, 1..100; the median is reported (default 3)\n"
            "  --json                one JSON line instead of the table (for scripts)\n"
            "model and engine:\n"
            "  -m, --model PATH      GGUF file or Hugging Face directory (default " GEN_DEFAULT_MODEL ")\n"
            "  -t, --threads N       CPU threads, 0..256 (default 0 = every core)\n"
            "  --weights MODE        native (default for quantized GGUF), native-f32, bf16, f16, f32\n"
            "  --kv SCHEME           KV cache scheme (default " GEN_DEFAULT_KV "; bf16 = unquantized)\n\n"
            "example (compare with llama.cpp: python3 scripts/llamacpp/bench.py --tq build/release/tq):\n"
            "  tq bench -t 2 --depths 0,512\n");
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort: n is a handful */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmHWM:", 6)) {
            kb = strtol(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cmd_bench(int argc, char **argv)
{
    const char *cmd = "bench";
    gen_args a;
    long prefill = 512, decode = 32, runs = 3, batch = 512;
    int64_t depths[MAX_DEPTHS] = {0, 128, 512, 1024};
    int n_depths = 4, json = 0, rc = 1;
    tq_model *model = NULL;
    tq_session *sess = NULL;
    tq_model_opts mo;
    tq_session_opts so;
    tq_model_info mi;
    tq_status st;
    int32_t *toks = NULL;
    float *logits = NULL;

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--cuda"))
            return cmd_bench_cuda(argc, argv); /* the GPU forward: tools/cmd_bench_cuda.c */
    if (cli_is_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    gen_args_default(&a);
    for (int i = 1; i < argc; i++) {
        int r = gen_parse_common(cmd, &a, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r)
            continue;
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--prefill"))
            r = cli_long(cmd, f, v, 1, BENCH_MAX_TOKENS, &prefill);
        else if (!strcmp(f, "--decode"))
            r = cli_long(cmd, f, v, 1, BENCH_MAX_TOKENS, &decode);
        else if (!strcmp(f, "--runs"))
            r = cli_long(cmd, f, v, 1, 100, &runs);
        else if (!strcmp(f, "--batch"))
            r = cli_long(cmd, f, v, 1, BENCH_MAX_TOKENS, &batch);
        else if (!strcmp(f, "--depths"))
            r = cli_i64_list(cmd, f, v, 0, BENCH_MAX_TOKENS, depths, MAX_DEPTHS, &n_depths);
        else if (!strcmp(f, "--json")) {
            json = 1;
            continue;
        } else {
            fprintf(stderr, "tq %s: unknown or incomplete option '%s' (see tq %s --help)\n", cmd,
                    f, cmd);
            return 2;
        }
        if (r)
            return 2;
        i++;
    }
    long need = prefill;
    for (int i = 0; i < n_depths; i++)
        need = (long)depths[i] + decode > need ? (long)depths[i] + decode : need;

    tq_model_opts_default(&mo);
    cli_model_env(&mo);
    mo.weight_type = a.weights;
    mo.weight_store = a.weight_store;
    mo.native_f32_act = a.native_f32_act;
    mo.n_threads = a.threads;
    if ((st = tq_model_load(a.model, &mo, &model)))
        return cli_error(cmd, st, "cannot load model '%s'%s", a.model,
                         !strcmp(a.model, GEN_DEFAULT_MODEL)
                             ? " (fetch it with scripts/get-model.sh smollm2)" : "");
    tq_model_get_info(model, &mi);
    if (mi.max_ctx > 0 && need > mi.max_ctx) {
        rc = cli_error(cmd, TQ_E_OVERFLOW, "the longest measurement needs %ld tokens of context; "
                       "the model has %d (lower --depths/--prefill/--decode)", need, mi.max_ctx);
        goto out;
    }
    tq_session_opts_default(&so);
    cli_env_session(&so);
    if ((st = tq_kv_scheme_parse(a.kv, &so.kv))) {
        rc = cli_error(cmd, st, "--kv '%s'", a.kv);
        goto out;
    }
    so.n_ctx = (int)need;
    so.n_batch = (int)(batch < prefill ? batch : prefill);
    if ((st = tq_session_create(model, &so, &sess))) {
        rc = cli_error(cmd, st, "cannot create a session of %ld tokens", need);
        goto out;
    }
    toks = malloc((size_t)need * sizeof(int32_t));
    logits = malloc((size_t)mi.vocab_size * sizeof(float));
    if (!toks || !logits) {
        rc = cli_error(cmd, TQ_E_NOMEM, "out of memory");
        goto out;
    }
    uint32_t x = 12345u;
    for (long i = 0; i < need; i++) {
        x = x * 1664525u + 1013904223u;
        toks[i] = (int32_t)((x >> 8) % (uint32_t)mi.vocab_size);
    }

    double pf[100], dc[MAX_DEPTHS][100];
    /* warm-up: touch every weight once (toks holds only `need` ids, which may be fewer than 8) */
    if ((st = tq_session_eval(sess, toks, need < 8 ? need : 8, logits))) {
        rc = cli_error(cmd, st, "forward pass failed");
        goto out;
    }
    for (long r = 0; r < runs; r++) {
        tq_session_reset(sess);
        double t0 = now_s();
        if ((st = tq_session_eval(sess, toks, prefill, logits))) {
            rc = cli_error(cmd, st, "prefill failed");
            goto out;
        }
        pf[r] = (double)prefill / (now_s() - t0);
        for (int d = 0; d < n_depths; d++) {
            tq_session_reset(sess);
            if (depths[d] && (st = tq_session_eval(sess, toks, depths[d], NULL))) {
                rc = cli_error(cmd, st, "prefill of depth %ld failed", (long)depths[d]);
                goto out;
            }
            t0 = now_s();
            for (long k = 0; k < decode; k++)
                if ((st = tq_session_eval(sess, toks + depths[d] + k, 1, logits))) {
                    rc = cli_error(cmd, st, "decode step failed");
                    goto out;
                }
            dc[d][r] = (double)decode / (now_s() - t0);
        }
    }
    tq_kv_usage kv;
    tq_session_kv_bytes(sess, &kv);
    const double p_med = median(pf, (int)runs);
    const long rss = peak_rss_kb();
    char kvname[64];
    tq_kv_scheme_name(so.kv, kvname, sizeof(kvname));
    if (json) {
        printf("{\"model\": \"%s\", \"arch\": \"%s\", \"threads\": %d, \"weights\": \"%s\", "
               "\"kernel\": \"%s\", \"kv\": \"%s\", \"runs\": %ld, \"prefill_tokens\": %ld, "
               "\"prefill_tok_s\": %.3f, \"decode_steps\": %ld, \"decode_tok_s\": {",
               a.model, mi.arch_name, mi.n_threads,
               mi.native ? (a.native_f32_act ? "native-f32" : "native")
                         : tq_dtype_name(mi.weight_type),
               mi.native ? mi.native_kernels : mi.kernel ? mi.kernel : "?", kvname, runs,
               prefill, p_med, decode);
        for (int d = 0; d < n_depths; d++)
            printf("%s\"%ld\": %.3f", d ? ", " : "", (long)depths[d], median(dc[d], (int)runs));
        printf("}, \"peak_rss_mb\": %.1f, \"kv_bytes_per_token\": %zu, \"weight_bytes\": %zu, "
               "\"weight_bytes_per_token\": %zu}\n",
               rss / 1024.0, kv.bytes_per_token, mi.weight_bytes, mi.weight_bytes_token);
    } else {
        printf("model    %s (%s, %d layers, dim %d, vocab %d)\n", a.model, mi.arch_name,
               mi.n_layers, mi.dim, mi.vocab_size);
        printf("engine   weights %s (%.1f MB, kernel %s), kv %s (%zu bytes/token), %d threads\n",
               mi.native ? (a.native_f32_act ? "native-f32" : "native")
                         : tq_dtype_name(mi.weight_type),
               mi.weight_bytes / 1048576.0,
               mi.native ? mi.native_kernels : mi.kernel ? mi.kernel : "?", kvname,
               kv.bytes_per_token, mi.n_threads);
        printf("weights  %.2f MB read per decode token (every matrix once)\n",
               mi.weight_bytes_token / 1048576.0);
        printf("prefill  %ld tokens: %.1f tok/s (median of %ld)\n", prefill, p_med, runs);
        for (int d = 0; d < n_depths; d++)
            printf("decode   depth %5ld: %.1f tok/s (%ld steps)\n", (long)depths[d],
                   median(dc[d], (int)runs), decode);
        printf("memory   peak RSS %.1f MB\n", rss / 1024.0);
    }
    rc = 0;
out:
    free(toks);
    free(logits);
    tq_session_free(sess);
    tq_model_free(model);
    return rc;
}
