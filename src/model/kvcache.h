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

/* one sequence's part of a batched step (tq_kvcache_attend_batch): append k, v (n, n_kv_heads *
 * head_dim) at positions [pos, pos + n) of its cache c, then out(n, n_heads * head_dim) = the
 * attention of q (n, n_heads * head_dim) */
typedef struct tq_kvc_item {
    tq_kvcache *c;
    int64_t pos, n;
    const float *k, *v, *q;
    float *out;
} tq_kvc_item;

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
    /* Optional (NULL = append() then attend() per item): batch() -- the append and attention
     * of n items of layer il, each on its own cache of this ops table (distinct caches), in one
     * go (work of all the items spread over pool); every item's floats and bytes equal its
     * append() + attend() alone. Errors as append(). */
    tq_status (*batch)(const tq_kvc_item *it, int n, int il, tq_pool *pool);
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
    /* Ring buffers (tq_kvcache_set_window): a sliding-window layer keeps only slots[il] rows
     * per kv-head; the row of position t sits in slot t % slots[il]. NULL = every layer keeps
     * n_ctx rows (slot = position). ring_lo[il]: the lowest position whose row is still held
     * (positions [ring_lo, n_past) are). unwrap: per-thread raw rows for a window that wraps
     * (the dequantize-window attention reads one contiguous run). */
    int64_t *slots;        /* [n_layers] or NULL                                          */
    int64_t *ring_lo;      /* [n_layers] or NULL                                          */
    unsigned char *unwrap; /* (n_threads, unwrap_bytes) or NULL                            */
    size_t unwrap_bytes;
};

/* rows per kv-head of layer il (n_ctx unless the layer is a ring) */
static inline int64_t tq_kvc_slots(const tq_kvcache *c, int il)
{
    return c->slots ? c->slots[il] : c->n_ctx;
}
/* 1 when layer il keeps only its window (a ring of fewer than n_ctx rows) */
static inline int tq_kvc_is_ring(const tq_kvcache *c, int il)
{
    return c->slots && c->slots[il] < c->n_ctx;
}

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

/* tq_kvcache_set_window() -- borrow the per-layer sliding windows (c->window; NULL = none) and,
 * unless keep_all, keep only the window of each sliding layer: its storage becomes a ring of
 * slots = round_up(window + n_batch, TQ_KVC_RING_ALIGN) rows per kv-head when that is fewer
 * than n_ctx (a prefill chunk of up to n_batch tokens never overwrites a key its first query
 * needs). Every scheme: the rows keep the scheme's format; attention reads them by slot.
 * Call once, right after creation, before any append. TQ_E_NOMEM. */
#define TQ_KVC_RING_ALIGN 256
tq_status tq_kvcache_set_window(tq_kvcache *c, const int *window, int n_batch, int keep_all);
/* tq_kvcache_resume_check() -- TQ_OK when the cache can continue at position n_past (after a
 * trim): every ring layer still holds the keys the next token sees (positions
 * [n_past - window + 1, n_past)). Else TQ_E_UNSUPPORTED with a message naming the layer, the
 * oldest position held and the fix (trim less, or reset and evaluate the prompt again). */
tq_status tq_kvcache_resume_check(const tq_kvcache *c, int64_t n_past);
/* tq_kvcache_layer_rb() -- K and V row bytes of layer il (schemes whose layers differ: turbo) */
void tq_kvcache_layer_rb(const tq_kvcache *c, int il, size_t *k_rb, size_t *v_rb);

/* The loops every cache shares (written once here). A row of token t, kv-head g of layer il is
 * at k[il] + (g * slots + t % slots) * k_rb (likewise v; slots = tq_kvc_slots()).
 * tq_kvc_append_rows() checks a ring layer can take the rows (the keys the first new token
 * sees are still held; the chunk fits the ring), calls put() for the K and V rows of each of
 * the n tokens at pos.. and each kv-head (k, v: (n, n_kv_heads, head_dim) floats) and stops at
 * the first error. tq_kvc_free_rows() frees every layer's K/V storage, the two arrays (each may
 * be NULL) and the ring bookkeeping. */
typedef tq_status (*tq_kvc_put_fn)(tq_kvcache *c, int il, const float *k, const float *v,
                                   uint8_t *kd, uint8_t *vd, void *ctx);
tq_status tq_kvc_append_rows(tq_kvcache *c, int il, int64_t pos, const float *k, const float *v,
                             int64_t n, size_t k_rb, size_t v_rb, tq_kvc_put_fn put, void *ctx);
/* tq_kvc_append_check() -- the ring checks and bookkeeping of tq_kvc_append_rows() alone (for
 * a cache that writes the rows itself afterwards, at k[il] + (g * slots + t % slots) * k_rb) */
tq_status tq_kvc_append_check(tq_kvcache *c, int il, int64_t pos, int64_t n);
/* tq_kvcache_attend_batch() -- append + attend the n items (distinct caches) of layer il: the
 * items whose caches have a batch() op go through it together (grouped by ops table), the
 * others one by one. Stops at the first error. */
tq_status tq_kvcache_attend_batch(const tq_kvc_item *it, int n, int il, tq_pool *pool);
void tq_kvc_free_rows(tq_kvcache *c);
/* tq_kvcache_token_bytes() -- real bytes of one token's K+V over all layers and kv-heads. */
size_t tq_kvcache_token_bytes(const tq_kvcache *c);
/* tq_kvcache_capacity_bytes() -- bytes of K/V storage allocated. */
size_t tq_kvcache_capacity_bytes(const tq_kvcache *c);
/* tq_kvcache_bytes_at() -- bytes of K/V held for n tokens (a ring layer holds at most its
 * slots: a sliding layer costs its window, not n). */
size_t tq_kvcache_bytes_at(const tq_kvcache *c, int64_t n);

#endif /* TQ_KVCACHE_H */
