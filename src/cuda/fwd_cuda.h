/* fwd_cuda.h -- internal interface between the GPU session's C front (fwd_session.c, which reads
 * the CPU engine's loaded tq_model) and its CUDA back (fwd.cu, which uploads and runs it).
 * Plain C, also included from C++. Host pointers; bf16 matrices are (out, in) row-major. */
#ifndef TQ_FWD_CUDA_H
#define TQ_FWD_CUDA_H
#include <stdint.h>

#include "turboquant.h"

typedef struct tqc_fwd_layer {
    const float *attn_norm, *ffn_norm;                  /* (dim) f32                     */
    const uint16_t *wq, *wk, *wv, *wo;                  /* bf16                          */
    const uint16_t *w_gate, *w_up, *w_down;             /* bf16                          */
} tqc_fwd_layer;

typedef struct tqc_fwd_desc {
    int n_layers, dim, n_heads, n_kv_heads, head_dim, ffn, vocab, rope_dim;
    float eps, attn_scale, embed_scale;
    const uint16_t *embed;     /* (vocab, dim) bf16                                   */
    const uint16_t *lm_head;   /* (vocab, dim) bf16; == embed when tied               */
    const float *final_norm;   /* (dim)                                               */
    const float *inv_freq;     /* (rope_dim / 2)                                      */
    const tqc_fwd_layer *layers;
} tqc_fwd_desc;

/* tqc_fwd_create() -- upload the weights, create one device KV cache per layer for n_ctx tokens
 * under scheme kv, and the activation buffers. */
tq_status tqc_fwd_create(const tqc_fwd_desc *d, tq_kv_scheme kv, int64_t n_ctx, tq_cuda_session **out);

#endif
