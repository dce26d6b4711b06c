/* kv_cpu.h -- per-ISA tables of KV codec row kernels (STYLE 3.6). Each ISA file fills one table;
 * every kernel writes exactly the bytes of the scalar reference in src/common/kv_ref.c. A NULL entry
 * means "use the scalar kernel". Inputs are fp32 rows, n rows of d elements back to back. */
#ifndef TQ_KV_CPU_H
#define TQ_KV_CPU_H

#include <stdint.h>
#include <string.h>

#include "turboquant.h"

/* an lm<L>g<G> block code of the rot: schemes (src/kv/kv_rot.c describes the block and its
 * encoder; tq_kv_lm_encode_block_ref() is the specification) as plain data for the kernels:
 * L sorted grid floats, the L-1 boundaries, G elements per block, pb = bits of L*L - 1, and the
 * number of scale refits of the encoder. */
typedef struct tq_kv_lm_desc {
    int levels, group, pair_bits, refits;
    const float *grid, *bnd;
} tq_kv_lm_desc;

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
    /* rot: schemes. fwht(): tq_kv_fwht_butterflies() (unscaled; n a power of two >= 16), the
     * same float operations per element. enc_lm(): n blocks of c (block i: x + i * group
     * floats -> dst + i * block bytes), the bytes of tq_kv_lm_encode_block_ref(): every
     * element-wise step in vector lanes, each refit sum kept sequential in element order. */
    void (*fwht)(float *u, int n);
    void (*enc_lm)(const tq_kv_lm_desc *c, const float *x, int n, uint8_t *dst);
} tq_kv_kernels;

extern const tq_kv_kernels tq_kv_kernels_scalar;

/* kv_pack32()/kv_unpack32() -- 32 indices (each < 2^bits, bits in 2..8) to/from 4*bits bytes of
 * the flat little-endian bitstream, 8 indices (= bits bytes) at a time. Same bytes as
 * tq_kv_pack_bits(). */
static inline void kv_pack32(const uint8_t *idx, int bits, uint8_t *dst)
{
    for (int c = 0; c < 4; c++) {
        uint64_t w;
        memcpy(&w, idx + 8 * c, 8); /* byte k = index k (little-endian host) */
        /* fold byte pairs, then 16-bit pairs, then 32-bit halves: index k lands at bit k*bits */
        w = (w & 0x00FF00FF00FF00FFull) | ((w & 0xFF00FF00FF00FF00ull) >> (8 - bits));
        w = (w & 0x0000FFFF0000FFFFull) | ((w & 0xFFFF0000FFFF0000ull) >> (16 - 2 * bits));
        w = (w & 0xFFFFFFFFull) | ((w >> 32) << (4 * bits));
        for (int b = 0; b < bits; b++)
            dst[c * bits + b] = (uint8_t)(w >> (8 * b));
    }
}
/* kv_rd_le() -- n (1..8) bytes at p as a little-endian integer, with constant-size loads for
 * the widths the codec uses (no library memcpy call in the hot loop, no read past p + n). */
static inline uint64_t kv_rd_le(const uint8_t *p, int n)
{
    uint16_t a;
    uint32_t b;
    uint64_t c;
    switch (n) {
    case 2: memcpy(&a, p, 2); return a;
    case 3: memcpy(&a, p, 2); return a | (uint64_t)p[2] << 16;
    case 4: memcpy(&b, p, 4); return b;
    case 5: memcpy(&b, p, 4); return b | (uint64_t)p[4] << 32;
    case 8: memcpy(&c, p, 8); return c;
    default:
        c = 0;
        for (int i = 0; i < n; i++)
            c |= (uint64_t)p[i] << (8 * i);
        return c;
    }
}
/* kv_wr_le() -- the low n (1..8) bytes of v to p, little-endian, constant-size stores. */
static inline void kv_wr_le(uint8_t *p, uint64_t v, int n)
{
    uint16_t a;
    uint32_t b;
    switch (n) {
    case 2: a = (uint16_t)v; memcpy(p, &a, 2); return;
    case 3: a = (uint16_t)v; memcpy(p, &a, 2); p[2] = (uint8_t)(v >> 16); return;
    case 4: b = (uint32_t)v; memcpy(p, &b, 4); return;
    case 5: b = (uint32_t)v; memcpy(p, &b, 4); p[4] = (uint8_t)(v >> 32); return;
    case 8: memcpy(p, &v, 8); return;
    default:
        for (int i = 0; i < n; i++)
            p[i] = (uint8_t)(v >> (8 * i));
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
