/* env_opts.h -- THE one place tq reads the environment. The library reads none: every switch is
 * an option the caller passes (tq_cpu_select, tq_log_set_level, tq_pool_set_default_spin,
 * tq_session_opts.turbo_attn, tq_model_opts.matvec_bf16 / gemm_openblas); this file fills them
 * from the documented variables (README "Environment") and the global flags before the command:
 *     tq [--cpu ISA] [--log LEVEL] [--pool-spin N] COMMAND ...
 * A flag wins over its variable. */
#ifndef TQ_TOOLS_ENV_OPTS_H
#define TQ_TOOLS_ENV_OPTS_H

#include "turboquant.h"

/* cli_env_start() -- at the start of main(): TQ_LOG / --log (error|warn|info|debug),
 * TQ_CPU / --cpu (scalar|avx2|avx512|avx512vnni: avx512 without the AMX tiles), TQ_POOL_SPIN / --pool-spin (N >= 0) into the library.
 * The global flags are removed from (*argc, *argv). An unknown value of a variable is warned
 * about and ignored; of a flag, it is a usage error. A level this CPU cannot run is warned
 * about and the best one is used (as before). Returns 0, or 2 after printing the usage error. */
int cli_env_start(int *argc, char ***argv);

/* cli_env_session() -- the session options the environment sets: TQ_TURBO_ATTN=fused|ref|both
 * (attention path of turbo caches). Call it after tq_session_opts_default(). */
void cli_env_session(tq_session_opts *opts);

/* cli_model_env() -- TQ_MATVEC=avx512bf16 -> opts->matvec_bf16, TQ_GEMM=openblas|own ->
 * opts->gemm_openblas (an unknown value is warned about and ignored). */
void cli_model_env(tq_model_opts *opts);

/* The global flags' help lines (tq --help). */
#define CLI_ENV_USAGE                                                                            \
    "global options (before COMMAND; each overrides its environment variable):\n"               \
    "  --cpu ISA        CPU kernels: scalar, avx2, avx512, avx512vnni (= avx512 without AMX)\n"        \
    "                   (TQ_CPU; default: the best, AMX int8 tiles where the CPU has them)\n"        \
    "  --log LEVEL      messages: error, warn, info, debug (TQ_LOG; default warn)\n"            \
    "  --pool-spin N    pause iterations a pool thread spins between jobs (TQ_POOL_SPIN;\n"     \
    "                   default 2000, 0 on an oversubscribed machine)\n"                        \
    "environment only: TQ_TURBO_ATTN=fused|ref|both (turbo KV attention path),\n"           \
    "  TQ_MATVEC=avx512bf16, TQ_GEMM=own|openblas (README \"Environment\")\n"

#endif
