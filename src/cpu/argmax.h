/* argmax.h -- the greedy pick of the sampler (internal; issue 15: 8 streams x 49k logits per
 * decode step). The specification, over n floats:
 *
 *   v_i = NaN ? -inf : (+inf ? FLT_MAX : x_i);  result = the FIRST i with v_i = max_j v_j, or
 *   -1 when every v_i is -inf (all NaN or -inf; n = 0 too).
 *
 * Every kernel returns the scalar reference's index (tests/test_sample.c). */
#ifndef TQ_ARGMAX_H
#define TQ_ARGMAX_H

#include <stdint.h>

#include "turboquant.h"

typedef int64_t (*tq_argmax_fn)(const float *x, int64_t n);

int64_t tq_argmax_ref(const float *x, int64_t n);
/* only where tq_cpu_supports(TQ_ISA_AVX2) */
int64_t tq_argmax_avx2(const float *x, int64_t n);
/* tq_argmax_kernel() -- the kernel of the highest level <= isa this CPU runs. */
tq_argmax_fn tq_argmax_kernel(tq_isa isa);
/* tq_argmax() -- with the kernel of tq_cpu_isa(). */
int64_t tq_argmax(const float *x, int64_t n);

#endif /* TQ_ARGMAX_H */
