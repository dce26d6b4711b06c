/* affine.c -- MLX's affine quantization (mx.quantize(w, group_size, bits), mode "affine";
 * weights-reference.md 6.1; docs/FORMAT.md "MLX affine"), written from its published rule:
 * per group of G consecutive values of a row, in f32,
 *     mask = |min| > |max|;  s = max((max - min) / (2^b - 1), 1e-7), negated unless mask;
 *     edge = mask ? min : max;  q0 = rint(edge / s);
 *     if q0 != 0: s = edge / q0, bias = edge  else bias = 0;
 *     q = clamp(rint((w - bias) / s), 0, 2^b - 1)
 * with the f32 s and bias (the caller stores them rounded to bf16, as MLX does on store).
 * Codes are packed LSB first into a little-endian bit stream per row (element i of a row at bits
 * [i*b, (i+1)*b)), which is MLX's uint32 layout for every width. */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "quant/quant_internal.h"

int tq_affine_ok(int bits, int group)
{
    return (bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8) &&
           (group == 32 || group == 64 || group == 128);
}

tq_status tq_affine_quantize(const float *w, int64_t rows, int64_t cols, int bits, int group,
                             uint32_t *codes, float *scales, float *biases)
{
    if (!tq_affine_ok(bits, group))
        return TQ_FAIL(TQ_E_UNSUPPORTED, "affine: bits %d group %d (bits 2 3 4 5 6 8, group 32 "
                       "64 128)", bits, group);
    if (cols % group)
        return TQ_FAIL(TQ_E_ARG, "affine: rows of %lld are not a multiple of the group %d",
                       (long long)cols, group);
    const float n_bins = (float)((1 << bits) - 1);
    const int64_t words = cols * bits / 32;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = w + r * cols;
        uint32_t *out = codes + r * words;
        memset(out, 0, (size_t)words * sizeof(uint32_t));
        for (int64_t g = 0; g < cols / group; g++) {
            const float *v = x + g * group;
            float mn = INFINITY, mx = -INFINITY;
            for (int j = 0; j < group; j++) {
                mx = fmaxf(mx, v[j]);
                mn = fminf(mn, v[j]);
            }
            const int mask = fabsf(mn) > fabsf(mx);
            float s = fmaxf((mx - mn) / n_bins, 1e-7f);
            s = mask ? s : -s;
            const float edge = mask ? mn : mx;
            const float q0 = rintf(edge / s);
            float bias = 0.0f;
            if (q0 != 0.0f) {
                s = edge / q0;
                bias = edge;
            }
            scales[r * (cols / group) + g] = s;
            biases[r * (cols / group) + g] = bias;
            for (int j = 0; j < group; j++) {
                float q = rintf((v[j] - bias) / s);
                q = fminf(fmaxf(q, 0.0f), n_bins);
                const uint64_t bit = (uint64_t)(g * group + j) * (uint64_t)bits;
                const uint32_t qi = (uint32_t)q;
                out[bit / 32] |= qi << (bit % 32);
                if (bit % 32 + (uint64_t)bits > 32)
                    out[bit / 32 + 1] |= qi >> (32 - bit % 32);
            }
        }
    }
    return TQ_OK;
}

void tq_affine_dequantize(const uint32_t *codes, const uint16_t *scales_bf16,
                          const uint16_t *biases_bf16, int64_t rows, int64_t cols, int bits,
                          int group, float *out)
{
    const int64_t words = cols * bits / 32;
    const uint32_t m = (1u << bits) - 1u;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < cols; i++) {
            const uint64_t bit = (uint64_t)i * (uint64_t)bits;
            const uint32_t *c = codes + r * words;
            uint64_t wv = c[bit / 32];
            if (bit / 32 + 1 < (uint64_t)words)
                wv |= (uint64_t)c[bit / 32 + 1] << 32;
            const uint32_t q = (uint32_t)(wv >> (bit % 32)) & m;
            const int64_t gi = r * (cols / group) + i / group;
            out[r * cols + i] = tq_bf16_to_f32(scales_bf16[gi]) * (float)q +
                                tq_bf16_to_f32(biases_bf16[gi]);
        }
}
