/* test_attn_invariance.c -- batch invariance of every attention path (issue 10 item 11): a query
 * row gives the same floats whether it is attended alone (decode), in chunks of 7 or 64 rows, or
 * inside one block of all rows (prefill), with 1 and 2 threads. Paths: the window cache with
 * f32, f16, bf16, kv8 and kv4 rows; the turbo cache's fused kernel and its dequantize-window
 * reference; GQA groups 1, 3, 4; a sliding-window layer. Runs on the ISA this CPU picks (ctest
 * also runs it with TQ_CPU=scalar). The cache is filled once; every call then attends a subset
 * of the rows over the same bytes, so any difference comes from the attention code. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/kvcache_turbo.h"
#include "t.h"
#include "t_cpu.h"

static float *randv(tq_rng *r, size_t n, float sd)
{
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = sd * tq_rng_normal(r);
    return v;
}

typedef void (*attend_fn)(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0,
                          float *out, tq_pool *pool);

static void turbo_ref(tq_kvcache *c, int il, const float *q, int64_t n_q, int64_t pos0,
                      float *out, tq_pool *pool)
{
    (void)tq_kvc_turbo_attend_ref(c, il, q, n_q, pos0, out, pool);
}

/* rows [0, n) of layer il in calls of `step` rows (step 0: one call) */
static void attend_all(attend_fn f, tq_kvcache *c, int il, const float *q, int64_t n,
                       int64_t step, float *out, tq_pool *pool)
{
    const size_t qd = (size_t)c->n_heads * c->head_dim;
    if (!step)
        step = n;
    for (int64_t p = 0; p < n; p += step)
        f(c, il, q + p * qd, n - p < step ? n - p : step, p, out + p * qd, pool);
}

/* the first row (and element) where a and b differ, -1 if none */
static int64_t first_diff(const float *a, const float *b, int64_t n, int64_t qd)
{
    for (int64_t i = 0; i < n * qd; i++)
        if (memcmp(a + i, b + i, sizeof(float)))
            return i / qd;
    return -1;
}

static void run(const char *sch, const char *turbo_mode, int hd, int nh, int nkv, int64_t n,
                int window, tq_pool *pool2, tq_rng *r)
{
    tq_kv_scheme s;
    CHECK(tq_kv_scheme_parse(sch, &s) == TQ_OK, "parse %s", sch);
    tq_kvcache *c = NULL;
    const int n_layers = 2;
    int win[2] = {window, 0};
    tq_status st = tq_kvcache_create(s, n_layers, nh, nkv, hd, n, 1.0f / sqrtf((float)hd), 2, &c);
    if (!st && turbo_mode)
        st = tq_kvc_turbo_set_attn(c, TQ_TURBO_ATTN_BOTH);
    CHECK(st == TQ_OK, "%s create: %s", sch, tq_last_error());
    if (st)
        return;
    c->window = win;
    attend_fn f = c->ops->attend;
    if (turbo_mode && !strcmp(turbo_mode, "fused"))
        f = tq_kvc_turbo_attend_fused;
    else if (turbo_mode)
        f = turbo_ref;
    const size_t kvd = (size_t)nkv * hd, qd = (size_t)nh * hd;
    float *k = randv(r, (size_t)n * kvd, 1.0f), *v = randv(r, (size_t)n * kvd, 1.0f);
    float *q = randv(r, (size_t)n * qd, 2.0f);
    for (int64_t t = 0; t < n; t++) /* a common offset per element, like real keys */
        for (size_t e = 0; e < kvd; e++)
            k[t * kvd + e] += (float)((e * 7) % 5) - 2.0f;
    float *ref = malloc((size_t)n * qd * sizeof(float)), *o = malloc((size_t)n * qd * 4);
    static const int64_t steps[4] = {1, 7, 64, 0};
    int bad = 0;
    for (int il = 0; il < n_layers; il++) {
        CHECK(c->ops->append(c, il, 0, k, v, n) == TQ_OK, "append");
        attend_all(f, c, il, q, n, 1, ref, NULL); /* decode, one thread: the reference */
        for (int th = 1; th <= 2; th++)
            for (int si = 0; si < 4; si++) {
                if (th == 1 && si == 0)
                    continue;
                memset(o, 0xff, (size_t)n * qd * sizeof(float));
                attend_all(f, c, il, q, n, steps[si], o, th == 2 ? pool2 : NULL);
                const int64_t row = first_diff(ref, o, n, (int64_t)qd);
                CHECK(row < 0, "%s%s%s hd %d heads %d/%d layer %d (window %d): rows in calls of "
                               "%lld (%d thread%s) differ from decode, first at row %lld",
                      sch, turbo_mode ? " " : "", turbo_mode ? turbo_mode : "", hd, nh, nkv, il,
                      il ? 0 : window, (long long)(steps[si] ? steps[si] : n), th,
                      th > 1 ? "s" : "", (long long)row);
                bad += row >= 0;
            }
    }
    printf("  %-12s %-5s hd %3d heads %2d/%d rows %4lld window %3d: %s\n", sch,
           turbo_mode ? turbo_mode : "", hd, nh, nkv, (long long)n, window,
           bad ? "DIFFERS" : "identical in every split");
    free(k);
    free(v);
    free(q);
    free(ref);
    free(o);
    tq_kvcache_free(c);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_attn_invariance");
    const int cpu_rc = t_cpu_args(argc, argv); /* --cpu ISA */
    if (cpu_rc)
        return cpu_rc;
    printf("isa: %s\n", tq_isa_name(tq_cpu_isa()));
    tq_rng r;
    tq_rng_seed(&r, t_seed);
    tq_pool *pool2 = NULL;
    CHECK(tq_pool_create(2, &pool2) == TQ_OK, "pool");
    static const char *window_schemes[] = {"f32", "f16", "bf16", "kv8", "kv4"};
    for (int i = 0; i < 5; i++) {
        run(window_schemes[i], NULL, 64, 9, 3, 200, 77, pool2, &r); /* SmolLM2 shape */
        run(window_schemes[i], NULL, 128, 4, 1, 100, 0, pool2, &r); /* gemma-like GQA */
    }
    run("f32", NULL, 72, 2, 2, 90, 0, pool2, &r); /* head_dim not a multiple of 16 */
    /* turbo: > TQ_TURBO_KC and > TQ_TURBO_QMAX rows, so decode chunks and prefill slices */
    run("turbo", "fused", 64, 9, 3, 520, 0, pool2, &r);
    run("turbo", "ref", 64, 9, 3, 150, 0, pool2, &r);
    run("turbo:k4v3+rk", "fused", 128, 8, 2, 280, 40, pool2, &r);
    run("turbo:k4v3+rk", "ref", 128, 8, 2, 100, 40, pool2, &r);
    run("turbo:k8v8", "fused", 256, 4, 1, 300, 100, pool2, &r);
    tq_pool_free(pool2);
    return t_done();
}
