/* test_kv_props.c -- SPEC A2, model-free properties: the FWHT is orthonormal and an involution;
 * the value codec's round-trip MSE on unit-normal data lands in the Lloyd-Max / paper band per
 * bit width; row bytes follow d*kb/8 + d*vb/8 + 3*(d/32)*2 and the compression ratios of the
 * reference table (k8v3 at d=128: 200 bytes vs 512 = 2.56x). */
#include "core/core.h"
#include "core/rng.h"
#include "kv/kv_internal.h"
#include "t.h"

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_kv_props");
    tq_rng rng;
    tq_rng_seed(&rng, t_seed);
    const int dims[] = {64, 128, 256, 512};

    /* FWHT: H = Sylvester Hadamard / sqrt(d): column j of H is H e_j, exact (one nonzero) */
    for (int di = 0; di < 4; di++) {
        const int d = dims[di];
        float u[512], v[512];
        const float s = tq_kv_fwht_scale(d);
        int exact = 1;
        for (int j = 0; j < d; j += 37) {
            memset(u, 0, sizeof(u));
            u[j] = 1.0f;
            tq_kv_fwht(u, d);
            for (int i = 0; i < d; i++)
                exact &= u[i] == ((__builtin_popcount(i & j) & 1) ? -s : s);
        }
        CHECK(exact, "d=%d H e_j = (-1)^popcount(i&j) / sqrt(d)", d);
        /* orthonormal: |Hx| = |x|, <Hx, Hy> = <x, y>; involution: H(Hx) = x */
        double max_inv = 0, max_norm = 0, max_dot = 0;
        for (int rep = 0; rep < 50; rep++) {
            float x[512], y[512];
            double nx = 0, nh = 0, dxy = 0, dh = 0;
            for (int i = 0; i < d; i++) {
                x[i] = tq_rng_normal(&rng);
                y[i] = tq_rng_normal(&rng);
                u[i] = x[i];
                v[i] = y[i];
            }
            tq_kv_fwht(u, d);
            tq_kv_fwht(v, d);
            for (int i = 0; i < d; i++) {
                nx += (double)x[i] * x[i];
                nh += (double)u[i] * u[i];
                dxy += (double)x[i] * y[i];
                dh += (double)u[i] * v[i];
            }
            max_norm = fmax(max_norm, fabs(nh - nx) / nx);
            max_dot = fmax(max_dot, fabs(dh - dxy) / sqrt(nx * nx));
            tq_kv_fwht(u, d);
            for (int i = 0; i < d; i++)
                max_inv = fmax(max_inv, fabs((double)u[i] - x[i]));
            /* rotate/unrotate round trip */
            tq_kv_rotate_ref(x, d, u);
            tq_kv_unrotate_ref(u, d);
            for (int i = 0; i < d; i++)
                max_inv = fmax(max_inv, fabs((double)u[i] - x[i]));
        }
        printf("  d=%d: FWHT involution max err %.3g, norm rel err %.3g, dot err %.3g\n", d,
               max_inv, max_norm, max_dot);
        CHECK(max_inv < 2e-5, "d=%d involution err %g", d, max_inv);
        CHECK(max_norm < 1e-5, "d=%d norm err %g", d, max_norm);
        CHECK(max_dot < 1e-5, "d=%d dot err %g", d, max_dot);
    }

    /* value codec MSE on unit normals. Lloyd-Max N(0,1) distortion: 0.1175 (2), 0.03454 (3),
     * 0.009497 (4), 0.002499 (5) bits (Max 1960); the paper quotes 0.117 / 0.03 / 0.009. The
     * per-group RMS normalisation costs a little; bands allow for it. 8 bits: below 1e-3. */
    {
        const int bits[5] = {2, 3, 4, 5, 8};
        const double lo[5] = {0.100, 0.028, 0.0075, 0.0019, 0.0};
        const double hi[5] = {0.135, 0.042, 0.0120, 0.0035, 1e-3};
        enum { ROWS = 400 };
        const int d = 128;
        for (int k = 0; k < 5; k++) {
            double se = 0;
            float x[128], out[128];
            uint8_t row[256];
            for (int r = 0; r < ROWS; r++) {
                for (int i = 0; i < d; i++)
                    x[i] = tq_rng_normal(&rng);
                tq_kv_turbo_encode_v_row_ref(x, d, bits[k], row);
                tq_kv_turbo_decode_v_row_ref(row, d, bits[k], out);
                for (int i = 0; i < d; i++)
                    se += ((double)out[i] - x[i]) * ((double)out[i] - x[i]);
            }
            const double mse = se / (ROWS * d);
            printf("  V %d-bit unit-normal MSE %.5f (band %.4f .. %.4f)\n", bits[k], mse, lo[k],
                   hi[k]);
            CHECK(mse >= lo[k] && mse <= hi[k], "V %d-bit MSE %g outside [%g, %g]", bits[k], mse,
                  lo[k], hi[k]);
        }
    }

    /* bytes: formula for every turbo scheme and head_dim, reference table at d=128 */
    {
        const int kbs[4] = {2, 4, 5, 8}, vbs[5] = {2, 3, 4, 5, 8};
        int ok = 1;
        for (int di = 0; di < 4; di++)
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 5; b++) {
                    const int d = dims[di];
                    tq_kv_scheme s = {TQ_KV_TURBO, kbs[a], vbs[b], 0};
                    size_t kb, vb;
                    ok &= tq_kv_row_bytes(s, d, &kb, &vb) == TQ_OK;
                    ok &= kb + vb == (size_t)(d * kbs[a] / 8 + d * vbs[b] / 8 + 3 * (d / 32) * 2);
                    /* ratio vs 16-bit K+V is head_dim independent */
                    const double ratio = (double)(2 * 2 * d) / (double)(kb + vb);
                    const double r128 = 512.0 / (double)(128 * kbs[a] / 8 + 128 * vbs[b] / 8 + 24);
                    ok &= fabs(ratio - r128) < 1e-12;
                }
        CHECK(ok, "turbo byte formula");
        static const struct {
            int kb, vb;
            size_t bytes;
            double ratio;
        } tab[] = {{8, 8, 280, 1.829}, {8, 4, 216, 2.370}, {8, 3, 200, 2.560},
                   {8, 2, 184, 2.783}, {5, 3, 152, 3.368}, {4, 3, 136, 3.765},
                   {4, 2, 120, 4.267}, {2, 3, 104, 4.923}, {2, 2, 88, 5.818}};
        for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
            tq_kv_scheme s = {TQ_KV_TURBO, tab[i].kb, tab[i].vb, 0};
            size_t kb, vb;
            tq_kv_row_bytes(s, 128, &kb, &vb);
            CHECK(kb + vb == tab[i].bytes, "k%dv%d bytes %zu", tab[i].kb, tab[i].vb, kb + vb);
            CHECK_NEAR(512.0 / (double)(kb + vb), tab[i].ratio, 5e-4, "k%dv%d ratio", tab[i].kb,
                       tab[i].vb);
        }
        /* baselines at d=128: f32 512, f16/bf16 256, kv8 128+2*2*2 = 136, kv4 64+8 = 72 */
        static const struct {
            const char *name;
            size_t row;
        } base[] = {{"f32", 512}, {"f16", 256}, {"bf16", 256}, {"kv8", 136}, {"kv4", 72}};
        for (size_t i = 0; i < 5; i++) {
            tq_kv_scheme s;
            size_t kb, vb;
            tq_kv_scheme_parse(base[i].name, &s);
            CHECK(tq_kv_row_bytes(s, 128, &kb, &vb) == TQ_OK && kb == base[i].row &&
                      vb == base[i].row,
                  "%s row bytes %zu", base[i].name, kb);
        }
    }
    return t_done();
}
