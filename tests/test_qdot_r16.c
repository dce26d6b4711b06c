/* test_qdot_r16.c -- the r16 layout (src/cpu/qdot_r16.h) of Q4_0 / Q4_1 / Q8_0:
 *  1. unpack(pack(rows)) == rows byte for byte, and unpack_row(r) == file row r;
 *  2. the r16 decode kernel == the scalar reference's q8 dot (qdot.h's spec) bit for bit, for
 *     n = 1..9 tokens, a row range of whole groups inside the matrix (nothing outside written),
 *     k = 32 (one block) .. 1536, odd block counts; skips the kernel part without AVX512-VNNI;
 *  3. the driver (tq_qmm_run) over an r16 matrix: decode (n < 8, the kernel) and prefill
 *     (n >= 8: the unpacked view, then the ISA's tiles) == the scalar dot, multi-output too. */
#include "core/half.h"
#include "core/rng.h"
#include "cpu/formats_cpu.h"
#include "cpu/qdot.h"
#include "cpu/qdot_r16.h"
#include "cpu/qmatmul.h"
#include "t.h"
#include "turboquant.h"

static tq_rng rng;

static void rand_rows(int t, uint8_t *w, int64_t rows, int64_t k)
{
    const size_t bs = tq_ggml_type_size(t);
    const int64_t nb = rows * (k / 32);
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *b = w + (size_t)i * bs;
        for (size_t j = 0; j < bs; j++)
            b[j] = (uint8_t)tq_rng_u64(&rng);
        float d = 1e-3f + 0.05f * tq_rng_uniform(&rng);
        tq_wr16(b, tq_f32_to_f16((tq_rng_u64(&rng) & 1) ? -d : d));
        if (t == TQ_GGML_Q4_1)
            tq_wr16(b + 2, tq_f32_to_f16(0.5f * tq_rng_uniform(&rng) - 0.25f));
    }
}

static void rand_x(float *x, int64_t k)
{
    for (int64_t j = 0; j < k; j++)
        x[j] = tq_rng_normal(&rng);
    for (int64_t b = 0; b < k / 32; b++) {
        const uint64_t r = tq_rng_u64(&rng) % 8;
        for (int j = 0; j < 32; j++)
            x[32 * b + j] *= r == 0 ? 0.0f : r == 1 ? 1e-4f : r == 2 ? 300.0f : 1.0f;
    }
}

static void test_one(int t, int64_t k)
{
    const char *name = tq_ggml_type_name(t);
    const int64_t rows = 64, nb = k / 32, nmax = 9;
    const size_t rb = (size_t)nb * tq_ggml_type_size(t);
    uint8_t *w = malloc(rb * rows), *p = malloc(rb * rows), *u = malloc(rb * rows);
    float *x = malloc(sizeof(float) * k * nmax);
    const size_t ab = tq_qdot_act_bytes(t, k);
    uint8_t *a = malloc(ab * nmax);
    float *y = malloc(sizeof(float) * rows * nmax);
    rand_rows(t, w, rows, k);
    for (int64_t g = 0; g < rows / 16; g++)
        tq_r16_pack(t, w + (size_t)g * 16 * rb, nb, p + (size_t)g * 16 * rb);
    for (int64_t g = 0; g < rows / 16; g++)
        tq_r16_unpack(t, p + (size_t)g * 16 * rb, nb, u + (size_t)g * 16 * rb);
    CHECK_MEMEQ(u, w, rb * rows, "%s k=%lld: unpack(pack) differs", name, (long long)k);
    int badrow = 0;
    for (int r = 0; r < 16; r++) {
        tq_r16_unpack_row(t, p + 16 * rb, nb, r, u);
        badrow += memcmp(u, w + (size_t)(16 + r) * rb, rb) != 0;
    }
    CHECK(badrow == 0, "%s k=%lld: %d unpacked rows differ", name, (long long)k, badrow);
    const tq_qdot_kernels *sc = tq_qdot_scalar();
    for (int64_t tok = 0; tok < nmax; tok++)
        rand_x(x + tok * k, k);
    sc->quant[t](x, a, k * nmax);
    tq_qmv_q8_fn mv = tq_r16_mv(t);
    if (mv) {
        for (int64_t n = 1; n <= nmax; n++) {
            for (int64_t j = 0; j < rows * nmax; j++)
                y[j] = -777.0f;
            mv(p, rb, k, a, n, y, rows, 16, 48);
            int bad = 0, stray = 0;
            for (int64_t tok = 0; tok < nmax; tok++)
                for (int64_t r = 0; r < rows; r++) {
                    const float got = y[tok * rows + r];
                    if (tok >= n || r < 16 || r >= 48) {
                        stray += got != -777.0f;
                        continue;
                    }
                    const float want = sc->dot_q8[t](w + (size_t)r * rb, a + tok * ab, k);
                    if (memcmp(&got, &want, 4)) {
                        if (!bad)
                            fprintf(stderr, "  %s k=%lld n=%lld row %lld tok %lld: %.9g vs %.9g\n",
                                    name, (long long)k, (long long)n, (long long)r, (long long)tok,
                                    got, want);
                        bad++;
                    }
                }
            CHECK(bad == 0 && stray == 0, "%s k=%lld n=%lld r16 kernel: %d differ, %d stray", name,
                  (long long)k, (long long)n, bad, stray);
        }
        /* the driver: r16 matrix, decode and prefill sizes, two outputs in one call */
        tq_cpu_formats();
        const tq_format *f = tq_cpu_format(t);
        tq_qmat W = {.w = p, .f = f, .rows = rows, .cols = k, .row_bytes = rb, .r16 = 1};
        tq_qmat W2 = W;
        float *y2 = malloc(sizeof(float) * rows * 20);
        float *x20 = malloc(sizeof(float) * k * 20);
        uint8_t *a20 = malloc(ab * 20);
        for (int64_t tok = 0; tok < 20; tok++)
            rand_x(x20 + tok * k, k);
        sc->quant[t](x20, a20, k * 20);
        size_t sa, sk;
        tq_qmm_act_bytes(k, 20, &sa, &sk);
        void *act = tq_aligned_alloc(sa);
        float *yy = malloc(sizeof(float) * rows * 20);
        static const int64_t ns[] = {1, 3, 4, 5, 7, 8, 16, 20};
        for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
            const int64_t n = ns[ni];
            const tq_qmm_out o[2] = {{&W, yy, rows}, {&W2, y2, rows}};
            tq_qmm_run(NULL, o, 2, x20, k, n, 0, act, NULL);
            int bad = 0;
            for (int64_t tok = 0; tok < n; tok++)
                for (int64_t r = 0; r < rows; r++) {
                    const float want = sc->dot_q8[t](w + (size_t)r * rb, a20 + tok * ab, k);
                    bad += memcmp(&yy[tok * rows + r], &want, 4) != 0;
                    bad += memcmp(&y2[tok * rows + r], &want, 4) != 0;
                }
            CHECK(bad == 0, "%s k=%lld n=%lld tq_qmm_run on r16: %d differ", name, (long long)k,
                  (long long)n, bad);
        }
        tq_free(act);
        free(yy);
        free(y2);
        free(x20);
        free(a20);
    }
    free(w);
    free(p);
    free(u);
    free(x);
    free(a);
    free(y);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_qdot_r16");
    tq_rng_seed(&rng, t_seed);
    static const int fm[] = {TQ_GGML_Q4_0, TQ_GGML_Q4_1, TQ_GGML_Q8_0};
    static const int64_t ks[] = {32, 96, 32 * 13, 576, 1536};
    printf("r16 kernel: %s\n", tq_r16_mv(TQ_GGML_Q4_0) ? "avx512vnni" : "none (layout only)");
    for (int f = 0; f < 3; f++) {
        CHECK(tq_r16_format(fm[f]), "%s has no r16 layout", tq_ggml_type_name(fm[f]));
        for (size_t j = 0; j < sizeof(ks) / sizeof(ks[0]); j++)
            test_one(fm[f], ks[j]);
    }
    CHECK(!tq_r16_format(TQ_GGML_Q5_0) && !tq_r16_format(TQ_GGML_Q4_K), "r16 claims Q5_0/Q4_K");
    return t_done();
}
