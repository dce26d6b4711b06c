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
#include "cpu/attn_cpu.h"
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

/* query positions per call of the blocked prefill kernels (tq_attn_block_*, attn_cpu.h) */
#define TQ_ATTN_QB 4

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

/* rows [lo, lo + n) of kv-head g of layer il as one contiguous run: in place unless the
 * layer's ring wraps inside them, else copied (raw bytes, the stored format) into un (room for
 * n rows of K then n of V); *kp, *vp point at row lo */
static void window_rows(const tq_kvcache *c, int il, int g, int64_t lo, int64_t n,
                        unsigned char *un, const uint8_t **kp, const uint8_t **vp)
{
    const int64_t S = tq_kvc_slots(c, il), s0 = lo % S;
    const size_t kr = c->k_row_bytes, vr = c->v_row_bytes;
    const uint8_t *K = c->k[il] + (size_t)g * (size_t)S * kr;
    const uint8_t *V = c->v[il] + (size_t)g * (size_t)S * vr;
    if (s0 + n <= S) {
        *kp = K + (size_t)s0 * kr;
        *vp = V + (size_t)s0 * vr;
        return;
    }
    const size_t a = (size_t)(S - s0), b = (size_t)(n - (S - s0));
    unsigned char *uk = un, *uv = un + (size_t)n * kr;
    memcpy(uk, K + (size_t)s0 * kr, a * kr);
    memcpy(uk + a * kr, K, b * kr);
    memcpy(uv, V + (size_t)s0 * vr, a * vr);
    memcpy(uv + a * vr, V, b * vr);
    *kp = uk;
    *vp = uv;
}

/* tq_f32_to_bf16() without a branch (the compiler vectorizes the loop; the same bits, NaN
 * quieted): the KV append of a bf16 cache was ~1% of a prefill as a scalar loop */
static inline uint16_t bf16_of(float f)
{
    const uint32_t x = tq_f32_bits(f);
    const uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16, nan = (x >> 16) | 0x40u;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

static void put_plain(tq_kv_kind kind, uint8_t *dst, const float *src, int hd)
{
    if (kind == TQ_KV_F32) {
        memcpy(dst, src, (size_t)hd * 4);
        return;
    }
    if (kind == TQ_KV_BF16) {
        for (int d = 0; d < hd; d++)
            tq_wr16(dst + 2 * d, bf16_of(src[d]));
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

tq_status tq_kvc_append_check(tq_kvcache *c, int il, int64_t pos, int64_t n)
{
    const int64_t S = tq_kvc_slots(c, il);
    if (tq_kvc_is_ring(c, il)) {
        const int64_t W = c->window[il];
        if (pos == 0)
            c->ring_lo[il] = 0;
        const int64_t need = pos + 1 > W ? pos + 1 - W : 0; /* the first new query's oldest key */
        if (pos > 0 && need < c->ring_lo[il])
            return TQ_FAIL(TQ_E_UNSUPPORTED, "kv cache: layer %d keeps only its sliding window "
                                             "(a ring of %lld rows) and holds positions from "
                                             "%lld; position %lld needs the keys from %lld (the "
                                             "session was trimmed below the window's start): "
                                             "reset the session and evaluate the prompt again",
                           il, (long long)S, (long long)c->ring_lo[il], (long long)pos,
                           (long long)need);
        if (n > S - W + 1)
            return TQ_FAIL(TQ_E_ARG, "kv cache: layer %d: %lld tokens in one call, its ring of "
                                     "%lld rows (window %lld) takes at most %lld; use a smaller "
                                     "batch", il, (long long)n, (long long)S, (long long)W,
                           (long long)(S - W + 1));
        if (pos + n - S > c->ring_lo[il])
            c->ring_lo[il] = pos + n - S;
    }
    return TQ_OK;
}

tq_status tq_kvc_append_rows(tq_kvcache *c, int il, int64_t pos, const float *k, const float *v,
                             int64_t n, size_t k_rb, size_t v_rb, tq_kvc_put_fn put, void *ctx)
{
    const int hd = c->head_dim, nkv = c->n_kv_heads;
    const int64_t S = tq_kvc_slots(c, il);
    tq_status st0 = tq_kvc_append_check(c, il, pos, n);
    if (st0)
        return st0;
    for (int64_t t = 0; t < n; t++)
        for (int g = 0; g < nkv; g++) {
            const size_t row = (size_t)g * (size_t)S + (size_t)((pos + t) % S);
            const tq_status st = put(c, il, k + (t * nkv + g) * hd, v + (t * nkv + g) * hd,
                                     c->k[il] + row * k_rb, c->v[il] + row * v_rb, ctx);
            if (st)
                return st;
        }
    return TQ_OK;
}

tq_status tq_kvcache_attend_batch(const tq_kvc_item *it, int n, int il, tq_pool *pool)
{
    enum { MAXB = 256 };
    tq_kvc_item grp[MAXB];
    unsigned char done[MAXB] = {0};
    if (n > MAXB) { /* slices of MAXB items (the engine's batches are at most 256) */
        tq_status st = tq_kvcache_attend_batch(it, MAXB, il, pool);
        return st ? st : tq_kvcache_attend_batch(it + MAXB, n - MAXB, il, pool);
    }
    for (int a = 0; a < n; a++) {
        if (done[a])
            continue;
        const tq_kvc_ops *ops = it[a].c->ops;
        if (!ops->batch) {
            tq_kvcache *c = it[a].c;
            tq_status st = ops->append(c, il, it[a].pos, it[a].k, it[a].v, it[a].n);
            if (st)
                return st;
            ops->attend(c, il, it[a].q, it[a].n, it[a].pos, it[a].out, pool);
            continue;
        }
        int m = 0; /* every later item of the same ops table joins this group */
        for (int b = a; b < n; b++)
            if (!done[b] && it[b].c->ops == ops) {
                grp[m++] = it[b];
                done[b] = 1;
            }
        tq_status st = ops->batch(grp, m, il, pool);
        if (st)
            return st;
    }
    return TQ_OK;
}

void tq_kvc_free_rows(tq_kvcache *c)
{
    for (int l = 0; l < c->n_layers; l++) {
        if (c->k)
            tq_free(c->k[l]);
        if (c->v)
            tq_free(c->v[l]);
    }
    tq_free(c->k);
    tq_free(c->v);
    c->k = c->v = NULL;
    tq_free(c->slots);
    tq_free(c->ring_lo);
    tq_free(c->unwrap);
    c->slots = c->ring_lo = NULL;
    c->unwrap = NULL;
}

static tq_status kv_put(tq_kvcache *c, int il, const float *ks, const float *vs, uint8_t *kd,
                        uint8_t *vd, void *ctx)
{
    const int hd = c->head_dim;
    const tq_kv_kind kind = c->scheme.kind;
    if (is_plain(kind)) {
        put_plain(kind, kd, ks, hd);
        put_plain(kind, vd, vs, hd);
        return TQ_OK;
    }
    tq_status st = tq_kv_encode_k(c->scheme, hd, TQ_DTYPE_F32, ks, 1, kd, c->k_row_bytes, NULL);
    if (!st)
        st = tq_kv_encode_v(c->scheme, hd, TQ_DTYPE_F32, vs, 1, vd, c->v_row_bytes, NULL);
    return st;
}

static tq_status kv_append(tq_kvcache *c, int il, int64_t pos, const float *k, const float *v,
                           int64_t n)
{
    return tq_kvc_append_rows(c, il, pos, k, v, n, c->k_row_bytes, c->v_row_bytes, kv_put, NULL);
}

/* ---- attention ----------------------------------------------------------------------------- */

typedef struct att_job {
    tq_kvcache *c;
    int il;
    const float *q;
    int64_t n_q, pos0;
    float *out;
    int64_t qblk;    /* queries per unit                                     */
    int64_t n_qb;    /* query blocks                                         */
    int hpu;         /* query heads per unit (a divisor-free split of group)  */
    int64_t n_hs;    /* head sets per kv-head: ceil(group / hpu)              */
    attn_row_fn row; /* f32 row kernel (scalar, AVX-512)                      */
    tq_isa isa;      /* kernels: AVX-512 (row + widen), AVX2 (heads, in place), scalar */
} att_job;

static tq_attn_rows rows_of(tq_kv_kind kind)
{
    return kind == TQ_KV_F16 ? TQ_ATTN_F16 : kind == TQ_KV_BF16 ? TQ_ATTN_BF16 : TQ_ATTN_F32;
}

/* One unit = (kv-head g, block of queries, set of query heads). Which unit computes a row never
 * changes its floats: every kernel is called with that row's q and window only. */
static void att_task(void *ctx, int ith, int nth)
{
    const att_job *j = ctx;
    const tq_kvcache *c = j->c;
    const int hd = c->head_dim, nh = c->n_heads, group = c->n_heads / c->n_kv_heads;
    const tq_kv_kind kind = c->scheme.kind;
    const int64_t ctx64 = (c->n_ctx + 8 + 63) & ~(int64_t)63; /* > n_keys rounded up to 8 */
    float *sc = c->scratch + (size_t)ith * c->scratch_floats;
    float *Kf = sc + (size_t)TQ_ATTN_QB * group * ctx64, *Vf = Kf + (size_t)c->n_ctx * hd;
    /* AVX2 reads plain rows in place (f16/bf16 widened in registers) */
    const int in_place = kind == TQ_KV_F32 || (is_plain(kind) && j->isa == TQ_ISA_AVX2);
    /* Prefill (several query blocks): a causal block's cost grows with its index (block qb
     * reads about 2 qb + 1 blocks of keys), so a contiguous split left the last thread most of
     * the work (Gemma 3, one kv head, 8 blocks on 2 threads: 48 of 64 parts). The units are
     * dealt in snake order (threads 0..nth-1, then nth-1..0, ...): 32 / 32 there. Decode (one
     * block) keeps contiguous units, which share a kv head's window in cache. */
    const int64_t n_units = (int64_t)c->n_kv_heads * j->n_qb * j->n_hs;
    const int snake = j->n_qb > 1 && nth > 1;
    int64_t u0, u1;
    tq_split_range(n_units, ith, nth, &u0, &u1);
    if (snake) {
        u0 = 0;
        u1 = n_units;
    }
    for (int64_t u = u0; u < u1; u++) {
        if (snake && (u / nth % 2 ? nth - 1 - u % nth : u % nth) != ith)
            continue;
        const int g = (int)(u / (j->n_qb * j->n_hs));
        const int64_t qb = u / j->n_hs % j->n_qb, hs = u % j->n_hs;
        const int64_t i0 = qb * j->qblk;
        const int64_t i1 = i0 + j->qblk < j->n_q ? i0 + j->qblk : j->n_q;
        const int h0 = g * group + (int)hs * j->hpu;
        const int h1 = h0 + j->hpu < (g + 1) * group ? h0 + j->hpu : (g + 1) * group;
        /* keys [lo(i), pos0 + i] for query i; lo rises with i, so the block needs
         * [lo(i0), pos0 + i1) */
        const int64_t W = c->window && c->window[j->il] > 0 ? c->window[j->il] : 0;
        const int64_t lo0 = W && j->pos0 + i0 + 1 > W ? j->pos0 + i0 + 1 - W : 0;
        const int64_t n_win = j->pos0 + i1 - lo0;
        const void *K, *V; /* row t of the window is row t - lo0 here */
        size_t eb = sizeof(float); /* bytes per element of K, V */
        const uint8_t *kr, *vr;    /* the window's stored rows, contiguous (ring: unwrapped) */
        window_rows(c, j->il, g, lo0, n_win,
                    c->unwrap ? c->unwrap + (size_t)ith * c->unwrap_bytes : NULL, &kr, &vr);
        if (in_place) {
            K = kr;
            V = vr;
            eb = kind == TQ_KV_F32 ? 4 : 2;
        } else if (is_plain(kind) && j->isa == TQ_ISA_AVX512) {
            /* rows are 2-byte aligned little-endian halves: read them as uint16_t */
            tq_attn_widen_avx512((const uint16_t *)(const void *)kr, n_win * hd,
                                 kind == TQ_KV_F16, Kf);
            tq_attn_widen_avx512((const uint16_t *)(const void *)vr, n_win * hd,
                                 kind == TQ_KV_F16, Vf);
            K = Kf;
            V = Vf;
        } else if (is_plain(kind)) {
            get_plain(kind, kr, n_win, hd, Kf);
            get_plain(kind, vr, n_win, hd, Vf);
            K = Kf;
            V = Vf;
        } else {
            /* rows were encoded by this cache, so decoding cannot fail */
            (void)tq_kv_decode_k(c->scheme, hd, kr, n_win, Kf, n_win * hd, NULL);
            (void)tq_kv_decode_v(c->scheme, hd, vr, n_win, Vf, n_win * hd, NULL);
            K = Kf;
            V = Vf;
        }
        const tq_attn_rows rows = in_place ? rows_of(kind) : TQ_ATTN_F32;
        for (int64_t i = i0; i < i1; i++) {
            const int64_t p = j->pos0 + i;
            const int64_t lo = W && p + 1 > W ? p + 1 - W : 0;
            /* up to TQ_ATTN_QB positions that share the window's origin (prefill) in one block
             * kernel call: each K/V row loaded once per block, the same floats per row. AVX-512
             * decode too (one position: the unit's G heads share each 16-key group of K in L1;
             * test_attn_bench --shape 4,1,256 decode at 1024 keys 0.25 -> 0.15-0.20 ms) */
            const int64_t nb = i1 - i < TQ_ATTN_QB ? i1 - i : TQ_ATTN_QB;
            const int64_t pl = p + nb - 1;
            if ((nb > 1 || j->isa == TQ_ISA_AVX512) && j->isa != TQ_ISA_SCALAR &&
                (W && pl + 1 > W ? pl + 1 - W : 0) == lo) {
                const unsigned char *Kb = (const unsigned char *)K + (size_t)(lo - lo0) * hd * eb;
                const unsigned char *Vb = (const unsigned char *)V + (size_t)(lo - lo0) * hd * eb;
                const float *q = j->q + (i * nh + h0) * hd;
                float *o = j->out + (i * nh + h0) * hd;
                if (j->isa == TQ_ISA_AVX2)
                    tq_attn_block_avx2(q, (int64_t)nh * hd, (int)nb, h1 - h0, Kb, Vb, rows,
                                       p - lo + 1, hd, c->scale, sc, ctx64, o, (int64_t)nh * hd);
                else
                    tq_attn_block_avx512(q, (int64_t)nh * hd, (int)nb, h1 - h0,
                                         (const float *)(const void *)Kb,
                                         (const float *)(const void *)Vb, p - lo + 1, hd,
                                         c->scale, sc, ctx64, o, (int64_t)nh * hd);
                i += nb - 1;
                continue;
            }
            const unsigned char *Kw = (const unsigned char *)K + (size_t)(lo - lo0) * hd * eb;
            const unsigned char *Vw = (const unsigned char *)V + (size_t)(lo - lo0) * hd * eb;
            const float *q = j->q + (i * nh + h0) * hd;
            float *o = j->out + (i * nh + h0) * hd;
            if (j->isa == TQ_ISA_AVX2) {
                tq_attn_heads_avx2(q, h1 - h0, Kw, Vw, rows, p - lo + 1, hd, c->scale, sc, ctx64,
                                   o);
                continue;
            }
            for (int h = 0; h < h1 - h0; h++)
                j->row(q + (size_t)h * hd, (const float *)(const void *)Kw,
                       (const float *)(const void *)Vw, p - lo + 1, hd, c->scale, sc,
                       o + (size_t)h * hd);
        }
    }
}

static void kv_attend(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0,
                      float *out, tq_pool *pool)
{
    const int nth = c->n_threads > 1 ? c->n_threads : 1;
    const int group = c->n_heads / c->n_kv_heads;
    /* enough units for every thread (about 4 per thread), but few so that each window is
     * decoded rarely; blocks never change a result, only who computes it */
    int64_t n_qb = (4 * nth + c->n_kv_heads - 1) / c->n_kv_heads;
    if (n_qb > n_q)
        n_qb = n_q;
    if (n_qb < 1)
        n_qb = 1;
    const int64_t qblk = (n_q + n_qb - 1) / n_qb;
    att_job j = {.c = c, .il = il, .q = q, .n_q = n_q, .pos0 = pos0, .out = out, .qblk = qblk,
                 .n_qb = (n_q + qblk - 1) / qblk, .hpu = group, .n_hs = 1, .row = attend_row,
                 .isa = TQ_ISA_SCALAR};
    const tq_isa isa = tq_cpu_isa();
    /* AVX-512: the row kernel for decode and prefill alike (one score function per ISA: the
     * transposed-K form rounds differently, so a row would not give the same floats alone and
     * inside a prefill block) */
    if (isa >= TQ_ISA_AVX512 && c->head_dim % 16 == 0) {
        j.row = tq_attn_row_avx512;
        j.isa = TQ_ISA_AVX512;
    } else if (isa >= TQ_ISA_AVX2 && c->head_dim % 8 == 0) {
        j.isa = TQ_ISA_AVX2;
        /* rows read in place cost nothing to share, so few units (decode) split the heads:
         * each unit reads the whole window, the second and third time from L3 (measured: a
         * 1-head unit costs a third of a 3-head one at 8k), and 9 units balance 2 threads
         * where 3 do not */
        const int64_t units = c->n_kv_heads * j.n_qb;
        if (is_plain(c->scheme.kind) && units < 4 * nth) {
            int64_t n_hs = (4 * nth + units - 1) / units;
            n_hs = n_hs < group ? n_hs : group;
            j.hpu = (int)((group + n_hs - 1) / n_hs);
            j.n_hs = (group + j.hpu - 1) / j.hpu;
        }
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
    *out = NULL;
    if (scheme.kind == TQ_KV_ROT && n_layers > 0 && n_heads > 0 && n_kv_heads > 0 &&
        n_heads % n_kv_heads == 0 && n_ctx > 0 && n_threads > 0) /* fused: kvcache_rot.c */
        return tq_kvcache_rot_create(scheme, n_layers, n_heads, n_kv_heads, head_dim, n_ctx,
                                     scale, n_threads, out);
    return tq_kvcache_window_create(scheme, n_layers, n_heads, n_kv_heads, head_dim, n_ctx, scale,
                                    n_threads, out);
}

tq_status tq_kvcache_window_create(tq_kv_scheme scheme, int n_layers, int n_heads, int n_kv_heads,
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
    if (!plain && scheme.kind != TQ_KV_KV8 && scheme.kind != TQ_KV_KV4 &&
        scheme.kind != TQ_KV_ROT) /* rot: decoded through kv.h like kv8 (src/kv/kv_rot.c) */
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
    /* per thread: the scores of every query head of a GQA group for TQ_ATTN_QB positions
     * (n_ctx + 8 rounded up to 64 each), 64 floats of slack, and unless rows are f32 a K and a V
     * window (2 n_ctx head_dim) */
    const size_t ctx64 = ((size_t)n_ctx + 8 + 63) & ~(size_t)63;
    if (!tq_mul_ok(ctx64, (size_t)TQ_ATTN_QB * (size_t)(n_heads / n_kv_heads), &sf) ||
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
    tq_kvc_free_rows(c);
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
    return tq_kvcache_bytes_at(c, c->n_ctx);
}

size_t tq_kvcache_bytes_at(const tq_kvcache *c, int64_t n)
{
    if (!c->slots)
        return tq_kvcache_token_bytes(c) * (size_t)n;
    size_t b = 0;
    for (int l = 0; l < c->n_layers; l++) {
        size_t kr, vr;
        tq_kvcache_layer_rb(c, l, &kr, &vr);
        const int64_t rows = n < c->slots[l] ? n : c->slots[l];
        b += (kr + vr) * (size_t)c->n_kv_heads * (size_t)rows;
    }
    return b;
}

void tq_kvcache_layer_rb(const tq_kvcache *c, int il, size_t *k_rb, size_t *v_rb)
{
    if (c->scheme.kind == TQ_KV_TURBO) {
        const tq_kvc_turbo *t = (const tq_kvc_turbo *)(const void *)c;
        *k_rb = t->k_rb[il];
        *v_rb = t->v_rb[il];
        return;
    }
    *k_rb = c->k_row_bytes;
    *v_rb = c->v_row_bytes;
}

tq_status tq_kvcache_set_window(tq_kvcache *c, const int *window, int n_batch, int keep_all)
{
    c->window = window;
    if (!window || keep_all || c->slots)
        return TQ_OK;
    const int64_t nb = n_batch > 0 ? n_batch : 1;
    int any = 0;
    for (int l = 0; l < c->n_layers; l++) {
        const int64_t S = (window[l] + nb + TQ_KVC_RING_ALIGN - 1) / TQ_KVC_RING_ALIGN *
                          TQ_KVC_RING_ALIGN;
        any |= window[l] > 0 && S < c->n_ctx;
    }
    if (!any)
        return TQ_OK;
    c->slots = tq_calloc((size_t)c->n_layers, sizeof(*c->slots));
    c->ring_lo = tq_calloc((size_t)c->n_layers, sizeof(*c->ring_lo));
    if (!c->slots || !c->ring_lo)
        goto nomem;
    for (int l = 0; l < c->n_layers; l++)
        c->slots[l] = c->n_ctx; /* layers not (yet) converted keep every row */
    size_t un = 0;
    for (int l = 0; l < c->n_layers; l++) {
        const int64_t S = (window[l] + nb + TQ_KVC_RING_ALIGN - 1) / TQ_KVC_RING_ALIGN *
                          TQ_KVC_RING_ALIGN;
        if (window[l] <= 0 || S >= c->n_ctx)
            continue;
        size_t kr, vr;
        tq_kvcache_layer_rb(c, l, &kr, &vr);
        const size_t kb = (size_t)c->n_kv_heads * (size_t)S * kr;
        const size_t vb = (size_t)c->n_kv_heads * (size_t)S * vr;
        uint8_t *k = tq_aligned_alloc(kb), *v = tq_aligned_alloc(vb);
        if (!k || !v) {
            tq_free(k);
            tq_free(v);
            goto nomem;
        }
        memset(k, 0, kb); /* slots before the first wrap are decoded (masked) by block kernels */
        memset(v, 0, vb);
        tq_free(c->k[l]);
        tq_free(c->v[l]);
        c->k[l] = k;
        c->v[l] = v;
        c->slots[l] = S;
        un = un > (size_t)S * (kr + vr) ? un : (size_t)S * (kr + vr);
    }
    if (c->ops == &window_ops) { /* dequantize-window attention: unwrapped windows */
        c->unwrap_bytes = (un + 63) & ~(size_t)63;
        if (!(c->unwrap = tq_aligned_alloc(c->unwrap_bytes * (size_t)c->n_threads)))
            goto nomem;
    }
    return TQ_OK;
nomem:
    return TQ_FAIL(TQ_E_NOMEM, "kv cache: out of memory for the sliding-window rings");
}

tq_status tq_kvcache_resume_check(const tq_kvcache *c, int64_t n_past)
{
    if (!c->slots || n_past <= 0)
        return TQ_OK;
    for (int l = 0; l < c->n_layers; l++) {
        if (!tq_kvc_is_ring(c, l))
            continue;
        const int64_t W = c->window[l], need = n_past + 1 > W ? n_past + 1 - W : 0;
        if (need < c->ring_lo[l])
            return TQ_FAIL(TQ_E_UNSUPPORTED, "kv cache: cannot go back to %lld tokens: layer %d "
                                             "keeps only its sliding window of %lld tokens and "
                                             "holds positions from %lld, the next token needs "
                                             "them from %lld (it can go back to %lld tokens at "
                                             "most); reset the session and evaluate the prompt "
                                             "again, or create the session with swa_full",
                           (long long)n_past, l, (long long)W, (long long)c->ring_lo[l],
                           (long long)need, (long long)(c->ring_lo[l] + W - 1));
    }
    return TQ_OK;
}
