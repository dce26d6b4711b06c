/* prompt_cache.c -- `tq generate --load-prompt-cache F / --save-prompt-cache F`: restore a KV
 * cache snapshot (turboquant/eval.h, docs/FORMAT.md "KV cache snapshot") whose tokens are a
 * prefix of the prompt, and/or save the prompt's cache. */
#include <time.h>

#include "cli.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int prompt_cache(const char *cmd, tq_session *s, const char *load, const char *save,
                 const int32_t *ids, int64_t n, int64_t *skip, int64_t *n_eval, double *eval_s)
{
    tq_status st;
    *skip = 0;
    *n_eval = 0;
    *eval_s = 0;
    if (n < 1)
        return 0;
    if (load) {
        const int64_t cap = tq_session_n_ctx(s);
        int32_t *cached = malloc((size_t)cap * sizeof(int32_t));
        int64_t nc = 0;
        if (!cached)
            return cli_error(cmd, TQ_E_NOMEM, "out of memory for the prompt cache");
        if ((st = tq_session_load(s, load, cached, cap, &nc))) {
            free(cached);
            return cli_error(cmd, st, "--load-prompt-cache '%s' refused", load);
        }
        int64_t l = 0;
        while (l < nc && l < n - 1 && cached[l] == ids[l]) /* keep >= 1 token to evaluate */
            l++;
        free(cached);
        if (nc != tq_session_n_past(s) || nc == 0) {
            tq_session_reset(s); /* a cache without token ids cannot be matched to a prompt */
            l = 0;
        } else if (tq_session_trim(s, nc - l)) {
            tq_session_reset(s); /* a ring (sliding window) cannot go back that far */
            l = 0;
        }
        fprintf(stderr, "tq %s: prompt cache '%s': %lld of %lld prompt tokens reused\n", cmd, load,
                (long long)l, (long long)n);
        *skip = l;
    }
    if (save) {
        /* evaluate the prompt but its last token (whose logits start generation), then save */
        if (n - 1 > *skip) {
            const double t0 = now_s();
            if ((st = tq_session_eval(s, ids + *skip, n - 1 - *skip, NULL)))
                return cli_error(cmd, st, "prompt evaluation for --save-prompt-cache");
            *eval_s = now_s() - t0;
            *n_eval = n - 1 - *skip;
            *skip = n - 1;
        }
        if ((st = tq_session_save(s, ids, tq_session_n_past(s), save)))
            return cli_error(cmd, st, "--save-prompt-cache '%s'", save);
        fprintf(stderr, "tq %s: prompt cache saved to '%s' (%lld tokens)\n", cmd, save,
                (long long)tq_session_n_past(s));
    }
    return 0;
}
