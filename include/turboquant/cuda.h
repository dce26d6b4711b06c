/* turboquant/cuda.h -- CUDA entry points, declared in every build (included by turboquant.h).
 * Without CUDA support compiled in, tq_cuda_available() returns 0 and every other entry point
 * returns TQ_E_UNSUPPORTED, so callers need no #ifdef.
 *
 * The device KV cache (tq_cuda_kv) holds, for each sequence of a batch and each kv head, up to
 * max_tokens encoded K rows and V rows, byte for byte the rows of the CPU codec (docs/FORMAT.md
 * "KV rows"), so a cache encoded on the CPU can be attended on the GPU and vice versa. Every
 * handle owns one CUDA stream; calls on one handle are ordered, calls return when their work is
 * finished (host pointers) or enqueued (device pointers: synchronize with tq_cuda_kv_sync()).
 *
 * Supported on the GPU: schemes bf16, f16, kv8 and turbo:k8v3, k4v3, k8v4, k8v2, k4v2, k4v4
 * (head_dim 64/128/256, any GQA group and query count with n_q*group <= 64).
 */
#ifndef TURBOQUANT_CUDA_H
#define TURBOQUANT_CUDA_H
#ifdef __cplusplus
extern "C" {
#endif

/* tq_cuda_available() -- number of usable CUDA devices (0 without a CUDA build or a device). */
TQ_API int tq_cuda_available(void);
/* tq_cuda_compiled() -- 1 if this library was built with CUDA kernels. */
TQ_API int tq_cuda_compiled(void);
/* tq_cuda_device_name() -- name of device 0 into buf (NUL-terminated, truncated to cap). */
TQ_API tq_status tq_cuda_device_name(char *buf, size_t cap);

/* tq_cuda_kv_supported() -- TQ_OK if the GPU kernels handle (scheme, head_dim); otherwise
 * TQ_E_UNSUPPORTED naming the supported choices. Needs no device. */
TQ_API tq_status tq_cuda_kv_supported(tq_kv_scheme s, int head_dim);

/* tq_cuda_kv_encode() -- encode n_rows host rows (head_dim elements of src_type each) on the GPU
 * into host buffers k_dst and v_dst (n_rows * tq_kv_row_bytes() each; either may be NULL to skip
 * it). Same bytes as tq_kv_encode_k()/tq_kv_encode_v(). For tests and tools; not a hot path. */
TQ_API tq_status tq_cuda_kv_encode(tq_kv_scheme s, int head_dim, tq_dtype src_type, const void *src,
                                   int64_t n_rows, void *k_dst, void *v_dst);

/* ---- device KV cache ------------------------------------------------------------------------ */
typedef struct tq_cuda_kv tq_cuda_kv;

/* tq_cuda_kv_create() -- a zeroed device cache for `batch` sequences of up to max_tokens tokens
 * and n_kv_heads heads of head_dim under scheme s, on device 0. */
TQ_API tq_status tq_cuda_kv_create(tq_kv_scheme s, int head_dim, int n_kv_heads, int64_t max_tokens,
                                   int batch, tq_cuda_kv **out);
/* tq_cuda_kv_free() -- release everything (NULL is a no-op). */
TQ_API void tq_cuda_kv_free(tq_cuda_kv *c);
/* tq_cuda_kv_length() -- tokens currently stored per sequence (the same for every sequence). */
TQ_API int64_t tq_cuda_kv_length(const tq_cuda_kv *c);
/* tq_cuda_kv_set_length() -- truncate (or, for benchmarks, extend over what is stored) to n
 * tokens, 0 <= n <= max_tokens. */
TQ_API tq_status tq_cuda_kv_set_length(tq_cuda_kv *c, int64_t n);

/* tq_cuda_kv_append() -- encode n_new new tokens of every sequence and append them. k and v have
 * shape (batch, n_new, n_kv_heads, head_dim) of src_type (f32, f16, bf16), on the device when
 * on_device != 0, else on the host. Fails with TQ_E_OVERFLOW past max_tokens. */
TQ_API tq_status tq_cuda_kv_append(tq_cuda_kv *c, tq_dtype src_type, const void *k, const void *v,
                                   int n_new, int on_device);
/* tq_cuda_kv_append_rows() -- append already encoded rows (e.g. from tq_kv_encode_k/v on the
 * CPU), host memory, shape (batch, n_new, n_kv_heads) rows of tq_kv_row_bytes() each. */
TQ_API tq_status tq_cuda_kv_append_rows(tq_cuda_kv *c, const void *k_rows, const void *v_rows,
                                        int n_new);
/* tq_cuda_kv_read_rows() -- copy the encoded rows of tokens [t0, t0+n) back to the host, same
 * shape as tq_cuda_kv_append_rows(). */
TQ_API tq_status tq_cuda_kv_read_rows(tq_cuda_kv *c, int64_t t0, int n, void *k_rows, void *v_rows);
/* tq_cuda_kv_fill_random() -- append n_new tokens of seeded Gaussian K and V (for benchmarks:
 * generated and encoded on the device, no host traffic). */
TQ_API tq_status tq_cuda_kv_fill_random(tq_cuda_kv *c, int64_t n_new, uint64_t seed);

/* tq_cuda_kv_attend() -- decode attention. q: (batch, n_q, n_heads, head_dim) fp32, n_heads a
 * multiple of n_kv_heads (GQA group = n_heads / n_kv_heads; query head h reads kv head
 * h / group). The n_q queries are the last n_q stored tokens (decode: n_q = 1; speculative
 * verification: n_q > 1): query i sees tokens [0, length - n_q + i]. out: same shape, fp32.
 * scale multiplies Q.K (usually 1/sqrt(head_dim)). q/out on the device when on_device != 0. */
TQ_API tq_status tq_cuda_kv_attend(tq_cuda_kv *c, const float *q, int n_q, int n_heads, float scale,
                                   float *out, int on_device);
/* tq_cuda_kv_set_splits() -- force the number of context splits (flash-decoding), 1..4096;
 * 0 = automatic (one wave of resident blocks). */
TQ_API tq_status tq_cuda_kv_set_splits(tq_cuda_kv *c, int n_splits);
/* How the context splits' partial results of one attend call are merged.
 * TQ_CUDA_MERGE_AUTO: CLUSTER where it applies (compute capability 9.0+, <= 16 splits), else FUSED.
 * TQ_CUDA_MERGE_FUSED: the last block of each (sequence, kv head) merges every split through L2.
 * TQ_CUDA_MERGE_KERNEL: a second (reduce) kernel merges them.
 * TQ_CUDA_MERGE_CLUSTER: the splits of a (sequence, kv head) run as one thread-block cluster and
 *   its first block merges the others' partials from their shared memory (Hopper distributed
 *   shared memory; no L2 round trip); falls back to FUSED where it does not apply. */
typedef enum {
    TQ_CUDA_MERGE_AUTO = 0,
    TQ_CUDA_MERGE_FUSED = 1,
    TQ_CUDA_MERGE_KERNEL = 2,
    TQ_CUDA_MERGE_CLUSTER = 3
} tq_cuda_merge;
/* Options of a device cache's attend calls (zero-initialised = automatic everything); the tool
 * fills them from its flags, the library reads no environment. */
typedef struct tq_cuda_kv_opts {
    int n_splits;        /* context splits: 0 = automatic, 1..4096 forced              */
    tq_cuda_merge merge; /* how the splits are merged                                  */
    int no_pdl;          /* 1: launch the reduce kernel (MERGE_KERNEL) without programmatic
                            dependent launch (in a GPU session's options: the decode
                            GEMVs of the forward too)                                    */
    int enc_two;         /* 1: an append encodes K and V rows in two launches (the append
                            before 2026-12-03: 4df7c24 made it one; for A/Bs)            */
} tq_cuda_kv_opts;
/* tq_cuda_kv_set_opts() -- set the options of later attend calls (TQ_E_ARG on bad values). */
TQ_API tq_status tq_cuda_kv_set_opts(tq_cuda_kv *c, const tq_cuda_kv_opts *o);
/* tq_cuda_merge_parse() -- "auto", "fused", "kernel", "cluster" into *m (TQ_E_ARG otherwise). */
TQ_API tq_status tq_cuda_merge_parse(const char *name, tq_cuda_merge *m);
/* tq_cuda_kv_sync() -- wait for the handle's stream. */
TQ_API tq_status tq_cuda_kv_sync(tq_cuda_kv *c);

/* ---- device memory helpers for tools and tests (no cuda_runtime.h needed) ------------------ */
/* tq_cuda_malloc()/tq_cuda_free() -- plain device memory; tq_cuda_memcpy() dir: 0 = host to
 * device, 1 = device to host, 2 = device to device (synchronous). */
TQ_API tq_status tq_cuda_malloc(void **p, size_t bytes);
TQ_API void tq_cuda_free(void *p);
TQ_API tq_status tq_cuda_memcpy(void *dst, const void *src, size_t bytes, int dir);

/* How tq_cuda_kv_time_attend() times one call.
 * TQ_CUDA_TIME_COLD: before each call the GPU reads a 256 MiB buffer (the H200's 60 MB L2 then holds
 *   nothing of the cache, as in a decode step where other layers ran in between), and the start
 *   event is queued behind that read, so the interval is the GPU's time for the call (its two
 *   kernels and the gap between them) without the host's launch latency.
 * TQ_CUDA_TIME_HOST: events around each call issued to an idle GPU (the host's launch latency
 *   inside the interval; the previous call's rows still in L2 when they fit): how every table
 *   in docs/results.md so far was timed. */
typedef enum { TQ_CUDA_TIME_HOST = 0, TQ_CUDA_TIME_COLD = 1 } tq_cuda_timing;

/* tq_cuda_kv_time_attend() -- run tq_cuda_kv_attend (device q/out) `warmup` times, then time
 * `reps` calls one by one with CUDA events as `timing` says; times_ms[reps] receives each call's
 * time. */
TQ_API tq_status tq_cuda_kv_time_attend(tq_cuda_kv *c, const float *q_dev, int n_q, int n_heads,
                                        float scale, float *out_dev, int warmup, int reps,
                                        tq_cuda_timing timing, float *times_ms);
/* tq_cuda_copy_bandwidth() -- device-to-device cudaMemcpy of `bytes`, median of reps, as GB/s
 * counting bytes read + bytes written (2 * bytes / time) into *gbps, and the read-side rate
 * (bytes / time, comparable to "bytes an attention call must read") into *read_gbps. */
TQ_API tq_status tq_cuda_copy_bandwidth(size_t bytes, int reps, double *gbps, double *read_gbps);
/* tq_cuda_kv_bytes_read() -- bytes one attend call must read for the current length: stored
 * K and V rows of every (sequence, kv head) plus q and out. */
TQ_API size_t tq_cuda_kv_bytes_read(const tq_cuda_kv *c, int n_q, int n_heads);

/* ---- the engine's forward pass on the GPU ---------------------------------------------------
 * A tq_cuda_session runs a model loaded by tq_model_load() with BF16 weights or native block
 * weights (TQ_STORE_NATIVE) on device 0 through
 * the engine's one forward pass (src/model/forward.c) on the CUDA backend: every architecture the
 * CPU engine runs (Llama, Qwen2 biases, Qwen3 q/k norms, Gemma 3 (1 + w) norms, sandwich norms,
 * GELU, embedding scale, soft-capping). The weights are copied to the device once: dense ones as
 * bf16; native matrices in Q8_0, Q4_0, Q4_1, Q4_K or Q6_K as their packed blocks (the quantized
 * GEMV kernels, q8 activations: the CPU's native arithmetic), other native formats dequantized
 * to bf16, and a native embedding also as bf16 rows for the lookup (its tied head stays packed);
 * decode linears are fused GEMV kernels, prefill linears cuBLAS GEMMs (bf16 in, fp32
 * accumulate; native: the quantized GEMV over the chunk's tokens); activations are fp32; each layer's K/V live in a tq_cuda_kv of the chosen scheme
 * (append + fused attention above; a turbo cache keeps sliding-window layers in bf16, as on the
 * CPU). Dense F32 weights (the evaluation path: tq ppl / kl / teacher --cuda --weights f32) stay
 * f32 on the device: every product a cuBLAS GEMM with f32 inputs and CUBLAS_COMPUTE_32F_PEDANTIC
 * (fp32 arithmetic, no TF32), decode included. Scheme f32 (TQ_KV_F32) is a plain f32 cache with
 * an fp32 causal attention kernel (prefill in chunks of up to 512 tokens; n_ctx limited by the
 * shared memory per block, ~57k tokens on an H200). Refused with TQ_E_UNSUPPORTED, by name:
 * dense F16 weights, and a
 * sliding-window layer whose window is shorter than n_ctx (the device cache attends over the
 * whole context, which equals the window only while n_ctx <= window). Batch 1; prefill runs in
 * chunks of up to TQ_CUDA_PREFILL_CHUNK tokens (the attention in blocks of 64 / group queries).
 * The model must outlive the session only during
 * tq_cuda_session_create(). */
typedef struct tq_cuda_session tq_cuda_session;

/* tq_cuda_session_create() -- upload model's weights and allocate a cache of n_ctx tokens under
 * scheme kv (n_ctx may exceed the model's trained context: positions beyond it are computed as
 * usual, for speed measurements). */
TQ_API tq_status tq_cuda_session_create(const tq_model *model, tq_kv_scheme kv, int64_t n_ctx,
                                        tq_cuda_session **out);
/* tq_cuda_session_free() -- release everything (NULL is a no-op). */
TQ_API void tq_cuda_session_free(tq_cuda_session *s);
/* tq_cuda_session_eval() -- append n >= 1 tokens: forward pass, K/V into the caches, and (when
 * logits_last is not NULL) the logits of the last token into logits_last (vocab floats, host).
 * Returns when the logits are on the host (or, without logits, when the work is enqueued).
 * Errors: TQ_E_ARG (token outside [0, vocab)), TQ_E_OVERFLOW (past n_ctx; nothing appended). */
TQ_API tq_status tq_cuda_session_eval(tq_cuda_session *s, const int32_t *tokens, int64_t n,
                                      float *logits_last);
/* tq_cuda_session_eval_rows() -- append n >= 1 tokens as tq_cuda_session_eval() and return
 * results for the rows of tokens first .. n-1 (0 <= first < n; row r = token first + r; rows before
 * `first` are computed without the output layer): logits (may be NULL) = their logits,
 * (n - first) x vocab floats on the host; lse (may be NULL) = each row's log-sum-exp in double
 * (max, then the sum of exp(x - max) in double, on the device); argmax (may be NULL) = the first
 * index of each row's largest logit; picked (may be NULL) = picked[r * k + j] = row r's logit of
 * token ids[r * k + j] (k ids per row; ids outside the vocabulary give 0). The evaluators' path
 * (tq ppl / kl / teacher --cuda): one window, one or two forward calls, only what the host needs
 * crosses the bus. Errors as tq_cuda_session_eval(); TQ_E_ARG on bad first / k. */
TQ_API tq_status tq_cuda_session_eval_rows(tq_cuda_session *s, const int32_t *tokens, int64_t n,
                                           int64_t first, float *logits, const int32_t *ids, int k,
                                           float *picked, double *lse, int32_t *argmax);
/* tq_cuda_session_eval_greedy() -- append n >= 1 tokens as tq_cuda_session_eval() and pick the
 * next token on the device (the device greedy sampler): *next = tq_sampler_sample()'s greedy
 * choice on the last token's logits -- the first index of the largest logit, NaN as -inf, +inf
 * as FLT_MAX -- after the repetition penalty `penalty` (> 0) on the n_pen distinct ids pen_ids
 * (0 <= n_pen <= TQ_CUDA_GREEDY_MAX_PEN; 0: no penalty). Only the id crosses the bus; a decode
 * step (n = 1) runs the forward and the sampler as one CUDA graph. Errors as
 * tq_cuda_session_eval(); TQ_E_ARG on a bad penalty list, or a row without a finite logit
 * (after the tokens were appended, as the CPU sampler's error after an eval). */
#define TQ_CUDA_GREEDY_MAX_PEN 64
TQ_API tq_status tq_cuda_session_eval_greedy(tq_cuda_session *s, const int32_t *tokens, int64_t n,
                                             const int32_t *pen_ids, int n_pen, float penalty,
                                             int32_t *next);
/* tq_cuda_session_n_past() -- tokens in the cache; tq_cuda_session_reset() -- empty it;
 * tq_cuda_session_n_ctx() -- the cache's capacity (0 for NULL). */
TQ_API int64_t tq_cuda_session_n_past(const tq_cuda_session *s);
TQ_API int64_t tq_cuda_session_n_ctx(const tq_cuda_session *s);
TQ_API void tq_cuda_session_reset(tq_cuda_session *s);
/* tq_cuda_session_sync() -- wait for the session's queued work. */
TQ_API tq_status tq_cuda_session_sync(tq_cuda_session *s);
/* tq_cuda_session_debug() -- for tests: layer il's device KV cache (owned by the session) and,
 * after a one-token eval, device pointers to the LAST layer's query rows and attention output of
 * that token (n_heads * head_dim fp32 each, overwritten by the next eval). */
TQ_API tq_status tq_cuda_session_debug(tq_cuda_session *s, int il, tq_cuda_kv **kv, const float **q_last,
                                       const float **att_last);
/* tq_generator_create_cuda() -- a generator (turboquant/generate.h) over a GPU session
 * (borrowed): the same loop, stops, streaming and sampler as tq_generator_create(); when the
 * sampler's next pick is greedy with at most TQ_CUDA_GREEDY_MAX_PEN penalised ids
 * (tq_sampler_greedy_ids) the token is picked on the device (tq_cuda_session_eval_greedy: only
 * the id comes back), otherwise the logits are copied back and sampled on the host. Prompt
 * caches do not apply (the session has no snapshot). Errors as tq_generator_create(). */
TQ_API tq_status tq_generator_create_cuda(tq_model *model, tq_cuda_session *session,
                                          const tq_tokenizer *tok, const tq_gen_opts *opts,
                                          tq_generator **out);
/* tq_cuda_session_debug_kv() -- for tests: after an eval, device pointers to the K and V rows
 * the LAST layer appended for the last forward call's tokens (n_kv_heads * head_dim fp32 per
 * token, after norms and RoPE: the input of the device cache's encoder; overwritten by the next
 * eval). */
TQ_API tq_status tq_cuda_session_debug_kv(tq_cuda_session *s, const float **k, const float **v);
/* Options of a GPU session (zero-initialised = the defaults). */
typedef struct tq_cuda_session_opts {
    tq_cuda_kv_opts kv; /* every layer's attend calls                                      */
    int no_gemv;        /* 1: decode steps through cuBLAS GEMMs + separate elementwise kernels
                           instead of the fused GEMV kernels (for A/Bs)                     */
    int no_graph;       /* 1: decode steps launch their kernels one by one instead of as
                           one CUDA graph per step (for A/Bs)                               */
    int prefill_qgemv;  /* 1: native (quantized) prefill products through the quantized GEMV
                           kernels (8 tokens per launch) instead of the default: the matrix
                           dequantized to bf16 + cuBLAS from 9 tokens on (for A/Bs)         */
    int prefill_chunk;  /* tokens per forward call of a prefill, 1..TQ_CUDA_PREFILL_CHUNK
                           (0: TQ_CUDA_PREFILL_CHUNK; capped by n_ctx; an f32 cache keeps
                           its own); 64 / group was the size before 2026-12-03 (for A/Bs)   */
    int inputs;         /* the bf16-weight products' inputs: TQ_CUDA_IN_KV_F32 (0, default):
                           the K / V projections take the f32 activations (the CPU's values:
                           a quantized cache encodes the same rows up to f32 summation order),
                           the others bf16; TQ_CUDA_IN_BF16: all bf16 (before 2026-12-03);
                           TQ_CUDA_IN_F32: all f32 (prefill: two bf16 GEMMs per product)    */
    int no_wide_head;   /* 1: a native head decodes through the fused decode job (one warp per
                           row, before 2026-12-03) instead of the wide quantized GEMV (A/Bs) */
} tq_cuda_session_opts;
enum { TQ_CUDA_IN_KV_F32 = 0, TQ_CUDA_IN_BF16 = 1, TQ_CUDA_IN_F32 = 2 };
/* the default and largest prefill chunk of a GPU session (tokens per forward call) */
#define TQ_CUDA_PREFILL_CHUNK 256
/* tq_cuda_session_set_opts() -- set the options of later evals. */
TQ_API tq_status tq_cuda_session_set_opts(tq_cuda_session *s, const tq_cuda_session_opts *o);
/* tq_cuda_session_graph_stats() -- decode steps (1 token) run as one CUDA graph (*graph) and
 * eagerly (*eager: no_graph, or a step whose ops could not be captured), and how often the
 * step graph was instantiated (*inst; the other graph steps updated it in place). NULLs skip. */
TQ_API tq_status tq_cuda_session_graph_stats(const tq_cuda_session *s, long *graph, long *eager,
                                             long *inst);
/* tq_cuda_session_kernels() -- which kernel runs each weight type, e.g. "Q4_1 qgemv (q8 act),
 * Q8_0 qgemv (q8 act), embedding lookup bf16" or "bf16 GEMV"; owned by the session. */
TQ_API const char *tq_cuda_session_kernels(const tq_cuda_session *s);
/* tq_cuda_session_bytes() -- device bytes held: weights (*weights) and KV caches (*kv). */
TQ_API tq_status tq_cuda_session_bytes(const tq_cuda_session *s, size_t *weights, size_t *kv);

#ifdef __cplusplus
}
#endif
#endif
