/* model_opts.c -- see model_opts.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_opts.h"

void cli_model_env(tq_model_opts *o)
{
    const char *mv = getenv("TQ_MATVEC");
    if (mv && *mv) {
        if (!strcmp(mv, "avx512bf16"))
            o->matvec_bf16 = 1;
        else
            fprintf(stderr, "tq: warning: TQ_MATVEC=%s: unknown value (valid: avx512bf16); "
                            "ignored\n", mv);
    }
    const char *g = getenv("TQ_GEMM");
    if (g && *g) {
        if (!strcmp(g, "openblas"))
            o->gemm_openblas = 1;
        else if (strcmp(g, "own"))
            fprintf(stderr, "tq: warning: TQ_GEMM=%s: unknown value (valid: own, openblas); "
                            "using own\n", g);
    }
}

int cli_weights(const char *cmd, const char *v, tq_model_opts *o)
{
    if (!strcmp(v, "native") || !strcmp(v, "native-f32")) {
        o->weight_store = TQ_STORE_NATIVE;
        o->native_f32_act = !strcmp(v, "native-f32");
        return 0;
    }
    const tq_dtype dt = !strcmp(v, "bf16")  ? TQ_DTYPE_BF16
                        : !strcmp(v, "f16") ? TQ_DTYPE_F16
                        : !strcmp(v, "f32") ? TQ_DTYPE_F32
                                            : TQ_DTYPE_COUNT;
    if (dt == TQ_DTYPE_COUNT) {
        fprintf(stderr, "tq %s: --weights '%s' is not a weight mode (choose %s)\n", cmd, v,
                CLI_WEIGHTS_HELP);
        return 2;
    }
    o->weight_store = TQ_STORE_DEQUANT;
    o->weight_type = dt;
    return 0;
}
