/* turboquant/model.h -- the CPU inference engine: load a model, run sessions over it.
 * Included by turboquant.h only.
 *
 * A tq_model is the read-only part (config + weights, shared by any number of sessions). A
 * tq_session is one token stream: its KV cache (one of the tq_kv_scheme schemes of kv.h) and the
 * run-state buffers of the forward pass, all allocated once in tq_session_create(); evaluating
 * tokens never allocates. Attention always reads K/V through the cache, prefill included, so a
 * cache scheme's effect is measured where it happens.
 *
 * Threads: a model runs its kernels on one tq_pool (its own, or one the caller lends). A pool runs
 * one job at a time, so sessions sharing a model must be evaluated from one thread at a time.
 * Everything here is deterministic: the same tokens give the same logits for any thread count,
 * and batch-invariant: a token's logits do not depend on how many tokens share its forward call
 * or where the chunk boundaries fall (n_batch, how evals split a prompt, a restored prompt cache),
 * unless tq_model_opts.gemm_openblas is set (src/cpu/matvec.h).
 */
#ifndef TURBOQUANT_MODEL_H
#define TURBOQUANT_MODEL_H
#ifdef __cplusplus
extern "C" {
#endif

typedef struct tq_model tq_model;
typedef struct tq_session tq_session;

/* Architectures (tq_arch) and hyper-parameters (tq_model_config) are declared in io.h. The
 * forward pass runs TQ_ARCH_LLAMA, TQ_ARCH_MISTRAL, TQ_ARCH_QWEN2, TQ_ARCH_QWEN3 and
 * TQ_ARCH_GEMMA3 (sliding-window layers attend within their window; the cache still stores every
 * token). Attention logit soft-capping (gemma2) is refused with TQ_E_UNSUPPORTED. */

/* tq_model_opts.weight_store */
enum { TQ_STORE_AUTO = 0, TQ_STORE_NATIVE = 1, TQ_STORE_DEQUANT = 2 };

/* Options for tq_model_load(). Fill with tq_model_opts_default() first, then change fields. */
typedef struct tq_model_opts {
    tq_dtype weight_type; /* storage of the big matrices: F32, F16 or BF16 (default BF16);
                           * every source format is dequantized to it at load               */
    int n_threads;        /* threads of the model's own pool when pool is NULL; <= 0 = one
                           * per online CPU (default 0)                                    */
    tq_pool *pool;        /* borrowed pool (must outlive the model), or NULL (default)      */
    int weight_store;     /* TQ_STORE_AUTO (default): GGUF block-quantized matrices stay in
                           * their format in memory (native kernels), float ones become
                           * weight_type; TQ_STORE_NATIVE: the same, and a safetensors
                           * source is refused; TQ_STORE_DEQUANT: everything dequantized
                           * to weight_type at load (the behaviour before native kernels) */
    int native_f32_act;   /* 1: native matmuls take f32 activations (exact) instead of the
                           * int8 blocks quantized once per token (default, faster)         */
    int matvec_bf16;      /* 1: bf16-activation matvec for bf16 weights on AVX-512 BF16 CPUs
                           * (rounds activations to bf16; the tool's TQ_MATVEC=avx512bf16)  */
    int gemm_openblas;    /* 1: OpenBLAS sgemm for f32-weight prefill, NOT batch-invariant
                           * (the tool's TQ_GEMM=openblas)                                  */
} tq_model_opts;

/* tq_model_opts_default() -- BF16 weights, own pool with one thread per CPU. */
TQ_API void tq_model_opts_default(tq_model_opts *opts);

/* tq_model_load() -- load a model from a GGUF file or a Hugging Face safetensors directory
 * (config.json + *.safetensors). opts may be NULL (defaults). Every tensor's shape is checked
 * against the config. Errors: TQ_E_IO (cannot open), TQ_E_FORMAT (malformed, missing tensor or
 * shape mismatch: the message names the tensor, expected and actual shape), TQ_E_UNSUPPORTED
 * (architecture or tensor type we do not run; the message lists what we support), TQ_E_NOMEM.
 * On success *out owns everything it needs (the file is not kept open unless stated by io). */
TQ_API tq_status tq_model_load(const char *path, const tq_model_opts *opts, tq_model **out);

/* tq_model_free() -- release the model. All its sessions must be freed first. NULL is a no-op. */
TQ_API void tq_model_free(tq_model *model);

/* What a loaded model is. Strings point into the model and live as long as it does. */
typedef struct tq_model_info {
    tq_arch arch;
    const char *arch_name;  /* tq_arch_name(arch): "llama", ...                          */
    const tq_model_config *config; /* every hyper-parameter (io.h), owned by the model    */
    const char *path;       /* the path given to tq_model_load (for loading a tokenizer)  */
    int n_layers;
    int dim;                /* hidden size                                                */
    int hidden_dim;         /* feed-forward (intermediate) size                           */
    int n_heads;            /* query heads                                                */
    int n_kv_heads;         /* key/value heads (n_heads % n_kv_heads == 0)                */
    int head_dim;
    int vocab_size;         /* rows of the output matrix = length of a logits vector      */
    int max_ctx;            /* context length the model was trained for                   */
    int bos_id;             /* -1 if the model file does not say                          */
    int eos_id;             /* -1 if the model file does not say                          */
    float rope_theta;
    tq_dtype weight_type;   /* storage of the big matrices                                */
    size_t weight_bytes;    /* bytes of all weights as held in memory                     */
    int n_threads;          /* threads of the pool the model runs on                      */
    const char *kernel;     /* matvec kernel chosen for weight_type ("avx512", ...)       */
    const char *gemm_kernel;/* kernel for products of >= 16 tokens (prefill): kernel, or
                             * "openblas" when gemm_openblas asked for it (f32 weights;
                             * not batch-invariant, see src/cpu/matvec.h)                  */
    int native;             /* 1: some matrices run in their file's block format          */
    const char *native_kernels; /* per native tensor type, the kernel that runs it:
                             * "Q4_1 q8-act avx2, Q8_0 q8-act avx2" ("" when none);
                             * like kernel and gemm_kernel, valid while the model lives */
    size_t weight_bytes_token; /* weight bytes a decode step reads (every matrix once)    */
} tq_model_info;

/* tq_native_kernel_name() -- the kernel --weights native runs for ggml type `type` on this CPU
 * (f32_act: --weights native-f32): "q8-act avx512vnni", "f32-act avx2", "dequant+f32 scalar", or
 * "none (not supported)"; for float types "dense (dequantized to the weight dtype)". Into buf. */
TQ_API const char *tq_native_kernel_name(int type, int f32_act, char *buf, size_t cap);

/* tq_model_get_info() -- describe the model into *out. */
TQ_API tq_status tq_model_get_info(const tq_model *model, tq_model_info *out);

/* Options for tq_session_create(). Fill with tq_session_opts_default() first. */
/* Attention path of a turbo KV cache: the fused kernel over the packed bytes (default) or the
 * dequantize-window reference, which gives the same floats (both round once after double
 * softmax and value sums); BOTH runs the fused kernel and keeps the reference's scratch so that
 * tests can compare the two on one cache. Pinned values. */
typedef enum tq_turbo_attn {
    TQ_TURBO_ATTN_FUSED = 0,
    TQ_TURBO_ATTN_REF = 1,
    TQ_TURBO_ATTN_BOTH = 2
} tq_turbo_attn;

typedef struct tq_session_opts {
    tq_kv_scheme kv;  /* cache scheme: f32, f16, bf16, kv8, kv4, turbo[...]; default bf16 */
    int n_ctx;        /* capacity in tokens; 0 = the model's max_ctx (default 0)         */
    int n_batch;      /* tokens per forward chunk in prefill (buffers are sized for it);
                       * 0 = 256 (default). Longer evals are split into chunks.         */
    tq_turbo_attn turbo_attn; /* turbo caches only (default TQ_TURBO_ATTN_FUSED)         */
    int swa_full;     /* sliding-window layers (Gemma 3): 0 = keep only the window, a ring
                       * buffer of round_up(window + n_batch, 256) rows (default; a trim
                       * below the window's start is refused); 1 = keep every token      */
} tq_session_opts;

/* tq_session_opts_default() -- bf16 cache, n_ctx = model max, n_batch = 256. */
TQ_API void tq_session_opts_default(tq_session_opts *opts);

/* tq_session_create() -- a new empty session on model (borrowed; must outlive the session).
 * opts may be NULL. Allocates the cache for n_ctx tokens and every run-state buffer here.
 * Errors: TQ_E_ARG / TQ_E_UNSUPPORTED (scheme not usable at this head_dim, the message lists
 * the valid ones), TQ_E_NOMEM. */
TQ_API tq_status tq_session_create(tq_model *model, const tq_session_opts *opts,
                                   tq_session **out);

/* tq_session_free() -- release the session. NULL is a no-op. */
TQ_API void tq_session_free(tq_session *s);

/* tq_session_eval() -- append n >= 1 tokens (prefill or one decode step) to the stream: run the
 * forward pass, store their K/V in the cache, and write the logits of the LAST token into
 * logits_last (vocab_size floats; NULL skips the output layer). Never allocates.
 * Errors: TQ_E_ARG (token id outside [0, vocab)), TQ_E_OVERFLOW (n_past + n > n_ctx; nothing is
 * appended and the message says how many tokens fit). */
TQ_API tq_status tq_session_eval(tq_session *s, const int32_t *tokens, int64_t n,
                                 float *logits_last);

/* tq_session_eval_all() -- like tq_session_eval() but writes the logits of EVERY new token:
 * logits has shape (n, vocab_size) and logits_count >= n * vocab_size (for perplexity / KL). */
TQ_API tq_status tq_session_eval_all(tq_session *s, const int32_t *tokens, int64_t n,
                                     float *logits, int64_t logits_count);

/* tq_batch_eval() -- evaluate several sessions of one model in ONE forward pass: append
 * tokens[i][0..n[i]) to ss[i] for each of the n_seq sequences (a decode step is n[i] = 1; a
 * prompt chunk may ride along) and write the logits of each one's last token to row i of
 * logits ((n_seq, vocab_size) floats; NULL skips the output layer). Every weight matrix is
 * read once for all the rows instead of once per session. Batch-invariant: row i is
 * bit-identical to what tq_session_eval(ss[i], tokens[i], n[i], ...) gives alone. The sum of
 * n[i] must fit the first session's n_batch (tq_session_opts), n_seq <= TQ_BATCH_MAX, the
 * sessions distinct. Never allocates; threads as tq_session_eval. Errors: TQ_E_ARG (NULL, a
 * session twice or of another model, a token id outside the vocabulary, too many rows),
 * TQ_E_OVERFLOW (a session's context cannot take its tokens); on any error nothing is
 * appended to any session. */
#define TQ_BATCH_MAX 256
TQ_API tq_status tq_batch_eval(tq_session *const *ss, const int32_t *const *tokens,
                               const int64_t *n, int n_seq, float *logits);

/* tq_session_n_past() -- tokens currently in the cache. tq_session_n_ctx() -- its capacity. */
TQ_API int64_t tq_session_n_past(const tq_session *s);
TQ_API int64_t tq_session_n_ctx(const tq_session *s);

/* tq_session_trim() -- drop the last n_drop tokens from the cache (n_drop <= n_past), so that
 * evaluation continues from n_past - n_drop. tq_session_reset() -- drop everything.
 * A sliding-window layer kept as a ring (swa_full 0) holds only its last slots tokens: a trim
 * that would need keys it no longer holds is refused (TQ_E_UNSUPPORTED, the session is left
 * as it was; reset and evaluate again). */
TQ_API tq_status tq_session_trim(tq_session *s, int64_t n_drop);
TQ_API void tq_session_reset(tq_session *s);

/* Memory of a session's KV cache, in real (packed) bytes. */
typedef struct tq_kv_usage {
    size_t bytes_per_token; /* K+V of one token over all layers and kv-heads             */
    size_t bytes_used;      /* bytes holding n_past tokens (n_past * bytes_per_token
                             * unless sliding-window layers keep only their window)     */
    size_t bytes_capacity;  /* what the cache holds allocated for n_ctx tokens           */
} tq_kv_usage;

/* tq_session_kv_bytes() -- the cache's memory in real bytes of its scheme. */
TQ_API tq_status tq_session_kv_bytes(const tq_session *s, tq_kv_usage *out);

#ifdef __cplusplus
}
#endif
#endif
