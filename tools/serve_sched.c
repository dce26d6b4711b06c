/* serve_sched.c -- the scheduler of `tq serve`: one thread that owns the model and every slot.
 *
 * A slot is one session (its own KV cache of the chosen scheme, n_ctx tokens) plus the state of
 * the request it serves. Each loop iteration: admit queued requests into free slots (the free
 * slot whose cached tokens share the longest prefix with the prompt: that prefix is kept, the
 * rest trimmed), drop cancelled requests, then run one step: the next token of every decoding
 * slot and prompt chunks of the prefilling slots, --chunk prompt tokens in all (several short
 * prompts are prefilled together in the one pass; --chunk-decoding while a slot decodes).
 * Sampling (and the requested log-probabilities, from the step's raw logits), UTF-8 assembly
 * and stop strings happen per slot; new text is published to the request under srv.mu.
 * A finished request frees its slot at once; its tokens stay in the slot's cache for reuse. */
#include <time.h>
#include <unistd.h>

#include "serve.h"

struct srv_slot {
    tq_session *sess;
    srv_req *req;       /* NULL: free                                                    */
    int admitted;       /* 0 until the scheduler has set the slot up for req             */
    int32_t *toks;      /* tokens in the session's cache, n_toks of n_ctx                */
    int64_t n_toks;
    int64_t n_fed;      /* prompt tokens in the cache                                    */
    int64_t n_reused;   /* of which were already there (prompt cache)                   */
    int32_t next;       /* sampled token to evaluate next, -1 none                      */
    int64_t n_out;      /* completion tokens                                             */
    int32_t *out;       /* their ids (n_ctx)                                             */
    tq_tok_stream ts;
    char *gen;          /* all text generated for req                                    */
    size_t n_gen, cap_gen;
    size_t n_ready;     /* bytes of gen that may be published                            */
    srv_finish fin;
    char err[256];
    double t_first;
};

double srv_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

srv_req *srv_req_new(void)
{
    srv_req *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    return r;
}

static void req_free(srv_req *r)
{
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    tq_sampler_free(r->sampler);
    free(r->text);
    free(r->toks);
    free(r->lp);
    free(r->top_id);
    free(r->top_lp);
    pthread_cond_destroy(&r->cv);
    free(r);
}

static void release_locked(srv_req *r)
{
    if (--r->refs == 0)
        req_free(r);
}

void srv_req_release(srv *s, srv_req *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&s->mu);
    release_locked(r);
    pthread_mutex_unlock(&s->mu);
}

int srv_submit(srv *s, srv_req *r)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    if (!s->ready || s->quit) {
        rc = 503;
    } else if (s->n_queued >= s->o.max_queue) {
        s->m_shed++;
        rc = 503;
    } else {
        r->refs++;
        r->t_submit = srv_now();
        r->next = NULL;
        if (s->q_tail)
            s->q_tail->next = r;
        else
            s->q_head = r;
        s->q_tail = r;
        s->n_queued++;
        s->m_requests++;
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- slot work (scheduler thread, mu not held) ------------------------------------------- */

static int grow_text(srv_slot *sl, size_t need)
{
    if (need <= sl->cap_gen)
        return 0;
    size_t nc = sl->cap_gen ? sl->cap_gen : 1024;
    while (nc < need)
        nc *= 2;
    char *p = realloc(sl->gen, nc);
    if (!p)
        return -1;
    sl->gen = p;
    sl->cap_gen = nc;
    return 0;
}

static void slot_fail(srv_slot *sl, tq_status st, const char *what)
{
    sl->fin = SRV_FIN_ERROR;
    snprintf(sl->err, sizeof(sl->err), "%s: %s %s", what, tq_status_str(st), tq_last_error());
}

/* prepare a newly admitted slot: keep the shared prefix, reset the sampler */
static void slot_setup(srv *s, srv_slot *sl)
{
    srv_req *r = sl->req;
    int64_t lcp = 0;
    while (lcp < sl->n_toks && lcp < r->n_prompt && sl->toks[lcp] == r->prompt[lcp])
        lcp++;
    if (lcp == r->n_prompt)
        lcp--; /* the last prompt token is evaluated again for its logits */
    if (tq_session_trim(sl->sess, tq_session_n_past(sl->sess) - lcp)) {
        tq_session_reset(sl->sess); /* a ring (sliding window) cannot go back that far */
        lcp = 0;
    }
    sl->n_toks = lcp;
    sl->n_fed = lcp;
    sl->n_reused = lcp;
    sl->next = -1;
    sl->n_out = 0;
    sl->n_gen = 0;
    sl->n_ready = 0;
    sl->fin = SRV_RUNNING;
    sl->err[0] = 0;
    sl->t_first = 0;
    tq_tok_stream_init(&sl->ts, s->tok, TQ_TOK_SKIP_SPECIAL);
    tq_sampler_reset(r->sampler);
    for (int64_t i = 0; i < r->n_prompt; i++)
        tq_sampler_accept(r->sampler, r->prompt[i]);
    sl->admitted = 1;
}

static int is_eos(const srv *s, int32_t t)
{
    for (int i = 0; i < s->n_eos; i++)
        if (s->eos[i] == t)
            return 1;
    return 0;
}

/* after text was appended: cut at a stop string, or hold back a suffix that may start one */
static void check_stops(srv_slot *sl, int final)
{
    const srv_req *r = sl->req;
    size_t hold = 0;
    for (int k = 0; k < r->n_stop; k++) {
        const char *st = r->stop[k];
        const size_t L = strlen(st);
        const size_t from = sl->n_ready > L ? sl->n_ready - L : 0;
        if (sl->n_gen >= L) {
            const char *hit = memmem(sl->gen + from, sl->n_gen - from, st, L);
            if (hit) {
                sl->n_gen = (size_t)(hit - sl->gen);
                sl->fin = SRV_FIN_STOP;
                final = 1;
            }
        }
    }
    if (!final)
        for (int k = 0; k < r->n_stop; k++) {
            const char *st = r->stop[k];
            const size_t L = strlen(st);
            for (size_t h = L - 1; h > hold; h--)
                if (h <= sl->n_gen && !memcmp(sl->gen + sl->n_gen - h, st, h)) {
                    hold = h;
                    break;
                }
        }
    size_t ready = sl->n_gen - hold;
    if (ready > sl->n_ready)
        sl->n_ready = ready;
    if (sl->n_ready > sl->n_gen)
        sl->n_ready = sl->n_gen;
}

static void append_text(srv_slot *sl, const char *p, size_t n)
{
    if (!n)
        return;
    if (grow_text(sl, sl->n_gen + n)) {
        sl->fin = SRV_FIN_ERROR;
        snprintf(sl->err, sizeof(sl->err), "out of memory for the generated text");
        return;
    }
    memcpy(sl->gen + sl->n_gen, p, n);
    sl->n_gen += n;
}

static void slot_finish_text(srv_slot *sl)
{
    char buf[16];
    size_t n = 0;
    if (tq_tok_stream_flush(&sl->ts, buf, sizeof(buf), &n) == TQ_OK)
        append_text(sl, buf, n);
    check_stops(sl, 1);
    sl->n_ready = sl->n_gen;
}

/* sample from sl->logits and decide what happens next */
static void slot_sample(srv *s, srv_slot *sl, const float *logits)
{
    srv_req *r = sl->req;
    int32_t t = -1;
    tq_status st = tq_sampler_sample(r->sampler, logits, &t);
    if (st) {
        slot_fail(sl, st, "sampling");
        return;
    }
    tq_sampler_accept_output(r->sampler, t);
    if (!sl->t_first)
        sl->t_first = srv_now();
    if (!r->ignore_eos && is_eos(s, t)) {
        sl->fin = SRV_FIN_STOP;
        slot_finish_text(sl);
        return;
    }
    if (r->logprobs) {
        /* from the raw logits of this step; r->n_gen <= sl->n_out: the HTTP side does not read
         * index n_out until publish_locked() moves n_gen past it (under mu) */
        const int64_t i = sl->n_out;
        st = tq_logprobs(logits, s->info.vocab_size, t, &r->lp[i], r->top_id + i * r->top_n,
                         r->top_lp + i * r->top_n, r->top_n);
        if (st) {
            slot_fail(sl, st, "logprobs");
            return;
        }
    }
    sl->out[sl->n_out++] = t;
    char piece[1024];
    size_t n = 0;
    st = tq_tok_stream_put(&sl->ts, t, piece, sizeof(piece), &n);
    if (st == TQ_OK)
        append_text(sl, piece, n);
    if (sl->fin)
        return;
    check_stops(sl, 0);
    if (sl->fin == SRV_FIN_STOP) {
        sl->n_ready = sl->n_gen;
        return;
    }
    if (sl->n_out >= r->max_tokens || sl->n_toks >= s->n_ctx) {
        sl->fin = SRV_FIN_LENGTH;
        slot_finish_text(sl);
        return;
    }
    sl->next = t;
}

static void snap_path(const srv *s, const srv_slot *sl, char *p, size_t cap)
{
    snprintf(p, cap, "%s/slot-%d.tqkv", s->o.cache_dir, (int)(sl - s->slots));
}

/* --prompt-cache-dir: a finished request with a long new prompt leaves the slot's cache on disk
 * (tq_session_save: temp file, fsync, rename -- a kill during the write keeps the old file) */
static void snapshot(srv *s, srv_slot *sl)
{
    const srv_req *r = sl->req;
    char path[4096];
    if (!s->o.cache_dir || r->n_prompt < s->o.cache_min || sl->n_reused >= r->n_prompt - 1)
        return;
    snap_path(s, sl, path, sizeof(path));
    tq_status st = tq_session_save(sl->sess, sl->toks, sl->n_toks, path);
    if (st)
        fprintf(stderr, "tq serve: prompt cache '%s' not written: %s\n", path, tq_last_error());
}

/* restore the slots' snapshots; one that does not fit (other model, scheme, corrupt) is
 * refused by name and the slot starts empty */
static void restore(srv *s)
{
    int n_ok = 0;
    for (int i = 0; i < s->n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        char path[4096];
        int64_t n = 0;
        snap_path(s, sl, path, sizeof(path));
        if (access(path, F_OK) != 0)
            continue;
        tq_status st = tq_session_load(sl->sess, path, sl->toks, s->n_ctx, &n);
        if (st || n != tq_session_n_past(sl->sess)) {
            fprintf(stderr, "tq serve: prompt cache '%s' refused: %s\n", path,
                    st ? tq_last_error() : "it has no token ids");
            tq_session_reset(sl->sess);
            continue;
        }
        sl->n_toks = n;
        n_ok++;
        fprintf(stderr, "tq serve: prompt cache '%s': %lld tokens restored into slot %d\n", path,
                (long long)n, i);
    }
    (void)n_ok;
}

/* one scheduler step: the next token of every decoding slot and the prompt chunks of the
 * prefilling slots (in slot order, --chunk prompt tokens in all: several short prompts share
 * one pass, a long one is split over steps), all in one tq_batch_eval() pass (each row
 * bit-identical to the slot's lone run whatever rides along, so batching does not change
 * answers) */
static void step(srv *s)
{
    tq_session **ss = s->b_sess;
    const int32_t **tk = s->b_tok;
    int64_t *nn = s->b_n;
    srv_slot **who = s->b_slot;
    int k = 0, n_prefill = 0;
    /* prompt tokens left for this step: --chunk, or --chunk-decoding while a sequence decodes
     * (a long prompt is spread over several steps instead of stalling the decoding ones) */
    int64_t budget = s->o.chunk;
    for (int i = 0; i < s->n_slots; i++) {
        const srv_slot *sl = &s->slots[i];
        if (sl->req && !sl->fin && sl->admitted && sl->n_fed >= sl->req->n_prompt &&
            sl->next >= 0 && s->o.chunk_busy > 0 && s->o.chunk_busy < budget)
            budget = s->o.chunk_busy;
    }
    const double t_in = srv_now();
    for (int i = 0; i < s->n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        if (!sl->req || sl->fin)
            continue;
        if (!sl->admitted)
            slot_setup(s, sl);
        srv_req *r = sl->req;
        if (sl->n_fed < r->n_prompt) {
            if (budget == 0)
                continue; /* the step's prompt tokens are spent: decoding slots keep their pace */
            int64_t n = r->n_prompt - sl->n_fed;
            nn[k] = n > budget ? budget : n;
            budget -= nn[k];
            n_prefill++;
            tk[k] = r->prompt + sl->n_fed;
        } else if (sl->next >= 0) {
            nn[k] = 1;
            tk[k] = &sl->next;
        } else {
            continue;
        }
        ss[k] = sl->sess;
        who[k++] = sl;
    }
    if (!k) {
        s->b_work = srv_now() - t_in;
        return;
    }
    const double t0 = srv_now();
    tq_status st = tq_batch_eval(ss, tk, nn, k, s->b_logits);
    const double t1 = srv_now();
    s->b_secs = t1 - t0;
    s->b_prompts = n_prefill;
    s->b_rows = k;
    for (int j = 0; j < k; j++) {
        srv_slot *sl = who[j];
        srv_req *r = sl->req;
        if (st) {
            slot_fail(sl, st, "forward pass");
            continue;
        }
        memcpy(sl->toks + sl->n_toks, tk[j], (size_t)nn[j] * sizeof(int32_t));
        sl->n_toks += nn[j];
        if (sl->n_fed < r->n_prompt) { /* a prompt chunk */
            sl->n_fed += nn[j];
            if (sl->n_fed < r->n_prompt)
                continue;
        }
        sl->next = -1;
        slot_sample(s, sl, s->b_logits + (size_t)j * s->info.vocab_size);
        if (sl->fin && sl->fin != SRV_FIN_ERROR)
            snapshot(s, sl);
    }
    s->b_work = (t0 - t_in) + (srv_now() - t1);
}

/* ---- publishing (mu held) ----------------------------------------------------------------- */

static void publish_locked(srv *s)
{
    int64_t kv = 0;
    if (s->b_rows) {
        s->m_steps++;
        s->m_step_seqs += (uint64_t)s->b_rows;
        s->m_prompt_chunks += (uint64_t)s->b_prompts;
        s->m_multi_prompt += s->b_prompts > 1;
        s->m_fwd_s += s->b_secs;
        if (s->b_prompts)
            s->m_prompt_s += s->b_secs;
        if (!s->b_prompts && s->b_rows <= s->n_slots) {
            s->m_dsteps[s->b_rows]++;
            s->m_dstep_s[s->b_rows] += s->b_secs;
        }
        s->b_rows = 0;
    }
    for (int i = 0; i < s->n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        kv += sl->n_toks;
        srv_req *r = sl->req;
        if (!r || !sl->admitted)
            continue;
        int signal = 0;
        if (sl->n_ready > r->n_text) {
            if (sl->n_ready + 1 > r->cap_text) {
                size_t nc = r->cap_text ? r->cap_text : 1024;
                while (nc < sl->n_ready + 1)
                    nc *= 2;
                char *p = realloc(r->text, nc);
                if (!p) {
                    sl->fin = SRV_FIN_ERROR;
                    snprintf(sl->err, sizeof(sl->err), "out of memory");
                } else {
                    r->text = p;
                    r->cap_text = nc;
                }
            }
            if (r->cap_text >= sl->n_ready + 1) {
                memcpy(r->text + r->n_text, sl->gen + r->n_text, sl->n_ready - r->n_text);
                r->n_text = sl->n_ready;
                r->text[r->n_text] = 0;
                signal = 1;
            }
        }
        if (r->n_gen != sl->n_out) {
            if (r->toks)
                memcpy(r->toks + r->n_gen, sl->out + r->n_gen,
                       (size_t)(sl->n_out - r->n_gen) * sizeof(int32_t));
            s->m_gen_tokens += (uint64_t)(sl->n_out - r->n_gen);
            r->n_gen = sl->n_out;
            signal = 1;
        }
        if (!r->t_first && sl->t_first)
            r->t_first = sl->t_first;
        r->n_cached = sl->n_reused;
        if (sl->fin) {
            r->finish = sl->fin;
            if (sl->fin == SRV_FIN_ERROR)
                snprintf(r->err, sizeof(r->err), "%s", sl->err);
            r->t_done = srv_now();
            s->m_prompt_tokens += (uint64_t)r->n_prompt;
            s->m_cached_tokens += (uint64_t)sl->n_reused;
            sl->req = NULL;
            sl->admitted = 0;
            s->n_busy--;
            pthread_cond_broadcast(&r->cv);
            release_locked(r);
            continue;
        }
        if (signal)
            pthread_cond_broadcast(&r->cv);
    }
    s->kv_tokens = kv;
}

/* end r (not in a slot) with finish f */
static void end_locked(srv *s, srv_req *r, srv_finish f, const char *msg)
{
    r->finish = f;
    if (msg)
        snprintf(r->err, sizeof(r->err), "%s", msg);
    r->t_done = srv_now();
    if (f == SRV_FIN_CANCEL)
        s->m_cancelled++;
    pthread_cond_broadcast(&r->cv);
    release_locked(r);
}

/* the free slot whose cache shares the longest prefix with r's prompt */
static srv_slot *pick_slot(srv *s, const srv_req *r)
{
    srv_slot *best = NULL;
    int64_t best_n = -1;
    for (int i = 0; i < s->n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        if (sl->req)
            continue;
        int64_t n = 0;
        while (n < sl->n_toks && n < r->n_prompt && sl->toks[n] == r->prompt[n])
            n++;
        if (n > best_n) {
            best_n = n;
            best = sl;
        }
    }
    return best;
}

static void admit_locked(srv *s)
{
    while (s->q_head && s->n_busy < s->n_slots) {
        srv_req *r = s->q_head;
        s->q_head = r->next;
        if (!s->q_head)
            s->q_tail = NULL;
        s->n_queued--;
        if (r->cancel) {
            end_locked(s, r, SRV_FIN_CANCEL, NULL);
            continue;
        }
        srv_slot *sl = pick_slot(s, r);
        sl->req = r;
        sl->admitted = 0;
        sl->fin = SRV_RUNNING;
        s->n_busy++;
    }
}

static void *sched_main(void *arg)
{
    srv *s = arg;
    pthread_mutex_lock(&s->mu);
    double t_lock = srv_now(); /* start of the scheduler's work under mu */
    while (!s->quit) {
        admit_locked(s);
        int active = 0;
        for (int i = 0; i < s->n_slots; i++) {
            srv_slot *sl = &s->slots[i];
            if (sl->req && sl->req->cancel) {
                srv_req *r = sl->req;
                sl->req = NULL;
                sl->admitted = 0;
                s->n_busy--;
                /* the cache holds n_toks valid tokens whatever the request did */
                end_locked(s, r, SRV_FIN_CANCEL, NULL);
            } else if (sl->req) {
                active++;
            }
        }
        if (!active) {
            const double t_wait = srv_now();
            s->m_work_s += t_wait - t_lock;
            s->idle_since = t_wait;
            pthread_cond_wait(&s->wake, &s->mu);
            t_lock = srv_now();
            s->m_idle_s += t_lock - t_wait;
            s->idle_since = 0;
            continue;
        }
        s->m_work_s += srv_now() - t_lock;
        pthread_mutex_unlock(&s->mu);
        s->b_work = 0;
        step(s);
        pthread_mutex_lock(&s->mu);
        t_lock = srv_now();
        s->m_work_s += s->b_work;
        publish_locked(s);
    }
    for (int i = 0; i < s->n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        if (sl->req) {
            srv_req *r = sl->req;
            sl->req = NULL;
            s->n_busy--;
            end_locked(s, r, SRV_FIN_ERROR, "the server is shutting down");
        }
    }
    while (s->q_head) {
        srv_req *r = s->q_head;
        s->q_head = r->next;
        s->n_queued--;
        end_locked(s, r, SRV_FIN_ERROR, "the server is shutting down");
    }
    s->q_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int srv_sched_start(srv *s)
{
    const char *cmd = "serve";
    tq_session_opts so;
    tq_status st;
    tq_kv_usage u;

    tq_session_opts_default(&so);
    so.kv = s->kv;
    so.n_ctx = s->n_ctx;
    so.n_batch = s->o.chunk + (s->o.parallel ? s->o.parallel : 8); /* a chunk + the decodes */
    /* one probe session: a scheme the model cannot use is refused here, before any request */
    tq_session *probe = NULL;
    if ((st = tq_session_create(s->model, &so, &probe)))
        return cli_error(cmd, st, "--kv %s with --ctx %d cannot be used with this model", s->o.kv,
                         s->n_ctx);
    tq_session_kv_bytes(probe, &u);
    s->kv_bytes_per_token = u.bytes_per_token;
    const size_t per_seq = u.bytes_capacity;
    const size_t fit = per_seq ? s->o.kv_mem / per_seq : 0;
    fprintf(stderr,
            "tq serve: kv %s: %zu bytes/token, %zu MiB per sequence of %d tokens; %zu sequences "
            "fit in the limit of %zu MiB\n",
            s->o.kv, u.bytes_per_token, per_seq >> 20, s->n_ctx, fit, s->o.kv_mem >> 20);
    if (s->o.parallel == 0)
        s->n_slots = fit < 1 ? 1 : fit > 8 ? 8 : (int)fit;
    else
        s->n_slots = s->o.parallel;
    if ((size_t)s->n_slots > fit) {
        tq_session_free(probe);
        fprintf(stderr,
                "tq serve: --parallel %d x --ctx %d needs %zu MiB of KV cache (%zu bytes per "
                "sequence), above the limit of %zu MiB (--kv-mem; default 90%% of MemAvailable); "
                "lower --parallel or --ctx, or use a smaller --kv scheme\n",
                s->n_slots, s->n_ctx, (size_t)s->n_slots * per_seq >> 20, per_seq,
                s->o.kv_mem >> 20);
        return 1;
    }
    s->slots = calloc((size_t)s->n_slots, sizeof(*s->slots));
    s->b_logits = malloc((size_t)s->n_slots * (size_t)s->info.vocab_size * sizeof(float));
    s->b_sess = calloc((size_t)s->n_slots, sizeof(*s->b_sess));
    s->b_tok = calloc((size_t)s->n_slots, sizeof(*s->b_tok));
    s->b_n = calloc((size_t)s->n_slots, sizeof(*s->b_n));
    s->b_slot = calloc((size_t)s->n_slots, sizeof(*s->b_slot));
    s->m_dsteps = calloc((size_t)s->n_slots + 1, sizeof(*s->m_dsteps));
    s->m_dstep_s = calloc((size_t)s->n_slots + 1, sizeof(*s->m_dstep_s));
    if (!s->slots || !s->b_logits || !s->b_sess || !s->b_tok || !s->b_n || !s->b_slot ||
        !s->m_dsteps || !s->m_dstep_s) {
        tq_session_free(probe);
        return cli_error(cmd, TQ_E_NOMEM, "out of memory for %d slots", s->n_slots);
    }
    for (int i = 0; i < s->n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        if (i == 0)
            sl->sess = probe;
        else if ((st = tq_session_create(s->model, &so, &sl->sess)))
            return cli_error(cmd, st, "cannot create session %d of %d", i + 1, s->n_slots);
        sl->toks = malloc((size_t)s->n_ctx * sizeof(int32_t));
        sl->out = malloc((size_t)s->n_ctx * sizeof(int32_t));
        if (!sl->toks || !sl->out)
            return cli_error(cmd, TQ_E_NOMEM, "out of memory for slot %d", i + 1);
        sl->next = -1;
    }
    if (s->o.cache_dir)
        restore(s);
    if (pthread_create(&s->sched, NULL, sched_main, s))
        return cli_error(cmd, TQ_E_NOMEM, "cannot start the scheduler thread");
    s->sched_started = 1;
    return 0;
}

void srv_sched_stop(srv *s)
{
    pthread_mutex_lock(&s->mu);
    s->quit = 1;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->mu);
    if (s->sched_started)
        pthread_join(s->sched, NULL);
    s->sched_started = 0;
    if (s->slots)
        for (int i = 0; i < s->n_slots; i++) {
            tq_session_free(s->slots[i].sess);
            free(s->slots[i].toks);
            free(s->slots[i].out);
            free(s->slots[i].gen);
        }
    free(s->slots);
    s->slots = NULL;
    free(s->b_logits);
    free(s->b_sess);
    free(s->b_tok);
    free(s->b_n);
    free(s->b_slot);
    free(s->m_dsteps);
    free(s->m_dstep_s);
    s->m_dsteps = NULL;
    s->m_dstep_s = NULL;
    s->b_logits = NULL;
    s->b_sess = NULL;
    s->b_tok = NULL;
    s->b_n = NULL;
    s->b_slot = NULL;
}
