/* test_qdot_iq4nl.c -- the IQ4_NL kernels (src/cpu/qdot_iq4nl.h) on random blocks (seed printed):
 *  1. every ISA table this CPU runs equals the scalar reference bit for bit: both dots, and the
 *     matvecs over rows [r0, r1) of n = 1..9, 13 tokens (4-token and 2-token tiles, leftovers;
 *     nothing written outside the rows), odd and even block counts;
 *  2. the scalar reference against an independent oracle: the gguf package's dequantization of
 *     random blocks (tests/data/quant/IQ4_NL.bin) times x in float64, within the f32 rounding
 *     bound (k/32 + 8) * 2^-24 * sum |w_j x_j|; the q8 path within its bound of the f32 path;
 *  3. the format table: IQ4_NL runs (dequant reference, q8 activation blocks of 32) and names
 *     its kernels (what tq inspect prints). */
#include "core/half.h"
#include "core/rng.h"
#include "cpu/formats_cpu.h"
#include "cpu/qdot.h"
#include "cpu/qdot_iq4nl.h"
#include "cpu/qmatmul.h"
#include "t.h"
#include "turboquant.h"

static tq_rng rng;

static void rand_blocks(uint8_t *w, int64_t nblk)
{
    for (int64_t i = 0; i < nblk; i++) {
        uint8_t *b = w + 18 * i;
        for (int j = 2; j < 18; j++)
            b[j] = (uint8_t)tq_rng_u64(&rng);
        float d = 0.001f + 0.05f * tq_rng_uniform(&rng);
        if (tq_rng_u64(&rng) & 1)
            d = -d;
        tq_wr16(b, tq_f32_to_f16(d));
    }
}

static void rand_x(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)tq_rng_normal(&rng) * (tq_rng_u64(&rng) % 16 ? 1.0f : 8.0f);
}

static void check_isa(const tq_iq4nl_kernels *ref, const tq_iq4nl_kernels *t)
{
    enum { MAXR = 37, MAXK = 32 * 9, MAXN = 23 };
    static uint8_t w[MAXR * MAXK / 32 * 18];
    static float x[MAXN * MAXK], y0[MAXN * MAXR], y1[MAXN * MAXR];
    static tq_q8a a[MAXN * MAXK / 32];
    const tq_qdot_kernels *q = tq_qdot_scalar();
    int bad = 0, n_checked = 0;
    for (int kb = 1; kb <= 9; kb++) {
        const int64_t k = 32 * kb;
        const size_t rb = (size_t)kb * 18;
        rand_blocks(w, (int64_t)MAXR * kb);
        rand_x(x, MAXN * k);
        for (int tk = 0; tk < MAXN; tk++)
            q->quant_q8a(x + tk * k, a + tk * kb, k);
        for (int r = 0; r < MAXR; r++) {
            const float d0 = ref->dot_q8(w + r * rb, a, k), d1 = t->dot_q8(w + r * rb, a, k);
            const float f0 = ref->dot_f32(w + r * rb, x, k), f1 = t->dot_f32(w + r * rb, x, k);
            bad += memcmp(&d0, &d1, 4) != 0 || memcmp(&f0, &f1, 4) != 0;
            n_checked += 2;
        }
        static const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 23}; /* >= 16: prefill */
        for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
            const int n = ns[ni];
            const int64_t r0 = (int64_t)(tq_rng_u64(&rng) % 5);
            const int64_t r1 = MAXR - (int64_t)(tq_rng_u64(&rng) % 5);
            for (int f32 = 0; f32 < 2; f32++) {
                for (int i = 0; i < MAXN * MAXR; i++)
                    y0[i] = y1[i] = -7.0f;
                if (f32) {
                    ref->mv_f32(w, rb, k, x, k, n, y0, MAXR, r0, r1);
                    t->mv_f32(w, rb, k, x, k, n, y1, MAXR, r0, r1);
                } else {
                    ref->mv_q8(w, rb, k, a, n, y0, MAXR, r0, r1);
                    t->mv_q8(w, rb, k, a, n, y1, MAXR, r0, r1);
                }
                bad += memcmp(y0, y1, sizeof(y0)) != 0;
                for (int tk = 0; tk < MAXN; tk++)
                    for (int r = 0; r < MAXR; r++) {
                        const int inside = tk < n && r >= r0 && r < r1;
                        if (!inside)
                            bad += y1[tk * MAXR + r] != -7.0f;
                        else if (tk < n) { /* the matvec equals the per-token dot */
                            const float dd = f32 ? ref->dot_f32(w + r * rb, x + tk * k, k)
                                                 : ref->dot_q8(w + r * rb, a + tk * kb, k);
                            bad += memcmp(&dd, &y1[tk * MAXR + r], 4) != 0;
                        }
                    }
                n_checked++;
            }
        }
        /* the prefill tile over packed activations (16 tokens a group): the dot's bits for
         * any n */
        if (t->gemm_q8) {
            static tq_q8p p[(MAXN + TQ_Q8P_T - 1) / TQ_Q8P_T * (MAXK / 32)]
                __attribute__((aligned(64)));
            memset(p, 0, sizeof(p));
            for (int tk = 0; tk < MAXN; tk++)
                tq_q8p_pack(a + tk * kb, kb, p + (tk / TQ_Q8P_T) * kb, tk % TQ_Q8P_T);
            static const int gn[] = {1, 2, 5, 6, 7, 8, 9, 11, 12, 13, 16, 17, 23};
            for (size_t ni = 0; ni < sizeof(gn) / sizeof(gn[0]); ni++) {
                const int n = gn[ni];
                const int64_t r0 = (int64_t)(tq_rng_u64(&rng) % 5);
                const int64_t r1 = MAXR - (int64_t)(tq_rng_u64(&rng) % 5);
                for (int i = 0; i < MAXN * MAXR; i++)
                    y1[i] = -7.0f;
                t->gemm_q8(w, rb, k, p, n, y1, MAXR, r0, r1);
                for (int tk = 0; tk < MAXN; tk++)
                    for (int r = 0; r < MAXR; r++) {
                        if (tk >= n || r < r0 || r >= r1) {
                            bad += y1[tk * MAXR + r] != -7.0f;
                            continue;
                        }
                        const float dd = ref->dot_q8(w + r * rb, a + tk * kb, k);
                        bad += memcmp(&dd, &y1[tk * MAXR + r], 4) != 0;
                    }
                n_checked++;
            }
        }
    }
    printf("%-10s vs scalar: %d checks, %d differ\n", t->isa, n_checked, bad);
    CHECK(bad == 0, "%s: %d results differ from the scalar reference", t->isa, bad);
}

static void *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(*n);
    if (b && fread(b, 1, *n, f) != *n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

/* the scalar dots against the gguf package's values (golden) times x, in float64 */
static void check_oracle(void)
{
    size_t n = 0;
    uint8_t *g = slurp("tests/data/quant/IQ4_NL.bin", &n);
    CHECK(g && n > 20 && !memcmp(g, "TQQB", 4), "read tests/data/quant/IQ4_NL.bin");
    if (!g)
        return;
    uint32_t h[4];
    memcpy(h, g + 4, 16);
    const int64_t nb = h[1], k = 32 * nb;
    CHECK(h[0] == 20 && h[2] == 32 && h[3] == 18, "IQ4_NL golden header");
    const uint8_t *raw = g + 20;
    float *deq = malloc(sizeof(float) * k), *x = malloc(sizeof(float) * k);
    memcpy(deq, raw + 18 * nb, sizeof(float) * k);
    tq_q8a *a = malloc(sizeof(tq_q8a) * nb);
    const tq_iq4nl_kernels *s = tq_iq4nl_scalar();
    double worst_f = 0, worst_q = 0;
    for (int rep = 0; rep < 50; rep++) {
        rand_x(x, k);
        tq_qdot_scalar()->quant_q8a(x, a, k);
        double exact = 0, mag = 0, qbound = 0;
        for (int64_t i = 0; i < k; i++) {
            exact += (double)deq[i] * x[i];
            mag += fabs((double)deq[i] * x[i]);
        }
        for (int64_t b = 0; b < nb; b++) {
            double sw = 0;
            for (int j = 0; j < 32; j++)
                sw += fabs((double)deq[32 * b + j]);
            qbound += a[b].d / 2.0 * sw;
        }
        const double fb = ((double)nb + 8) * 0x1p-24 * mag;
        const double ef = fabs(s->dot_f32(raw, x, k) - exact);
        const double eq = fabs(s->dot_q8(raw, a, k) - exact);
        worst_f = ef / fb > worst_f ? ef / fb : worst_f;
        worst_q = eq / (qbound + 2 * fb) > worst_q ? eq / (qbound + 2 * fb) : worst_q;
    }
    printf("scalar vs gguf dequant x f32 (float64): worst f32 error %.3f of its bound, q8 %.3f\n",
           worst_f, worst_q);
    CHECK(worst_f <= 1.0, "f32 dot off the oracle: %.3f of the bound", worst_f);
    CHECK(worst_q <= 1.0, "q8 dot off the oracle: %.3f of the bound", worst_q);
    free(deq);
    free(x);
    free(a);
    free(g);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_qdot_iq4nl");
    tq_rng_seed(&rng, t_seed);
    const tq_iq4nl_kernels *t[3];
    const int nt = tq_iq4nl_all(t, 3);
    for (int i = 1; i < nt; i++)
        check_isa(t[0], t[i]);
    if (nt == 1)
        printf("no SIMD table on this CPU: scalar only\n");
    check_oracle();
    const tq_format *f = tq_cpu_format(TQ_GGML_IQ4_NL);
    char kn[64];
    CHECK(f && tq_format_runnable(f) && f->act == TQ_ACT_Q8A && f->k.mv_q8 && f->k.mv_f32 &&
              f->k.quant_act, "IQ4_NL row runs natively");
    printf("IQ4_NL kernels: %s, %s (best table: %s)\n", tq_qmm_kernel_name(f, 0, kn, sizeof(kn)),
           f ? f->k.isa_f32 : "-", t[nt - 1]->isa);
    CHECK(f && (!strcmp(f->k.isa_q8, tq_cpu_amx() ? "amx-int8" : t[nt - 1]->isa) ||
                tq_cpu_isa() < t[nt - 1]->level),
          "the highest table (or the AMX tiles, cpu/qdot_amx.h) is registered");
    CHECK(tq_qdot_act_bytes(TQ_GGML_Q4_0, 64) == 2 * sizeof(tq_q8a), "q8a blocks");
    return t_done();
}
