/* test_kv_rot.c -- the rotated block KV schemes (TQ_KV_ROT, src/kv/kv_rot.c), model-free:
 *  - scheme strings: parse / name / key round trip, bad strings rejected;
 *  - bytes per row from the layout formula of docs/FORMAT.md, written out here;
 *  - the rotation against an explicit Sylvester-Hadamard matrix in double;
 *  - every ggml code against a float64 oracle of ggml's reference quantizer written here (run on
 *    the oracle's own rotation; indices may differ only where the two roundings straddle a
 *    decision boundary), and the bytes read back by a decoder written here;
 *  - our l<L>g<G> codes against a float64 oracle of their encoder (linear nearest-level scan);
 *  - round-trip MSE on Gaussian rows inside stated bounds (from kv_grid_search.py --mse, numpy),
 *    and our codes below the ggml code of the same bits;
 *  - the public row-parallel API gives the bytes of the single-row reference. */
#include "core/half.h"
#include "kv/kv_internal.h"
#include "t.h"
#include "turboquant.h"

static uint64_t rng_s;
static double urand(void)
{
    rng_s = rng_s * 6364136223846793005ull + 1442695040888963407ull;
    return ((rng_s >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void)
{
    return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand());
}

/* ---- oracle rotation: y = H x with H[i][j] = (-1)^popcount(i & j) / sqrt(n), per slice ---- */
static void rot64(const double *x, int d, int n, double *y)
{
    for (int o = 0; o < d; o += n)
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int j = 0; j < n; j++)
                s += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) * x[o + j];
            y[o + i] = s / sqrt((double)n);
        }
}
static int k_rot_n(int d)
{
    int n = 64;
    while (d % (2 * n) == 0)
        n *= 2;
    return n;
}

/* ---- oracle ggml codes on one block of 32 doubles: indices + scale ----------------------- */
static const int iq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static double signed_max(const double *x, int n)
{
    double a = 0, m = 0;
    for (int j = 0; j < n; j++)
        if (fabs(x[j]) > a) {
            a = fabs(x[j]);
            m = x[j];
        }
    return m;
}

/* returns the scale; q[j] = the integer level (q8_0: -127..127, q4_0/q5_0: 0..15/31,
 * iq4_nl: 0..15 index) */
static double oracle_block(int code, const double *x, int *q)
{
    if (code == TQ_KV_CODE_Q8_0) {
        double a = 0;
        for (int j = 0; j < 32; j++)
            a = fmax(a, fabs(x[j]));
        const double d = a / 127;
        for (int j = 0; j < 32; j++)
            q[j] = d ? (int)round(x[j] / d) : 0;
        return d;
    }
    const double m = signed_max(x, 32);
    if (code == TQ_KV_CODE_Q4_0 || code == TQ_KV_CODE_Q5_0) {
        const int h = code == TQ_KV_CODE_Q4_0 ? 8 : 16;
        const double d = m / -h;
        for (int j = 0; j < 32; j++) {
            int v = d ? (int)floor(x[j] / d + h + 0.5) : h;
            q[j] = v > 2 * h - 1 ? 2 * h - 1 : v < 0 ? 0 : v;
        }
        return d;
    }
    /* iq4_nl: nearest of the grid at d0 = m / -127, then the x^2-weighted refit */
    const double d0 = m / -127;
    double num = 0, den = 0;
    for (int j = 0; j < 32; j++) {
        int best = 0;
        for (int l = 1; l < 16; l++)
            if (fabs(x[j] / d0 - iq4[l]) <= fabs(x[j] / d0 - iq4[best]))
                best = l;
        q[j] = best;
        num += x[j] * x[j] * iq4[best] * x[j];
        den += x[j] * x[j] * iq4[best] * iq4[best];
    }
    return den > 0 ? num / den : 0;
}

/* the bytes of one ggml block read back by this test: scale and integer levels */
static double read_block(int code, const uint8_t *b, int *q)
{
    const double d = tq_f16_to_f32((uint16_t)(b[0] | b[1] << 8));
    if (code == TQ_KV_CODE_Q8_0) {
        for (int j = 0; j < 32; j++)
            q[j] = (int8_t)b[2 + j];
    } else if (code == TQ_KV_CODE_Q5_0) {
        const uint32_t qh = b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
        for (int j = 0; j < 16; j++) {
            q[j] = (b[6 + j] & 15) | ((qh >> j) & 1) << 4;
            q[j + 16] = (b[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
        }
    } else {
        for (int j = 0; j < 16; j++) {
            q[j] = b[2 + j] & 15;
            q[j + 16] = b[2 + j] >> 4;
        }
    }
    return d;
}

static double level(int code, int q)
{
    switch (code) {
    case TQ_KV_CODE_Q8_0: return q;
    case TQ_KV_CODE_Q5_0: return q - 16;
    case TQ_KV_CODE_Q4_0: return q - 8;
    default: return iq4[q];
    }
}

static void test_names(void)
{
    static const struct {
        const char *in, *name, *key;
        int ck, cv;
    } ok[] = {
        {"rot:q8_0/q4_0", "rot:q8_0/q4_0", "rot-q8_0-q4_0", TQ_KV_CODE_Q8_0, TQ_KV_CODE_Q4_0},
        {"rot:q4_0", "rot:q4_0", "rot-q4_0", TQ_KV_CODE_Q4_0, TQ_KV_CODE_Q4_0},
        {"rot:q5_0/q5_0", "rot:q5_0", "rot-q5_0", TQ_KV_CODE_Q5_0, TQ_KV_CODE_Q5_0},
        {"rot:iq4_nl", "rot:iq4_nl", "rot-iq4_nl", TQ_KV_CODE_IQ4_NL, TQ_KV_CODE_IQ4_NL},
        {"rot:l32g64/l11g64", "rot:l32g64/l11g64", "rot-l32g64-l11g64", -1, -1},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        tq_kv_scheme s;
        char nm[64], key[64];
        CHECK(tq_kv_scheme_parse(ok[i].in, &s) == TQ_OK, "parse %s", ok[i].in);
        CHECK(s.kind == TQ_KV_ROT, "%s kind %d", ok[i].in, (int)s.kind);
        if (ok[i].ck > 0)
            CHECK(s.k_bits == ok[i].ck && s.v_bits == ok[i].cv, "%s codes %d/%d", ok[i].in,
                  s.k_bits, s.v_bits);
        CHECK(!strcmp(tq_kv_scheme_name(s, nm, sizeof(nm)), ok[i].name), "%s name %s", ok[i].in, nm);
        CHECK(!strcmp(tq_kv_scheme_key(s, key, sizeof(key)), ok[i].key), "%s key %s", ok[i].in, key);
        tq_kv_scheme s2;
        CHECK(tq_kv_scheme_parse(nm, &s2) == TQ_OK && s2.k_bits == s.k_bits &&
                  s2.v_bits == s.v_bits, "name %s parses back", nm);
    }
    static const char *bad[] = {"rot:", "rot:q4_1", "rot:q8_0/", "rot:q8_0/q4_0/q4_0",
                                "rot:l17g32", "rot:l16g128", "rot:q8_0+rk", "rot"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tq_kv_scheme s;
        CHECK(tq_kv_scheme_parse(bad[i], &s) == TQ_E_ARG, "'%s' must be rejected", bad[i]);
    }
    tq_kv_scheme s;
    tq_kv_scheme_parse("rot:q4_0", &s);
    CHECK(tq_kv_check(s, 96) == TQ_E_UNSUPPORTED, "head_dim 96 (not a multiple of 64)");
    CHECK(tq_kv_check(s, 64) == TQ_OK && tq_kv_check(s, 192) == TQ_OK, "64 / 192 valid");
}

/* bytes per row: ggml block sizes, ours d/G * (2 + G/2 * pb / 8) with pb = bits(L*L - 1) */
static void test_bytes(void)
{
    static const struct {
        const char *s;
        int d;
        size_t kb, vb;
    } t[] = {
        {"rot:q8_0/q4_0", 64, 68, 36},   {"rot:q5_0", 128, 88, 88},
        {"rot:iq4_nl", 256, 144, 144},   {"rot:l16g32", 64, 36, 36},
        {"rot:l22g32/l11g32", 64, 40, 32}, /* 2*(2+16*9/8)=40, 2*(2+16*7/8)=32 */
        {"rot:l45g64/l90g64", 128, 2 * (2 + 32 * 11 / 8), 2 * (2 + 32 * 13 / 8)},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tq_kv_scheme s;
        size_t kb = 0, vb = 0;
        CHECK(tq_kv_scheme_parse(t[i].s, &s) == TQ_OK, "parse %s", t[i].s);
        CHECK(tq_kv_row_bytes(s, t[i].d, &kb, &vb) == TQ_OK && kb == t[i].kb && vb == t[i].vb,
              "%s d %d: %zu/%zu bytes, want %zu/%zu", t[i].s, t[i].d, kb, vb, t[i].kb, t[i].vb);
    }
}

static void test_rotation(void)
{
    const int dims[] = {64, 128, 192, 256, 512};
    for (size_t k = 0; k < sizeof(dims) / sizeof(dims[0]); k++) {
        const int d = dims[k];
        for (int is_v = 0; is_v < 2; is_v++) {
            float u[512];
            double x[512], y[512];
            for (int j = 0; j < d; j++)
                x[j] = u[j] = (float)gauss();
            const int n = is_v ? 64 : k_rot_n(d);
            CHECK(tq_kv_rot_size(is_v, d) == n, "d %d is_v %d: size %d want %d", d, is_v,
                  tq_kv_rot_size(is_v, d), n);
            rot64(x, d, n, y);
            tq_kv_rot_apply(u, d, is_v);
            double e = 0;
            for (int j = 0; j < d; j++)
                e = fmax(e, fabs(u[j] - y[j]));
            CHECK(e < 1e-5, "d %d is_v %d: rotation off the Hadamard oracle by %g", d, is_v, e);
        }
    }
}

/* ggml codes: library bytes vs the float64 oracle on the oracle's rotation */
static void test_ggml_codes(void)
{
    const int codes[] = {TQ_KV_CODE_Q8_0, TQ_KV_CODE_Q5_0, TQ_KV_CODE_Q4_0, TQ_KV_CODE_IQ4_NL};
    const int d = 128, rows = 200;
    for (size_t c = 0; c < 4; c++)
        for (int is_v = 0; is_v < 2; is_v++) {
            long n = 0, diff = 0, scale_bad = 0;
            for (int r = 0; r < rows; r++) {
                float xf[128];
                double x[128], y[128];
                uint8_t row[256];
                for (int j = 0; j < d; j++)
                    x[j] = xf[j] = (float)(gauss() * (r % 7 + 0.1));
                rot64(x, d, is_v ? 64 : k_rot_n(d), y);
                tq_kv_rot_encode_row_ref(codes[c], is_v, xf, d, row);
                const size_t bb = tq_kv_rot_row_bytes(codes[c], d) / (d / 32);
                for (int b = 0; b < d / 32; b++) {
                    int qo[32], ql[32];
                    const double so = oracle_block(codes[c], y + 32 * b, qo);
                    const double sl = read_block(codes[c], row + b * bb, ql);
                    if (fabs(sl - so) > fabs(so) * 1e-3 + 1e-7)
                        scale_bad++;
                    float dec[32];
                    tq_kv_rot_decode_rotated_row_ref(codes[c], row + b * bb, 32, dec);
                    for (int j = 0; j < 32; j++, n++) {
                        diff += ql[j] != qo[j];
                        if ((float)(level(codes[c], ql[j]) * sl) != dec[j])
                            scale_bad++;
                    }
                }
            }
            CHECK(scale_bad == 0, "code %s is_v %d: %ld scales off the oracle",
                  tq_kv_code_name(codes[c]), is_v, scale_bad);
            CHECK(diff * 1000 <= n, "code %s is_v %d: %ld of %ld levels differ from the oracle",
                  tq_kv_code_name(codes[c]), is_v, diff, n);
        }
}

/* our codes: indices and scale vs a float64 oracle of the same steps */
static void test_lm_codes(void)
{
    for (int i = 0; i < tq_kv_lm_n_codes; i++) {
        const tq_kv_lm_code *c = &tq_kv_lm_codes[i];
        const int G = c->group, L = c->levels;
        int pb = 0;
        while ((1 << pb) < L * L)
            pb++;
        CHECK(c->grid[L - 1] == 1.0f, "%s: top level %g, want 1", c->name, c->grid[L - 1]);
        long n = 0, diff = 0;
        for (int r = 0; r < 300; r++) {
            float x[64];
            double xd[64];
            uint8_t b[256];
            for (int j = 0; j < G; j++)
                xd[j] = x[j] = (float)(gauss() * (r % 5 + 0.5));
            tq_kv_lm_encode_block_ref(c, x, b);
            /* oracle: m, nearest level (linear scan, double), refit, again, refit */
            double s = tq_f16_to_f32(tq_f32_to_f16((float)signed_max(xd, G)));
            int q[64];
            for (int it = 0; it < 2; it++) {
                for (int j = 0; j < G; j++) {
                    int best = 0;
                    for (int l = 1; l < L; l++)
                        if (fabs(xd[j] / s - c->grid[l]) < fabs(xd[j] / s - c->grid[best]))
                            best = l;
                    q[j] = best;
                }
                double num = 0, den = 0;
                for (int j = 0; j < G; j++) {
                    num += c->grid[q[j]] * xd[j];
                    den += (double)c->grid[q[j]] * c->grid[q[j]];
                }
                s = tq_f16_to_f32(tq_f32_to_f16((float)(num / den)));
            }
            const double sl = tq_f16_to_f32((uint16_t)(b[0] | b[1] << 8));
            CHECK(fabs(sl - s) <= fabs(s) * 2e-3, "%s row %d: scale %g, oracle %g", c->name, r,
                  sl, s);
            for (int p = 0; p < G / 2; p++) {
                unsigned v = 0;
                for (int k = 0; k < pb; k++) {
                    const int bit = p * pb + k;
                    v |= (unsigned)((b[2 + bit / 8] >> (bit % 8)) & 1) << k;
                }
                diff += (int)(v % (unsigned)L) != q[2 * p];
                diff += (int)(v / (unsigned)L) != q[2 * p + 1];
                n += 2;
            }
        }
        CHECK(diff * 200 <= n, "%s: %ld of %ld indices differ from the oracle", c->name, diff, n);
    }
}

/* round-trip relative MSE on Gaussian rows; bounds: numpy (kv_grid_search.py --mse) +-12% */
static double rt_mse(const char *scheme, int is_v, int d)
{
    tq_kv_scheme s;
    tq_kv_scheme_parse(scheme, &s);
    const int rows = 1000;
    double e = 0, v = 0;
    for (int r = 0; r < rows; r++) {
        float x[256], y[256];
        uint8_t row[1024];
        const double sig = 0.01 + (r % 9);
        for (int j = 0; j < d; j++)
            x[j] = (float)(gauss() * sig);
        tq_kv_encode_row_ref(s, is_v, x, d, row);
        tq_kv_decode_row_ref(s, is_v, row, d, y);
        for (int j = 0; j < d; j++) {
            e += ((double)y[j] - x[j]) * ((double)y[j] - x[j]) / (sig * sig);
            v += 1;
        }
    }
    return e / v;
}

static void test_mse(void)
{
    static const struct {
        const char *s;
        double want;
    } t[] = {
        {"rot:q8_0", 2.86e-5}, {"rot:q5_0", 1.82e-3},  {"rot:q4_0", 7.38e-3},
        {"rot:iq4_nl", 6.19e-3}, {"rot:l16g32", 5.84e-3}, {"rot:l32g32", 1.40e-3},
        {"rot:l22g32", 3.04e-3},
    };
    double m[16];
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        for (int is_v = 0; is_v < 2; is_v++) {
            m[i] = rt_mse(t[i].s, is_v, 256);
            printf("%-12s is_v %d  relative MSE %.3e (numpy %.3e)\n", t[i].s, is_v, m[i],
                   t[i].want);
            CHECK(m[i] > t[i].want * 0.88 && m[i] < t[i].want * 1.12,
                  "%s is_v %d: relative MSE %.3e, want %.3e +-12%%", t[i].s, is_v, m[i], t[i].want);
        }
    CHECK(m[4] < m[3] && m[3] < m[2], "l16g32 %.3e < iq4_nl %.3e < q4_0 %.3e", m[4], m[3], m[2]);
    CHECK(m[5] < m[1], "l32g32 %.3e < q5_0 %.3e", m[5], m[1]);
}

static void test_api(void)
{
    const char *schemes[] = {"rot:q8_0/q4_0", "rot:iq4_nl/q5_0", "rot:l45g64/l22g32"};
    const int d = 128, n = 300;
    float *x = malloc(sizeof(float) * d * n), *y = malloc(sizeof(float) * d * n);
    uint8_t *a = malloc(200 * n), *b = malloc(200 * n);
    for (int i = 0; i < d * n; i++)
        x[i] = (float)gauss();
    for (size_t k = 0; k < 3; k++)
        for (int is_v = 0; is_v < 2; is_v++) {
            tq_kv_scheme s;
            tq_kv_scheme_parse(schemes[k], &s);
            const size_t rb = tq_kv_row_bytes1(s, is_v, d);
            tq_status st = is_v ? tq_kv_encode_v(s, d, TQ_DTYPE_F32, x, n, a, 200 * n, NULL)
                                : tq_kv_encode_k(s, d, TQ_DTYPE_F32, x, n, a, 200 * n, NULL);
            CHECK(st == TQ_OK, "%s encode", schemes[k]);
            for (int r = 0; r < n; r++)
                tq_kv_encode_row_ref(s, is_v, x + r * d, d, b + r * rb);
            CHECK_MEMEQ(a, b, rb * n, "%s is_v %d: API bytes = row reference", schemes[k], is_v);
            st = is_v ? tq_kv_decode_v(s, d, a, n, y, (int64_t)d * n, NULL)
                      : tq_kv_decode_k(s, d, a, n, y, (int64_t)d * n, NULL);
            float yr[128];
            tq_kv_decode_row_ref(s, is_v, b + 7 * rb, d, yr);
            CHECK(st == TQ_OK && !memcmp(yr, y + 7 * d, sizeof(yr)), "%s decode", schemes[k]);
        }
    free(x);
    free(y);
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_kv_rot");
    rng_s = t_seed;
    test_names();
    test_bytes();
    test_rotation();
    test_ggml_codes();
    test_lm_codes();
    test_mse();
    test_api();
    return t_done();
}
