/* kv_cpu.h -- per-ISA tables of KV codec row kernels (STYLE 3.6). Each ISA file fills one table;
 * every kernel writes exactly the bytes of the scalar reference in src/kv/kv_ref.c. A NULL entry
 * means "use the scalar kernel". Inputs are fp32 rows, n rows of d elements back to back. */
#ifndef TQ_KV_CPU_H
#define TQ_KV_CPU_H

#include <stdint.h>

#include "turboquant.h"

typedef struct tq_kv_kernels {
    tq_isa isa;
    /* turbo keys: kb in {2,4,5,8}, 8 = signed int8 */
    void (*enc_k)(const float *x, int64_t n, int d, int kb, uint8_t *dst);
    void (*dec_k)(const uint8_t *src, int64_t n, int d, int kb, float *out);
    /* turbo values: vb in {2,3,4,5,8}, d in {64,128,256,512} */
    void (*enc_v)(const float *x, int64_t n, int d, int vb, uint8_t *dst);
    void (*dec_v)(const uint8_t *src, int64_t n, int d, int vb, float *out);
    /* kv8 / kv4 baselines, group 64 */
    void (*enc_affine)(const float *x, int64_t n, int d, int bits, uint8_t *dst);
    void (*dec_affine)(const uint8_t *src, int64_t n, int d, int bits, float *out);
    /* plain f16 rows (n elements) */
    void (*enc_f16)(const float *x, int64_t n, uint8_t *dst);
    void (*dec_f16)(const uint8_t *src, int64_t n, float *out);
    /* plain bf16 rows (n elements) */
    void (*enc_bf16)(const float *x, int64_t n, uint8_t *dst);
    void (*dec_bf16)(const uint8_t *src, int64_t n, float *out);
} tq_kv_kernels;

extern const tq_kv_kernels tq_kv_kernels_scalar;

/* kv_pack32()/kv_unpack32() -- 32 indices (each < 2^bits, bits in 2..8) to/from 4*bits bytes of
 * the flat little-endian bitstream, 8 indices (= bits bytes) at a time. Same bytes as
 * tq_kv_pack_bits(). */
static inline void kv_pack32(const uint8_t *idx, int bits, uint8_t *dst)
{
    for (int c = 0; c < 4; c++) {
        uint64_t acc = 0;
        for (int k = 0; k < 8; k++)
            acc |= (uint64_t)idx[8 * c + k] << (k * bits);
        for (int b = 0; b < bits; b++)
            dst[c * bits + b] = (uint8_t)(acc >> (8 * b));
    }
}
static inline void kv_unpack32(const uint8_t *src, int bits, uint8_t *idx)
{
    const uint64_t mask = (1u << bits) - 1u;
    for (int c = 0; c < 4; c++) {
        uint64_t acc = 0;
        for (int b = 0; b < bits; b++)
            acc |= (uint64_t)src[c * bits + b] << (8 * b);
        for (int k = 0; k < 8; k++)
            idx[8 * c + k] = (uint8_t)((acc >> (k * bits)) & mask);
    }
}
#if defined(__x86_64__)
extern const tq_kv_kernels tq_kv_kernels_avx2;
extern const tq_kv_kernels tq_kv_kernels_avx512;
#endif

/* tq_kv_kernels_get() -- the table of that ISA, or NULL if it is not built in or this CPU
 * cannot run it. */
const tq_kv_kernels *tq_kv_kernels_get(tq_isa isa);

#endif /* TQ_KV_CPU_H */
