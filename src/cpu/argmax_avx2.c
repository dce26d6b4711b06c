/* argmax_avx2.c -- argmax.h with 8 floats per step: pass 1 the maximum of the mapped values
 * (NaN -> -inf by a blend, +inf -> FLT_MAX by a min), pass 2 the first index equal to it (from
 * the start, stopping at the first hit: the row is in cache after pass 1). */
#include <float.h>
#include <immintrin.h>
#include <math.h>

#include "cpu/argmax.h"

static inline __m256 map8(__m256 v)
{
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    v = _mm256_min_ps(v, _mm256_set1_ps(FLT_MAX)); /* +inf -> FLT_MAX (NaN stays: 2nd operand) */
    return _mm256_blendv_ps(v, _mm256_set1_ps(-INFINITY), nan);
}

int64_t tq_argmax_avx2(const float *x, int64_t n)
{
    const int64_t n8 = n & ~(int64_t)7;
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    int64_t i = 0;
    for (; i + 16 <= n8; i += 16) {
        m0 = _mm256_max_ps(m0, map8(_mm256_loadu_ps(x + i)));
        m1 = _mm256_max_ps(m1, map8(_mm256_loadu_ps(x + i + 8)));
    }
    if (i < n8)
        m0 = _mm256_max_ps(m0, map8(_mm256_loadu_ps(x + i)));
    m0 = _mm256_max_ps(m0, m1);
    float lanes[8];
    _mm256_storeu_ps(lanes, m0);
    float best = -INFINITY;
    for (int l = 0; l < 8; l++)
        best = lanes[l] > best ? lanes[l] : best;
    for (i = n8; i < n; i++) {
        float v = x[i];
        v = isnan(v) ? -INFINITY : v == INFINITY ? FLT_MAX : v;
        best = v > best ? v : best;
    }
    if (best == -INFINITY)
        return -1;
    const __m256 b = _mm256_set1_ps(best);
    for (i = 0; i < n8; i += 8) {
        /* min(FLT_MAX, x): a NaN x stays NaN (the 2nd operand) and equals nothing */
        const __m256 v = _mm256_min_ps(_mm256_set1_ps(FLT_MAX), _mm256_loadu_ps(x + i));
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(v, b, _CMP_EQ_OQ));
        if (hit)
            return i + __builtin_ctz((unsigned)hit);
    }
    for (; i < n; i++)
        if ((x[i] == INFINITY ? FLT_MAX : x[i]) == best)
            return i;
    return -1; /* not reached */
}
