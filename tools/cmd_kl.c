/* cmd_kl.c -- `tq kl`: teacher-forced KL divergence of KV-cache schemes against an
 * unquantized cache on the same token stream (SPEC A4), with memory per token. */
#include "eval_cli.h"

#define KL_MAX_SCHEMES 32

static void usage(void)
{
    printf("usage: tq kl [-m MODEL] -f TEXT --kv S[,S...] [--teacher T] [--ctx N] [--chunks N]\n"
           "             [-t N] [--weights W] [--json F]\n"
           "       tq kl --teacher-dump DUMP -m CANDIDATE [--kv S[,S...]] [-f TEXT] [-t N]\n"
           "             [--tokenizer T]\n"
           "             [--weights W] [--json F]\n\n"
           "Teacher-forced KL: every window of TEXT goes through a cache of scheme T (default\n"
           "f32) and through one cache per scheme S; at every scored position (second half of the\n"
           "window) KL(teacher || scheme) is taken over the full vocabulary. Prints mean, median,\n"
           "p95, p99, max KL, top-1 agreement, the scheme's perplexity and KV bytes per token.\n\n"
           "  -m MODEL      GGUF file or HF directory (default %s)\n"
           "  -f TEXT       text file\n"
           "  --kv LIST     comma-separated schemes (repeatable): %s\n"
           "  --teacher T   the reference cache (default f32)\n"
           "  --ctx N       window length, even, 4..1048576 (default 512)\n"
           "  --chunks N    number of windows (default 32; 0 = all)\n"
           "  -t N          threads, 0..256 (default 0 = every core)\n"
           "  --weights W   bf16 (default: weights dequantized at load, so the KL is the KV\n"
           "                cache's alone), f16, f32, native, native-f32 (native's q8 activations\n"
           "                round every KV difference up: bf16 KV then shows KL 0.003, not 1e-5)\n"
           "  --json F      also write the results as JSON to F ('-' = stdout)\n"
           "  --teacher-dump DUMP  score against a dump of `tq teacher` instead of running a\n"
           "                teacher: windows, ctx and tokens come from DUMP; --kv defaults to f32;\n"
           "                -f TEXT (optional) must be the text the dump was made from; KL over\n"
           "                the teacher's top-K tokens + one bucket for the rest\n"
           "  --cuda        with --teacher-dump: evaluate the candidate on the GPU (--weights f32\n"
           "                --kv f32: the CPU's f32 forward up to summation order)\n"
           "  --tokenizer T  with --teacher-dump: take the candidate's tokenizer (checked\n"
           "                against the dump's) from T (a .gguf or tokenizer.json), for a\n"
           "                directory without one (an MLX directory written from a GGUF)\n",
           EVAL_DEFAULT_MODEL, tq_kv_schemes_help());
}

int cmd_kl(int argc, char **argv)
{
    const char *cmd = "kl", *teach = "f32", *dump = NULL;
    int window_flags = 0; /* --teacher / --ctx / --chunks given (refused with --teacher-dump) */
    eval_args e = {.model = EVAL_DEFAULT_MODEL, .ctx = 512, .chunks = 32};
    char *names[KL_MAX_SCHEMES];
    char lists[2048] = "";
    int ns = 0;
    if (cli_is_help(argc, argv)) {
        usage();
        return 0;
    }
    /* a KV instrument: weights dequantized to bf16 unless --weights says otherwise (native's
     * int8 activations amplify every KV difference: docs/results.md "Native weights") */
    if (eval_flag(cmd, "--weights", "bf16", &e) != 1)
        return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--cuda")) {
            e.cuda = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "tq kl: '%s' needs a value (see tq kl --help)\n", a);
            return 2;
        }
        const int r = eval_flag(cmd, a, v, &e);
        if (r < 0)
            return 2;
        if (!strcmp(a, "--ctx") || !strcmp(a, "-c") || !strcmp(a, "--chunks") ||
            !strcmp(a, "--teacher"))
            window_flags = 1;
        if (!r && !strcmp(a, "--teacher-dump"))
            dump = v;
        else if (!r && !strcmp(a, "--tokenizer"))
            e.tokenizer = v;
        else if (!r && !strcmp(a, "--teacher"))
            teach = v;
        else if (!r && !strcmp(a, "--kv")) {
            if (strlen(lists) + strlen(v) + 2 > sizeof(lists)) {
                fprintf(stderr, "tq kl: --kv lists too long\n");
                return 2;
            }
            if (*lists)
                strcat(lists, ",");
            strcat(lists, v);
        } else if (!r) {
            fprintf(stderr, "tq kl: unknown flag '%s' (see tq kl --help)\n", a);
            return 2;
        }
        i++;
    }
    const char *model = e.model, *text = e.text, *json = e.json;
    const long ctx = e.ctx, chunks = e.chunks;
    if (dump) {
        if (window_flags) {
            fprintf(stderr, "tq kl: --teacher, --ctx and --chunks come from the teacher dump; "
                            "drop them with --teacher-dump\n");
            return 2;
        }
        if (!*lists)
            strcpy(lists, "f32");
    }
    if (!dump && e.cuda) {
        fprintf(stderr, "tq kl: --cuda scores against a teacher dump (--teacher-dump DUMP)\n");
        return 2;
    }
    if (!dump && (!text || !*lists)) {
        fprintf(stderr, "tq kl: -f TEXT and --kv SCHEMES are required (see tq kl --help)\n");
        return 2;
    }
    tq_kv_scheme teacher, sch[KL_MAX_SCHEMES];
    tq_status st = tq_kv_scheme_parse(teach, &teacher);
    if (st)
        return cli_error(cmd, st, "--teacher '%s'", teach), 2;
    char given[sizeof(lists)];
    snprintf(given, sizeof(given), "%s", lists);
    if (cli_str_list(cmd, "--kv", given, lists, names, KL_MAX_SCHEMES, &ns))
        return 2;
    for (int k = 0; k < ns; k++)
        if ((st = tq_kv_scheme_parse(names[k], &sch[k])))
            return cli_error(cmd, st, "--kv '%s'", names[k]), 2;
    if (dump)
        return teacher_kl(cmd, &e, dump, sch, ns);
    if (ctx % 2) {
        fprintf(stderr, "tq kl: --ctx %ld must be even (valid: even numbers 4 .. %d)\n", ctx,
                EVAL_MAX_CTX);
        return 2;
    }
    tq_model *m;
    int32_t *tokens, bos;
    int64_t n;
    int rc = eval_open_ex(cmd, &e, &m, &tokens, &n, &bos, NULL, NULL);
    if (rc)
        return rc;
    const int64_t avail = n / ctx, nw = chunks > 0 && chunks < avail ? chunks : avail;
    fprintf(stderr, "tq kl: %s: %lld tokens; %lld windows of %ld; teacher %s; %d schemes\n", text,
            (long long)n, (long long)nw, ctx, teach, ns);
    eval_prog p = {cmd, eval_now()};
    tq_kl_stats r[KL_MAX_SCHEMES], tr;
    st = tq_eval_kl(m, tokens, n, bos, teacher, sch, ns, (int)ctx, nw, eval_progress, &p, r, &tr);
    const double secs = eval_now() - p.t0;
    if (st) {
        rc = cli_error(cmd, st, "evaluation failed");
        goto done;
    }
    char tn[48];
    tq_kv_scheme_name(teacher, tn, sizeof(tn));
    printf("teacher %s, %lld positions (%lld windows x %ld/2 - 1), %.0f s\n", tn, (long long)tr.n,
           (long long)nw, ctx, secs);
    printf("%-16s %9s %10s %10s %10s %10s %10s %7s %8s\n", "scheme", "B/token", "KL mean",
           "median", "p95", "p99", "max", "top-1", "ppl");
    printf("%-16s %9zu %10s %10s %10s %10s %10s %7s %8.4f\n", tn, tr.kv_bytes_per_token, "0", "0",
           "0", "0", "0", "1", tr.ppl);
    for (int k = 0; k < ns; k++) {
        char nm[48];
        tq_kv_scheme_name(sch[k], nm, sizeof(nm));
        printf("%-16s %9zu %10.5f %10.5f %10.5f %10.5f %10.4f %7.4f %8.4f\n", nm,
               r[k].kv_bytes_per_token, r[k].mean, r[k].median, r[k].p95, r[k].p99, r[k].max,
               r[k].top1, r[k].ppl);
    }
    if (json) {
        char tmp[4096];
        FILE *f = eval_json_open(cmd, json, tmp);
        if (!f) {
            rc = 1;
            goto done;
        }
        fprintf(f, "{\"model\": \"%s\", \"text\": \"%s\", \"ctx\": %ld, \"windows\": %lld, "
                   "\"positions\": %lld, \"seconds\": %.1f,\n \"teacher\": {\"kv\": \"%s\", "
                   "\"bytes_per_token\": %zu, \"ppl\": %.6f},\n \"schemes\": [",
                model, text, ctx, (long long)nw, (long long)tr.n, secs, tn,
                tr.kv_bytes_per_token, tr.ppl);
        for (int k = 0; k < ns; k++) {
            char nm[48];
            tq_kv_scheme_name(sch[k], nm, sizeof(nm));
            fprintf(f, "%s\n  {\"kv\": \"%s\", \"bytes_per_token\": %zu, \"kl_mean\": %.7g, "
                       "\"kl_median\": %.7g, \"kl_p95\": %.7g, \"kl_p99\": %.7g, \"kl_max\": %.7g, "
                       "\"top1\": %.6f, \"ppl\": %.6f}",
                    k ? "," : "", nm, r[k].kv_bytes_per_token, r[k].mean, r[k].median, r[k].p95,
                    r[k].p99, r[k].max, r[k].top1, r[k].ppl);
        }
        fprintf(f, "\n]}\n");
        rc = eval_json_close(cmd, f, json, tmp);
    }
done:
    (void)names;
    free(tokens);
    tq_model_free(m);
    return rc;
}
