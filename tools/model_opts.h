/* model_opts.h -- the tool's model options: flags and environment into tq_model_opts (one place;
 * tools/env_opts.{c,h} of the layout work may absorb the environment part). */
#ifndef TQ_TOOLS_MODEL_OPTS_H
#define TQ_TOOLS_MODEL_OPTS_H

#include "turboquant.h"

/* cli_model_env() -- TQ_MATVEC=avx512bf16 -> opts->matvec_bf16, TQ_GEMM=openblas|own ->
 * opts->gemm_openblas (an unknown value is warned about and ignored). */
void cli_model_env(tq_model_opts *opts);

#endif
