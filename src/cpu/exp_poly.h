/* exp_poly.h -- the constants of the vector e^x of the fused turbo attention (internal).
 * The AVX2 and AVX-512 kernels must give the same doubles (the fused == reference contract is
 * tested per ISA), so both read their reduction and polynomial from here:
 * e^x = 2^n e^r, n = rint(x log2 e), r = x - n ln2_hi - n ln2_lo (Cody-Waite: ln2_hi has 32
 * trailing zero bits, so n ln2_hi is exact), e^r by its Taylor polynomial of degree 12. */
#ifndef TQ_EXP_POLY_H
#define TQ_EXP_POLY_H

#define TQ_EXP_MIN_X (-708.0) /* below: ~1e-308, the weight of such a key is 0 in float */
#define TQ_EXP_LOG2E 1.4426950408889634
#define TQ_EXP_LN2_HI 6.93147180369123816490e-01
#define TQ_EXP_LN2_LO 1.90821492927058770002e-10
#define TQ_EXP_DEGREE 12

/* 1/k! for k = 0..12 */
static const double tq_exp_taylor[TQ_EXP_DEGREE + 1] = {
    1.0,        1.0,          1.0 / 2,        1.0 / 6,         1.0 / 24,
    1.0 / 120,  1.0 / 720,    1.0 / 5040,     1.0 / 40320,     1.0 / 362880,
    1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600};

#endif /* TQ_EXP_POLY_H */
