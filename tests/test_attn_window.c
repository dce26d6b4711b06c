/* test_attn_window.c -- the AVX2 attention kernels on random inputs (seed printed):
 *   - the window kernel tq_attn_heads_avx2() for f32/f16/bf16 rows against a float64 oracle
 *     (every head_dim multiple of 8 up to 256, 1..5 heads, 1..333 keys), and G heads in one call
 *     == G calls of one head, bit for bit (the heads of a unit never change a row's floats);
 *   - the turbo kernels: the K-block decode == the codec's decode bit for bit (k2/4/5/8);
 *     dot256 == its definition (8 lane chains of correctly rounded fmaf and a
 *     fixed tree) bit for bit; the block update against the scalar spec (double, ~1e-15), and
 *     the block's scores are the dot kernel's (fused == reference relies on it).
 * Skips when this CPU has no AVX2 (the kernels cannot run). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/rng.h"
#include "cpu/attn_cpu.h"
#include "kv/kv_internal.h"
#include "model/kvcache_turbo.h"
#include "t.h"

/* nmse bound of the float kernel against float64 (float scores, polynomial exp) */
#define NMSE 1e-10

static void oracle(const float *q, const float *K, const float *V, int64_t nk, int hd,
                   float scale, double *o)
{
    double *p = malloc((size_t)nk * sizeof(double)), mx = -INFINITY, sum = 0.0;
    for (int64_t t = 0; t < nk; t++) {
        double d = 0.0;
        for (int e = 0; e < hd; e++)
            d += (double)q[e] * K[t * hd + e];
        p[t] = d * scale;
        mx = p[t] > mx ? p[t] : mx;
    }
    for (int64_t t = 0; t < nk; t++)
        sum += p[t] = exp(p[t] - mx);
    for (int e = 0; e < hd; e++) {
        o[e] = 0.0;
        for (int64_t t = 0; t < nk; t++)
            o[e] += p[t] / sum * V[t * hd + e];
    }
    free(p);
}

static void window_kernel(tq_rng *r)
{
    static const int hds[] = {8, 64, 72, 128, 256};
    static const int64_t nks[] = {1, 5, 8, 9, 100, 333};
    const int64_t maxk = 333, maxd = 256, maxg = 5;
    float *K = malloc(maxk * maxd * 4), *V = malloc(maxk * maxd * 4);
    uint16_t *Kh = malloc(maxk * maxd * 2), *Vh = malloc(maxk * maxd * 2);
    float *q = malloc(maxg * maxd * 4), *o = malloc(maxg * maxd * 4), *o1 = malloc(maxd * 4);
    const int64_t ld = 344; /* > 333 rounded up to 8 */
    float *sc = malloc(maxg * ld * 4);
    double *ref = malloc(maxd * sizeof(double));
    double worst = 0.0;
    int n_case = 0, split_diff = 0;
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 6; b++)
            for (int rows = 0; rows < 3; rows++) {
                const int hd = hds[a], G = 1 + (a + b + rows) % 5;
                const int64_t nk = nks[b];
                for (int64_t i = 0; i < nk * hd; i++) {
                    const float kx = 1.5f * tq_rng_normal(r), vx = tq_rng_normal(r);
                    /* the kernel sees the stored rows; the oracle their exact f32 values */
                    if (rows == TQ_ATTN_F32) {
                        K[i] = kx;
                        V[i] = vx;
                    } else if (rows == TQ_ATTN_F16) {
                        Kh[i] = tq_f32_to_f16(kx);
                        Vh[i] = tq_f32_to_f16(vx);
                        K[i] = tq_f16_to_f32(Kh[i]);
                        V[i] = tq_f16_to_f32(Vh[i]);
                    } else {
                        Kh[i] = tq_f32_to_bf16(kx);
                        Vh[i] = tq_f32_to_bf16(vx);
                        K[i] = tq_bf16_to_f32(Kh[i]);
                        V[i] = tq_bf16_to_f32(Vh[i]);
                    }
                }
                for (int i = 0; i < G * hd; i++)
                    q[i] = tq_rng_normal(r);
                const void *Ks = rows == TQ_ATTN_F32 ? (const void *)K : Kh;
                const void *Vs = rows == TQ_ATTN_F32 ? (const void *)V : Vh;
                const float scale = 1.0f / sqrtf((float)hd);
                tq_attn_heads_avx2(q, G, Ks, Vs, (tq_attn_rows)rows, nk, hd, scale, sc, ld, o);
                for (int h = 0; h < G; h++) {
                    oracle(q + h * hd, K, V, nk, hd, scale, ref);
                    double num = 0.0, den = 0.0;
                    for (int e = 0; e < hd; e++) {
                        num += (o[h * hd + e] - ref[e]) * (o[h * hd + e] - ref[e]);
                        den += ref[e] * ref[e];
                    }
                    worst = num / den > worst ? num / den : worst;
                    CHECK(num <= NMSE * den, "heads_avx2 rows %d hd %d keys %lld head %d/%d: "
                                             "nmse %.3g", rows, hd, (long long)nk, h, G,
                          num / den);
                    tq_attn_heads_avx2(q + h * hd, 1, Ks, Vs, (tq_attn_rows)rows, nk, hd, scale,
                                       sc, ld, o1);
                    split_diff += memcmp(o1, o + h * hd, (size_t)hd * sizeof(float)) != 0;
                }
                n_case++;
            }
    CHECK(split_diff == 0, "heads_avx2: %d heads differ between a G-head call and a 1-head call",
          split_diff);
    printf("window kernel avx2: %d cases, worst nmse %.3g (bound %g), G-head == 1-head calls\n",
           n_case, worst, NMSE);
    free(K);
    free(V);
    free(Kh);
    free(Vh);
    free(q);
    free(o);
    free(o1);
    free(sc);
    free(ref);
}

/* the definition of the AVX2 score dot: lane l = chain over d = l, l + 8, ... with a correctly
 * rounded fma (first term a product), then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) */
static float dot_def(const float *a, const float *b, int n)
{
    float l[8];
    for (int i = 0; i < 8; i++) {
        l[i] = a[i] * b[i];
        for (int d = i + 8; d < n; d += 8)
            l[i] = fmaf(a[d], b[d], l[i]);
    }
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

static void turbo_kernels(tq_rng *r)
{
    const tq_attn_kernels *ak = &tq_attn_kernels_avx2, *sk = &tq_attn_kernels_scalar;
    enum { KB = TQ_TURBO_KB, MAXD = 512 };
    float *q = malloc(MAXD * 4), *K = malloc(KB * MAXD * 4), sc[KB], sc2[KB];
    double *V = malloc(KB * MAXD * sizeof(double)), p[KB], p2[KB];
    double *S = malloc((MAXD + 2) * sizeof(double)), *S2 = malloc((MAXD + 2) * sizeof(double));
    int dot_diff = 0, score_diff = 0, n_blocks = 0;
    double worst = 0.0;
    for (int hd = 64; hd <= MAXD; hd *= 2)
        for (int rep = 0; rep < 6; rep++) {
            for (int i = 0; i < hd; i++)
                q[i] = 2.0f * tq_rng_normal(r);
            for (int i = 0; i < KB * hd; i++) {
                K[i] = tq_rng_normal(r) + (float)(i % 5) - 2.0f;
                V[i] = tq_rng_normal(r);
            }
            for (int k = 0; k < KB; k++) {
                const float a = ak->dot(q, K + k * hd, hd), b = dot_def(q, K + k * hd, hd);
                dot_diff += memcmp(&a, &b, sizeof a) != 0;
            }
            /* a running state, then three blocks of varied length (tails of the 8-key groups) */
            const float scale = 1.0f / sqrtf((float)hd);
            S[0] = S2[0] = -INFINITY;
            for (int e = 1; e < hd + 2; e++)
                S[e] = S2[e] = 0.0;
            const int nvs[3] = {KB, 1 + rep * 5, 3 + rep};
            for (int bl = 0; bl < 3; bl++) {
                const int nv = nvs[bl];
                ak->block(q, K, V, nv, hd, scale, S, sc, p);
                sk->block(q, K, V, nv, hd, scale, S2, sc2, p2);
                for (int k = 0; k < nv; k++) {
                    const float want = scale * ak->dot(q, K + k * hd, hd);
                    score_diff += memcmp(&sc[k], &want, sizeof want) != 0;
                }
                n_blocks++;
                /* the scalar spec has its own dot: compare the states with a relative bound
                 * that the float score differences (~1e-6) dominate */
                for (int e = 0; e < hd + 2; e++) {
                    const double d = fabs(S[e] - S2[e]) / (1e-30 + fabs(S2[1]) + fabs(S2[e]));
                    worst = d > worst ? d : worst;
                }
            }
        }
    /* the K-block decode == the codec's decode, every key width and head_dim */
    int kdiff = 0;
    static const int kbs[] = {2, 4, 5, 8};
    for (int b = 0; b < 4; b++)
        for (int hd = 64; hd <= MAXD; hd *= 2) {
            const tq_kv_scheme s = {.kind = TQ_KV_TURBO, .k_bits = kbs[b], .v_bits = 3};
            size_t kr, vr;
            tq_kv_row_bytes(s, hd, &kr, &vr);
            uint8_t *rows = malloc(5 * kr);
            float *x = malloc(5 * hd * sizeof(float)), *y0 = malloc(5 * hd * 4);
            float *y1 = malloc(5 * hd * 4);
            for (int i = 0; i < 5 * hd; i++)
                x[i] = 3.0f * tq_rng_normal(r) + (float)(i % 7);
            tq_kv_encode_k(s, hd, TQ_DTYPE_F32, x, 5, rows, 5 * kr, NULL);
            tq_kv_decode_k(s, hd, rows, 5, y0, 5 * hd, NULL);
            ak->dec_k(rows, 5, hd, kbs[b], y1);
            kdiff += memcmp(y0, y1, (size_t)5 * hd * sizeof(float)) != 0;
            free(rows);
            free(x);
            free(y0);
            free(y1);
        }
    CHECK(kdiff == 0, "turbo K-block decode avx2 == codec decode: %d cases differ", kdiff);
    CHECK(dot_diff == 0, "turbo dot avx2 == its definition: %d of the dots differ", dot_diff);
    CHECK(score_diff == 0, "turbo block avx2: %d scores differ from scale * dot", score_diff);
    CHECK(worst < 1e-4, "turbo block avx2 vs scalar spec: worst relative state difference %.3g",
          worst);
    printf("turbo kernels avx2: dot == definition; %d blocks, worst state diff vs scalar %.3g\n",
           n_blocks, worst);
    free(q);
    free(K);
    free(V);
    free(S);
    free(S2);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_attn_window");
    if (!tq_cpu_supports(TQ_ISA_AVX2))
        return t_skip("this CPU has no AVX2+FMA; the AVX2 kernels cannot run");
    tq_rng r;
    tq_rng_seed(&r, t_seed);
    window_kernel(&r);
    turbo_kernels(&r);
    return t_done();
}
