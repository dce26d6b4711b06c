/* cli.h -- shared helpers of the tq subcommands (tools/ includes only turboquant.h + this). */
#ifndef TQ_CLI_H
#define TQ_CLI_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turboquant.h"
#include "cli_args.h"

/* A subcommand: returns the process exit code (0 ok, 1 failure, 2 usage error). */
typedef int (*tq_cmd_fn)(int argc, char **argv);

/* cli_error() -- print "tq CMD: message" and the library's last error if status != TQ_OK. */
int cli_error(const char *cmd, tq_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* cli_is_help() -- argv contains -h or --help. */
int cli_is_help(int argc, char **argv);

/* Subcommands (tools/cmd_*.c). */
int cmd_default(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_kv_bench(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_kv_bench_cuda(int argc, char **argv); /* tq kv-bench --cuda (tools/cmd_kv_bench_cuda.c) */
int cmd_bench_cuda(int argc, char **argv);    /* tq bench --cuda (tools/cmd_bench_cuda.c)       */
int cmd_ppl(int argc, char **argv); /* tq ppl (tools/cmd_ppl.c) */
int cmd_kl(int argc, char **argv);  /* tq kl (tools/cmd_kl.c)   */
int cmd_teacher(int argc, char **argv); /* tq teacher (tools/cmd_teacher.c) */
int cmd_quantize(int argc, char **argv); /* tq quantize (tools/cmd_quantize.c) */
int cmd_serve(int argc, char **argv); /* tq serve (tools/cmd_serve.c) */
/* prompt_cache() -- --load/--save-prompt-cache of tq generate (tools/prompt_cache.c): on return
 * the session holds ids[0..*skip), *n_eval of them evaluated here (for the save) in *eval_s
 * seconds, the rest restored from the loaded cache; 0 or an exit code (message printed). */
int prompt_cache(const char *cmd, tq_session *s, const char *load, const char *save,
                 const int32_t *ids, int64_t n, int64_t *skip, int64_t *n_eval, double *eval_s);

#endif
