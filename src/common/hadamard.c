/* hadamard.c -- Walsh-Hadamard transform for n = K * 2^m: the power-of-two butterflies on every
 * contiguous chunk of M = 2^m, then the K x K base matrix across the chunks (H_K (x) H_M), then
 * one scale. Matrix, table, provenance and the exact operation order: hadamard.h. Plain C, no
 * intrinsics, no allocation; -ffp-contract=off like the rest of the library. The float and
 * double versions are one template (HAD_DEFINE) so their operation order cannot drift apart. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "common/hadamard.h"
#include "core/core.h"

#define HAD_COLS 8 /* columns gathered per pass of the K-step (a stack block of 8 * K) */

static int is_pow2(int64_t v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

const tq_hadamard_base *tq_hadamard_base_of(int64_t n)
{
    if (n < 1 || n > TQ_HADAMARD_MAX_N)
        return NULL;
    for (int i = tq_hadamard_n_bases - 1; i >= 0; i--) {
        const int64_t k = tq_hadamard_bases[i].k;
        if (n % k == 0 && is_pow2(n / k))
            return &tq_hadamard_bases[i];
    }
    return NULL;
}

int tq_hadamard_supported(int64_t n)
{
    return tq_hadamard_base_of(n) != NULL;
}

float tq_hadamard_scale(int64_t n)
{
    return n < 1 ? 0.0f : (float)(1.0 / sqrt((double)n));
}

static tq_status bad_n(int64_t n)
{
    char ks[256]; /* the orders of the table, "1, 12, 20, ..." */
    size_t len = 0;
    ks[0] = 0;
    for (int i = 0; i < tq_hadamard_n_bases && len + 8 < sizeof(ks); i++)
        len += (size_t)snprintf(ks + len, sizeof(ks) - len, "%s%d", i ? ", " : "",
                                tq_hadamard_bases[i].k);
    return TQ_FAIL(TQ_E_ARG,
                   "hadamard: n = %lld is not supported: n must be K * 2^m, 1 <= n <= 2^40, with "
                   "K in {%s} (src/common/hadamard.h), e.g. 576 = 36 * 16 or 640 = 40 * 16",
                   (long long)n, ks);
}

/* HAD_DEFINE(T, SUF): butterflies, K-step (row r uses sgn[t] = H_K[r][t], or H_K[t][r] for the
 * inverse), signs and the whole transform, for element type T. */
#define HAD_DEFINE(T, SUF)                                                                         \
    void tq_hadamard_butterflies##SUF(T *x, int64_t n)                                             \
    {                                                                                              \
        for (int64_t h = 1; h < n; h <<= 1)                                                        \
            for (int64_t blk = 0; blk < n; blk += 2 * h)                                           \
                for (int64_t i = blk; i < blk + h; i++) {                                          \
                    const T a = x[i], b = x[i + h];                                                \
                    x[i] = a + b;                                                                  \
                    x[i + h] = a - b;                                                              \
                }                                                                                  \
    }                                                                                              \
                                                                                                   \
    static void kstep##SUF(T *x, int64_t m, const tq_hadamard_base *b, int transpose)              \
    {                                                                                              \
        const int k = b->k;                                                                        \
        T in[TQ_HADAMARD_MAX_K * HAD_COLS]; /* in[t * w + c] = X[t][i0 + c] */                     \
        T sgn[TQ_HADAMARD_MAX_K];                                                                  \
        for (int64_t i0 = 0; i0 < m; i0 += HAD_COLS) {                                             \
            const int w = m - i0 < HAD_COLS ? (int)(m - i0) : HAD_COLS;                            \
            for (int t = 0; t < k; t++)                                                            \
                for (int c = 0; c < w; c++)                                                        \
                    in[t * w + c] = x[t * m + i0 + c];                                             \
            for (int r = 0; r < k; r++) {                                                          \
                T acc[HAD_COLS];                                                                   \
                for (int t = 0; t < k; t++)                                                        \
                    sgn[t] = (T)(transpose ? tq_hadamard_entry(b, t, r)                            \
                                           : tq_hadamard_entry(b, r, t));                          \
                for (int c = 0; c < w; c++)                                                        \
                    acc[c] = sgn[0] * in[c];                                                       \
                for (int t = 1; t < k; t++)                                                        \
                    for (int c = 0; c < w; c++)                                                    \
                        acc[c] = acc[c] + sgn[t] * in[t * w + c];                                  \
                for (int c = 0; c < w; c++)                                                        \
                    x[r * m + i0 + c] = acc[c];                                                    \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void apply_signs##SUF(T *x, int64_t n, const int8_t *s)                                 \
    {                                                                                              \
        for (int64_t i = 0; i < n; i++)                                                            \
            x[i] = x[i] * (T)s[i]; /* not -x: a NaN keeps its sign, as in kv_ref.c */              \
    }                                                                                              \
                                                                                                   \
    static void transform##SUF(T *x, int64_t n, const tq_hadamard_base *b, const int8_t *s,        \
                               unsigned flags, T scale)                                            \
    {                                                                                              \
        const int inverse = (flags & TQ_HADAMARD_INVERSE) != 0;                                    \
        const int64_t m = n / b->k;                                                                \
        if (s && !inverse)                                                                         \
            apply_signs##SUF(x, n, s);                                                             \
        for (int64_t c = 0; c < n; c += m)                                                         \
            tq_hadamard_butterflies##SUF(x + c, m);                                                \
        if (b->k > 1)                                                                              \
            kstep##SUF(x, m, b, inverse);                                                          \
        if (flags & TQ_HADAMARD_NORMALIZE)                                                         \
            for (int64_t i = 0; i < n; i++)                                                        \
                x[i] = x[i] * scale;                                                               \
        if (s && inverse)                                                                          \
            apply_signs##SUF(x, n, s);                                                             \
    }

HAD_DEFINE(float, )
HAD_DEFINE(double, _f64)

tq_status tq_hadamard_apply(float *x, int64_t n, const int8_t *signs, unsigned flags)
{
    const tq_hadamard_base *b = tq_hadamard_base_of(n);
    if (!x)
        return TQ_FAIL(TQ_E_ARG, "hadamard: x is NULL");
    if (!b)
        return bad_n(n);
    transform(x, n, b, signs, flags, tq_hadamard_scale(n));
    return TQ_OK;
}

tq_status tq_hadamard_apply_f64(double *x, int64_t n, const int8_t *signs, unsigned flags)
{
    const tq_hadamard_base *b = tq_hadamard_base_of(n);
    if (!x)
        return TQ_FAIL(TQ_E_ARG, "hadamard: x is NULL");
    if (!b)
        return bad_n(n);
    const double scale = (flags & TQ_HADAMARD_SCALE_F32) ? (double)tq_hadamard_scale(n)
                                                         : 1.0 / sqrt((double)n);
    transform_f64(x, n, b, signs, flags, scale);
    return TQ_OK;
}
