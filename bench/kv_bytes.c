/* kv_bytes.c -- KV-cache bytes per token of a model at given contexts, per scheme: sliding-window
 * layers kept as ring buffers (the default) against keeping every token (swa_full), from the
 * sessions' own accounting (tq_session_kv_bytes: bytes_capacity of a session of n_ctx tokens,
 * divided by n_ctx). Prints a markdown table for docs/results.md. Allocates the sessions (their
 * pages are not touched beyond the rings), so memory is not a concern.
 * usage: kv_bytes [MODEL] [CTX,CTX,...] [SCHEME,SCHEME,...]
 *   defaults: models/gemma-3-270m-q4_k_m.gguf 4096,32768 and the schemes below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turboquant.h"

static const char *const def_schemes =
    "bf16,f16,kv8,kv4,turbo,turbo+sq,turbo:k4v3+rk,turbo:k4v3+rk+sq,rot:q8_0/q8_0,rot:q8_0/q4_0,"
    "rot:q4_0/q4_0,rot:l181g64/l32g64,rot:l64g64/l22g64,rot:l32g64/l11g64";

static int bytes_at(tq_model *m, const char *scheme, int n_ctx, int swa_full, double *out)
{
    tq_session_opts so;
    tq_session_opts_default(&so);
    if (tq_kv_scheme_parse(scheme, &so.kv))
        return -1;
    so.n_ctx = n_ctx;
    so.swa_full = swa_full;
    tq_session *s = NULL;
    if (tq_session_create(m, &so, &s))
        return -1;
    tq_kv_usage u;
    tq_session_kv_bytes(s, &u);
    *out = (double)u.bytes_capacity / (double)n_ctx;
    tq_session_free(s);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "models/gemma-3-270m-q4_k_m.gguf";
    char ctxs[256], schemes[1024];
    snprintf(ctxs, sizeof(ctxs), "%s", argc > 2 ? argv[2] : "4096,32768");
    snprintf(schemes, sizeof(schemes), "%s", argc > 3 ? argv[3] : def_schemes);
    tq_log_set_level(TQ_LOG_ERROR);
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = 1;
    tq_model *m = NULL;
    if (tq_model_load(path, &mo, &m)) {
        fprintf(stderr, "kv_bytes: %s: %s\n", path, tq_last_error());
        return 1;
    }
    int ctx[16], nc = 0;
    for (char *t = strtok(ctxs, ","); t && nc < 16; t = strtok(NULL, ","))
        ctx[nc++] = atoi(t);
    printf("KV bytes per token, %s (sliding layers: ring = window only, the default; full = "
           "swa_full)\n\n| scheme | every token kept |", path);
    for (int i = 0; i < nc; i++)
        printf(" ring at %d | vs bf16 full |", ctx[i]);
    printf("\n|---|---:|");
    for (int i = 0; i < nc; i++)
        printf("---:|---:|");
    printf("\n");
    double bf16_full = 0;
    if (bytes_at(m, "bf16", ctx[0], 1, &bf16_full)) {
        fprintf(stderr, "kv_bytes: bf16: %s\n", tq_last_error());
        return 1;
    }
    int rc = 0;
    for (char *sv = NULL, *sc = strtok_r(schemes, ",", &sv); sc; sc = strtok_r(NULL, ",", &sv)) {
        double full;
        if (bytes_at(m, sc, ctx[0], 1, &full)) {
            fprintf(stderr, "kv_bytes: %s: %s\n", sc, tq_last_error());
            rc = 1;
            continue;
        }
        printf("| %s | %.0f |", sc, full);
        for (int i = 0; i < nc; i++) {
            double r;
            if (bytes_at(m, sc, ctx[i], 0, &r)) {
                printf(" error | |");
                rc = 1;
                continue;
            }
            printf(" %.0f | %.3f |", r, r / bf16_full);
        }
        printf("\n");
    }
    tq_model_free(m);
    return rc;
}
