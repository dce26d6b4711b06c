/* model_opts.c -- see model_opts.h. */
#include <stdio.h>
#include <string.h>

#include "model_opts.h"

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
