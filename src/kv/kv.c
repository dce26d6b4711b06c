/* kv.c -- public KV codec API: scheme strings, checks, row sizes, row-parallel encode/decode
 * over the ISA kernel tables (src/cpu/kv_*.c). No allocation on the encode/decode paths. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "core/half.h"
#include "cpu/kv_cpu.h"
#include "kv/kv_internal.h"

static const char schemes_help[] =
    "f32, f16, bf16, kv8, kv4, turbo (= turbo:k8v3), turbo:k<K>v<V> with K in {2,4,5,8} "
    "(8 = signed int8) and V in {2,3,4,5,8}, each turbo optionally followed by \"+rk\" (rotated "
    "keys) and/or \"+sq\" (sliding-window layers quantized too, not bf16), rot:<C> or rot:<CK>/<CV> (Hadamard-rotated block codes) with C in {q8_0, q5_0, q4_0, "
    "iq4_nl} (llama.cpp's) or l<L>g<G> (ours: L in {11,16,22,32,45,64,90} with G in {32,64}, or L in {128,181} with "
    "G 64)";

const char *tq_kv_schemes_help(void)
{
    return schemes_help;
}

static int parse_uint(const char **p, int *out)
{
    const char *s = *p;
    int v = 0, n = 0;
    while (*s >= '0' && *s <= '9' && n < 3) {
        v = v * 10 + (*s - '0');
        s++;
        n++;
    }
    if (n == 0)
        return 0;
    *p = s;
    *out = v;
    return 1;
}

tq_status tq_kv_scheme_parse(const char *str, tq_kv_scheme *out)
{
    if (!str || !out)
        return TQ_FAIL(TQ_E_ARG, "kv scheme: NULL %s", !str ? "string" : "output");
    const char *orig = str; /* messages name what the caller wrote */
    tq_kv_scheme s = {.kind = TQ_KV_F32, .k_bits = 0, .v_bits = 0, .flags = 0};
    static const struct {
        const char *name;
        tq_kv_kind kind;
    } plain[] = {{"f32", TQ_KV_F32}, {"f16", TQ_KV_F16}, {"bf16", TQ_KV_BF16},
                 {"kv8", TQ_KV_KV8}, {"kv4", TQ_KV_KV4}};
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        if (!strcmp(str, plain[i].name)) {
            s.kind = plain[i].kind;
            *out = s;
            return TQ_OK;
        }
    if (!strncmp(str, "rot:", 4)) { /* rot:<C> or rot:<CK>/<CV> */
        const char *p = str + 4, *slash = strchr(p, '/');
        const size_t n1 = slash ? (size_t)(slash - p) : strlen(p);
        const int ck = tq_kv_code_from_name(p, n1);
        const int cv = slash ? tq_kv_code_from_name(slash + 1, strlen(slash + 1)) : ck;
        if (!ck || !cv)
            return TQ_FAIL(TQ_E_ARG, "kv scheme '%s': unknown block code '%.*s' (valid: %s)", orig,
                           !ck ? (int)n1 : (int)strlen(slash + 1), !ck ? p : slash + 1,
                           schemes_help);
        s.kind = TQ_KV_ROT;
        s.k_bits = ck;
        s.v_bits = cv;
        *out = s;
        return TQ_OK;
    }
    /* turbo variant: a "+rk" suffix sets TQ_KV_FLAG_ROTK. ("+e8", TQ_KV_FLAG_EDGE8, was measured
     * and is not offered: docs/results.md "TurboQuant KV cache in the engine".) */
    char base[32];
    const char *plus = strchr(str, '+');
    const size_t blen = plus ? (size_t)(plus - str) : strlen(str);
    if (blen < sizeof(base) && !strncmp(str, "turbo", 5)) {
        memcpy(base, str, blen);
        base[blen] = '\0';
        for (const char *q = plus; q && *q;) {
            if (!strncmp(q, "+rk", 3) && !(s.flags & TQ_KV_FLAG_ROTK))
                s.flags |= TQ_KV_FLAG_ROTK;
            else if (!strncmp(q, "+sq", 3) && !(s.flags & TQ_KV_FLAG_SWAQ))
                s.flags |= TQ_KV_FLAG_SWAQ;
            else
                return TQ_FAIL(TQ_E_ARG, "kv scheme '%s' is not valid; valid: %s", str,
                               schemes_help);
            q += 3;
            if (*q && *q != '+')
                return TQ_FAIL(TQ_E_ARG, "kv scheme '%s' is not valid; valid: %s", str,
                               schemes_help);
        }
        str = base;
    }
    if (!strcmp(str, "turbo")) {
        s.kind = TQ_KV_TURBO;
        s.k_bits = 8;
        s.v_bits = 3;
        *out = s;
        return TQ_OK;
    }
    if (!strncmp(str, "turbo:k", 7)) {
        const char *p = str + 7;
        int k = 0, v = 0;
        if (parse_uint(&p, &k) && *p == 'v' && (p++, parse_uint(&p, &v)) && *p == '\0') {
            if (!tq_kv_key_bits_ok(k))
                return TQ_FAIL(TQ_E_ARG, "kv scheme '%s': key bits %d not supported (valid: 2, 4, 5, 8)",
                               orig, k);
            if (!tq_kv_value_bits_ok(v))
                return TQ_FAIL(TQ_E_ARG,
                               "kv scheme '%s': value bits %d not supported (valid: 2, 3, 4, 5, 8)",
                               orig, v);
            s.kind = TQ_KV_TURBO;
            s.k_bits = k;
            s.v_bits = v;
            *out = s;
            return TQ_OK;
        }
    }
    return TQ_FAIL(TQ_E_ARG, "kv scheme '%s' is not valid; valid: %s", orig, schemes_help);
}

static int scheme_valid(tq_kv_scheme s)
{
    if ((unsigned)s.kind >= TQ_KV_KIND_COUNT || (s.flags & ~TQ_KV_FLAGS_ALL) ||
        (s.flags && s.kind != TQ_KV_TURBO))
        return 0;
    if (s.kind == TQ_KV_TURBO)
        return tq_kv_key_bits_ok(s.k_bits) && tq_kv_value_bits_ok(s.v_bits);
    if (s.kind == TQ_KV_ROT)
        return tq_kv_code_ok(s.k_bits) && tq_kv_code_ok(s.v_bits);
    return 1;
}

/* "rot<sep><K>" or "rot<sep><K><sep2><V>" (K == V prints one code) */
static void rot_name(tq_kv_scheme s, const char *sep, const char *sep2, char *buf, size_t cap)
{
    if (s.k_bits == s.v_bits)
        snprintf(buf, cap, "rot%s%s", sep, tq_kv_code_name(s.k_bits));
    else
        snprintf(buf, cap, "rot%s%s%s%s", sep, tq_kv_code_name(s.k_bits), sep2,
                 tq_kv_code_name(s.v_bits));
}

static const char *kind_names[TQ_KV_KIND_COUNT] = {"f32", "f16",   "bf16", "kv8",
                                                   "kv4", "turbo", "rot"};

const char *tq_kv_scheme_name(tq_kv_scheme s, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return buf;
    if (!scheme_valid(s))
        snprintf(buf, cap, "invalid");
    else if (s.kind == TQ_KV_TURBO)
        snprintf(buf, cap, "turbo:k%dv%d%s%s%s", s.k_bits, s.v_bits,
                 (s.flags & TQ_KV_FLAG_ROTK) ? "+rk" : "", (s.flags & TQ_KV_FLAG_EDGE8) ? "+e8" : "",
                 (s.flags & TQ_KV_FLAG_SWAQ) ? "+sq" : "");
    else if (s.kind == TQ_KV_ROT)
        rot_name(s, ":", "/", buf, cap);
    else
        snprintf(buf, cap, "%s", kind_names[s.kind]);
    return buf;
}

const char *tq_kv_scheme_key(tq_kv_scheme s, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return buf;
    if (!scheme_valid(s))
        snprintf(buf, cap, "invalid");
    else if (s.kind == TQ_KV_TURBO)
        snprintf(buf, cap, "turbo-k%dv%d%s%s%s", s.k_bits, s.v_bits,
                 (s.flags & TQ_KV_FLAG_ROTK) ? "-rk" : "", (s.flags & TQ_KV_FLAG_EDGE8) ? "-e8" : "",
                 (s.flags & TQ_KV_FLAG_SWAQ) ? "-sq" : "");
    else if (s.kind == TQ_KV_ROT)
        rot_name(s, "-", "-", buf, cap);
    else
        snprintf(buf, cap, "%s", kind_names[s.kind]);
    return buf;
}

tq_status tq_kv_check(tq_kv_scheme s, int head_dim)
{
    char nm[32];
    if (!scheme_valid(s))
        return TQ_FAIL(TQ_E_ARG,
                       "kv scheme {kind %d, k_bits %d, v_bits %d, flags %u} is not valid; valid: %s",
                       (int)s.kind, s.k_bits, s.v_bits, s.flags, schemes_help);
    tq_kv_scheme_name(s, nm, sizeof(nm));
    if (s.kind == TQ_KV_TURBO) {
        if (!tq_kv_turbo_dim_ok(head_dim))
            return TQ_FAIL(TQ_E_UNSUPPORTED,
                           "kv scheme %s: head_dim %d not supported (valid: 64, 128, 256, 512)", nm,
                           head_dim);
    } else if (s.kind == TQ_KV_ROT) {
        if (!tq_kv_rot_dim_ok(head_dim))
            return TQ_FAIL(TQ_E_UNSUPPORTED,
                           "kv scheme %s: head_dim %d not supported (valid: a multiple of 64 up "
                           "to %d)",
                           nm, head_dim, TQ_KV_MAX_HEAD_DIM);
    } else if (head_dim <= 0 || head_dim % 64 != 0 || head_dim > TQ_KV_MAX_BASE_DIM) {
        return TQ_FAIL(TQ_E_UNSUPPORTED,
                       "kv scheme %s: head_dim %d not supported (valid: a multiple of 64 from 64 "
                       "to %d)",
                       nm, head_dim, TQ_KV_MAX_BASE_DIM);
    }
    return TQ_OK;
}

tq_status tq_kv_row_bytes(tq_kv_scheme s, int head_dim, size_t *k_bytes, size_t *v_bytes)
{
    tq_status st = tq_kv_check(s, head_dim);
    if (st != TQ_OK)
        return st;
    if (k_bytes)
        *k_bytes = tq_kv_row_bytes1(s, 0, head_dim);
    if (v_bytes)
        *v_bytes = tq_kv_row_bytes1(s, 1, head_dim);
    return TQ_OK;
}

/* ---- row-parallel jobs -------------------------------------------------------------------- */

#define KV_CHUNK_FLOATS 8192 /* per-thread stack buffer for f16/bf16 -> fp32 upcast */
/* Jobs below this many elements run on the caller's thread: waking the pool costs more than the
 * work (a decode step appends one row per kv-head). The bytes do not depend on it. */
#define KV_MIN_PARALLEL_ELEMS 16384

typedef struct kv_job {
    const tq_kv_kernels *kk;
    tq_kv_scheme s;
    int is_v, d;
    tq_dtype src_type;
    const void *src;
    void *dst;
    size_t row_bytes;
    int64_t n_rows;
    int safe;                /* TQ_KV_ENC_SAFE on turbo K rows                                */
    _Atomic int64_t n_safe;  /* groups stored with the safe encoding                          */
} kv_job;

static void enc_rows(kv_job *j, const float *x, int64_t n, uint8_t *dst)
{
    const tq_kv_kernels *kk = j->kk, *sk = &tq_kv_kernels_scalar;
    const int d = j->d;
    switch (j->s.kind) {
    case TQ_KV_F32: memcpy(dst, x, (size_t)n * (size_t)d * 4); break;
    case TQ_KV_F16: (kk->enc_f16 ? kk->enc_f16 : sk->enc_f16)(x, n * d, dst); break;
    case TQ_KV_BF16: (kk->enc_bf16 ? kk->enc_bf16 : sk->enc_bf16)(x, n * d, dst); break;
    case TQ_KV_KV8:
    case TQ_KV_KV4:
        (kk->enc_affine ? kk->enc_affine : sk->enc_affine)(x, n, d, j->s.kind == TQ_KV_KV8 ? 8 : 4,
                                                           dst);
        break;
    case TQ_KV_TURBO:
        if (j->is_v)
            (kk->enc_v ? kk->enc_v : sk->enc_v)(x, n, d, j->s.v_bits, dst);
        else
            (kk->enc_k ? kk->enc_k : sk->enc_k)(x, n, d, j->s.k_bits, dst);
        if (!j->is_v && j->safe) {
            int64_t f = 0;
            for (int64_t r = 0; r < n; r++)
                f += tq_kv_turbo_k_safe_row(x + r * d, d, j->s.k_bits,
                                            dst + (size_t)r * j->row_bytes);
            if (f)
                atomic_fetch_add_explicit(&j->n_safe, f, memory_order_relaxed);
        }
        break;
    case TQ_KV_ROT:
        for (int64_t r = 0; r < n; r++)
            tq_kv_rot_encode_row_ref(j->is_v ? j->s.v_bits : j->s.k_bits, j->is_v, x + r * d, d,
                                     dst + (size_t)r * j->row_bytes);
        break;
    default: break;
    }
}

static void enc_task(void *ctx, int ith, int nth)
{
    kv_job *j = ctx;
    int64_t r0, r1;
    tq_split_range(j->n_rows, ith, nth, &r0, &r1);
    const int d = j->d;
    uint8_t *dst = j->dst;
    if (j->src_type == TQ_DTYPE_F32) {
        if (r1 > r0)
            enc_rows(j, (const float *)j->src + r0 * d, r1 - r0, dst + (size_t)r0 * j->row_bytes);
        return;
    }
    float buf[KV_CHUNK_FLOATS];
    const int64_t per = KV_CHUNK_FLOATS / d; /* >= 1: d <= TQ_KV_MAX_BASE_DIM */
    const uint16_t *src = j->src;
    for (int64_t r = r0; r < r1; r += per) {
        const int64_t n = r1 - r < per ? r1 - r : per;
        const uint16_t *p = src + r * d;
        if (j->src_type == TQ_DTYPE_F16)
            for (int64_t i = 0; i < n * d; i++)
                buf[i] = tq_f16_to_f32(p[i]);
        else
            for (int64_t i = 0; i < n * d; i++)
                buf[i] = tq_bf16_to_f32(p[i]);
        enc_rows(j, buf, n, dst + (size_t)r * j->row_bytes);
    }
}

static void dec_task(void *ctx, int ith, int nth)
{
    const kv_job *j = ctx;
    const tq_kv_kernels *kk = j->kk, *sk = &tq_kv_kernels_scalar;
    int64_t r0, r1;
    tq_split_range(j->n_rows, ith, nth, &r0, &r1);
    if (r1 <= r0)
        return;
    const int d = j->d;
    const int64_t n = r1 - r0;
    const uint8_t *src = (const uint8_t *)j->src + (size_t)r0 * j->row_bytes;
    float *out = (float *)j->dst + r0 * d;
    switch (j->s.kind) {
    case TQ_KV_F32: memcpy(out, src, (size_t)n * (size_t)d * 4); break;
    case TQ_KV_F16: (kk->dec_f16 ? kk->dec_f16 : sk->dec_f16)(src, n * d, out); break;
    case TQ_KV_BF16: (kk->dec_bf16 ? kk->dec_bf16 : sk->dec_bf16)(src, n * d, out); break;
    case TQ_KV_KV8:
    case TQ_KV_KV4:
        (kk->dec_affine ? kk->dec_affine : sk->dec_affine)(src, n, d,
                                                           j->s.kind == TQ_KV_KV8 ? 8 : 4, out);
        break;
    case TQ_KV_TURBO:
        if (j->is_v)
            (kk->dec_v ? kk->dec_v : sk->dec_v)(src, n, d, j->s.v_bits, out);
        else
            (kk->dec_k ? kk->dec_k : sk->dec_k)(src, n, d, j->s.k_bits, out);
        break;
    case TQ_KV_ROT:
        for (int64_t r = 0; r < n; r++)
            tq_kv_rot_decode_row_ref(j->is_v ? j->s.v_bits : j->s.k_bits, j->is_v,
                                     src + (size_t)r * j->row_bytes, d, out + r * d);
        break;
    default: break;
    }
}

static tq_status pick_isa(tq_isa isa, const tq_kv_kernels **kk)
{
    if ((unsigned)isa >= TQ_ISA_COUNT)
        return TQ_FAIL(TQ_E_ARG, "kv: isa %d is not valid (valid: scalar, avx2, avx512)", (int)isa);
    *kk = tq_kv_kernels_get(isa);
    if (!*kk)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "kv: isa %s is not supported by this CPU or build",
                       tq_isa_name(isa));
    return TQ_OK;
}

static tq_status encode(tq_kv_scheme s, int is_v, int head_dim, tq_dtype src_type,
                        const void *src, int64_t n_rows, void *dst, size_t dst_cap, tq_pool *pool,
                        tq_isa isa, tq_kv_encode_opts *opts)
{
    const char *what = is_v ? "tq_kv_encode_v" : "tq_kv_encode_k";
    tq_status st = tq_kv_check(s, head_dim);
    if (st != TQ_OK)
        return st;
    if (s.flags)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: +rk/+e8 are cache-level variants; the row codec "
                                         "encodes the base scheme (flags 0)", what);
    if (src_type != TQ_DTYPE_F32 && src_type != TQ_DTYPE_F16 && src_type != TQ_DTYPE_BF16)
        return TQ_FAIL(TQ_E_ARG, "%s: src_type %d is not valid (valid: f32, f16, bf16)", what,
                       (int)src_type);
    if (n_rows < 0)
        return TQ_FAIL(TQ_E_ARG, "%s: n_rows %lld is negative", what, (long long)n_rows);
    if (n_rows == 0)
        return TQ_OK;
    if (!src || !dst)
        return TQ_FAIL(TQ_E_ARG, "%s: %s is NULL", what, !src ? "src" : "dst");
    const size_t rb = tq_kv_row_bytes1(s, is_v, head_dim);
    size_t need;
    if (!tq_mul_ok((size_t)n_rows, rb, &need) ||
        !tq_mul_ok((size_t)n_rows, (size_t)head_dim * 4, &(size_t){0}))
        return TQ_FAIL(TQ_E_OVERFLOW, "%s: %lld rows of head_dim %d overflow size_t", what,
                       (long long)n_rows, head_dim);
    if (dst_cap < need)
        return TQ_FAIL(TQ_E_OVERFLOW,
                       "%s: dst_cap %zu bytes is too small (need %lld rows x %zu bytes = %zu)",
                       what, dst_cap, (long long)n_rows, rb, need);
    const tq_kv_kernels *kk;
    if ((st = pick_isa(isa, &kk)) != TQ_OK)
        return st;
    if (opts && opts->mode != TQ_KV_ENC_REFERENCE_EXACT && opts->mode != TQ_KV_ENC_SAFE)
        return TQ_FAIL(TQ_E_ARG, "%s: encode mode %d is not valid (valid: reference-exact 0, "
                                 "safe 1)", what, (int)opts->mode);
    kv_job j = {.kk = kk, .s = s, .is_v = is_v, .d = head_dim, .src_type = src_type, .src = src,
                .dst = dst, .row_bytes = rb, .n_rows = n_rows,
                .safe = opts && opts->mode == TQ_KV_ENC_SAFE && s.kind == TQ_KV_TURBO};
    atomic_init(&j.n_safe, 0);
    tq_pool_run(n_rows * (int64_t)head_dim < KV_MIN_PARALLEL_ELEMS ? NULL : pool, enc_task, &j);
    if (opts)
        opts->n_safe = atomic_load_explicit(&j.n_safe, memory_order_relaxed);
    return TQ_OK;
}

tq_status tq_kv_encode_isa(tq_kv_scheme s, int is_v, int head_dim, tq_dtype src_type,
                           const void *src, int64_t n_rows, void *dst, size_t dst_cap,
                           tq_pool *pool, tq_isa isa)
{
    return encode(s, is_v, head_dim, src_type, src, n_rows, dst, dst_cap, pool, isa, NULL);
}

tq_status tq_kv_encode_k_opts(tq_kv_scheme s, int head_dim, tq_dtype src_type, const void *src,
                              int64_t n_rows, void *dst, size_t dst_cap, tq_pool *pool,
                              tq_kv_encode_opts *opts)
{
    if (opts)
        opts->n_safe = 0;
    return encode(s, 0, head_dim, src_type, src, n_rows, dst, dst_cap, pool, tq_cpu_isa(), opts);
}

tq_status tq_kv_decode_isa(tq_kv_scheme s, int is_v, int head_dim, const void *src,
                           int64_t n_rows, float *dst, int64_t dst_count, tq_pool *pool,
                           tq_isa isa)
{
    const char *what = is_v ? "tq_kv_decode_v" : "tq_kv_decode_k";
    tq_status st = tq_kv_check(s, head_dim);
    if (st != TQ_OK)
        return st;
    if (s.flags)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: +rk/+e8 are cache-level variants; the row codec "
                                         "decodes the base scheme (flags 0)", what);
    if (n_rows < 0)
        return TQ_FAIL(TQ_E_ARG, "%s: n_rows %lld is negative", what, (long long)n_rows);
    if (n_rows == 0)
        return TQ_OK;
    if (!src || !dst)
        return TQ_FAIL(TQ_E_ARG, "%s: %s is NULL", what, !src ? "src" : "dst");
    size_t need;
    if (!tq_mul_ok((size_t)n_rows, (size_t)head_dim, &need) || need > (size_t)INT64_MAX / 4)
        return TQ_FAIL(TQ_E_OVERFLOW, "%s: %lld rows of head_dim %d overflow", what,
                       (long long)n_rows, head_dim);
    if (dst_count < 0 || (size_t)dst_count < need)
        return TQ_FAIL(TQ_E_OVERFLOW,
                       "%s: dst_count %lld floats is too small (need %lld rows x %d = %zu)", what,
                       (long long)dst_count, (long long)n_rows, head_dim, need);
    const tq_kv_kernels *kk;
    if ((st = pick_isa(isa, &kk)) != TQ_OK)
        return st;
    kv_job j = {.kk = kk, .s = s, .is_v = is_v, .d = head_dim, .src = src, .dst = dst,
                .row_bytes = tq_kv_row_bytes1(s, is_v, head_dim), .n_rows = n_rows};
    tq_pool_run(n_rows * (int64_t)head_dim < KV_MIN_PARALLEL_ELEMS ? NULL : pool, dec_task, &j);
    return TQ_OK;
}

tq_status tq_kv_encode_k(tq_kv_scheme s, int head_dim, tq_dtype src_type, const void *src,
                         int64_t n_rows, void *dst, size_t dst_cap, tq_pool *pool)
{
    return tq_kv_encode_isa(s, 0, head_dim, src_type, src, n_rows, dst, dst_cap, pool,
                            tq_cpu_isa());
}

tq_status tq_kv_encode_v(tq_kv_scheme s, int head_dim, tq_dtype src_type, const void *src,
                         int64_t n_rows, void *dst, size_t dst_cap, tq_pool *pool)
{
    return tq_kv_encode_isa(s, 1, head_dim, src_type, src, n_rows, dst, dst_cap, pool,
                            tq_cpu_isa());
}

tq_status tq_kv_decode_k(tq_kv_scheme s, int head_dim, const void *src, int64_t n_rows,
                         float *dst, int64_t dst_count, tq_pool *pool)
{
    return tq_kv_decode_isa(s, 0, head_dim, src, n_rows, dst, dst_count, pool, tq_cpu_isa());
}

tq_status tq_kv_decode_v(tq_kv_scheme s, int head_dim, const void *src, int64_t n_rows,
                         float *dst, int64_t dst_count, tq_pool *pool)
{
    return tq_kv_decode_isa(s, 1, head_dim, src, n_rows, dst, dst_count, pool, tq_cpu_isa());
}
