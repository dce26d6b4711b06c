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

#endif /* TQ_KV_SIMD_COMMON_H */
