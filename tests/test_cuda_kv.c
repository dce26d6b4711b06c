/* test_cuda_kv.c -- the CUDA KV kernels against the CPU codec (label cuda; exits 77 without a
 * device):
 *  1. encode: tq_cuda_kv_encode() bytes == tq_kv_encode_k/v() bytes for every scheme and head_dim,
 *     f32/f16/bf16 inputs, Gaussian rows with outliers, constant and zero groups;
 *  2. the device cache: append on the GPU (host f32 rows) then read the rows back == CPU bytes;
 *  3. attention: rows encoded on the CPU, appended to the device cache, attended on the GPU, vs a
 *     float64 reference over the CPU-decoded K and V rows (softmax(q.k * scale) . v), for head_dim
 *     64/128/256, GQA groups 1/4/8, batch 1/3, n_q 1/3 (causal among the queries), contexts
 *     1..131072 including non-multiples of the tile sizes, forced and automatic splits.
 *     Tolerance: relative L2 error per output row <= 2e-3 (fp16 P and V operands, fp32
 *     accumulation; Q.K runs with hi/lo-split fp16 Q, ~fp32).
 *     Every case runs every split-merge path (tq_cuda_merge: auto, fused through L2, the reduce
 *     kernel, thread-block clusters) against the same reference; --merge M runs only M.
 * Usage: test_cuda_kv [-s SEED] [--quick] [--merge M] (quick = small contexts only; for
 * compute-sanitizer). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "turboquant.h"

static uint64_t rng_state;
static uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_unif(void)
{
    return ((double)(rng_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static float rng_normal(void)
{
    return (float)(sqrt(-2.0 * log(rng_unif())) * cos(6.283185307179586 * rng_unif()));
}

/* Awkward rows: Gaussian, a few outliers, some constant/zero 32-groups, a shifted group.
 * no_const: skip the constant group (a constant turbo key group decodes to NaN by the spec). */
static int no_const;
static void fill_rows(float *x, int64_t n_rows, int d)
{
    for (int64_t r = 0; r < n_rows; r++) {
        float *row = x + r * d;
        for (int j = 0; j < d; j++)
            row[j] = rng_normal();
        const int kind = (int)(rng_u64() % 8);
        if (kind == 0)
            row[rng_u64() % d] *= 40.0f;
        if (kind == 1)
            for (int j = 0; j < 32; j++)
                row[j] = 0.0f;
        if (kind == 2 && !no_const)
            for (int j = 32; j < 64; j++)
                row[j] = 0.25f;
        if (kind == 3)
            for (int j = 0; j < 32; j++)
                row[j] += 7.5f;
    }
}

static uint16_t to_f16(float f) /* RNE, finite inputs only */
{
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x47800000u)
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {
        const uint32_t e = ax >> 23;
        if (e < 102)
            return sign;
        const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e;
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((ax >> 23) - 112) << 10 | ((ax & 0x7fffffu) >> 13);
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1)))
        r++;
    return (uint16_t)(sign | r);
}

static const char *enc_schemes[] = {"f16",        "bf16",       "kv8",        "kv4",        "turbo:k8v3",
                                    "turbo:k4v3", "turbo:k8v4", "turbo:k8v2", "turbo:k4v2", "turbo:k4v4",
                                    "turbo:k2v2", "turbo:k5v5", "turbo:k8v8", "turbo:k2v3"};

static void test_encode(int quick)
{
    const int dims[] = {64, 128, 256, 512};
    const int64_t n_rows = quick ? 64 : 1024;
    for (size_t si = 0; si < sizeof(enc_schemes) / sizeof(enc_schemes[0]); si++) {
        tq_kv_scheme s;
        CHECK(tq_kv_scheme_parse(enc_schemes[si], &s) == TQ_OK, "parse %s", enc_schemes[si]);
        for (int di = 0; di < 4; di++) {
            const int d = dims[di];
            size_t kb, vb;
            if (tq_kv_row_bytes(s, d, &kb, &vb) != TQ_OK)
                continue;
            if (d == 512 && s.kind != TQ_KV_TURBO)
                continue;
            for (int dt = 0; dt < 3; dt++) {
                if (quick && dt)
                    continue;
                float *x = malloc((size_t)n_rows * d * sizeof(float));
                uint16_t *xh = malloc((size_t)n_rows * d * 2);
                uint8_t *kc = malloc(n_rows * kb), *vc = malloc(n_rows * vb);
                uint8_t *kg = malloc(n_rows * kb), *vg = malloc(n_rows * vb);
                fill_rows(x, n_rows, d);
                const void *src = x;
                tq_dtype ty = TQ_DTYPE_F32;
                if (dt == 1) { /* f16 */
                    for (int64_t i = 0; i < n_rows * d; i++)
                        xh[i] = to_f16(x[i]);
                    src = xh;
                    ty = TQ_DTYPE_F16;
                } else if (dt == 2) { /* bf16 (truncation is fine for making inputs) */
                    for (int64_t i = 0; i < n_rows * d; i++) {
                        uint32_t u;
                        memcpy(&u, &x[i], 4);
                        xh[i] = (uint16_t)(u >> 16);
                    }
                    src = xh;
                    ty = TQ_DTYPE_BF16;
                }
                CHECK(tq_kv_encode_k(s, d, ty, src, n_rows, kc, n_rows * kb, NULL) == TQ_OK, "cpu k");
                CHECK(tq_kv_encode_v(s, d, ty, src, n_rows, vc, n_rows * vb, NULL) == TQ_OK, "cpu v");
                tq_status st = tq_cuda_kv_encode(s, d, ty, src, n_rows, kg, vg);
                CHECK(st == TQ_OK, "cuda encode %s d=%d: %s", enc_schemes[si], d, tq_last_error());
                if (st == TQ_OK) {
                    int64_t bad_k = -1, bad_v = -1;
                    for (int64_t r = 0; r < n_rows && bad_k < 0; r++)
                        if (memcmp(kc + r * kb, kg + r * kb, kb))
                            bad_k = r;
                    for (int64_t r = 0; r < n_rows && bad_v < 0; r++)
                        if (memcmp(vc + r * vb, vg + r * vb, vb))
                            bad_v = r;
                    CHECK(bad_k < 0, "K bytes differ: %s d=%d dtype=%d first row %lld", enc_schemes[si], d, dt,
                          (long long)bad_k);
                    CHECK(bad_v < 0, "V bytes differ: %s d=%d dtype=%d first row %lld", enc_schemes[si], d, dt,
                          (long long)bad_v);
                }
                free(x), free(xh), free(kc), free(vc), free(kg), free(vg);
            }
        }
    }
}

static int merge_only = -1; /* --merge M: only that path; -1 = every path */

/* One attention case; returns the worst relative error over the merge paths. */
static double attend_case(const char *scheme, int d, int n_kv, int group, int batch, int n_q, int64_t ctx,
                          int splits, int via_gpu_append)
{
    double *ref = NULL;
    tq_kv_scheme s;
    if (tq_kv_scheme_parse(scheme, &s) != TQ_OK)
        return 1e9;
    size_t kb, vb;
    tq_kv_row_bytes(s, d, &kb, &vb);
    const int n_heads = n_kv * group;
    const size_t rows = (size_t)batch * ctx * n_kv; /* (batch, ctx, n_kv) */
    float *x = malloc(rows * d * sizeof(float));
    uint8_t *kr = malloc(rows * kb), *vr = malloc(rows * vb);
    float *kd = malloc(rows * d * sizeof(float)), *vd = malloc(rows * d * sizeof(float));
    float *q = malloc((size_t)batch * n_q * n_heads * d * sizeof(float));
    float *o = malloc((size_t)batch * n_q * n_heads * d * sizeof(float));
    double *sc = malloc((size_t)ctx * sizeof(double)), *acc = malloc((size_t)d * sizeof(double));
    double worst = 0.0;
    tq_cuda_kv *c = NULL;
    no_const = 1;
    fill_rows(x, (int64_t)rows, d);
    no_const = 0;
    for (size_t i = 0; i < rows * d; i++)
        x[i] *= 0.5f;
    CHECK(tq_kv_encode_k(s, d, TQ_DTYPE_F32, x, (int64_t)rows, kr, rows * kb, NULL) == TQ_OK, "enc k");
    tq_status st = tq_cuda_kv_create(s, d, n_kv, ctx + 5, batch, &c);
    CHECK(st == TQ_OK, "create %s: %s", scheme, tq_last_error());
    if (st != TQ_OK)
        goto done;
    if (via_gpu_append) {
        /* V from different data: reuse x shifted */
        float *xv = malloc(rows * d * sizeof(float));
        fill_rows(xv, (int64_t)rows, d);
        CHECK(tq_kv_encode_v(s, d, TQ_DTYPE_F32, xv, (int64_t)rows, vr, rows * vb, NULL) == TQ_OK, "enc v");
        /* append in two pieces to exercise t0 > 0 (rows are (batch, ctx, n_kv) = append layout) */
        const int64_t first = ctx / 2;
        float *kp = malloc(rows * d * sizeof(float)), *vp = malloc(rows * d * sizeof(float));
        for (int part = 0; part < 2; part++) {
            const int64_t t0 = part ? first : 0, n = part ? ctx - first : first;
            if (n == 0)
                continue;
            for (int b = 0; b < batch; b++)
                for (int64_t t = 0; t < n; t++) {
                    memcpy(kp + (((size_t)b * n + t) * n_kv) * d, x + (((size_t)b * ctx + t0 + t) * n_kv) * d,
                           (size_t)n_kv * d * sizeof(float));
                    memcpy(vp + (((size_t)b * n + t) * n_kv) * d, xv + (((size_t)b * ctx + t0 + t) * n_kv) * d,
                           (size_t)n_kv * d * sizeof(float));
                }
            st = tq_cuda_kv_append(c, TQ_DTYPE_F32, kp, vp, (int)n, 0);
            CHECK(st == TQ_OK, "append: %s", tq_last_error());
        }
        /* the device encoder's rows must be the CPU's bytes */
        uint8_t *kg = malloc(rows * kb), *vg = malloc(rows * vb);
        CHECK(tq_cuda_kv_read_rows(c, 0, (int)ctx, kg, vg) == TQ_OK, "read rows: %s", tq_last_error());
        CHECK_MEMEQ(kg, kr, rows * kb, "device-appended K rows != CPU bytes (%s d=%d)", scheme, d);
        CHECK_MEMEQ(vg, vr, rows * vb, "device-appended V rows != CPU bytes (%s d=%d)", scheme, d);
        free(kg), free(vg), free(kp), free(vp), free(xv);
    } else {
        for (size_t i = 0; i < rows * d; i++)
            x[i] = rng_normal() * 0.5f;
        CHECK(tq_kv_encode_v(s, d, TQ_DTYPE_F32, x, (int64_t)rows, vr, rows * vb, NULL) == TQ_OK, "enc v");
        /* append in chunks of up to 4096 tokens of host rows */
        for (int64_t t0 = 0; t0 < ctx; t0 += 4096) {
            const int n = (int)(ctx - t0 < 4096 ? ctx - t0 : 4096);
            uint8_t *kp = malloc((size_t)batch * n * n_kv * kb), *vp = malloc((size_t)batch * n * n_kv * vb);
            for (int b = 0; b < batch; b++) {
                memcpy(kp + (size_t)b * n * n_kv * kb, kr + ((size_t)b * ctx + t0) * n_kv * kb, (size_t)n * n_kv * kb);
                memcpy(vp + (size_t)b * n * n_kv * vb, vr + ((size_t)b * ctx + t0) * n_kv * vb, (size_t)n * n_kv * vb);
            }
            st = tq_cuda_kv_append_rows(c, kp, vp, n);
            CHECK(st == TQ_OK, "append rows: %s", tq_last_error());
            free(kp), free(vp);
        }
    }
    CHECK(tq_kv_decode_k(s, d, kr, (int64_t)rows, kd, (int64_t)(rows * d), NULL) == TQ_OK, "dec k");
    CHECK(tq_kv_decode_v(s, d, vr, (int64_t)rows, vd, (int64_t)(rows * d), NULL) == TQ_OK, "dec v");
    for (size_t i = 0; i < (size_t)batch * n_q * n_heads * d; i++)
        q[i] = rng_normal();
    const float scale = 1.0f / sqrtf((float)d);
    ref = malloc((size_t)batch * n_q * n_heads * d * sizeof(double));
    for (int b = 0; b < batch; b++)
        for (int qi = 0; qi < n_q; qi++)
            for (int hq = 0; hq < n_heads; hq++) {
                const int hk = hq / group;
                const int64_t lim = ctx - n_q + qi + 1;
                const float *qv = q + (((size_t)b * n_q + qi) * n_heads + hq) * d;
                double m = -INFINITY, l = 0.0;
                for (int64_t t = 0; t < lim; t++) {
                    const float *kv = kd + (((size_t)b * ctx + t) * n_kv + hk) * d;
                    double dot = 0.0;
                    for (int j = 0; j < d; j++)
                        dot += (double)qv[j] * kv[j];
                    sc[t] = dot * scale;
                    if (sc[t] > m)
                        m = sc[t];
                }
                for (int j = 0; j < d; j++)
                    acc[j] = 0.0;
                for (int64_t t = 0; t < lim; t++) {
                    const double p = exp(sc[t] - m);
                    l += p;
                    const float *vv = vd + (((size_t)b * ctx + t) * n_kv + hk) * d;
                    for (int j = 0; j < d; j++)
                        acc[j] += p * vv[j];
                }
                double *rv = ref + (((size_t)b * n_q + qi) * n_heads + hq) * d;
                for (int j = 0; j < d; j++)
                    rv[j] = acc[j] / l;
            }
    for (int mg = TQ_CUDA_MERGE_AUTO; mg <= TQ_CUDA_MERGE_CLUSTER; mg++) {
        if (merge_only >= 0 && mg != merge_only)
            continue;
        for (size_t i = 0; i < (size_t)batch * n_q * n_heads * d; i++)
            o[i] = NAN; /* poison */
        const tq_cuda_kv_opts ko = {.n_splits = splits, .merge = (tq_cuda_merge)mg};
        CHECK(tq_cuda_kv_set_opts(c, &ko) == TQ_OK, "opts");
        st = tq_cuda_kv_attend(c, q, n_q, n_heads, scale, o, 0);
        CHECK(st == TQ_OK, "attend %s merge %d: %s", scheme, mg, tq_last_error());
        if (st != TQ_OK)
            goto done;
        double wm = 0.0;
        for (size_t row = 0; row < (size_t)batch * n_q * n_heads; row++) {
            const float *ov = o + row * d;
            const double *rv = ref + row * d;
            double num = 0.0, den = 0.0;
            int finite = 1;
            for (int j = 0; j < d; j++) {
                const double e = (double)ov[j] - rv[j];
                if (!isfinite(ov[j]))
                    finite = 0;
                num += e * e;
                den += rv[j] * rv[j];
            }
            const double rel = finite ? sqrt(num / (den > 1e-30 ? den : 1e-30)) : 1e9;
            if (rel > wm)
                wm = rel;
        }
        CHECK(wm <= 2e-3, "attention error %.3g > 2e-3 (%s d=%d ctx=%lld splits %d, merge %d)", wm, scheme, d,
              (long long)ctx, splits, mg);
        if (wm > worst)
            worst = wm;
    }
done:
    tq_cuda_kv_free(c);
    free(ref);
    free(x), free(kr), free(vr), free(kd), free(vd), free(q), free(o), free(sc), free(acc);
    return worst;
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_cuda_kv");
    int quick = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--merge") && i + 1 < argc) {
            tq_cuda_merge m;
            if (tq_cuda_merge_parse(argv[++i], &m) != TQ_OK) {
                fprintf(stderr, "test_cuda_kv: %s\n", tq_last_error());
                return 2;
            }
            merge_only = (int)m;
        }
    if (!tq_cuda_compiled())
        return t_skip("this build has no CUDA kernels (no nvcc at build time)");
    if (tq_cuda_available() <= 0)
        return t_skip("no CUDA device");
    char name[128];
    tq_cuda_device_name(name, sizeof(name));
    printf("device: %s\n", name);
    rng_state = t_seed;

    /* bad input gets a status, not a crash */
    {
        tq_kv_scheme s;
        tq_kv_scheme_parse("turbo", &s);
        tq_cuda_kv *c = NULL;
        CHECK(tq_cuda_kv_create(s, 96, 8, 100, 1, &c) != TQ_OK && c == NULL, "head_dim 96 must fail");
        CHECK(tq_cuda_kv_create(s, 128, 0, 100, 1, &c) == TQ_E_ARG, "0 kv heads must fail");
        CHECK(tq_cuda_kv_create(s, 128, 8, 100, 1, &c) == TQ_OK, "create");
        float dummy[8 * 128] = {0};
        CHECK(tq_cuda_kv_attend(c, dummy, 1, 12, 1.0f, dummy, 0) == TQ_E_ARG, "n_heads 12 not multiple of 8");
        CHECK(tq_cuda_kv_attend(c, dummy, 1, 8, 1.0f, dummy, 0) == TQ_E_ARG, "attend on an empty cache");
        CHECK(tq_cuda_kv_fill_random(c, 101, 1) == TQ_E_OVERFLOW, "overflow past max_tokens");
        tq_cuda_kv_free(c);
    }

    test_encode(quick);

    struct {
        const char *scheme;
        int d, n_kv, group, batch, n_q;
        int64_t ctx;
        int splits, gpu_append;
    } cases[] = {
        {"turbo:k8v3", 128, 2, 4, 1, 1, 1, 0, 0},
        {"turbo:k8v3", 128, 2, 4, 1, 1, 17, 0, 0},
        {"turbo:k8v3", 128, 8, 4, 1, 1, 1000, 0, 1},
        {"turbo:k8v3", 128, 2, 4, 3, 3, 777, 3, 0},
        {"turbo:k4v3", 128, 2, 4, 1, 1, 4097, 0, 0},
        {"turbo:k8v3", 64, 2, 8, 2, 1, 300, 0, 1},
        {"turbo:k8v3", 256, 1, 1, 1, 1, 1500, 0, 0},
        {"turbo:k4v3", 256, 2, 8, 1, 2, 999, 5, 1},
        {"turbo:k8v4", 128, 2, 4, 1, 1, 513, 0, 0},
        {"turbo:k8v2", 64, 2, 1, 1, 1, 65, 0, 0},
        {"turbo:k4v2", 128, 1, 8, 1, 1, 2048, 0, 0},
        {"turbo:k4v4", 64, 2, 4, 2, 1, 129, 0, 1},
        {"bf16", 128, 2, 4, 1, 1, 1000, 0, 1},
        {"bf16", 64, 2, 8, 3, 1, 333, 0, 0},
        {"bf16", 256, 1, 4, 1, 2, 700, 0, 0},
        {"f16", 128, 2, 4, 1, 1, 1000, 0, 0},
        {"kv8", 128, 2, 4, 1, 1, 1000, 0, 1},
        {"kv8", 64, 2, 1, 2, 1, 257, 0, 0},
        {"kv8", 256, 1, 8, 1, 1, 400, 2, 0},
        {"kv4", 128, 2, 4, 1, 1, 600, 0, 0},
        {"turbo:k8v3", 128, 1, 8, 1, 3, 5, 0, 0}, /* 24 rows: 3 row blocks */
        /* forced splits around the cluster sizes (<= 8 portable, <= 16 non-portable, 17: L2) */
        {"turbo:k8v3", 128, 2, 4, 2, 1, 3000, 16, 0},
        {"turbo:k4v3", 128, 2, 4, 1, 2, 2000, 9, 0},
        {"bf16", 128, 2, 4, 1, 1, 1900, 3, 0},
        {"kv8", 256, 1, 4, 1, 1, 2047, 17, 0},
        /* SmolLM2 geometry (GPU forward): d 64, 3 kv heads, group 3, prefill chunks of 21 queries
         * (63 rows: 8 row blocks whose boundaries cut query tokens) and decode */
        {"turbo:k8v3", 64, 3, 3, 1, 21, 300, 0, 1},
        {"kv8", 64, 3, 3, 1, 21, 300, 0, 1},
        {"bf16", 64, 3, 3, 1, 21, 300, 0, 1},
        {"turbo:k8v3", 64, 3, 3, 1, 1, 1000, 0, 1},
        {"kv8", 64, 3, 3, 1, 1, 1000, 0, 1},
        {"turbo:k8v3", 128, 8, 4, 1, 1, 32768, 0, 0},
        {"bf16", 128, 8, 4, 1, 1, 32769, 0, 0},
        {"turbo:k8v3", 128, 2, 4, 1, 1, 131072, 0, 0},
        {"kv8", 128, 1, 4, 1, 1, 131071, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (quick && cases[i].ctx > 2048)
            continue;
        const double e = attend_case(cases[i].scheme, cases[i].d, cases[i].n_kv, cases[i].group, cases[i].batch,
                                     cases[i].n_q, cases[i].ctx, cases[i].splits, cases[i].gpu_append);
        printf("attend %-11s d=%3d kv=%d G=%d B=%d n_q=%d ctx=%6lld splits=%d: max rel L2 err %.3g\n",
               cases[i].scheme, cases[i].d, cases[i].n_kv, cases[i].group, cases[i].batch, cases[i].n_q,
               (long long)cases[i].ctx, cases[i].splits, e);
        CHECK(e <= 2e-3, "attention error %.3g > 2e-3 (%s d=%d ctx=%lld)", e, cases[i].scheme, cases[i].d,
              (long long)cases[i].ctx);
    }
    return t_done();
}
