/* test_kv_rot_isa.c -- the vector kernels of the rot: encoder (cpu/kv_cpu.h: fwht, enc_lm) on
 * every ISA this CPU runs, against the scalar reference, bit for bit:
 *  - enc_lm() of every l<L>g<G> code against tq_kv_lm_encode_block_ref() on random blocks of
 *    many kinds: Gaussian, uniform, spiky (one large element), heavy ties of |x| (the first
 *    largest wins), elements placed exactly on a boundary times the scale, zeros and -0,
 *    subnormals, huge values whose f16 scale overflows, NaN and +-inf mixed in;
 *  - tq_kv_rot_apply_k() against tq_kv_rot_apply() (K and V rotations, d = 64..512);
 *  - tq_kv_rot_encode_row() against tq_kv_rot_encode_row_ref() for every code (ggml codes
 *    too: the vector rotation feeds the reference block encoders) and d = 64..512.
 * The ISA without a table here (scalar) is the reference itself. Seed printed (-s SEED). */
#include <math.h>
#include <string.h>

#include "cpu/kv_cpu.h"
#include "kv/kv_internal.h"
#include "t.h"
#include "turboquant.h"

static uint64_t rng_s;
static uint32_t rnd(void)
{
    rng_s = rng_s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_s >> 33);
}
static double urand(void)
{
    return ((double)rnd() + 0.5) / 4294967296.0;
}
static float gauss(void)
{
    return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()));
}

/* one block of G floats of kind k (the kinds of the header) */
static void fill(const tq_kv_lm_code *c, int k, float *x, int G)
{
    const float sc = (float)pow(2.0, (double)(rnd() % 40) - 20.0);
    for (int j = 0; j < G; j++)
        x[j] = gauss() * sc;
    switch (k) {
    case 0: /* Gaussian */
        break;
    case 1: /* uniform */
        for (int j = 0; j < G; j++)
            x[j] = (float)(2.0 * urand() - 1.0) * sc;
        break;
    case 2: /* one spike */
        x[rnd() % G] = sc * 50.0f * (rnd() & 1 ? 1.0f : -1.0f);
        break;
    case 3: /* ties of |x|: a few values with both signs */
        for (int j = 0; j < G; j++)
            x[j] = (float)((int)(rnd() % 5) - 2) * sc;
        break;
    case 4: { /* elements on boundaries: x = B_k * m (m the block's signed max) */
        const float m = (float)(rnd() % 7 + 1) * 0.25f * (rnd() & 1 ? 1.0f : -1.0f);
        for (int j = 0; j < G; j++)
            x[j] = c->bnd[rnd() % (unsigned)(c->levels - 1)] * m;
        x[rnd() % G] = m;
        break;
    }
    case 5: /* zeros, -0 and subnormals */
        for (int j = 0; j < G; j++) {
            const uint32_t r = rnd() % 4;
            x[j] = r == 0 ? 0.0f : r == 1 ? -0.0f : (float)(rnd() % 1000) * 1e-42f;
        }
        break;
    case 6: /* huge: the f16 scale overflows */
        for (int j = 0; j < G; j++)
            x[j] *= 1e30f;
        break;
    case 7: /* NaN and +-inf here and there */
        for (int j = 0; j < G; j++) {
            const uint32_t r = rnd() % 16;
            if (r == 0)
                x[j] = NAN;
            else if (r == 1)
                x[j] = INFINITY;
            else if (r == 2)
                x[j] = -INFINITY;
        }
        break;
    default: /* all zero */
        memset(x, 0, (size_t)G * sizeof(float));
        break;
    }
}

static int pair_bits(int L)
{
    int b = 0;
    while ((1 << b) < L * L)
        b++;
    return b;
}

static void test_enc_lm(const tq_kv_kernels *kk, const char *isa)
{
    int bad = 0, n = 0;
    for (int ci = 0; ci < tq_kv_lm_n_codes; ci++) {
        const tq_kv_lm_code *c = &tq_kv_lm_codes[ci];
        const int G = c->group;
        const size_t bb = tq_kv_lm_block_bytes(c);
        const tq_kv_lm_desc d = {c->levels, G, pair_bits(c->levels), 2, c->grid, c->bnd};
        enum { NB = 24 };
        float x[NB * 64];
        uint8_t ref[NB * 64], got[NB * 64];
        for (int it = 0; it < 60; it++) {
            for (int b = 0; b < NB; b++) {
                fill(c, (it + b) % 9, x + b * G, G);
                tq_kv_lm_encode_block_ref(c, x + b * G, ref + b * bb);
            }
            memset(got, 0xA5, sizeof(got));
            kk->enc_lm(&d, x, NB, got);
            for (int b = 0; b < NB; b++, n++)
                if (memcmp(ref + b * bb, got + b * bb, bb)) {
                    if (bad++ < 5)
                        CHECK(0, "%s enc_lm %s block kind %d (iteration %d) differs from the "
                                 "reference", isa, c->name, (it + b) % 9, it);
                }
        }
    }
    CHECK(bad == 0, "%s enc_lm: %d of %d blocks differ", isa, bad, n);
    printf("  %-7s enc_lm: %d blocks of %d codes, %d differ from the reference\n", isa, n,
           tq_kv_lm_n_codes, bad);
}

static void test_rows(const tq_kv_kernels *kk, const char *isa)
{
    int bad_rot = 0, bad_row = 0, n_rot = 0, n_row = 0;
    for (int d = 64; d <= TQ_KV_MAX_HEAD_DIM; d += 64) {
        float x[TQ_KV_MAX_HEAD_DIM], a[TQ_KV_MAX_HEAD_DIM], b[TQ_KV_MAX_HEAD_DIM];
        for (int it = 0; it < 8; it++) {
            for (int j = 0; j < d; j++)
                x[j] = gauss() * (it & 1 ? 1e-3f : 3.0f);
            for (int is_v = 0; is_v < 2; is_v++, n_rot++) {
                memcpy(a, x, sizeof(float) * (size_t)d);
                memcpy(b, x, sizeof(float) * (size_t)d);
                tq_kv_rot_apply(a, d, is_v);
                tq_kv_rot_apply_k(kk, b, d, is_v);
                bad_rot += memcmp(a, b, sizeof(float) * (size_t)d) != 0;
            }
            for (int code = 1; code < TQ_KV_CODE_LM + tq_kv_lm_n_codes; code++) {
                const size_t rb = tq_kv_rot_row_bytes(code, d);
                if (!tq_kv_code_ok(code) || !rb)
                    continue;
                uint8_t r1[2048], r2[2048];
                for (int is_v = 0; is_v < 2; is_v++, n_row++) {
                    tq_kv_rot_encode_row_ref(code, is_v, x, d, r1);
                    memset(r2, 0x5A, rb);
                    tq_kv_rot_encode_row(kk, code, is_v, x, d, r2);
                    if (memcmp(r1, r2, rb) && bad_row++ < 5)
                        CHECK(0, "%s row encode %s d %d %s differs", isa, tq_kv_code_name(code),
                              d, is_v ? "V" : "K");
                }
            }
        }
    }
    CHECK(bad_rot == 0, "%s rotation: %d of %d rows differ", isa, bad_rot, n_rot);
    CHECK(bad_row == 0, "%s row encode: %d of %d rows differ", isa, bad_row, n_row);
    printf("  %-7s rotation %d rows, row encode %d rows (every code, d 64..%d): %d / %d differ\n",
           isa, n_rot, n_row, TQ_KV_MAX_HEAD_DIM, bad_rot, bad_row);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_kv_rot_isa");
    const struct {
        tq_isa isa;
        const char *name;
    } isas[] = {{TQ_ISA_AVX2, "avx2"}, {TQ_ISA_AVX512, "avx512"}};
    int ran = 0;
    for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++) {
        rng_s = t_seed;
        const tq_kv_kernels *kk = tq_kv_kernels_get(isas[i].isa);
        if (!kk || !kk->enc_lm || !kk->fwht) {
            printf("  %-7s not on this CPU (or no kernels): skipped\n", isas[i].name);
            continue;
        }
        ran++;
        test_enc_lm(kk, isas[i].name);
        test_rows(kk, isas[i].name);
    }
    /* the scalar table has no vector kernels: the row functions fall back to the reference */
    rng_s = t_seed;
    test_rows(tq_kv_kernels_get(TQ_ISA_SCALAR), "scalar");
    printf("  %d vector ISA(s) tested\n", ran);
    return t_done();
}
