/* qmatmul.c -- the threaded driver of qmatmul.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu/qdot.h"
#include "cpu/qdot_amx.h"
#include "cpu/qdot_r16.h"
#include "cpu/qmatmul.h"

#define QMM_BLK 16 /* rows per thread-split unit */

tq_qpath tq_qmm_path(const tq_format *f, int act_f32)
{
    if (!f || !f->k.dequant)
        return TQ_QPATH_NONE;
    if (!act_f32 && f->k.mv_q8)
        return TQ_QPATH_Q8;
    if (f->k.mv_f32)
        return TQ_QPATH_F32;
    return f->block <= 256 ? TQ_QPATH_DEQUANT : TQ_QPATH_NONE;
}

const char *tq_qmm_kernel_name(const tq_format *f, int act_f32, char *buf, size_t cap)
{
    switch (tq_qmm_path(f, act_f32)) {
    case TQ_QPATH_Q8:
        snprintf(buf, cap, "q8-act %s", f->k.isa_q8);
        break;
    case TQ_QPATH_F32:
        snprintf(buf, cap, "f32-act %s", f->k.isa_f32);
        break;
    case TQ_QPATH_DEQUANT:
        snprintf(buf, cap, "dequant+f32 %s", f->k.isa_dequant);
        break;
    default:
        snprintf(buf, cap, "none");
    }
    return buf;
}

/* act_a: the tq_q8a blocks of n tokens, then (from a 64-byte boundary) their tq_q8p groups for
 * the gemm_q8 tiles */
static size_t qa_bytes(int64_t k, int64_t n)
{
    return ((size_t)n * (size_t)(k / TQ_QK) * sizeof(tq_q8a) + 63) & ~(size_t)63;
}

void tq_qmm_act_bytes(int64_t k, int64_t n, size_t *a, size_t *kb)
{
    *a = k % TQ_QK ? 0 : qa_bytes(k, n) + (size_t)tq_q8p_count(k, n) * sizeof(tq_q8p);
    *kb = k % TQ_QKK ? 0 : (size_t)n * (size_t)(k / TQ_QKK) * sizeof(tq_q8k);
}

/* the DEQUANT path: one row . one token, blocks decoded on the stack */
static void mv_dequant(const tq_format *f, const void *w, size_t row_bytes, int64_t k,
                       const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy, int64_t r0,
                       int64_t r1)
{
    float blk[256];
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * row_bytes;
        for (int64_t t = 0; t < n; t++) {
            const float *xt = x + t * ldx;
            float acc[32] = {0};
            for (int64_t b = 0; b < k / f->block; b++) {
                f->k.dequant(row + (size_t)b * f->block_bytes, blk, f->block);
                for (int64_t j = 0; j < f->block; j++) {
                    const int64_t e = b * f->block + j;
                    acc[e % 32] = fmaf(blk[j], xt[e], acc[e % 32]);
                }
            }
            float v[8];
            for (int l = 0; l < 8; l++)
                v[l] = (acc[l] + acc[8 + l]) + (acc[16 + l] + acc[24 + l]);
            y[t * ldy + r] = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
        }
    }
}

/* tokens from which the activations are quantized by the pool, and from which a format's
 * gemm_q8 tile (packed activations) takes the product instead of mv_q8 */
#define QMM_QACT_PAR 16
#define QMM_GEMM_MIN 8
/* tokens up to which an r16 matrix runs the r16 kernel (4 tokens per pass over a group, each
 * block's weights split once); from 8 the packed-activation tiles (AMX / VNNI) on the unpacked
 * view. Best of 5 x 300 calls, 1536 x 576, 1 thread, loaded box, us, main's AMX mv (41d4fe5) / r16:
 * Q4_0 n=1 26.8 / 6.8, n=2 40.1 / 10.6, n=4 43.9 / 17.0, n=7 50.1 / 42.2, n=8 48.5 / 46.7; Q4_1
 * n=4 46.1 / 18.8, n=7 47.1 / 35.3, n=8 83.1 / 91.0; Q8_0 n=1 20.7 / 7.2, n=4 35.3 / 14.5, n=7
 * 52.4 / 48.3, n=8 72.2 / 49.4. Up to 8 (serve helper): the unpacked view at 8 tokens (the
 * batched step of 8 sequences without AMX) made the step 3x slower than r16 -- batch_bench -t 2
 * --amx 0, quiet, ms per step: k=4 5.3, k=8 26.5; r16 at n=8 is 33.6-36.9 us at 1536 x 576 */
#define QMM_R16_MAX_N 8

typedef struct qact_job {
    const float *x;
    int64_t ldx, k, n;
    tq_qact_quant_fn qa, qk; /* NULL: that kind is not needed */
    void *act_a, *act_k;
    size_t ab, kb;
    tq_q8p *act_p; /* non-NULL: also the tq_q8p groups (token t: lane t % 16 of group t / 16) */
} qact_job;

static void qact_task(void *ctx, int ith, int nth)
{
    const qact_job *q = ctx;
    int64_t t0, t1;
    tq_split_range(q->n, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        if (q->qa)
            q->qa(q->x + t * q->ldx, (uint8_t *)q->act_a + (size_t)t * q->ab, q->k);
        if (q->act_p)
            tq_q8p_pack((const tq_q8a *)((uint8_t *)q->act_a + (size_t)t * q->ab), q->k / TQ_QK,
                        q->act_p + (t / TQ_Q8P_T) * (q->k / TQ_QK), (int)(t % TQ_Q8P_T));
        if (q->qk)
            q->qk(q->x + t * q->ldx, (uint8_t *)q->act_k + (size_t)t * q->kb, q->k);
    }
}

typedef struct qmm_job {
    const tq_qmm_out *outs;
    int n_out;
    const float *x;
    int64_t ldx, n;
    int act_f32;
    const void *act_a, *act_k;
    const void *act_p; /* the tq_q8p groups, or NULL: no gemm_q8 tile this call */
} qmm_job;

/* rows [r0, r1) of W (file layout) into y (o's y shifted to W's row 0) */
static void qmm_rows_file(const qmm_job *j, const tq_qmat *W, float *y, int64_t ldy, int64_t r0,
                          int64_t r1)
{
    const tq_format *f = W->f;
    switch (tq_qmm_path(f, j->act_f32)) {
    case TQ_QPATH_Q8:
        if (j->act_p && f->k.gemm_q8) {
            f->k.gemm_q8(W->w, W->row_bytes, W->cols, j->act_p, j->n, y, ldy, r0, r1);
            break;
        }
        f->k.mv_q8(W->w, W->row_bytes, W->cols, f->act == TQ_ACT_Q8K ? j->act_k : j->act_a, j->n,
                   y, ldy, r0, r1);
        break;
    case TQ_QPATH_F32:
        f->k.mv_f32(W->w, W->row_bytes, W->cols, j->x, j->ldx, j->n, y, ldy, r0, r1);
        break;
    case TQ_QPATH_DEQUANT:
        mv_dequant(f, W->w, W->row_bytes, W->cols, j->x, j->ldx, j->n, y, ldy, r0, r1);
        break;
    default:
        break; /* refused at load */
    }
}

static void qmm_rows(const qmm_job *j, const tq_qmm_out *o, int64_t r0, int64_t r1)
{
    const tq_qmat *W = o->W;
    if (!W->r16) {
        qmm_rows_file(j, W, o->y, o->ldy, r0, r1);
        return;
    }
    if (j->n >= TQ_AMX_R16_MIN_N && j->n <= 8 && !j->act_f32 && tq_cpu_amx()) {
        /* a batched decode step of 7..8 tokens: the AMX tile reads the r16 groups in place
         * (instead of the r16 kernel's pass per token or the unpacked view) */
        const tq_qmv_q8_fn amx = tq_qdot_amx_r16(W->f->id);
        if (amx) {
            amx(W->w, W->row_bytes, W->cols, j->act_a, j->n, o->y, o->ldy, r0, r1);
            return;
        }
    }
    if (j->n <= QMM_R16_MAX_N && !j->act_f32) { /* decode: the r16 kernel (r0, r1: whole groups) */
        tq_r16_mv_avx512(W->f->id)(W->w, W->row_bytes, W->cols, j->act_a, j->n, o->y, o->ldy, r0,
                                   r1);
        return;
    }
    /* the unpacked view: groups back to the file's rows on the stack, chunk by chunk */
    _Alignas(64) uint8_t buf[TQ_R16_MAX_GROUP];
    const int64_t nb = W->cols / TQ_QK;
    const size_t gbytes = TQ_R16 * W->row_bytes;
    const int64_t chunk = (int64_t)(sizeof(buf) / gbytes) * TQ_R16;
    for (int64_t rc = r0; rc < r1; rc += chunk) {
        const int64_t m = r1 - rc < chunk ? r1 - rc : chunk;
        for (int64_t g = 0; g < m; g += TQ_R16)
            tq_r16_unpack(W->f->id, (const uint8_t *)W->w + (size_t)(rc + g) * W->row_bytes, nb,
                          buf + (size_t)g * W->row_bytes);
        tq_qmat V = *W;
        V.w = buf;
        V.rows = m;
        V.r16 = 0;
        qmm_rows_file(j, &V, o->y + rc, o->ldy, 0, m);
    }
}

int tq_qmm_r16_ok(const tq_qmat *q, int act_f32)
{
    if (!q || !q->f || q->r16 || act_f32 || !tq_cpu_r16() || !tq_r16_format(q->f->id) ||
        !tq_r16_mv(q->f->id))
        return 0;
    if (tq_qmm_path(q->f, act_f32) != TQ_QPATH_Q8 || q->rows % TQ_R16 || q->cols % TQ_QK ||
        q->row_bytes != (size_t)(q->cols / TQ_QK) * q->f->block_bytes)
        return 0;
    _Static_assert(TQ_QMM_R16_ROW_MAX == TQ_R16_MAX_GROUP / TQ_R16, "r16 row bound");
    return q->row_bytes <= TQ_QMM_R16_ROW_MAX;
}

int tq_qmm_r16_pack(tq_qmat *q, int act_f32)
{
    if (!tq_qmm_r16_ok(q, act_f32))
        return -1;
    _Alignas(64) uint8_t buf[TQ_R16_MAX_GROUP];
    const size_t gbytes = TQ_R16 * q->row_bytes;
    uint8_t *w = (uint8_t *)(uintptr_t)q->w;
    for (int64_t r = 0; r < q->rows; r += TQ_R16) {
        memcpy(buf, w + (size_t)r * q->row_bytes, gbytes);
        tq_r16_pack(q->f->id, buf, q->cols / TQ_QK, w + (size_t)r * q->row_bytes);
    }
    q->r16 = 1;
    return 0;
}

void tq_qmm_file_rows(const tq_qmat *q, int64_t r0, int64_t r1, void *dst)
{
    const uint8_t *w = q->w;
    if (!q->r16) {
        memcpy(dst, w + (size_t)r0 * q->row_bytes, (size_t)(r1 - r0) * q->row_bytes);
        return;
    }
    for (int64_t r = r0; r < r1; r += TQ_R16)
        tq_r16_unpack(q->f->id, w + (size_t)r * q->row_bytes, q->cols / TQ_QK,
                      (uint8_t *)dst + (size_t)(r - r0) * q->row_bytes);
}

const void *tq_qmm_file_row(const tq_qmat *q, int64_t r, void *dst)
{
    const uint8_t *w = q->w;
    if (!q->r16)
        return w + (size_t)r * q->row_bytes;
    tq_r16_unpack_row(q->f->id, w + (size_t)(r / TQ_R16) * TQ_R16 * q->row_bytes,
                      q->cols / TQ_QK, (int)(r % TQ_R16), dst);
    return dst;
}

const char *tq_qmm_layout_name(const tq_qmat *q)
{
    return q && q->r16 ? "r16" : "file";
}

static void qmm_task(void *ctx, int ith, int nth)
{
    const qmm_job *j = ctx;
    for (int i = 0; i < j->n_out; i++) {
        const tq_qmm_out *o = &j->outs[i];
        const int64_t nblk = (o->W->rows + QMM_BLK - 1) / QMM_BLK;
        int64_t b0, b1;
        tq_split_range(nblk, ith, nth, &b0, &b1);
        int64_t r0 = b0 * QMM_BLK, r1 = b1 * QMM_BLK;
        if (r1 > o->W->rows)
            r1 = o->W->rows;
        if (r0 < r1)
            qmm_rows(j, o, r0, r1);
    }
}

void tq_qmm_run(tq_pool *pool, const tq_qmm_out *outs, int n_out, const float *x, int64_t ldx,
                int64_t n, int act_f32, void *act_a, void *act_k)
{
    if (n_out < 1 || n < 1)
        return;
    const int64_t k = outs[0].W->cols;
    /* the activations, once per call and token, for each kind some output reads */
    int need_a = 0, need_k = 0, need_p = 0;
    tq_qact_quant_fn qa = NULL, qk = NULL;
    int64_t work = 0;
    for (int i = 0; i < n_out; i++) {
        const tq_format *f = outs[i].W->f;
        work += outs[i].W->rows * k * n;
        if (tq_qmm_path(f, act_f32) != TQ_QPATH_Q8)
            continue;
        if (f->act == TQ_ACT_Q8K) {
            need_k = 1;
            qk = f->k.quant_act;
        } else {
            need_a = 1;
            qa = f->k.quant_act;
            need_p |= f->k.gemm_q8 != NULL && n >= QMM_GEMM_MIN;
        }
    }
    size_t ab, kb; /* one token's tq_q8a and tq_q8k bytes */
    tq_qmm_act_bytes(k, 1, &ab, &kb);
    ab = k % TQ_QK ? 0 : (size_t)(k / TQ_QK) * sizeof(tq_q8a);
    qact_job q = {.x = x, .ldx = ldx, .k = k, .n = n, .qa = need_a ? qa : NULL,
                  .qk = need_k ? qk : NULL, .act_a = act_a, .act_k = act_k, .ab = ab, .kb = kb,
                  .act_p = need_p ? (tq_q8p *)((uint8_t *)act_a + qa_bytes(k, n)) : NULL};
    if (q.act_p && n % TQ_Q8P_T) /* the last group's lanes past n stay zero */
        memset(q.act_p + (n / TQ_Q8P_T) * (k / TQ_QK), 0, (size_t)(k / TQ_QK) * sizeof(tq_q8p));
    /* prefill: the tokens split over the threads (a serial loop here was 2-3% of a Gemma 3
     * prefill at 2 threads, the other thread idle); each token's blocks are the same */
    if (n >= QMM_QACT_PAR && tq_pool_size(pool) > 1)
        tq_pool_run(pool, qact_task, &q);
    else
        qact_task(&q, 0, 1);
    qmm_job j = {.outs = outs, .n_out = n_out, .x = x, .ldx = ldx, .n = n, .act_f32 = act_f32,
                 .act_a = act_a, .act_k = act_k, .act_p = q.act_p};
    if (work < 16384 || tq_pool_size(pool) == 1)
        qmm_task(&j, 0, 1);
    else
        tq_pool_run(pool, qmm_task, &j);
}
