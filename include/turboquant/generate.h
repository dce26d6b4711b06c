/* turboquant/generate.h -- token sampling and the generation loop. Included by turboquant.h only.
 *
 * Sampling pipeline, applied to one row of logits (n_vocab floats, not modified):
 *   1. repetition penalty over the distinct tokens of the last `repeat_last_n` accepted tokens
 *      (CTRL / llama.cpp / transformers rule: a positive logit is divided by the penalty, a
 *      negative one multiplied by it);
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

/* tq_sampler_reset() -- clear the history and reseed the generator with params.seed. */
TQ_API void tq_sampler_reset(tq_sampler *s);

/* tq_sampler_dist() -- the distribution step 7 draws from: the kept tokens in descending
 * probability (ties: lower id first) with their normalised probabilities. Writes up to cap
 * entries to ids/probs and the total kept count to *n_kept (which may exceed cap). For greedy
 * it is the argmax with probability 1. Does not advance the generator. For tests and tools. */
TQ_API tq_status tq_sampler_dist(tq_sampler *s, const float *logits, int32_t *ids, float *probs,
                                 int64_t cap, int64_t *n_kept);

#ifdef __cplusplus
}
#endif
#endif
