/* test_turbo_attn.c -- the TurboQuant cache on random data: the fused kernel against the
 * dequantize-window reference (same packed bytes) and against a float64 oracle over the codec's
 * decoded rows, for every head_dim, several GQA groups, key and value widths, the +rk/+e8
 * variants, prefill and decode, 1 and 2 threads; the fused result does not depend on the thread
 * count; the constant-key-block guard (no NaN); real packed bytes per token; head_dim refusals;
 * scheme strings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "kv/kv_internal.h"
#include "model/kvcache_turbo.h"
#include "t.h"
#include "t_cpu.h"

/* fused vs the float64 oracle, elementwise |fused - oracle| <= ATOL + RTOL * |oracle|: the
 * fused scores are float dot products (~1e-6 relative), the oracle's are double. */
#define ATOL 2e-5
#define RTOL 2e-4
/* fused vs the reference: both use the same float scores and do the rest in double (ordered
 * differently), then round once: the floats must be identical except for rare near-ties of the
 * final rounding, which may differ by one ulp (or, where a sum cancels, by 1e-12 of the row's
 * largest |value|). */
#define MAX_DIFF_FRAC 1e-3

static float *randv(tq_rng *r, size_t n, float sd)
{
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = sd * tq_rng_normal(r);
    return v;
}

static double max_err(const float *a, const float *b, size_t n, int *nonfinite)
{
    double e = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i]))
            (*nonfinite)++;
        const double d = fabs((double)a[i] - b[i]) / (ATOL + RTOL * fabs((double)b[i]));
        e = d > e ? d : e;
    }
    return e; /* <= 1 passes */
}

/* fused (a) vs reference (b), rows of hd: count differing floats and those beyond one ulp
 * (plus 1e-12 of the row's largest |b|) */
static void cmp_exact(const float *a, const float *b, size_t n, int hd, int64_t *n_diff,
                      int64_t *n_far)
{
    for (size_t r0 = 0; r0 < n; r0 += (size_t)hd) {
        double rmax = 0.0;
        for (int e = 0; e < hd; e++)
            rmax = fabs((double)b[r0 + e]) > rmax ? fabs((double)b[r0 + e]) : rmax;
        for (int e = 0; e < hd; e++) {
            const float x = a[r0 + e], y = b[r0 + e];
            if (memcmp(&x, &y, sizeof x) == 0)
                continue;
            (*n_diff)++;
            const double ulp = fabs((double)nextafterf(y, INFINITY) - y);
            if (fabs((double)x - y) > ulp + 1e-12 * rmax)
                (*n_far)++;
        }
    }
}

/* float64 attention over the codec's decoded rows of layer il (no sliding window): independent
 * of both paths (they share the float dot kernel of the scores) */
static void oracle(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0, float *out)
{
    const tq_kvc_turbo *t = (const tq_kvc_turbo *)(const void *)c;
    const tq_kv_scheme s = t->ls[il];
    const int hd = c->head_dim, nh = c->n_heads, group = nh / c->n_kv_heads;
    const int64_t n_win = pos0 + n_q;
    float *Kf = malloc((size_t)n_win * hd * sizeof(float)), *Vf = malloc((size_t)n_win * hd * 4);
    double *p = malloc((size_t)n_win * sizeof(double));
    for (int g = 0; g < c->n_kv_heads; g++) {
        tq_kv_decode_k(s, hd, c->k[il] + (size_t)g * c->n_ctx * t->k_rb[il], n_win, Kf,
                       n_win * hd, NULL);
        tq_kv_decode_v(s, hd, c->v[il] + (size_t)g * c->n_ctx * t->v_rb[il], n_win, Vf,
                       n_win * hd, NULL);
        for (int64_t i = 0; i < n_q; i++)
            for (int h = g * group; h < (g + 1) * group; h++) {
                float qr[TQ_KV_MAX_HEAD_DIM];
                const float *qq = q + ((size_t)i * nh + h) * hd;
                if (t->rot_k && s.kind == TQ_KV_TURBO) {
                    tq_kv_rotate_ref(qq, hd, qr);
                    qq = qr;
                }
                const int64_t n_keys = pos0 + i + 1;
                double mx = -INFINITY, sum = 0.0, o[TQ_KV_MAX_HEAD_DIM] = {0};
                for (int64_t u = 0; u < n_keys; u++) {
                    double d = 0.0;
                    for (int e = 0; e < hd; e++)
                        d += (double)qq[e] * Kf[u * hd + e];
                    p[u] = d * c->scale;
                    mx = p[u] > mx ? p[u] : mx;
                }
                for (int64_t u = 0; u < n_keys; u++) {
                    p[u] = exp(p[u] - mx);
                    sum += p[u];
                    for (int e = 0; e < hd; e++)
                        o[e] += p[u] * Vf[u * hd + e];
                }
                for (int e = 0; e < hd; e++)
                    out[((size_t)i * nh + h) * hd + e] = (float)(o[e] / sum);
            }
    }
    free(Kf);
    free(Vf);
    free(p);
}

/* fill a cache in n1 (prefill) + decode steps, compare both attentions at every step */
/* parse a scheme; a trailing "+e8" (not offered by the parser any more) sets TQ_KV_FLAG_EDGE8
 * so that the per-layer machinery stays tested */
static tq_status parse_x(const char *str, tq_kv_scheme *s)
{
    char b[48];
    snprintf(b, sizeof b, "%s", str);
    const size_t n = strlen(b);
    const int e8 = n > 3 && !strcmp(b + n - 3, "+e8");
    if (e8)
        b[n - 3] = '\0';
    tq_status st = tq_kv_scheme_parse(b, s);
    if (!st && e8)
        s->flags |= TQ_KV_FLAG_EDGE8;
    return st;
}

static void run_case(const char *sch, int hd, int nh, int nkv, int n_layers, int64_t n_pre,
                     int64_t n_dec, tq_pool *pool2, tq_rng *r, int constant_blocks, int window)
{
    int win[8] = {0};
    tq_kv_scheme s;
    CHECK(parse_x(sch, &s) == TQ_OK, "parse %s", sch);
    tq_kvcache *c1 = NULL, *c2 = NULL;
    const int64_t n_ctx = n_pre + n_dec;
    const float scale = 1.0f / sqrtf((float)hd);
    tq_status st = tq_kvcache_create(s, n_layers, nh, nkv, hd, n_ctx, scale, 1, &c1);
    if (!st)
        st = tq_kvcache_create(s, n_layers, nh, nkv, hd, n_ctx, scale, 2, &c2);
    if (!st) /* the reference path too, on the same caches */
        st = tq_kvc_turbo_set_attn(c1, TQ_TURBO_ATTN_BOTH);
    if (!st)
        st = tq_kvc_turbo_set_attn(c2, TQ_TURBO_ATTN_BOTH);
    CHECK(st == TQ_OK, "%s create: %s", sch, tq_last_error());
    if (st)
        goto out;
    for (int l = 0; l < n_layers && l < 8; l++)
        win[l] = l % 2 ? 0 : window; /* sliding on even layers (gemma3-like) */
    if (window)
        c1->window = c2->window = win;
    const size_t kvd = (size_t)nkv * hd, qd = (size_t)nh * hd;
    float *k = randv(r, (size_t)n_ctx * kvd, 1.0f), *v = randv(r, (size_t)n_ctx * kvd, 1.0f);
    float *q = randv(r, (size_t)n_ctx * qd, 2.0f);
    /* keys with a large common offset per head (like real K), some constant 32-blocks */
    for (int64_t t = 0; t < n_ctx; t++)
        for (size_t e = 0; e < kvd; e++) {
            k[t * kvd + e] += (float)((e * 7) % 5) - 2.0f;
            if (constant_blocks && t % 3 == 0 && e % hd < 32)
                k[t * kvd + e] = 0.75f; /* zero overflows fp16 without the guard */
        }
    float *of = malloc((size_t)n_ctx * qd * sizeof(float));
    float *of2 = malloc((size_t)n_ctx * qd * sizeof(float));
    float *orf = malloc((size_t)n_ctx * qd * sizeof(float));
    float *oo = malloc((size_t)n_ctx * qd * sizeof(float));
    double worst = 0.0;
    int nonfinite = 0, thr_diff = 0;
    int64_t n_cmp = 0, n_diff = 0, n_far = 0;
    for (int il = 0; il < n_layers; il++) {
        int64_t pos = 0;
        while (pos < n_ctx) {
            const int64_t n = pos == 0 ? n_pre : 1;
            CHECK(c1->ops->append(c1, il, pos, k + pos * kvd, v + pos * kvd, n) == TQ_OK,
                  "append");
            c2->ops->append(c2, il, pos, k + pos * kvd, v + pos * kvd, n);
            tq_kvc_turbo_attend_fused(c1, il, q + pos * qd, n, pos, of, NULL);
            tq_kvc_turbo_attend_fused(c2, il, q + pos * qd, n, pos, of2, pool2);
            CHECK(tq_kvc_turbo_attend_ref(c1, il, q + pos * qd, n, pos, orf, NULL) == TQ_OK,
                  "ref");
            cmp_exact(of, orf, (size_t)n * qd, hd, &n_diff, &n_far);
            n_cmp += n * (int64_t)qd;
            if (!window) {
                oracle(c1, il, q + pos * qd, n, pos, oo);
                const double e = max_err(of, oo, (size_t)n * qd, &nonfinite);
                worst = e > worst ? e : worst;
            }
            thr_diff += memcmp(of, of2, (size_t)n * qd * sizeof(float)) != 0;
            pos += n;
        }
    }
    CHECK(worst <= 1.0, "%s hd %d group %d: fused vs float64 oracle worst %.3f of tolerance "
                        "(atol %g rtol %g)", sch, hd, nh / nkv, worst, ATOL, RTOL);
    CHECK(n_far == 0 && (double)n_diff <= MAX_DIFF_FRAC * (double)n_cmp,
          "%s hd %d group %d: fused vs reference: %lld of %lld floats differ, %lld by more than "
          "one ulp", sch, hd, nh / nkv, (long long)n_diff, (long long)n_cmp, (long long)n_far);
    CHECK(nonfinite == 0, "%s hd %d: %d non-finite outputs", sch, hd, nonfinite);
    CHECK(thr_diff == 0, "%s hd %d: fused output differs between 1 and 2 threads (%d calls)",
          sch, hd, thr_diff);
    if (constant_blocks && !(s.flags & TQ_KV_FLAG_ROTK)) /* rotation spreads a constant block */
        CHECK(((tq_kvc_turbo *)(void *)c1)->n_safe_blocks > 0, "%s: guard counted blocks", sch);
    char ow[48] = "not run (sliding window)";
    if (!window)
        snprintf(ow, sizeof ow, "worst %.3f of tolerance", worst);
    printf("  %-16s hd %3d heads %d/%d window %3d: vs oracle %s; vs reference %lld of %lld "
           "floats differ (1 ulp)\n", sch, hd, nh, nkv, window, ow, (long long)n_diff,
           (long long)n_cmp);
    free(oo);
    free(k);
    free(v);
    free(q);
    free(of);
    free(of2);
    free(orf);
out:
    tq_kvcache_free(c1);
    tq_kvcache_free(c2);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_turbo_attn");
    const int cpu_rc = t_cpu_args(argc, argv); /* --cpu ISA */
    if (cpu_rc)
        return cpu_rc;
    tq_rng r;
    tq_rng_seed(&r, t_seed);
    tq_pool *pool2 = NULL;
    CHECK(tq_pool_create(2, &pool2) == TQ_OK, "pool");

    /* fused == reference on random caches */
    run_case("turbo", 64, 9, 3, 2, 70, 300, pool2, &r, 0, 0);        /* SmolLM2 shape, chunks */
    run_case("turbo:k4v3", 128, 8, 2, 1, 33, 40, pool2, &r, 0, 0);
    run_case("turbo:k8v8", 256, 4, 1, 1, 40, 20, pool2, &r, 0, 0);
    run_case("turbo:k2v2", 512, 2, 2, 1, 20, 10, pool2, &r, 0, 0);
    run_case("turbo:k5v5", 64, 4, 4, 1, 300, 5, pool2, &r, 0, 0);    /* many query blocks */
    run_case("turbo:k4v3+rk", 64, 9, 3, 2, 50, 30, pool2, &r, 0, 0);
    run_case("turbo:k8v3+e8", 128, 4, 2, 3, 20, 20, pool2, &r, 0, 0);
    run_case("turbo:k4v2+rk+e8", 64, 6, 3, 3, 20, 10, pool2, &r, 1, 0);
    run_case("turbo", 64, 9, 3, 1, 40, 20, pool2, &r, 1, 0);         /* constant key blocks */
    /* sliding-window layers (test at the cache level; real sliding layers are stored bf16) */
    run_case("turbo", 256, 4, 1, 2, 100, 300, pool2, &r, 0, 40);
    run_case("turbo:k4v3", 64, 9, 3, 2, 300, 20, pool2, &r, 0, 77);

    /* the ISA's V-row decode to the rotated domain == the scalar spec, every width */
    {
        const tq_attn_kernels *ak = tq_attn_kernels_pick();
        int diff = 0;
        static const int vbs[] = {2, 3, 4, 5, 8};
        for (int b = 0; b < 5; b++)
            for (int dd = 64; dd <= 512; dd *= 2) {
                float x[512];
                double y0[512], y1[512];
                uint8_t row[600];
                for (int e = 0; e < dd; e++)
                    x[e] = tq_rng_normal(&r);
                tq_kv_scheme s = {.kind = TQ_KV_TURBO, .k_bits = 8, .v_bits = vbs[b]};
                tq_kv_encode_v(s, dd, TQ_DTYPE_F32, x, 1, row, sizeof row, NULL);
                tq_attn_dec_v_rot_scalar(row, dd, vbs[b], y0);
                ak->dec_v_rot(row, dd, vbs[b], y1);
                diff += memcmp(y0, y1, (size_t)dd * sizeof(double)) != 0;
            }
        CHECK(diff == 0, "dec_v_rot (%s) == scalar: %d rows differ",
              ak == &tq_attn_kernels_avx512 ? "avx512"
              : ak == &tq_attn_kernels_avx2 ? "avx2"
                                            : "scalar",
              diff);
    }

    /* real packed bytes: SmolLM2 shape (30 layers, 3 kv heads, hd 64) */
    {
        tq_kv_scheme s;
        tq_kvcache *c;
        tq_kv_scheme_parse("turbo", &s);
        CHECK(tq_kvcache_create(s, 30, 9, 3, 64, 16, 0.125f, 1, &c) == TQ_OK, "create");
        /* K row 64 + 2*2*2 = 72 bytes, V row 64*3/8 + 2*2 = 28 bytes */
        CHECK(tq_kvcache_token_bytes(c) == (size_t)(72 + 28) * 3 * 30, "k8v3 bytes %zu",
              tq_kvcache_token_bytes(c));
        tq_kvcache_free(c);
        parse_x("turbo:k8v3+e8", &s);
        CHECK(tq_kvcache_create(s, 30, 9, 3, 64, 16, 0.125f, 1, &c) == TQ_OK, "create e8");
        /* two layers at k8v8: V row 64 + 4 = 68 */
        CHECK(tq_kvcache_token_bytes(c) == (size_t)(72 + 28) * 3 * 28 + (size_t)(72 + 68) * 3 * 2,
              "e8 bytes %zu", tq_kvcache_token_bytes(c));
        tq_kvcache_free(c);
    }
    /* refusals: head_dim, scheme strings */
    {
        tq_kv_scheme s;
        tq_kvcache *c = NULL;
        tq_kv_scheme_parse("turbo:k4v3", &s);
        CHECK(tq_kvcache_create(s, 2, 4, 2, 96, 16, 0.1f, 1, &c) == TQ_E_UNSUPPORTED &&
                  strstr(tq_last_error(), "64, 128, 256, 512"),
              "head_dim 96 refused naming the valid ones: %s", tq_last_error());
        CHECK(c == NULL, "no cache");
        CHECK(tq_kv_scheme_parse("turbo:k3v3", &s) == TQ_E_ARG, "k3 refused");
        CHECK(tq_kv_scheme_parse("turbo+xx", &s) == TQ_E_ARG &&
                  strstr(tq_last_error(), "+rk"), "bad suffix lists the valid ones");
        CHECK(tq_kv_scheme_parse("turbo+rk+rk", &s) == TQ_E_ARG, "repeated suffix");
        CHECK(tq_kv_scheme_parse("kv8+rk", &s) == TQ_E_ARG, "suffix on kv8");
        CHECK(tq_kv_scheme_parse("turbo:k4v2+e8", &s) == TQ_E_ARG, "+e8 is not offered");
        CHECK(parse_x("turbo:k4v2+rk+e8", &s) == TQ_OK &&
                  s.flags == (TQ_KV_FLAG_ROTK | TQ_KV_FLAG_EDGE8) && s.k_bits == 4,
              "flags");
        char b[48];
        CHECK(!strcmp(tq_kv_scheme_name(s, b, sizeof b), "turbo:k4v2+rk+e8"), "name %s", b);
        CHECK(!strcmp(tq_kv_scheme_key(s, b, sizeof b), "turbo-k4v2-rk-e8"), "key %s", b);
        float x[64] = {0};
        uint8_t row[128];
        CHECK(tq_kv_encode_k(s, 64, TQ_DTYPE_F32, x, 1, row, sizeof row, NULL) ==
                  TQ_E_UNSUPPORTED, "codec refuses cache-level flags");
    }
    tq_pool_free(pool2);
    return t_done();
}
