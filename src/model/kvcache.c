/* kvcache.c -- KV cache storage and attention per scheme (see kvcache.h).
 *
 * Attention for one query row q (head h, position p) over kv-head g = h / group:
 *     s_t = scale * (q . k_t) for t in [0, p];  w = softmax(s);  out = sum_t w_t v_t
 * Scores, softmax and the weighted sum are f32; the max is subtracted before expf; every sum
 * runs in a fixed order, so a result does not depend on the thread split.
 *
 * Work units are (kv-head, block of queries). A unit gets its kv-head's K/V window as f32 rows
 * once and serves every query head of the GQA group and every query of the block with it:
 * f32 rows are read in place; f16/bf16 rows are widened and codec rows (kv8, kv4, via kv.h)
 * decoded into the thread's scratch ("dequantize-window"). A fused scheme replaces attend(). */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "cpu/matvec.h"
#include "model/kvcache.h"
#include "model/kvcache_turbo.h"

/* ---- f32 attention core over a window of f32 rows ----------------------------------------- */

static inline float dot(const float *a, const float *b, int n)
{
    float s[8] = {0};
    int d = 0;
    for (; d + 8 <= n; d += 8)
        for (int l = 0; l < 8; l++)
            s[l] += a[d + l] * b[d + l];
    float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; d < n; d++)
        r += a[d] * b[d];
    return r;
}

typedef void (*attn_row_fn)(const float *q, const float *K, const float *V, int64_t n_keys,
                           int hd, float scale, float *sc, float *out);

/* one query row: out = softmax(scale q K^T) V over n_keys rows of K and V (stride hd); the
 * portable version of tq_attn_row_avx512() (src/cpu/matvec_attn_avx512.c) */
static void attend_row(const float *q, const float *K, const float *V, int64_t n_keys, int hd,
                       float scale, float *sc, float *out)
{
    float mx = -INFINITY;
    for (int64_t t = 0; t < n_keys; t++) {
        sc[t] = scale * dot(q, K + t * hd, hd);
        mx = sc[t] > mx ? sc[t] : mx;
    }
    float sum = 0.0f;
    for (int64_t t = 0; t < n_keys; t++) {
        sc[t] = expf(sc[t] - mx);
        sum += sc[t];
    }
    memset(out, 0, (size_t)hd * sizeof(float));
    for (int64_t t = 0; t < n_keys; t++) {
        const float w = sc[t], *v = V + t * hd;
        for (int d = 0; d < hd; d++)
            out[d] += w * v[d];
    }
    const float inv = 1.0f / sum;
    for (int d = 0; d < hd; d++)
        out[d] *= inv;
}

/* ---- storage ------------------------------------------------------------------------------- */

static int is_plain(tq_kv_kind k)
{
    return k == TQ_KV_F32 || k == TQ_KV_F16 || k == TQ_KV_BF16;
}

static uint8_t *k_row(const tq_kvcache *c, int il, int g, int64_t pos)
{
    return c->k[il] + ((size_t)g * (size_t)c->n_ctx + (size_t)pos) * c->k_row_bytes;
}

static uint8_t *v_row(const tq_kvcache *c, int il, int g, int64_t pos)
{
    return c->v[il] + ((size_t)g * (size_t)c->n_ctx + (size_t)pos) * c->v_row_bytes;
}

static void put_plain(tq_kv_kind kind, uint8_t *dst, const float *src, int hd)
{
    if (kind == TQ_KV_F32) {
        memcpy(dst, src, (size_t)hd * 4);
        return;
    }
    for (int d = 0; d < hd; d++)
        tq_wr16(dst + 2 * d, kind == TQ_KV_F16 ? tq_f32_to_f16(src[d]) : tq_f32_to_bf16(src[d]));
}

static void get_plain(tq_kv_kind kind, const uint8_t *src, int64_t n_rows, int hd, float *dst)
{
    const int64_t n = n_rows * hd;
    if (kind == TQ_KV_F16) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = tq_f16_to_f32(tq_rd16(src + 2 * i));
    } else {
        for (int64_t i = 0; i < n; i++)
            dst[i] = tq_bits_f32((uint32_t)tq_rd16(src + 2 * i) << 16);
    }
}

static tq_status kv_append(tq_kvcache *c, int il, int64_t pos, const float *k, const float *v,
                           int64_t n)
{
    const int hd = c->head_dim, nkv = c->n_kv_heads;
    const tq_kv_kind kind = c->scheme.kind;
    for (int64_t t = 0; t < n; t++)
        for (int g = 0; g < nkv; g++) {
            const float *ks = k + (t * nkv + g) * hd, *vs = v + (t * nkv + g) * hd;
            uint8_t *kd = k_row(c, il, g, pos + t), *vd = v_row(c, il, g, pos + t);
            if (is_plain(kind)) {
                put_plain(kind, kd, ks, hd);
                put_plain(kind, vd, vs, hd);
                continue;
            }
            tq_status st = tq_kv_encode_k(c->scheme, hd, TQ_DTYPE_F32, ks, 1, kd, c->k_row_bytes,
                                          NULL);
            if (!st)
                st = tq_kv_encode_v(c->scheme, hd, TQ_DTYPE_F32, vs, 1, vd, c->v_row_bytes, NULL);
            if (st)
                return st;
        }
    return TQ_OK;
}

/* ---- attention ----------------------------------------------------------------------------- */

typedef struct att_job {
    tq_kvcache *c;
    int il;
    const float *q;
    int64_t n_q, pos0;
    float *out;
    int64_t qblk;    /* queries per unit */
    int64_t n_qb;    /* query blocks     */
    attn_row_fn row; /* f32 row kernel   */
    int simd;        /* AVX-512 kernels (row, widen, transposed form)      */
    int use_kt;      /* AVX-512 transposed-K form (prefill); chosen from n_q, never from the
                      * thread count, so results do not depend on it */
} att_job;

static void att_task(void *ctx, int ith, int nth)
{
    const att_job *j = ctx;
    const tq_kvcache *c = j->c;
    const int hd = c->head_dim, nh = c->n_heads, group = c->n_heads / c->n_kv_heads;
    const tq_kv_kind kind = c->scheme.kind;
    const int64_t ctx64 = (c->n_ctx + 63) & ~(int64_t)63;
    float *sc = c->scratch + (size_t)ith * c->scratch_floats;
    float *Kf = sc + ctx64, *Vf = Kf + (size_t)c->n_ctx * hd;
    float *Kt = kind == TQ_KV_F32 ? Kf : Vf + (size_t)c->n_ctx * hd;
    int64_t u0, u1;
    tq_split_range((int64_t)c->n_kv_heads * j->n_qb, ith, nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int g = (int)(u / j->n_qb);
        const int64_t i0 = (u % j->n_qb) * j->qblk;
        const int64_t i1 = i0 + j->qblk < j->n_q ? i0 + j->qblk : j->n_q;
        /* keys [lo(i), pos0 + i] for query i; lo rises with i, so the block needs
         * [lo(i0), pos0 + i1) */
        const int64_t W = c->window && c->window[j->il] > 0 ? c->window[j->il] : 0;
        const int64_t lo0 = W && j->pos0 + i0 + 1 > W ? j->pos0 + i0 + 1 - W : 0;
        const int64_t n_win = j->pos0 + i1 - lo0;
        const float *K, *V; /* row t of the window is K + (t - lo0) * hd */
        if (kind == TQ_KV_F32) {
            K = (const float *)(const void *)k_row(c, j->il, g, lo0);
            V = (const float *)(const void *)v_row(c, j->il, g, lo0);
        } else if (is_plain(kind) && j->simd) {
            /* rows are 2-byte aligned little-endian halves: read them as uint16_t */
            tq_attn_widen_avx512((const uint16_t *)(const void *)k_row(c, j->il, g, lo0),
                                 n_win * hd, kind == TQ_KV_F16, Kf);
            tq_attn_widen_avx512((const uint16_t *)(const void *)v_row(c, j->il, g, lo0),
                                 n_win * hd, kind == TQ_KV_F16, Vf);
            K = Kf;
            V = Vf;
        } else if (is_plain(kind)) {
            get_plain(kind, k_row(c, j->il, g, lo0), n_win, hd, Kf);
            get_plain(kind, v_row(c, j->il, g, lo0), n_win, hd, Vf);
            K = Kf;
            V = Vf;
        } else {
            /* rows were encoded by this cache, so decoding cannot fail */
            (void)tq_kv_decode_k(c->scheme, hd, k_row(c, j->il, g, lo0), n_win, Kf, n_win * hd,
                                 NULL);
            (void)tq_kv_decode_v(c->scheme, hd, v_row(c, j->il, g, lo0), n_win, Vf, n_win * hd,
                                 NULL);
            K = Kf;
            V = Vf;
        }
        const int64_t ldt = (n_win + 63) & ~(int64_t)63;
        if (j->use_kt)
            tq_attn_transpose_avx512(K, n_win, hd, Kt, ldt);
        for (int64_t i = i0; i < i1; i++) {
            const int64_t p = j->pos0 + i;
            const int64_t lo = W && p + 1 > W ? p + 1 - W : 0;
            for (int h = g * group; h < (g + 1) * group; h++) {
                const float *q = j->q + (i * nh + h) * hd;
                float *o = j->out + (i * nh + h) * hd;
                if (j->use_kt)
                    tq_attn_row_t_avx512(q, Kt + (lo - lo0), ldt, V + (lo - lo0) * hd,
                                         p - lo + 1, hd, c->scale, sc, o);
                else
                    j->row(q, K + (lo - lo0) * hd, V + (lo - lo0) * hd, p - lo + 1, hd,
                           c->scale, sc, o);
            }
        }
    }
}

static void kv_attend(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0,
                      float *out, tq_pool *pool)
{
    const int nth = c->n_threads > 1 ? c->n_threads : 1;
    /* enough units for every thread (about 4 per thread), but few so that each window is
     * decoded rarely; blocks never change a result, only who computes it */
    int64_t n_qb = (4 * nth + c->n_kv_heads - 1) / c->n_kv_heads;
    if (n_qb > n_q)
        n_qb = n_q;
    if (n_qb < 1)
        n_qb = 1;
    const int64_t qblk = (n_q + n_qb - 1) / n_qb;
    att_job j = {.c = c, .il = il, .q = q, .n_q = n_q, .pos0 = pos0, .out = out, .qblk = qblk,
                 .n_qb = (n_q + qblk - 1) / qblk, .row = attend_row};
    if (tq_cpu_isa() >= TQ_ISA_AVX512 && c->head_dim % 16 == 0) {
        j.row = tq_attn_row_avx512;
        j.simd = 1;
        j.use_kt = n_q >= 4;
    }
    /* small jobs (short decode windows) on the caller: a pool wake-up costs more than them;
     * the units and their results are the same either way */
    const int64_t work = n_q * (pos0 + n_q) * c->n_heads * c->head_dim;
    if (nth > 1 && work >= 32768)
        tq_pool_run(pool, att_task, &j);
    else
        att_task(&j, 0, 1);
}

static const tq_kvc_ops window_ops = {
    .name = "window", .append = kv_append, .attend = kv_attend};

/* ---- lifetime ------------------------------------------------------------------------------ */

tq_status tq_kvcache_create(tq_kv_scheme scheme, int n_layers, int n_heads, int n_kv_heads,
                            int head_dim, int64_t n_ctx, float scale, int n_threads,
                            tq_kvcache **out)
{
    char nm[32];
    *out = NULL;
    if (n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads || head_dim <= 0 ||
        n_ctx <= 0 || n_threads <= 0)
        return TQ_FAIL(TQ_E_ARG, "kv cache: bad shape (layers %d, heads %d/%d, head_dim %d, "
                                 "n_ctx %lld)", n_layers, n_heads, n_kv_heads, head_dim,
                       (long long)n_ctx);
    if (scheme.kind == TQ_KV_TURBO) /* kvcache_turbo.c */
        return tq_kvcache_turbo_create(scheme, n_layers, n_heads, n_kv_heads, head_dim, n_ctx,
                                       scale, n_threads, NULL, out);
    const int plain = is_plain(scheme.kind);
    if (!plain && scheme.kind != TQ_KV_KV8 && scheme.kind != TQ_KV_KV4)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "kv cache: scheme %s is not available in the engine yet; "
                                         "use f32, f16, bf16, kv8 or kv4",
                       tq_kv_scheme_name(scheme, nm, sizeof(nm)));
    size_t kb, vb;
    if (plain) {
        kb = vb = (size_t)head_dim * (scheme.kind == TQ_KV_F32 ? 4 : 2);
    } else {
        tq_status st = tq_kv_check(scheme, head_dim);
        if (st)
            return st;
        if ((st = tq_kv_row_bytes(scheme, head_dim, &kb, &vb)))
            return st;
    }
    tq_kvcache *c = tq_calloc(1, sizeof(*c));
    if (!c)
        return TQ_FAIL(TQ_E_NOMEM, "kv cache: out of memory");
    c->ops = &window_ops;
    c->scheme = scheme;
    c->n_layers = n_layers;
    c->n_heads = n_heads;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->n_ctx = n_ctx;
    c->scale = scale;
    c->k_row_bytes = kb;
    c->v_row_bytes = vb;
    c->n_threads = n_threads;
    size_t per_k, per_v, sf, sbytes;
    c->k = tq_calloc((size_t)n_layers, sizeof(*c->k));
    c->v = tq_calloc((size_t)n_layers, sizeof(*c->v));
    if (!c->k || !c->v || !tq_mul_ok((size_t)n_kv_heads * (size_t)n_ctx, kb, &per_k) ||
        !tq_mul_ok((size_t)n_kv_heads * (size_t)n_ctx, vb, &per_v))
        goto nomem;
    for (int l = 0; l < n_layers; l++) {
        c->k[l] = tq_aligned_alloc(per_k);
        c->v[l] = tq_aligned_alloc(per_v);
        if (!c->k[l] || !c->v[l])
            goto nomem;
    }
    /* per thread: scores (n_ctx rounded up to 64), unless rows are f32 a K and a V window
     * (2 * n_ctx * head_dim), and the transposed K window (head_dim * ctx64, + 64 for the
     * kernel's over-read of its last row) */
    const size_t ctx64 = ((size_t)n_ctx + 63) & ~(size_t)63;
    if (!tq_mul_ok(ctx64, 1 + (size_t)head_dim, &sf) ||
        !tq_add_ok(sf, 64 + (scheme.kind == TQ_KV_F32 ? 0 : 2 * (size_t)n_ctx * head_dim), &sf))
        goto nomem;
    sf = (sf + 15) & ~(size_t)15;
    c->scratch_floats = sf;
    if (!tq_mul_ok(sf * sizeof(float), (size_t)n_threads, &sbytes) ||
        !(c->scratch = tq_aligned_alloc(sbytes)))
        goto nomem;
    memset(c->scratch, 0, sbytes);
    *out = c;
    return TQ_OK;
nomem:
    tq_kvcache_free(c);
    return TQ_FAIL(TQ_E_NOMEM, "kv cache: out of memory for %lld tokens of %s", (long long)n_ctx,
                   tq_kv_scheme_name(scheme, nm, sizeof(nm)));
}

void tq_kvcache_free(tq_kvcache *c)
{
    if (!c)
        return;
    if (c->ops && c->ops->destroy) {
        c->ops->destroy(c);
        return;
    }
    for (int l = 0; l < c->n_layers; l++) {
        if (c->k)
            tq_free(c->k[l]);
        if (c->v)
            tq_free(c->v[l]);
    }
    tq_free(c->k);
    tq_free(c->v);
    tq_free(c->scratch);
    tq_free(c);
}

size_t tq_kvcache_token_bytes(const tq_kvcache *c)
{
    if (c->ops->token_bytes)
        return c->ops->token_bytes(c);
    return (c->k_row_bytes + c->v_row_bytes) * (size_t)c->n_kv_heads * (size_t)c->n_layers;
}

size_t tq_kvcache_capacity_bytes(const tq_kvcache *c)
{
    return tq_kvcache_token_bytes(c) * (size_t)c->n_ctx;
}
