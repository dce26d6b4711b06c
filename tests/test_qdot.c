/* test_qdot.c -- the native block-format kernels (src/cpu/qdot.h) on random blocks.
 *  1. every ISA table equals the scalar reference bit for bit (quantizer bytes, both dots);
 *  2. the scalar reference against an independent oracle: the same blocks dequantized by
 *     tq_ggml_dequant_ref() (verified against the gguf package) and a float64 dot, within the
 *     f32 rounding bound (k/32 + 8) * 2^-24 * sum |w_j x_j|;
 *  3. the q8 activation: |x - d qs| <= d/2 per element, and the q8 path within its stated bound
 *     of the f32 path: sum over blocks of (d_a/2) * sum |w_j| (+ the rounding bound);
 *  4. a matvec over rows [r0, r1) of n tokens equals the per-token dot bit for bit, and writes
 *     nothing outside its rows: n = 1..9, 11, 16, 17, 19, 20, 23 (the K formats' token tiles and
 *     leftovers), rows 3..35 (row tiles of 4 and leftovers), odd and even block counts; so do
 *     the gemm_q8 tiles over tq_q8p groups of 16 tokens (n = 1 .. 23: one and two groups);
 *  5. the q8 order of the 32-formats is the per-block one of qdot.h (test_spec_order: rows on
 *     which the old per-lane order gives other bits). */
#include <float.h>

#include "core/half.h"
#include "core/rng.h"
#include "cpu/qdot.h"
#include "t.h"
#include "turboquant.h"

static const int fmts[] = {TQ_GGML_Q8_0, TQ_GGML_Q4_0, TQ_GGML_Q4_1, TQ_GGML_Q5_0,
                           TQ_GGML_Q5_1, TQ_GGML_Q4_K, TQ_GGML_Q5_K, TQ_GGML_Q6_K};
#define NFMT ((int)(sizeof(fmts) / sizeof(fmts[0])))

static tq_rng rng;

/* A random f16 value of magnitude in [lo, hi), random sign if sgn. */
static uint16_t rand_f16(float lo, float hi, int sgn)
{
    float v = lo + (hi - lo) * tq_rng_uniform(&rng);
    if (sgn && (tq_rng_u64(&rng) & 1))
        v = -v;
    return tq_f32_to_f16(v);
}

/* Bytes [qlo, qhi) of a block of type t hold the quantized values (the rest: scales/mins). */
static void quant_bytes(int t, size_t *qlo, size_t *qhi)
{
    switch (t) {
    case TQ_GGML_Q8_0: *qlo = 2, *qhi = 34; break;
    case TQ_GGML_Q4_0: *qlo = 2, *qhi = 18; break;
    case TQ_GGML_Q4_1: *qlo = 4, *qhi = 20; break;
    case TQ_GGML_Q5_0: *qlo = 2, *qhi = 22; break;
    case TQ_GGML_Q5_1: *qlo = 4, *qhi = 24; break;
    case TQ_GGML_Q4_K: *qlo = 16, *qhi = 144; break;
    case TQ_GGML_Q5_K: *qlo = 16, *qhi = 176; break;
    default: *qlo = 0, *qhi = 192; break; /* Q6_K: ql, qh; int8 scales at 192, d at 208 */
    }
}

/* rows x k elements of type t: random quant bytes, sane random scales (and mins). The K
 * formats' 6-bit scales/mins and Q6_K's int8 scales stay fully random. */
static void rand_blocks(int t, uint8_t *w, int64_t rows, int64_t k)
{
    const size_t bs = tq_ggml_type_size(t);
    const int64_t nb = rows * (k / tq_ggml_block_size(t));
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *b = w + (size_t)i * bs;
        for (size_t j = 0; j < bs; j++)
            b[j] = (uint8_t)tq_rng_u64(&rng);
        if (t == TQ_GGML_Q6_K) {
            tq_wr16(b + 208, rand_f16(1e-4f, 2e-3f, 1));
        } else if (t == TQ_GGML_Q4_K || t == TQ_GGML_Q5_K) {
            tq_wr16(b, rand_f16(1e-4f, 2e-3f, 1));
            tq_wr16(b + 2, rand_f16(0.0f, 2e-3f, 1));
        } else {
            tq_wr16(b, rand_f16(1e-3f, 0.05f, 1));
            if (t == TQ_GGML_Q4_1 || t == TQ_GGML_Q5_1)
                tq_wr16(b + 2, rand_f16(0.0f, 0.5f, 1));
        }
    }
}

/* Element e of a quantized activation: its scale d and d * qs, read from the struct layout
 * (tq_q8a for the 32-formats, tq_q8k for the K formats). */
static void act_elem(int t, const void *act, int64_t e, double *d, double *xq)
{
    if (tq_qdot_act_block(t) == TQ_QKK) {
        const tq_q8k *a = (const tq_q8k *)act + e / TQ_QKK;
        *d = a->d;
        *xq = (double)a->d * a->qs[e % TQ_QKK];
    } else {
        const tq_q8a *a = (const tq_q8a *)act + e / TQ_QK;
        *d = a->d;
        *xq = (double)a->d * a->qs[e % TQ_QK];
    }
}

/* k activations: normal, some blocks scaled up/down, one block zero, one with an outlier. */
static void rand_x(float *x, int64_t k)
{
    for (int64_t j = 0; j < k; j++)
        x[j] = tq_rng_normal(&rng);
    for (int64_t b = 0; b < k / 32; b++) {
        const uint64_t r = tq_rng_u64(&rng) % 8;
        for (int j = 0; j < 32; j++) {
            if (r == 0)
                x[32 * b + j] = 0.0f;
            else if (r == 1)
                x[32 * b + j] *= 1e-4f;
            else if (r == 2)
                x[32 * b + j] *= 300.0f;
        }
        if (r == 3)
            x[32 * b + tq_rng_u64(&rng) % 32] = 50.0f;
    }
}

static int isa_count;
static const tq_qdot_kernels *isa[4];

static void test_quantizer(void)
{
    const int64_t k = 32 * 67;
    float *x = malloc(sizeof(float) * k);
    tq_q8a *want = malloc(sizeof(tq_q8a) * (k / 32));
    tq_q8a *got = malloc(sizeof(tq_q8a) * (k / 32));
    for (int rep = 0; rep < 20; rep++) {
        rand_x(x, k);
        if (rep == 1) /* exact halves: x * id lands on .5 (round half to even) */
            for (int64_t j = 0; j < k; j++)
                x[j] = (float)((int)(j % 64) - 32) + 0.5f;
        isa[0]->quant_q8a(x, want, k);
        int bad = 0;
        for (int64_t b = 0; b < k / 32; b++) {
            const tq_q8a *a = &want[b];
            int sum = 0;
            for (int j = 0; j < 32; j++) {
                const double e = fabs((double)x[32 * b + j] - (double)a->d * a->qs[j]);
                bad += e > 0.5 * (double)a->d * (1 + 1e-6) || a->qs[j] < -127;
                sum += a->qs[j];
            }
            bad += a->s != a->d * (float)sum;
        }
        CHECK(bad == 0, "scalar quantizer: %d elements off by more than d/2 (rep %d)", bad, rep);
        for (int i = 1; i < isa_count; i++) {
            memset(got, 0x55, sizeof(tq_q8a) * (k / 32));
            isa[i]->quant_q8a(x, got, k);
            CHECK_MEMEQ(got, want, sizeof(tq_q8a) * (k / 32), "quantizer %s vs scalar rep %d",
                        isa[i]->isa, rep);
        }
    }
    free(x);
    free(want);
    free(got);
    /* tq_q8k: one scale per 256, bsums per 16 */
    tq_q8k *wk = malloc(sizeof(tq_q8k) * (k / 256 + 1));
    tq_q8k *gk = malloc(sizeof(tq_q8k) * (k / 256 + 1));
    float *xk = malloc(sizeof(float) * 256 * 9);
    for (int rep = 0; rep < 20; rep++) {
        const int64_t kk = 256 * 9;
        rand_x(xk, kk);
        isa[0]->quant_q8k(xk, wk, kk);
        int bad = 0;
        for (int64_t b = 0; b < kk / 256; b++) {
            for (int g = 0; g < 16; g++) {
                int sum = 0;
                for (int j = 0; j < 16; j++) {
                    const int64_t e = 256 * b + 16 * g + j;
                    const double err = fabs((double)xk[e] - (double)wk[b].d * wk[b].qs[e % 256]);
                    bad += err > 0.5 * (double)wk[b].d * (1 + 1e-6) || wk[b].qs[e % 256] < -127;
                    sum += wk[b].qs[e % 256];
                }
                bad += wk[b].bsums[g] != sum;
            }
        }
        CHECK(bad == 0, "scalar q8k quantizer: %d elements or sums wrong (rep %d)", bad, rep);
        for (int i = 1; i < isa_count; i++) {
            memset(gk, 0x55, sizeof(tq_q8k) * (kk / 256));
            isa[i]->quant_q8k(xk, gk, kk);
            CHECK_MEMEQ(gk, wk, sizeof(tq_q8k) * (kk / 256), "q8k quantizer %s vs scalar rep %d",
                        isa[i]->isa, rep);
        }
    }
    free(wk);
    free(gk);
    free(xk);
}

/* One format at one k: reference vs oracle, bounds, ISAs vs reference. */
static void test_dots(int t, int64_t k, int rows)
{
    const char *name = tq_ggml_type_name(t);
    const int64_t blk = tq_ggml_block_size(t);
    const size_t bs = tq_ggml_type_size(t);
    const size_t rb = (size_t)(k / blk) * bs;
    size_t qlo, qhi;
    uint8_t *w = malloc(rb * rows);
    uint8_t *w0 = malloc(rb);
    float *x = malloc(sizeof(float) * k);
    float *wf = malloc(sizeof(float) * k);
    float *wz = malloc(sizeof(float) * k);
    void *a = malloc(tq_qdot_act_bytes(t, k));
    double worst_rel_q8 = 0;
    quant_bytes(t, &qlo, &qhi);
    rand_blocks(t, w, rows, k);
    rand_x(x, k);
    isa[0]->quant[t](x, a, k);
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = w + (size_t)r * rb;
        /* the oracle: the library's dequantizer (bit-exact with the gguf package); wz = the same
         * blocks with every quantized value zeroed (|wz| bounds the min/offset part of w) */
        memcpy(w0, row, rb);
        for (int64_t b = 0; b < k / blk; b++)
            memset(w0 + (size_t)b * bs + qlo, 0, qhi - qlo);
        CHECK(tq_ggml_dequant_ref(t, row, rb, wf, k) == TQ_OK, "%s dequant", name);
        CHECK(tq_ggml_dequant_ref(t, w0, rb, wz, k) == TQ_OK, "%s dequant", name);
        double ref = 0, mag = 0, refq = 0, magq = 0, q8bound = 0;
        for (int64_t e = 0; e < k; e++) {
            double da, xq;
            act_elem(t, a, e, &da, &xq);
            ref += (double)wf[e] * x[e];
            mag += fabs((double)wf[e] * x[e]);
            refq += (double)wf[e] * xq;
            magq += (fabs((double)wf[e]) + 2 * fabs((double)wz[e])) * fabs(xq);
            q8bound += 0.5 * da * (1 + 1e-6) * fabs((double)wf[e]);
        }
        const double eps = ldexp(1.0, -24);
        const double tol = ((double)k / 32 + 8) * eps * mag + 1e-30;
        const double tolq = ((double)k / 32 + 8) * eps * magq * 4 + 1e-30;
        const float f = isa[0]->dot_f32[t](row, x, k);
        const float q = isa[0]->dot_q8[t](row, a, k);
        CHECK(fabs(f - ref) <= tol, "%s k=%lld row %d f32 path %.9g vs oracle %.9g (tol %.3g)",
              name, (long long)k, r, f, ref, tol);
        CHECK(fabs(q - refq) <= tolq,
              "%s k=%lld row %d q8 path %.9g vs oracle on the q8 x %.9g (tol %.3g)", name,
              (long long)k, r, q, refq, tolq);
        CHECK(fabs((double)q - f) <= q8bound + tol + tolq,
              "%s k=%lld row %d q8 %.9g vs f32 %.9g: over the bound %.3g", name, (long long)k,
              r, q, f, q8bound);
        if (mag > 0)
            worst_rel_q8 = fmax(worst_rel_q8, fabs((double)q - f) / mag);
        for (int i = 1; i < isa_count; i++) {
            if (!isa[i]->dot_q8[t]) /* a table may offer a subset (formats_cpu.h) */
                continue;
            const float fi = isa[i]->dot_f32[t](row, x, k);
            const float qi = isa[i]->dot_q8[t](row, a, k);
            CHECK(memcmp(&fi, &f, 4) == 0, "%s %s k=%lld row %d dot_f32 %.9g != scalar %.9g",
                  isa[i]->isa, name, (long long)k, r, fi, f);
            CHECK(memcmp(&qi, &q, 4) == 0, "%s %s k=%lld row %d dot_q8 %.9g != scalar %.9g",
                  isa[i]->isa, name, (long long)k, r, qi, q);
        }
    }
    if (k >= 1024)
        printf("  %-5s k=%-5lld q8 vs f32: worst |diff| / sum|w x| = %.2e\n", name, (long long)k,
               worst_rel_q8);
    free(w);
    free(w0);
    free(x);
    free(wf);
    free(wz);
    free(a);
}

/* Matvec of rows [r0, r1) for n tokens == per-token dot, bit for bit; rows outside untouched.
 * k: short rows, and rows of >= 4096 bytes (the AVX2 32-formats take those 4 at a time). */
static void test_matvec(int t, int64_t k)
{
    const char *name = tq_ggml_type_name(t);
    const int64_t m = 37;
    const int64_t n = 23; /* token tiles of 4 and leftovers; >= 2: the AVX512-VNNI 32-format tile;
                             >= 16: the K formats' 8-token tiles, then 4, then the dot */
    const int64_t ldy = m + 3;
    const size_t rb = (size_t)(k / tq_ggml_block_size(t)) * tq_ggml_type_size(t);
    const size_t ab = tq_qdot_act_bytes(t, k);
    uint8_t *w = malloc(rb * m);
    float *x = malloc(sizeof(float) * k * n);
    uint8_t *a = malloc(ab * n);
    float *y = malloc(sizeof(float) * ldy * n);
    rand_blocks(t, w, m, k);
    for (int64_t tok = 0; tok < n; tok++)
        rand_x(x + tok * k, k);
    isa[0]->quant[t](x, a, k * n); /* n tokens of k: blocks never straddle tokens */
    for (int i = 0; i < isa_count; i++) {
        if (!isa[i]->mv_q8[t])
            continue;
        for (int path = 0; path < 2; path++) {
            static const int64_t ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 16, 17, 19, 20, 23};
            for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
                const int64_t nn = ns[ni];
                const int64_t r0 = 3;
                const int64_t r1 = m - 1; /* 33 rows: 4-row groups and a leftover */
                for (int64_t j = 0; j < ldy * n; j++)
                    y[j] = -777.0f;
                if (path)
                    isa[i]->mv_q8[t](w, rb, k, a, nn, y, ldy, r0, r1);
                else
                    isa[i]->mv_f32[t](w, rb, k, x, k, nn, y, ldy, r0, r1);
                int bad = 0;
                int stray = 0;
                for (int64_t tok = 0; tok < n; tok++) {
                    for (int64_t r = 0; r < ldy; r++) {
                        const float got = y[tok * ldy + r];
                        if (tok >= nn || r < r0 || r >= r1) {
                            stray += got != -777.0f;
                            continue;
                        }
                        const uint8_t *row = w + (size_t)r * rb;
                        const float want = path ? isa[0]->dot_q8[t](row, a + tok * ab, k)
                                                : isa[0]->dot_f32[t](row, x + tok * k, k);
                        bad += memcmp(&got, &want, 4) != 0;
                    }
                }
                CHECK(bad == 0 && stray == 0, "%s %s k=%lld mv_%s n=%lld: %d differ from the "
                      "dot, %d written outside", isa[i]->isa, name, (long long)k,
                      path ? "q8" : "f32", (long long)nn, bad, stray);
            }
        }
    }
    /* the prefill tiles over packed activations (gemm_q8): the dot's bits for any n */
    const int64_t nb = k / TQ_QK;
    tq_q8p *pk = tq_qdot_act_block(t) == TQ_QK
                     ? aligned_alloc(64, sizeof(tq_q8p) * (size_t)tq_q8p_count(k, n))
                     : NULL;
    if (pk)
        memset(pk, 0, sizeof(tq_q8p) * (size_t)tq_q8p_count(k, n));
    for (int64_t tok = 0; pk && tok < n; tok++)
        tq_q8p_pack((const tq_q8a *)(const void *)(a + tok * ab), nb,
                    pk + (tok / TQ_Q8P_T) * nb, (int)(tok % TQ_Q8P_T));
    for (int i = 0; pk && i < isa_count; i++) {
        if (!isa[i]->gemm_q8[t])
            continue;
        static const int64_t gn[] = {1, 2, 5, 6, 7, 8, 9, 11, 12, 13, 16, 17, 19, 23};
        for (size_t ni = 0; ni < sizeof(gn) / sizeof(gn[0]); ni++) {
            const int64_t nn = gn[ni], r0 = 3, r1 = m - 1;
            for (int64_t j = 0; j < ldy * n; j++)
                y[j] = -777.0f;
            isa[i]->gemm_q8[t](w, rb, k, pk, nn, y, ldy, r0, r1);
            int bad = 0, stray = 0;
            for (int64_t tok = 0; tok < n; tok++) {
                for (int64_t r = 0; r < ldy; r++) {
                    const float got = y[tok * ldy + r];
                    if (tok >= nn || r < r0 || r >= r1) {
                        stray += got != -777.0f;
                        continue;
                    }
                    const float want = isa[0]->dot_q8[t](w + (size_t)r * rb, a + tok * ab, k);
                    bad += memcmp(&got, &want, 4) != 0;
                }
            }
            CHECK(bad == 0 && stray == 0, "%s %s k=%lld gemm_q8 n=%lld: %d differ from the dot, "
                  "%d written outside", isa[i]->isa, name, (long long)k, (long long)nn, bad,
                  stray);
        }
    }
    free(pk);
    free(w);
    free(x);
    free(a);
    free(y);
}

/* The q8 order is pinned (qdot.h, since session 24: per block, one chain): random Q4_1 rows
 * (a min term) and Q8_0 rows, each with this test's own formula of the per-block order and of
 * the old per-lane one (acc[b & 1][l], 16 chains); every table must give the per-block bits,
 * and the two orders must differ on some rows (else this test could not fail under the old
 * one). */
static float spec_block(const int8_t *wq, const float *dw, const float *mw, const tq_q8a *a,
                        int nb)
{
    float acc = 0.0f, accm = 0.0f;
    for (int b = 0; b < nb; b++) {
        int32_t p = 0;
        for (int j = 0; j < 32; j++)
            p += wq[32 * b + j] * a[b].qs[j];
        acc = fmaf((float)p, dw[b] * a[b].d, acc);
        accm = accm + mw[b] * a[b].s;
    }
    return acc + accm;
}

static float spec_lane(const int8_t *wq, const float *dw, const float *mw, const tq_q8a *a,
                       int nb)
{
    float acc[2][8] = {{0}}, accm = 0.0f, v[8];
    for (int b = 0; b < nb; b++)
        for (int l = 0; l < 8; l++) {
            int32_t p = 0;
            for (int e = 0; e < 4; e++)
                p += wq[32 * b + 4 * l + e] * a[b].qs[4 * l + e];
            acc[b & 1][l] = fmaf((float)p, dw[b] * a[b].d, acc[b & 1][l]);
        }
    for (int b = 0; b < nb; b++)
        accm = accm + mw[b] * a[b].s;
    for (int l = 0; l < 8; l++)
        v[l] = acc[0][l] + acc[1][l];
    return tq_qdot_h8(v) + accm;
}

static void test_spec_order(void)
{
    enum { NB = 10, K = 32 * NB, ROWS = 200 };
    const int types[2] = {TQ_GGML_Q8_0, TQ_GGML_Q4_1};
    for (int ti = 0; ti < 2; ti++) {
        const int t = types[ti];
        const size_t bs = tq_ggml_type_size(t);
        uint8_t w[NB * 34];
        float x[K], dw[NB], mw[NB];
        int8_t wq[K];
        tq_q8a a[NB];
        int differ = 0, bad = 0;
        for (int r = 0; r < ROWS; r++) {
            rand_blocks(t, w, 1, K);
            rand_x(x, K);
            isa[0]->quant[t](x, a, K);
            for (int b = 0; b < NB; b++) {
                const uint8_t *blk = w + (size_t)b * bs;
                dw[b] = tq_f16_to_f32(tq_rd16(blk));
                mw[b] = t == TQ_GGML_Q4_1 ? tq_f16_to_f32(tq_rd16(blk + 2)) : 0.0f;
                for (int j = 0; j < 32; j++)
                    wq[32 * b + j] = t == TQ_GGML_Q8_0 ? (int8_t)blk[2 + j]
                                     : (int8_t)(j < 16 ? blk[4 + j] & 15 : blk[4 + j - 16] >> 4);
            }
            const float want = spec_block(wq, dw, mw, a, NB);
            const float old = spec_lane(wq, dw, mw, a, NB);
            differ += memcmp(&want, &old, 4) != 0;
            for (int i = 0; i < isa_count; i++) {
                if (!isa[i]->dot_q8[t])
                    continue;
                const float got = isa[i]->dot_q8[t](w, a, K);
                float y = -1.0f;
                isa[i]->mv_q8[t](w, bs * NB, K, a, 1, &y, 1, 0, 1);
                bad += memcmp(&got, &want, 4) != 0 || memcmp(&y, &want, 4) != 0;
            }
        }
        printf("  spec order %s: %d of %d rows differ between the per-block and per-lane orders; "
               "%d results off the per-block one\n", tq_ggml_type_name(t), differ, ROWS, bad);
        CHECK(differ > 0, "%s: the two orders never differ: the test cannot pin the order",
              tq_ggml_type_name(t));
        CHECK(bad == 0, "%s: %d results are not the per-block order's", tq_ggml_type_name(t), bad);
    }
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_qdot");
    tq_rng_seed(&rng, t_seed);
    isa_count = tq_qdot_all(isa, 4);
    printf("ISA tables:");
    for (int i = 0; i < isa_count; i++)
        printf(" %s", isa[i]->isa);
    printf("%s\n", isa_count < 2 ? " (no vector table on this CPU: only the oracle runs)" : "");
    CHECK(!strcmp(isa[0]->isa, "scalar"), "first table is %s", isa[0]->isa);
    test_quantizer();
    test_spec_order();
    static const int64_t ks[] = {32, 64, 96, 32 * 7, 576, 1536, 4096};
    static const int64_t kks[] = {256, 512, 768, 1536, 4096};
    for (int f = 0; f < NFMT; f++) {
        const int kfmt = tq_ggml_block_size(fmts[f]) == 256;
        const int64_t *kl = kfmt ? kks : ks;
        const size_t nk = kfmt ? sizeof(kks) / sizeof(kks[0]) : sizeof(ks) / sizeof(ks[0]);
        CHECK(tq_qdot_act_bytes(fmts[f], kl[0]) > 0, "%s has no q8 activation",
              tq_ggml_type_name(fmts[f]));
        for (int i = 0; i < isa_count; i++)
            CHECK((i >= 2 && !isa[i]->dot_q8[fmts[f]]) || /* avx512vnni: a subset */
                      (isa[i]->dot_q8[fmts[f]] && isa[i]->dot_f32[fmts[f]] &&
                       isa[i]->mv_q8[fmts[f]] && isa[i]->mv_f32[fmts[f]] && isa[i]->quant[fmts[f]]),
                  "%s lacks %s kernels",
                  isa[i]->isa, tq_ggml_type_name(fmts[f]));
        for (size_t j = 0; j < nk; j++)
            test_dots(fmts[f], kl[j], kl[j] >= 1536 ? 6 : 24);
        test_matvec(fmts[f], tq_ggml_block_size(fmts[f]));     /* one block: a lone tail */
        test_matvec(fmts[f], tq_ggml_block_size(fmts[f]) * 2); /* one pair */
        test_matvec(fmts[f], tq_ggml_block_size(fmts[f]) * (kfmt ? 3 : 13));
        test_matvec(fmts[f], kfmt ? 256 * 29 : 32 * 232); /* >= 4096-byte rows */
    }
    return t_done();
}
