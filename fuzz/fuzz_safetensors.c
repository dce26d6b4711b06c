/* fuzz_safetensors.c -- libFuzzer target: a safetensors image (header JSON, offsets, dtypes),
 * then every tensor view and metadata entry. Bad input must end in a TQ_E_* status. */
#include <stdint.h>
#include <string.h>

#include "turboquant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_st *st = NULL;
    volatile uint8_t sink = 0;
    if (tq_st_open_memory(data, size, "fuzz.safetensors", &st) != TQ_OK)
        return 0;
    for (int64_t i = 0; i < tq_st_n_tensors(st); i++) {
        tq_st_tensor_info ti;
        if (tq_st_tensor(st, i, &ti) != TQ_OK)
            continue;
        if (ti.nbytes) /* first and last byte must be readable */
            sink ^= ((const uint8_t *)ti.data)[0] ^ ((const uint8_t *)ti.data)[ti.nbytes - 1];
        tq_st_find(st, ti.name);
    }
    for (int64_t i = 0; i < tq_st_n_metadata(st); i++) {
        const char *k, *v;
        if (tq_st_metadata_at(st, i, &k, &v) == TQ_OK)
            sink ^= (uint8_t)(strlen(k) + strlen(v));
    }
    (void)sink;
    tq_st_free(st);
    return 0;
}
