/* kvcache.h -- the KV cache of a session (internal): owns K/V storage per layer and serves
 * attention, so that every scheme (f32, f16, bf16, kv8, kv4 now; the TurboQuant cache next)
 * decides itself how attention reads its bytes. The forward pass never touches K/V storage:
 * it appends the new tokens' K/V rows, then asks the cache to attend, in prefill and in decode.
 *
 * Storage per layer: K and V each (n_kv_heads, n_ctx, row_bytes), head-major, so one kv-head's
 * rows are contiguous and one dequantization serves every query head of its GQA group. Rows are
 * in the scheme's byte format (kv.h, docs/FORMAT.md "KV rows"); f32/f16/bf16 rows are plain.
 *
 * A scheme is a tq_kvc_ops vtable: append() encodes only the new rows; attend() computes causal
 * softmax attention for a block of queries. Plain schemes read rows directly; codec schemes
 * (kv8, kv4) decode the window of each kv-head once into per-thread scratch and attend in f32
 * ("dequantize-window"). A fused scheme (turbo: K dequantized inside q.k, V accumulated in the
 * rotated domain) plugs in as one more ops table with no change to the forward pass.
 */
#ifndef TQ_KVCACHE_H
#define TQ_KVCACHE_H

#include "core/core.h"

typedef struct tq_kvcache tq_kvcache;

typedef struct tq_kvc_ops {
    const char *name;
    /* append() -- store K/V of n tokens at positions [pos, pos + n) of layer il. k and v have
     * shape (n, n_kv_heads * head_dim), f32. No allocation. */
    tq_status (*append)(tq_kvcache *c, int il, int64_t pos, const float *k, const float *v,
                        int64_t n);
    /* attend() -- out(n_q, n_heads * head_dim) = softmax(scale * q k^T) v for queries at
     * positions [pos0, pos0 + n_q); query i sees keys [0, pos0 + i] (causal). The rows must have
     * been appended. Runs on pool; deterministic for any thread count; no allocation. */
    void (*attend)(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0, float *out,
                   tq_pool *pool);
    /* Optional (NULL = the generic code below): destroy() frees a cache of this ops table;
     * token_bytes() its real bytes per token (schemes whose layers differ, e.g. turbo +e8). */
    void (*destroy)(tq_kvcache *c);
    size_t (*token_bytes)(const tq_kvcache *c);
} tq_kvc_ops;

struct tq_kvcache {
    const tq_kvc_ops *ops;
    tq_kv_scheme scheme;
    int n_layers;
    int n_heads;           /* query heads                                                */
    int n_kv_heads;        /* kv heads; group = n_heads / n_kv_heads                      */
    int head_dim;
    int64_t n_ctx;         /* capacity in tokens                                         */
    float scale;           /* attention scale (1/sqrt(head_dim) unless the model says)   */
    size_t k_row_bytes;    /* one (token, kv-head) K row in the scheme's format          */
    size_t v_row_bytes;
    uint8_t **k;           /* [n_layers] -> (n_kv_heads, n_ctx, k_row_bytes)             */
    uint8_t **v;           /* [n_layers] -> (n_kv_heads, n_ctx, v_row_bytes)             */
    int n_threads;         /* threads the scratch is sized for                           */
    size_t scratch_floats; /* per thread                                                 */
    float *scratch;        /* (n_threads, scratch_floats): scores + decoded window       */
    const int *window;     /* [n_layers] sliding attention window in tokens (query p sees
                            * keys (p - window, p]), 0 = unlimited; NULL = all unlimited.
                            * Borrowed from the session; every attend() must honour it.  */
};

/* tq_kvcache_create() -- allocate a cache for n_ctx tokens. Errors: TQ_E_UNSUPPORTED naming the
 * scheme and the valid ones (scheme not usable at this head_dim), TQ_E_NOMEM, TQ_E_ARG. */
tq_status tq_kvcache_create(tq_kv_scheme scheme, int n_layers, int n_heads, int n_kv_heads,
                            int head_dim, int64_t n_ctx, float scale, int n_threads,
                            tq_kvcache **out);
/* tq_kvcache_window_create() -- the generic dequantize-window cache for any scheme it supports
 * (f32/f16/bf16/kv8/kv4 and, as the reference of the fused rot: cache, rot:); what
 * tq_kvcache_create() gives for the non-fused schemes. */
tq_status tq_kvcache_window_create(tq_kv_scheme scheme, int n_layers, int n_heads, int n_kv_heads,
                                   int head_dim, int64_t n_ctx, float scale, int n_threads,
                                   tq_kvcache **out);
/* tq_kvcache_rot_create() -- the rot: cache with fused attention (kvcache_rot.c); what
 * tq_kvcache_create() gives for TQ_KV_ROT. */
tq_status tq_kvcache_rot_create(tq_kv_scheme scheme, int n_layers, int n_heads, int n_kv_heads,
                                int head_dim, int64_t n_ctx, float scale, int n_threads,
                                tq_kvcache **out);
void tq_kvcache_free(tq_kvcache *c);

/* The loops every cache shares (written once here). A row of token t, kv-head g of layer il is
 * at k[il] + (g * n_ctx + t) * k_rb (likewise v). tq_kvc_append_rows() calls put() for the K
 * and V rows of each of the n tokens at pos.. and each kv-head (k, v: (n, n_kv_heads,
 * head_dim) floats) and stops at the first error. tq_kvc_free_rows() frees every layer's K/V
 * storage and the two arrays (each may be NULL). */
typedef tq_status (*tq_kvc_put_fn)(tq_kvcache *c, int il, const float *k, const float *v,
                                   uint8_t *kd, uint8_t *vd, void *ctx);
tq_status tq_kvc_append_rows(tq_kvcache *c, int il, int64_t pos, const float *k, const float *v,
                             int64_t n, size_t k_rb, size_t v_rb, tq_kvc_put_fn put, void *ctx);
void tq_kvc_free_rows(tq_kvcache *c);
/* tq_kvcache_token_bytes() -- real bytes of one token's K+V over all layers and kv-heads. */
size_t tq_kvcache_token_bytes(const tq_kvcache *c);
/* tq_kvcache_capacity_bytes() -- bytes of K/V storage allocated. */
size_t tq_kvcache_capacity_bytes(const tq_kvcache *c);

#endif /* TQ_KVCACHE_H */
