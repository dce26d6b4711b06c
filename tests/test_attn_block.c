/* test_attn_block.c -- the blocked prefill attention kernels (attn_cpu.h) against the decode
 * kernels, bit for bit, on random inputs (seed printed): a block of nq query positions x G heads,
 * query i seeing keys [0, n0 + i), must give every row exactly the floats of that row computed
 * alone -- tq_attn_heads_avx2() with one head (f32, f16, bf16 rows read in place) and
 * tq_attn_row_avx512() over the rows widened to f32. Odd sizes: head_dim 8..256 (AVX-512: the
 * multiples of 16, with the hd 64 fast path), n0 around the 8/16/64-key group edges, nq 1..9,
 * G 1..5, and the causal edge where rows of one PV tile stop at different keys. Each ISA is
 * skipped when this CPU cannot run it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/rng.h"
#include "cpu/attn_cpu.h"
#include "cpu/matvec.h"
#include "t.h"
#include "turboquant.h"

enum { MAXK = 340, MAXD = 256, MAXG = 5, MAXQ = 9, LD = 352 /* > MAXK rounded up to 16 */ };

typedef struct bufs {
    float *K, *V, *q, *o, *o1, *sc;
    uint16_t *Kh, *Vh;
} bufs;

/* K/V: n random rows stored as `rows`; K, V hold their exact f32 values */
static void fill(tq_rng *r, bufs *b, int64_t n, int hd, tq_attn_rows rows)
{
    for (int64_t i = 0; i < n * hd; i++) {
        const float kx = 1.5f * tq_rng_normal(r), vx = tq_rng_normal(r);
        if (rows == TQ_ATTN_F32) {
            b->K[i] = kx;
            b->V[i] = vx;
        } else if (rows == TQ_ATTN_F16) {
            b->Kh[i] = tq_f32_to_f16(kx);
            b->Vh[i] = tq_f32_to_f16(vx);
            b->K[i] = tq_f16_to_f32(b->Kh[i]);
            b->V[i] = tq_f16_to_f32(b->Vh[i]);
        } else {
            b->Kh[i] = tq_f32_to_bf16(kx);
            b->Vh[i] = tq_f32_to_bf16(vx);
            b->K[i] = tq_bf16_to_f32(b->Kh[i]);
            b->V[i] = tq_bf16_to_f32(b->Vh[i]);
        }
    }
}

static void run_isa(tq_rng *r, bufs *b, int avx512)
{
    static const int hds2[] = {8, 24, 64, 72, 128, 256};
    static const int hds5[] = {16, 48, 64, 80, 128, 256};
    static const int64_t n0s[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 60, 63, 64, 65, 127, 200, 331};
    const char *name = avx512 ? "block_avx512" : "block_avx2";
    int n_case = 0, n_rows = 0, diff = 0;
    for (int a = 0; a < 6; a++)
        for (int c = 0; c < 16; c++)
            for (int rows = 0; rows < 3; rows++) {
                const int hd = avx512 ? hds5[a] : hds2[a];
                const int G = 1 + (a + c + rows) % MAXG;
                const int nq = 1 + (3 * a + c + 2 * rows) % MAXQ;
                const int64_t n0 = n0s[c], n = n0 + nq - 1;
                const tq_attn_rows kind = (tq_attn_rows)rows;
                fill(r, b, n, hd, kind);
                /* queries with a few large ones (peaked softmax) */
                const int64_t ldq = (int64_t)(G + 1) * hd, ldo = (int64_t)(G + 2) * hd;
                for (int64_t i = 0; i < nq * ldq; i++)
                    b->q[i] = (i % 17 == 3 ? 6.0f : 1.0f) * tq_rng_normal(r);
                const float scale = 1.0f / sqrtf((float)hd);
                memset(b->o, 0xff, (size_t)MAXQ * (MAXG + 2) * MAXD * sizeof(float));
                const void *Ks = kind == TQ_ATTN_F32 ? (const void *)b->K : b->Kh;
                const void *Vs = kind == TQ_ATTN_F32 ? (const void *)b->V : b->Vh;
                if (avx512)
                    tq_attn_block_avx512(b->q, ldq, nq, G, b->K, b->V, n0, hd, scale, b->sc, LD,
                                         b->o, ldo);
                else
                    tq_attn_block_avx2(b->q, ldq, nq, G, Ks, Vs, kind, n0, hd, scale, b->sc, LD,
                                       b->o, ldo);
                for (int i = 0; i < nq; i++)
                    for (int h = 0; h < G; h++) {
                        const float *qr = b->q + i * ldq + h * hd;
                        if (avx512)
                            tq_attn_row_avx512(qr, b->K, b->V, n0 + i, hd, scale, b->sc, b->o1);
                        else
                            tq_attn_heads_avx2(qr, 1, Ks, Vs, kind, n0 + i, hd, scale, b->sc, LD,
                                               b->o1);
                        const float *ob = b->o + i * ldo + h * hd;
                        const int bad = memcmp(ob, b->o1, (size_t)hd * sizeof(float)) != 0;
                        if (bad && diff < 5) {
                            int e = 0;
                            while (e < hd && !memcmp(ob + e, b->o1 + e, sizeof(float)))
                                e++;
                            fprintf(stderr, "%s rows %d hd %d n0 %lld nq %d G %d: row (%d, %d) "
                                            "elem %d: %.9g vs alone %.9g\n", name, rows, hd,
                                    (long long)n0, nq, G, i, h, e, ob[e], b->o1[e]);
                        }
                        diff += bad;
                        n_rows++;
                    }
                n_case++;
            }
    CHECK(diff == 0, "%s: %d of %d rows differ from the row computed alone", name, diff, n_rows);
    printf("%s: %d blocks, %d rows, %d differ from the decode kernel\n", name, n_case, n_rows,
           diff);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_attn_block");
    bufs b = {0};
    b.K = malloc((size_t)MAXK * MAXD * 4);
    b.V = malloc((size_t)MAXK * MAXD * 4);
    b.Kh = malloc((size_t)MAXK * MAXD * 2);
    b.Vh = malloc((size_t)MAXK * MAXD * 2);
    b.q = malloc((size_t)MAXQ * (MAXG + 1) * MAXD * 4);
    b.o = malloc((size_t)MAXQ * (MAXG + 2) * MAXD * 4);
    b.o1 = malloc((size_t)MAXD * 4);
    b.sc = malloc((size_t)MAXQ * MAXG * LD * 4);
    tq_rng r;
    tq_rng_seed(&r, t_seed);
    int ran = 0;
    if (tq_cpu_supports(TQ_ISA_AVX2)) {
        run_isa(&r, &b, 0);
        ran++;
    } else {
        printf("avx2: this CPU cannot run it, skipped\n");
    }
    if (tq_cpu_supports(TQ_ISA_AVX512)) {
        run_isa(&r, &b, 1);
        ran++;
    } else {
        printf("avx512: this CPU cannot run it, skipped\n");
    }
    free(b.K);
    free(b.V);
    free(b.Kh);
    free(b.Vh);
    free(b.q);
    free(b.o);
    free(b.o1);
    free(b.sc);
    if (!ran)
        return t_skip("this CPU has neither AVX2 nor AVX-512");
    return t_done();
}
