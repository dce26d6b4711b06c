/* qdot_avx2.h -- the small AVX2 + F16C helpers shared by the qdot kernel files (qdot_avx2.c,
 * qdot_iq4nl_avx2.c and the VNNI files that include them); include it only from a file compiled
 * with those flags. Internal to src/cpu/. */
#ifndef TQ_CPU_QDOT_AVX2_H
#define TQ_CPU_QDOT_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* a little-endian fp16 at p as a float */
static inline float f16c(const uint8_t *p)
{
    return _cvtsh_ss((unsigned short)(p[0] | (p[1] << 8)));
}

/* H(v) of qdot.h: ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)). */
static inline float hsum8(__m256 v)
{
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(t);
}

#endif
