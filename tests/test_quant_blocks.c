/* test_quant_blocks.c -- the GGUF block quantizers (src/quant/quant_ggml.c) block by block:
 * 1. against the `gguf` Python package (goldens by scripts/quant/gen_block_goldens.py in
 *    tests/data/quant): our dequantization of random blocks equals the package's (the layout our
 *    quantizers write is the one the package reads), and our Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 bytes equal
 *    the package's quantize() on the same inputs (IQ4_NL: dequantization only, the package has
 *    no quantizer for it);
 * 2. round trip on seeded random data with outliers: relative RMS error and the worst error per
 *    block (in units of the block's max |x|) within per-type bounds; an all-zero block decodes to
 *    zeros; the output does not depend on the chunking of the call;
 * 3. the K types' scale search never loses to the plain min/max fit (tq_ggml_quantize_k_rtn): per
 *    super-block, in the weighted squared error it minimises (w = rms(sub-block) + |x|), on six
 *    kinds of data, and it wins in total (by 5% for Q4_K/Q5_K, 1% for Q6_K);
 * 4. the pipeline's searched Q4_0 Q5_0 Q4_1 Q5_1 (tq_ggml_quantize_search) never lose to ggml's
 *    reference block (tq_ggml_quantize) per block in the same weighted error, win in total;
 *    IQ4_NL's scale search never loses to its plain fit, wins in total;
 * 5. refusals: unknown type, a count that is not a block multiple, a short buffer. */
#include "core/rng.h"
#include "quant/quant_internal.h"
#include "t.h"
#include "turboquant.h"

static const char *const names[] = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                    "Q4_K", "Q5_K", "Q6_K", "IQ4_NL"};
static const int types[] = {TQ_GGML_Q8_0, TQ_GGML_Q4_0, TQ_GGML_Q4_1, TQ_GGML_Q5_0, TQ_GGML_Q5_1,
                            TQ_GGML_Q4_K, TQ_GGML_Q5_K, TQ_GGML_Q6_K, TQ_GGML_IQ4_NL};
#define N_TYPES 9
#define IQ4_RMSE 0.125 /* measured 0.110 + ~15% */
#define IQ4_GAIN 0.95 /* measured -9.1% */
/* Bounds of the round trip on N(0,1) data with 1% outliers x10. Worst error per block in units of
 * its max |x|: from the rules (Q8_0 half a step 0.5/127; Q4_0/Q5_0 one step 1/8, 1/16 at the
 * clipped end; Q4_1/Q5_1 half a step of the range, <= 2/30, 2/62) plus f16 rounding of the
 * scales; IQ4_NL (half its widest gap, 12/127, widened by the scale search): measured; the K
 * types and all relative RMS bounds: measured at the default seed + ~15%. */
static const double rel_rmse_max[] = {0.011, 0.16, 0.115, 0.08, 0.055, 0.11, 0.056, 0.031,
                                      IQ4_RMSE};
static const double worst_max[] = {0.0045, 0.13, 0.07, 0.066, 0.035, 0.08, 0.04, 0.02, 0.12};

static void *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(*n);
    if (fread(b, 1, *n, f) != *n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void check_golden(int k)
{
    char path[256];
    snprintf(path, sizeof(path), "tests/data/quant/%s.bin", names[k]);
    size_t n = 0;
    uint8_t *b = slurp(path, &n);
    CHECK(b != NULL && n > 24 && !memcmp(b, "TQQB", 4), "%s: cannot read %s", names[k], path);
    if (!b)
        return;
    uint32_t h[4];
    memcpy(h, b + 4, 16);
    const uint32_t nb = h[1], bv = h[2], bb = h[3];
    CHECK((int)h[0] == types[k] && bv == tq_ggml_block_size(types[k]) &&
              bb == tq_ggml_type_size(types[k]), "%s: header", names[k]);
    const uint8_t *raw = b + 20;
    float deq[64 * 256], mine[64 * 256];
    memcpy(deq, raw + (size_t)nb * bb, sizeof(float) * nb * bv);
    tq_status st = tq_ggml_dequant_ref(types[k], raw, (size_t)nb * bb, mine, (int64_t)nb * bv);
    CHECK(st == TQ_OK, "%s: dequant: %s", names[k], tq_last_error());
    int exact = 0;
    double worst = 0;
    for (uint32_t i = 0; i < nb * bv; i++) {
        exact += mine[i] == deq[i];
        const double e = fabs((double)mine[i] - deq[i]) / (fabs(deq[i]) + 1e-30);
        worst = e > worst ? e : worst;
    }
    printf("%-5s dequant vs gguf: %d/%u exact, worst relative difference %.3g\n", names[k],
           exact, nb * bv, worst);
    CHECK(worst <= 1e-6, "%s: our dequant differs from the gguf package's by %.3g", names[k],
          worst);
    const uint8_t *p = raw + (size_t)nb * bb + sizeof(float) * nb * bv;
    uint32_t has_q;
    memcpy(&has_q, p, 4);
    p += 4;
    if (has_q) {
        const float *x = (const float *)(const void *)p; /* file offsets keep 4-byte alignment */
        float xs[64 * 32];
        memcpy(xs, x, sizeof(float) * nb * bv);
        const uint8_t *ref = p + sizeof(float) * nb * bv;
        uint8_t q[64 * 34];
        st = tq_ggml_quantize(types[k], xs, (int64_t)nb * bv, q, sizeof(q));
        CHECK(st == TQ_OK, "%s: quantize: %s", names[k], tq_last_error());
        int same = 0;
        for (uint32_t i = 0; i < nb; i++)
            same += !memcmp(q + (size_t)i * bb, ref + (size_t)i * bb, bb);
        printf("%-5s quantize vs gguf: %d/%u blocks byte-identical\n", names[k], same, nb);
        CHECK(same == (int)nb, "%s: %u of %u blocks differ from the gguf package's quantize()",
              names[k], nb - same, nb);
    }
    free(b);
}

static void check_roundtrip(int k, tq_rng *r)
{
    enum { N = 256 * 64 };
    static float x[N], y[N], y2[N];
    static uint8_t q[N * 2], q2[N * 2];
    for (int i = 0; i < N; i++) {
        x[i] = (float)tq_rng_normal(r);
        if (tq_rng_u64(r) % 100 == 0)
            x[i] *= 10.0f;
    }
    for (int i = 0; i < 256; i++)
        x[i] = 0.0f; /* an all-zero block (one super-block) */
    for (int i = 256; i < 512; i++)
        x[i] = 0.25f + 0.001f * (float)(i % 7); /* positive only: the min/offset path */
    const int type = types[k];
    size_t nb;
    tq_ggml_nbytes(type, N, &nb);
    CHECK(tq_ggml_quantize(type, x, N, q, sizeof(q)) == TQ_OK, "%s: quantize", names[k]);
    CHECK(tq_ggml_dequant_ref(type, q, nb, y, N) == TQ_OK, "%s: dequant", names[k]);
    double e2 = 0, x2 = 0, worst = 0;
    const int64_t bs = tq_ggml_block_size(type);
    for (int64_t b0 = 0; b0 < N; b0 += bs) {
        double amax = 0;
        for (int64_t i = b0; i < b0 + bs; i++)
            amax = fabs(x[i]) > amax ? fabs(x[i]) : amax;
        for (int64_t i = b0; i < b0 + bs; i++) {
            const double d = (double)y[i] - x[i];
            e2 += d * d;
            x2 += (double)x[i] * x[i];
            if (amax > 0)
                worst = fabs(d) / amax > worst ? fabs(d) / amax : worst;
            else
                CHECK(y[i] == 0.0f, "%s: zero block decoded to %g", names[k], y[i]);
        }
    }
    const double rel = sqrt(e2 / x2);
    printf("%-5s round trip: relative RMS error %.4f (bound %.3f), worst |error|/block max %.4f "
           "(bound %.3f)\n", names[k], rel, rel_rmse_max[k], worst, worst_max[k]);
    CHECK(rel <= rel_rmse_max[k], "%s: relative RMS error %.4f > %.3f", names[k], rel,
          rel_rmse_max[k]);
    CHECK(worst <= worst_max[k], "%s: worst error %.4f of the block max > %.3f", names[k], worst,
          worst_max[k]);
    /* chunking: quantizing the second half alone gives the same bytes */
    CHECK(tq_ggml_quantize(type, x + N / 2, N / 2, q2, sizeof(q2)) == TQ_OK &&
              !memcmp(q2, q + nb / 2, nb / 2), "%s: output depends on the call's extent",
          names[k]);
    (void)y2;
}

/* sub-block of the error weights: 32 (Q4_K, Q5_K) or 16 (Q6_K) */
static double werr(const float *x, const float *y, int sub)
{
    double e = 0.0;
    for (int j = 0; j < 256; j += sub) {
        double s2 = 0.0;
        for (int l = 0; l < sub; l++)
            s2 += (double)x[j + l] * x[j + l];
        const double av = sqrt(s2 / sub);
        for (int l = 0; l < sub; l++) {
            const double d = (double)y[j + l] - x[j + l];
            e += (av + fabs(x[j + l])) * d * d;
        }
    }
    return e;
}

static void check_search(int k, tq_rng *r)
{
    enum { NB = 192 };
    static float x[256 * NB], y[256], z[256];
    uint8_t q[256], qr[256];
    const int type = types[k], sub = type == TQ_GGML_Q6_K ? 16 : 32;
    for (int i = 0; i < 256 * NB; i++) {
        const int kind = i / (256 * NB / 6); /* 32 super-blocks of each */
        double v = tq_rng_normal(r);
        if (kind == 1) /* heavy tails */
            v /= sqrt(0.02 + (double)(tq_rng_u64(r) % 1000) / 1000.0);
        else if (kind == 2 && tq_rng_u64(r) % 50 == 0) /* outliers */
            v *= 20.0;
        else if (kind == 3) /* one sign */
            v = fabs(v) + 0.5;
        else if (kind == 4) /* tiny */
            v *= 1e-6;
        else if (kind == 5) /* a uniform grid (a requantized source) */
            v = 0.01 * (double)(tq_rng_u64(r) % 16) - 0.07;
        x[i] = (float)v;
    }
    double es = 0, er = 0, us = 0, ur = 0, x2 = 0;
    int worse = 0, better = 0;
    for (int b = 0; b < NB; b++) {
        const float *xb = x + 256 * b;
        CHECK(tq_ggml_quantize(type, xb, 256, q, sizeof(q)) == TQ_OK, "%s: quantize", names[k]);
        CHECK(tq_ggml_quantize_k_rtn(type, xb, qr) == 0, "%s: rtn", names[k]);
        tq_ggml_dequant_ref(type, q, tq_ggml_type_size(type), y, 256);
        tq_ggml_dequant_ref(type, qr, tq_ggml_type_size(type), z, 256);
        const double a = werr(xb, y, sub), c = werr(xb, z, sub);
        worse += a > c * (1.0 + 1e-9);
        better += a < c;
        es += a;
        er += c;
        for (int l = 0; l < 256; l++) {
            us += ((double)y[l] - xb[l]) * ((double)y[l] - xb[l]);
            ur += ((double)z[l] - xb[l]) * ((double)z[l] - xb[l]);
            x2 += (double)xb[l] * xb[l];
        }
    }
    printf("%-5s search vs RTN: weighted error %.4g vs %.4g (better on %d/%d super-blocks, worse on "
           "%d); relative RMS error %.4f vs %.4f\n", names[k], es, er, better, NB, worse,
           sqrt(us / x2), sqrt(ur / x2));
    CHECK(worse == 0, "%s: the search lost to RTN on %d super-blocks", names[k], worse);
    /* measured at the default seed: -21% (Q4_K), -12% (Q5_K), -2.8% (Q6_K) */
    const double gain = type == TQ_GGML_Q6_K ? 0.99 : 0.95;
    CHECK(es < gain * er, "%s: the search gains less than %.0f%% over RTN (%.4g vs %.4g)",
          names[k], 100.0 * (1.0 - gain), es, er);
}

static double werr32(const float *x, const float *y)
{
    double s2 = 0.0, e = 0.0;
    for (int l = 0; l < 32; l++)
        s2 += (double)x[l] * x[l];
    const double av = sqrt(s2 / 32);
    for (int l = 0; l < 32; l++)
        e += (av + fabs(x[l])) * ((double)y[l] - x[l]) * ((double)y[l] - x[l]);
    return e;
}

static void check_search32(int k, tq_rng *r)
{
    enum { NB = 1536 };
    static float x[32 * NB], y[32 * NB], z[32 * NB];
    static uint8_t q[24 * NB], qr[24 * NB];
    const int type = types[k];
    for (int i = 0; i < 32 * NB; i++) { /* the six kinds of check_search, 256 blocks each */
        const int kind = i / (32 * NB / 6);
        double v = tq_rng_normal(r);
        if (kind == 1)
            v /= sqrt(0.02 + (double)(tq_rng_u64(r) % 1000) / 1000.0);
        else if (kind == 2 && tq_rng_u64(r) % 50 == 0)
            v *= 20.0;
        else if (kind == 3)
            v = fabs(v) + 0.5;
        else if (kind == 4)
            v *= 1e-6;
        else if (kind == 5)
            v = 0.01 * (double)(tq_rng_u64(r) % 16) - 0.07;
        x[i] = (float)v;
    }
    for (int i = 0; i < 32; i++)
        x[i] = 0.0f; /* a zero block */
    size_t nb;
    tq_ggml_nbytes(type, 32 * NB, &nb);
    CHECK(tq_ggml_quantize_search(type, x, 32 * NB, q, sizeof(q)) == TQ_OK, "%s: search",
          names[k]);
    CHECK(tq_ggml_quantize(type, x, 32 * NB, qr, sizeof(qr)) == TQ_OK, "%s: ref", names[k]);
    tq_ggml_dequant_ref(type, q, nb, y, 32 * NB);
    tq_ggml_dequant_ref(type, qr, nb, z, 32 * NB);
    double es = 0, er = 0;
    int worse = 0, better = 0;
    for (int b = 0; b < NB; b++) {
        const double a = werr32(x + 32 * b, y + 32 * b), c = werr32(x + 32 * b, z + 32 * b);
        worse += a > c * (1.0 + 1e-9);
        better += a < c;
        es += a;
        er += c;
    }
    for (int l = 0; l < 32; l++)
        CHECK(y[l] == 0.0f, "%s: zero block decoded to %g", names[k], y[l]);
    printf("%-5s search vs ggml's rule: weighted error %.4g vs %.4g (better on %d/%d blocks, "
           "worse on %d)\n", names[k], es, er, better, NB, worse);
    CHECK(worse == 0, "%s: the search lost to the reference on %d blocks", names[k], worse);
    /* measured at the default seed: -4.4% Q4_0, -3.2% Q5_0, -22% Q4_1, -17% Q5_1 */
    const double gain = type == TQ_GGML_Q4_0 || type == TQ_GGML_Q5_0 ? 0.99 : 0.9;
    CHECK(es < gain * er, "%s: the search gains less than %.0f%% (%.4g vs %.4g)", names[k],
          100.0 * (1.0 - gain), es, er);
    CHECK(tq_ggml_quantize_search(type, x, 33, q, sizeof(q)) != TQ_OK, "%s: 33 values refused",
          names[k]);
}

/* IQ4_NL: the searched quantizer (tq_ggml_quantize) never loses to the plain fit (the largest
 * element at level -127, nearest levels) per block in the weighted error, and wins in total. */
static void check_iq4_search(tq_rng *r)
{
    enum { NB = 1536 };
    static float x[32 * NB], y[32 * NB], z[32 * NB];
    static uint8_t q[18 * NB], qp[18 * NB];
    for (int i = 0; i < 32 * NB; i++) { /* the six kinds of check_search */
        const int kind = i / (32 * NB / 6);
        double v = tq_rng_normal(r);
        if (kind == 1)
            v /= sqrt(0.02 + (double)(tq_rng_u64(r) % 1000) / 1000.0);
        else if (kind == 2 && tq_rng_u64(r) % 50 == 0)
            v *= 20.0;
        else if (kind == 3)
            v = fabs(v) + 0.5;
        else if (kind == 4)
            v *= 1e-6;
        else if (kind == 5)
            v = 0.01 * (double)(tq_rng_u64(r) % 16) - 0.07;
        x[i] = (float)v;
    }
    for (int i = 0; i < 32; i++)
        x[i] = 0.0f;
    CHECK(tq_ggml_quantize(TQ_GGML_IQ4_NL, x, 32 * NB, q, sizeof(q)) == TQ_OK, "IQ4_NL quantize");
    for (int b = 0; b < NB; b++)
        tq_ggml_quantize_iq4_nl_plain(x + 32 * b, qp + 18 * b);
    tq_ggml_dequant_ref(TQ_GGML_IQ4_NL, q, sizeof(q), y, 32 * NB);
    tq_ggml_dequant_ref(TQ_GGML_IQ4_NL, qp, sizeof(qp), z, 32 * NB);
    double es = 0, ep = 0;
    int worse = 0, better = 0;
    for (int b = 0; b < NB; b++) {
        const double a = werr32(x + 32 * b, y + 32 * b), c = werr32(x + 32 * b, z + 32 * b);
        worse += a > c * (1.0 + 1e-9);
        better += a < c;
        es += a;
        ep += c;
    }
    for (int l = 0; l < 32; l++)
        CHECK(y[l] == 0.0f, "IQ4_NL: zero block decoded to %g", y[l]);
    printf("IQ4_NL search vs plain fit: weighted error %.4g vs %.4g (better on %d/%d blocks, "
           "worse on %d)\n", es, ep, better, NB, worse);
    CHECK(worse == 0, "IQ4_NL: the search lost to the plain fit on %d blocks", worse);
    CHECK(es < IQ4_GAIN * ep, "IQ4_NL: the search gains less than %.0f%% (%.4g vs %.4g)",
          100.0 * (1.0 - IQ4_GAIN), es, ep);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_quant_blocks");
    tq_rng r;
    tq_rng_seed(&r, t_seed);
    for (int k = 0; k < N_TYPES; k++) {
        check_golden(k);
        check_roundtrip(k, &r);
        if (types[k] == TQ_GGML_Q4_K || types[k] == TQ_GGML_Q5_K || types[k] == TQ_GGML_Q6_K)
            check_search(k, &r);
        if (types[k] == TQ_GGML_Q4_0 || types[k] == TQ_GGML_Q5_0 || types[k] == TQ_GGML_Q4_1 ||
            types[k] == TQ_GGML_Q5_1)
            check_search32(k, &r);
        if (types[k] == TQ_GGML_IQ4_NL)
            check_iq4_search(&r);
    }
    CHECK(tq_ggml_quantize_k_rtn(TQ_GGML_Q4_0, NULL, NULL) == -1, "k_rtn: Q4_0 refused");
    float x[64] = {0};
    uint8_t q[256];
    CHECK(tq_ggml_quantize(TQ_GGML_Q2_K, x, 256, q, sizeof(q)) == TQ_E_UNSUPPORTED,
          "Q2_K refused");
    printf("refusal: %s\n", tq_last_error());
    CHECK(tq_ggml_quantize(TQ_GGML_Q8_0, x, 33, q, sizeof(q)) != TQ_OK, "33 values refused");
    CHECK(tq_ggml_quantize(TQ_GGML_Q8_0, x, 64, q, 67) == TQ_E_ARG, "short buffer refused");
    CHECK(tq_ggml_can_quantize(TQ_GGML_Q6_K) && !tq_ggml_can_quantize(TQ_GGML_Q3_K),
          "can_quantize");
    return t_done();
}
