/* cmd_ppl.c -- `tq ppl`: perplexity of a text file through a KV-cache scheme (llama.cpp-style
 * non-overlapping windows, loss on the second half of each window). Also the loader that
 * `tq kl` shares (eval_open). */
#include <errno.h>
#include <time.h>

#include "cli.h"

#define EVAL_DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct prog {
    const char *cmd;
    double t0;
} prog;

void eval_progress(void *user, int64_t done, int64_t total)
{
    prog *p = user;
    const double el = now_s() - p->t0;
    fprintf(stderr, "\rtq %s: window %lld/%lld, %.1f s elapsed, ~%.0f s left   ", p->cmd,
            (long long)done, (long long)total, el, el / (double)done * (double)(total - done));
    if (done == total)
        fprintf(stderr, "\n");
}

int eval_open(const char *cmd, const char *model, const char *text, int threads,
              tq_model **m, int32_t **tokens, int64_t *n_tokens, int32_t *bos)
{
    tq_model_opts mo;
    tq_tokenizer *tok = NULL;
    tq_status st;
    char *buf = NULL;
    *m = NULL;
    *tokens = NULL;
    FILE *f = fopen(text, "rb");
    if (!f) {
        fprintf(stderr, "tq %s: cannot open text '%s' (-f): %s\n", cmd, text, strerror(errno));
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(buf);
        fprintf(stderr, "tq %s: cannot read text '%s'\n", cmd, text);
        return 1;
    }
    fclose(f);
    tq_model_opts_default(&mo);
    mo.n_threads = threads;
    if ((st = tq_model_load(model, &mo, m))) {
        free(buf);
        return cli_error(cmd, st, "cannot load model '%s'", model);
    }
    if ((st = tq_tokenizer_load(model, &tok))) {
        free(buf);
        tq_model_free(*m);
        *m = NULL;
        return cli_error(cmd, st, "cannot load the tokenizer of '%s'", model);
    }
    const int64_t cap = tq_tokenizer_encode_bound((size_t)len);
    *tokens = malloc((size_t)cap * sizeof(int32_t));
    if (!*tokens || (st = tq_tokenizer_encode(tok, buf, (size_t)len, 0, *tokens, cap, n_tokens))) {
        free(buf);
        tq_tokenizer_free(tok);
        tq_model_free(*m);
        *m = NULL;
        return cli_error(cmd, st, "cannot tokenize '%s'", text);
    }
    *bos = tq_tokenizer_add_bos(tok) ? tq_tokenizer_bos(tok) : -1;
    tq_tokenizer_free(tok);
    free(buf);
    return 0;
}

static void usage(void)
{
    printf("usage: tq ppl [-m MODEL] -f TEXT [--kv S] [--ctx N] [--chunks N] [-t N] [--json F]\n\n"
           "Perplexity of TEXT through a KV cache of scheme S, in non-overlapping windows of N\n"
           "tokens (default 512); the loss is taken on the second half of each window, the first\n"
           "token of a window is BOS when the tokenizer adds one (llama.cpp's perplexity).\n\n"
           "  -m MODEL      GGUF file or HF directory (default %s)\n"
           "  -f TEXT       text file (e.g. ../shared/assets/corpora/wikitext-2-raw-test.txt)\n"
           "  --kv S        %s\n"
           "  --ctx N       window length (even, default 512)\n"
           "  --chunks N    evaluate only the first N windows (default: all)\n"
           "  -t N          threads (default: every core)\n"
           "  --json F      also write the result as JSON to F ('-' = stdout)\n",
           EVAL_DEFAULT_MODEL, tq_kv_schemes_help());
}

int cmd_ppl(int argc, char **argv)
{
    const char *cmd = "ppl", *model = EVAL_DEFAULT_MODEL, *text = NULL, *kvs = "bf16",
               *json = NULL;
    long ctx = 512, chunks = 0, threads = 0;
    if (cli_is_help(argc, argv)) {
        usage();
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "tq ppl: '%s' needs a value (see tq ppl --help)\n", a);
            return 2;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file"))
            text = v;
        else if (!strcmp(a, "--kv"))
            kvs = v;
        else if (!strcmp(a, "--json"))
            json = v;
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
            if (cli_int(cmd, a, v, &ctx))
                return 2;
        } else if (!strcmp(a, "--chunks")) {
            if (cli_int(cmd, a, v, &chunks))
                return 2;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (cli_int(cmd, a, v, &threads))
                return 2;
        } else {
            fprintf(stderr, "tq ppl: unknown flag '%s' (see tq ppl --help)\n", a);
            return 2;
        }
        i++;
    }
    if (!text) {
        fprintf(stderr, "tq ppl: -f TEXT is required (see tq ppl --help)\n");
        return 2;
    }
    tq_kv_scheme kv;
    tq_status st = tq_kv_scheme_parse(kvs, &kv);
    if (st)
        return cli_error(cmd, st, "--kv '%s'", kvs), 2;
    if (ctx < 4 || ctx % 2 || ctx > 1 << 20) {
        fprintf(stderr, "tq ppl: --ctx %ld must be even and >= 4\n", ctx);
        return 2;
    }
    tq_model *m;
    int32_t *tokens, bos;
    int64_t n;
    int rc = eval_open(cmd, model, text, (int)threads, &m, &tokens, &n, &bos);
    if (rc)
        return rc;
    fprintf(stderr, "tq ppl: %s: %lld tokens, %lld windows of %ld, kv %s\n", text, (long long)n,
            (long long)(n / ctx), ctx, kvs);
    prog p = {cmd, now_s()};
    tq_ppl_result r;
    st = tq_eval_ppl(m, tokens, n, bos, kv, (int)ctx, chunks, eval_progress, &p, &r);
    if (st) {
        rc = cli_error(cmd, st, "evaluation failed");
    } else {
        char nm[48];
        tq_kv_scheme_name(kv, nm, sizeof(nm));
        printf("kv %s: ppl %.4f (nll %.5f) over %lld tokens in %lld windows of %ld, %.1f s\n", nm,
               r.ppl, r.nll, (long long)r.n_scored, (long long)r.n_windows, ctx, r.seconds);
        if (json) {
            FILE *f = strcmp(json, "-") ? fopen(json, "w") : stdout;
            if (!f) {
                fprintf(stderr, "tq ppl: cannot write '%s': %s\n", json, strerror(errno));
                rc = 1;
            } else {
                fprintf(f, "{\"model\": \"%s\", \"text\": \"%s\", \"kv\": \"%s\", \"ctx\": %ld, "
                           "\"windows\": %lld, \"scored\": %lld, \"nll\": %.6f, \"ppl\": %.6f, "
                           "\"seconds\": %.2f}\n",
                        model, text, nm, ctx, (long long)r.n_windows, (long long)r.n_scored, r.nll,
                        r.ppl, r.seconds);
                if (f != stdout)
                    fclose(f);
            }
        }
    }
    free(tokens);
    tq_model_free(m);
    return rc;
}
