/* affine_ref.c -- the scalar reference of the MLX affine rows of the format table (formats.h):
 * blocks of G values, each bf16 scale | bf16 bias | G * bits / 8 bytes of codes (element i of the
 * group at bits [i * bits, (i + 1) * bits) of the little-endian bit stream); value = scale *
 * (float)q + bias, a rounded f32 multiply then a rounded add (the library builds with
 * -ffp-contract=off). The same numbers as the file's dequantization (io/mlx.c) for BF16 scales. */
#include "common/formats.h"
#include "core/half.h"

void tq_dq_mlx(const void *src, float *y, int64_t n, int bits, int group)
{
    const uint8_t *b = src;
    const uint32_t mask = (1u << bits) - 1u;
    const size_t cb = (size_t)group * (size_t)bits / 8;
    for (int64_t blk = 0; blk < n / group; blk++, b += 4 + cb, y += group) {
        const float s = tq_bf16_to_f32(tq_rd16(b));
        const float bias = tq_bf16_to_f32(tq_rd16(b + 2));
        const uint8_t *c = b + 4;
        for (int i = 0; i < group; i++) {
            const size_t bit = (size_t)i * (size_t)bits;
            const size_t w = bit / 32;
            uint64_t v = tq_rd32(c + 4 * w);
            if (4 * (w + 1) < cb)
                v |= (uint64_t)tq_rd32(c + 4 * (w + 1)) << 32;
            const uint32_t q = (uint32_t)(v >> (bit % 32)) & mask;
            y[i] = s * (float)q + bias;
        }
    }
}

#define DQ(b, g)                                                                                   \
    void tq_dq_mlx_##b##_##g(const void *src, float *y, int64_t n)                                \
    {                                                                                              \
        tq_dq_mlx(src, y, n, b, g);                                                                \
    }
#define DQ_B(b) DQ(b, 32) DQ(b, 64) DQ(b, 128)
DQ_B(2)
DQ_B(3)
DQ_B(4)
DQ_B(5)
DQ_B(6)
DQ_B(8)
