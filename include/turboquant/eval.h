/* turboquant/eval.h -- quality instruments on a real model: perplexity and teacher-forced KL
 * between KV-cache schemes (SPEC A4). Included by turboquant.h only.
 *
 * Windows follow llama.cpp's perplexity: the token stream is cut into non-overlapping windows
 * of ctx tokens; the first token of each window is replaced by bos when bos >= 0 (pass the
 * BOS id when the tokenizer adds one, tq_tokenizer_add_bos(), else -1);
 * every window is evaluated in a fresh cache; positions i in [ctx/2, ctx - 1) are scored, each
 * predicting token i + 1 (ctx/2 - 1 scored tokens per window).
 */
#ifndef TURBOQUANT_EVAL_H
#define TURBOQUANT_EVAL_H
#ifdef __cplusplus
extern "C" {
#endif

/* Progress callback: called after each window (done of total windows). May be NULL. */
typedef void (*tq_eval_progress_fn)(void *user, int64_t done, int64_t total);

typedef struct tq_ppl_result {
    double ppl;        /* exp(mean negative log-likelihood)                         */
    double nll;        /* mean negative log-likelihood (nats)                       */
    int64_t n_scored;  /* scored tokens                                             */
    int64_t n_windows; /* windows evaluated                                         */
    double seconds;    /* wall time                                                 */
} tq_ppl_result;

/* tq_eval_ppl() -- perplexity of tokens (n_tokens) through a cache of scheme kv, in windows of
 * ctx tokens (ctx >= 4, even); max_windows <= 0 = every whole window. Errors: TQ_E_ARG (fewer
 * tokens than one window, bad ctx), errors of tq_session_create / tq_session_eval_all. */
TQ_API tq_status tq_eval_ppl(tq_model *model, const int32_t *tokens, int64_t n_tokens,
                             int32_t bos, tq_kv_scheme kv, int ctx, int64_t max_windows,
                             tq_eval_progress_fn progress, void *user, tq_ppl_result *out);

/* tq_eval_ppl_dev() -- tq_eval_ppl() on the CPU (cuda 0) or through GPU sessions (cuda = N >= 1:
 * N x tq_cuda_session_create(model, kv, ctx), each its own stream and weight copy, taking the
 * windows round-robin from N threads so that one window's small kernels overlap another's; each
 * window one prefill, each scored row's log-sum-exp and next-token logit computed on the device;
 * the per-position terms are summed in window order, so N does not change the result). Same
 * windows, positions and result as the CPU up to f32 summation order. */
TQ_API tq_status tq_eval_ppl_dev(tq_model *model, const int32_t *tokens, int64_t n_tokens,
                                 int32_t bos, tq_kv_scheme kv, int ctx, int64_t max_windows,
                                 int cuda, tq_eval_progress_fn progress, void *user,
                                 tq_ppl_result *out);

/* Statistics of KL(teacher || student) over every scored position. */
typedef struct tq_kl_stats {
    double mean, median, p95, p99, max; /* nats                                            */
    double top1;     /* fraction of positions where argmax(student) == argmax(teacher)    */
    double ppl;      /* the student's perplexity on the scored positions                  */
    int64_t n;       /* scored positions                                                  */
    size_t kv_bytes_per_token; /* real packed bytes of K+V of one token, all layers       */
} tq_kl_stats;

/* tq_eval_kl() -- teacher-forced KL: each window goes through a cache of scheme teacher and
 * through a cache of each student scheme (the same tokens); at every scored position the KL
 * divergence of the student's next-token distribution from the teacher's is computed over the
 * full vocabulary (double accumulation). out[n_students] receives the statistics per student;
 * teacher_out (may be NULL) the teacher's own (KL 0, its ppl and bytes). */
TQ_API tq_status tq_eval_kl(tq_model *model, const int32_t *tokens, int64_t n_tokens,
                            int32_t bos, tq_kv_scheme teacher, const tq_kv_scheme *students, int n_students,
                            int ctx, int64_t max_windows, tq_eval_progress_fn progress,
                            void *user, tq_kl_stats *out, tq_kl_stats *teacher_out);

/* ---- Teacher logits dumps (docs/FORMAT.md "Teacher logits dump"; src/model/teacher.c) ------ *
 * tq_teacher_write() evaluates a teacher model over the windows of tq_eval_kl (same windows,
 * same scored positions) and stores, per scored position, the K largest logits with their token
 * ids and the full-vocabulary log-sum-exp; tq_eval_kl_teacher() scores any candidate (other
 * weights, another KV scheme, or both) against such a file without running the teacher again.
 * KL per position is taken over the teacher's top-K tokens plus one bucket for all the others:
 * KL(teacher || candidate) of the distributions merged that way, which is <= the full-vocabulary
 * KL and equal to it when the teacher puts no mass outside its top K (mean tail mass reported). */

typedef struct tq_teacher_opts {
    int ctx;              /* window length, even >= 4 (default 512)                         */
    int64_t max_windows;  /* windows to evaluate; <= 0 = every whole window (default 0)     */
    int top_k;            /* logits kept per position, >= 1; clamped to the vocab (2048)    */
    tq_kv_scheme kv;      /* the teacher's KV cache (default f32)                           */
    uint64_t text_hash;   /* tq_text_hash() of the text the tokens came from (stored)       */
    uint64_t tokenizer_fp;/* tq_tokenizer_fingerprint() of the tokenizer that made them     */
    int cuda;             /* 1: evaluate through a GPU session (tq_cuda_session; default 0) */
} tq_teacher_opts;

TQ_API void tq_teacher_opts_default(tq_teacher_opts *o);

/* What a dump's header says, plus the teacher's numbers (tq_teacher_info_read() computes
 * them from the records). */
typedef struct tq_teacher_info {
    int vocab, top_k, ctx, bos;       /* bos -1 = none                                   */
    int64_t n_windows, n_scored;      /* windows; scored positions in all                */
    uint64_t model_fp;                /* tq_model_fingerprint() of the teacher          */
    uint64_t text_hash, tokenizer_fp;
    char kv[32];                      /* the teacher's KV scheme name                   */
    double ppl;                       /* the teacher's perplexity on the scored positions */
    double tail_mean, tail_max;       /* teacher probability outside the top K           */
    uint64_t file_bytes;
} tq_teacher_info;

/* tq_text_hash() -- XXH3-64 of n bytes (the text hash of a dump). */
TQ_API uint64_t tq_text_hash(const void *bytes, size_t n);

/* tq_tokenizer_fingerprint() -- XXH3-64 over the vocabulary size, BOS/EOS ids, add-BOS flag and
 * every token's piece bytes: two tokenizers with the same fingerprint map ids to the same text. */
TQ_API uint64_t tq_tokenizer_fingerprint(const tq_tokenizer *t);

/* tq_teacher_write() -- evaluate model (the teacher) on the windows of tokens (bos as in
 * tq_eval_kl) through a cache of o->kv and write the dump to path atomically (tq_atomic_file:
 * a failed or interrupted write leaves any earlier file whole). info (may be NULL) receives the
 * header and the teacher's ppl. Errors: TQ_E_ARG (bad options, fewer tokens than a window),
 * TQ_E_IO, TQ_E_NOMEM, errors of the session. */
TQ_API tq_status tq_teacher_write(tq_model *model, const int32_t *tokens, int64_t n_tokens,
                                  int32_t bos, const tq_teacher_opts *o, const char *path,
                                  tq_eval_progress_fn progress, void *user,
                                  tq_teacher_info *info);

/* tq_teacher_info_read() -- read and check a whole dump (magic, version, sizes against the file
 * length, checksum) and fill info. Refused (TQ_E_FORMAT / TQ_E_IO, naming the file): another
 * format, a truncated or over-long file, a checksum mismatch. */
TQ_API tq_status tq_teacher_info_read(const char *path, tq_teacher_info *info);

/* tq_eval_kl_teacher() -- score model through one cache per scheme in students against the dump
 * at path: out[k] as tq_eval_kl (KL over top-K + tail bucket, top-1 = candidate argmax equals
 * the teacher's, ppl of the candidate over the full vocabulary). Refused before any evaluation
 * a dump that fails tq_teacher_info_read() (TQ_E_IO / TQ_E_FORMAT); TQ_E_MISMATCH: text_hash != 0
 * and not the dump's ("made from another text"); tokenizer_fp not the dump's (another
 * tokenizer: the ids would name other tokens); a model vocabulary other than the dump's.
 * info (may be NULL) receives the dump's header. */
TQ_API tq_status tq_eval_kl_teacher(tq_model *model, const char *path, uint64_t text_hash,
                                    uint64_t tokenizer_fp, const tq_kv_scheme *students,
                                    int n_students, tq_eval_progress_fn progress, void *user,
                                    tq_kl_stats *out, tq_teacher_info *info);

/* tq_eval_kl_teacher_dev() -- tq_eval_kl_teacher() on the CPU (cuda 0) or through one GPU
 * session per scheme (cuda 1: each row's log-sum-exp, argmax and the logits of the teacher's
 * top-K ids and the next token computed on the device). Same positions and statistics. */
TQ_API tq_status tq_eval_kl_teacher_dev(tq_model *model, const char *path, uint64_t text_hash,
                                        uint64_t tokenizer_fp, const tq_kv_scheme *students,
                                        int n_students, int cuda, tq_eval_progress_fn progress,
                                        void *user, tq_kl_stats *out, tq_teacher_info *info);

/* ---- KV cache snapshots (docs/FORMAT.md "KV cache snapshot") ------------------------------- */

/* tq_session_save() -- write the session's cache (its n_past tokens, packed bytes as stored)
 * and the token ids that produced it (tokens, n_tokens == n_past; may be NULL/0 when unknown)
 * to path, atomically (temp file in the same directory, fsync, rename). Errors: TQ_E_IO. */
TQ_API tq_status tq_session_save(const tq_session *s, const int32_t *tokens, int64_t n_tokens,
                                 const char *path);

/* tq_session_load() -- restore a snapshot into s (replacing its cache content and n_past).
 * tokens (cap tokens_cap) receives the stored token ids and *n_tokens their count (tokens may
 * be NULL). Refused, with the session untouched: another scheme ("snapshot is turbo-k8v3, this
 * session is kv8"), another model (fingerprint or shape), more tokens than n_ctx, a truncated
 * or corrupted file (bad magic, version, size or checksum): TQ_E_FORMAT / TQ_E_UNSUPPORTED /
 * TQ_E_OVERFLOW / TQ_E_IO with the path and the reason. */
TQ_API tq_status tq_session_load(tq_session *s, const char *path, int32_t *tokens,
                                 int64_t tokens_cap, int64_t *n_tokens);

/* tq_model_fingerprint() -- 64-bit fingerprint of a model's shape and weights (hash of the
 * shapes, weight dtype and the XXH3-128 of every weight tensor's bytes; computed on first use,
 * then cached in the model). */
TQ_API uint64_t tq_model_fingerprint(const tq_model *model);

#ifdef __cplusplus
}
#endif
#endif
