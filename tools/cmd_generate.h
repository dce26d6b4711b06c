/* cmd_generate.h -- what `tq generate`, `tq chat`, `tq bench` and the default job share: the
 * model/session/sampling flags, loading, and the streaming printer (tools/cmd_generate.c). */
#ifndef TQ_CMD_GENERATE_H
#define TQ_CMD_GENERATE_H

#include "cli.h"

#define GEN_DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
/* the KV cache of tq generate/chat/bench/serve and the main job unless --kv says otherwise:
 * rotated 6.5-bit block codes, chosen in README "KV cache: the default" (quality and speed
 * tables in docs/results.md); `--kv bf16` gives the unquantized cache */
#define GEN_DEFAULT_KV "rot:l181g64/l32g64"
#define GEN_MAX_CTX (1 << 24) /* the largest -c/--ctx (and --repeat-last-n) accepted */

/* Flags every engine command takes, with their defaults. */
typedef struct gen_args {
    const char *model;     /* -m                                                           */
    int threads;           /* -t (0 = every core)                                          */
    tq_dtype weights;      /* --weights f32|f16|bf16 (dequantize at load)                  */
    int weight_store;      /* --weights native[-f32]: TQ_STORE_*; default TQ_STORE_AUTO   */
    int native_f32_act;    /* --weights native-f32                                         */
    const char *kv;        /* --kv scheme name                                             */
    long ctx;              /* --ctx tokens (0 = model max)                                 */
    tq_gen_opts gen;       /* sampling + stopping                                          */
    const char *stop[16];  /* --stop (repeatable)                                          */
    int quiet;             /* -q: no statistics line                                       */
    long seed;             /* --seed (-1 = from the clock, printed; else >= 0)             */
    int cuda;              /* tq generate --cuda: the GPU session (tq_generator_create_cuda) */
} gen_args;

/* Everything a run needs, loaded from gen_args. */
typedef struct gen_ctx {
    tq_model *model;
    tq_tokenizer *tok;
    tq_session *session;       /* NULL with --cuda */
    tq_cuda_session *cuda;     /* --cuda only */
    tq_generator *gen;
    tq_model_info info;
} gen_ctx;

/* gen_args_default() -- the defaults the --help texts state. */
void gen_args_default(gen_args *a);
/* gen_parse_common() -- if argv[*i] is a shared flag, consume it (and its value) and return 1;
 * 0 if it is not one; -1 (message printed) on a bad value. */
int gen_parse_common(const char *cmd, gen_args *a, int argc, char **argv, int *i);
/* gen_common_help() -- the shared flags' help text. */
const char *gen_common_help(void);
/* gen_open() -- load model + tokenizer, create session and generator. 0 or exit code 1. */
int gen_open(const char *cmd, gen_args *a, gen_ctx *g);
void gen_close(gen_ctx *g);
/* gen_encode() -- text -> tokens (malloc'd *ids); special tokens parsed when `special`. */
int gen_encode(const char *cmd, gen_ctx *g, const char *text, int special, unsigned flags,
               int32_t **ids, int64_t *n);
/* gen_print_cb() -- a tq_gen_fn that writes the text to stdout and flushes; returns 1 (stop)
 * when stdout cannot be written (main() reports it). */
int gen_print_cb(void *user, int32_t token, const char *text, size_t len);
/* gen_print_stats() -- "prompt N tok, X tok/s | generated M tok, Y tok/s | stop: eos" to stderr;
 * N counts n_cached more prompt tokens restored from a prompt cache (not in X). */
void gen_print_stats(const tq_gen_stats *st, int64_t n_cached);

#endif
