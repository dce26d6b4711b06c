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
 *     decoded (K with the codec, V to exact values C[idx] * scale un-rotated in double) and
 *     attended with a textbook two-pass softmax -- what the fused kernel is tested against.
 *
 * Numerics shared by both paths (why they give the SAME floats, not merely close ones): the
 * scores are s = scale * dot(q, k) with the ISA's float dot kernel on the same decoded keys
 * (bit-identical in both); everything after the scores -- exp, the sum of weights, the
 * weighted sum of values, the un-rotation, the division -- is done in double and rounded to
 * float once at the end. The two paths order those double operations differently (online vs
 * two-pass softmax, chunked vs sequential sums, rotated vs un-rotated accumulation), which moves
 * the result by ~1e-15 relative, far below half a float ulp, so the rounded outputs agree except
 * in rare near-tie elements. That matters for a quantized cache: a 1-ulp difference in one
 * layer's attention output can push an element of the NEXT layer's K or V across a
 * quantization boundary, and such flips cascade into different text (docs/results.md).
 * Selection: tq_kvc_turbo_set_attn() (the session option turbo_attn; default fused).
 *
 * Variants (own names, TQ_KV_FLAG_* in kv.h): "+rk" stores K Hadamard-rotated (tq_kv_rotate_ref
 * on each K row before the affine key encode) and rotates the query the same way at attention
 * time (orthonormal: q.k unchanged); "+e8" keeps the first and the last layer at turbo:k8v8.
 * Layers flagged "plain" (sliding-window layers) are stored bf16 (one warning at creation).
 *
 * Constant-key-block defect (SPEC A1/A3): a 32-group of a K row whose range is below fp16
 * resolution gets zero = +-inf in fp16 and would decode to NaN. append() encodes K with the
 * codec's safe option (TQ_KV_ENC_SAFE, kv.h: such a group is stored as every index = qmax,
 * zero_h = 0, scale_h = f16(mid / qmax), same byte format, decodes to mid). Logged once per
 * cache; counted in n_safe_blocks. */
#ifndef TQ_KVCACHE_TURBO_H
#define TQ_KVCACHE_TURBO_H

#include "cpu/attn_turbo.h"
#include "model/kvcache.h"

typedef struct tq_kvc_turbo {
    tq_kvcache base;       /* first member: a tq_kvcache * points here                    */
    tq_kv_scheme *ls;      /* [n_layers] codec scheme of each layer (flags 0; BF16 = plain) */
    size_t *k_rb, *v_rb;   /* [n_layers] row bytes                                        */
    int rot_k;             /* keys (and queries) rotated                                  */
    int attn_ref;          /* 1: dequantize-window reference attention                    */
    int64_t n_safe_blocks; /* constant-key blocks stored with the safe encoding           */
    float *qbuf;           /* (TQ_TURBO_QMAX * n_heads * head_dim) rotated queries         */
    double *part;          /* chunk partial states (m, l, acc[hd]) for decode, in double   */
    size_t part_doubles;
    size_t fused_bytes;    /* per-thread scratch of the fused kernel (a multiple of 64)    */
    unsigned char *fscratch; /* (n_threads, fused_bytes), see attn_turbo.c                */
    size_t ref_bytes;      /* per-thread scratch of the reference                          */
    unsigned char *rscratch; /* (n_threads, ref_bytes) or NULL                            */
} tq_kvc_turbo;

/* tq_kvcache_turbo_create() -- a turbo cache (scheme.kind == TQ_KV_TURBO) for n_ctx tokens.
 * plain_layers (NULL = none) marks layers kept unquantized (bf16). Errors as tq_kvcache_create. */
tq_status tq_kvcache_turbo_create(tq_kv_scheme scheme, int n_layers, int n_heads, int n_kv_heads,
                                  int head_dim, int64_t n_ctx, float scale, int n_threads,
                                  const uint8_t *plain_layers, tq_kvcache **out);

/* tq_kvc_turbo_set_attn() -- the attention path of a turbo cache (created fused): mode is a
 * tq_turbo_attn (model.h); REF and BOTH allocate the reference's scratch. TQ_E_ARG for another
 * value, TQ_E_NOMEM. A cache of another scheme is left alone (TQ_OK). */
tq_status tq_kvc_turbo_set_attn(tq_kvcache *c, int mode);

/* The two attention paths on one cache (tests compare them on the same bytes). The reference
 * needs tq_kvc_turbo_set_attn(REF or BOTH) first (else it returns TQ_E_UNSUPPORTED). */
void tq_kvc_turbo_attend_fused(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0,
                               float *out, tq_pool *pool);
tq_status tq_kvc_turbo_attend_ref(tq_kvcache *c, int il, const float *q, int64_t n_q,
                                  int64_t pos0, float *out, tq_pool *pool);

/* tq_kvc_turbo_layer_scheme() -- the codec scheme a layer is stored in. */
static inline tq_kv_scheme tq_kvc_turbo_layer_scheme(const tq_kvcache *c, int il)
{
    return ((const tq_kvc_turbo *)(const void *)c)->ls[il];
}

#endif /* TQ_KVCACHE_TURBO_H */
