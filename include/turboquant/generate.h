/* turboquant/generate.h -- token sampling and the generation loop. Included by turboquant.h only.
 *
 * Sampling pipeline, applied to one row of logits (n_vocab floats, not modified):
 *   1. repetition penalty over the distinct tokens of the last `repeat_last_n` accepted tokens
 *      (CTRL / llama.cpp / transformers rule: a positive logit is divided by the penalty, a
 *      negative one multiplied by it);
 *   1b. presence / frequency penalties (OpenAI's rule) over the tokens accepted as generated
 *      output (tq_sampler_accept_output(), since the last reset; no window): for a token
 *      generated c > 0 times, logit -= presence_penalty + c * frequency_penalty;
 *   2. temperature == 0: greedy, argmax (ties go to the lowest token id); nothing else applies;
 *   3. logits / temperature;
 *   4. top-k: keep the k largest (ties broken by lower id);
 *   5. top-p: keep the smallest prefix (by probability, descending) whose mass is >= top_p;
 *   6. min-p: keep tokens whose probability is >= min_p * (largest probability);
 *   7. draw from the softmax of what is kept with the sampler's seeded generator.
 * The order of 3-6 is the one of Hugging Face transformers (temperature first). At least one
 * token always survives. NaN logits count as -inf; a row with no finite logit is an error.
 */
#ifndef TURBOQUANT_GENERATE_H
#define TURBOQUANT_GENERATE_H
#ifdef __cplusplus
extern "C" {
#endif

/* Sampler settings. Neutral values switch a stage off (shown in brackets). */
typedef struct tq_sampler_params {
    float temperature;      /* 0 = greedy; > 0 scales logits                       [0]   */
    int32_t top_k;          /* keep the k most likely; 0 = off                     [0]   */
    float top_p;            /* nucleus mass in (0, 1]; 1 = off                     [1]   */
    float min_p;            /* in [0, 1); 0 = off                                  [0]   */
    float repeat_penalty;   /* >= 1 ... any > 0; 1 = off                           [1]   */
    int32_t repeat_last_n;  /* penalty window in tokens (0 = off)                  [64]  */
    uint64_t seed;          /* generator seed: same seed, same draws               [0]   */
    float presence_penalty; /* in [-2, 2], subtracted once from a generated token  [0]   */
    float frequency_penalty;/* in [-2, 2], subtracted per time it was generated    [0]   */
} tq_sampler_params;

/* tq_sampler_params_default() -- greedy, every filter off, repeat_last_n 64, seed 0. */
TQ_API tq_sampler_params tq_sampler_params_default(void);

typedef struct tq_sampler tq_sampler;

/* tq_sampler_create() -- validate params and allocate every buffer for a vocabulary of n_vocab
 * tokens (sampling itself never allocates). Bad values give TQ_E_ARG naming the field and its
 * valid range. Free with tq_sampler_free(). */
TQ_API tq_status tq_sampler_create(const tq_sampler_params *params, int64_t n_vocab,
                                   tq_sampler **out);
TQ_API void tq_sampler_free(tq_sampler *s);

/* tq_sampler_sample() -- choose the next token from one row of n_vocab logits. Does not record
 * the token for the repetition penalty: call tq_sampler_accept() with the token actually used.
 * Not thread-safe per sampler (it owns scratch buffers and the generator state). */
TQ_API tq_status tq_sampler_sample(tq_sampler *s, const float *logits, int32_t *token);

/* tq_sampler_accept() -- append token to the penalty history (prompt tokens included, if you
 * want them penalised). Out-of-range ids give TQ_E_ARG. */
TQ_API tq_status tq_sampler_accept(tq_sampler *s, int32_t token);

/* tq_sampler_accept_output() -- a token the model generated (the one actually used): appended to
 * the repetition history like tq_sampler_accept(), and counted for presence_penalty /
 * frequency_penalty (which see only tokens entered here, never prompt tokens). */
TQ_API tq_status tq_sampler_accept_output(tq_sampler *s, int32_t token);

/* tq_sampler_reset() -- clear the history and the output counts, reseed the generator with
 * params.seed. */
TQ_API void tq_sampler_reset(tq_sampler *s);

/* tq_sampler_dist() -- the distribution step 7 draws from: the kept tokens in descending
 * probability (ties: lower id first) with their normalised probabilities. Writes up to cap
 * entries to ids/probs and the total kept count to *n_kept (which may exceed cap). For greedy
 * it is the argmax with probability 1. Does not advance the generator. For tests and tools. */
TQ_API tq_status tq_sampler_dist(tq_sampler *s, const float *logits, int32_t *ids, float *probs,
                                 int64_t cap, int64_t *n_kept);

/* tq_sampler_greedy_ids() -- 1 when the next tq_sampler_sample() is the greedy choice over the
 * logits with only the repetition penalty in effect (temperature 0, no presence / frequency
 * penalty counted yet) and at most cap distinct ids are penalised: then ids[0..*n) = those
 * distinct ids (*n 0: no penalty) and *penalty = repeat_penalty, so a device can pick the token
 * (tq_cuda_session_eval_greedy). 0 otherwise (the logits must go through tq_sampler_sample). */
TQ_API int tq_sampler_greedy_ids(const tq_sampler *s, int32_t *ids, int cap, int *n,
                                 float *penalty);

/* tq_logprobs() -- log-probabilities of one row of raw logits: the log-softmax over all n_vocab
 * entries, computed in double, with no penalty, temperature or filter applied (what the model
 * itself predicts, whatever the sampler then does). Writes log p(token) to *lp_token (token -1
 * or lp_token NULL: skipped) and the k most likely ids in descending order (ties: lower id
 * first) with their log-probabilities to top_ids/top_lp (k = 0: none; meant for small k, cost
 * O(n_vocab * k) at worst). NaN logits count as -inf (log-probability -inf). Errors (TQ_E_ARG):
 * NULL logits, n_vocab < 1, token or k outside [0, n_vocab] / [-1, n_vocab), NULL top arrays with
 * k > 0, no finite logit in the row. Does not allocate; thread-safe. */
TQ_API tq_status tq_logprobs(const float *logits, int64_t n_vocab, int32_t token, float *lp_token,
                             int32_t *top_ids, float *top_lp, int k);

/* ==== generation loop ====================================================================== */
/* A generator drives one session: prefill the prompt, then sample -> stream -> evaluate, until
 * EOS/end-of-turn, a stop string, max_new_tokens, or a full context. Every buffer (logits, text
 * hold-back, sampler) is allocated in tq_generator_create(); the loop itself never allocates. */

/* Generation settings. Fill with tq_gen_opts_default() first. */
typedef struct tq_gen_opts {
    tq_sampler_params sampling; /* see above (default: greedy)                               */
    int64_t max_new_tokens;     /* stop after this many new tokens; <= 0 = no limit (until
                                 * EOS or the context is full) (default 256)                  */
    const char *const *stop;    /* n_stop stop strings (borrowed; must outlive the generator):
                                 * generation ends when the text contains one; it is not
                                 * streamed, nor anything after it (default none)              */
    int n_stop;
    int ignore_eos;             /* 1: do not stop at EOS / end-of-turn tokens (default 0)     */
    int show_special;           /* 1: stream special tokens' text too (default 0)             */
    int host_sampler;           /* GPU generator (tq_generator_create_cuda): 1 = copy every row
                                 * of logits back and sample on the host, also when the device
                                 * greedy sampler could pick (for A/Bs; default 0)             */
} tq_gen_opts;

/* tq_gen_opts_default() -- greedy sampling, max_new_tokens 256, no stop strings, stop at EOS. */
TQ_API void tq_gen_opts_default(tq_gen_opts *opts);

typedef struct tq_generator tq_generator;

/* tq_generator_create() -- a generator over session (borrowed; evaluated on model, which must be
 * the session's model) with tokenizer tok (borrowed). The EOS set is the tokenizer's eos and
 * end-of-turn ids plus the model's eos id. Errors: TQ_E_ARG (bad option: the message names it),
 * TQ_E_MISMATCH (tokenizer ids do not fit the model's vocabulary), TQ_E_NOMEM. */
TQ_API tq_status tq_generator_create(tq_model *model, tq_session *session, const tq_tokenizer *tok,
                                     const tq_gen_opts *opts, tq_generator **out);
TQ_API void tq_generator_free(tq_generator *g);

/* tq_generator_sampler() -- the generator's sampler (for tq_sampler_reset() between runs). */
TQ_API tq_sampler *tq_generator_sampler(tq_generator *g);

/* Streaming callback: called once per generated token with the text that became final with it
 * (complete UTF-8 characters that cannot be the start of a stop string; possibly len 0), and a
 * last time with token -1 for held-back text at the end. Return nonzero to stop generating. */
typedef int (*tq_gen_fn)(void *user, int32_t token, const char *text, size_t len);

/* Why generation ended. Pinned values. */
typedef enum tq_gen_stop {
    TQ_GEN_STOP_LENGTH = 0, /* max_new_tokens reached                                       */
    TQ_GEN_STOP_EOS = 1,    /* EOS / end-of-turn token sampled (not streamed, not evaluated) */
    TQ_GEN_STOP_STRING = 2, /* a stop string appeared in the text                            */
    TQ_GEN_STOP_CTX = 3,    /* the session's context is full                                 */
    TQ_GEN_STOP_USER = 4,   /* the callback returned nonzero                                 */
} tq_gen_stop;

/* What one run did. Times are wall-clock seconds. */
typedef struct tq_gen_stats {
    int64_t n_prompt;   /* prompt tokens evaluated (prefill)                                 */
    int64_t n_gen;      /* tokens sampled (the EOS that stopped a run included)              */
    int64_t n_decode;   /* single-token forward steps run after the prefill                  */
    double prefill_s;   /* prompt evaluation                                                  */
    double decode_s;    /* the n_decode steps (sampling included)                             */
    tq_gen_stop stop;   /* why it ended                                                       */
    int stop_index;     /* which stop string, for TQ_GEN_STOP_STRING; else -1                 */
} tq_gen_stats;

/* tq_generator_run() -- append prompt[0..n_prompt) (n_prompt >= 1) to the session and generate
 * from the logits of its last token. Multi-turn use: keep the session, trim it back to the
 * tokens shared with the next prompt (tq_session_trim) and pass the rest. Every prompt token
 * enters the repetition-penalty history (whose window keeps the last repeat_last_n); tokens
 * already in the session do not: give them with tq_generator_history(). fn and stats may be
 * NULL. Errors: TQ_E_OVERFLOW when the prompt does not fit the context with room for one new
 * token (the message gives the numbers; nothing is evaluated), TQ_E_ARG (empty prompt, token id
 * outside the vocabulary), or the engine's error. A context that fills up while generating is
 * not an error (stop = TQ_GEN_STOP_CTX). */
TQ_API tq_status tq_generator_run(tq_generator *g, const int32_t *prompt, int64_t n_prompt,
                                  tq_gen_fn fn, void *user, tq_gen_stats *stats);

/* tq_generator_history() -- enter ids[0..n) into the repetition-penalty history as
 * tq_generator_run() does with its prompt: for tokens already in the session (restored from a
 * prompt cache, evaluated before, kept from an earlier turn) that precede the prompt the next run
 * gets. Then history(ids[0..k)) + run(ids[k..n)) penalises exactly what run(ids[0..n)) does, so
 * a greedy continuation does not depend on how much of the prompt was cached. Call it after
 * tq_sampler_reset(), if any, and before the run. n == 0 is a no-op. Errors: TQ_E_ARG (NULL
 * generator, ids NULL with n > 0, n < 0, an id outside the vocabulary: nothing is entered). */
TQ_API tq_status tq_generator_history(tq_generator *g, const int32_t *ids, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
