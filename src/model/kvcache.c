/* kvcache.c -- KV cache storage and attention per scheme (see kvcache.h).
 *
 * Attention for one query row q (head h, position p) over kv-head g = h / group:
 *     s_t = scale * (q . k_t) for t in [0, p];  w = softmax(s);  out = sum_t w_t v_t
 * Scores, softmax and the weighted sum are f32; the max is subtracted before expf; sums run in
 * a fixed order, so the result does not depend on the thread split.
 *
 * Plain schemes (f32, f16, bf16) read their rows directly; work is split over (query, head)
 * pairs. Codec schemes (kv8, kv4, via kv.h) split work over kv-heads: each kv-head's window is
 * decoded once into the thread's scratch and then serves all query heads of its group. */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "model/kvcache.h"

static int is_plain(tq_kv_kind k)
{
    return k == TQ_KV_F32 || k == TQ_KV_F16 || k == TQ_KV_BF16;
}

static inline float row_at(tq_kv_kind kind, const uint8_t *row, int d)
{
    if (kind == TQ_KV_F32) {
        float f;
        memcpy(&f, row + 4 * (size_t)d, 4);
        return f;
    }
    const uint16_t h = tq_rd16(row + 2 * (size_t)d);
    return kind == TQ_KV_F16 ? tq_f16_to_f32(h) : tq_bits_f32((uint32_t)h << 16);
}

static float dot_plain(tq_kv_kind kind, const uint8_t *row, const float *q, int hd)
{
    float s = 0.0f;
    if (kind == TQ_KV_F32) {
        const float *r = (const float *)(const void *)row; /* rows are 4-byte aligned */
        for (int d = 0; d < hd; d++)
            s += q[d] * r[d];
        return s;
    }
    for (int d = 0; d < hd; d++)
        s += q[d] * row_at(kind, row, d);
    return s;
}

static void axpy_plain(tq_kv_kind kind, const uint8_t *row, float w, float *out, int hd)
{
    if (kind == TQ_KV_F32) {
        const float *r = (const float *)(const void *)row;
        for (int d = 0; d < hd; d++)
            out[d] += w * r[d];
        return;
    }
    for (int d = 0; d < hd; d++)
        out[d] += w * row_at(kind, row, d);
}

/* softmax of s[0..n) in place; returns 1/sum */
static float softmax_inplace(float *s, int64_t n)
{
    float mx = -INFINITY;
    for (int64_t t = 0; t < n; t++)
        mx = s[t] > mx ? s[t] : mx;
    float sum = 0.0f;
    for (int64_t t = 0; t < n; t++) {
        s[t] = expf(s[t] - mx);
        sum += s[t];
    }
    return 1.0f / sum;
}

/* ---- plain rows ------------------------------------------------------------------------ */

static tq_status plain_append(tq_kvcache *c, int il, int64_t pos, const float *k, const float *v,
                              int64_t n)
{
    const int hd = c->head_dim, nkv = c->n_kv_heads;
    const tq_kv_kind kind = c->scheme.kind;
    for (int64_t t = 0; t < n; t++)
        for (int g = 0; g < nkv; g++) {
            const float *ks = k + (t * nkv + g) * hd, *vs = v + (t * nkv + g) * hd;
            uint8_t *kd = c->k[il] + ((size_t)g * c->n_ctx + (size_t)(pos + t)) * c->k_row_bytes;
            uint8_t *vd = c->v[il] + ((size_t)g * c->n_ctx + (size_t)(pos + t)) * c->v_row_bytes;
            if (kind == TQ_KV_F32) {
                memcpy(kd, ks, (size_t)hd * 4);
                memcpy(vd, vs, (size_t)hd * 4);
            } else {
                for (int d = 0; d < hd; d++) {
                    tq_wr16(kd + 2 * d, kind == TQ_KV_F16 ? tq_f32_to_f16(ks[d])
                                                          : tq_f32_to_bf16(ks[d]));
                    tq_wr16(vd + 2 * d, kind == TQ_KV_F16 ? tq_f32_to_f16(vs[d])
                                                          : tq_f32_to_bf16(vs[d]));
                }
            }
        }
    return TQ_OK;
}

typedef struct att_job {
    tq_kvcache *c;
    int il;
    const float *q;
    int64_t n_q, pos0;
    float *out;
} att_job;

static void plain_task(void *ctx, int ith, int nth)
{
    const att_job *j = ctx;
    const tq_kvcache *c = j->c;
    const int hd = c->head_dim, nh = c->n_heads, group = c->n_heads / c->n_kv_heads;
    const tq_kv_kind kind = c->scheme.kind;
    float *sc = c->scratch + (size_t)ith * c->scratch_floats;
    int64_t u0, u1;
    tq_split_range(j->n_q * nh, ith, nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t i = u / nh;
        const int h = (int)(u % nh), g = h / group;
        const int64_t n_keys = j->pos0 + i + 1;
        const float *q = j->q + (i * nh + h) * hd;
        const uint8_t *K = c->k[j->il] + (size_t)g * c->n_ctx * c->k_row_bytes;
        const uint8_t *V = c->v[j->il] + (size_t)g * c->n_ctx * c->v_row_bytes;
        for (int64_t t = 0; t < n_keys; t++)
            sc[t] = c->scale * dot_plain(kind, K + (size_t)t * c->k_row_bytes, q, hd);
        const float inv = softmax_inplace(sc, n_keys);
        float *o = j->out + (i * nh + h) * hd;
        memset(o, 0, (size_t)hd * sizeof(float));
        for (int64_t t = 0; t < n_keys; t++)
            axpy_plain(kind, V + (size_t)t * c->v_row_bytes, sc[t], o, hd);
        for (int d = 0; d < hd; d++)
            o[d] *= inv;
    }
}

static void plain_attend(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0,
                         float *out, tq_pool *pool)
{
    att_job j = {.c = c, .il = il, .q = q, .n_q = n_q, .pos0 = pos0, .out = out};
    tq_pool_run(c->n_threads > 1 ? pool : NULL, plain_task, &j);
}

static const tq_kvc_ops plain_ops = {"plain", plain_append, plain_attend};

/* ---- codec rows (kv8, kv4): encode new rows, decode a window per kv-head ---------------- */

static tq_status codec_append(tq_kvcache *c, int il, int64_t pos, const float *k, const float *v,
                              int64_t n)
{
    const int hd = c->head_dim, nkv = c->n_kv_heads;
    for (int64_t t = 0; t < n; t++)
        for (int g = 0; g < nkv; g++) {
            const float *ks = k + (t * nkv + g) * hd, *vs = v + (t * nkv + g) * hd;
            uint8_t *kd = c->k[il] + ((size_t)g * c->n_ctx + (size_t)(pos + t)) * c->k_row_bytes;
            uint8_t *vd = c->v[il] + ((size_t)g * c->n_ctx + (size_t)(pos + t)) * c->v_row_bytes;
            tq_status st = tq_kv_encode_k(c->scheme, hd, TQ_DTYPE_F32, ks, 1, kd, c->k_row_bytes,
                                          NULL);
            if (!st)
                st = tq_kv_encode_v(c->scheme, hd, TQ_DTYPE_F32, vs, 1, vd, c->v_row_bytes, NULL);
            if (st)
                return st;
        }
    return TQ_OK;
}

static void codec_task(void *ctx, int ith, int nth)
{
    const att_job *j = ctx;
    const tq_kvcache *c = j->c;
    const int hd = c->head_dim, nh = c->n_heads, group = c->n_heads / c->n_kv_heads;
    float *sc = c->scratch + (size_t)ith * c->scratch_floats;
    float *Kf = sc + c->n_ctx, *Vf = Kf + (size_t)c->n_ctx * hd;
    const int64_t n_win = j->pos0 + j->n_q;
    int64_t g0, g1;
    tq_split_range(c->n_kv_heads, ith, nth, &g0, &g1);
    for (int64_t g = g0; g < g1; g++) {
        const uint8_t *K = c->k[j->il] + (size_t)g * c->n_ctx * c->k_row_bytes;
        const uint8_t *V = c->v[j->il] + (size_t)g * c->n_ctx * c->v_row_bytes;
        /* the rows were encoded by this cache, so decoding cannot fail */
        (void)tq_kv_decode_k(c->scheme, hd, K, n_win, Kf, n_win * hd, NULL);
        (void)tq_kv_decode_v(c->scheme, hd, V, n_win, Vf, n_win * hd, NULL);
        for (int64_t i = 0; i < j->n_q; i++) {
            const int64_t n_keys = j->pos0 + i + 1;
            for (int h = (int)g * group; h < ((int)g + 1) * group; h++) {
                const float *q = j->q + (i * nh + h) * hd;
                for (int64_t t = 0; t < n_keys; t++) {
                    const float *kr = Kf + t * hd;
                    float s = 0.0f;
                    for (int d = 0; d < hd; d++)
                        s += q[d] * kr[d];
                    sc[t] = c->scale * s;
                }
                const float inv = softmax_inplace(sc, n_keys);
                float *o = j->out + (i * nh + h) * hd;
                memset(o, 0, (size_t)hd * sizeof(float));
                for (int64_t t = 0; t < n_keys; t++) {
                    const float *vr = Vf + t * hd;
                    for (int d = 0; d < hd; d++)
                        o[d] += sc[t] * vr[d];
                }
                for (int d = 0; d < hd; d++)
                    o[d] *= inv;
            }
        }
    }
}

static void codec_attend(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0,
                         float *out, tq_pool *pool)
{
    att_job j = {.c = c, .il = il, .q = q, .n_q = n_q, .pos0 = pos0, .out = out};
    tq_pool_run(c->n_threads > 1 ? pool : NULL, codec_task, &j);
}

static const tq_kvc_ops codec_ops = {"dequant-window", codec_append, codec_attend};

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
    c->ops = plain ? &plain_ops : &codec_ops;
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
    size_t per_k, per_v, sf;
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
    /* scores (n_ctx) + for codec schemes a decoded K and V window (2 * n_ctx * head_dim) */
    sf = (size_t)n_ctx * (plain ? 1 : 1 + 2 * (size_t)head_dim);
    sf = (sf + 15) & ~(size_t)15;
    c->scratch_floats = sf;
    size_t sbytes;
    if (!tq_mul_ok(sf * sizeof(float), (size_t)n_threads, &sbytes))
        goto nomem;
    if (!(c->scratch = tq_aligned_alloc(sbytes)))
        goto nomem;
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
    return (c->k_row_bytes + c->v_row_bytes) * (size_t)c->n_kv_heads * (size_t)c->n_layers;
}

size_t tq_kvcache_capacity_bytes(const tq_kvcache *c)
{
    return tq_kvcache_token_bytes(c) * (size_t)c->n_ctx;
}
