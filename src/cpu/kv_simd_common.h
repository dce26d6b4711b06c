/* kv_simd_common.h -- plain-C helpers shared by the ISA files of the KV codec (each ISA file
 * includes it, so it is compiled with that file's flags). Internal to src/cpu/. */
#ifndef TQ_KV_SIMD_COMMON_H
#define TQ_KV_SIMD_COMMON_H

#include "common/kv_codec.h"

/* ss[g] = ((0 + sq[32g]) + sq[32g+1]) + ... + sq[32g+31]: the reference's sequential order per
 * group; eight (four, two) groups' chains run side by side in registers. ng is even. */
static inline void group_sumsq(const float *sq, int ng, float *ss)
{
    int g = 0;
    for (; g + 8 <= ng; g += 8) {
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f,
              a7 = 0.0f;
        const float *p = sq + g * TQ_KV_GROUP;
        for (int k = 0; k < TQ_KV_GROUP; k++) {
            a0 = a0 + p[k];
            a1 = a1 + p[TQ_KV_GROUP + k];
            a2 = a2 + p[2 * TQ_KV_GROUP + k];
            a3 = a3 + p[3 * TQ_KV_GROUP + k];
            a4 = a4 + p[4 * TQ_KV_GROUP + k];
            a5 = a5 + p[5 * TQ_KV_GROUP + k];
            a6 = a6 + p[6 * TQ_KV_GROUP + k];
            a7 = a7 + p[7 * TQ_KV_GROUP + k];
        }
        ss[g] = a0;
        ss[g + 1] = a1;
        ss[g + 2] = a2;
        ss[g + 3] = a3;
        ss[g + 4] = a4;
        ss[g + 5] = a5;
        ss[g + 6] = a6;
        ss[g + 7] = a7;
    }
    for (; g + 4 <= ng; g += 4) {
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        const float *p = sq + g * TQ_KV_GROUP;
        for (int k = 0; k < TQ_KV_GROUP; k++) {
            a0 = a0 + p[k];
            a1 = a1 + p[TQ_KV_GROUP + k];
            a2 = a2 + p[2 * TQ_KV_GROUP + k];
            a3 = a3 + p[3 * TQ_KV_GROUP + k];
        }
        ss[g] = a0;
        ss[g + 1] = a1;
        ss[g + 2] = a2;
        ss[g + 3] = a3;
    }
    for (; g < ng; g += 2) {
        float a0 = 0.0f, a1 = 0.0f;
        const float *p = sq + g * TQ_KV_GROUP;
        for (int k = 0; k < TQ_KV_GROUP; k++) {
            a0 = a0 + p[k];
            a1 = a1 + p[TQ_KV_GROUP + k];
        }
        ss[g] = a0;
        ss[g + 1] = a1;
    }
}

/* ---- lm<L>g<G> blocks (rot: schemes): the plain-C steps of the vector encoders ------------ */

/* the refit's two sums in the reference's order: num = ((0 + pn[0]) + pn[1]) + ...,
 * den likewise over pd (the products were rounded one by one, as the reference does) */
static inline void lm_refit_sums(const float *pn, const float *pd, int G, float *num, float *den)
{
    float a = 0.0f, b = 0.0f;
    for (int j = 0; j < G; j++) {
        a = a + pn[j];
        b = b + pd[j];
    }
    *num = a;
    *den = b;
}

/* the block's bytes: fp16 scale sh, then pair p = idx[2p] + L * idx[2p + 1] in pb bits each,
 * LSB-first stream (exactly G/2 * pb / 8 bytes: G/2 is a multiple of 8) */
static inline void lm_pack(const uint8_t *idx, const tq_kv_lm_desc *c, uint16_t sh, uint8_t *b)
{
    const int pb = c->pair_bits;
    const unsigned L = (unsigned)c->levels;
    b[0] = (uint8_t)sh;
    b[1] = (uint8_t)(sh >> 8);
    uint8_t *o = b + 2;
    uint64_t acc = 0;
    int nb = 0;
    for (int p = 0; p < c->group / 2; p++) {
        acc |= (uint64_t)(idx[2 * p] + L * idx[2 * p + 1]) << nb;
        nb += pb;
        while (nb >= 8) {
            *o++ = (uint8_t)acc;
            acc >>= 8;
            nb -= 8;
        }
    }
}

#endif /* TQ_KV_SIMD_COMMON_H */
