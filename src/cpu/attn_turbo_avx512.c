/* attn_turbo_avx512.c -- AVX-512 kernels of the fused TurboQuant attention (attn_turbo.c has
 * the scalar spec): the score dot product (float), the V-row decode to the rotated domain, and
 * the block update (online softmax and value accumulation in double). head_dim is a multiple of
 * 32, so no tails beyond 16. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "cpu/exp_poly.h"
#include "common/kv_codec.h"
#include "cpu/attn_turbo.h"

static float dot512(const float *a, const float *b, int n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* V row -> rotated domain. 8 indices of b bits fill exactly b bytes; two such chunks give 16
 * lanes: broadcast each chunk as a u64, shift lane k right by k*b, mask, narrow to 32 bits, then
 * look the centroid up with a permute (b <= 4: 16-entry table; b = 5: two tables; b = 8:
 * gather). Same values as tq_attn_dec_v_rot_scalar (C[idx] * scale, one float rounding,
 * widened to double). */
static void dec_v_rot512(const uint8_t *row, int d, int vb, double *out)
{
    const float *C = tq_kv_centroids(vb);
    const size_t packed = tq_kv_packed_bytes(d, vb), rb = tq_kv_turbo_v_row_bytes(d, vb);
    const uint8_t *sc = row + packed;
    /* masked loads: no read past a 4- or 8-entry codebook */
    const __m512 t0 = _mm512_maskz_loadu_ps(vb >= 4 ? 0xffff : (__mmask16)((1u << (1u << vb)) - 1u), C);
    const __m512 t1 = vb == 5 ? _mm512_loadu_ps(C + 16) : t0;
    const __m512i shifts = _mm512_set_epi64(7 * vb, 6 * vb, 5 * vb, 4 * vb, 3 * vb, 2 * vb, vb, 0);
    const __m512i mask = _mm512_set1_epi64((1ll << vb) - 1);
    for (int g = 0; g < d / TQ_KV_GROUP; g++) {
        const __m512 s = _mm512_set1_ps(tq_f16_to_f32(tq_rd16(sc + 2 * g)));
        for (int h = 0; h < 2; h++) {
            __m512i idx;
            if (vb == 8) {
                idx = _mm512_cvtepu8_epi32(
                    _mm_loadu_si128((const __m128i *)(const void *)(row + g * 32 + h * 16)));
            } else {
                const size_t o = (size_t)g * 4 * vb + (size_t)h * 2 * vb;
                uint64_t u0, u1 = 0;
                memcpy(&u0, row + o, 8); /* o + 8 <= rb: at least one more chunk or the scales */
                if (o + vb + 8 <= rb)
                    memcpy(&u1, row + o + vb, 8);
                else
                    for (int b = 0; b < vb; b++)
                        u1 |= (uint64_t)row[o + vb + b] << (8 * b);
                const __m256i a = _mm512_cvtepi64_epi32(
                    _mm512_and_si512(_mm512_srlv_epi64(_mm512_set1_epi64((long long)u0), shifts), mask));
                const __m256i b = _mm512_cvtepi64_epi32(
                    _mm512_and_si512(_mm512_srlv_epi64(_mm512_set1_epi64((long long)u1), shifts), mask));
                idx = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
            }
            __m512 c;
            if (vb <= 4)
                c = _mm512_permutexvar_ps(idx, t0);
            else if (vb == 5)
                c = _mm512_permutex2var_ps(t0, idx, t1);
            else
                c = _mm512_i32gather_ps(idx, C, 4);
            const __m512 y = _mm512_mul_ps(c, s); /* the float product, then widened */
            _mm512_storeu_pd(out + g * 32 + h * 16, _mm512_cvtps_pd(_mm512_castps512_ps256(y)));
            _mm512_storeu_pd(out + g * 32 + h * 16 + 8, _mm512_cvtps_pd(_mm512_extractf32x8_ps(y, 1)));
        }
    }
}

/* e^x for x <= 0 (a score minus the running max), 8 double lanes: 2^n e^r with n = rint(x
 * log2 e), r = x - n ln2 (Cody-Waite: ln2_hi has 32 trailing zero bits, so n ln2_hi is exact),
 * |r| <= ln2 / 2, e^r by its Taylor polynomial of degree 12 (truncation < 2e-16) in Horner
 * form with FMAs: relative error a few 1e-16 (libm's exp is the reference's; the two agree far
 * below float resolution). x <= -708 gives ~1e-308 (the weight of such a key is 0 in float). */
static inline __m512d exp_pd512(__m512d x)
{
    x = _mm512_max_pd(x, _mm512_set1_pd(TQ_EXP_MIN_X));
    const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(TQ_EXP_LOG2E)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(TQ_EXP_LN2_HI), x);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(TQ_EXP_LN2_LO), r);
    const double *c = tq_exp_taylor;
    __m512d p = _mm512_set1_pd(c[TQ_EXP_DEGREE]);
    for (int k = TQ_EXP_DEGREE - 1; k >= 0; k--)
        p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c[k]));
    return _mm512_scalef_pd(p, n);
}

/* one head x one key block (nv <= 32, hd a multiple of 64): float scores, max, then in double:
 * rescale, weights, values accumulated 64 dims at a time (8 independent FMA chains) with the
 * accumulator in registers */
static void block512(const float *q, const float *K, const double *V, int nv, int hd, float scale,
                     double *S, float *sc, double *p)
{
    for (int k = 0; k < nv; k++)
        sc[k] = scale * dot512(q, K + (size_t)k * hd, hd);
    for (int k = nv; k < 32; k++)
        sc[k] = -INFINITY;
    const __m512 s0 = _mm512_loadu_ps(sc), s1 = _mm512_loadu_ps(sc + 16);
    const float bm = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1));
    const double mn = bm > S[0] ? bm : S[0];
    double *acc = S + 2;
    if (mn > S[0] && S[1] != 0.0) {
        const double corr = exp(S[0] - mn);
        S[1] *= corr;
        const __m512d vc = _mm512_set1_pd(corr);
        for (int d = 0; d < hd; d += 8)
            _mm512_storeu_pd(acc + d, _mm512_mul_pd(vc, _mm512_loadu_pd(acc + d)));
    }
    S[0] = mn;
    const __m512d vm = _mm512_set1_pd(mn);
    __m512d ls = _mm512_setzero_pd();
    for (int k = 0; k < 32; k += 8) {
        const __m512d pk = exp_pd512(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(sc + k)), vm));
        _mm512_storeu_pd(p + k, pk);
        const int live = nv - k < 0 ? 0 : nv - k > 8 ? 8 : nv - k;
        ls = _mm512_add_pd(ls, _mm512_maskz_mov_pd((__mmask8)((1u << live) - 1u), pk));
    }
    S[1] += _mm512_reduce_add_pd(ls);
    for (int c = 0; c < hd; c += 64) {
        __m512d a[8];
        for (int u = 0; u < 8; u++)
            a[u] = _mm512_loadu_pd(acc + c + 8 * u);
        for (int k = 0; k < nv; k++) {
            const __m512d w = _mm512_set1_pd(p[k]);
            const double *v = V + (size_t)k * hd + c;
            for (int u = 0; u < 8; u++)
                a[u] = _mm512_fmadd_pd(w, _mm512_loadu_pd(v + 8 * u), a[u]);
        }
        for (int u = 0; u < 8; u++)
            _mm512_storeu_pd(acc + c + 8 * u, a[u]);
    }
}

const tq_attn_kernels tq_attn_kernels_avx512 = {dot512, dec_v_rot512, block512, NULL};
