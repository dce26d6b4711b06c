/* act_avx2.c -- act.h's kernel, 8 floats at a time; the tail by the scalar reference (the same bits). */
#include <immintrin.h>

#include "cpu/act.h"

static inline __m256 act8(__m256 x, int gelu)
{
    __m256 u;
    if (gelu) {
        const __m256 t = _mm256_mul_ps(x, x);
        u = _mm256_mul_ps(x, _mm256_fmadd_ps(t, _mm256_set1_ps(TQ_ACT_C2),
                                             _mm256_set1_ps(TQ_ACT_C1)));
    } else {
        u = _mm256_sub_ps(_mm256_setzero_ps(), x);
    }
    u = _mm256_max_ps(u, _mm256_set1_ps(TQ_ACT_UMIN)); /* NaN -> UMIN */
    u = _mm256_min_ps(u, _mm256_set1_ps(TQ_ACT_UMAX));
    const __m256 rnd = _mm256_set1_ps(TQ_ACT_ROUND);
    const __m256 n =
        _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(u, _mm256_set1_ps(TQ_ACT_LOG2E)), rnd), rnd);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-TQ_ACT_LN2_HI), u);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-TQ_ACT_LN2_LO), r);
    __m256 p = _mm256_set1_ps(TQ_ACT_P7);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TQ_ACT_P6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TQ_ACT_P5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TQ_ACT_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TQ_ACT_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TQ_ACT_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TQ_ACT_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TQ_ACT_P0));
    const __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126)), 23);
    const __m256 e =
        _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), _mm256_set1_ps(2.0f));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

void tq_act_glu_avx2(float *h, const float *up, size_t n, int gelu)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(h + i, _mm256_mul_ps(act8(_mm256_loadu_ps(h + i), gelu),
                                              _mm256_loadu_ps(up + i)));
    if (i < n)
        tq_act_glu_ref(h + i, up + i, n - i, gelu);
}
