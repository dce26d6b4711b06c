/* attn_turbo.h -- fused attention over packed TurboQuant K/V rows (src/cpu/attn_turbo*.c)
 * (internal). The kernels see a plain view of one layer (tq_attn_turbo_view: pointers, row
 * bytes, sizes, the layer's scheme and the caller's scratch), never the engine's cache struct;
 * src/model/kvcache_turbo.c fills the view (model/kvcache_turbo.h describes the algorithm and
 * the numerics shared with the dequantize-window reference). Sees only core/ and common/. */
#ifndef TQ_ATTN_TURBO_H
#define TQ_ATTN_TURBO_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#define TQ_TURBO_KB 32   /* keys per block in the fused kernel                            */
#define TQ_TURBO_QB 32   /* queries per unit in prefill                                   */
#define TQ_TURBO_QMAX 256 /* queries per attend slice (rotated-query buffer)              */
#define TQ_TURBO_KC 256  /* keys per chunk when decoding (n_q <= TQ_TURBO_QD)             */
#define TQ_TURBO_QD 4

/* Per-thread scratch of the fused kernel, each part 64-byte aligned: the decoded K block
 * (TQ_TURBO_KB x hd floats), the block's scores (TQ_TURBO_KB floats), the decoded V block
 * (TQ_TURBO_KB x hd doubles), the block's weights (TQ_TURBO_KB doubles), the states of one
 * query block in the current key chunk and merged over the chunks so far (twice
 * TQ_TURBO_QB x group x (hd + 2) doubles). tq_turbo_fscratch_at(NULL, ...) gives the size in
 * bytes. */
typedef struct tq_turbo_fscratch {
    float *kdec, *sc;
    double *vdec, *p, *st, *acc;
} tq_turbo_fscratch;

/* tq_turbo_carve() -- lay n parts of sz[i] bytes out from base, each 64-byte aligned; ptr[i]
 * gets each part's address (NULL when base is NULL). Returns the bytes of the whole. */
static inline size_t tq_turbo_carve(unsigned char *base, const size_t *sz, void **ptr, int n)
{
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        ptr[i] = base ? base + off : NULL;
        off += (sz[i] + 63) & ~(size_t)63;
    }
    return off;
}

static inline size_t tq_turbo_fscratch_at(unsigned char *base, int hd, int group,
                                          tq_turbo_fscratch *o)
{
    const size_t st = (size_t)TQ_TURBO_QB * group * ((size_t)hd + 2) * sizeof(double);
    const size_t sz[6] = {(size_t)TQ_TURBO_KB * hd * sizeof(float), TQ_TURBO_KB * sizeof(float),
                          (size_t)TQ_TURBO_KB * hd * sizeof(double), TQ_TURBO_KB * sizeof(double),
                          st, st};
    void *ptr[6];
    const size_t bytes = tq_turbo_carve(base, sz, ptr, 6);
    if (o)
        *o = (tq_turbo_fscratch){ptr[0], ptr[1], ptr[2], ptr[3], ptr[4], ptr[5]};
    return bytes;
}

/* One layer of a turbo cache as the fused kernel reads it. Row of position t of kv-head g:
 * k + (g * n_ctx + t % n_ctx) * k_rb (likewise v): n_ctx is the rows per kv-head, every
 * position held (n_ctx >= positions) or, for a sliding-window layer kept as a ring buffer, a
 * multiple of TQ_TURBO_KB. A layer whose scheme is TQ_KV_BF16 holds plain bf16 rows (no
 * rotation). */
typedef struct tq_attn_turbo_view {
    const uint8_t *k, *v;  /* the layer's K and V storage (n_kv_heads, n_ctx, row bytes)     */
    size_t k_rb, v_rb;     /* row bytes                                                     */
    int64_t n_ctx;         /* rows per kv-head (ring slots for a sliding layer)             */
    int head_dim, n_heads, n_kv_heads;
    float scale;           /* softmax scale                                                 */
    int64_t window;        /* sliding window (query p sees keys (p - window, p]), 0 = none  */
    tq_kv_scheme s;        /* the layer's scheme (TQ_KV_TURBO or TQ_KV_BF16)                */
    int rot_k;             /* keys stored Hadamard-rotated: rotate the queries the same way */
    int n_threads;         /* threads of the pool (1: run on the caller's thread)           */
    float *qbuf;           /* (TQ_TURBO_QMAX * n_heads * head_dim) rotated queries           */
    double *part;          /* chunk partial states for decode (see tq_kvcache_turbo_create)  */
    size_t fused_bytes;    /* per-thread scratch bytes, tq_turbo_fscratch_at(NULL, ...)      */
    unsigned char *fscratch; /* (n_threads, fused_bytes)                                     */
} tq_attn_turbo_view;

/* tq_attn_turbo_fused() -- out(n_q, n_heads * head_dim) = softmax(scale * q k^T) v for n_q
 * queries at positions pos0.. (causal, sliding window), over the view's packed rows. No
 * allocation. */
void tq_attn_turbo_fused(const tq_attn_turbo_view *v, const float *q, int64_t n_q, int64_t pos0,
                         float *out, tq_pool *pool);

/* attn_turbo kernels (src/cpu/attn_turbo*.c), dispatched by ISA. */
typedef struct tq_attn_kernels {
    /* the float dot product of the scores (both attention paths use the same one) */
    float (*dot)(const float *a, const float *b, int n);
    /* one turbo V row to the rotated domain: out[j] = C[idx_j] * scale_h[j / 32], the float
     * product widened to double (every ISA gives the same values) */
    void (*dec_v_rot)(const uint8_t *row, int d, int vb, double *out);
    /* one query head against a block of nv <= TQ_TURBO_KB decoded keys/values: float scores
     * sc[k] = scale * dot(q, K[k]), then the online-softmax update, in double, of
     * S = [m, l, acc[hd]] with weights p[k] = e^(sc[k] - m) (p: nv doubles of scratch) and the
     * rotated values V[k] (see attn_turbo.c) */
    void (*block)(const float *q, const float *K, const double *V, int nv, int hd, float scale,
                  double *S, float *sc, double *p);
    /* optional (NULL: the codec's kernel of this ISA): n turbo K rows (kb bits) to floats, the
     * codec's exact values -- the reference decodes with the codec, so they must agree */
    void (*dec_k)(const uint8_t *src, int64_t n, int d, int kb, float *out);
} tq_attn_kernels;
/* tq_attn_dec_v_rot_scalar() -- the scalar specification of dec_v_rot. */
void tq_attn_dec_v_rot_scalar(const uint8_t *row, int d, int vb, double *out);
const tq_attn_kernels *tq_attn_kernels_pick(void);
extern const tq_attn_kernels tq_attn_kernels_scalar;
extern const tq_attn_kernels tq_attn_kernels_avx512;
extern const tq_attn_kernels tq_attn_kernels_avx2;

#endif /* TQ_ATTN_TURBO_H */
