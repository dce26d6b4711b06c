/* mlx.c -- config.json's MLX "quantization" object and the scalar dequantization of one MLX affine
 * row (mlx.h; docs/FORMAT.md "MLX affine"). */
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "core/half.h"
#include "io/io_internal.h"
#include "io/mlx.h"

typedef struct mlx_over {
    char *module; /* "model.layers.0.mlp.down_proj"          */
    int quantized;/* 0: config.json says false               */
    int bits, group;
} mlx_over;

struct tq_mlx_quant {
    int bits, group;
    int n_over;
    mlx_over *over;
};

int tq_mlx_affine_ok(int bits, int group)
{
    return (bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8) &&
           (group == 32 || group == 64 || group == 128);
}

void tq_mlx_quant_free(tq_mlx_quant *q)
{
    if (!q)
        return;
    for (int i = 0; i < q->n_over; i++)
        tq_free(q->over[i].module);
    tq_free(q->over);
    tq_free(q);
}

/* bits and group of one object ({"group_size", "bits", "mode"}), defaults from def_* */
static tq_status parse_bg(json_object *o, const char *path, const char *key, int def_bits,
                          int def_group, int *bits, int *group)
{
    json_object *x;
    *bits = def_bits;
    *group = def_group;
    if (json_object_object_get_ex(o, "mode", &x) && x &&
        strcmp(json_object_get_string(x), "affine"))
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: \"%s\": quantization mode \"%s\" is not supported "
                       "(only \"affine\", mlx-lm's default)", path, key,
                       json_object_get_string(x));
    if (json_object_object_get_ex(o, "bits", &x) && x) {
        if (!json_object_is_type(x, json_type_int))
            return TQ_FAIL(TQ_E_FORMAT, "%s: \"%s\": bits = %s is not an integer", path, key,
                           json_object_get_string(x));
        *bits = (int)json_object_get_int64(x);
    }
    if (json_object_object_get_ex(o, "group_size", &x) && x) {
        if (!json_object_is_type(x, json_type_int))
            return TQ_FAIL(TQ_E_FORMAT, "%s: \"%s\": group_size = %s is not an integer", path,
                           key, json_object_get_string(x));
        *group = (int)json_object_get_int64(x);
    }
    if (!tq_mlx_affine_ok(*bits, *group))
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: \"%s\": bits %d, group_size %d: MLX affine weights "
                       "are read with bits 2 3 4 5 6 8 and group_size 32 64 128", path, key,
                       *bits, *group);
    return TQ_OK;
}

tq_status tq_mlx_quant_read(const char *config_path, tq_mlx_quant **out)
{
    json_object *root = NULL, *qo = NULL;
    tq_mlx_quant *q = NULL;
    const char *key = "quantization";
    tq_status st;
    *out = NULL;
    if ((st = tq_json_parse_file(config_path, &root)))
        return st;
    if (!json_object_is_type(root, json_type_object) ||
        (!json_object_object_get_ex(root, key, &qo) &&
         !json_object_object_get_ex(root, key = "quantization_config", &qo)) ||
        !qo) {
        json_object_put(root);
        return TQ_OK;
    }
    if (!json_object_is_type(qo, json_type_object)) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: \"%s\" is not an object", config_path, key);
        goto out;
    }
    if (!json_object_object_get_ex(qo, "bits", NULL) ||
        !json_object_object_get_ex(qo, "group_size", NULL) ||
        json_object_object_get_ex(qo, "quant_method", NULL)) {
        /* a Hugging Face quantization_config of another method (GPTQ, AWQ, fp8...), which
         * mlx-lm never writes: not ours; MLX-looking tensors are then refused by the reader */
        tq_log(TQ_LOG_INFO, "%s: \"%s\" is not MLX affine (no bits/group_size, or a "
               "quant_method); ignored", config_path, key);
        json_object_put(root);
        return TQ_OK;
    }
    if (!(q = tq_calloc(1, sizeof(*q))) ||
        !(q->over = tq_calloc((size_t)json_object_object_length(qo) + 1, sizeof(*q->over)))) {
        st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", config_path);
        goto out;
    }
    if ((st = parse_bg(qo, config_path, key, 0, 0, &q->bits, &q->group)))
        goto out;
    json_object_object_foreach(qo, k, v)
    {
        if (!strcmp(k, "bits") || !strcmp(k, "group_size") || !strcmp(k, "mode"))
            continue;
        mlx_over *o = &q->over[q->n_over];
        if (json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v)) {
            o->quantized = 0;
        } else if (json_object_is_type(v, json_type_object)) {
            o->quantized = 1;
            if ((st = parse_bg(v, config_path, k, q->bits, q->group, &o->bits, &o->group)))
                goto out;
        } else {
            continue; /* other top-level settings of the quantizer (e.g. "quant_method") */
        }
        if (!(o->module = tq_strdup(k))) {
            st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", config_path);
            goto out;
        }
        q->n_over++;
    }
    *out = q;
    q = NULL;
out:
    tq_mlx_quant_free(q);
    json_object_put(root);
    return st;
}

int tq_mlx_quant_lookup(const tq_mlx_quant *q, const char *module, int *bits, int *group)
{
    *bits = q->bits;
    *group = q->group;
    for (int i = 0; i < q->n_over; i++) {
        if (strcmp(q->over[i].module, module))
            continue;
        if (!q->over[i].quantized)
            return 0;
        *bits = q->over[i].bits;
        *group = q->over[i].group;
    }
    return 1;
}

void tq_mlx_quant_default(const tq_mlx_quant *q, int *bits, int *group)
{
    *bits = q->bits;
    *group = q->group;
}

static inline float scalar_at(const uint8_t *p, int sdtype, int64_t i)
{
    if (sdtype == TQ_ST_F32)
        return tq_bits_f32(tq_rd32(p + 4 * i));
    if (sdtype == TQ_ST_F16)
        return tq_f16_to_f32(tq_rd16(p + 2 * i));
    return tq_bf16_to_f32(tq_rd16(p + 2 * i));
}

void tq_mlx_dequant_row(const uint8_t *codes, const uint8_t *scales, const uint8_t *biases,
                        int sdtype, int64_t cols, int bits, int group, float *out)
{
    const uint32_t mask = (1u << bits) - 1u;
    const int64_t words = cols * bits / 32;
    for (int64_t g = 0; g < cols / group; g++) {
        const float s = scalar_at(scales, sdtype, g);
        const float b = scalar_at(biases, sdtype, g);
        for (int64_t i = g * group; i < (g + 1) * group; i++) {
            const uint64_t bit = (uint64_t)i * (uint64_t)bits;
            const int64_t wi = (int64_t)(bit / 32);
            uint64_t v = tq_rd32(codes + 4 * wi);
            if (wi + 1 < words)
                v |= (uint64_t)tq_rd32(codes + 4 * (wi + 1)) << 32;
            const uint32_t qv = (uint32_t)(v >> (bit % 32)) & mask;
            out[i] = s * (float)qv + b;
        }
    }
}
