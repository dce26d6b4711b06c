/* test_hadamard.c -- src/common/hadamard.c: the base matrices against an independent
 * construction written here (Paley I/II with the quadratic character by Euler's criterion,
 * GF(p^2) by hand; the generator uses the set of squares), H_K H_K^T = K I exactly in integers,
 * the whole transform against the explicit matrix (H_K (x) H_M)[r][i] = H_K[r/M][i/M] *
 * (-1)^popcount((r%M) & (i%M)) on basis vectors at small n (H H^T = I to 1e-6) and on sampled
 * rows at every supported n up to 16384, norm preservation and the inverse at every supported n
 * up to 16384, and the power-of-two path bit for bit against the KV codec's FWHT
 * (src/common/kv_ref.c: tq_kv_fwht, tq_kv_rotate_ref, tq_kv_unrotate_ref, tq_kv_unrotate_f64). */
#include "common/hadamard.h"
#include "core/core.h"
#include "core/rng.h"
#include "kv/kv_internal.h"
#include "t.h"

#define MAXN 16384

/* ---- independent construction --------------------------------------------------------------- */
typedef struct gf {
    int p, k, q, nonres; /* GF(p^k), k <= 2; for k = 2: x^2 = nonres */
} gf;

static int gf_sub(const gf *f, int a, int b)
{
    if (f->k == 1)
        return ((a - b) % f->p + f->p) % f->p;
    const int a0 = a % f->p, a1 = a / f->p, b0 = b % f->p, b1 = b / f->p;
    return (a0 - b0 + f->p) % f->p + f->p * ((a1 - b1 + f->p) % f->p);
}

static int gf_mul(const gf *f, int a, int b)
{
    if (f->k == 1)
        return (int)((long)a * b % f->p);
    const int p = f->p, a0 = a % p, a1 = a / p, b0 = b % p, b1 = b / p;
    const int c0 = (a0 * b0 + f->nonres * a1 * b1) % p, c1 = (a0 * b1 + a1 * b0) % p;
    return c0 + p * c1;
}

/* chi(a) by Euler's criterion: a^((q-1)/2) = 1 for a nonzero square, -1 (= q-1 / p-1) else. */
static int gf_chi(const gf *f, int a)
{
    if (a == 0)
        return 0;
    int r = 1;
    for (int e = 0; e < (f->q - 1) / 2; e++)
        r = gf_mul(f, r, a);
    return r == 1 ? 1 : -1;
}

static int H_ref[TQ_HADAMARD_MAX_K][TQ_HADAMARD_MAX_K];

/* Paley I (q = 3 mod 4): H = I + [[0, 1], [-1, Q]]; Paley II (q = 1 mod 4): C = [[0, 1], [1, Q]],
 * 0 -> [[1, -1], [-1, -1]], +-1 -> +-[[1, 1], [1, -1]]. Q[i][j] = chi(e_i - e_j). */
static int build_ref(int K)
{
    static const int nonres[] = {0, 0, 0, 0, 0, 2, 0, 3}; /* GF(25): x^2 = 2, GF(49): x^2 = 3 */
    int q = K - 1, two = 0, q_prime = 1; /* Paley I only for a prime q = K - 1 (28 = PII 13) */
    for (int d = 2; d * d <= q; d++)
        q_prime &= q % d != 0;
    if (K == 40) {
        build_ref(20);
        for (int i = 39; i >= 0; i--)
            for (int j = 39; j >= 0; j--)
                H_ref[i][j] = H_ref[i % 20][j % 20] * ((i >= 20 && j >= 20) ? -1 : 1);
        return 1;
    }
    if (q % 4 != 3 || !q_prime) {
        q = K / 2 - 1;
        two = 1;
    }
    gf f = {q, 1, q, 0};
    for (int p = 2; p < q; p++)
        if (q == p * p) {
            f.p = p;
            f.k = 2;
            f.nonres = nonres[p];
        }
    for (int d = 2; f.k == 1 && d * d <= q; d++)
        if (q % d == 0)
            return 0;
    int C[TQ_HADAMARD_MAX_K][TQ_HADAMARD_MAX_K];
    const int m = q + 1;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++)
            C[i][j] = (i == 0 && j == 0) ? 0
                      : i == 0           ? 1
                      : j == 0           ? (two ? 1 : -1)
                                         : gf_chi(&f, gf_sub(&f, i - 1, j - 1));
    if (!two) {
        for (int i = 0; i < m; i++)
            for (int j = 0; j < m; j++)
                H_ref[i][j] = C[i][j] + (i == j);
        return 1;
    }
    for (int a = 0; a < m; a++)
        for (int b = 0; b < m; b++)
            for (int r = 0; r < 2; r++)
                for (int c = 0; c < 2; c++)
                    H_ref[2 * a + r][2 * b + c] = C[a][b] == 0 ? ((r | c) ? -1 : 1)
                                                               : C[a][b] * ((r & c) ? -1 : 1);
    return 1;
}

static int sylv(int64_t r, int64_t i)
{
    return __builtin_popcountll((unsigned long long)(r & i)) & 1 ? -1 : 1;
}

/* entry (r, i) of H_K (x) H_M, with H_K from the library table */
static int full_entry(const tq_hadamard_base *b, int64_t m, int64_t r, int64_t i)
{
    return tq_hadamard_entry(b, (int)(r / m), (int)(i / m)) * sylv(r % m, i % m);
}

static float xs[MAXN], ys[MAXN], zs[MAXN];
static double xd[MAXN], yd[MAXN];
static int8_t sg[MAXN];

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_hadamard");
    tq_rng rng;
    tq_rng_seed(&rng, t_seed);

    /* ---- the table: required orders, ascending, +-1, H H^T = K I, = independent build ---- */
    static const int need[] = {1, 12, 20, 28, 36, 40, 44, 52, 60};
    for (int i = 0; i < (int)(sizeof(need) / sizeof(need[0])); i++) {
        int found = 0;
        for (int j = 0; j < tq_hadamard_n_bases; j++)
            found |= tq_hadamard_bases[j].k == need[i];
        CHECK(found, "K = %d is in the table", need[i]);
    }
    CHECK(tq_hadamard_bases[0].k == 1 && tq_hadamard_bases[0].bits == NULL, "K = 1 first");
    for (int j = 0; j < tq_hadamard_n_bases; j++) {
        const tq_hadamard_base *b = &tq_hadamard_bases[j];
        const int K = b->k;
        CHECK(K <= TQ_HADAMARD_MAX_K && (j == 0 || K > tq_hadamard_bases[j - 1].k),
              "K = %d ascending, <= TQ_HADAMARD_MAX_K", K);
        CHECK(K == 1 || (b->row_bytes == (K + 7) / 8 && K % 4 == 0), "K = %d row bytes", K);
        if (K == 1)
            continue;
        int bad_pad = 0;
        for (int r = 0; r < K; r++)
            if (K % 8)
                bad_pad |= b->bits[(size_t)r * (size_t)b->row_bytes + (size_t)(K / 8)] >> (K % 8);
        CHECK(!bad_pad, "K = %d: padding bits are zero", K);
        long worst = 0;
        for (int r = 0; r < K; r++)
            for (int s = 0; s < K; s++) {
                long dot = 0;
                for (int t = 0; t < K; t++)
                    dot += tq_hadamard_entry(b, r, t) * tq_hadamard_entry(b, s, t);
                const long want = r == s ? K : 0;
                if (labs(dot - want) > worst)
                    worst = labs(dot - want);
            }
        CHECK(worst == 0, "K = %d (%s): H H^T = K I exactly (worst |error| %ld)", K, b->name,
              worst);
        const int built = build_ref(K);
        CHECK(built, "K = %d: the test can build it independently", K);
        int diff = 0;
        for (int r = 0; built && r < K; r++)
            for (int t = 0; t < K; t++)
                diff += H_ref[r][t] != tq_hadamard_entry(b, r, t);
        CHECK(diff == 0, "K = %d (%s): %d entries differ from the independent construction", K,
              b->name, diff);
    }

    /* ---- supported sizes and errors ---- */
    CHECK(tq_hadamard_base_of(576) && tq_hadamard_base_of(576)->k == 36, "576 = 36 * 16");
    CHECK(tq_hadamard_base_of(640) && tq_hadamard_base_of(640)->k == 40, "640 = 40 * 16");
    CHECK(tq_hadamard_base_of(20) && tq_hadamard_base_of(20)->k == 20, "20 = 20 * 1");
    CHECK(tq_hadamard_base_of(5120) && tq_hadamard_base_of(5120)->k == 40, "5120 = 40 * 128");
    CHECK(tq_hadamard_base_of(4096) && tq_hadamard_base_of(4096)->k == 1, "4096 = 2^12");
    CHECK(tq_hadamard_base_of(1) && tq_hadamard_base_of(1)->k == 1, "1 = 2^0");
    static const int64_t unsup[] = {0, -4, 3, 6, 10, 92, 92 * 64, 172 * 64, 116 * 2, 1248};
    for (int i = 0; i < (int)(sizeof(unsup) / sizeof(unsup[0])); i++) {
        CHECK(!tq_hadamard_supported(unsup[i]), "n = %lld unsupported", (long long)unsup[i]);
        CHECK(tq_hadamard_apply(xs, unsup[i], NULL, TQ_HADAMARD_NORMALIZE) == TQ_E_ARG,
              "n = %lld -> TQ_E_ARG", (long long)unsup[i]);
    }
    CHECK(strstr(tq_last_error(), "n = 1248 is not supported") != NULL && /* 1248 = 39 * 32 */
              strstr(tq_last_error(), "K in {1, 12, 20, 28, 36, 40, 44, 52, 60, ") != NULL,
          "message: %s", tq_last_error());
    CHECK(tq_hadamard_apply(NULL, 64, NULL, 0) == TQ_E_ARG, "x = NULL -> TQ_E_ARG");
    CHECK(tq_hadamard_apply_f64(NULL, 64, NULL, 0) == TQ_E_ARG, "x = NULL -> TQ_E_ARG (f64)");

    /* ---- small n: basis vectors give the explicit matrix; H H^T = I ---- */
    static float cols[256 * 256];
    int n_small = 0;
    for (int64_t n = 1; n <= 256; n++) {
        const tq_hadamard_base *b = tq_hadamard_base_of(n);
        if (!b)
            continue;
        n_small++;
        const int64_t m = n / b->k;
        const float sc = tq_hadamard_scale(n);
        int wrong = 0;
        for (int64_t i = 0; i < n; i++) {
            float *c = cols + i * n;
            memset(c, 0, (size_t)n * sizeof(float));
            c[i] = 1.0f;
            tq_hadamard_apply(c, n, NULL, TQ_HADAMARD_NORMALIZE);
            for (int64_t r = 0; r < n; r++)
                wrong += c[r] != (float)full_entry(b, m, r, i) * sc;
        }
        CHECK(wrong == 0, "n = %lld (K = %d): %d entries of H e_i differ from +-1/sqrt(n)",
              (long long)n, b->k, wrong);
        double worst = 0; /* n <= 128 keeps the O(n^3) check fast under ASan at -O0 */
        for (int64_t i = 0; i < n && n <= 128; i++)
            for (int64_t j = 0; j < n; j++) {
                double dot = 0;
                for (int64_t r = 0; r < n; r++)
                    dot += (double)cols[i * n + r] * cols[j * n + r];
                const double e = fabs(dot - (i == j));
                worst = e > worst ? e : worst;
            }
        CHECK(worst < 1e-6, "n = %lld: |H H^T - I| = %.3g", (long long)n, worst);
    }
    /* 1..256: 9 powers of two; K = 12: 5; 20: 1 (20); 40: 3; 28: 4; 36 44 52 60: 3 each;
     * 68 76 84 100 108 124: 2 each; 132 140 148 164: 1 each */
    CHECK(n_small == 9 + 5 + 1 + 3 + 4 + 4 * 3 + 6 * 2 + 4, "%d supported n <= 256", n_small);

    /* ---- every supported n <= 16384: norm, inverse, involution (K = 1), sampled rows ---- */
    int n_big = 0;
    double w_norm = 0, w_inv = 0, w_norm64 = 0, w_inv64 = 0, w_row = 0, w_invol = 0;
    for (int64_t n = 1; n <= MAXN; n++) {
        const tq_hadamard_base *b = tq_hadamard_base_of(n);
        if (!b)
            continue;
        n_big++;
        const int64_t m = n / b->k;
        double nx = 0;
        for (int64_t i = 0; i < n; i++) {
            xs[i] = tq_rng_normal(&rng);
            xd[i] = xs[i];
            sg[i] = (tq_rng_u64(&rng) >> 63) ? -1 : 1;
            nx += (double)xs[i] * xs[i];
        }
        memcpy(ys, xs, (size_t)n * sizeof(float));
        memcpy(yd, xd, (size_t)n * sizeof(double));
        CHECK(tq_hadamard_apply(ys, n, sg, TQ_HADAMARD_NORMALIZE) == TQ_OK, "n = %lld",
              (long long)n);
        CHECK(tq_hadamard_apply_f64(yd, n, sg, TQ_HADAMARD_NORMALIZE) == TQ_OK, "n = %lld",
              (long long)n);
        double ny = 0, ny64 = 0;
        for (int64_t i = 0; i < n; i++) {
            ny += (double)ys[i] * ys[i];
            ny64 += yd[i] * yd[i];
        }
        const double en = fabs(sqrt(ny / nx) - 1), en64 = fabs(sqrt(ny64 / nx) - 1);
        w_norm = en > w_norm ? en : w_norm;
        w_norm64 = en64 > w_norm64 ? en64 : w_norm64;
        /* 8 sampled output rows against the explicit matrix, in double */
        for (int k = 0; k < 8; k++) {
            const int64_t r = (int64_t)(tq_rng_u64(&rng) % (uint64_t)n);
            double want = 0;
            for (int64_t i = 0; i < n; i++)
                want += full_entry(b, m, r, i) * sg[i] * xd[i];
            want /= sqrt((double)n);
            const double e = fabs(yd[r] - want) / sqrt(nx / (double)n);
            w_row = e > w_row ? e : w_row;
        }
        CHECK(tq_hadamard_apply(ys, n, sg, TQ_HADAMARD_NORMALIZE | TQ_HADAMARD_INVERSE) == TQ_OK,
              "n = %lld", (long long)n);
        CHECK(tq_hadamard_apply_f64(yd, n, sg, TQ_HADAMARD_NORMALIZE | TQ_HADAMARD_INVERSE) ==
                  TQ_OK, "n = %lld", (long long)n);
        double ei = 0, ei64 = 0;
        for (int64_t i = 0; i < n; i++) {
            ei += ((double)ys[i] - xs[i]) * ((double)ys[i] - xs[i]);
            ei64 += (yd[i] - xd[i]) * (yd[i] - xd[i]);
        }
        ei = sqrt(ei / nx);
        ei64 = sqrt(ei64 / nx);
        w_inv = ei > w_inv ? ei : w_inv;
        w_inv64 = ei64 > w_inv64 ? ei64 : w_inv64;
        CHECK(ei < 1e-6 && ei64 < 1e-13 && en < 1e-6 && en64 < 1e-13,
              "n = %lld (K = %d): norm %.3g/%.3g inverse %.3g/%.3g (f32/f64)", (long long)n, b->k,
              en, en64, ei, ei64);
        if (b->k == 1) { /* no signs: the normalized transform is its own inverse */
            memcpy(zs, xs, (size_t)n * sizeof(float));
            tq_hadamard_apply(zs, n, NULL, TQ_HADAMARD_NORMALIZE);
            tq_hadamard_apply(zs, n, NULL, TQ_HADAMARD_NORMALIZE);
            double e = 0;
            for (int64_t i = 0; i < n; i++)
                e += ((double)zs[i] - xs[i]) * ((double)zs[i] - xs[i]);
            e = sqrt(e / nx);
            w_invol = e > w_invol ? e : w_invol;
            CHECK(e < 1e-6, "n = %lld: H(Hx) = x to %.3g", (long long)n, e);
        }
    }
    CHECK(w_row < 1e-12, "sampled rows vs the explicit matrix: worst %.3g (of rms x)", w_row);
    printf("supported n <= %d: %d; worst |norm ratio - 1| f32 %.3g f64 %.3g; inverse f32 %.3g "
           "f64 %.3g; involution f32 %.3g; rows vs explicit matrix %.3g\n",
           MAXN, n_big, w_norm, w_norm64, w_inv, w_inv64, w_invol, w_row);
    CHECK(n_big > 150, "%d supported n <= %d", n_big, MAXN);

    /* ---- power of two: bit for bit the KV codec's FWHT ---- */
    int same_b = 1, same_f = 1, same_rot = 1, same_unrot = 1, same_f64 = 1, same_sc = 1;
    for (int d = 64; d <= 512; d *= 2) {
        const float *ks = tq_kv_signs(d);
        int8_t s8[512];
        for (int i = 0; i < d; i++)
            s8[i] = ks[i] < 0 ? -1 : 1;
        same_sc &= tq_kv_fwht_scale(d) == tq_hadamard_scale(d);
        for (int rep = 0; rep < 200; rep++) {
            float a[512], bb[512], c[512];
            double a64[512], b64[512];
            for (int i = 0; i < d; i++) {
                const float v = tq_rng_normal(&rng);
                /* a mix of magnitudes, exact zeros of both signs, and (rep 0) inf/NaN */
                a[i] = (rep % 4 == 1) ? v * 1e30f : (rep % 4 == 2) ? v * 1e-30f : v;
                if (tq_rng_u64(&rng) % 16 == 0)
                    a[i] = (tq_rng_u64(&rng) & 1) ? -0.0f : 0.0f;
            }
            if (rep == 0) {
                a[3] = INFINITY;
                a[9] = -INFINITY;
                a[20] = NAN;
            }
            for (int i = 0; i < d; i++)
                a64[i] = (double)a[i] * 1.000000001;
            memcpy(bb, a, sizeof(float) * (size_t)d);
            memcpy(c, a, sizeof(float) * (size_t)d);
            tq_kv_fwht_butterflies(bb, d);
            tq_hadamard_butterflies(c, d);
            same_b &= memcmp(bb, c, sizeof(float) * (size_t)d) == 0;
            memcpy(bb, a, sizeof(float) * (size_t)d);
            memcpy(c, a, sizeof(float) * (size_t)d);
            tq_kv_fwht(bb, d);
            tq_hadamard_apply(c, d, NULL, TQ_HADAMARD_NORMALIZE);
            same_f &= memcmp(bb, c, sizeof(float) * (size_t)d) == 0;
            tq_kv_rotate_ref(a, d, bb);
            memcpy(c, a, sizeof(float) * (size_t)d);
            tq_hadamard_apply(c, d, s8, TQ_HADAMARD_NORMALIZE);
            same_rot &= memcmp(bb, c, sizeof(float) * (size_t)d) == 0;
            memcpy(bb, a, sizeof(float) * (size_t)d);
            memcpy(c, a, sizeof(float) * (size_t)d);
            tq_kv_unrotate_ref(bb, d);
            tq_hadamard_apply(c, d, s8, TQ_HADAMARD_NORMALIZE | TQ_HADAMARD_INVERSE);
            same_unrot &= memcmp(bb, c, sizeof(float) * (size_t)d) == 0;
            memcpy(b64, a64, sizeof(double) * (size_t)d);
            tq_kv_unrotate_f64(a64, d);
            tq_hadamard_apply_f64(b64, d, s8,
                                  TQ_HADAMARD_NORMALIZE | TQ_HADAMARD_INVERSE |
                                      TQ_HADAMARD_SCALE_F32);
            same_f64 &= memcmp(a64, b64, sizeof(double) * (size_t)d) == 0;
        }
    }
    CHECK(same_sc, "tq_hadamard_scale(d) == tq_kv_fwht_scale(d) bitwise, d = 64..512");
    CHECK(same_b, "butterflies == tq_kv_fwht_butterflies bit for bit");
    CHECK(same_f, "normalized, no signs == tq_kv_fwht bit for bit");
    CHECK(same_rot, "forward with KV signs == tq_kv_rotate_ref bit for bit");
    CHECK(same_unrot, "inverse with KV signs == tq_kv_unrotate_ref bit for bit");
    CHECK(same_f64, "f64 inverse, float scale == tq_kv_unrotate_f64 bit for bit");
    printf("power-of-two path vs KV FWHT (d = 64..512, 800 rows each): butterflies %s, fwht %s, "
           "rotate %s, unrotate %s, unrotate_f64 %s, scale %s\n",
           same_b ? "same" : "DIFF", same_f ? "same" : "DIFF", same_rot ? "same" : "DIFF",
           same_unrot ? "same" : "DIFF", same_f64 ? "same" : "DIFF", same_sc ? "same" : "DIFF");
    return t_done();
}
