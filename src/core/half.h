/* half.h -- exact fp16/bf16 <-> fp32 conversions in portable C (round to nearest even,
 * overflow to inf, subnormals kept, NaN stays NaN). Shared by every module and by tests. */
#ifndef TQ_HALF_H
#define TQ_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t tq_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float tq_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fp32 -> IEEE binary16, round to nearest even. */
static inline uint16_t tq_f32_to_f16(float f)
{
    const uint32_t x = tq_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or NaN (NaN keeps its top payload bits, stays quiet) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x47800000u) /* >= 65536: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below 2^-14: fp16 subnormal or zero */
        const uint32_t e = ax >> 23;
        if (e < 102) /* < 2^-25: rounds to zero */
            return sign;
        const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e; /* 14..24 */
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((ax >> 23) - 112) << 10 | ((ax & 0x7fffffu) >> 13);
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1)))
        r++; /* may carry into the exponent, up to inf: correct */
    return (uint16_t)(sign | r);
}

/* IEEE binary16 -> fp32 (exact). */
static inline float tq_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f)
        return tq_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0)
            return tq_bits_f32(sign);
        /* subnormal: m * 2^-24 is exact in fp32 */
        float v = (float)m * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return tq_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

/* fp32 -> bfloat16, round to nearest even; NaN stays a quiet NaN. */
static inline uint16_t tq_f32_to_bf16(float f)
{
    const uint32_t x = tq_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float tq_bf16_to_f32(uint16_t b)
{
    return tq_bits_f32((uint32_t)b << 16);
}

#endif /* TQ_HALF_H */
