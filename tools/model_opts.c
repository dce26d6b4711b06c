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
