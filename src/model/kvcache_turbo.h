/* kvcache_turbo.h -- the TurboQuant KV cache of the engine (internal): one more tq_kvc_ops table
 * behind the cache interface of kvcache.h.
 *
 * Storage stays packed: K and V rows of every layer are the codec's bytes (kv.h, docs/FORMAT.md
 * "KV rows"), head-major like the other schemes. append() encodes only the new rows. attend()
 * runs either
 *   - the fused kernel (src/cpu/attn_turbo.c, the default): per kv-head and block of 32 keys the
 *     packed K rows are dequantized in L1 inside the Q.K loop, V rows are decoded only to the
 *     rotated domain (C[idx] * scale) and accumulated there with an online softmax; the inverse
 *     FWHT runs once per query row at the end (deferred; exact by linearity); each kv-head block
 *     is decoded once for every query head of its GQA group; or
 *   - the dequantize-window reference (kvcache_turbo.c): the whole window of each kv-head is
 *     decoded with the codec and attended in f32 -- what the fused kernel is tested against.
 * Selection: TQ_TURBO_ATTN=ref|fused in the environment at cache creation (default fused).
 *
 * Variants (own names, TQ_KV_FLAG_* in kv.h): "+rk" stores K Hadamard-rotated (tq_kv_rotate_ref
 * on each K row before the affine key encode) and rotates the query the same way at attention
 * time (orthonormal: q.k unchanged); "+e8" keeps the first and the last layer at turbo:k8v8.
 * Layers flagged "plain" (sliding-window layers) are stored bf16 (one warning at creation).
 *
 * Constant-key-block defect (SPEC A1/A3): a 32-group of a K row whose range is below fp16
 * resolution gets zero = +-inf in fp16 and would decode to NaN. append() detects it (the fp16
 * zero is not finite while the group's input is) and stores that group with a safe encoding in
 * the same byte format: every index = qmax (127 signed, 2^b - 1 unsigned), zero_h = 0,
 * scale_h = f16(mid / qmax) with mid = (min + max) / 2 -- it decodes to mid within fp16
 * rounding. Logged once per cache; counted in n_safe_blocks. */
#ifndef TQ_KVCACHE_TURBO_H
#define TQ_KVCACHE_TURBO_H

#include "model/kvcache.h"

#define TQ_TURBO_KB 32   /* keys per block in the fused kernel                            */
#define TQ_TURBO_QB 32   /* queries per unit in prefill                                   */
#define TQ_TURBO_QMAX 256 /* queries per attend slice (rotated-query buffer)              */
#define TQ_TURBO_KC 256  /* keys per chunk when decoding (n_q <= TQ_TURBO_QD)             */
#define TQ_TURBO_QD 4

typedef struct tq_kvc_turbo {
    tq_kvcache base;       /* first member: a tq_kvcache * points here                    */
    tq_kv_scheme *ls;      /* [n_layers] codec scheme of each layer (flags 0; BF16 = plain) */
    size_t *k_rb, *v_rb;   /* [n_layers] row bytes                                        */
    int rot_k;             /* keys (and queries) rotated                                  */
    int attn_ref;          /* 1: dequantize-window reference attention                    */
    int64_t n_safe_blocks; /* constant-key blocks stored with the safe encoding           */
    float *qbuf;           /* (TQ_TURBO_QMAX * n_heads * head_dim) rotated queries         */
    float *part;           /* chunk partial states (m, l, acc[hd]) for decode              */
    size_t part_floats;
    size_t fused_floats;   /* per-thread scratch of the fused kernel                      */
    float *fscratch;       /* (n_threads, fused_floats)                                   */
    float *rscratch;       /* (n_threads, base.scratch_floats) reference scratch or NULL  */
} tq_kvc_turbo;

/* tq_kvcache_turbo_create() -- a turbo cache (scheme.kind == TQ_KV_TURBO) for n_ctx tokens.
 * plain_layers (NULL = none) marks layers kept unquantized (bf16). Errors as tq_kvcache_create. */
tq_status tq_kvcache_turbo_create(tq_kv_scheme scheme, int n_layers, int n_heads, int n_kv_heads,
                                  int head_dim, int64_t n_ctx, float scale, int n_threads,
                                  const uint8_t *plain_layers, tq_kvcache **out);

/* The two attention paths on one cache (tests compare them on the same bytes). The reference
 * needs the cache created with TQ_TURBO_ATTN=ref or =both (else it returns TQ_E_UNSUPPORTED). */
void tq_kvc_turbo_attend_fused(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0,
                               float *out, tq_pool *pool);
tq_status tq_kvc_turbo_attend_ref(tq_kvcache *c, int il, const float *q, int64_t n_q,
                                  int64_t pos0, float *out, tq_pool *pool);

/* tq_kvc_turbo_layer_scheme() -- the codec scheme a layer is stored in. */
static inline tq_kv_scheme tq_kvc_turbo_layer_scheme(const tq_kvcache *c, int il)
{
    return ((const tq_kvc_turbo *)(const void *)c)->ls[il];
}

/* attn_turbo kernels (src/cpu/attn_turbo*.c): dot and axpy of n floats, dispatched by ISA. */
typedef struct tq_attn_kernels {
    float (*dot)(const float *a, const float *b, int n);
    void (*axpy)(float a, const float *x, float *y, int n); /* y += a * x */
    void (*scal)(float a, float *y, int n);                 /* y *= a     */
    /* one turbo V row to the rotated domain: out[j] = C[idx_j] * scale_h[j / 32] (exact; every
     * ISA gives the same floats) */
    void (*dec_v_rot)(const uint8_t *row, int d, int vb, float *out);
    /* one query head against a block of nv <= TQ_TURBO_KB decoded keys/values: scores
     * sc[k] = scale * q . K[k], then the online-softmax update of S = [m, l, acc[hd]] with
     * the rotated values V[k] (see attn_turbo.c) */
    void (*block)(const float *q, const float *K, const float *V, int nv, int hd, float scale,
                  float *S, float *sc);
} tq_attn_kernels;
/* tq_attn_dec_v_rot_scalar() -- the scalar specification of dec_v_rot. */
void tq_attn_dec_v_rot_scalar(const uint8_t *row, int d, int vb, float *out);
const tq_attn_kernels *tq_attn_kernels_pick(void);
extern const tq_attn_kernels tq_attn_kernels_avx512;

#endif /* TQ_KVCACHE_TURBO_H */
