/* cmd_ppl.c -- `tq ppl`: perplexity of a text file through a KV-cache scheme (llama.cpp-style
 * non-overlapping windows, loss on the second half of each window). */
#include "eval_cli.h"

static void usage(void)
{
    printf("usage: tq ppl [-m MODEL] -f TEXT [--kv S] [--ctx N] [--chunks N] [-t N] [--cuda]\n"
           "              [--tokenizer T] [--json F]\n\n"
           "Perplexity of TEXT through a KV cache of scheme S, in non-overlapping windows of N\n"
           "tokens (default 512); the loss is taken on the second half of each window, the first\n"
           "token of a window is BOS when the tokenizer adds one (llama.cpp's perplexity).\n\n"
           "  -m MODEL      GGUF file or HF directory (default %s)\n"
           "  -f TEXT       text file (e.g. ../shared/assets/corpora/wikitext-2-raw-test.txt)\n"
           "  --kv S        %s\n"
           "  --ctx N       window length, even, 4..1048576 (default 512)\n"
           "  --chunks N    evaluate only the first N windows (default 0 = all)\n"
           "  -t N          threads, 0..256 (default 0 = every core)\n"
           "  --weights W   native (default for quantized GGUF), native-f32, bf16, f16, f32\n"
           "  --cuda        evaluate on the GPU (tq_cuda_session: bf16 or f32 weights, native\n"
           "                blocks; --kv f32 = an f32 device cache; --weights f32 --kv f32 is the\n"
           "                CPU's f32 forward up to summation order)\n"
           "  --gpu-sessions N  with --cuda: N GPU sessions (streams) on N threads, windows\n"
           "                dealt round-robin (1..64, default 1; the same result for every N)\n"
           "  --tokenizer T take the tokenizer of T (a GGUF or HF directory) instead of MODEL's\n"
           "                (an MLX directory written from a GGUF has none)\n"
           "  --json F      also write the result as JSON to F ('-' = stdout)\n",
           EVAL_DEFAULT_MODEL, tq_kv_schemes_help());
}

int cmd_ppl(int argc, char **argv)
{
    const char *cmd = "ppl", *kvs = "bf16";
    int gpu_sessions = 1;
    eval_args e = {.model = EVAL_DEFAULT_MODEL, .ctx = 512};
    if (cli_is_help(argc, argv)) {
        usage();
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--cuda")) {
            e.cuda = e.cuda ? e.cuda : 1;
            continue;
        }
        if (!strcmp(a, "--gpu-sessions") && v) {
            long g;
            if (cli_long(cmd, a, v, 1, 64, &g))
                return 2;
            gpu_sessions = (int)g;
            i++;
            continue;
        }
        if (!v) {
            fprintf(stderr, "tq ppl: '%s' needs a value (see tq ppl --help)\n", a);
            return 2;
        }
        const int r = eval_flag(cmd, a, v, &e);
        if (r < 0)
            return 2;
        if (!r && !strcmp(a, "--kv"))
            kvs = v;
        else if (!r && !strcmp(a, "--tokenizer"))
            e.tokenizer = v;
        else if (!r) {
            fprintf(stderr, "tq ppl: unknown flag '%s' (see tq ppl --help)\n", a);
            return 2;
        }
        i++;
    }
    const char *model = e.model, *text = e.text, *json = e.json;
    const long ctx = e.ctx, chunks = e.chunks;
    if (!text) {
        fprintf(stderr, "tq ppl: -f TEXT is required (see tq ppl --help)\n");
        return 2;
    }
    tq_kv_scheme kv;
    tq_status st = tq_kv_scheme_parse(kvs, &kv);
    if (st)
        return cli_error(cmd, st, "--kv '%s'", kvs), 2;
    if (ctx % 2) {
        fprintf(stderr, "tq ppl: --ctx %ld must be even (valid: even numbers 4 .. %d)\n", ctx,
                EVAL_MAX_CTX);
        return 2;
    }
    tq_model *m;
    int32_t *tokens, bos;
    int64_t n;
    int rc = eval_open_ex(cmd, &e, &m, &tokens, &n, &bos, NULL, NULL);
    if (rc)
        return rc;
    fprintf(stderr, "tq ppl: %s: %lld tokens, %lld windows of %ld, kv %s\n", text, (long long)n,
            (long long)(n / ctx), ctx, kvs);
    eval_prog p = {cmd, eval_now()};
    tq_ppl_result r;
    st = tq_eval_ppl_dev(m, tokens, n, bos, kv, (int)ctx, chunks, e.cuda ? gpu_sessions : 0,
                         eval_progress, &p, &r);
    if (st) {
        rc = cli_error(cmd, st, "evaluation failed");
    } else {
        char nm[48];
        tq_kv_scheme_name(kv, nm, sizeof(nm));
        printf("kv %s: ppl %.4f (nll %.5f) over %lld tokens in %lld windows of %ld, %.1f s\n", nm,
               r.ppl, r.nll, (long long)r.n_scored, (long long)r.n_windows, ctx, r.seconds);
        char tmp[4096];
        FILE *f = json ? eval_json_open(cmd, json, tmp) : NULL;
        if (json && !f)
            rc = 1;
        if (f) {
            fprintf(f, "{\"model\": \"%s\", \"text\": \"%s\", \"kv\": \"%s\", \"ctx\": %ld, "
                       "\"windows\": %lld, \"scored\": %lld, \"nll\": %.6f, \"ppl\": %.6f, "
                       "\"seconds\": %.2f, \"device\": \"%s\"}\n",
                    model, text, nm, ctx, (long long)r.n_windows, (long long)r.n_scored, r.nll,
                    r.ppl, r.seconds, e.cuda ? "cuda" : "cpu");
            rc = eval_json_close(cmd, f, json, tmp);
        }
    }
    free(tokens);
    tq_model_free(m);
    return rc;
}
