/* eval_cli.h -- what `tq ppl` and `tq kl` share (tools/eval_cli.c): their common flags, the
 * model + text loader, the progress line, and the atomically written --json file. */
#ifndef TQ_EVAL_CLI_H
#define TQ_EVAL_CLI_H

#include "cli.h"

#define EVAL_DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define EVAL_MAX_CTX (1 << 20) /* the longest --ctx window (an even number from 4) */

/* The flags both commands take: -m/--model, -f/--file, --json, --ctx/-c, --chunks,
 * -t/--threads, --weights (applied by eval_open / eval_model_opts). */
typedef struct eval_args {
    const char *model, *text, *json;
    long ctx, chunks, threads;
    int cuda;              /* --cuda (no value; each command takes it before eval_flag): the
                            * evaluation through a GPU session (tq_cuda_session)             */
    const char *tokenizer; /* kl --teacher-dump, ppl: the candidate's tokenizer when its
                            * directory has none (an MLX directory written from a GGUF); NULL =
                            * -m's */
} eval_args;

/* eval_flag() -- take flag a with value v if it is a common one: 1 taken, 0 not a common flag,
 * -1 a bad value (message printed). Ranges: --ctx 4..EVAL_MAX_CTX (the caller checks that it
 * is even), --chunks 0..2^31-1 (0 = every window), -t 0..CLI_MAX_THREADS (0 = every core). */
int eval_flag(const char *cmd, const char *a, const char *v, eval_args *e);

/* eval_open() -- load model + tokenizer and tokenize the text file; *bos = the BOS id when the
 * tokenizer adds one, else -1. 0 or an exit code (message printed). */
int eval_open(const char *cmd, const char *model, const char *text, int threads, tq_model **m,
              int32_t **tokens, int64_t *n_tokens, int32_t *bos);

/* eval_model_opts() -- the model options of the current command: defaults, the environment
 * (cli_model_env), --weights as given to eval_flag, threads. */
void eval_model_opts(tq_model_opts *mo, int threads);

/* eval_open_ex() -- eval_open() with e's model, text and threads; *text_hash and
 * *tok_fp (may be NULL) receive tq_text_hash() of the text file and tq_tokenizer_fingerprint()
 * of the model's tokenizer (what a teacher dump records). */
int eval_open_ex(const char *cmd, const eval_args *e, tq_model **m, int32_t **tokens,
                 int64_t *n_tokens, int32_t *bos, uint64_t *text_hash, uint64_t *tok_fp);

/* eval_tokenizer_fp() -- load only the tokenizer of model and fingerprint it. 0 or an exit code
 * (message printed). */
int eval_tokenizer_fp(const char *cmd, const char *model, uint64_t *fp);

/* teacher_kl() -- `tq kl --teacher-dump DUMP` (tools/cmd_teacher.c): load e->model (and, when
 * e->text is given, check that the dump was made from that text), score schemes sch[0..ns)
 * against the dump, print the table (and e->json). 0 or an exit code. */
int teacher_kl(const char *cmd, const eval_args *e, const char *dump, const tq_kv_scheme *sch,
               int ns);

/* A tq_eval_progress_fn printing "window i/n, elapsed, left" to stderr. */
typedef struct eval_prog {
    const char *cmd;
    double t0;
} eval_prog;
double eval_now(void);
void eval_progress(void *user, int64_t done, int64_t total);

/* eval_json_open() / eval_json_close() -- the --json file: written through tq_atomic_file (io.h:
 * PATH.tmp.<pid>, fsynced and renamed over PATH on close, so an interrupted run leaves any
 * earlier PATH whole; FIFOs/devices written in place, symlinks resolved); "-" is
 * stdout. open returns NULL (message printed) on failure; close returns 0 or 1. tmp holds
 * at least 4096 bytes. */
FILE *eval_json_open(const char *cmd, const char *path, char *tmp);
int eval_json_close(const char *cmd, FILE *f, const char *path, const char *tmp);

#endif
