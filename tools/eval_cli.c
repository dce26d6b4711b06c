/* eval_cli.c -- shared parts of `tq ppl` and `tq kl` (eval_cli.h). */
#include "eval_cli.h"
#include "env_opts.h"
#include "model_opts.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

/* --weights of the current command (one command per process): eval_open() applies it */
static tq_model_opts eval_wopts;
static int eval_wset;

void eval_model_opts(tq_model_opts *mo, int threads)
{
    tq_model_opts_default(mo);
    cli_model_env(mo);
    if (eval_wset) {
        mo->weight_store = eval_wopts.weight_store;
        mo->weight_type = eval_wopts.weight_type;
        mo->native_f32_act = eval_wopts.native_f32_act;
    }
    mo->n_threads = threads;
}

int eval_flag(const char *cmd, const char *a, const char *v, eval_args *e)
{
    if (!strcmp(a, "--weights")) {
        tq_model_opts_default(&eval_wopts);
        if (cli_weights(cmd, v, &eval_wopts))
            return -1;
        eval_wset = 1;
        return 1;
    }
    if (!strcmp(a, "-m") || !strcmp(a, "--model"))
        e->model = v;
    else if (!strcmp(a, "-f") || !strcmp(a, "--file"))
        e->text = v;
    else if (!strcmp(a, "--json"))
        e->json = v;
    else if (!strcmp(a, "--ctx") || !strcmp(a, "-c"))
        return cli_long(cmd, a, v, 4, EVAL_MAX_CTX, &e->ctx) ? -1 : 1;
    else if (!strcmp(a, "--chunks"))
        return cli_long(cmd, a, v, 0, INT32_MAX, &e->chunks) ? -1 : 1;
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        int t = 0;
        if (cli_threads(cmd, a, v, 0, &t))
            return -1;
        e->threads = t;
    } else
        return 0;
    return 1;
}

double eval_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void eval_progress(void *user, int64_t done, int64_t total)
{
    eval_prog *p = user;
    const double el = eval_now() - p->t0;
    fprintf(stderr, "\rtq %s: window %lld/%lld, %.1f s elapsed, ~%.0f s left   ", p->cmd,
            (long long)done, (long long)total, el, el / (double)done * (double)(total - done));
    if (done == total)
        fprintf(stderr, "\n");
}

int eval_open(const char *cmd, const char *model, const char *text, int threads,
              tq_model **m, int32_t **tokens, int64_t *n_tokens, int32_t *bos)
{
    const eval_args e = {.model = model, .text = text, .threads = threads};
    return eval_open_ex(cmd, &e, m, tokens, n_tokens, bos, NULL, NULL);
}

int eval_tokenizer_fp(const char *cmd, const char *model, uint64_t *fp)
{
    tq_tokenizer *tok = NULL;
    const tq_status st = tq_tokenizer_load(model, &tok);
    if (st)
        return cli_error(cmd, st, "cannot load the tokenizer of '%s'", model);
    *fp = tq_tokenizer_fingerprint(tok);
    tq_tokenizer_free(tok);
    return 0;
}

int eval_open_ex(const char *cmd, const eval_args *e, tq_model **m, int32_t **tokens,
                 int64_t *n_tokens, int32_t *bos, uint64_t *text_hash, uint64_t *tok_fp)
{
    const char *model = e->model, *text = e->text;
    const int threads = (int)e->threads;
    tq_model_opts mo;
    tq_tokenizer *tok = NULL;
    tq_status st;
    char *buf = NULL;
    *m = NULL;
    *tokens = NULL;
    if (cli_not_dir(cmd, "-f", text))
        return 1;
    FILE *f = fopen(text, "rb");
    if (!f) {
        fprintf(stderr, "tq %s: cannot open text '%s' (-f): %s\n", cmd, text, strerror(errno));
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(buf);
        fprintf(stderr, "tq %s: cannot read text '%s'\n", cmd, text);
        return 1;
    }
    fclose(f);
    eval_model_opts(&mo, threads);
    if ((st = tq_model_load(model, &mo, m))) {
        free(buf);
        return cli_error(cmd, st, "cannot load model '%s'", model);
    }
    const char *tkp = e->tokenizer ? e->tokenizer : model;
    if ((st = tq_tokenizer_load(tkp, &tok))) {
        free(buf);
        tq_model_free(*m);
        *m = NULL;
        return cli_error(cmd, st, "cannot load the tokenizer of '%s'", tkp);
    }
    const int64_t cap = tq_tokenizer_encode_bound((size_t)len);
    *tokens = malloc((size_t)cap * sizeof(int32_t));
    if (!*tokens || (st = tq_tokenizer_encode(tok, buf, (size_t)len, 0, *tokens, cap, n_tokens))) {
        free(buf);
        free(*tokens);
        *tokens = NULL;
        tq_tokenizer_free(tok);
        tq_model_free(*m);
        *m = NULL;
        return cli_error(cmd, st, "cannot tokenize '%s'", text);
    }
    *bos = tq_tokenizer_add_bos(tok) ? tq_tokenizer_bos(tok) : -1;
    if (text_hash)
        *text_hash = tq_text_hash(buf, (size_t)len);
    if (tok_fp)
        *tok_fp = tq_tokenizer_fingerprint(tok);
    tq_tokenizer_free(tok);
    free(buf);
    return 0;
}

static tq_atomic_file *json_af; /* the --json file being written (tq_atomic_file, io.h) */

FILE *eval_json_open(const char *cmd, const char *path, char *tmp)
{
    if (!strcmp(path, "-"))
        return stdout;
    (void)tmp;
    FILE *f = tq_atomic_file_open(path, &json_af) ? NULL : tq_atomic_file_stream(json_af);
    if (!f) {
        fprintf(stderr, "tq %s: cannot write '%s': %s\n", cmd, path, tq_last_error());
        tq_atomic_file_abort(json_af);
        json_af = NULL;
    }
    return f;
}

int eval_json_close(const char *cmd, FILE *f, const char *path, const char *tmp)
{
    if (f == stdout)
        return cli_flush();
    (void)f, (void)tmp; /* f belongs to json_af: commit flushes, fsyncs, closes, renames */
    const tq_status st = tq_atomic_file_commit(json_af);
    json_af = NULL;
    if (st) {
        fprintf(stderr, "tq %s: cannot write '%s': %s (kept any earlier file)\n", cmd, path,
                tq_last_error());
        return 1;
    }
    return 0;
}
