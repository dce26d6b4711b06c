/* eval.c -- perplexity and teacher-forced KL between KV-cache schemes (turboquant/eval.h).
 * Log-softmax and KL are accumulated in double over the full vocabulary. Buffers are allocated
 * once per call (outside the per-window loop). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/eval_internal.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double tq_evl_row_lse(const float *x, int n, int *argmax)
{
    float mx = x[0];
    int am = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > mx) {
            mx = x[i];
            am = i;
        }
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += exp((double)x[i] - mx);
    if (argmax)
        *argmax = am;
    return (double)mx + log(s);
}

tq_status tq_evl_check(const char *what, const int32_t *tokens, int64_t n_tokens, int ctx,
                            int64_t max_windows, int64_t *n_win)
{
    if (!tokens || ctx < 4 || ctx % 2)
        return TQ_FAIL(TQ_E_ARG, "%s: need tokens and an even ctx >= 4 (ctx %d)", what, ctx);
    int64_t nw = n_tokens / ctx;
    if (nw < 1)
        return TQ_FAIL(TQ_E_ARG, "%s: %lld tokens are fewer than one window of %d", what,
                       (long long)n_tokens, ctx);
    if (max_windows > 0 && nw > max_windows)
        nw = max_windows;
    *n_win = nw;
    return TQ_OK;
}

void tq_evl_window_tokens(int32_t bos, const int32_t *tokens, int64_t w, int ctx, int32_t *buf)
{
    memcpy(buf, tokens + w * ctx, (size_t)ctx * sizeof(int32_t));
    if (bos >= 0)
        buf[0] = bos;
}

tq_status tq_evl_session(tq_model *m, tq_kv_scheme kv, int ctx, tq_session **s)
{
    tq_session_opts o;
    tq_session_opts_default(&o);
    o.kv = kv;
    o.n_ctx = ctx;
    o.n_batch = ctx < 256 ? ctx : 256;
    return tq_session_create(m, &o, s);
}

/* One window through a reset session. Only positions >= ctx/2 are scored, so the leading
 * multiple of n_batch below ctx/2 is evaluated without logits (no output layer for it); the
 * forward calls keep the same chunk boundaries as one eval_all of the whole window, so the
 * numbers are identical. Returns the index of the first token whose logits are in lg[0]. */
tq_status tq_evl_window(tq_session *s, const int32_t *buf, int ctx, int vocab, float *lg,
                             int *first)
{
    const int nb = ctx < 256 ? ctx : 256, skip = ctx / 2 / nb * nb;
    tq_status st;
    tq_session_reset(s);
    if (skip > 0 && (st = tq_session_eval(s, buf, skip, NULL)))
        return st;
    *first = skip;
    return tq_session_eval_all(s, buf + skip, ctx - skip, lg, (int64_t)(ctx - skip) * vocab);
}

tq_status tq_evl_open(tq_model *m, tq_kv_scheme kv, int ctx, int cuda, tq_evl *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->vocab = m->cfg.vocab;
    ev->ctx = ctx;
    if (cuda)
        return tq_cuda_session_create(m, kv, ctx, &ev->gpu);
    return tq_evl_session(m, kv, ctx, &ev->cpu);
}

void tq_evl_close(tq_evl *ev)
{
    tq_session_free(ev->cpu);
    tq_cuda_session_free(ev->gpu);
    ev->cpu = NULL;
    ev->gpu = NULL;
}

size_t tq_evl_kv_bytes(const tq_evl *ev)
{
    if (ev->gpu) {
        size_t kv = 0;
        tq_cuda_session_bytes(ev->gpu, NULL, &kv);
        return ev->ctx > 0 ? kv / (size_t)ev->ctx : 0;
    }
    tq_kv_usage u;
    tq_session_kv_bytes(ev->cpu, &u);
    return u.bytes_per_token;
}

tq_status tq_evl_score(tq_evl *ev, const int32_t *buf, int n_rows, float *lg, float *logits,
                       const int32_t *ids, int k, float *picked, double *lse, int32_t *argmax)
{
    const int ctx = ev->ctx, vocab = ev->vocab, h = ctx / 2;
    tq_status st;
    if (ev->gpu) {
        tq_cuda_session_reset(ev->gpu);
        /* rows h .. ctx-1 come back; only the first n_rows carry statistics: the ids of the
         * rest are -1 (their picks are not read) -- callers pass ids for n_rows rows, so the
         * statistics go to buffers of ctx/2 rows here */
        if (n_rows == h || (!lse && !argmax && !(k > 0 && picked)))
            return tq_cuda_session_eval_rows(ev->gpu, buf, ctx, h, logits, ids, k, picked, lse,
                                             argmax);
        int32_t *id2 = tq_malloc((size_t)h * (size_t)(k > 0 ? k : 1) * 4);
        float *pk2 = tq_malloc((size_t)h * (size_t)(k > 0 ? k : 1) * 4);
        double *l2 = tq_malloc((size_t)h * 8);
        int32_t *a2 = tq_malloc((size_t)h * 4);
        if (!id2 || !pk2 || !l2 || !a2) {
            st = TQ_FAIL(TQ_E_NOMEM, "tq_evl_score: out of memory");
        } else {
            for (int64_t i = 0; i < (int64_t)h * k; i++)
                id2[i] = i < (int64_t)n_rows * k ? ids[i] : -1;
            st = tq_cuda_session_eval_rows(ev->gpu, buf, ctx, h, logits, id2, k,
                                           picked ? pk2 : NULL, l2, a2);
            if (!st) {
                if (picked)
                    memcpy(picked, pk2, (size_t)n_rows * (size_t)k * 4);
                if (lse)
                    memcpy(lse, l2, (size_t)n_rows * 8);
                if (argmax)
                    memcpy(argmax, a2, (size_t)n_rows * 4);
            }
        }
        tq_free(id2);
        tq_free(pk2);
        tq_free(l2);
        tq_free(a2);
        return st;
    }
    int first;
    if ((st = tq_evl_window(ev->cpu, buf, ctx, vocab, lg, &first)))
        return st;
    if (logits)
        memcpy(logits, lg + (size_t)(h - first) * vocab, (size_t)(ctx - h) * vocab * 4);
    for (int i = 0; i < n_rows; i++) {
        const float *row = lg + (size_t)(h + i - first) * vocab;
        if (lse || argmax) {
            int am;
            const double l = tq_evl_row_lse(row, vocab, &am);
            if (lse)
                lse[i] = l;
            if (argmax)
                argmax[i] = am;
        }
        for (int j = 0; picked && j < k; j++) {
            const int32_t id = ids[(size_t)i * k + j];
            picked[(size_t)i * k + j] = id >= 0 && id < vocab ? row[id] : 0.0f;
        }
    }
    return TQ_OK;
}

tq_status tq_eval_ppl(tq_model *m, const int32_t *tokens, int64_t n_tokens, int32_t bos,
                      tq_kv_scheme kv,
                      int ctx, int64_t max_windows, tq_eval_progress_fn progress, void *user,
                      tq_ppl_result *out)
{
    return tq_eval_ppl_dev(m, tokens, n_tokens, bos, kv, ctx, max_windows, 0, progress, user,
                           out);
}

/* ppl on the GPU: per window only each scored row's log-sum-exp and its next token's logit
 * come back (tq_evl_score). n_sess GPU sessions (each its own stream and weights copy) take the
 * windows round-robin from as many threads, so that the small kernels of one window overlap
 * another's; every position's term is kept and summed in window order afterwards, so the result
 * does not depend on n_sess. */
typedef struct ppl_gpu_job {
    tq_evl *ev;
    const int32_t *tokens;
    int32_t bos;
    int ctx;
    int64_t nw;
    double *terms;      /* (nw, ctx/2 - 1) lse - logit[next]                              */
    tq_status *st;      /* per thread                                                     */
    char (*msg)[256];   /* per thread: the failure's text (the error text is per thread)  */
    tq_eval_progress_fn progress;
    void *user;
} ppl_gpu_job;

static void ppl_gpu_task(void *ctx_, int ith, int nth)
{
    ppl_gpu_job *j = ctx_;
    const int ctx = j->ctx, ns = ctx / 2 - 1;
    int32_t *buf = tq_malloc((size_t)ctx * 4), *ids = tq_malloc((size_t)ns * 4);
    float *pk = tq_malloc((size_t)ns * 4);
    double *lse = tq_malloc((size_t)ns * 8);
    tq_status st = TQ_OK;
    if (!buf || !ids || !pk || !lse)
        st = TQ_FAIL(TQ_E_NOMEM, "tq_eval_ppl: out of memory");
    for (int64_t w = ith; w < j->nw && !st; w += nth) {
        tq_evl_window_tokens(j->bos, j->tokens, w, ctx, buf);
        for (int i = 0; i < ns; i++)
            ids[i] = j->tokens[w * ctx + ctx / 2 + i + 1];
        if ((st = tq_evl_score(&j->ev[ith], buf, ns, NULL, NULL, ids, 1, pk, lse, NULL)))
            break;
        for (int i = 0; i < ns; i++)
            j->terms[w * ns + i] = lse[i] - (double)pk[i];
        if (j->progress && ith == 0) /* thread 0 reports (the others are at about its pace) */
            j->progress(j->user, w + nth < j->nw ? w + nth : j->nw, j->nw);
    }
    j->st[ith] = st;
    if (st)
        snprintf(j->msg[ith], sizeof(j->msg[ith]), "%s", tq_last_error());
    tq_free(buf);
    tq_free(ids);
    tq_free(pk);
    tq_free(lse);
}

static tq_status ppl_gpu(tq_model *m, const int32_t *tokens, int32_t bos, tq_kv_scheme kv,
                         int ctx, int64_t nw, int n_sess, tq_eval_progress_fn progress,
                         void *user, tq_ppl_result *out)
{
    const int ns = ctx / 2 - 1;
    if (n_sess > nw)
        n_sess = (int)nw;
    tq_evl *ev = tq_calloc((size_t)n_sess, sizeof(*ev));
    double *terms = tq_malloc((size_t)nw * (size_t)ns * 8);
    tq_status *sts = tq_calloc((size_t)n_sess, sizeof(*sts));
    char (*msg)[256] = tq_calloc((size_t)n_sess, sizeof(*msg));
    tq_pool *pool = NULL;
    tq_status st = TQ_OK;
    if (!ev || !terms || !sts || !msg)
        st = TQ_FAIL(TQ_E_NOMEM, "tq_eval_ppl: out of memory");
    for (int k = 0; k < n_sess && !st; k++)
        st = tq_evl_open(m, kv, ctx, 1, &ev[k]);
    if (!st && n_sess > 1)
        st = tq_pool_create(n_sess, &pool);
    const double t0 = now_s();
    if (!st) {
        ppl_gpu_job j = {ev, tokens, bos, ctx, nw, terms, sts, msg, progress, user};
        tq_pool_run(pool, ppl_gpu_task, &j);
        for (int k = 0; k < n_sess && !st; k++)
            if (sts[k])
                st = TQ_FAIL(sts[k], "%s", msg[k]);
    }
    if (!st) {
        double nll = 0.0;
        for (int64_t i = 0; i < nw * ns; i++)
            nll += terms[i];
        out->n_scored = nw * ns;
        out->n_windows = nw;
        out->nll = nll / (double)(nw * ns);
        out->ppl = exp(out->nll);
        out->seconds = now_s() - t0;
    }
    tq_pool_free(pool);
    for (int k = 0; ev && k < n_sess; k++)
        tq_evl_close(&ev[k]);
    tq_free(ev);
    tq_free(terms);
    tq_free(sts);
    tq_free(msg);
    return st;
}

tq_status tq_eval_ppl_dev(tq_model *m, const int32_t *tokens, int64_t n_tokens, int32_t bos,
                          tq_kv_scheme kv, int ctx, int64_t max_windows, int cuda,
                          tq_eval_progress_fn progress, void *user, tq_ppl_result *out)
{
    int64_t nw = 0;
    tq_status st;
    if (!m || !out)
        return TQ_FAIL(TQ_E_ARG, "tq_eval_ppl: NULL argument");
    memset(out, 0, sizeof(*out));
    if ((st = tq_evl_check("tq_eval_ppl", tokens, n_tokens, ctx, max_windows, &nw)))
        return st;
    if (cuda)
        return ppl_gpu(m, tokens, bos, kv, ctx, nw, cuda, progress, user, out);
    const int vocab = m->cfg.vocab;
    tq_session *s = NULL;
    int32_t *buf = tq_malloc((size_t)ctx * sizeof(int32_t));
    float *lg = tq_malloc((size_t)ctx * (size_t)vocab * sizeof(float));
    if (!buf || !lg) {
        st = TQ_FAIL(TQ_E_NOMEM, "tq_eval_ppl: out of memory for %d x %d logits", ctx, vocab);
        goto done;
    }
    if ((st = tq_evl_session(m, kv, ctx, &s)))
        goto done;
    const double t0 = now_s();
    double nll = 0.0;
    int64_t n = 0;
    for (int64_t w = 0; w < nw; w++) {
        int first;
        tq_evl_window_tokens(bos, tokens, w, ctx, buf);
        if ((st = tq_evl_window(s, buf, ctx, vocab, lg, &first)))
            goto done;
        for (int i = ctx / 2; i < ctx - 1; i++) {
            const float *row = lg + (size_t)(i - first) * vocab;
            nll += tq_evl_row_lse(row, vocab, NULL) - (double)row[tokens[w * ctx + i + 1]];
            n++;
        }
        if (progress)
            progress(user, w + 1, nw);
    }
    out->n_scored = n;
    out->n_windows = nw;
    out->nll = nll / (double)n;
    out->ppl = exp(out->nll);
    out->seconds = now_s() - t0;
done:
    tq_session_free(s);
    tq_free(buf);
    tq_free(lg);
    return st;
}

int tq_evl_cmp_f(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

double tq_evl_pct(const float *sorted, int64_t n, double p)
{
    if (n <= 0)
        return 0.0;
    const double r = p * (double)(n - 1);
    const int64_t i = (int64_t)r;
    const double f = r - (double)i;
    return i + 1 < n ? (1.0 - f) * sorted[i] + f * sorted[i + 1] : sorted[i];
}

tq_status tq_eval_kl(tq_model *m, const int32_t *tokens, int64_t n_tokens, int32_t bos,
                     tq_kv_scheme teacher,
                     const tq_kv_scheme *students, int n_students, int ctx, int64_t max_windows,
                     tq_eval_progress_fn progress, void *user, tq_kl_stats *out,
                     tq_kl_stats *teacher_out)
{
    int64_t nw = 0;
    tq_status st;
    if (!m || (n_students > 0 && (!students || !out)) || n_students < 0)
        return TQ_FAIL(TQ_E_ARG, "tq_eval_kl: NULL argument or bad student count");
    if ((st = tq_evl_check("tq_eval_kl", tokens, n_tokens, ctx, max_windows, &nw)))
        return st;
    const int vocab = m->cfg.vocab, ns = ctx / 2 - 1; /* scored per window */
    const int64_t n_all = nw * ns;
    tq_session *ts = NULL, **ss = tq_calloc((size_t)n_students + 1, sizeof(*ss));
    int32_t *buf = tq_malloc((size_t)ctx * sizeof(int32_t));
    float *lg = tq_malloc((size_t)ctx * (size_t)vocab * sizeof(float));
    /* teacher probabilities of the scored positions (float; every KL term uses these same
     * values, sums are double) */
    float *tlp = tq_malloc((size_t)ns * (size_t)vocab * sizeof(float));
    int *tam = tq_malloc((size_t)ns * sizeof(int));
    double *tneg = tq_malloc((size_t)ns * sizeof(double)), *tsum = tq_malloc((size_t)ns * sizeof(double));
    float *kls = tq_malloc((size_t)(n_students ? n_students : 1) * (size_t)n_all * sizeof(float));
    double *sum_kl = tq_calloc((size_t)n_students + 1, sizeof(double));
    double *nll = tq_calloc((size_t)n_students + 1, sizeof(double));
    int64_t *agree = tq_calloc((size_t)n_students + 1, sizeof(int64_t));
    if (!ss || !buf || !lg || !tlp || !tam || !tneg || !tsum || !kls || !sum_kl || !nll || !agree) {
        st = TQ_FAIL(TQ_E_NOMEM, "tq_eval_kl: out of memory (%d x %d logits)", ctx, vocab);
        goto done;
    }
    if ((st = tq_evl_session(m, teacher, ctx, &ts)))
        goto done;
    for (int k = 0; k < n_students; k++)
        if ((st = tq_evl_session(m, students[k], ctx, &ss[k])))
            goto done;
    for (int64_t w = 0; w < nw; w++) {
        int first;
        tq_evl_window_tokens(bos, tokens, w, ctx, buf);
        if ((st = tq_evl_window(ts, buf, ctx, vocab, lg, &first)))
            goto done;
        for (int i = 0; i < ns; i++) {
            const float *row = lg + (size_t)(ctx / 2 + i - first) * vocab;
            const double lse = tq_evl_row_lse(row, vocab, &tam[i]);
            float *tp = tlp + (size_t)i * vocab;
            double neg = 0.0, sp = 0.0;
            for (int v = 0; v < vocab; v++) {
                const double lp = (double)row[v] - lse;
                tp[v] = (float)exp(lp);
                neg += (double)tp[v] * lp;
                sp += (double)tp[v];
            }
            tneg[i] = neg;
            tsum[i] = sp;
            nll[n_students] += lse - (double)row[tokens[w * ctx + ctx / 2 + i + 1]];
        }
        for (int k = 0; k < n_students; k++) {
            if ((st = tq_evl_window(ss[k], buf, ctx, vocab, lg, &first)))
                goto done;
            for (int i = 0; i < ns; i++) {
                const float *row = lg + (size_t)(ctx / 2 + i - first) * vocab;
                int am;
                const double lse = tq_evl_row_lse(row, vocab, &am);
                /* KL = sum_v pt_v (log pt_v - (row_v - lse)) with the same float pt_v */
                const float *tp = tlp + (size_t)i * vocab;
                double dotp = 0.0;
                for (int v = 0; v < vocab; v++)
                    dotp += (double)tp[v] * (double)row[v];
                double kl = tneg[i] - dotp + lse * tsum[i];
                if (kl < 0.0)
                    kl = 0.0; /* rounding at KL ~ 0 */
                kls[(size_t)k * n_all + w * ns + i] = (float)kl;
                sum_kl[k] += kl;
                agree[k] += am == tam[i];
                nll[k] += lse - (double)row[tokens[w * ctx + ctx / 2 + i + 1]];
            }
        }
        if (progress)
            progress(user, w + 1, nw);
    }
    for (int k = 0; k < n_students; k++) {
        float *a = kls + (size_t)k * n_all;
        qsort(a, (size_t)n_all, sizeof(float), tq_evl_cmp_f);
        tq_kv_usage u;
        tq_session_kv_bytes(ss[k], &u);
        out[k] = (tq_kl_stats){.mean = sum_kl[k] / (double)n_all,
                               .median = tq_evl_pct(a, n_all, 0.5),
                               .p95 = tq_evl_pct(a, n_all, 0.95),
                               .p99 = tq_evl_pct(a, n_all, 0.99),
                               .max = a[n_all - 1],
                               .top1 = (double)agree[k] / (double)n_all,
                               .ppl = exp(nll[k] / (double)n_all),
                               .n = n_all,
                               .kv_bytes_per_token = u.bytes_per_token};
    }
    if (teacher_out) {
        tq_kv_usage u;
        tq_session_kv_bytes(ts, &u);
        *teacher_out = (tq_kl_stats){.top1 = 1.0,
                                     .ppl = exp(nll[n_students] / (double)n_all),
                                     .n = n_all,
                                     .kv_bytes_per_token = u.bytes_per_token};
    }
done:
    tq_session_free(ts);
    for (int k = 0; ss && k < n_students; k++)
        tq_session_free(ss[k]);
    tq_free(ss);
    tq_free(buf);
    tq_free(lg);
    tq_free(tlp);
    tq_free(tam);
    tq_free(tneg);
    tq_free(tsum);
    tq_free(kls);
    tq_free(sum_kl);
    tq_free(nll);
    tq_free(agree);
    return st;
}
