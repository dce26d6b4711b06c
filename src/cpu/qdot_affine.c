/* qdot_affine.c -- the scalar specification of qdot_affine.h and the table lookup. No
 * intrinsics; the library builds with -ffp-contract=off, so only the explicit fmaf() fuses. */
#include <math.h>

#include "cpu/qdot_affine.h"

#define MAX_G 128

static void mv_f32(const void *w, size_t row_bytes, int64_t k, const float *x, int64_t ldx,
                   int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1, int bits, int group)
{
    const size_t bb = (size_t)TQ_MLX_BLOCK_BYTES(bits, group);
    float blk[MAX_G];
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * row_bytes;
        for (int64_t t = 0; t < n; t++) {
            const float *xt = x + t * ldx;
            float acc[32] = {0};
            for (int64_t b = 0; b < k / group; b++) {
                tq_dq_mlx(row + (size_t)b * bb, blk, group, bits, group);
                for (int j = 0; j < group; j++) {
                    const int64_t e = b * group + j;
                    acc[e % 32] = fmaf(blk[j], xt[e], acc[e % 32]);
                }
            }
            float v[8];
            for (int l = 0; l < 8; l++)
                v[l] = (acc[l] + acc[8 + l]) + (acc[16 + l] + acc[24 + l]);
            y[t * ldy + r] = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
        }
    }
}

TQ_AFFINE_TABLE(scalar_table, "scalar", TQ_ISA_SCALAR)

const tq_affine_kernels *tq_affine_scalar(void)
{
    return &scalar_table;
}

const tq_affine_kernels *tq_affine_avx2(void)
{
    return tq_cpu_isa() >= TQ_ISA_AVX2 && tq_cpu_supports(TQ_ISA_AVX2) ? tq_affine_avx2_table()
                                                                        : NULL;
}

const tq_affine_kernels *tq_affine_avx512(void)
{
    return tq_cpu_isa() >= TQ_ISA_AVX512 && tq_cpu_supports(TQ_ISA_AVX512)
               ? tq_affine_avx512_table()
               : NULL;
}

int tq_affine_all(const tq_affine_kernels **out, int cap)
{
    int n = 0;
    const tq_affine_kernels *t[3] = {tq_affine_scalar(), tq_affine_avx2(), tq_affine_avx512()};
    for (int i = 0; i < 3; i++)
        if (t[i] && n < cap)
            out[n++] = t[i];
    return n;
}

void tq_affine_register(tq_isa isa, int id, tq_format_kernels *k)
{
    const int i = id - TQ_FMT_MLX_AFFINE;
    if (i < 0 || i >= TQ_MLX_N_FMT)
        return;
    const tq_affine_kernels *t[3];
    const int nt = tq_affine_all(t, 3);
    for (int j = 0; j < nt; j++) {
        if (t[j]->level > isa || !t[j]->mv_f32[i])
            continue;
        k->mv_f32 = t[j]->mv_f32[i];
        k->isa_f32 = t[j]->isa;
    }
}
