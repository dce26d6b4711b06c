/* model_opts.h -- the tool's --weights flag into tq_model_opts (tools/model_opts.c); the
 * environment part lives in env_opts.h (cli_model_env). */
#ifndef TQ_TOOLS_MODEL_OPTS_H
#define TQ_TOOLS_MODEL_OPTS_H

#include "turboquant.h"

/* cli_weights() -- --weights VALUE into opts: native (block formats kept, q8 activations),
 * native-f32 (block formats, f32 activations), bf16|f16|f32 (dequantize at load). 0, or 2
 * after a message naming cmd and the valid values. */
int cli_weights(const char *cmd, const char *v, tq_model_opts *opts);
#define CLI_WEIGHTS_HELP "native (default for quantized GGUF), native-f32, bf16, f16 or f32"

#endif
