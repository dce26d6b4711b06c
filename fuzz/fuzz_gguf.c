/* fuzz_gguf.c -- libFuzzer target: GGUF header, metadata, tensor infos, model config and the
 * dequantization of small tensors, and tq_weights (HF names, q/k un-permutation) over the same
 * image, from arbitrary bytes. Any crash, leak or out-of-bounds read
 * (ASan) is a bug; a clean TQ_E_* status is the expected outcome for bad input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "turboquant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_gguf *g = NULL;
    tq_model_config cfg;
    if (tq_gguf_open_memory(data, size, "fuzz.gguf", &g) != TQ_OK)
        return 0;
    for (int64_t i = 0; i < tq_gguf_n_kv(g); i++) {
        const char *key = tq_gguf_kv_key(g, i);
        int64_t iv;
        uint32_t u;
        float f;
        int b, t;
        const char *s;
        size_t len;
        int64_t n;
        const void *p;
        tq_gguf_get_i64(g, key, &iv);
        tq_gguf_get_u32(g, key, &u);
        tq_gguf_get_f32(g, key, &f);
        tq_gguf_get_bool(g, key, &b);
        tq_gguf_get_str(g, key, &s, &len);
        if (tq_gguf_get_arr(g, key, &t, &n) == TQ_OK && n > 0) {
            tq_gguf_get_arr_str(g, key, n - 1, &s, &len);
            if (tq_gguf_get_arr_data(g, key, &t, &p, &n) == TQ_OK && n <= 4096) {
                float fb[4096];
                int32_t ib[4096];
                tq_gguf_get_arr_f32(g, key, fb, 4096);
                tq_gguf_get_arr_i32(g, key, ib, 4096);
            }
        }
    }
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        tq_gguf_tensor_info ti;
        if (tq_gguf_tensor(g, i, &ti) != TQ_OK || !tq_ggml_can_dequant(ti.type))
            continue;
        if (ti.n_elem > 0 && ti.n_elem <= 65536) {
            float *y = malloc((size_t)ti.n_elem * sizeof(float));
            if (y) {
                tq_ggml_dequant(ti.type, ti.data, ti.nbytes, y, ti.n_elem);
                tq_ggml_dequant_ref(ti.type, ti.data, ti.nbytes, y, ti.n_elem);
                free(y);
            }
        }
    }
    tq_model_config_from_gguf(g, &cfg);
    tq_gguf_free(g);

    /* the uniform source: name mapping, config checks, q/k un-permutation, f32 and bf16 output */
    tq_weights *w = NULL;
    if (tq_weights_open_gguf_memory(data, size, "fuzz.gguf", &w) != TQ_OK)
        return 0;
    for (int64_t i = 0; i < tq_weights_count(w); i++) {
        tq_weights_tensor t;
        if (tq_weights_tensor_at(w, i, &t) != TQ_OK || t.n_elem <= 0 || t.n_elem > 65536)
            continue;
        float *y = malloc((size_t)t.n_elem * sizeof(float));
        if (y) {
            tq_weights_read(w, t.name, TQ_DTYPE_F32, y, (size_t)t.n_elem * sizeof(float));
            tq_weights_read(w, t.name, TQ_DTYPE_BF16, y, (size_t)t.n_elem * sizeof(float));
            free(y);
        }
    }
    tq_weights_free(w);
    return 0;
}
