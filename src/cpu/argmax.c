/* argmax.c -- the scalar reference of argmax.h and the dispatch. */
#include <float.h>
#include <math.h>

#include "cpu/argmax.h"

int64_t tq_argmax_ref(const float *x, int64_t n)
{
    float best = -INFINITY;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        v = isnan(v) ? -INFINITY : v == INFINITY ? FLT_MAX : v;
        if (v > best) {
            best = v;
            at = i;
        }
    }
    return at;
}

tq_argmax_fn tq_argmax_kernel(tq_isa isa)
{
    if (isa >= TQ_ISA_AVX2 && tq_cpu_supports(TQ_ISA_AVX2))
        return tq_argmax_avx2;
    return tq_argmax_ref;
}

int64_t tq_argmax(const float *x, int64_t n)
{
    return tq_argmax_kernel(tq_cpu_isa())(x, n);
}
