/* test_qdot_affine.c -- the MLX affine rows of the format table (common/formats.h) and their
 * matvec kernels (cpu/qdot_affine.h), on random blocks (seed printed, -s N):
 *  1. the row's dequant reference on the in-memory block layout (bf16 scale | bf16 bias | codes)
 *     equals the file layout's dequantization (io/mlx.h tq_mlx_dequant_row) of the same numbers;
 *  2. the scalar matvec equals this file's own evaluation of the specification (w from the
 *     reference dequantizer, fmaf into lane e % 32, the fixed tree), bit for bit;
 *  3. every SIMD table this CPU runs (avx2, avx512) equals the scalar one bit for bit, for
 *     1 and 3 tokens, k below and above the kernels' 8192-value row buffer, every bits x group. */
#include "common/formats.h"
#include "core/half.h"
#include "cpu/formats_cpu.h"
#include "cpu/qdot_affine.h"
#include "cpu/qmatmul.h"
#include "io/mlx.h"
#include "t.h"
#include "turboquant.h"

static uint32_t rs;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 17;
    rs ^= rs << 5;
    return rs;
}
static float frnd(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rnd() & 0xffffff) / 16777216.0f;
}

static float spec_dot(const tq_format *f, const uint8_t *row, const float *x, int64_t k)
{
    float w[128], acc[32] = {0};
    for (int64_t b = 0; b < k / f->block; b++) {
        f->dequant_ref(row + b * f->block_bytes, w, f->block);
        for (int64_t j = 0; j < f->block; j++)
            acc[(b * f->block + j) % 32] = fmaf(w[j], x[b * f->block + j],
                                                acc[(b * f->block + j) % 32]);
    }
    float v[8];
    for (int l = 0; l < 8; l++)
        v[l] = (acc[l] + acc[8 + l]) + (acc[16 + l] + acc[24 + l]);
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_qdot_affine");
    rs = t_seed | 1u;
    static const int bitsv[] = {2, 3, 4, 5, 6, 8}, groups[] = {32, 64, 128};
    const tq_affine_kernels *tabs[3];
    const int nt = tq_affine_all(tabs, 3);
    printf("tables:");
    for (int i = 0; i < nt; i++)
        printf(" %s", tabs[i]->isa);
    printf("\n");
    for (int bi = 0; bi < 6; bi++)
        for (int gi = 0; gi < 3; gi++) {
            const int bits = bitsv[bi], group = groups[gi];
            const int id = tq_fmt_mlx_id(bits, group);
            const tq_format *f = tq_cpu_format(id);
            CHECK(f && f->block == group && f->block_bytes == (size_t)(4 + group * bits / 8),
                  "row of MLX%dg%d", bits, group);
            if (!f)
                continue;
            const int64_t ks[2] = {group * (1 + (int64_t)(rnd() % 8)), 8320}; /* 8320 = 65 * 128 */
            for (int ki = 0; ki < 2; ki++) {
                const int64_t k = ks[ki], rows = 5, ng = k / group, ntok = 3;
                const size_t rb = tq_format_row_bytes(f, k), cb = (size_t)(k * bits / 8);
                uint8_t *w = malloc(rb * rows), *codes = malloc(cb), *sc = malloc(2 * ng),
                        *bs = malloc(2 * ng);
                float *x = malloc(sizeof(float) * k * ntok), *a = malloc(sizeof(float) * k),
                      *b = malloc(sizeof(float) * k);
                for (int64_t i = 0; i < k * ntok; i++)
                    x[i] = frnd(-2, 2);
                int bad_layout = 0;
                for (int64_t r = 0; r < rows; r++) {
                    for (size_t i = 0; i < cb; i++)
                        codes[i] = (uint8_t)rnd();
                    for (int64_t g = 0; g < ng; g++) {
                        const uint16_t s = tq_f32_to_bf16(frnd(-0.05f, 0.05f));
                        const uint16_t o = tq_f32_to_bf16(frnd(-0.5f, 0.5f));
                        sc[2 * g] = (uint8_t)s, sc[2 * g + 1] = (uint8_t)(s >> 8);
                        bs[2 * g] = (uint8_t)o, bs[2 * g + 1] = (uint8_t)(o >> 8);
                        uint8_t *blk = w + r * rb + g * f->block_bytes;
                        memcpy(blk, sc + 2 * g, 2);
                        memcpy(blk + 2, bs + 2 * g, 2);
                        memcpy(blk + 4, codes + g * group * bits / 8, (size_t)group * bits / 8);
                    }
                    tq_mlx_dequant_row(codes, sc, bs, TQ_ST_BF16, k, bits, group, a);
                    f->dequant_ref(w + r * rb, b, k);
                    bad_layout += memcmp(a, b, sizeof(float) * k) != 0;
                }
                CHECK(bad_layout == 0, "MLX%dg%d k %lld: block layout dequant != file layout in "
                      "%d rows", bits, group, (long long)k, bad_layout);
                float want[15], got[15];
                for (int64_t t = 0; t < ntok; t++)
                    for (int64_t r = 0; r < rows; r++)
                        want[t * rows + r] = spec_dot(f, w + r * rb, x + t * k, k);
                for (int ti = 0; ti < nt; ti++) {
                    tq_qmv_f32_fn mv = tabs[ti]->mv_f32[id - TQ_FMT_MLX_AFFINE];
                    CHECK(mv != NULL, "%s has MLX%dg%d", tabs[ti]->isa, bits, group);
                    if (!mv)
                        continue;
                    for (int n = 1; n <= 3; n += 2) {
                        memset(got, 0, sizeof(got));
                        mv(w, rb, k, x, k, n, got, rows, 0, rows);
                        CHECK(!memcmp(got, want, sizeof(float) * (size_t)(n * rows)),
                              "%s MLX%dg%d k %lld n %d: differs from the specification "
                              "(%.9g vs %.9g)", tabs[ti]->isa, bits, group, (long long)k, n,
                              got[0], want[0]);
                    }
                }
                free(w), free(codes), free(sc), free(bs), free(x), free(a), free(b);
            }
        }
    const tq_format *f = tq_cpu_format(tq_fmt_mlx_id(4, 64));
    char kn[64];
    printf("MLX4g64 runs %s\n", f ? tq_qmm_kernel_name(f, 0, kn, sizeof(kn)) : "(none)");
    return t_done();
}
