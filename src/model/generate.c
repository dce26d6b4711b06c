/* generate.c -- the generation loop: prefill the prompt, then sample -> stream -> evaluate one
 * token at a time until EOS / end-of-turn, a stop string, max_new_tokens or a full context.
 *
 * Streaming text goes through the tokenizer's UTF-8 stream decoder (a character split across
 * tokens is held until complete) and then through a stop-string hold-back: the longest tail of
 * the pending text that is a proper prefix of some stop string is kept back until the next token
 * decides it, so a stop string is never streamed, not even in part. All buffers are sized at
 * create time (the longest token piece and the longest stop string bound them). */
#include <string.h>

#include "core/core.h"

struct tq_generator {
    tq_model *model;        /* borrowed */
    tq_session *session;    /* borrowed (NULL on a GPU session) */
    tq_cuda_session *cuda;  /* borrowed: the GPU session (tq_generator_create_cuda)             */
    const tq_tokenizer *tok;
    tq_gen_opts opts;
    tq_sampler *sampler;
    int32_t n_vocab;        /* model's logits length */
    int32_t tok_vocab;      /* tokenizer's vocabulary */
    int32_t eos[3];         /* ids that end a run (-1: none) */
    float *logits;          /* (n_vocab) */
    char *piece;            /* (piece_cap) one token's newly complete bytes */
    size_t piece_cap;
    char *hold;             /* (hold_cap) text not yet streamed */
    size_t hold_cap;
    size_t max_stop;        /* longest stop string */
};

void tq_gen_opts_default(tq_gen_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof(*o));
    o->sampling = tq_sampler_params_default();
    o->max_new_tokens = 256;
}

void tq_generator_free(tq_generator *g)
{
    if (!g)
        return;
    tq_sampler_free(g->sampler);
    tq_free(g->logits);
    tq_free(g->piece);
    tq_free(g->hold);
    tq_free(g);
}

tq_sampler *tq_generator_sampler(tq_generator *g)
{
    return g ? g->sampler : NULL;
}

static tq_status create(tq_model *model, tq_session *session, tq_cuda_session *cuda,
                        const tq_tokenizer *tok, const tq_gen_opts *opts, tq_generator **out);

tq_status tq_generator_create(tq_model *model, tq_session *session, const tq_tokenizer *tok,
                              const tq_gen_opts *opts, tq_generator **out)
{
    if (out)
        *out = NULL;
    if (!session)
        return TQ_FAIL(TQ_E_ARG, "tq_generator_create: model, session and tokenizer are required");
    return create(model, session, NULL, tok, opts, out);
}

tq_status tq_generator_create_cuda(tq_model *model, tq_cuda_session *session,
                                   const tq_tokenizer *tok, const tq_gen_opts *opts,
                                   tq_generator **out)
{
    if (out)
        *out = NULL;
    if (!session)
        return TQ_FAIL(TQ_E_ARG, "tq_generator_create_cuda: model, session and tokenizer are "
                       "required");
    return create(model, NULL, session, tok, opts, out);
}

static tq_status create(tq_model *model, tq_session *session, tq_cuda_session *cuda,
                        const tq_tokenizer *tok, const tq_gen_opts *opts, tq_generator **out)
{
    tq_gen_opts def;
    tq_model_info mi;
    tq_generator *g;
    tq_status st;
    size_t max_piece = 0, nl;

    if (!out)
        return TQ_FAIL(TQ_E_ARG, "tq_generator_create: out is NULL");
    *out = NULL;
    if (!model || !tok)
        return TQ_FAIL(TQ_E_ARG, "tq_generator_create: model, session and tokenizer are required");
    if (!opts) {
        tq_gen_opts_default(&def);
        opts = &def;
    }
    if (opts->n_stop < 0 || (opts->n_stop > 0 && !opts->stop))
        return TQ_FAIL(TQ_E_ARG, "tq_generator_create: n_stop %d with stop %s", opts->n_stop,
                       opts->stop ? "set" : "NULL");
    if ((st = tq_model_get_info(model, &mi)))
        return st;
    g = tq_calloc(1, sizeof(*g));
    if (!g)
        return TQ_FAIL(TQ_E_NOMEM, "tq_generator_create: out of memory");
    g->model = model;
    g->session = session;
    g->cuda = cuda;
    g->tok = tok;
    g->opts = *opts;
    g->n_vocab = mi.vocab_size;
    g->tok_vocab = tq_tokenizer_vocab_size(tok);
    g->eos[0] = tq_tokenizer_eos(tok);
    g->eos[1] = tq_tokenizer_eot(tok);
    g->eos[2] = mi.eos_id;
    for (int i = 0; i < opts->n_stop; i++) {
        if (!opts->stop[i] || !opts->stop[i][0]) {
            st = TQ_FAIL(TQ_E_ARG, "tq_generator_create: stop string %d is empty", i);
            goto out_free;
        }
        size_t l = strlen(opts->stop[i]);
        g->max_stop = l > g->max_stop ? l : g->max_stop;
    }
    for (int32_t i = 0; i < g->tok_vocab; i++) {
        size_t l = 0;
        if (tq_tokenizer_piece(tok, i, &l) && l > max_piece)
            max_piece = l;
    }
    if ((st = tq_sampler_create(&opts->sampling, mi.vocab_size, &g->sampler)))
        goto out_free;
    g->piece_cap = max_piece + 8;
    g->hold_cap = g->piece_cap + g->max_stop + 8;
    if (!tq_mul_ok((size_t)mi.vocab_size, sizeof(float), &nl)) {
        st = TQ_FAIL(TQ_E_OVERFLOW, "tq_generator_create: vocabulary too large");
        goto out_free;
    }
    g->logits = tq_malloc(nl);
    g->piece = tq_malloc(g->piece_cap);
    g->hold = tq_malloc(g->hold_cap);
    if (!g->logits || !g->piece || !g->hold) {
        st = TQ_FAIL(TQ_E_NOMEM, "tq_generator_create: out of memory");
        goto out_free;
    }
    *out = g;
    return TQ_OK;
out_free:
    tq_generator_free(g);
    return st;
}

static int is_eos(const tq_generator *g, int32_t t)
{
    return t >= 0 && (t == g->eos[0] || t == g->eos[1] || t == g->eos[2]);
}

/* Earliest occurrence of any stop string in hold[0..n): its offset, *which set; or -1. */
static int64_t find_stop(const tq_generator *g, size_t n, int *which)
{
    int64_t best = -1;
    for (int i = 0; i < g->opts.n_stop; i++) {
        const char *p = memmem(g->hold, n, g->opts.stop[i], strlen(g->opts.stop[i]));
        if (p && (best < 0 || p - g->hold < best)) {
            best = p - g->hold;
            *which = i;
        }
    }
    return best;
}

/* Bytes at the end of hold[0..n) that could begin a stop string (longest proper prefix). */
static size_t stop_tail(const tq_generator *g, size_t n)
{
    size_t keep = 0;
    for (int i = 0; i < g->opts.n_stop; i++) {
        const char *s = g->opts.stop[i];
        size_t ls = strlen(s);
        for (size_t k = ls - 1 < n ? ls - 1 : n; k > keep; k--)
            if (!memcmp(g->hold + n - k, s, k)) {
                keep = k;
                break;
            }
    }
    return keep;
}

/* Enter ids[0..n) into the penalty history. Only the last repeat_last_n can stay in its window,
 * so only those are entered: the same history as entering all n, at bounded cost. */
static void accept_tail(tq_generator *g, const int32_t *ids, int64_t n)
{
    const int64_t w = g->opts.sampling.repeat_last_n;
    for (int64_t i = n > w ? n - w : 0; i < n; i++)
        tq_sampler_accept(g->sampler, ids[i]);
}

tq_status tq_generator_history(tq_generator *g, const int32_t *ids, int64_t n)
{
    if (!g || n < 0 || (n > 0 && !ids))
        return TQ_FAIL(TQ_E_ARG, "tq_generator_history: %s", !g ? "generator is NULL"
                       : n < 0 ? "negative token count" : "ids is NULL");
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= g->n_vocab)
            return TQ_FAIL(TQ_E_ARG, "tq_generator_history: token %lld: id %d outside the "
                           "vocabulary [0, %d)", (long long)i, ids[i], g->n_vocab);
    accept_tail(g, ids, n);
    return TQ_OK;
}

static int64_t n_past(const tq_generator *g)
{
    return g->cuda ? tq_cuda_session_n_past(g->cuda) : tq_session_n_past(g->session);
}

/* append ids[0..n) to the session and pick the next token: on a GPU session through the device
 * greedy sampler when the sampler's pick is greedy (only the id comes back), else from the
 * logits copied back */
static tq_status eval_pick(tq_generator *g, const int32_t *ids, int64_t n, int32_t *t)
{
    tq_status st;
    if (g->cuda) {
        int32_t pen[TQ_CUDA_GREEDY_MAX_PEN];
        int np = 0;
        float pv = 1.0f;
        if (!g->opts.host_sampler &&
            tq_sampler_greedy_ids(g->sampler, pen, TQ_CUDA_GREEDY_MAX_PEN, &np, &pv))
            return tq_cuda_session_eval_greedy(g->cuda, ids, n, pen, np, pv, t);
        st = tq_cuda_session_eval(g->cuda, ids, n, g->logits);
    } else {
        st = tq_session_eval(g->session, ids, n, g->logits);
    }
    return st ? st : tq_sampler_sample(g->sampler, g->logits, t);
}

tq_status tq_generator_run(tq_generator *g, const int32_t *prompt, int64_t n_prompt,
                           tq_gen_fn fn, void *user, tq_gen_stats *stats)
{
    tq_gen_stats st_local;
    tq_gen_stats *S = stats ? stats : &st_local;
    tq_tok_stream ts;
    tq_status st;
    size_t n_hold = 0;
    int user_stop = 0;

    memset(S, 0, sizeof(*S));
    S->stop_index = -1;
    if (!g)
        return TQ_FAIL(TQ_E_ARG, "tq_generator_run: generator is NULL");
    if (n_prompt < 1 || !prompt)
        return TQ_FAIL(TQ_E_ARG, "tq_generator_run: empty prompt (at least one token is needed "
                                 "to produce the first logits)");
    const int64_t n_past0 = n_past(g);
    const int64_t n_ctx = g->cuda ? tq_cuda_session_n_ctx(g->cuda) : tq_session_n_ctx(g->session);
    if (n_past0 + n_prompt + 1 > n_ctx) {
        if (n_past0)
            return TQ_FAIL(TQ_E_OVERFLOW, "prompt of %lld tokens on top of %lld already in the "
                           "session does not fit a context of %lld tokens with room to generate "
                           "(start over, or use a larger context: at least %lld)",
                           (long long)n_prompt, (long long)n_past0, (long long)n_ctx,
                           (long long)(n_past0 + n_prompt + 1));
        return TQ_FAIL(TQ_E_OVERFLOW, "prompt of %lld tokens does not fit a context of %lld "
                       "tokens with room to generate (use a shorter prompt or a larger context: "
                       "at least %lld)", (long long)n_prompt, (long long)n_ctx,
                       (long long)(n_prompt + 1));
    }
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= g->n_vocab)
            return TQ_FAIL(TQ_E_ARG, "prompt token %lld: id %d outside the vocabulary [0, %d)",
                           (long long)i, prompt[i], g->n_vocab);

    /* the prompt enters the penalty history before the pick (the pick reads it) */
    accept_tail(g, prompt, n_prompt); /* ids checked above */
    int32_t t;
    uint64_t t0 = tq_now_ns();
    if ((st = eval_pick(g, prompt, n_prompt, &t)))
        return st;
    S->prefill_s = (double)(tq_now_ns() - t0) * 1e-9;
    S->n_prompt = n_prompt;

    tq_tok_stream_init(&ts, g->tok, g->opts.show_special ? 0u : (unsigned)TQ_TOK_SKIP_SPECIAL);
    t0 = tq_now_ns();
    S->stop = TQ_GEN_STOP_LENGTH;
    for (;;) {
        size_t n_new = 0;
        S->n_gen++;
        tq_sampler_accept_output(g->sampler, t);
        if (!g->opts.ignore_eos && is_eos(g, t)) {
            S->stop = TQ_GEN_STOP_EOS;
            break;
        }
        if (t < g->tok_vocab &&
            (st = tq_tok_stream_put(&ts, t, g->piece, g->piece_cap, &n_new)))
            goto out;
        memcpy(g->hold + n_hold, g->piece, n_new);
        n_hold += n_new;
        size_t emit = n_hold;
        int which = -1;
        int64_t at = g->opts.n_stop ? find_stop(g, n_hold, &which) : -1;
        if (at >= 0) {
            emit = (size_t)at;
        } else if (g->opts.n_stop) {
            emit = n_hold - stop_tail(g, n_hold);
        }
        if (fn && fn(user, t, g->hold, emit))
            user_stop = 1;
        memmove(g->hold, g->hold + emit, n_hold - emit);
        n_hold -= emit;
        if (at >= 0) {
            S->stop = TQ_GEN_STOP_STRING;
            S->stop_index = which;
            n_hold = 0; /* the stop string and anything after it are dropped */
            break;
        }
        if (user_stop) {
            S->stop = TQ_GEN_STOP_USER;
            break;
        }
        if (g->opts.max_new_tokens > 0 && S->n_gen >= g->opts.max_new_tokens)
            break;
        if (n_past(g) >= n_ctx) {
            S->stop = TQ_GEN_STOP_CTX;
            break;
        }
        const int32_t prev = t;
        if ((st = eval_pick(g, &prev, 1, &t)))
            goto out;
        S->n_decode++;
    }
    /* end of stream: an unfinished UTF-8 character and the held-back stop-string prefix */
    if (S->stop != TQ_GEN_STOP_STRING) {
        size_t n_new = 0;
        if (tq_tok_stream_flush(&ts, g->piece, g->piece_cap, &n_new) == TQ_OK &&
            n_hold + n_new <= g->hold_cap) {
            memcpy(g->hold + n_hold, g->piece, n_new);
            n_hold += n_new;
        }
    }
    if (fn && n_hold)
        fn(user, -1, g->hold, n_hold);
    st = TQ_OK;
out:
    S->decode_s = (double)(tq_now_ns() - t0) * 1e-9;
    return st;
}
