/* session_cuda.c -- tq_cuda_session (include/turboquant/cuda.h): the one forward (forward.c) on
 * the CUDA backend (cuda/backend_cuda.h). Creation copies the CPU engine's loaded model to the
 * device (bf16 matrices, or native block matrices as their packed bytes with a tq_cuda_qmat
 * view each, f32 norms, biases and RoPE tables) into a tq_fwd_weights of device pointers, makes
 * one device KV cache per layer and device run-state buffers for a chunk of tokens; eval runs
 * tq_forward_run() chunk by chunk. Every architecture the CPU forward runs is run here; native
 * formats without a GPU kernel are dequantized to bf16 at upload. Dense f32 weights (the
 * evaluation path, `--cuda --weights f32`) stay f32: cuBLAS products with f32 inputs and fp32
 * pedantic compute (no TF32). An f32 KV scheme is the backend's own f32 cache (tqc_be_kv_f32:
 * plain rows, fp32 causal attention; chunks of up to 512 tokens). Refused by name: dense f16
 * weights and a
 * sliding-window layer whose window is shorter than n_ctx (the device cache attends over the
 * whole context; with n_ctx <= window that is the same attention). Builds without CUDA get
 * TQ_E_UNSUPPORTED from the backend. */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "cuda/backend_cuda.h"
#include "cuda/qgemv.h"
#include "model/engine.h"

struct tq_cuda_session {
    tqc_be *be;
    tq_model_config cfg;
    tq_fwd_weights fw;        /* device pointers                                       */
    tq_layer_weights *layers; /* [n_layers] host array of device pointers              */
    void **bufs;              /* every device allocation, for free                     */
    int n_bufs, cap_bufs;
    tq_cuda_kv **kv;          /* [n_layers]                                            */
    tq_run_state rs;          /* device buffers for `chunk` tokens                     */
    float *logits;            /* (vocab) device                                        */
    int chunk;                /* tokens per forward call of a prefill (eval)            */
    int chunk_cap;            /* the run-state buffers' tokens (the largest chunk)      */
    int rows_chunk;           /* tokens per forward call of eval_rows (all rows' logits) */
    int graph;                /* decode steps (1 token) as one CUDA graph (default)    */
    long n_graph, n_eager;    /* decode steps run as a graph / eagerly                 */
    int64_t n_past, n_ctx;
    size_t weight_bytes, kv_bytes;
    tq_cuda_qmat *qm;         /* native matrices' device views (host array), n_qm used  */
    int n_qm, cap_qm;
    tq_qmat q_head;           /* the output layer's native view (.f NULL: dense bf16)   */
    int f32w;                 /* dense f32 weights (uploaded as f32)                    */
    int kvf;                  /* the backend's f32 KV cache (kv[] unused, NULL)          */
    char kernels[256];        /* tq_cuda_session_kernels()                              */
};

static tq_status dalloc(tq_cuda_session *s, void **p, size_t bytes, size_t *count)
{
    if (s->n_bufs == s->cap_bufs) {
        const int cap = s->cap_bufs ? 2 * s->cap_bufs : 64;
        void **nb = tq_calloc((size_t)cap, sizeof(void *));
        if (!nb)
            return TQ_FAIL(TQ_E_NOMEM, "tq_cuda_session_create: out of host memory");
        if (s->n_bufs)
            memcpy(nb, s->bufs, (size_t)s->n_bufs * sizeof(void *));
        tq_free(s->bufs);
        s->bufs = nb;
        s->cap_bufs = cap;
    }
    tq_status st = tqc_be_alloc(s->be, p, bytes, count);
    if (st == TQ_OK)
        s->bufs[s->n_bufs++] = *p;
    return st;
}

/* device copy of a host array (NULL stays NULL) */
static tq_status up(tq_cuda_session *s, const void *src, size_t bytes, void *dst_ptr)
{
    void **dst = dst_ptr;
    *dst = NULL;
    if (!src)
        return TQ_OK;
    tq_status st = dalloc(s, dst, bytes, &s->weight_bytes);
    return st ? st : tqc_be_upload(s->be, *dst, src, bytes);
}

/* device copy of n host arrays, one after the other in one allocation; dst[i] = each start */
static tq_status up_cat(tq_cuda_session *s, const void *const *src, const size_t *bytes, int n,
                        void **dst)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += bytes[i];
    uint8_t *d = NULL;
    tq_status st = dalloc(s, (void **)&d, total, &s->weight_bytes);
    for (int i = 0; i < n && !st; i++) {
        dst[i] = d;
        st = tqc_be_upload(s->be, d, src[i], bytes[i]);
        d += bytes[i];
    }
    return st;
}

/* "what" into the kernel list once */
static void note_kernel(tq_cuda_session *s, const char *what)
{
    if (strstr(s->kernels, what))
        return;
    const size_t pos = strlen(s->kernels);
    snprintf(s->kernels + pos, sizeof(s->kernels) - pos, "%s%s", pos ? ", " : "", what);
}

/* a bf16 host copy of a (rows, cols) matrix: the model's own rows when they are bf16 (*tmp NULL),
 * else a new buffer *tmp (native blocks dequantized by the format's reference, F32/F16 rounded) */
static tq_status host_bf16(const tq_model *m, const void *dense, const tq_qmat *q, int64_t rows,
                           int64_t cols, const void **out, uint16_t **tmp)
{
    *tmp = NULL;
    *out = dense;
    const int nat = q && q->f;
    if (!nat && m->wtype == TQ_DTYPE_BF16)
        return TQ_OK;
    if (nat && !q->f->dequant_ref)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_session_create: %s matrices have no dequantizer",
                       q->f->name);
    uint16_t *b = tq_calloc((size_t)rows * (size_t)cols, 2);
    float *row = tq_calloc((size_t)cols, 4);
    if (!b || !row) {
        tq_free(b);
        tq_free(row);
        return TQ_FAIL(TQ_E_NOMEM, "tq_cuda_session_create: out of host memory (%lld x %lld bf16)",
                       (long long)rows, (long long)cols);
    }
    for (int64_t r = 0; r < rows; r++) {
        _Alignas(64) uint8_t fr[TQ_QMM_R16_ROW_MAX]; /* an r16 row's file bytes */
        if (nat)
            q->f->dequant_ref(tq_qmm_file_row(q, r, fr), row, cols);
        else if (m->wtype == TQ_DTYPE_F32)
            memcpy(row, (const float *)dense + r * cols, (size_t)cols * 4);
        else
            for (int64_t j = 0; j < cols; j++)
                row[j] = tq_f16_to_f32(((const uint16_t *)dense)[r * cols + j]);
        for (int64_t j = 0; j < cols; j++)
            b[r * cols + j] = tq_f32_to_bf16(row[j]);
    }
    tq_free(row);
    *tmp = b;
    *out = b;
    return TQ_OK;
}

/* the GPU's view of a native matrix with its rows at w, if the quantized GEMV runs it */
static int gpu_view(const tq_qmat *q, const void *w, tq_cuda_qmat *v)
{
    if (!q || !q->f)
        return 0;
    const int id = q->f->id;
    if (id != TQ_GGML_Q8_0 && id != TQ_GGML_Q4_0 && id != TQ_GGML_Q4_1 && id != TQ_GGML_Q4_K &&
        id != TQ_GGML_Q6_K)
        return 0;
    *v = (tq_cuda_qmat){.fmt = id, .rows = q->rows, .cols = q->cols, .w = w, .row_bytes = q->row_bytes};
    if (tq_cuda_qgemv_check(v) != TQ_OK) {
        tq_clear_error();
        return 0;
    }
    return 1;
}

/* one matrix to the device: packed (dq = its view, .w -> a tq_cuda_qmat) when the GPU runs its
 * format, else as bf16 rows (dq zeroed) */
static tq_status up_mat(tq_cuda_session *s, const tq_model *m, const void *dense, const tq_qmat *q,
                        int64_t rows, int64_t cols, void **dst, tq_qmat *dq)
{
    memset(dq, 0, sizeof(*dq));
    tq_cuda_qmat v;
    tq_status st;
    if (gpu_view(q, (const void *)(uintptr_t)256 /* cudaMalloc's alignment */, &v) && s->n_qm < s->cap_qm) {
        /* a head-sized matrix (>= 16384 rows: the backend's wide-kernel decode of a single
         * product) of rows that are not a multiple of 16 bytes (Q8_0 / Q4_0 / Q4_1 at 576
         * columns) goes up with its rows padded to a 16-byte stride, which the wide kernel needs */
        const size_t rb = q->rows >= 16384 && q->row_bytes % 16 ? (q->row_bytes + 15) / 16 * 16 : q->row_bytes;
        const size_t fbytes = (size_t)q->rows * q->row_bytes, bytes = (size_t)q->rows * rb;
        void *fr = NULL; /* an r16 matrix (cpu/qdot_r16.h) goes up in the file's rows */
        if (q->r16) {
            if (!(fr = tq_aligned_alloc(fbytes)))
                return TQ_FAIL(TQ_E_NOMEM, "tq_cuda_session_create: out of host memory (%zu bytes)",
                               fbytes);
            tq_qmm_file_rows(q, 0, q->rows, fr);
        }
        const uint8_t *src = fr ? (const uint8_t *)fr : (const uint8_t *)q->w;
        if (rb == q->row_bytes) {
            st = up(s, src, bytes, dst);
        } else {
            uint8_t *h = tq_calloc(bytes, 1);
            if (!h) {
                tq_free(fr);
                return TQ_FAIL(TQ_E_NOMEM, "tq_cuda_session_create: out of host memory (%zu bytes)", bytes);
            }
            for (int64_t r = 0; r < q->rows; r++)
                memcpy(h + (size_t)r * rb, src + (size_t)r * q->row_bytes, q->row_bytes);
            st = up(s, h, bytes, dst);
            tq_free(h);
        }
        tq_free(fr);
        if (st)
            return st;
        v.w = *dst;
        v.row_bytes = rb;
        s->qm[s->n_qm] = v;
        *dq = (tq_qmat){.w = &s->qm[s->n_qm++], .f = q->f, .rows = q->rows, .cols = q->cols,
                        .row_bytes = rb};
        char k[48];
        snprintf(k, sizeof(k), "%s qgemv (q8 act)", q->f->name);
        note_kernel(s, k);
        return TQ_OK;
    }
    if (s->f32w && !(q && q->f)) {
        note_kernel(s, "f32 GEMM (cuBLAS fp32 pedantic)");
        return up(s, dense, (size_t)rows * (size_t)cols * 4, dst);
    }
    if (q && q->f) {
        char k[64];
        snprintf(k, sizeof(k), "%s as bf16 (no GPU kernel)", q->f->name);
        note_kernel(s, k);
    } else {
        note_kernel(s, "bf16 GEMV");
    }
    const void *hb;
    uint16_t *tmp;
    if ((st = host_bf16(m, dense, q, rows, cols, &hb, &tmp)))
        return st;
    st = up(s, hb, (size_t)rows * (size_t)cols * 2, dst);
    tq_free(tmp);
    return st;
}

/* outputs of one job (q|k|v, gate|up): dense ones in one allocation (one prefill GEMM), or each
 * on its own when any is native */
static tq_status up_job(tq_cuda_session *s, const tq_model *m, int n, const void *const *dense,
                        const tq_qmat *const *q, const int64_t *rows, int64_t cols, void **dst,
                        tq_qmat **dq)
{
    tq_status st = TQ_OK;
    tq_cuda_qmat v;
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= gpu_view(q[i], (const void *)(uintptr_t)256, &v);
    if (s->f32w && !any) { /* dense f32: one allocation, f32 rows */
        const void *src[4];
        size_t nb[4];
        for (int i = 0; i < n; i++) {
            memset(dq[i], 0, sizeof(*dq[i]));
            src[i] = dense[i];
            nb[i] = (size_t)rows[i] * (size_t)cols * 4;
        }
        note_kernel(s, "f32 GEMM (cuBLAS fp32 pedantic)");
        return up_cat(s, src, nb, n, dst);
    }
    if (any) {
        for (int i = 0; i < n && !st; i++)
            st = up_mat(s, m, dense[i], q[i], rows[i], cols, &dst[i], dq[i]);
        return st;
    }
    const void *src[4];
    uint16_t *tmp[4] = {0};
    size_t nb[4];
    for (int i = 0; i < n && !st; i++) {
        memset(dq[i], 0, sizeof(*dq[i]));
        if (!(q[i] && q[i]->f))
            note_kernel(s, "bf16 GEMV");
        else {
            char k[64];
            snprintf(k, sizeof(k), "%s as bf16 (no GPU kernel)", q[i]->f->name);
            note_kernel(s, k);
        }
        st = host_bf16(m, dense[i], q[i], rows[i], cols, &src[i], &tmp[i]);
        nb[i] = (size_t)rows[i] * (size_t)cols * 2;
    }
    if (!st)
        st = up_cat(s, src, nb, n, dst);
    for (int i = 0; i < n; i++)
        tq_free(tmp[i]);
    return st;
}

void tq_cuda_session_free(tq_cuda_session *s)
{
    if (!s)
        return;
    if (s->be)
        tqc_be_sync(s->be);
    if (s->kv) {
        for (int il = 0; il < s->cfg.n_layers; il++)
            if (s->kv[il]) {
                tqc_be_bind_kv(s->be, s->kv[il], 0);
                tq_cuda_kv_free(s->kv[il]);
            }
        tq_free(s->kv);
    }
    for (int i = 0; i < s->n_bufs; i++)
        tqc_be_dfree(s->bufs[i]);
    tq_free(s->bufs);
    tq_free(s->layers);
    tq_free(s->qm);
    tqc_be_free(s->be);
    tq_free(s);
}

static const char *refusal(const tq_model *m, int64_t n_ctx, char *buf, size_t cap)
{
    const tq_model_config *c = &m->cfg;
    if (!m->native && m->wtype != TQ_DTYPE_BF16 && m->wtype != TQ_DTYPE_F32) {
        snprintf(buf, cap, "F16 weights; the GPU forward takes BF16 or F32 (tq_model_opts."
                 "weight_type)");
        return buf;
    }
    if (c->n_heads % c->n_kv_heads) {
        snprintf(buf, cap, "n_heads %d not a multiple of n_kv_heads %d", c->n_heads, c->n_kv_heads);
        return buf;
    }
    for (int il = 0; il < c->n_layers; il++)
        if (tq_model_config_layer_is_sliding(c, il) && c->sliding_window > 0 &&
            c->sliding_window < n_ctx) {
            snprintf(buf, cap, "sliding-window attention (layer %d: window %d < n_ctx %lld): the "
                     "device cache attends over the whole context; use n_ctx <= %d", il,
                     c->sliding_window, (long long)n_ctx, c->sliding_window);
            return buf;
        }
    return NULL;
}

tq_status tq_cuda_session_create(const tq_model *m, tq_kv_scheme kv, int64_t n_ctx,
                                 tq_cuda_session **out)
{
    if (!out)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_create: NULL out");
    *out = NULL;
    if (!tq_cuda_compiled()) /* the no-CUDA build's contract: every CUDA entry point is unsupported */
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_session_create: no CUDA support in this build "
                       "(configure with the CUDA toolkit installed)");
    if (!m)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_create: NULL model");
    if (n_ctx < 1 || n_ctx > ((int64_t)1 << 31))
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_create: n_ctx %lld (valid: 1..2^31)",
                       (long long)n_ctx);
    if (tq_cuda_available() < 1)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_session_create: no CUDA device");
    const tq_model_config *c = &m->cfg;
    char why[384];
    if (refusal(m, n_ctx, why, sizeof(why)))
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_session_create: %s: %s model: the GPU forward "
                       "does not run %s", m->path ? m->path : "model",
                       m->info.arch_name ? m->info.arch_name : "this", why);
    const int kvf = kv.kind == TQ_KV_F32;
    tq_status st = kvf ? TQ_OK : tq_cuda_kv_supported(kv, c->head_dim);
    if (st)
        return st;
    tq_cuda_session *s = tq_calloc(1, sizeof(*s));
    if (!s)
        return TQ_FAIL(TQ_E_NOMEM, "tq_cuda_session_create: out of host memory");
    s->cfg = *c;
    s->n_ctx = n_ctx;
    s->graph = 1;
    const int group = c->n_heads / c->n_kv_heads;
    /* prefill chunks of up to TQ_CUDA_PREFILL_CHUNK tokens (the backend attends in blocks of
     * 64 / group queries, the attention kernel's rows per pass); eval_rows keeps one block per
     * call (its logits buffer holds every row of a call) */
    s->rows_chunk = 64 / group < 1 ? 1 : 64 / group;
    s->chunk = n_ctx < TQ_CUDA_PREFILL_CHUNK ? (int)n_ctx : TQ_CUDA_PREFILL_CHUNK;
    s->rows_chunk = s->rows_chunk < s->chunk ? s->rows_chunk : s->chunk;
    s->f32w = !m->native && m->wtype == TQ_DTYPE_F32;
    s->kvf = kvf;
    if (kvf) /* the f32 cache's attention takes any number of rows: a window in one pass */
        s->chunk = s->rows_chunk = n_ctx < 512 ? (int)n_ctx : 512;
    s->chunk_cap = s->chunk;
    const size_t dim = c->hidden, qd = (size_t)c->n_heads * c->head_dim,
                 kvd = (size_t)c->n_kv_heads * c->head_dim, ffn = c->ffn_hidden, C = s->chunk;
    size_t mx = dim > qd ? dim : qd;
    mx = mx > ffn ? mx : ffn;
#define TRY(x)                                                                                     \
    do {                                                                                           \
        if ((st = (x)) != TQ_OK)                                                                   \
            goto fail;                                                                             \
    } while (0)
    const size_t rqkv = qd + 2 * kvd, rmax = rqkv > 2 * ffn ? rqkv : 2 * ffn;
    TRY(tqc_be_create(s->chunk, (int64_t)mx, (int64_t)rmax, c->n_heads, m->attn_scale, &s->be));
    if (!(s->layers = tq_calloc((size_t)c->n_layers, sizeof(*s->layers))) ||
        !(s->kv = tq_calloc((size_t)c->n_layers, sizeof(*s->kv)))) {
        st = TQ_FAIL(TQ_E_NOMEM, "tq_cuda_session_create: out of host memory");
        goto fail;
    }
    s->cap_qm = 7 * c->n_layers + 1;
    if (!(s->qm = tq_calloc((size_t)s->cap_qm, sizeof(*s->qm)))) {
        st = TQ_FAIL(TQ_E_NOMEM, "tq_cuda_session_create: out of host memory");
        goto fail;
    }
    const size_t vb = (size_t)c->vocab * dim * (s->f32w ? 4 : 2);
    void *embed = NULL, *lm_head = NULL;
    float *fnorm = NULL, *ifr = NULL, *ifl = NULL;
    { /* the lookup's rows as bf16 (a native embedding dequantized); the head packed if native */
        const void *hb = m->embed;
        uint16_t *tmp = NULL;
        if (!s->f32w)
            TRY(host_bf16(m, m->embed, &m->q_embed, c->vocab, dim, &hb, &tmp));
        st = up(s, hb, vb, &embed);
        tq_free(tmp);
        TRY(st);
        if (m->q_embed.f)
            note_kernel(s, "embedding lookup bf16");
    }
    {
        tq_cuda_qmat v;
        if (m->lm_head != m->embed || gpu_view(&m->q_lm_head, (const void *)(uintptr_t)256, &v))
            TRY(up_mat(s, m, m->lm_head, &m->q_lm_head, c->vocab, dim, &lm_head, &s->q_head));
        else
            lm_head = embed;
    }
    TRY(up(s, m->final_norm, dim * 4, &fnorm));
    TRY(up(s, m->inv_freq, (size_t)c->rope_dim / 2 * 4, &ifr));
    if (m->inv_freq_local == m->inv_freq)
        ifl = ifr;
    else
        TRY(up(s, m->inv_freq_local, (size_t)c->rope_dim / 2 * 4, &ifl));
    for (int il = 0; il < c->n_layers; il++) {
        const tq_layer_weights *w = &m->layers[il];
        tq_layer_weights *d = &s->layers[il];
        TRY(up(s, w->attn_norm, dim * 4, &d->attn_norm));
        TRY(up(s, w->ffn_norm, dim * 4, &d->ffn_norm));
        TRY(up(s, w->post_attn_norm, dim * 4, &d->post_attn_norm));
        TRY(up(s, w->post_ffn_norm, dim * 4, &d->post_ffn_norm));
        TRY(up(s, w->q_norm, (size_t)c->head_dim * 4, &d->q_norm));
        TRY(up(s, w->k_norm, (size_t)c->head_dim * 4, &d->k_norm));
        TRY(up(s, w->bq, qd * 4, &d->bq));
        TRY(up(s, w->bk, kvd * 4, &d->bk));
        TRY(up(s, w->bv, kvd * 4, &d->bv));
        { /* q|k|v and gate|up each in one allocation when dense: one prefill GEMM per job */
            const void *src[3] = {w->wq, w->wk, w->wv};
            const tq_qmat *qs[3] = {&w->q_wq, &w->q_wk, &w->q_wv};
            tq_qmat *dq[3] = {&d->q_wq, &d->q_wk, &d->q_wv};
            const int64_t rows[3] = {(int64_t)qd, (int64_t)kvd, (int64_t)kvd};
            void *dst[3];
            TRY(up_job(s, m, 3, src, qs, rows, (int64_t)dim, dst, dq));
            d->wq = dst[0], d->wk = dst[1], d->wv = dst[2];
            const void *gsrc[2] = {w->w_gate, w->w_up};
            const tq_qmat *gq[2] = {&w->q_gate, &w->q_up};
            tq_qmat *gdq[2] = {&d->q_gate, &d->q_up};
            const int64_t grows[2] = {(int64_t)ffn, (int64_t)ffn};
            TRY(up_job(s, m, 2, gsrc, gq, grows, (int64_t)dim, dst, gdq));
            d->w_gate = dst[0], d->w_up = dst[1];
        }
        TRY(up_mat(s, m, w->wo, &w->q_wo, (int64_t)dim, (int64_t)qd, &d->wo, &d->q_wo));
        TRY(up_mat(s, m, w->w_down, &w->q_down, (int64_t)dim, (int64_t)ffn, &d->w_down, &d->q_down));
        /* as the CPU engine: a turbo cache keeps sliding-window layers in bf16 */
        tq_kv_scheme ls = kv;
        if (kv.kind == TQ_KV_TURBO && tq_model_config_layer_is_sliding(c, il))
            ls = (tq_kv_scheme){.kind = TQ_KV_BF16};
        if (kvf)
            continue;
        TRY(tq_cuda_kv_create(ls, c->head_dim, c->n_kv_heads, n_ctx, 1, &s->kv[il]));
        tqc_be_bind_kv(s->be, s->kv[il], 1);
        s->kv_bytes += tqc_be_kv_bytes(s->kv[il]);
    }
    if (kvf)
        TRY(tqc_be_kv_f32(s->be, c->n_layers, c->n_kv_heads, c->head_dim, n_ctx, &s->kv_bytes));
    s->fw = (tq_fwd_weights){&s->cfg, s->f32w ? TQ_DTYPE_F32 : TQ_DTYPE_BF16, s->layers, embed, lm_head, NULL, &s->q_head,
                             fnorm, ifr, ifl, 1};
    {
        tq_run_state *r = &s->rs;
        r->nb = s->chunk;
        float **bp[] = {&r->x, &r->xn, &r->q, &r->k, &r->v, &r->att, &r->h1, &r->h2, &s->logits};
        const size_t bsz[] = {C * dim, C * mx, C * qd, C * kvd, C * kvd, C * qd, C * ffn, C * ffn,
                              (size_t)c->vocab * (size_t)s->rows_chunk};
        for (int i = 0; i < (int)(sizeof(bsz) / sizeof(bsz[0])); i++)
            TRY(dalloc(s, (void **)bp[i], bsz[i] * 4, NULL));
    }
#undef TRY
    *out = s;
    return TQ_OK;
fail:
    tq_cuda_session_free(s);
    return st;
}

/* One decode step as a CUDA graph: the forward's ops captured on the backend's stream, the
 * step graph updated in place and launched (tqc_be_graph_end). The capture records every launch
 * with this step's position, token and attention plan; it costs host time per op but far less
 * than a launch, and the GPU runs the step's ~200 kernels without the host in between. 1: the
 * step ran; 0: nothing ran (an op could not be captured, e.g. a cache growing its workspace):
 * the caches' lengths are set back and the caller runs the step eagerly. */
static int graph_step(tq_cuda_session *s, const tq_fwd_item *it, float *logits,
                      const tqc_greedy_pen *greedy)
{
    if (tqc_be_graph_begin(s->be) != TQ_OK)
        return 0;
    tq_status st = tq_forward_run(&s->fw, &tq_backend_cuda, s->be, &s->rs, it, 1, logits, 0);
    if (st == TQ_OK && greedy) /* the sampler in the same graph */
        st = tqc_be_greedy(s->be, logits, s->cfg.vocab, greedy);
    if (tqc_be_graph_end(s->be, st == TQ_OK)) {
        s->n_graph++;
        return 1;
    }
    for (int il = 0; il < s->cfg.n_layers; il++) /* the appends' host-side lengths */
        tq_cuda_kv_set_length(s->kv[il], s->n_past);
    return 0;
}

/* eval (tq_cuda_session_eval's checks done): logits of the last token into s->logits when
 * `want`; greedy (not NULL): then the device sampler over them, in the step's graph */
static tq_status eval_run(tq_cuda_session *s, const int32_t *tokens, int64_t n, int want,
                          const tqc_greedy_pen *greedy)
{
    for (int64_t t0 = 0; t0 < n; t0 += s->chunk) {
        const int k = (int)(n - t0 < s->chunk ? n - t0 : s->chunk);
        const int last = t0 + k == n && want;
        const tq_fwd_item it = {s->kv, s->n_past, tokens + t0, k};
        tq_status st;
        if (k == 1 && s->graph && !s->kvf && !s->f32w &&
            graph_step(s, &it, last ? s->logits : NULL, last ? greedy : NULL)) {
            s->n_past += k;
            continue;
        }
        st = tq_forward_run(&s->fw, &tq_backend_cuda, s->be, &s->rs, &it, 1,
                            last ? s->logits : NULL, 0);
        s->n_eager += k == 1;
        if (st == TQ_OK && last && greedy)
            st = tqc_be_greedy(s->be, s->logits, s->cfg.vocab, greedy);
        if (st == TQ_OK)
            st = tqc_be_status(s->be);
        if (st != TQ_OK)
            return st;
        s->n_past += k;
    }
    return TQ_OK;
}

static tq_status eval_check(const tq_cuda_session *s, const char *fn, const int32_t *tokens,
                            int64_t n)
{
    if (!tq_cuda_compiled())
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: no CUDA support in this build (configure with the "
                       "CUDA toolkit installed)", fn);
    if (!s || !tokens)
        return TQ_FAIL(TQ_E_ARG, "%s: NULL %s", fn, !s ? "session" : "tokens");
    if (n < 1)
        return TQ_FAIL(TQ_E_ARG, "%s: n = %lld tokens (need >= 1)", fn, (long long)n);
    if (s->n_past + n > s->n_ctx)
        return TQ_FAIL(TQ_E_OVERFLOW, "%s: %lld + %lld tokens exceed n_ctx %lld (%lld fit)", fn,
                       (long long)s->n_past, (long long)n, (long long)s->n_ctx,
                       (long long)(s->n_ctx - s->n_past));
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->cfg.vocab)
            return TQ_FAIL(TQ_E_ARG, "%s: token %lld is %d (valid: 0..%d)", fn, (long long)i,
                           (int)tokens[i], s->cfg.vocab - 1);
    return TQ_OK;
}

tq_status tq_cuda_session_eval_greedy(tq_cuda_session *s, const int32_t *tokens, int64_t n,
                                      const int32_t *pen_ids, int n_pen, float penalty,
                                      int32_t *next)
{
    tq_status st = eval_check(s, "tq_cuda_session_eval_greedy", tokens, n);
    if (st)
        return st;
    if (!next || n_pen < 0 || n_pen > TQ_CUDA_GREEDY_MAX_PEN || (n_pen && !pen_ids) ||
        (n_pen && !(penalty > 0.0f && isfinite(penalty))))
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_eval_greedy: %s (n_pen %d of at most %d, "
                       "penalty %g)", !next ? "NULL next" : "bad penalty list", n_pen,
                       TQ_CUDA_GREEDY_MAX_PEN, (double)penalty);
    tqc_greedy_pen pen = {.n = n_pen, .penalty = n_pen ? penalty : 1.0f};
    for (int j = 0; j < n_pen; j++) {
        if (pen_ids[j] < 0 || pen_ids[j] >= s->cfg.vocab)
            return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_eval_greedy: penalised id %d outside the "
                           "vocabulary", (int)pen_ids[j]);
        for (int i = 0; i < j; i++)
            if (pen_ids[i] == pen_ids[j])
                return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_eval_greedy: penalised id %d twice "
                               "(the list must be distinct)", (int)pen_ids[j]);
        pen.id[j] = pen_ids[j];
    }
    if ((st = eval_run(s, tokens, n, 1, &pen)) || (st = tqc_be_greedy_fetch(s->be, next)))
        return st;
    if (*next < 0)
        return TQ_FAIL(TQ_E_ARG, "sampler: no finite logit in a row of %d (all NaN or -inf)",
                       s->cfg.vocab);
    return TQ_OK;
}

tq_status tq_cuda_session_eval(tq_cuda_session *s, const int32_t *tokens, int64_t n,
                               float *logits_last)
{
    tq_status st = eval_check(s, "tq_cuda_session_eval", tokens, n);
    if (st)
        return st;
    if ((st = eval_run(s, tokens, n, logits_last != NULL, NULL)))
        return st;
    if (logits_last)
        return tqc_be_download(s->be, logits_last, s->logits, (size_t)s->cfg.vocab * 4);
    return TQ_OK;
}

/* the rows [a, b) of this chunk's logits (device, row 0 = the chunk's first token) that the
 * caller asked for: to the host and / or through the row statistics */
static tq_status rows_out(tq_cuda_session *s, int64_t a, int64_t b, int64_t first, float *logits,
                          const int32_t *ids, int k, float *picked, double *lse, int32_t *argmax,
                          int64_t t0, void *dscratch)
{
    const int vocab = s->cfg.vocab, nr = (int)(b - a);
    const float *src = s->logits + (size_t)(a - t0) * vocab;
    const int64_t r0 = a - first; /* the caller's row index */
    tq_status st;
    if (logits && (st = tqc_be_download(s->be, logits + (size_t)r0 * vocab, src,
                                        (size_t)nr * vocab * 4)))
        return st;
    if (!lse && !argmax && !(k > 0 && picked))
        return TQ_OK;
    /* device scratch: ids (nr x k int32), picked (nr x k), lse (nr double), argmax (nr int32) */
    uint8_t *d = dscratch;
    int32_t *d_ids = (int32_t *)d;
    float *d_pk = (float *)(d + (size_t)nr * k * 4);
    double *d_lse = (double *)(d + ((size_t)nr * k * 8 + 7) / 8 * 8);
    int32_t *d_am = (int32_t *)(d_lse + nr);
    const int kk = picked ? k : 0;
    if (kk > 0 && (st = tqc_be_upload(s->be, d_ids, ids + (size_t)r0 * k, (size_t)nr * k * 4)))
        return st;
    if ((st = tqc_be_row_stats(s->be, src, nr, vocab, d_ids, kk, d_pk, d_lse, d_am)))
        return st;
    if (kk > 0 && (st = tqc_be_download(s->be, picked + (size_t)r0 * k, d_pk, (size_t)nr * k * 4)))
        return st;
    if (lse && (st = tqc_be_download(s->be, lse + r0, d_lse, (size_t)nr * 8)))
        return st;
    if (argmax && (st = tqc_be_download(s->be, argmax + r0, d_am, (size_t)nr * 4)))
        return st;
    return TQ_OK;
}

tq_status tq_cuda_session_eval_rows(tq_cuda_session *s, const int32_t *tokens, int64_t n,
                                    int64_t first, float *logits, const int32_t *ids, int k,
                                    float *picked, double *lse, int32_t *argmax)
{
    if (!tq_cuda_compiled())
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_session_eval_rows: no CUDA support in this "
                       "build (configure with the CUDA toolkit installed)");
    if (!s || !tokens)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_eval_rows: NULL %s", !s ? "session" : "tokens");
    if (n < 1 || first < 0 || first >= n || k < 0 || (k > 0 && picked && !ids))
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_eval_rows: n %lld, first %lld, k %d (need "
                       "0 <= first < n, ids with k > 0)", (long long)n, (long long)first, k);
    if (s->n_past + n > s->n_ctx)
        return TQ_FAIL(TQ_E_OVERFLOW, "tq_cuda_session_eval_rows: %lld + %lld tokens exceed n_ctx "
                       "%lld", (long long)s->n_past, (long long)n, (long long)s->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->cfg.vocab)
            return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_eval_rows: token %lld is %d (valid: 0..%d)",
                           (long long)i, (int)tokens[i], s->cfg.vocab - 1);
    void *scratch = NULL;
    tq_status st = TQ_OK;
    if (lse || argmax || (k > 0 && picked)) {
        const size_t C = (size_t)s->rows_chunk;
        st = tqc_be_alloc(s->be, &scratch, C * (size_t)k * 8 + C * 16 + 64, NULL);
        if (st)
            return st;
    }
    /* chunks of s->rows_chunk tokens, cut at `first` too: the rows before it need no logits */
    for (int64_t t0 = 0; t0 < n && !st;) {
        int64_t end = t0 + s->rows_chunk < n ? t0 + s->rows_chunk : n;
        if (t0 < first && end > first)
            end = first;
        const int kn = (int)(end - t0), want = end > first;
        const tq_fwd_item it = {s->kv, s->n_past, tokens + t0, kn};
        st = tq_forward_run(&s->fw, &tq_backend_cuda, s->be, &s->rs, &it, 1,
                            want ? s->logits : NULL, want);
        if (st == TQ_OK)
            st = tqc_be_status(s->be);
        if (st != TQ_OK)
            break;
        s->n_past += kn;
        if (want)
            st = rows_out(s, t0, end, first, logits, ids, k, picked, lse, argmax, t0, scratch);
        t0 = end;
    }
    if (scratch) {
        tqc_be_sync(s->be);
        tqc_be_dfree(scratch);
    }
    return st;
}

int64_t tq_cuda_session_n_past(const tq_cuda_session *s)
{
    return s ? s->n_past : 0;
}

int64_t tq_cuda_session_n_ctx(const tq_cuda_session *s)
{
    return s ? s->n_ctx : 0;
}

void tq_cuda_session_reset(tq_cuda_session *s)
{
    if (!s)
        return;
    tqc_be_sync(s->be);
    for (int il = 0; il < s->cfg.n_layers; il++)
        if (s->kv[il])
            tq_cuda_kv_set_length(s->kv[il], 0);
    s->n_past = 0;
}

tq_status tq_cuda_session_sync(tq_cuda_session *s)
{
    if (!s)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_sync: NULL session");
    return tqc_be_sync(s->be);
}

tq_status tq_cuda_session_set_opts(tq_cuda_session *s, const tq_cuda_session_opts *o)
{
    if (!s || !o)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_set_opts: NULL %s", !s ? "session" : "options");
    if (o->inputs < TQ_CUDA_IN_KV_F32 || o->inputs > TQ_CUDA_IN_F32)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_set_opts: inputs %d (TQ_CUDA_IN_KV_F32, _BF16 or _F32)",
                       o->inputs);
    for (int il = 0; il < s->cfg.n_layers && !s->kvf; il++) {
        const tq_status st = tq_cuda_kv_set_opts(s->kv[il], &o->kv);
        if (st != TQ_OK)
            return st;
    }
    tqc_be_set_gemv(s->be, !o->no_gemv);
    tqc_be_set_pdl(s->be, !o->kv.no_pdl);
    tqc_be_set_prefill_dq(s->be, o->prefill_qgemv ? 0 : 9);
    tqc_be_set_wide_head(s->be, !o->no_wide_head);
    tqc_be_set_exact(s->be, o->inputs == TQ_CUDA_IN_BF16  ? TQC_EXACT_NONE
                            : o->inputs == TQ_CUDA_IN_F32 ? TQC_EXACT_ALL
                                                          : TQC_EXACT_KV);
    s->graph = !o->no_graph;
    if (!s->kvf) {
        const int want = o->prefill_chunk > 0 ? o->prefill_chunk : TQ_CUDA_PREFILL_CHUNK;
        s->chunk = want < s->chunk_cap ? want : s->chunk_cap;
    }
    return TQ_OK;
}

tq_status tq_cuda_session_graph_stats(const tq_cuda_session *s, long *graph, long *eager,
                                      long *inst)
{
    if (!s)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_graph_stats: NULL session");
    long ni = 0, nu = 0;
    tqc_be_graph_counts(s->be, &ni, &nu);
    if (graph)
        *graph = s->n_graph;
    if (eager)
        *eager = s->n_eager;
    if (inst)
        *inst = ni;
    return TQ_OK;
}

const char *tq_cuda_session_kernels(const tq_cuda_session *s)
{
    return s ? s->kernels : "";
}

tq_status tq_cuda_session_bytes(const tq_cuda_session *s, size_t *weights, size_t *kv)
{
    if (!s)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_bytes: NULL session");
    if (weights)
        *weights = s->weight_bytes;
    if (kv)
        *kv = s->kv_bytes;
    return TQ_OK;
}

tq_status tq_cuda_session_debug(tq_cuda_session *s, int il, tq_cuda_kv **kv, const float **q_last,
                                const float **att_last)
{
    if (!s || il < 0 || il >= s->cfg.n_layers)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_debug: %s",
                       !s ? "NULL session" : "layer out of range");
    tq_status st = tqc_be_sync(s->be);
    if (st)
        return st;
    if (kv)
        *kv = s->kv[il];
    if (q_last)
        *q_last = s->rs.q;
    if (att_last)
        *att_last = s->rs.att;
    return TQ_OK;
}

tq_status tq_cuda_session_debug_kv(tq_cuda_session *s, const float **k, const float **v)
{
    if (!s || !k || !v)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_session_debug_kv: NULL %s", !s ? "session" : "output");
    tq_status st = tqc_be_sync(s->be);
    if (st)
        return st;
    *k = s->rs.k;
    *v = s->rs.v;
    return TQ_OK;
}
