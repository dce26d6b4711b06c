/* attn_turbo_avx512.c -- AVX-512 dot/axpy/scal of the fused TurboQuant attention
 * (attn_turbo.c has the scalar spec). head_dim is a multiple of 32, so no tails beyond 16. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "kv/kv_internal.h"
#include "model/kvcache_turbo.h"

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

static void axpy512(float a, const float *x, float *y, int n)
{
    const __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

static void scal512(float a, float *y, int n)
{
    const __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(va, _mm512_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] *= a;
}

/* V row -> rotated domain. 8 indices of b bits fill exactly b bytes; two such chunks give 16
 * lanes: broadcast each chunk as a u64, shift lane k right by k*b, mask, narrow to 32 bits, then
 * look the centroid up with a permute (b <= 4: 16-entry table; b = 5: two tables; b = 8:
 * gather). Same floats as tq_attn_dec_v_rot_scalar (C[idx] * scale, one rounding). */
static void dec_v_rot512(const uint8_t *row, int d, int vb, float *out)
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
            _mm512_storeu_ps(out + g * 32 + h * 16, _mm512_mul_ps(c, s));
        }
    }
}

/* e^x for x <= 0 (scores minus their max), 16 lanes: 2^n * p(r), r = x - n ln2 (Cody-Waite
 * split), the Cephes expf polynomial; relative error ~2 ulp; x <= -87 gives ~1e-38. */
static inline __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* one head x one key block (nv <= 32, hd multiple of 32): scores, max, rescale, exp, then the
 * values accumulated 64 floats at a time with the accumulator held in registers */
static void block512(const float *q, const float *K, const float *V, int nv, int hd, float scale,
                     float *S, float *sc)
{
    for (int k = 0; k < nv; k++)
        sc[k] = scale * dot512(q, K + (size_t)k * hd, hd);
    for (int k = nv; k < 32; k++)
        sc[k] = -INFINITY;
    const __m512 s0 = _mm512_loadu_ps(sc), s1 = _mm512_loadu_ps(sc + 16);
    const float bm = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1));
    const float mn = bm > S[0] ? bm : S[0];
    if (mn > S[0] && S[1] != 0.0f) {
        const float corr = expf(S[0] - mn);
        S[1] *= corr;
        scal512(corr, S + 2, hd);
    }
    S[0] = mn;
    const __m512 vm = _mm512_set1_ps(mn);
    const __m512 p0 = exp512(_mm512_sub_ps(s0, vm)), p1 = exp512(_mm512_sub_ps(s1, vm));
    _mm512_storeu_ps(sc, p0);
    _mm512_storeu_ps(sc + 16, p1);
    float l = S[1];
    for (int k = 0; k < nv; k++)
        l += sc[k];
    S[1] = l;
    float *acc = S + 2;
    for (int c = 0; c < hd; c += 32) {
        __m512 a0 = _mm512_loadu_ps(acc + c), a1 = _mm512_loadu_ps(acc + c + 16);
        for (int k = 0; k < nv; k++) {
            const __m512 p = _mm512_set1_ps(sc[k]);
            const float *v = V + (size_t)k * hd + c;
            a0 = _mm512_fmadd_ps(p, _mm512_loadu_ps(v), a0);
            a1 = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 16), a1);
        }
        _mm512_storeu_ps(acc + c, a0);
        _mm512_storeu_ps(acc + c + 16, a1);
    }
}

const tq_attn_kernels tq_attn_kernels_avx512 = {dot512, axpy512, scal512, dec_v_rot512,
                                                block512};
