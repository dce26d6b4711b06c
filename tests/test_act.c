/* test_act.c -- the gated activations (cpu/act.h): every vector kernel equals the scalar
 * reference bit for bit (random and edge values, every length 0..67 for the tails, in place),
 * and the reference is within a stated bound of float64 GELU-tanh / SiLU. Seed printed; -s N. */
#include "core/rng.h"
#include "cpu/act.h"
#include "t.h"

#define NMAX 4096

/* GELU-tanh in float64, as x / (1 + e^(-2z)): the same function as 0.5 x (1 + tanh(z)) without
 * its cancellation for x < 0 (tanh(z) = -1 in float64 below z ~ -19) */
static double gelu_d(double x)
{
    return x / (1.0 + exp(-2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static double silu_d(double x)
{
    return x / (1.0 + exp(-x));
}

/* random values at several scales plus the edges: 0, -0, tiny, the clamp points, huge */
static void fill(tq_rng *rng, float *x, float *up, int n)
{
    static const float edge[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 5.0f, -5.0f,
                                 10.0f, -10.0f, 43.5f, -43.5f, 44.0f, -44.0f, 86.0f, -86.0f,
                                 88.7f, -88.7f, 89.0f, -89.0f, 100.0f, -100.0f, 1e4f, -1e4f, 1e30f, -1e30f};
    const int ne = (int)(sizeof(edge) / sizeof(edge[0]));
    for (int i = 0; i < n; i++) {
        const float s = i % 3 == 0 ? 0.5f : i % 3 == 1 ? 3.0f : 20.0f;
        x[i] = i < ne ? edge[i] : s * tq_rng_normal(rng);
        up[i] = tq_rng_normal(rng);
    }
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_act");
    tq_rng rng;
    tq_rng_seed(&rng, t_seed);
    static float x[NMAX], up[NMAX], ones[NMAX], ref[NMAX], got[NMAX];
    for (int i = 0; i < NMAX; i++)
        ones[i] = 1.0f;
    for (int gelu = 0; gelu <= 1; gelu++) {
        const char *name = gelu ? "gelu" : "silu";
        /* the reference against float64: |y - y64| <= (8 + 6 |u|) 2^-24 |y64| + 2^-120, u the
         * exponent argument: u itself carries up to ~5 float roundings (C1, C2, x * x, the fma,
         * the product), which move e^u by |u| times that relatively; 2^-120 absolute covers
         * the results near 0 where e^u overflows (u > 88.7: act = 0 instead of ~1e-37) */
        fill(&rng, x, up, NMAX);
        memcpy(ref, x, sizeof(x));
        tq_act_glu_ref(ref, ones, NMAX, gelu);
        double worst = 0.0;
        int bad = 0;
        for (int i = 0; i < NMAX; i++) {
            const double xd = x[i];
            const double yd = gelu ? gelu_d(xd) : silu_d(xd);
            double u = gelu ? -2.0 * 0.7978845608028654 * (xd + 0.044715 * xd * xd * xd) : -xd;
            u = fabs(u) > 88.0 ? 88.0 : fabs(u);
            const double err = fabs((double)ref[i] - yd);
            const double tol = (8.0 + 6.0 * u) * ldexp(1.0, -24) * fabs(yd) + ldexp(1.0, -120);
            if (!(err <= tol)) {
                if (bad++ < 5)
                    fprintf(stderr, "  %s(%.9g) = %.9g, float64 %.9g\n", name, xd, ref[i], yd);
            }
            if (fabs(yd) > 1e-30 && err / (fabs(yd) * ldexp(1.0, -24)) > worst)
                worst = err / (fabs(yd) * ldexp(1.0, -24));
        }
        printf("%s: reference vs float64, worst %.2f ulp of the result over %d values\n", name,
               worst, NMAX);
        CHECK(bad == 0, "%s: %d of %d values outside the float64 bound", name, bad, NMAX);
        /* every kernel == the reference, bit for bit: all lengths 0..67 at two offsets, and NMAX */
        for (int l = TQ_ISA_AVX2; l < TQ_ISA_COUNT; l++) {
            if (!tq_cpu_supports((tq_isa)l)) {
                printf("%s: %s not on this CPU, skipped\n", name, tq_isa_name((tq_isa)l));
                continue;
            }
            const tq_act_glu_fn k = tq_act_glu_kernel((tq_isa)l);
            CHECK(k != tq_act_glu_ref, "%s: no %s kernel", name, tq_isa_name((tq_isa)l));
            int differ = 0, stray = 0;
            for (int n = 0; n <= 68; n++) {
                const int len = n == 68 ? NMAX - 8 : n;
                for (int off = 0; off <= 5; off += 5) {
                    fill(&rng, x, up, NMAX);
                    memcpy(ref, x, sizeof(x));
                    memcpy(got, x, sizeof(x));
                    tq_act_glu_ref(ref + off, up + off, (size_t)len, gelu);
                    k(got + off, up + off, (size_t)len, gelu);
                    for (int i = 0; i < NMAX; i++) {
                        if (i >= off && i < off + len)
                            differ += memcmp(&ref[i], &got[i], sizeof(float)) != 0;
                        else
                            stray += memcmp(&x[i], &got[i], sizeof(float)) != 0;
                    }
                }
            }
            CHECK(differ == 0 && stray == 0, "%s %s: %d values differ from the reference, %d "
                  "written outside", name, tq_isa_name((tq_isa)l), differ, stray);
            /* a NaN stays a NaN */
            float nan_in[16], nan_up[16];
            for (int i = 0; i < 16; i++) {
                nan_in[i] = NAN;
                nan_up[i] = 1.0f;
            }
            k(nan_in, nan_up, 16, gelu);
            CHECK(isnan(nan_in[0]) && isnan(nan_in[15]), "%s %s: NaN in, %g out", name,
                  tq_isa_name((tq_isa)l), nan_in[0]);
        }
    }
    return t_done();
}
