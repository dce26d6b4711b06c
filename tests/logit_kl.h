/* logit_kl.h -- KL(softmax(p) || softmax(q)) of two logit rows in float64, for the tests that compare
 * an engine's logits with another's (test_native, test_mlx_lm, test_cuda_fwd, test_cuda_gen). A
 * measurement, not an oracle: each test states its own bound. */
#ifndef TQ_TEST_LOGIT_KL_H
#define TQ_TEST_LOGIT_KL_H

#include <math.h>

static inline double logit_kl(const float *p, const float *q, int n)
{
    double mp = -INFINITY, mq = -INFINITY, zp = 0, zq = 0, k = 0;
    for (int i = 0; i < n; i++) {
        mp = p[i] > mp ? p[i] : mp;
        mq = q[i] > mq ? q[i] : mq;
    }
    for (int i = 0; i < n; i++) {
        zp += exp((double)p[i] - mp);
        zq += exp((double)q[i] - mq);
    }
    const double lzp = log(zp), lzq = log(zq);
    for (int i = 0; i < n; i++) {
        const double lp = (double)p[i] - mp - lzp, lq = (double)q[i] - mq - lzq;
        k += exp(lp) * (lp - lq);
    }
    return k;
}

#endif /* TQ_TEST_LOGIT_KL_H */
