/* matvec_avx512bf16.c -- bf16 weights times bf16-rounded activations with AVX-512 BF16
 * (vdpbf16ps: 32 bf16 products per instruction, accumulated in f32 pairs). The activation is
 * rounded to bf16 once per product (tq_mm_round_x into xb), which is an extra error of about
 * 2^-9 relative per element against the f32 kernels; that is why tq_mm_select() takes it only
 * when asked (TQ_MATVEC=avx512bf16). Micro-kernels as in matvec_avx2.c. See matvec.h. */
#include <immintrin.h>

#include "core/half.h"
#include "cpu/matvec.h"

#define LDB(p) ((__m512bh)_mm512_loadu_si512((const void *)(p)))
#define BF(u) tq_bits_f32((uint32_t)(u) << 16)

static void mm_bf16(const void *w, int64_t k, const float *x, const uint16_t *xb, int64_t ldx,
                    int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    const uint16_t *W = w;
    const int64_t k32 = k & ~(int64_t)31;
    const int64_t n4 = n & ~(int64_t)3;
    for (int64_t rb = r0; rb < r1 && n4; rb += 32)
    for (int64_t t = 0; t < n4; t += 4) {
        const uint16_t *x0 = xb + t * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;
        const int64_t re = rb + 32 < r1 ? rb + 32 : r1;
        int64_t r = rb;
        for (; r + 4 <= re; r += 4) { /* 4 rows x 4 tokens: 16 accumulators in registers */
            const uint16_t *w0 = W + r * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
            __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00;
            __m512 c10 = c00, c11 = c00, c12 = c00, c13 = c00;
            __m512 c20 = c00, c21 = c00, c22 = c00, c23 = c00;
            __m512 c30 = c00, c31 = c00, c32 = c00, c33 = c00;
            for (int64_t j = 0; j < k32; j += 32) {
                const __m512bh v0 = LDB(x0 + j), v1 = LDB(x1 + j), v2 = LDB(x2 + j);
                const __m512bh v3 = LDB(x3 + j);
                const __m512bh u0 = LDB(w0 + j);
                c00 = _mm512_dpbf16_ps(c00, u0, v0);
                c01 = _mm512_dpbf16_ps(c01, u0, v1);
                c02 = _mm512_dpbf16_ps(c02, u0, v2);
                c03 = _mm512_dpbf16_ps(c03, u0, v3);
                const __m512bh u1 = LDB(w1 + j);
                c10 = _mm512_dpbf16_ps(c10, u1, v0);
                c11 = _mm512_dpbf16_ps(c11, u1, v1);
                c12 = _mm512_dpbf16_ps(c12, u1, v2);
                c13 = _mm512_dpbf16_ps(c13, u1, v3);
                const __m512bh u2 = LDB(w2 + j);
                c20 = _mm512_dpbf16_ps(c20, u2, v0);
                c21 = _mm512_dpbf16_ps(c21, u2, v1);
                c22 = _mm512_dpbf16_ps(c22, u2, v2);
                c23 = _mm512_dpbf16_ps(c23, u2, v3);
                const __m512bh u3 = LDB(w3 + j);
                c30 = _mm512_dpbf16_ps(c30, u3, v0);
                c31 = _mm512_dpbf16_ps(c31, u3, v1);
                c32 = _mm512_dpbf16_ps(c32, u3, v2);
                c33 = _mm512_dpbf16_ps(c33, u3, v3);
            }
            const __m512 cc[16] = {c00, c01, c02, c03, c10, c11, c12, c13,
                                   c20, c21, c22, c23, c30, c31, c32, c33};
            const uint16_t *wa[4] = {w0, w1, w2, w3};
            const uint16_t *xs[4] = {x0, x1, x2, x3};
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++) {
                    float sv = _mm512_reduce_add_ps(cc[a * 4 + b]);
                    for (int64_t j = k32; j < k; j++)
                        sv += BF(wa[a][j]) * BF(xs[b][j]);
                    y[(t + b) * ldy + r + a] = sv;
                }
        }
        for (; r < re; r++) {
            const uint16_t *wr = W + r * k;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int64_t j = 0; j < k32; j += 32) {
                const __m512bh wv = LDB(wr + j);
                a0 = _mm512_dpbf16_ps(a0, wv, LDB(x0 + j));
                a1 = _mm512_dpbf16_ps(a1, wv, LDB(x1 + j));
                a2 = _mm512_dpbf16_ps(a2, wv, LDB(x2 + j));
                a3 = _mm512_dpbf16_ps(a3, wv, LDB(x3 + j));
            }
            float s0 = _mm512_reduce_add_ps(a0), s1 = _mm512_reduce_add_ps(a1);
            float s2 = _mm512_reduce_add_ps(a2), s3 = _mm512_reduce_add_ps(a3);
            for (int64_t j = k32; j < k; j++) {
                const float wj = BF(wr[j]);
                s0 += wj * BF(x0[j]);
                s1 += wj * BF(x1[j]);
                s2 += wj * BF(x2[j]);
                s3 += wj * BF(x3[j]);
            }
            y[t * ldy + r] = s0;
            y[(t + 1) * ldy + r] = s1;
            y[(t + 2) * ldy + r] = s2;
            y[(t + 3) * ldy + r] = s3;
        }
    }
    for (int64_t t = n4; t < n; t++) {
        const uint16_t *xt = xb + t * ldx;
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) {
            const uint16_t *w0 = W + r * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int64_t j = 0; j < k32; j += 32) {
                const __m512bh xv = LDB(xt + j);
                for (int a = 4; a < 8; a++) /* next 4 rows, same column (see matvec_avx512.c) */
                    _mm_prefetch((const char *)(w0 + j + a * k), _MM_HINT_T0);
                a0 = _mm512_dpbf16_ps(a0, LDB(w0 + j), xv);
                a1 = _mm512_dpbf16_ps(a1, LDB(w1 + j), xv);
                a2 = _mm512_dpbf16_ps(a2, LDB(w2 + j), xv);
                a3 = _mm512_dpbf16_ps(a3, LDB(w3 + j), xv);
            }
            float s0 = _mm512_reduce_add_ps(a0), s1 = _mm512_reduce_add_ps(a1);
            float s2 = _mm512_reduce_add_ps(a2), s3 = _mm512_reduce_add_ps(a3);
            for (int64_t j = k32; j < k; j++) {
                const float xj = BF(xt[j]);
                s0 += BF(w0[j]) * xj;
                s1 += BF(w1[j]) * xj;
                s2 += BF(w2[j]) * xj;
                s3 += BF(w3[j]) * xj;
            }
            y[t * ldy + r] = s0;
            y[t * ldy + r + 1] = s1;
            y[t * ldy + r + 2] = s2;
            y[t * ldy + r + 3] = s3;
        }
        for (; r < r1; r++) {
            const uint16_t *wr = W + r * k;
            __m512 a0 = _mm512_setzero_ps();
            for (int64_t j = 0; j < k32; j += 32)
                a0 = _mm512_dpbf16_ps(a0, LDB(wr + j), LDB(xt + j));
            float s0 = _mm512_reduce_add_ps(a0);
            for (int64_t j = k32; j < k; j++)
                s0 += BF(wr[j]) * BF(xt[j]);
            y[t * ldy + r] = s0;
        }
    }
}

static const tq_mm_kernels table = {
    .name = "avx512bf16",
    .mm = {[TQ_DTYPE_BF16] = mm_bf16},
    .needs_xb = 1,
    .batch_invariant = 1,
};

const tq_mm_kernels *tq_mm_avx512bf16(void)
{
    return &table;
}
