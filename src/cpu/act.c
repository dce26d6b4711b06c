/* act.c -- the scalar reference of act.h and the dispatch. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/act.h"

static inline float act1(float x, int gelu)
{
    const float t = x * x;
    float u = gelu ? x * fmaf(t, TQ_ACT_C2, TQ_ACT_C1) : -x;
    u = u >= TQ_ACT_UMIN ? u : TQ_ACT_UMIN; /* NaN -> UMIN, as vmaxps(u, UMIN) */
    u = u <= TQ_ACT_UMAX ? u : TQ_ACT_UMAX;
    const float n = (u * TQ_ACT_LOG2E + TQ_ACT_ROUND) - TQ_ACT_ROUND;
    float r = fmaf(n, -TQ_ACT_LN2_HI, u);
    r = fmaf(n, -TQ_ACT_LN2_LO, r);
    float p = TQ_ACT_P7;
    p = fmaf(p, r, TQ_ACT_P6);
    p = fmaf(p, r, TQ_ACT_P5);
    p = fmaf(p, r, TQ_ACT_P4);
    p = fmaf(p, r, TQ_ACT_P3);
    p = fmaf(p, r, TQ_ACT_P2);
    p = fmaf(p, r, TQ_ACT_P1);
    p = fmaf(p, r, TQ_ACT_P0);
    const uint32_t bits = (uint32_t)((int32_t)n + 126) << 23;
    float s;
    memcpy(&s, &bits, sizeof(s));
    const float e = (p * s) * 2.0f;
    return x / (1.0f + e);
}

void tq_act_glu_ref(float *h, const float *up, size_t n, int gelu)
{
    for (size_t i = 0; i < n; i++)
        h[i] = act1(h[i], gelu) * up[i];
}

tq_act_glu_fn tq_act_glu_kernel(tq_isa isa)
{
    if (isa >= TQ_ISA_AVX512 && tq_cpu_supports(TQ_ISA_AVX512))
        return tq_act_glu_avx512;
    if (isa >= TQ_ISA_AVX2 && tq_cpu_supports(TQ_ISA_AVX2))
        return tq_act_glu_avx2;
    return tq_act_glu_ref;
}

void tq_act_glu(float *h, const float *up, size_t n, int gelu)
{
    tq_act_glu_kernel(tq_cpu_isa())(h, up, n, gelu);
}
