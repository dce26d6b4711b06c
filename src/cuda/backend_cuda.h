/* backend_cuda.h -- the CUDA backend of the one forward (common/backend.h), for the GPU session
 * (src/model/session_cuda.c): a context owns one stream, a cuBLAS handle and the scratch of the
 * ops; every pointer given to the ops is device memory (tokens excepted: host ids). Weights are
 * dense bf16 (tq_be_mat.dtype TQ_DTYPE_BF16) or native: tq_be_mat.native = a host
 * tq_cuda_qmat (cuda/qgemv.h) viewing the packed rows on the device (Q8_0, Q4_0, Q4_1, Q4_K,
 * Q6_K, MLX affine). Decode (n = 1) products are fused GEMV kernels (the input transform --
 * RMSNorm, SiLU/GELU gate -- staged in shared memory, every output of a job in one launch, the
 * residual add folded in; native: tq_cuda_qgemv_job, the input quantized to q8 in shared memory);
 * prefill products are cuBLAS GEMMs over bf16 inputs (native: tq_cuda_qgemv over f32 rows).
 * Launches are not checked one by one (host time per step): tqc_be_status(), which the session
 * calls after each forward, reports the first failed launch or op since its last call.
 * Builds without CUDA (cuda_none.c): tqc_be_create() fails with TQ_E_UNSUPPORTED. */
#ifndef TQ_BACKEND_CUDA_H
#define TQ_BACKEND_CUDA_H

#include "common/backend.h"

typedef struct tqc_be tqc_be;

/* The ops table (valid only with a context from tqc_be_create()). */
extern const tq_backend tq_backend_cuda;

/* tqc_be_create() -- a context for products with up to max_n rows of up to max_cols columns,
 * attention with n_heads query heads and scale attn_scale. A prefill job whose outputs' weights
 * follow each other in memory (q|k|v, gate|up in one allocation) and have at most max_rows rows
 * together is one GEMM and one scatter kernel. */
tq_status tqc_be_create(int max_n, int64_t max_cols, int64_t max_rows, int n_heads,
                        float attn_scale, tqc_be **out);
void tqc_be_free(tqc_be *b);
/* device memory: alloc (counted in *bytes when not NULL), copy from/to the host on the
 * context's stream (download waits for it), free */
tq_status tqc_be_alloc(tqc_be *b, void **p, size_t n, size_t *bytes);
tq_status tqc_be_upload(tqc_be *b, void *dst, const void *src, size_t n);
tq_status tqc_be_download(tqc_be *b, void *dst, const void *src, size_t n);
void tqc_be_dfree(void *p);
/* wait for the stream; the first error of the ops since the last call (and clear it) */
tq_status tqc_be_sync(tqc_be *b);
tq_status tqc_be_status(tqc_be *b);
/* run the device cache's work on the context's stream (on = 0: back to its own) */
void tqc_be_bind_kv(tqc_be *b, tq_cuda_kv *c, int on);
/* device bytes of a cache's K/V rows */
size_t tqc_be_kv_bytes(const tq_cuda_kv *c);
/* 0: decode products through cuBLAS like prefill (for A/Bs), 1: fused GEMV kernels (default) */
void tqc_be_set_gemv(tqc_be *b, int on);
/* The inputs of the dense bf16 products: TQC_EXACT_KV (default): the K / V outputs of a job
 * (tq_be_mm.kv_first) take the f32 input (decode: f32 activations in the GEMV's shared memory;
 * prefill: the input split into bf16 hi + lo parts, W hi + W lo in two GEMMs), so a quantized
 * cache's codec sees the CPU's values up to f32 summation order (issue 16 item 6), the other
 * products bf16-rounded inputs; TQC_EXACT_NONE: every input rounded to bf16 (the forward before
 * 2026-12-03); TQC_EXACT_ALL: every dense product exact (drift measurements). Native (quantized)
 * products keep their q8 activations (the CPU's rule). */
enum { TQC_EXACT_KV = 0, TQC_EXACT_NONE = 1, TQC_EXACT_ALL = 2 };
/* 1 (default): a native single product of >= 16384 rows (a vocabulary head) decodes through the
 * wide quantized GEMV when it runs the view (tq_cuda_qgemv_wide); 0: through the decode job */
void tqc_be_set_wide_head(tqc_be *b, int on);
void tqc_be_set_exact(tqc_be *b, int mode);
/* Native (quantized) products of >= min_n tokens (default 9): the matrix dequantized to bf16 into
 * a scratch buffer, then cuBLAS; fewer tokens (and min_n 0: every count) through tq_cuda_qgemv */
void tqc_be_set_prefill_dq(tqc_be *b, int min_n);
/* 1 (default on sm_90+): the decode GEMVs start under the previous kernel (programmatic
 * dependent launch: weight rows prefetched into L2, then griddepcontrol.wait); 0: plain launches */
void tqc_be_set_pdl(tqc_be *b, int on);
/* A decode step as one CUDA graph: tqc_be_graph_begin() starts capturing the context's stream
 * (the ops then record instead of run); tqc_be_graph_end() ends the capture and, when launch is
 * 1 and the capture is valid, updates the context's executable graph in place with it
 * (cudaGraphExecUpdate: the same topology with the new position, token and splits; a changed
 * topology is instantiated anew) and launches it: 1. 0: nothing ran (capture invalidated by an op
 * that cannot be captured, e.g. a cache growing its workspace, or launch 0); the caller undoes
 * its host-side state and runs the step eagerly. Errors of the capture are cleared. */
tq_status tqc_be_graph_begin(tqc_be *b);
int tqc_be_graph_end(tqc_be *b, int launch);
/* An f32 KV cache inside the context (the evaluation path): n_layers x K/V x n_kv_heads x cap x
 * head_dim floats; from then on attend ignores the forward's tq_cuda_kv handles and appends to /
 * attends over these rows (causal, fp32; the cache's length is the forward's position). Refused
 * (TQ_E_UNSUPPORTED) when a row of cap scores does not fit the GPU's shared memory per block.
 * *bytes (may be NULL) = the cache's device bytes. */
tq_status tqc_be_kv_f32(tqc_be *b, int n_layers, int n_kv_heads, int head_dim, int64_t cap,
                        size_t *bytes);
/* Per device logits row r < rows (vocab floats each, at lg): lse[r] = log-sum-exp in double,
 * am[r] = first index of the largest logit, picked[r * k + j] = the logit of id ids[r * k + j]
 * (device arrays; NULL lse / am skip; k may be 0). Enqueued on the context's stream. */
tq_status tqc_be_row_stats(tqc_be *b, const float *lg, int rows, int vocab, const int32_t *ids,
                           int k, float *picked, double *lse, int32_t *am);
/* The device greedy sampler (tq_sampler_sample's greedy choice on the device, only the id
 * crosses the bus): up to TQC_GREEDY_MAX_PEN distinct ids whose logit the repetition penalty
 * changes (v > 0 ? v / penalty : v * penalty, after NaN -> -inf and +inf -> FLT_MAX, as
 * the CPU sampler's load()); passed by value, so a captured step graph carries its own list. */
#define TQC_GREEDY_MAX_PEN 64
typedef struct tqc_greedy_pen {
    int n;         /* ids in id[] (0: no penalty)                                          */
    float penalty; /* > 0                                                                  */
    int32_t id[TQC_GREEDY_MAX_PEN];
} tqc_greedy_pen;
/* tqc_be_greedy() -- enqueue: the first index of the largest key of the device row lg (vocab
 * floats; pen NULL or n 0: no penalty) into the context's result slot (-1: no finite key);
 * capturable (the scratch is allocated on the first call). tqc_be_greedy_fetch() -- wait for
 * the stream and copy that slot (4 bytes) to *tok. */
tq_status tqc_be_greedy(tqc_be *b, const float *lg, int vocab, const tqc_greedy_pen *pen);
tq_status tqc_be_greedy_fetch(tqc_be *b, int32_t *tok);
/* instantiations and in-place updates of the step graph so far */
void tqc_be_graph_counts(const tqc_be *b, long *inst, long *update);

#endif
