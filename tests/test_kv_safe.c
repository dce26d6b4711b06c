/* test_kv_safe.c -- the codec's two encode modes for constant key groups (tq_kv_enc_mode, kv.h):
 *  - TQ_KV_ENC_REFERENCE_EXACT (and opts NULL) writes exactly the bytes of tq_kv_encode_k(), the
 *    path the KV goldens pin (test_kv_golden), so a constant group decodes to NaN as in the
 *    reference;
 *  - TQ_KV_ENC_SAFE changes only the constant groups (every other byte equal), counts them in
 *    n_safe, and they decode to the group's constant within fp16 rounding; a group holding a
 *    non-finite input keeps the reference's bytes; V rows and other schemes are unaffected.
 * Random rows with a printed seed; f32 and bf16 inputs; 1 and 2 threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "kv/kv_internal.h"
#include "t.h"

enum { D = 128, ROWS = 160, G = D / 32 }; /* 160 x 128 > the codec's serial cutoff */

static void run(const char *sch, tq_pool *pool, tq_rng *r)
{
    tq_kv_scheme s;
    CHECK(tq_kv_scheme_parse(sch, &s) == TQ_OK, "parse %s", sch);
    size_t kb, vb;
    CHECK(tq_kv_row_bytes(s, D, &kb, &vb) == TQ_OK, "row bytes");
    float *x = malloc(sizeof(float) * ROWS * D), *dec = malloc(sizeof(float) * ROWS * D);
    uint16_t *xb = malloc(2 * ROWS * D);
    uint8_t *ref = malloc(kb * ROWS), *exact = malloc(kb * ROWS), *safe = malloc(kb * ROWS);
    int is_const[ROWS][G];
    int n_const = 0;
    for (int i = 0; i < ROWS; i++)
        for (int g = 0; g < G; g++) {
            float *xs = x + i * D + g * 32;
            const int kind = (i * G + g) % 5; /* 0: constant, 1: constant + a NaN, else random */
            const float c = 0.75f + 0.125f * (float)(i % 7) - (i % 2 ? 3.0f : 0.0f);
            for (int j = 0; j < 32; j++)
                xs[j] = kind <= 1 ? c : 4.0f * (tq_rng_uniform(r) - 0.5f);
            if (kind == 1)
                xs[5] = NAN;
            is_const[i][g] = kind == 0;
            n_const += kind == 0;
        }
    for (int i = 0; i < ROWS * D; i++) { /* bf16 copy; the constants are exact in bf16 */
        uint32_t u;
        memcpy(&u, &x[i], 4);
        xb[i] = (uint16_t)(u >> 16);
    }
    for (int in = 0; in < 2; in++) {
        const tq_dtype ty = in ? TQ_DTYPE_BF16 : TQ_DTYPE_F32;
        const void *src = in ? (const void *)xb : (const void *)x;
        const char *tn = in ? "bf16" : "f32";
        CHECK(tq_kv_encode_k(s, D, ty, src, ROWS, ref, kb * ROWS, pool) == TQ_OK, "encode");
        tq_kv_encode_opts eo = {.mode = TQ_KV_ENC_REFERENCE_EXACT, .n_safe = -1};
        CHECK(tq_kv_encode_k_opts(s, D, ty, src, ROWS, exact, kb * ROWS, pool, &eo) == TQ_OK,
              "encode exact");
        CHECK(eo.n_safe == 0 && !memcmp(ref, exact, kb * ROWS),
              "%s %s: reference-exact = tq_kv_encode_k bytes (n_safe %lld)", sch, tn,
              (long long)eo.n_safe);
        CHECK(tq_kv_encode_k_opts(s, D, ty, src, ROWS, exact, kb * ROWS, pool, NULL) == TQ_OK &&
                  !memcmp(ref, exact, kb * ROWS), "%s %s: opts NULL = reference-exact", sch, tn);
        eo = (tq_kv_encode_opts){.mode = TQ_KV_ENC_SAFE};
        CHECK(tq_kv_encode_k_opts(s, D, ty, src, ROWS, safe, kb * ROWS, pool, &eo) == TQ_OK,
              "encode safe");
        const int turbo = s.kind == TQ_KV_TURBO;
        CHECK(eo.n_safe == (turbo ? n_const : 0), "%s %s: n_safe %lld, constant groups %d", sch,
              tn, (long long)eo.n_safe, turbo ? n_const : 0);
        /* decode both; compare group by group */
        int nan_ref = 0, bad_safe = 0, other_diff = 0;
        float *dref = malloc(sizeof(float) * ROWS * D);
        CHECK(tq_kv_decode_k(s, D, ref, ROWS, dref, ROWS * D, NULL) == TQ_OK, "decode ref");
        CHECK(tq_kv_decode_k(s, D, safe, ROWS, dec, ROWS * D, NULL) == TQ_OK, "decode safe");
        for (int i = 0; i < ROWS; i++)
            for (int g = 0; g < G; g++) {
                const float *a = dref + i * D + g * 32, *b = dec + i * D + g * 32;
                const float c = x[i * D + g * 32];
                int same = 1;
                for (int j = 0; j < 32; j++)
                    same &= !memcmp(&a[j], &b[j], 4);
                if (turbo && is_const[i][g]) {
                    nan_ref += isnan(a[0]) != 0;
                    for (int j = 0; j < 32; j++)
                        bad_safe += !(fabsf(b[j] - c) <= 2e-3f * fabsf(c));
                } else {
                    other_diff += !same;
                }
            }
        if (turbo)
            CHECK(nan_ref == n_const, "%s %s: the reference decodes %d/%d constant groups to NaN "
                                      "(the defect)", sch, tn, nan_ref, n_const);
        CHECK(bad_safe == 0, "%s %s: %d elements of safe groups off their constant", sch, tn,
              bad_safe);
        CHECK(other_diff == 0, "%s %s: %d non-constant groups changed by the safe mode", sch, tn,
              other_diff);
        free(dref);
    }
    free(x), free(dec), free(xb), free(ref), free(exact), free(safe);
    printf("  %-12s: %d constant groups of %d\n", sch, n_const, ROWS * G);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_kv_safe");
    tq_rng r;
    tq_rng_seed(&r, t_seed);
    tq_pool *pool = NULL;
    CHECK(tq_pool_create(2, &pool) == TQ_OK, "pool");
    static const char *schemes[] = {"turbo:k8v3", "turbo:k4v3", "turbo:k2v2", "turbo:k5v4",
                                    "kv8", "bf16"};
    for (int k = 0; k < 6; k++) {
        run(schemes[k], NULL, &r);
        run(schemes[k], pool, &r);
    }
    tq_kv_encode_opts bad = {.mode = (tq_kv_enc_mode)7};
    float z[D] = {0};
    uint8_t buf[1024];
    tq_kv_scheme s;
    tq_kv_scheme_parse("turbo", &s);
    CHECK(tq_kv_encode_k_opts(s, D, TQ_DTYPE_F32, z, 1, buf, sizeof buf, NULL, &bad) == TQ_E_ARG,
          "bad mode refused: %s", tq_last_error());
    tq_pool_free(pool);
    return t_done();
}
