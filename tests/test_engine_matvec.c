/* test_engine_matvec.c -- every matvec/GEMM kernel (each ISA, each weight dtype) against the
 * scalar specification on random inputs, awkward shapes (k not a multiple of the vector width,
 * rows not a multiple of 4, n = 1..9 tokens), plus thread-count invariance of the driver, and
 * the AVX-512 attention row kernels (row and transposed-K forms) against a double-precision
 * softmax attention. */
#include "core/core.h"
#include "core/half.h"
#include "core/rng.h"
#include "cpu/matvec.h"
#include "t.h"

static double nmse(const float *ref, const float *got, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)got[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

static void fill_w(tq_rng *r, tq_dtype t, void *w, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float v = tq_rng_uniform(r) * 2.0f - 1.0f;
        if (t == TQ_DTYPE_F32)
            ((float *)w)[i] = v;
        else if (t == TQ_DTYPE_F16)
            ((uint16_t *)w)[i] = tq_f32_to_f16(v);
        else
            ((uint16_t *)w)[i] = tq_f32_to_bf16(v);
    }
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_engine_matvec");
    const tq_mm_kernels *ks[8];
    const int nk = tq_mm_all(ks, 8);
    printf("kernels:");
    for (int i = 0; i < nk; i++)
        printf(" %s", ks[i]->name);
    printf("\n");
    static const int64_t shapes[][2] = {{1, 1}, {7, 5}, {16, 64}, {33, 100}, {64, 576}, {5, 1537}};
    tq_rng rng;
    tq_rng_seed(&rng, t_seed);
    const int64_t maxm = 64, maxk = 1537, maxn = 9;
    void *w = tq_malloc((size_t)(maxm * maxk * 4));
    float *x = tq_malloc((size_t)(maxn * (maxk + 3) * 4));
    uint16_t *xb = tq_malloc((size_t)(maxn * (maxk + 3) * 2));
    float *yr = tq_malloc((size_t)(maxn * (maxm + 2) * 4));
    float *yg = tq_malloc((size_t)(maxn * (maxm + 2) * 4));
    for (int dt = 0; dt < TQ_DTYPE_COUNT; dt++) {
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            const int64_t m = shapes[s][0], k = shapes[s][1];
            const int64_t ldx = k + 3, ldy = m + 2; /* leading dimensions wider than rows */
            fill_w(&rng, (tq_dtype)dt, w, m * k);
            for (int64_t i = 0; i < maxn * ldx; i++)
                x[i] = tq_rng_uniform(&rng) * 2.0f - 1.0f;
            tq_mm_round_x(x, ldx, maxn, k, xb);
            for (int64_t n = 1; n <= maxn; n++) {
                for (int64_t i = 0; i < n * ldy; i++)
                    yr[i] = yg[i] = -7.0f;
                ks[0]->mm[dt](w, k, x, NULL, ldx, n, yr, ldy, 0, m);
                for (int i = 1; i < nk; i++) {
                    if (!ks[i]->mm[dt])
                        continue;
                    for (int64_t j = 0; j < n * ldy; j++)
                        yg[j] = -7.0f;
                    /* two row ranges, as two threads would */
                    ks[i]->mm[dt](w, k, x, xb, ldx, n, yg, ldy, 0, m / 2);
                    ks[i]->mm[dt](w, k, x, xb, ldx, n, yg, ldy, m / 2, m);
                    double e = 0;
                    int pad_ok = 1;
                    for (int64_t t = 0; t < n; t++) {
                        e += nmse(yr + t * ldy, yg + t * ldy, m);
                        for (int64_t j = m; j < ldy; j++)
                            pad_ok &= yg[t * ldy + j] == -7.0f;
                    }
                    e /= (double)n;
                    /* f32 reassociation: ~1e-13; bf16-rounded activations: ~(2^-9)^2 */
                    const double lim = ks[i]->needs_xb ? 1e-4 : 1e-10;
                    CHECK(e <= lim, "%s %s m=%lld k=%lld n=%lld nmse=%.3g", ks[i]->name,
                          tq_dtype_name((tq_dtype)dt), (long long)m, (long long)k, (long long)n,
                          e);
                    CHECK(pad_ok, "%s wrote outside its rows", ks[i]->name);
                }
            }
        }
    }
    /* driver: identical bytes for 1, 2 and 3 threads, every dtype, selected kernel */
    for (int dt = 0; dt < TQ_DTYPE_COUNT; dt++) {
        const int64_t m = 61, k = 577, n = 5;
        fill_w(&rng, (tq_dtype)dt, w, m * k);
        for (int64_t i = 0; i < n * k; i++)
            x[i] = tq_rng_uniform(&rng) * 2.0f - 1.0f;
        tq_mm_round_x(x, k, n, k, xb);
        tq_mm mm;
        CHECK(tq_mm_select((tq_dtype)dt, NULL, &mm) == TQ_OK, "select");
        tq_mm_run(&mm, NULL, w, m, k, x, xb, k, n, yr, m);
        for (int th = 2; th <= 3; th++) {
            tq_pool *pool = NULL;
            CHECK(tq_pool_create(th, &pool) == TQ_OK, "pool");
            const uint64_t a0 = tq_alloc_count();
            tq_mm_run(&mm, pool, w, m, k, x, xb, k, n, yg, m);
            CHECK(tq_alloc_count() == a0, "tq_mm_run allocated");
            CHECK_MEMEQ(yr, yg, (size_t)(m * n * 4), "%s %s threads=%d differs from 1 thread",
                        mm.name, tq_dtype_name((tq_dtype)dt), th);
            tq_pool_free(pool);
        }
    }
    /* tq_mm_run_multi: the same bytes as separate runs, on 1 and 2 threads */
    for (int dt = 0; dt < TQ_DTYPE_COUNT; dt++) {
        const int64_t k = 100, n = 6, ma = 40, mb = 17;
        fill_w(&rng, (tq_dtype)dt, w, (ma + mb) * k);
        const void *wb2 = (const uint8_t *)w + (size_t)(ma * k) * tq_dtype_size((tq_dtype)dt);
        for (int64_t i = 0; i < n * k; i++)
            x[i] = tq_rng_uniform(&rng) * 2.0f - 1.0f;
        tq_mm_round_x(x, k, n, k, xb);
        tq_mm mm;
        CHECK(tq_mm_select((tq_dtype)dt, NULL, &mm) == TQ_OK, "select");
        tq_mm_run(&mm, NULL, w, ma, k, x, xb, k, n, yr, ma + mb);
        tq_mm_run(&mm, NULL, wb2, mb, k, x, xb, k, n, yr + ma, ma + mb);
        for (int th = 1; th <= 2; th++) {
            tq_pool *pool = NULL;
            CHECK(tq_pool_create(th, &pool) == TQ_OK, "pool");
            const tq_mm_out outs[2] = {{w, ma, yg, ma + mb}, {wb2, mb, yg + ma, ma + mb}};
            tq_mm_run_multi(&mm, pool, outs, 2, k, x, xb, k, n);
            CHECK_MEMEQ(yr, yg, sizeof(float) * (size_t)(n * (ma + mb)),
                        "run_multi %s threads=%d", tq_dtype_name((tq_dtype)dt), th);
            tq_pool_free(pool);
        }
    }
    /* f32 attention row kernel (AVX-512) against a double-precision softmax attention */
    if (tq_cpu_supports(TQ_ISA_AVX512)) {
        static const int hds[] = {16, 48, 64, 128};
        static const int nks[] = {1, 7, 300};
        float *K = tq_malloc(300 * 128 * 4), *V = tq_malloc(300 * 128 * 4);
        float *Kt = tq_malloc((128 * 320 + 64) * 4);
        float q[128], o[128], o2[128], sc[320];
        double ref[128], p[300];
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 3; b++) {
                const int hd = hds[a], nk = nks[b];
                for (int i = 0; i < nk * hd; i++) {
                    K[i] = tq_rng_normal(&rng);
                    V[i] = tq_rng_normal(&rng);
                }
                for (int i = 0; i < hd; i++)
                    q[i] = tq_rng_normal(&rng);
                const float scale = 1.0f / sqrtf((float)hd);
                double mx = -1e300, sum = 0;
                for (int t = 0; t < nk; t++) {
                    double d = 0;
                    for (int i = 0; i < hd; i++)
                        d += (double)q[i] * K[t * hd + i];
                    p[t] = d * scale;
                    mx = p[t] > mx ? p[t] : mx;
                }
                for (int t = 0; t < nk; t++)
                    sum += p[t] = exp(p[t] - mx);
                for (int i = 0; i < hd; i++) {
                    ref[i] = 0;
                    for (int t = 0; t < nk; t++)
                        ref[i] += p[t] / sum * V[t * hd + i];
                }
                tq_attn_row_avx512(q, K, V, nk, hd, scale, sc, o);
                const int64_t ldt = (nk + 63) / 64 * 64;
                tq_attn_transpose_avx512(K, nk, hd, Kt, ldt);
                tq_attn_row_t_avx512(q, Kt, ldt, V, nk, hd, scale, sc, o2);
                double num = 0, num2 = 0, den = 0;
                for (int i = 0; i < hd; i++) {
                    num += (o[i] - ref[i]) * (o[i] - ref[i]);
                    num2 += (o2[i] - ref[i]) * (o2[i] - ref[i]);
                    den += ref[i] * ref[i];
                }
                CHECK(num <= 1e-10 * den, "attn_row_avx512 hd=%d keys=%d nmse=%.3g", hd, nk,
                      num / den);
                CHECK(num2 <= 1e-10 * den, "attn_row_t_avx512 hd=%d keys=%d nmse=%.3g", hd, nk,
                      num2 / den);
            }
        tq_free(K);
        tq_free(V);
        tq_free(Kt);
    }
    /* prefill through OpenBLAS (forced): identical bytes for 1, 2 and 3 threads */
    const tq_mm_opts blas = {.openblas = 1};
    tq_mm gm;
    CHECK(tq_mm_select(TQ_DTYPE_F32, &blas, &gm) == TQ_OK, "select");
    if (gm.gemm_min_n <= 9 || gm.gemm != gm.fn) {
        const int64_t m = 61, k = 577, n = 20;
        fill_w(&rng, TQ_DTYPE_F32, w, m * k);
        float *xx = tq_malloc((size_t)(n * k) * 4);
        float *y1 = tq_malloc((size_t)(n * m) * 4), *y2 = tq_malloc((size_t)(n * m) * 4);
        for (int64_t i = 0; i < n * k; i++)
            xx[i] = tq_rng_uniform(&rng) * 2.0f - 1.0f;
        tq_mm_run(&gm, NULL, w, m, k, xx, NULL, k, n, y1, m);
        for (int th = 2; th <= 3; th++) {
            tq_pool *pool = NULL;
            CHECK(tq_pool_create(th, &pool) == TQ_OK, "pool");
            tq_mm_run(&gm, pool, w, m, k, xx, NULL, k, n, y2, m);
            CHECK_MEMEQ(y1, y2, sizeof(float) * (size_t)(n * m), "%s threads=%d",
                        gm.gemm_name, th);
            tq_pool_free(pool);
        }
        printf("prefill gemm %s: thread invariance checked\n", gm.gemm_name);
        tq_free(xx);
        tq_free(y1);
        tq_free(y2);
    }
    /* f16/bf16 -> f32 widening of cache rows: exact, every bit pattern (NaN stays NaN) */
    if (tq_cpu_supports(TQ_ISA_AVX512)) {
        uint16_t *h = tq_malloc(65536 * 2 + 2);
        float *f = tq_malloc(65537 * 4);
        for (int i = 0; i < 65537; i++)
            h[i] = (uint16_t)i;
        for (int is_f16 = 0; is_f16 <= 1; is_f16++) {
            tq_attn_widen_avx512(h, 65537, is_f16, f); /* 65537: a scalar tail too */
            int bad_bits = 0;
            for (int i = 0; i < 65537; i++) {
                const float want = is_f16 ? tq_f16_to_f32(h[i]) : tq_bf16_to_f32(h[i]);
                if (isnan(want) ? !isnan(f[i]) : memcmp(&want, &f[i], 4) != 0)
                    bad_bits++;
            }
            CHECK(bad_bits == 0, "widen %s: %d values differ", is_f16 ? "f16" : "bf16",
                  bad_bits);
        }
        tq_free(h);
        tq_free(f);
    }
    tq_mm bad;
    CHECK(tq_mm_select((tq_dtype)9, NULL, &bad) == TQ_E_UNSUPPORTED, "bad dtype refused");
    tq_free(w);
    tq_free(x);
    tq_free(xb);
    tq_free(yr);
    tq_free(yg);
    return t_done();
}
