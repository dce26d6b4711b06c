/* act.h -- the gated activations of the feed-forward block (internal):
 *
 *   h[i] := act(h[i]) * up[i]        act = GELU (tanh form) or SiLU, over n floats
 *
 * Both are written as x * sigmoid(-u), i.e. x / (1 + e^u), with
 *   GELU: u = x * (C1 + C2 * x^2)    C1 = -2 sqrt(2/pi), C2 = C1 * 0.044715
 *         (0.5 x (1 + tanh(z)) = x / (1 + e^(-2z)), z = sqrt(2/pi) (x + 0.044715 x^3))
 *   SiLU: u = -x
 * and one float e^u of our own (below), so the scalar reference and every vector kernel perform
 * the same IEEE operations in the same order and give the same bits (tests/test_act.c, tolerance
 * 0, finite data); the error against float64 GELU/SiLU is a few ulp of the result (bound tested
 * there). The specification, per element, all in float, no contraction (-ffp-contract=off):
 *   t = x * x;  u = GELU ? x * fmaf(t, C2, C1) : -x;  u = min(max(u, -86), 89)
 *   n = (u * log2(e) + 1.5 * 2^23) - 1.5 * 2^23         (round to nearest, exact integer)
 *   r = fmaf(n, -LN2_HI, u);  r = fmaf(n, -LN2_LO, r)   (|r| <= ~0.35)
 *   p = P7; p = fmaf(p, r, P_k) for k = 6..0            (Taylor, P_k = 1/k!, in float)
 *   e = (p * 2^(n-1)) * 2  (2^(n-1) from its exponent bits; n in [-124, 128]: e overflows to
 *                           inf for u > ~88.72, as e^u does)
 *   h = (x / (1 + e)) * up
 * Clamping u keeps 2^(n-1) a normal float: below -86, 1 + e rounds to 1 (act = x); at 89,
 * e = inf and act = -0 or +0 (x / inf). A NaN input gives a NaN (payload unspecified). */
#ifndef TQ_ACT_H
#define TQ_ACT_H

#include <stddef.h>

#include "turboquant.h"

typedef void (*tq_act_glu_fn)(float *h, const float *up, size_t n, int gelu);

/* the scalar reference (the specification above) */
void tq_act_glu_ref(float *h, const float *up, size_t n, int gelu);
/* the vector kernels (only call them where tq_cpu_supports() says so) */
void tq_act_glu_avx2(float *h, const float *up, size_t n, int gelu);
void tq_act_glu_avx512(float *h, const float *up, size_t n, int gelu);

/* tq_act_glu_kernel() -- the kernel of the highest level <= isa this CPU runs. */
tq_act_glu_fn tq_act_glu_kernel(tq_isa isa);
/* tq_act_glu() -- h[i] := act(h[i]) * up[i] with the kernel of tq_cpu_isa(). */
void tq_act_glu(float *h, const float *up, size_t n, int gelu);

/* the constants every kernel shares */
#define TQ_ACT_C1 (-1.5957691216057308f)            /* -2 sqrt(2/pi)                  */
#define TQ_ACT_C2 (-1.5957691216057308f * 0.044715f) /* C1 * 0.044715 (float product) */
#define TQ_ACT_UMIN (-86.0f)
#define TQ_ACT_UMAX 89.0f
#define TQ_ACT_LOG2E 1.44269504088896341f
#define TQ_ACT_ROUND 12582912.0f /* 1.5 * 2^23 */
#define TQ_ACT_LN2_HI 0.693359375f   /* 9 significant bits: n * LN2_HI is exact */
#define TQ_ACT_LN2_LO (-2.12194440e-4f)
#define TQ_ACT_P7 (1.0f / 5040.0f)
#define TQ_ACT_P6 (1.0f / 720.0f)
#define TQ_ACT_P5 (1.0f / 120.0f)
#define TQ_ACT_P4 (1.0f / 24.0f)
#define TQ_ACT_P3 (1.0f / 6.0f)
#define TQ_ACT_P2 0.5f
#define TQ_ACT_P1 1.0f
#define TQ_ACT_P0 1.0f

#endif /* TQ_ACT_H */
