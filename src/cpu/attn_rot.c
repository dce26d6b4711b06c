/* attn_rot.c -- fused attention over rotated block-coded K/V rows (attn_rot.h): the scalar
 * kernels (the specification of dec() and block()), the ISA table and the chunked driver.
 * Plain C; no allocation (every buffer is the caller's scratch). */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "core/half.h"
#include "cpu/attn_rot.h"

int tq_rot_code_row_ok(const tq_rot_code *c, int d)
{
    if (!c || d <= 0 || d % 64 || d > TQ_ROT_MAX_HD || c->block_bytes <= 0 || c->block_bytes > 64)
        return 0;
    switch (c->kind) {
    case TQ_ROTC_Q8_0:
        return c->group == 32 && c->block_bytes == 34;
    case TQ_ROTC_Q5_0:
        return c->group == 32 && c->block_bytes == 22;
    case TQ_ROTC_Q4_0:
        return c->group == 32 && c->block_bytes == 18;
    case TQ_ROTC_IQ4_NL:
        return c->group == 32 && c->block_bytes == 18 && c->grid;
    case TQ_ROTC_LM:
        return (c->group == 32 || c->group == 64) && c->levels >= 2 && c->grid &&
               c->pair_bits >= 1 && c->pair_bits <= 16 && c->levels * c->levels <= 1 << c->pair_bits &&
               c->block_bytes == 2 + c->group / 2 * c->pair_bits / 8;
    }
    return 0;
}

size_t tq_rot_code_pairs_floats(const tq_rot_code *c)
{
    return c && c->kind == TQ_ROTC_LM && c->pair_bits >= 1 && c->pair_bits <= 16
               ? (size_t)2 << c->pair_bits
               : 0;
}

void tq_rot_code_fill_pairs(const tq_rot_code *c, float *pairs)
{
    const unsigned L = (unsigned)c->levels, n = (unsigned)(tq_rot_code_pairs_floats(c) / 2);
    for (unsigned v = 0; v < n; v++) { /* the same (i0, i1) as dec_block() below */
        const unsigned i1 = v / L;
        pairs[2 * v] = c->grid[v % L];
        pairs[2 * v + 1] = c->grid[i1 < L ? i1 : L - 1];
    }
}

/* ---- scalar specification --------------------------------------------------------------------- */

/* one block of code c to floats: value * scale, one float product per element */
static void dec_block(const tq_rot_code *c, const uint8_t *b, float *y)
{
    const float d = tq_f16_to_f32(tq_rd16(b));
    switch (c->kind) {
    case TQ_ROTC_Q8_0:
        for (int j = 0; j < 32; j++)
            y[j] = (float)(int8_t)b[2 + j] * d;
        return;
    case TQ_ROTC_Q4_0:
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((b[2 + j] & 15) - 8) * d;
            y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
        }
        return;
    case TQ_ROTC_Q5_0: {
        const uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 |
                            (uint32_t)b[5] << 24;
        for (int j = 0; j < 16; j++) {
            const int q0 = (b[6 + j] & 15) | (int)((qh >> j) & 1u) << 4;
            const int q1 = (b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1u) << 4;
            y[j] = (float)(q0 - 16) * d;
            y[j + 16] = (float)(q1 - 16) * d;
        }
        return;
    }
    case TQ_ROTC_IQ4_NL:
        for (int j = 0; j < 16; j++) {
            y[j] = d * c->grid[b[2 + j] & 15];
            y[j + 16] = d * c->grid[b[2 + j] >> 4];
        }
        return;
    case TQ_ROTC_LM: {
        const int L = c->levels, pb = c->pair_bits;
        for (int p = 0; p < c->group / 2; p++) {
            const int bit = p * pb, sh = bit & 7;
            const uint8_t *s = b + 2 + (bit >> 3);
            uint32_t w = 0;
            for (int i = 0; i < (sh + pb + 7) >> 3; i++)
                w |= (uint32_t)s[i] << (8 * i);
            const unsigned v = (unsigned)(w >> sh) & ((1u << pb) - 1u);
            unsigned i0 = v % (unsigned)L, i1 = v / (unsigned)L;
            if (i1 >= (unsigned)L) /* never written: clamp like the codec */
                i1 = (unsigned)L - 1;
            y[2 * p] = c->grid[i0] * d;
            y[2 * p + 1] = c->grid[i1] * d;
        }
        return;
    }
    }
}

void tq_attn_rot_dec_block_scalar(const tq_rot_code *c, const uint8_t *b, float *y)
{
    dec_block(c, b, y);
}

static void dec_scalar(const tq_rot_code *c, const uint8_t *src, size_t row_bytes, int n, int d,
                       float *out)
{
    for (int i = 0; i < n; i++)
        for (int o = 0; o < d; o += c->group)
            dec_block(c, src + (size_t)i * row_bytes + (size_t)(o / c->group) * c->block_bytes,
                      out + (size_t)i * d + o);
}

static float dot_scalar(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void block_scalar(const float *q, const float *K, const float *V, int nv, int d,
                         float scale, float *S, float *sc)
{
    float bm = -INFINITY;
    for (int k = 0; k < nv; k++) {
        sc[k] = scale * dot_scalar(q, K + (size_t)k * d, d);
        bm = sc[k] > bm ? sc[k] : bm;
    }
    float *acc = S + 2, l = S[1];
    const float mn = bm > S[0] ? bm : S[0];
    if (mn > S[0] && l != 0.0f) {
        const float corr = expf(S[0] - mn);
        l *= corr;
        for (int j = 0; j < d; j++)
            acc[j] *= corr;
    }
    S[0] = mn;
    for (int k = 0; k < nv; k++) {
        const float p = expf(sc[k] - mn);
        const float *v = V + (size_t)k * d;
        l += p;
        for (int j = 0; j < d; j++)
            acc[j] += p * v[j];
    }
    S[1] = l;
}

const tq_attn_rot_kernels tq_attn_rot_scalar = {"scalar", dec_scalar, block_scalar};

const tq_attn_rot_kernels *tq_attn_rot_kernels_for(tq_isa isa)
{
#if defined(__x86_64__)
    if (isa >= TQ_ISA_AVX512)
        return &tq_attn_rot_avx512;
    if (isa >= TQ_ISA_AVX2)
        return &tq_attn_rot_avx2;
#else
    (void)isa;
#endif
    return &tq_attn_rot_scalar;
}

/* ---- driver ------------------------------------------------------------------------------------ */

typedef struct scr {
    float *kdec, *vdec, *sc, *st, *acc;
} scr;

static size_t scratch_at(unsigned char *base, int hd, int group, scr *o)
{
    const size_t st = (size_t)TQ_ROT_QB * group * ((size_t)hd + 2) * sizeof(float);
    const size_t sz[5] = {(size_t)TQ_ROT_KB * hd * sizeof(float),
                          (size_t)TQ_ROT_KB * hd * sizeof(float), TQ_ROT_KB * sizeof(float), st,
                          st};
    float *ptr[5];
    size_t off = 0;
    for (int i = 0; i < 5; i++) {
        ptr[i] = base ? (float *)(void *)(base + off) : NULL;
        off += (sz[i] + 63) & ~(size_t)63;
    }
    if (o)
        *o = (scr){ptr[0], ptr[1], ptr[2], ptr[3], ptr[4]};
    return off;
}

size_t tq_attn_rot_scratch_bytes(int hd, int group)
{
    return scratch_at(NULL, hd, group, NULL);
}

size_t tq_attn_rot_part_floats(int n_kv_heads, int group, int hd, int64_t max_keys)
{
    const size_t n_ch = (size_t)((max_keys + TQ_ROT_KC - 1) / TQ_ROT_KC) + 1;
    return (size_t)n_kv_heads * n_ch * TQ_ROT_QD * (size_t)group * ((size_t)hd + 2);
}

typedef struct djob {
    const tq_attn_rot_job *j;
    int chunked;
    int64_t n_qb;     /* query blocks (prefill)                      */
    int64_t ch0, n_ch; /* decode: chunks [ch0, ch0 + n_ch) per kv-head */
} djob;

static void init_states(float *st, int64_t rows, size_t stride)
{
    for (int64_t r = 0; r < rows; r++) {
        float *S = st + (size_t)r * stride;
        S[0] = -INFINITY;
        memset(S + 1, 0, (stride - 1) * sizeof(float));
    }
}

/* A <- A merged with the state S of the next key chunk (l = 0: no key) */
static void merge_state(float *A, const float *S, size_t stride)
{
    if (S[1] == 0.0f)
        return;
    if (A[1] == 0.0f) {
        memcpy(A, S, stride * sizeof(float));
        return;
    }
    const float M = A[0] > S[0] ? A[0] : S[0];
    const float wa = expf(A[0] - M), ws = expf(S[0] - M);
    for (size_t e = 1; e < stride; e++)
        A[e] = wa * A[e] + ws * S[e];
    A[0] = M;
}

static void finish_row(const float *S, int hd, float *o)
{
    for (int e = 0; e < hd; e++)
        o[e] = S[2 + e] / S[1];
}

/* the lowest key query position p sees */
static int64_t key_lo(const tq_attn_rot_job *j, int64_t p)
{
    return j->window > 0 && p + 1 > j->window ? p + 1 - j->window : 0;
}

/* rows [i0, i1) x the group's heads against the keys of [t0, t1) (t0 a multiple of TQ_ROT_KB);
 * state of row (i, hh) at st + ((i - i0) * group + hh) * (hd + 2) */
static void run_unit(const tq_attn_rot_job *j, int64_t g, int64_t i0, int64_t i1, int64_t t0,
                     int64_t t1, float *st, const scr *s)
{
    const int hd = j->hd, nh = j->n_heads, group = nh / j->n_kv_heads;
    const size_t stride = (size_t)hd + 2;
    const uint8_t *K = j->k + (size_t)g * j->k_head_stride;
    const uint8_t *V = j->v + (size_t)g * j->v_head_stride;
    init_states(st, (i1 - i0) * group, stride);
    const int64_t t_end = t1 < j->pos0 + i1 ? t1 : j->pos0 + i1;
    const int64_t lo0 = key_lo(j, j->pos0 + i0) / TQ_ROT_KB * TQ_ROT_KB;
    if (t0 < lo0)
        t0 = lo0;
    for (int64_t tb = t0; tb < t_end; tb += TQ_ROT_KB) {
        const int nk = (int)(t_end - tb < TQ_ROT_KB ? t_end - tb : TQ_ROT_KB);
        const size_t slot = (size_t)(tb % j->slots); /* nk rows from here are contiguous */
        j->kern->dec(j->kc, K + slot * j->k_rb, j->k_rb, nk, hd, s->kdec);
        j->kern->dec(j->vc, V + slot * j->v_rb, j->v_rb, nk, hd, s->vdec);
        for (int64_t i = i0; i < i1; i++) {
            const int64_t lim = j->pos0 + i, lo = key_lo(j, lim); /* keys [lo, lim] */
            if (tb > lim || tb + nk <= lo)
                continue;
            const int off = lo > tb ? (int)(lo - tb) : 0;
            const int nv = (int)(lim - tb + 1 < nk ? lim - tb + 1 : nk) - off;
            for (int hh = 0; hh < group; hh++) {
                const int h = (int)g * group + hh;
                j->kern->block(j->q + ((size_t)i * nh + h) * hd, s->kdec + (size_t)off * hd,
                               s->vdec + (size_t)off * hd, nv, hd, j->scale,
                               st + ((size_t)(i - i0) * group + hh) * stride, s->sc);
            }
        }
    }
}

/* query block qb of kv-head g: every key chunk in order, each merged into the rows' states
 * (the same key chunks and merges as the decode form), then the outputs */
static void qblock_rows(const tq_attn_rot_job *j, int64_t g, int64_t qb, const scr *s)
{
    const int hd = j->hd, nh = j->n_heads, group = nh / j->n_kv_heads;
    const size_t stride = (size_t)hd + 2;
    const int64_t i0 = qb * TQ_ROT_QB;
    const int64_t i1 = i0 + TQ_ROT_QB < j->n_q ? i0 + TQ_ROT_QB : j->n_q;
    const int64_t rows = (i1 - i0) * group;
    init_states(s->acc, rows, stride);
    for (int64_t t0 = key_lo(j, j->pos0 + i0) / TQ_ROT_KC * TQ_ROT_KC; t0 < j->pos0 + i1;
         t0 += TQ_ROT_KC) {
        run_unit(j, g, i0, i1, t0, t0 + TQ_ROT_KC, s->st, s);
        for (int64_t r = 0; r < rows; r++)
            merge_state(s->acc + (size_t)r * stride, s->st + (size_t)r * stride, stride);
    }
    for (int64_t i = i0; i < i1; i++)
        for (int hh = 0; hh < group; hh++) {
            const int h = (int)g * group + hh;
            finish_row(s->acc + ((size_t)(i - i0) * group + hh) * stride, hd,
                       j->out + ((size_t)i * nh + h) * hd);
        }
}

void tq_attn_rot_run_head(const tq_attn_rot_job *j, int g, unsigned char *scratch)
{
    scr s;
    scratch_at(scratch, j->hd, j->n_heads / j->n_kv_heads, &s);
    for (int64_t qb = 0; qb < (j->n_q + TQ_ROT_QB - 1) / TQ_ROT_QB; qb++)
        qblock_rows(j, g, qb, &s);
}

static void unit_task(void *ctx, int ith, int nth)
{
    const djob *dj = ctx;
    const tq_attn_rot_job *j = dj->j;
    const int hd = j->hd, nh = j->n_heads, group = nh / j->n_kv_heads;
    const size_t stride = (size_t)hd + 2;
    scr s;
    scratch_at(j->scratch + (size_t)ith * tq_attn_rot_scratch_bytes(hd, group), hd, group, &s);
    int64_t u0, u1;
    if (dj->chunked) {
        tq_split_range(j->n_kv_heads * dj->n_ch, ith, nth, &u0, &u1);
        for (int64_t u = u0; u < u1; u++) {
            const int64_t g = u / dj->n_ch, ch = dj->ch0 + u % dj->n_ch;
            run_unit(j, g, 0, j->n_q, ch * TQ_ROT_KC, (ch + 1) * TQ_ROT_KC,
                     j->part + (size_t)u * (size_t)j->n_q * group * stride, &s);
        }
        return;
    }
    tq_split_range(j->n_kv_heads * dj->n_qb, ith, nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++)
        qblock_rows(j, u / dj->n_qb, u % dj->n_qb, &s);
}

/* decode: merge each row's chunk states in chunk order */
static void merge_task(void *ctx, int ith, int nth)
{
    const djob *dj = ctx;
    const tq_attn_rot_job *j = dj->j;
    const int hd = j->hd, nh = j->n_heads, group = nh / j->n_kv_heads;
    const size_t stride = (size_t)hd + 2;
    scr s;
    scratch_at(j->scratch + (size_t)ith * tq_attn_rot_scratch_bytes(hd, group), hd, group, &s);
    int64_t r0, r1;
    tq_split_range(j->n_q * nh, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i = r / nh;
        const int h = (int)(r % nh), g = h / group, hh = h % group;
        init_states(s.st, 1, stride);
        for (int64_t c = 0; c < dj->n_ch; c++)
            merge_state(s.st, j->part + ((size_t)(g * dj->n_ch + c) * (size_t)j->n_q * group +
                                         (size_t)i * group + hh) * stride, stride);
        finish_row(s.st, hd, j->out + ((size_t)i * nh + h) * hd);
    }
}

void tq_attn_rot_run(const tq_attn_rot_job *j, tq_pool *pool)
{
    djob dj = {.j = j, .chunked = j->n_q <= TQ_ROT_QD};
    const int64_t n_keys = j->pos0 + j->n_q;
    dj.ch0 = key_lo(j, j->pos0) / TQ_ROT_KC;
    dj.n_ch = (n_keys + TQ_ROT_KC - 1) / TQ_ROT_KC - dj.ch0;
    dj.n_qb = (j->n_q + TQ_ROT_QB - 1) / TQ_ROT_QB;
    /* a short window on the caller: waking the pool costs more; the units are the same */
    const int64_t span = n_keys - key_lo(j, j->pos0);
    tq_pool *p = j->n_q * span * j->n_heads * j->hd >= 32768 ? pool : NULL;
    tq_pool_run(p, unit_task, &dj);
    /* the merge is n_q * n_heads rows of n_ch states: for a decode step (9 rows of 4 chunks at
     * 1k on SmolLM2) less work than waking the pool a second time; same rows either way */
    if (dj.chunked)
        tq_pool_run(j->n_q * j->n_heads * dj.n_ch * j->hd >= 65536 ? p : NULL, merge_task, &dj);
}
