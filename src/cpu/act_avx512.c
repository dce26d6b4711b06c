/* act_avx512.c -- act.h's kernel, 16 floats at a time; the tail under a mask (same operations). */
#include <immintrin.h>

#include "cpu/act.h"

static inline __m512 act16(__m512 x, int gelu)
{
    __m512 u;
    if (gelu) {
        const __m512 t = _mm512_mul_ps(x, x);
        u = _mm512_mul_ps(x, _mm512_fmadd_ps(t, _mm512_set1_ps(TQ_ACT_C2),
                                             _mm512_set1_ps(TQ_ACT_C1)));
    } else {
        u = _mm512_sub_ps(_mm512_setzero_ps(), x);
    }
    u = _mm512_max_ps(u, _mm512_set1_ps(TQ_ACT_UMIN)); /* NaN -> UMIN */
    u = _mm512_min_ps(u, _mm512_set1_ps(TQ_ACT_UMAX));
    const __m512 rnd = _mm512_set1_ps(TQ_ACT_ROUND);
    const __m512 n =
        _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(u, _mm512_set1_ps(TQ_ACT_LOG2E)), rnd), rnd);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-TQ_ACT_LN2_HI), u);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-TQ_ACT_LN2_LO), r);
    __m512 p = _mm512_set1_ps(TQ_ACT_P7);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TQ_ACT_P6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TQ_ACT_P5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TQ_ACT_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TQ_ACT_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TQ_ACT_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TQ_ACT_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TQ_ACT_P0));
    const __m512i bits =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(126)), 23);
    const __m512 e =
        _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(bits)), _mm512_set1_ps(2.0f));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

void tq_act_glu_avx512(float *h, const float *up, size_t n, int gelu)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(h + i, _mm512_mul_ps(act16(_mm512_loadu_ps(h + i), gelu),
                                              _mm512_loadu_ps(up + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, h + i);
        _mm512_mask_storeu_ps(h + i, m, _mm512_mul_ps(act16(x, gelu), _mm512_maskz_loadu_ps(m, up + i)));
    }
}
