/* eval_internal.h -- the window machinery that src/model/eval.c (tq ppl, tq kl) and
 * src/model/teacher.c (teacher dumps) share, so that a teacher dump and a `tq kl` run score the
 * same positions from logits computed the same way. Internal to the library. */
#ifndef TQ_MODEL_EVAL_INTERNAL_H
#define TQ_MODEL_EVAL_INTERNAL_H

#include "model/engine.h"

/* log-sum-exp of a logits row in double (max first, then sum of exp(x - max)); *argmax (may be
 * NULL) = the first index of the largest value. */
double tq_evl_row_lse(const float *x, int n, int *argmax);

/* check_args of tq_eval_ppl / tq_eval_kl: tokens present, ctx even >= 4, at least one window;
 * *n_win = the windows to evaluate (max_windows <= 0: every whole window). */
tq_status tq_evl_check(const char *what, const int32_t *tokens, int64_t n_tokens, int ctx,
                       int64_t max_windows, int64_t *n_win);

/* window w of tokens into buf (ctx ids), its first id replaced by bos when bos >= 0. */
void tq_evl_window_tokens(int32_t bos, const int32_t *tokens, int64_t w, int ctx, int32_t *buf);

/* a session of scheme kv with n_ctx = ctx and the evaluator's batch size. */
tq_status tq_evl_session(tq_model *m, tq_kv_scheme kv, int ctx, tq_session **s);

/* One window through a reset session; lg (ctx x vocab floats) receives the logits of positions
 * *first .. ctx-1 (row 0 = position *first); *first <= ctx/2. */
tq_status tq_evl_window(tq_session *s, const int32_t *buf, int ctx, int vocab, float *lg,
                        int *first);

/* An evaluator: a CPU session, or (cuda) a GPU session (tq_cuda_session) of the same scheme.
 * Every window goes through a reset one. */
typedef struct tq_evl {
    tq_session *cpu;
    tq_cuda_session *gpu;
    int vocab, ctx;
} tq_evl;
tq_status tq_evl_open(tq_model *m, tq_kv_scheme kv, int ctx, int cuda, tq_evl *ev);
void tq_evl_close(tq_evl *ev);
/* bytes of K+V per token of the evaluator's cache */
size_t tq_evl_kv_bytes(const tq_evl *ev);
/* One window (buf, ctx tokens) through a reset evaluator; for each scored row i of the
 * positions ctx/2 + i, i < n_rows (n_rows <= ctx/2): lse[i], argmax[i] (may be NULL) as
 * tq_evl_row_lse, and picked[i * k + j] = the logit of ids[i * k + j] (k may be 0); logits (may
 * be NULL; ctx/2 x vocab) = the rows of positions ctx/2 .. ctx-1. On the CPU these come from the
 * full logits rows (lg, ctx x vocab scratch) with exactly the expressions tq_evl_row_lse and a
 * row lookup; on the GPU from the device (only these values cross the bus). */
tq_status tq_evl_score(tq_evl *ev, const int32_t *buf, int n_rows, float *lg, float *logits,
                       const int32_t *ids, int k, float *picked, double *lse, int32_t *argmax);

/* qsort comparator of floats (ascending) and the interpolated percentile p of a sorted array. */
int tq_evl_cmp_f(const void *a, const void *b);
double tq_evl_pct(const float *sorted, int64_t n, double p);

#endif
