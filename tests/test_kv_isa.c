/* test_kv_isa.c -- the oracle rule (STYLE 3.9): every KV kernel ISA this CPU runs writes the same
 * bytes as the scalar reference on random and awkward rows (zero, constant, signed zero,
 * subnormal, huge, NaN, +-inf, random bit patterns), and decodes to the same floats; f16/bf16
 * inputs give the bytes of their fp32 upcast; output is identical for 1, 2, 7 and 16 threads;
 * encode/decode never allocate. Seed printed; rerun with -s N. */
#include "core/core.h"
#include "core/half.h"
#include "kv/kv_internal.h"
#include "t.h"
#include "test_kv_data.h"

/* same float bits, or both NaN */
static int same_floats(const float *a, const float *b, int64_t n, int64_t *where)
{
    for (int64_t i = 0; i < n; i++) {
        const int an = a[i] != a[i], bn = b[i] != b[i];
        if (an && bn)
            continue;
        if (tq_f32_bits(a[i]) != tq_f32_bits(b[i])) {
            *where = i;
            return 0;
        }
    }
    return 1;
}

static const char *scheme_strs[] = {"f32", "f16", "bf16", "kv8", "kv4", "turbo:k8v3",
                                    "turbo:k8v2", "turbo:k4v4", "turbo:k5v5", "turbo:k2v8",
                                    "turbo:k4v3", "turbo:k2v2", "turbo:k8v8", "turbo:k5v2"};

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_kv_isa");
    tq_rng rng;
    tq_rng_seed(&rng, t_seed);
    const int dims[] = {64, 128, 256, 512};
    enum { NR = 67 };
    const int64_t nmax = (int64_t)NR * 512;
    float *x = tq_malloc((size_t)nmax * 4), *out_ref = tq_malloc((size_t)nmax * 4),
          *out = tq_malloc((size_t)nmax * 4);
    uint16_t *xh = tq_malloc((size_t)nmax * 2), *xb = tq_malloc((size_t)nmax * 2);
    const size_t cap = (size_t)nmax * 4;
    uint8_t *want = tq_malloc(cap), *got = tq_malloc(cap);
    tq_pool *pools[4] = {0};
    const int nth[4] = {1, 2, 7, 16};
    for (int i = 0; i < 4; i++)
        CHECK(tq_pool_create(nth[i], &pools[i]) == TQ_OK, "pool %d", nth[i]);

    int n_isa = 0;
    for (int isa = 0; isa < TQ_ISA_COUNT; isa++)
        if (tq_cpu_supports((tq_isa)isa)) {
            printf("  isa %s: tested\n", tq_isa_name((tq_isa)isa));
            n_isa++;
        } else {
            printf("  isa %s: not supported by this CPU, skipped\n", tq_isa_name((tq_isa)isa));
        }
    CHECK(n_isa >= 1, "scalar always runs");

    for (size_t si = 0; si < sizeof(scheme_strs) / sizeof(scheme_strs[0]); si++) {
        tq_kv_scheme s;
        CHECK(tq_kv_scheme_parse(scheme_strs[si], &s) == TQ_OK, "%s", scheme_strs[si]);
        for (int di = 0; di < 4; di++) {
            const int d = dims[di];
            const int64_t n = NR;
            kv_fill_rows(&rng, x, n, d);
            for (int64_t i = 0; i < n * d; i++) {
                xh[i] = tq_f32_to_f16(x[i]);
                xb[i] = tq_f32_to_bf16(x[i]);
            }
            for (int is_v = 0; is_v < 2; is_v++) {
                const size_t rb = tq_kv_row_bytes1(s, is_v, d);
                /* the spec: the row reference, row by row */
                for (int64_t r = 0; r < n; r++)
                    tq_kv_encode_row_ref(s, is_v, x + r * d, d, want + r * rb);
                for (int64_t r = 0; r < n; r++)
                    tq_kv_decode_row_ref(s, is_v, want + r * rb, d, out_ref + r * d);
                for (int isa = 0; isa < TQ_ISA_COUNT; isa++) {
                    if (!tq_cpu_supports((tq_isa)isa))
                        continue;
                    const char *iname = tq_isa_name((tq_isa)isa);
                    for (int p = 0; p < 4; p++) {
                        memset(got, 0xA5, n * rb);
                        const uint64_t a0 = tq_alloc_count();
                        tq_status st = tq_kv_encode_isa(s, is_v, d, TQ_DTYPE_F32, x, n, got, cap,
                                                        pools[p], (tq_isa)isa);
                        CHECK(st == TQ_OK, "encode %s", tq_last_error());
                        int64_t bad = -1;
                        for (int64_t i = 0; i < (int64_t)(n * rb) && bad < 0; i++)
                            if (got[i] != want[i])
                                bad = i;
                        CHECK(bad < 0, "%s %s d=%d %s threads=%d: byte %lld (row %lld, +%lld) "
                              "got %02x want %02x", scheme_strs[si], is_v ? "V" : "K", d, iname,
                              nth[p], (long long)bad, (long long)(bad / (int64_t)rb),
                              (long long)(bad % (int64_t)rb), bad >= 0 ? got[bad] : 0,
                              bad >= 0 ? want[bad] : 0);
                        st = tq_kv_decode_isa(s, is_v, d, want, n, out, nmax, pools[p],
                                              (tq_isa)isa);
                        CHECK(st == TQ_OK, "decode %s", tq_last_error());
                        CHECK(tq_alloc_count() == a0, "%s %s d=%d %s: encode/decode allocated",
                              scheme_strs[si], is_v ? "V" : "K", d, iname);
                        int64_t w = -1;
                        CHECK(same_floats(out, out_ref, n * d, &w),
                              "%s %s d=%d %s threads=%d decode: element %lld got %a want %a",
                              scheme_strs[si], is_v ? "V" : "K", d, iname, nth[p], (long long)w,
                              w >= 0 ? out[w] : 0.0, w >= 0 ? out_ref[w] : 0.0);
                        if (p != 1)
                            continue;
                        /* f16 / bf16 inputs = the bytes of their exact fp32 upcast */
                        for (int t = 1; t <= 2; t++) {
                            const uint16_t *h = t == 1 ? xh : xb;
                            for (int64_t i = 0; i < n * d; i++)
                                out[i] = t == 1 ? tq_f16_to_f32(h[i]) : tq_bf16_to_f32(h[i]);
                            uint8_t *w2 = tq_malloc(n * rb);
                            for (int64_t r = 0; r < n; r++)
                                tq_kv_encode_row_ref(s, is_v, out + r * d, d, w2 + r * rb);
                            st = tq_kv_encode_isa(s, is_v, d, (tq_dtype)t, h, n, got, cap,
                                                  pools[p], (tq_isa)isa);
                            CHECK(st == TQ_OK && memcmp(got, w2, n * rb) == 0,
                                  "%s %s d=%d %s from %s", scheme_strs[si], is_v ? "V" : "K", d,
                                  iname, t == 1 ? "f16" : "bf16");
                            tq_free(w2);
                        }
                    }
                }
            }
        }
    }
    /* decode of arbitrary bytes (every index value, fp16 NaN/inf/subnormal scales): every ISA
     * gives the scalar floats, and nothing crashes */
    for (size_t si = 0; si < sizeof(scheme_strs) / sizeof(scheme_strs[0]); si++) {
        tq_kv_scheme s;
        tq_kv_scheme_parse(scheme_strs[si], &s);
        for (int di = 0; di < 4; di++) {
            const int d = dims[di];
            const int64_t n = 9;
            for (int is_v = 0; is_v < 2; is_v++) {
                const size_t rb = tq_kv_row_bytes1(s, is_v, d);
                for (size_t i = 0; i < n * rb; i++)
                    want[i] = (uint8_t)tq_rng_u64(&rng);
                for (int64_t r = 0; r < n; r++)
                    tq_kv_decode_row_ref(s, is_v, want + r * rb, d, out_ref + r * d);
                for (int isa = 1; isa < TQ_ISA_COUNT; isa++) {
                    if (!tq_cpu_supports((tq_isa)isa))
                        continue;
                    tq_status st = tq_kv_decode_isa(s, is_v, d, want, n, out, nmax, NULL, (tq_isa)isa);
                    int64_t w = -1;
                    CHECK(st == TQ_OK && same_floats(out, out_ref, n * d, &w),
                          "%s %s d=%d %s random-bytes decode: element %lld", scheme_strs[si],
                          is_v ? "V" : "K", d, tq_isa_name((tq_isa)isa), (long long)w);
                }
            }
        }
    }

    /* baselines at head_dims turbo does not have: 192 and the largest, 8192, from f32 and f16 */
    {
        static const char *bs[4] = {"f16", "bf16", "kv8", "kv4"};
        const int bdims[2] = {192, 8192};
        for (int b = 0; b < 4; b++)
            for (int di = 0; di < 2; di++) {
                tq_kv_scheme s;
                tq_kv_scheme_parse(bs[b], &s);
                const int d = bdims[di];
                const int64_t n = 3;
                float *xx = tq_malloc((size_t)n * d * 4), *o1 = tq_malloc((size_t)n * d * 4),
                      *o2 = tq_malloc((size_t)n * d * 4);
                uint16_t *xh2 = tq_malloc((size_t)n * d * 2);
                uint8_t *w = tq_malloc((size_t)n * d * 4), *g = tq_malloc((size_t)n * d * 4);
                kv_fill_rows(&rng, xx, n, d);
                for (int64_t i = 0; i < n * d; i++) {
                    xh2[i] = tq_f32_to_f16(xx[i]);
                    o1[i] = tq_f16_to_f32(xh2[i]);
                }
                const size_t rb = tq_kv_row_bytes1(s, 0, d);
                for (int isa = 0; isa < TQ_ISA_COUNT; isa++) {
                    if (!tq_cpu_supports((tq_isa)isa))
                        continue;
                    for (int src = 0; src < 2; src++) {
                        const float *in = src ? o1 : xx;
                        for (int64_t r = 0; r < n; r++)
                            tq_kv_encode_row_ref(s, 0, in + r * d, d, w + r * rb);
                        tq_status st = tq_kv_encode_isa(s, 0, d, src ? TQ_DTYPE_F16 : TQ_DTYPE_F32,
                                                        src ? (const void *)xh2 : (const void *)xx,
                                                        n, g, n * rb, pools[1], (tq_isa)isa);
                        CHECK(st == TQ_OK && memcmp(g, w, n * rb) == 0, "%s d=%d %s from %s",
                              bs[b], d, tq_isa_name((tq_isa)isa), src ? "f16" : "f32");
                        st = tq_kv_decode_isa(s, 1, d, w, n, o2, n * d, pools[2], (tq_isa)isa);
                        float *want_out = (float *)g; /* g is free again: n*d*4 bytes */
                        for (int64_t r = 0; r < n; r++)
                            tq_kv_decode_row_ref(s, 1, w + r * rb, d, want_out + r * d);
                        int64_t where = -1;
                        CHECK(st == TQ_OK && same_floats(o2, want_out, n * d, &where),
                              "decode %s d=%d %s: element %lld", bs[b], d,
                              tq_isa_name((tq_isa)isa), (long long)where);
                    }
                }
                tq_free(xx);
                tq_free(o1);
                tq_free(o2);
                tq_free(xh2);
                tq_free(w);
                tq_free(g);
            }
    }

    /* awkward row counts: 1 and 4097 rows (the latter large enough to use the pool: jobs under
     * 16384 elements run on the caller's thread), every thread count, every scheme, default
     * ISA, via the public API */
    for (size_t si = 0; si < sizeof(scheme_strs) / sizeof(scheme_strs[0]); si++) {
        const int64_t counts[2] = {1, 4097};
        const int d = 128;
        tq_kv_scheme s;
        tq_kv_scheme_parse(scheme_strs[si], &s);
        float *xb2 = tq_malloc((size_t)4097 * d * 4);
        uint8_t *w = tq_malloc((size_t)4097 * 4 * d + 1), *g = tq_malloc((size_t)4097 * 4 * d + 1);
        kv_fill_rows(&rng, xb2, 4097, d);
        for (int c = 0; c < 2; c++)
            for (int is_v = 0; is_v < 2; is_v++) {
                const size_t rb = tq_kv_row_bytes1(s, is_v, d);
                for (int64_t r = 0; r < counts[c]; r++)
                    tq_kv_encode_row_ref(s, is_v, xb2 + r * d, d, w + r * rb);
                for (int p = 0; p < 4; p++) {
                    memset(g, 0x5a, counts[c] * rb + 1);
                    tq_status st = is_v ? tq_kv_encode_v(s, d, TQ_DTYPE_F32, xb2, counts[c], g,
                                                         counts[c] * rb, pools[p])
                                        : tq_kv_encode_k(s, d, TQ_DTYPE_F32, xb2, counts[c], g,
                                                         counts[c] * rb, pools[p]);
                    CHECK(st == TQ_OK && memcmp(g, w, counts[c] * rb) == 0 &&
                              g[counts[c] * rb] == 0x5a,
                          "%s %lld rows %s threads=%d: bytes differ or write past the end",
                          scheme_strs[si], (long long)counts[c], is_v ? "V" : "K", nth[p]);
                }
            }
        tq_free(xb2);
        tq_free(w);
        tq_free(g);
    }
    for (int i = 0; i < 4; i++)
        tq_pool_free(pools[i]);
    tq_free(x);
    tq_free(out_ref);
    tq_free(out);
    tq_free(xh);
    tq_free(xb);
    tq_free(want);
    tq_free(got);
    return t_done();
}
