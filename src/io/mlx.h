/* mlx.h -- MLX affine quantized safetensors directories (mlx-lm's layout; docs/FORMAT.md "MLX
 * affine"), internal to src/io/.
 *
 * A quantized linear `M` is three tensors: M.weight (U32, [rows, cols * bits / 32]: the codes of
 * a row as one little-endian bit stream, element i at bits [i * bits, (i + 1) * bits), packed into
 * uint32 words LSB first), M.scales and M.biases (F16/BF16/F32, [rows, cols / group]). The bits
 * and group of M come from config.json's "quantization" object (or "quantization_config"):
 * {"group_size": G, "bits": B, "mode": "affine", "<module path>": {"group_size": .., "bits": ..}
 * | false, ...}; a per-module entry overrides the defaults, `false` = that module is not quantized.
 * The value of element i: w = scale[i / G] * (float)q_i + bias[i / G], in f32 (a rounded multiply,
 * then a rounded add; no FMA). */
#ifndef TQ_IO_MLX_H
#define TQ_IO_MLX_H

#include "core/core.h"

typedef struct tq_mlx_quant tq_mlx_quant;

/* tq_mlx_quant_read() -- the "quantization" object of config.json at config_path; *out = NULL
 * (TQ_OK) when the file has none. Bad entries (bits not 2/3/4/5/6/8, group not 32/64/128, a mode
 * other than "affine", a value that is not an object or false) give TQ_E_FORMAT /
 * TQ_E_UNSUPPORTED naming the file and the key. */
tq_status tq_mlx_quant_read(const char *config_path, tq_mlx_quant **out);
void tq_mlx_quant_free(tq_mlx_quant *q);
/* tq_mlx_quant_lookup() -- bits and group of module `module` (a weight name without
 * ".weight"); returns 0 if config.json marks the module `false` (not quantized), else 1. */
int tq_mlx_quant_lookup(const tq_mlx_quant *q, const char *module, int *bits, int *group);
/* tq_mlx_quant_default() -- the top-level bits and group. */
void tq_mlx_quant_default(const tq_mlx_quant *q, int *bits, int *group);

/* tq_mlx_affine_ok() -- 1 for bits 2 3 4 5 6 8 and group 32 64 128. */
int tq_mlx_affine_ok(int bits, int group);

/* tq_mlx_dequant_row() -- one row of cols values (cols % group == 0) from its packed codes
 * (cols * bits / 8 bytes, little-endian uint32 words), its cols / group scales and biases of
 * safetensors dtype sdtype (TQ_ST_F16, TQ_ST_BF16, TQ_ST_F32; little-endian bytes), into out. */
void tq_mlx_dequant_row(const uint8_t *codes, const uint8_t *scales, const uint8_t *biases,
                        int sdtype, int64_t cols, int bits, int group, float *out);

/* tq_json_parse_file() (config.c) -- read and parse the JSON file at path into *out (the caller
 * json_object_put()s it); messages name the file and say what is wrong. */
struct json_object;
tq_status tq_json_parse_file(const char *path, struct json_object **out);

#endif /* TQ_IO_MLX_H */
