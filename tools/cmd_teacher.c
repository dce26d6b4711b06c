/* cmd_teacher.c -- `tq teacher`: write a teacher logits dump (top-K logits + full-vocabulary
 * log-sum-exp per scored position; docs/FORMAT.md "Teacher logits dump"), and the
 * `tq kl --teacher-dump` side that scores a candidate model against one (teacher_kl()). */
#include "eval_cli.h"

static void usage(void)
{
    printf("usage: tq teacher -m TEACHER -f TEXT -o DUMP [--ctx N] [--chunks N] [--top-k K]\n"
           "                  [--kv S] [--weights W] [-t N]\n\n"
           "Evaluates TEACHER on the windows tq kl uses (non-overlapping windows of N tokens, the\n"
           "second half of each scored) and writes, per scored position, the K largest logits with\n"
           "their token ids, the full-vocabulary log-sum-exp and the next token, with a header\n"
           "naming the model fingerprint, the text hash and the tokenizer fingerprint. Score any\n"
           "candidate against it with: tq kl --teacher-dump DUMP -m CANDIDATE [--kv S]\n\n"
           "  -m MODEL      the teacher, GGUF file or HF directory (default %s)\n"
           "  -f TEXT       text file\n"
           "  -o DUMP       output file (written atomically)\n"
           "  --ctx N       window length, even, 4..1048576 (default 512)\n"
           "  --chunks N    number of windows (default 32; 0 = all)\n"
           "  --top-k K     logits kept per position, 1..vocabulary (default 2048)\n"
           "  --kv S        the teacher's KV cache (default f32)\n"
           "  --weights W   f32 (default for a teacher), bf16, f16, native, native-f32\n"
           "  -t N          threads, 0..256 (default 0 = every core)\n"
           "  --cuda        evaluate on the GPU (f32 weights: cuBLAS fp32, no TF32; --kv f32: an\n"
           "                f32 device cache); the dump is the same format\n",
           EVAL_DEFAULT_MODEL);
}

int cmd_teacher(int argc, char **argv)
{
    const char *cmd = "teacher", *out = NULL, *kvs = "f32";
    eval_args e = {.model = EVAL_DEFAULT_MODEL, .ctx = 512, .chunks = 32};
    long top_k = 2048;
    if (cli_is_help(argc, argv)) {
        usage();
        return 0;
    }
    if (eval_flag(cmd, "--weights", "f32", &e) != 1) /* a teacher's default: f32 weights */
        return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--cuda")) {
            e.cuda = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "tq teacher: '%s' needs a value (see tq teacher --help)\n", a);
            return 2;
        }
        const int r = eval_flag(cmd, a, v, &e);
        if (r < 0)
            return 2;
        if (!r && (!strcmp(a, "-o") || !strcmp(a, "--out")))
            out = v;
        else if (!r && !strcmp(a, "--kv"))
            kvs = v;
        else if (!r && !strcmp(a, "--top-k")) {
            if (cli_long(cmd, a, v, 1, INT32_MAX, &top_k))
                return 2;
        } else if (!r && !strcmp(a, "--json")) {
            fprintf(stderr, "tq teacher: --json is not taken (the dump is the output)\n");
            return 2;
        } else if (!r) {
            fprintf(stderr, "tq teacher: unknown flag '%s' (see tq teacher --help)\n", a);
            return 2;
        }
        i++;
    }
    if (!e.text || !out) {
        fprintf(stderr, "tq teacher: -f TEXT and -o DUMP are required (see tq teacher --help)\n");
        return 2;
    }
    if (e.json) {
        fprintf(stderr, "tq teacher: --json is not taken (the dump is the output)\n");
        return 2;
    }
    if (e.ctx % 2) {
        fprintf(stderr, "tq teacher: --ctx %ld must be even (valid: even numbers 4 .. %d)\n",
                e.ctx, EVAL_MAX_CTX);
        return 2;
    }
    tq_teacher_opts o;
    tq_teacher_opts_default(&o);
    tq_status st = tq_kv_scheme_parse(kvs, &o.kv);
    if (st)
        return cli_error(cmd, st, "--kv '%s'", kvs), 2;
    tq_model *m;
    int32_t *tokens, bos;
    int64_t n;
    int rc = eval_open_ex(cmd, &e, &m, &tokens, &n, &bos, &o.text_hash, &o.tokenizer_fp);
    if (rc)
        return rc;
    const int64_t avail = n / e.ctx, nw = e.chunks > 0 && e.chunks < avail ? e.chunks : avail;
    o.ctx = (int)e.ctx;
    o.max_windows = nw;
    o.top_k = (int)top_k;
    o.cuda = e.cuda;
    fprintf(stderr, "tq teacher: %s: %lld tokens; %lld windows of %ld; kv %s; top-%ld\n", e.text,
            (long long)n, (long long)nw, e.ctx, kvs, top_k);
    eval_prog p = {cmd, eval_now()};
    tq_teacher_info in;
    st = tq_teacher_write(m, tokens, n, bos, &o, out, eval_progress, &p, &in);
    if (st)
        rc = cli_error(cmd, st, "cannot write the teacher dump '%s'", out);
    else
        printf("teacher dump %s: %lld positions (%lld windows x %d/2 - 1), top-%d of %d, %.1f MB, "
               "%.0f s\nteacher %016llx (kv %s), text %016llx, tokenizer %016llx\n"
               "teacher ppl %.4f; probability outside the top %d: mean %.3g, max %.3g\n",
               out, (long long)in.n_scored, (long long)in.n_windows, in.ctx, in.top_k, in.vocab,
               (double)in.file_bytes / 1e6, eval_now() - p.t0,
               (unsigned long long)in.model_fp, in.kv, (unsigned long long)in.text_hash,
               (unsigned long long)in.tokenizer_fp, in.ppl, in.top_k, in.tail_mean, in.tail_max);
    free(tokens);
    tq_model_free(m);
    return rc;
}

int teacher_kl(const char *cmd, const eval_args *e, const char *dump, const tq_kv_scheme *sch,
               int ns)
{
    tq_model *m = NULL;
    uint64_t text_hash = 0, tok_fp = 0;
    int rc;
    if (e->text) { /* the text must be the dump's: hash it (tokenizing it too, as eval_open does) */
        int32_t *tokens, bos;
        int64_t n;
        if ((rc = eval_open_ex(cmd, e, &m, &tokens, &n, &bos, &text_hash, &tok_fp)))
            return rc;
        free(tokens);
    } else {
        tq_model_opts mo;
        eval_model_opts(&mo, (int)e->threads);
        const tq_status st = tq_model_load(e->model, &mo, &m);
        if (st)
            return cli_error(cmd, st, "cannot load model '%s'", e->model);
        if ((rc = eval_tokenizer_fp(cmd, e->tokenizer ? e->tokenizer : e->model, &tok_fp))) {
            tq_model_free(m);
            return rc;
        }
    }
    tq_kl_stats r[64];
    tq_teacher_info in;
    if (ns < 1 || ns > 64) {
        tq_model_free(m);
        fprintf(stderr, "tq %s: %d schemes (valid: 1..64)\n", cmd, ns);
        return 2;
    }
    eval_prog p = {cmd, eval_now()};
    const tq_status st = tq_eval_kl_teacher_dev(m, dump, text_hash, tok_fp, sch, ns, e->cuda,
                                                eval_progress, &p, r, &in);
    const double secs = eval_now() - p.t0;
    if (st) {
        rc = cli_error(cmd, st, "scoring '%s' against the teacher dump '%s'", e->model, dump);
        tq_model_free(m);
        return rc;
    }
    const uint64_t fp = tq_model_fingerprint(m);
    printf("teacher dump %s: teacher %016llx (kv %s, ppl %.4f), %lld positions (%lld windows x "
           "%d/2 - 1), top-%d of %d (teacher mass outside: mean %.3g, max %.3g), %.0f s\n"
           "candidate %s: %016llx%s\n",
           dump, (unsigned long long)in.model_fp, in.kv, in.ppl, (long long)in.n_scored,
           (long long)in.n_windows, in.ctx, in.top_k, in.vocab, in.tail_mean, in.tail_max, secs,
           e->model, (unsigned long long)fp, fp == in.model_fp ? " (the teacher itself)" : "");
    printf("%-16s %9s %10s %10s %10s %10s %10s %7s %8s\n", "scheme", "B/token", "KL mean",
           "median", "p95", "p99", "max", "top-1", "ppl");
    for (int k = 0; k < ns; k++) {
        char nm[48];
        tq_kv_scheme_name(sch[k], nm, sizeof(nm));
        printf("%-16s %9zu %10.5f %10.5f %10.5f %10.5f %10.4f %7.4f %8.4f\n", nm,
               r[k].kv_bytes_per_token, r[k].mean, r[k].median, r[k].p95, r[k].p99, r[k].max,
               r[k].top1, r[k].ppl);
    }
    rc = 0;
    if (e->json) {
        char tmp[4096];
        FILE *f = eval_json_open(cmd, e->json, tmp);
        if (!f)
            rc = 1;
        else {
            fprintf(f, "{\"model\": \"%s\", \"teacher_dump\": \"%s\", \"teacher_fingerprint\": "
                       "\"%016llx\", \"candidate_fingerprint\": \"%016llx\", \"ctx\": %d, "
                       "\"windows\": %lld, \"positions\": %lld, \"top_k\": %d, \"tail_mean\": "
                       "%.6g, \"seconds\": %.1f,\n \"teacher\": {\"kv\": \"%s\", \"ppl\": %.6f},\n"
                       " \"schemes\": [",
                    e->model, dump, (unsigned long long)in.model_fp, (unsigned long long)fp,
                    in.ctx, (long long)in.n_windows, (long long)in.n_scored, in.top_k,
                    in.tail_mean, secs, in.kv, in.ppl);
            for (int k = 0; k < ns; k++) {
                char nm[48];
                tq_kv_scheme_name(sch[k], nm, sizeof(nm));
                fprintf(f, "%s\n  {\"kv\": \"%s\", \"bytes_per_token\": %zu, \"kl_mean\": %.7g, "
                           "\"kl_median\": %.7g, \"kl_p95\": %.7g, \"kl_p99\": %.7g, \"kl_max\": "
                           "%.7g, \"top1\": %.6f, \"ppl\": %.6f}",
                        k ? "," : "", nm, r[k].kv_bytes_per_token, r[k].mean, r[k].median,
                        r[k].p95, r[k].p99, r[k].max, r[k].top1, r[k].ppl);
            }
            fprintf(f, "\n]}\n");
            rc = eval_json_close(cmd, f, e->json, tmp);
        }
    }
    tq_model_free(m);
    return rc;
}
