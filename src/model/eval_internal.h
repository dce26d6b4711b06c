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

/* qsort comparator of floats (ascending) and the interpolated percentile p of a sorted array. */
int tq_evl_cmp_f(const void *a, const void *b);
double tq_evl_pct(const float *sorted, int64_t n, double p);

#endif
