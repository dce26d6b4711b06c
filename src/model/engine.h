/* engine.h -- the engine's internal structs (llama2.c split): Config (tq_model_config, io.h),
 * Weights (per layer, as loaded), RunState (per session, allocated once). model.c loads and
 * validates; forward.c runs the forward pass over them. */
#ifndef TQ_ENGINE_H
#define TQ_ENGINE_H

#include <pthread.h>

#include "common/backend.h"
#include "core/core.h"
#include "cpu/matvec.h"
#include "cpu/qmatmul.h"
#include "model/kvcache.h"

/* One decoder block. Matrices are (out, in) row-major in the model's weight dtype; vectors f32.
 * Optional tensors are NULL when the architecture has none. */
typedef struct tq_layer_weights {
    float *attn_norm;      /* (dim)                                            */
    void *wq;              /* (n_heads * head_dim, dim)                        */
    void *wk;              /* (n_kv_heads * head_dim, dim)                     */
    void *wv;              /* (n_kv_heads * head_dim, dim)                     */
    void *wo;              /* (dim, n_heads * head_dim)                        */
    float *bq, *bk, *bv;   /* qwen2: (n_heads * head_dim), (kv dim), (kv dim)  */
    float *q_norm, *k_norm;/* qwen3/gemma3: (head_dim) per-head RMSNorm        */
    float *post_attn_norm; /* gemma3: (dim) after attention, before residual   */
    float *ffn_norm;       /* (dim)                                            */
    float *post_ffn_norm;  /* gemma3: (dim) after the MLP, before residual     */
    void *w_gate;          /* (hidden_dim, dim)                                */
    void *w_up;            /* (hidden_dim, dim)                                */
    void *w_down;          /* (dim, hidden_dim)                                */
    /* native weights (--weights native): the same matrices in their block format; .f == NULL
     * when the matrix is dense in the model's wtype (the pointer above) */
    tq_qmat q_wq, q_wk, q_wv, q_wo, q_gate, q_up, q_down;
} tq_layer_weights;

struct tq_model {
    tq_model_config cfg;
    tq_model_info info;
    char *path;
    tq_dtype wtype;         /* storage of the matrices                          */
    tq_mm mm;               /* matvec kernel for wtype                          */
    tq_pool *pool;          /* the pool kernels run on                          */
    int own_pool;
    void *embed;            /* (vocab, dim) in wtype                            */
    void *lm_head;          /* (vocab, dim) in wtype; == embed when tied        */
    tq_qmat q_embed, q_lm_head; /* native block format (.f NULL when dense)     */
    int native;             /* some matrices are kept in their block format     */
    int act_f32;            /* native matmuls take f32 activations (else q8)    */
    char kernels[256];      /* "Q4_1 q8-act avx2, Q8_0 ..." per native format   */
    size_t weight_bytes_token; /* matrix bytes one decode step reads          */
    float *final_norm;      /* (dim)                                            */
    tq_layer_weights *layers;
    float *inv_freq;        /* (rope_dim / 2) RoPE frequencies, scaling applied */
    float *inv_freq_local;  /* gemma3 sliding layers; == inv_freq otherwise     */
    float attn_scale;
    size_t weight_bytes;
    int n_sessions;
    /* every tensor as held in memory, in load order (for the weights hash) */
    struct tq_model_tensor {
        const void *data;
        size_t bytes;
        const tq_qmat *q; /* its native view (an r16 one is hashed in the file's rows), or NULL */
    } *tensors;
    int n_tensors;
    /* XXH3-128 of the tensors' bytes, computed on first use (tq_model_weights_hash) */
    pthread_mutex_t wh_lock;
    int wh_done;
    uint8_t wh[16];
};

/* tq_model_weights_hash() -- XXH3-128 (canonical big-endian bytes) of every weight tensor's bytes
 * as held in memory (in load order), so two models of the same shapes with different weights
 * differ. Computed once, on the first call (about 30 ms per GB), then cached in the model;
 * thread-safe. */
void tq_model_weights_hash(const tq_model *m, uint8_t out[16]);

/* Per-session buffers, sized for n_batch tokens (nb) once at creation. */
typedef struct tq_run_state {
    int nb;
    float *x;         /* (nb, dim) residual stream                        */
    float *xn;        /* (nb, max(dim, q_dim)) normed input of a matmul   */
    float *q;         /* (nb, q_dim)                                      */
    float *k;         /* (nb, kv_dim)                                     */
    float *v;         /* (nb, kv_dim)                                     */
    float *att;       /* (nb, q_dim) attention output                     */
    float *h1;        /* (nb, hidden_dim) gate, then the gated product    */
    float *h2;        /* (nb, hidden_dim) up                              */
    uint16_t *xb;     /* (nb, max(dim, q_dim, hidden_dim)) bf16 activations, for kernels
                       * that need them (else NULL)                       */
    float *cos_sin;   /* (nb, rope_dim) cos | sin per position            */
    void *act_a;      /* native: q8 activations (tq_q8a) of nb tokens, widest input  */
    void *act_k;      /* native: q8 activations (tq_q8k), NULL if no K format       */
} tq_run_state;

struct tq_session {
    tq_model *m;
    tq_kvcache *kv;
    tq_run_state rs;
    int64_t n_past;
    int64_t n_ctx;
    int *window;      /* [n_layers] sliding window per layer (0 = full), NULL if none */
};

/* What one forward runs over, in the backend's memory: the config, the matrices (dense in wtype,
 * or the native block form where a tq_qmat's .f is set), norms and RoPE tables. The
 * CPU engine's view is its tq_model (tq_fwd_weights_of); the GPU session holds device copies. */
typedef struct tq_fwd_weights {
    const tq_model_config *cfg;
    tq_dtype wtype;
    const tq_layer_weights *layers;
    const void *embed, *lm_head;
    const tq_qmat *q_embed, *q_lm_head; /* NULL = dense                                    */
    const float *final_norm;
    const float *inv_freq, *inv_freq_local;
    int native_view; /* 0: a native matrix reaches the backend as its tq_qmat (CPU); 1: as the
                      * tq_qmat's .w, the backend's own view (GPU session: a tq_cuda_qmat)      */
} tq_fwd_weights;

/* One sequence of the backend-neutral forward: n tokens (host ids, in range) at positions
 * [pos, pos + n), K/V into the backend's cache handle kv. */
typedef struct tq_fwd_item {
    void *kv;
    int64_t pos;
    const int32_t *tokens;
    int n;
} tq_fwd_item;

/* tq_forward_run() -- the one forward (forward.c) over any backend: r's buffers (backend
 * memory, sized for the sum of n) are the work space, ctx the backend's context. logits (backend
 * memory): every row or the last row of each item, as tq_forward_batch(). */
tq_status tq_forward_run(const tq_fwd_weights *fw, const tq_backend *be, void *ctx,
                         tq_run_state *r, const tq_fwd_item *seq, int n_seq, float *logits,
                         int all_logits);

/* The CPU backend (backend_cpu.c); its context is the tq_session whose run state is used. */
extern const tq_backend tq_backend_cpu;

/* tq_forward() -- run n (<= s->rs.nb) tokens at positions [n_past, n_past + n) through the
 * model, appending K/V to the cache. If logits is not NULL, writes logits of the last token
 * (all_logits = 0, vocab floats) or of every token (all_logits = 1, (n, vocab)). Does not
 * advance n_past. No allocation. */
tq_status tq_forward(tq_session *s, const int32_t *tokens, int n, float *logits, int all_logits);

/* One sequence of a batched forward: n tokens of session s at positions [s->n_past, + n). */
typedef struct tq_fwd_seq {
    tq_session *s;
    const int32_t *tokens;
    int n;
} tq_fwd_seq;

/* tq_forward_batch() -- tq_forward() over several sessions of the same model at once: every
 * matmul runs over all their tokens (sum of n <= s->rs.nb rows; s's run state is the work
 * space, s need not be one of them), RoPE, cache append and attention per sequence. logits
 * gets the rows of tq_forward() for each sequence in order: its last token, or every token with
 * all_logits. Each sequence's logits equal those of its own tq_forward() call (the kernels are
 * batch-invariant). Does not advance n_past. No allocation. */
tq_status tq_forward_batch(tq_session *s, const tq_fwd_seq *seq, int n_seq, float *logits,
                           int all_logits);

#endif /* TQ_ENGINE_H */
