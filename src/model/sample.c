/* sample.c -- token sampler: repetition penalty, presence/frequency penalties, greedy,
 * temperature, top-k, top-p, min-p, seeded draw (pipeline and order in
 * include/turboquant/generate.h); and tq_logprobs(), the log-softmax of a raw row.
 *
 * Candidates are (logit, id) pairs under one total order: larger logit first, then lower id. Every
 * selection below uses that order, so results never depend on sort stability or platform qsort.
 * top-k is a quickselect (O(vocab)); top-p sorts only a growing prefix (64, 256, ... tokens) until
 * the prefix holds the requested mass, so a 49k vocabulary is never fully sorted. All buffers are
 * sized at create time; sampling does not allocate. Probabilities are computed in double. */
#include <float.h>
#include <math.h>

#include "core/core.h"
#include "core/rng.h"
#include "cpu/argmax.h"

typedef struct cand {
    float v;    /* logit after penalty and temperature */
    int32_t id; /* token id */
    float w;    /* exp(v - max v), once computed */
} cand;

/* top-p histogram: buckets of logit distance below the maximum, HIST_SPAN wide in total */
#define HIST_N 1024
#define HIST_SPAN 32.0f

struct tq_sampler {
    tq_sampler_params p;
    int64_t n_vocab;
    tq_rng rng;
    cand *c;         /* (n_vocab) candidates, scratch per call */
    double bucket[HIST_N]; /* top-p bucket masses, scratch */
    int32_t *hist;   /* (repeat_last_n) ring of accepted tokens */
    int64_t hist_n;  /* tokens in the ring (<= repeat_last_n) */
    int64_t hist_at; /* next write position */
    uint32_t *stamp; /* (n_vocab) dedupe marks for the penalty */
    uint32_t cur;    /* current stamp value */
    /* presence/frequency penalties (allocated only when one of them is not 0) */
    int32_t *count;  /* (n_vocab) times each token was accepted as output since the reset */
    int32_t *seen;   /* (n_vocab) the distinct ids with count > 0, n_seen of them */
    int64_t n_seen;
};

tq_sampler_params tq_sampler_params_default(void)
{
    tq_sampler_params p = {0};
    p.temperature = 0.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.seed = 0;
    return p;
}

static tq_status check_params(const tq_sampler_params *p, int64_t n_vocab)
{
    if (n_vocab <= 0 || n_vocab > INT32_MAX)
        return TQ_FAIL(TQ_E_ARG, "sampler: n_vocab %lld out of range (1..%d)", (long long)n_vocab,
                       INT32_MAX);
    if (!(p->temperature >= 0.0f) || !isfinite(p->temperature))
        return TQ_FAIL(TQ_E_ARG, "sampler: temperature %g invalid (need a finite value >= 0; 0 = "
                                 "greedy)", (double)p->temperature);
    if (p->top_k < 0)
        return TQ_FAIL(TQ_E_ARG, "sampler: top_k %d invalid (need >= 0; 0 = off)", p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return TQ_FAIL(TQ_E_ARG, "sampler: top_p %g invalid (need 0 < top_p <= 1; 1 = off)",
                       (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p < 1.0f))
        return TQ_FAIL(TQ_E_ARG, "sampler: min_p %g invalid (need 0 <= min_p < 1; 0 = off)",
                       (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
        return TQ_FAIL(TQ_E_ARG, "sampler: repeat_penalty %g invalid (need a finite value > 0; 1 "
                                 "= off)", (double)p->repeat_penalty);
    if (p->repeat_last_n < 0)
        return TQ_FAIL(TQ_E_ARG, "sampler: repeat_last_n %d invalid (need >= 0; 0 = off)",
                       p->repeat_last_n);
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f))
        return TQ_FAIL(TQ_E_ARG, "sampler: presence_penalty %g invalid (need -2 <= value <= 2; "
                                 "0 = off)", (double)p->presence_penalty);
    if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f))
        return TQ_FAIL(TQ_E_ARG, "sampler: frequency_penalty %g invalid (need -2 <= value <= 2; "
                                 "0 = off)", (double)p->frequency_penalty);
    return TQ_OK;
}

tq_status tq_sampler_create(const tq_sampler_params *params, int64_t n_vocab, tq_sampler **out)
{
    tq_sampler *s = NULL;
    tq_status st;
    size_t nc, ns, nh;

    if (!out)
        return TQ_FAIL(TQ_E_ARG, "tq_sampler_create: out is NULL");
    *out = NULL;
    if (!params)
        return TQ_FAIL(TQ_E_ARG, "tq_sampler_create: params is NULL");
    if ((st = check_params(params, n_vocab)))
        return st;
    if (!tq_mul_ok((size_t)n_vocab, sizeof(cand), &nc) ||
        !tq_mul_ok((size_t)n_vocab, sizeof(uint32_t), &ns) ||
        !tq_mul_ok((size_t)params->repeat_last_n + 1, sizeof(int32_t), &nh))
        return TQ_FAIL(TQ_E_OVERFLOW, "tq_sampler_create: sizes overflow");
    s = tq_calloc(1, sizeof(*s));
    if (!s)
        return TQ_FAIL(TQ_E_NOMEM, "tq_sampler_create: out of memory");
    s->p = *params;
    s->n_vocab = n_vocab;
    s->c = tq_malloc(nc);
    s->stamp = tq_calloc(1, ns);
    s->hist = tq_malloc(nh);
    if (params->presence_penalty != 0.0f || params->frequency_penalty != 0.0f) {
        s->count = tq_calloc(1, ns);
        s->seen = tq_malloc(ns);
    }
    if (!s->c || !s->stamp || !s->hist ||
        ((params->presence_penalty != 0.0f || params->frequency_penalty != 0.0f) &&
         (!s->count || !s->seen))) {
        tq_sampler_free(s);
        return TQ_FAIL(TQ_E_NOMEM, "tq_sampler_create: out of memory for %lld tokens",
                       (long long)n_vocab);
    }
    tq_sampler_reset(s);
    *out = s;
    return TQ_OK;
}

void tq_sampler_free(tq_sampler *s)
{
    if (!s)
        return;
    tq_free(s->c);
    tq_free(s->stamp);
    tq_free(s->hist);
    tq_free(s->count);
    tq_free(s->seen);
    tq_free(s);
}

void tq_sampler_reset(tq_sampler *s)
{
    if (!s)
        return;
    s->hist_n = 0;
    s->hist_at = 0;
    if (s->count)
        for (int64_t j = 0; j < s->n_seen; j++)
            s->count[s->seen[j]] = 0;
    s->n_seen = 0;
    tq_rng_seed(&s->rng, s->p.seed);
}

tq_status tq_sampler_accept(tq_sampler *s, int32_t token)
{
    if (!s)
        return TQ_FAIL(TQ_E_ARG, "tq_sampler_accept: sampler is NULL");
    if (token < 0 || token >= s->n_vocab)
        return TQ_FAIL(TQ_E_ARG, "tq_sampler_accept: token %d out of range (0..%lld)", token,
                       (long long)s->n_vocab - 1);
    if (s->p.repeat_last_n == 0)
        return TQ_OK;
    s->hist[s->hist_at] = token;
    s->hist_at = (s->hist_at + 1) % s->p.repeat_last_n;
    if (s->hist_n < s->p.repeat_last_n)
        s->hist_n++;
    return TQ_OK;
}

tq_status tq_sampler_accept_output(tq_sampler *s, int32_t token)
{
    tq_status st = tq_sampler_accept(s, token);
    if (st)
        return st;
    if (s->count) {
        if (s->count[token] == 0)
            s->seen[s->n_seen++] = token;
        if (s->count[token] < INT32_MAX)
            s->count[token]++;
    }
    return TQ_OK;
}

/* a before b in the candidate order: larger logit, then lower id */
static inline int before(const cand *a, const cand *b)
{
    return a->v > b->v || (a->v == b->v && a->id < b->id);
}

static inline void swap_c(cand *a, cand *b)
{
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Reorder c[0..n) so that c[0..k) are the k first in candidate order (in any order). */
static void select_k(cand *c, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    if (k <= 0 || k >= n)
        return;
    while (hi > lo) {
        int64_t mid = lo + (hi - lo) / 2;
        /* median of three into c[hi] as the pivot */
        if (before(&c[mid], &c[lo]))
            swap_c(&c[mid], &c[lo]);
        if (before(&c[hi], &c[lo]))
            swap_c(&c[hi], &c[lo]);
        if (before(&c[mid], &c[hi]))
            swap_c(&c[mid], &c[hi]);
        const cand pv = c[hi];
        int64_t store = lo;
        for (int64_t i = lo; i < hi; i++)
            if (before(&c[i], &pv))
                swap_c(&c[i], &c[store++]);
        swap_c(&c[store], &c[hi]);
        if (store == k || store == k - 1)
            return;
        if (store > k)
            hi = store - 1;
        else
            lo = store + 1;
    }
}

/* Sort c[0..n) in candidate order (heap sort: in place, deterministic, no recursion). */
static void sift(cand *c, int64_t n, int64_t i)
{
    for (;;) {
        int64_t l = 2 * i + 1, m = i;
        if (l < n && before(&c[m], &c[l]))
            m = l;
        if (l + 1 < n && before(&c[m], &c[l + 1]))
            m = l + 1;
        if (m == i)
            return;
        swap_c(&c[i], &c[m]);
        i = m;
    }
}

static void sort_c(cand *c, int64_t n)
{
    /* sift() keeps at the root the candidate that comes last in candidate order; moving the
     * root to the end each round leaves c[0] the first candidate */
    for (int64_t i = n / 2 - 1; i >= 0; i--)
        sift(c, n, i);
    for (int64_t e = n - 1; e > 0; e--) {
        swap_c(&c[0], &c[e]);
        sift(c, e, 0);
    }
}

/* Fill s->c from logits with NaN -> -inf, the repetition penalty applied, -inf dropped.
 * Returns the number of candidates (0 if no finite logit). */
static int64_t load(tq_sampler *s, const float *logits)
{
    cand *c = s->c;
    const float pen = s->p.repeat_penalty;
    int64_t n = 0;

    for (int64_t i = 0; i < s->n_vocab; i++) {
        const float v = logits[i];
        c[i].v = isnan(v) ? -INFINITY : v == INFINITY ? FLT_MAX : v;
        c[i].id = (int32_t)i;
    }
    if (pen != 1.0f && s->hist_n > 0) {
        if (++s->cur == 0) { /* stamp wrapped: clear the marks once every 2^32 calls */
            for (int64_t i = 0; i < s->n_vocab; i++)
                s->stamp[i] = 0;
            s->cur = 1;
        }
        for (int64_t j = 0; j < s->hist_n; j++) {
            const int32_t t = s->hist[j];
            if (s->stamp[t] == s->cur)
                continue;
            s->stamp[t] = s->cur;
            c[t].v = c[t].v > 0.0f ? c[t].v / pen : c[t].v * pen;
        }
    }
    if (s->count) { /* OpenAI: logit -= presence * [count > 0] + frequency * count */
        const float pp = s->p.presence_penalty, fp = s->p.frequency_penalty;
        for (int64_t j = 0; j < s->n_seen; j++) {
            const int32_t t = s->seen[j];
            const float v = c[t].v - (pp + fp * (float)s->count[t]);
            if (c[t].v != -INFINITY) /* a finite logit stays finite */
                c[t].v = v > FLT_MAX ? FLT_MAX : v < -FLT_MAX ? -FLT_MAX : v;
        }
    }
    for (int64_t i = 0; i < s->n_vocab; i++)
        if (c[i].v != -INFINITY)
            c[n++] = c[i];
    return n;
}

static inline int bucket_of(float vmax, float v)
{
    const float d = (vmax - v) * ((float)HIST_N / HIST_SPAN); /* monotone in v */
    return d < (float)(HIST_N - 1) ? (int)d : HIST_N - 1;
}

/* top-p over c[0..n) whose weights are set: keep the smallest candidate-order prefix holding
 * at least top_p of the mass z. A histogram of (vmax - v) finds the bucket where the running mass
 * crosses top_p * z. Buckets are monotone in the logit, so every candidate of an earlier bucket
 * is kept and only the crossing bucket needs sorting: one pass over the vocabulary plus a small
 * sort. (Masses are summed per bucket, so the cut can differ from an exact sorted running sum
 * only when the two sums round to opposite sides of top_p * z.) Returns the kept count, the kept
 * candidates first. */
static int64_t top_p_cut(tq_sampler *s, int64_t n, float vmax, double z)
{
    cand *c = s->c;
    double *h = s->bucket;
    const double want = (double)s->p.top_p * z;
    int64_t a = 0, m = n;
    double cum = 0.0;

    if (n > 256) {
        for (int b = 0; b < HIST_N; b++)
            h[b] = 0.0;
        for (int64_t i = 0; i < n; i++)
            h[bucket_of(vmax, c[i].v)] += c[i].w;
        int last = 0;
        while (last < HIST_N - 1 && cum + h[last] < want)
            cum += h[last++];
        for (int64_t i = 0; i < n; i++) /* earlier buckets first ... */
            if (bucket_of(vmax, c[i].v) < last)
                swap_c(&c[i], &c[a++]);
        m = a;
        for (int64_t i = a; i < n; i++) /* ... then the crossing bucket */
            if (bucket_of(vmax, c[i].v) == last)
                swap_c(&c[i], &c[m++]);
    }
    sort_c(c + a, m - a);
    for (int64_t i = a; i < m; i++) {
        cum += c[i].w;
        if (cum >= want)
            return i + 1;
    }
    return m; /* rounding left the sum just short of the mass: keep the whole bucket */
}

/* Apply steps 2-6; leaves the kept set in s->c[0..*n) with weights .w (relative to the
 * maximum) and their sum in *z. */
static tq_status filter(tq_sampler *s, const float *logits, int64_t *n_out, double *z)
{
    cand *c = s->c;
    int64_t n = load(s, logits);

    if (n == 0)
        return TQ_FAIL(TQ_E_ARG, "sampler: no finite logit in a row of %lld (all NaN or -inf)",
                       (long long)s->n_vocab);
    if (s->p.temperature == 0.0f) {
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++)
            if (before(&c[i], &c[best]))
                best = i;
        c[0] = c[best];
        c[0].w = 1.0f;
        *n_out = 1;
        *z = 1.0;
        return TQ_OK;
    }
    const float t = s->p.temperature;
    float vmax = -FLT_MAX;
    for (int64_t i = 0; i < n; i++) {
        const float v = c[i].v / t;
        c[i].v = v > FLT_MAX ? FLT_MAX : v < -FLT_MAX ? -FLT_MAX : v; /* t < 1 may overflow */
        vmax = c[i].v > vmax ? c[i].v : vmax;
    }
    if (s->p.top_k > 0 && s->p.top_k < n) {
        select_k(c, n, s->p.top_k);
        n = s->p.top_k; /* the maximum is among the k kept, so vmax stands */
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        c[i].w = expf(c[i].v - vmax);
        sum += c[i].w;
    }
    if (s->p.top_p < 1.0f) {
        n = top_p_cut(s, n, vmax, sum);
        sum = 0.0;
        for (int64_t i = 0; i < n; i++)
            sum += c[i].w;
    }
    if (s->p.min_p > 0.0f) {
        int64_t k = 0;
        sum = 0.0;
        for (int64_t i = 0; i < n; i++)
            if (c[i].w >= s->p.min_p) {
                c[k++] = c[i];
                sum += c[i].w;
            }
        n = k; /* the maximum itself always passes (w = 1 > min_p) */
    }
    *n_out = n;
    *z = sum;
    return TQ_OK;
}

/* Greedy with no penalty in effect: one pass over the row, no candidate copy. The same choice
 * as load() + the argmax of filter(): NaN counts as -inf, +inf as FLT_MAX, ties go to the lower
 * id (strictly greater wins), a row without a finite logit is an error. */
static tq_status greedy_1pass(const tq_sampler *s, const float *logits, int32_t *token)
{
    /* the first index of the largest logit, NaN as -inf, +inf as FLT_MAX (cpu/argmax.h) */
    const int64_t at = tq_argmax(logits, s->n_vocab);
    if (at < 0)
        return TQ_FAIL(TQ_E_ARG, "sampler: no finite logit in a row of %lld (all NaN or -inf)",
                       (long long)s->n_vocab);
    *token = (int32_t)at;
    return TQ_OK;
}

int tq_sampler_greedy_ids(const tq_sampler *s, int32_t *ids, int cap, int *n, float *penalty)
{
    if (!s || !n || !penalty || cap < 0 || s->p.temperature != 0.0f || s->n_seen > 0)
        return 0;
    *n = 0;
    *penalty = s->p.repeat_penalty;
    if (s->p.repeat_penalty == 1.0f)
        return 1;
    for (int64_t j = 0; j < s->hist_n; j++) { /* the distinct ids of the window, as load() */
        int k = 0;
        while (k < *n && ids[k] != s->hist[j])
            k++;
        if (k < *n)
            continue;
        if (*n == cap || !ids)
            return 0;
        ids[(*n)++] = s->hist[j];
    }
    return 1;
}

tq_status tq_sampler_sample(tq_sampler *s, const float *logits, int32_t *token)
{
    int64_t n;
    double z;
    tq_status st;

    if (!s || !logits || !token)
        return TQ_FAIL(TQ_E_ARG, "tq_sampler_sample: NULL argument");
    if (s->p.temperature == 0.0f && (s->p.repeat_penalty == 1.0f || s->hist_n == 0) &&
        s->n_seen == 0)
        return greedy_1pass(s, logits, token);
    if ((st = filter(s, logits, &n, &z)))
        return st;
    if (n == 1) {
        *token = s->c[0].id;
        return TQ_OK;
    }
    /* u in [0, 1) with 53 random bits */
    const double u = (double)(tq_rng_u64(&s->rng) >> 11) * (1.0 / 9007199254740992.0);
    const double target = u * z;
    double cum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        cum += s->c[i].w;
        if (target < cum) {
            *token = s->c[i].id;
            return TQ_OK;
        }
    }
    *token = s->c[n - 1].id; /* rounding: u*z landed at the very top */
    return TQ_OK;
}

tq_status tq_sampler_dist(tq_sampler *s, const float *logits, int32_t *ids, float *probs,
                          int64_t cap, int64_t *n_kept)
{
    int64_t n;
    double z;
    tq_status st;

    if (!s || !logits || !n_kept || cap < 0 || (cap > 0 && (!ids || !probs)))
        return TQ_FAIL(TQ_E_ARG, "tq_sampler_dist: NULL argument or negative cap");
    if ((st = filter(s, logits, &n, &z)))
        return st;
    sort_c(s->c, n);
    for (int64_t i = 0; i < n && i < cap; i++) {
        ids[i] = s->c[i].id;
        probs[i] = (float)((double)s->c[i].w / z);
    }
    *n_kept = n;
    return TQ_OK;
}

/* ---- log-probabilities ---------------------------------------------------------------------- */

/* the order key of logits[i] for the top list: NaN as -inf */
static inline float lp_key(const float *logits, int64_t i)
{
    return isnan(logits[i]) ? -INFINITY : logits[i];
}

/* log p of logit v given lz = log of the row's partition sum */
static inline float lp_of(float v, double lz)
{
    if (isnan(v) || v == -INFINITY)
        return -INFINITY;
    return (float)((double)(v == INFINITY ? FLT_MAX : v) - lz);
}

tq_status tq_logprobs(const float *logits, int64_t n_vocab, int32_t token, float *lp_token,
                      int32_t *top_ids, float *top_lp, int k)
{
    if (!logits || n_vocab < 1 || n_vocab > INT32_MAX)
        return TQ_FAIL(TQ_E_ARG, "tq_logprobs: %s", !logits ? "logits is NULL"
                                                             : "n_vocab out of range (1..2^31-1)");
    if (token < -1 || token >= n_vocab)
        return TQ_FAIL(TQ_E_ARG, "tq_logprobs: token %d outside [-1, %lld)", token,
                       (long long)n_vocab);
    if (k < 0 || k > n_vocab || (k > 0 && (!top_ids || !top_lp)))
        return TQ_FAIL(TQ_E_ARG, "tq_logprobs: k = %d invalid (need 0..%lld and both top arrays)",
                       k, (long long)n_vocab);
    float m = -INFINITY;
    for (int64_t i = 0; i < n_vocab; i++)
        if (logits[i] > m) /* false for NaN */
            m = logits[i];
    if (m == -INFINITY)
        return TQ_FAIL(TQ_E_ARG, "tq_logprobs: no finite logit in a row of %lld (all NaN or -inf)",
                       (long long)n_vocab);
    if (m == INFINITY) /* as the sampler: +inf counts as the largest float */
        m = FLT_MAX;
    double z = 0.0;
    for (int64_t i = 0; i < n_vocab; i++) {
        const float v = logits[i];
        if (!isnan(v) && v != -INFINITY)
            z += exp((double)(v == INFINITY ? FLT_MAX : v) - (double)m);
    }
    const double lz = (double)m + log(z);
    if (lp_token && token >= 0)
        *lp_token = lp_of(logits[token], lz);
    /* top k by insertion into a sorted prefix: larger logit first, then lower id (an equal
     * logit met later never moves ahead of one already kept) */
    int n = 0;
    for (int64_t i = 0; i < n_vocab && k > 0; i++) {
        const float v = lp_key(logits, i);
        if (n == k && !(v > lp_key(logits, top_ids[k - 1])))
            continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && v > lp_key(logits, top_ids[j - 1])) {
            top_ids[j] = top_ids[j - 1];
            j--;
        }
        top_ids[j] = (int32_t)i;
    }
    for (int j = 0; j < k; j++)
        top_lp[j] = lp_of(logits[top_ids[j]], lz);
    return TQ_OK;
}
