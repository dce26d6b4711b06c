/* matvec_attn_avx512.c -- AVX-512 body of the engine's f32 attention over a window of f32 K/V
 * rows (src/model/kvcache.c holds the portable version and chooses). One query row:
 *     out = softmax(scale * q K^T) V      over n_keys rows of K and V (row stride hd)
 * q.k: 16-lane FMA chain over head_dim then a fixed-order reduction; softmax with the max
 * subtracted and scalar expf in key order; V accumulated with 16-lane FMAs, divided by the sum
 * at the end. head_dim must be a multiple of 16 (the caller checks). Deterministic: the same
 * operations in the same order for any thread split. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/matvec.h"

void tq_attn_row_avx512(const float *q, const float *K, const float *V, int64_t n_keys, int hd,
                        float scale, float *sc, float *out)
{
    float mx = -INFINITY;
    if (hd == 64) {
        const __m512 q0 = _mm512_loadu_ps(q), q1 = _mm512_loadu_ps(q + 16);
        const __m512 q2 = _mm512_loadu_ps(q + 32), q3 = _mm512_loadu_ps(q + 48);
        for (int64_t t = 0; t < n_keys; t++) {
            const float *k = K + t * 64;
            __m512 a = _mm512_mul_ps(q0, _mm512_loadu_ps(k));
            __m512 b = _mm512_mul_ps(q1, _mm512_loadu_ps(k + 16));
            a = _mm512_fmadd_ps(q2, _mm512_loadu_ps(k + 32), a);
            b = _mm512_fmadd_ps(q3, _mm512_loadu_ps(k + 48), b);
            sc[t] = scale * _mm512_reduce_add_ps(_mm512_add_ps(a, b));
            mx = sc[t] > mx ? sc[t] : mx;
        }
    } else {
        for (int64_t t = 0; t < n_keys; t++) {
            const float *k = K + t * hd;
            __m512 a = _mm512_setzero_ps();
            for (int d = 0; d < hd; d += 16)
                a = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), _mm512_loadu_ps(k + d), a);
            sc[t] = scale * _mm512_reduce_add_ps(a);
            mx = sc[t] > mx ? sc[t] : mx;
        }
    }
    float sum = 0.0f;
    for (int64_t t = 0; t < n_keys; t++) {
        sc[t] = expf(sc[t] - mx);
        sum += sc[t];
    }
    const float inv = 1.0f / sum;
    for (int d = 0; d < hd; d += 64) {
        /* up to 4 accumulators (64 floats) per pass over the keys */
        const int w = hd - d < 64 ? hd - d : 64;
        __m512 o0 = _mm512_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
        for (int64_t t = 0; t < n_keys; t++) {
            const __m512 p = _mm512_set1_ps(sc[t]);
            const float *v = V + t * hd + d;
            o0 = _mm512_fmadd_ps(p, _mm512_loadu_ps(v), o0);
            if (w > 16)
                o1 = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 16), o1);
            if (w > 32)
                o2 = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 32), o2);
            if (w > 48)
                o3 = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 48), o3);
        }
        const __m512 iv = _mm512_set1_ps(inv);
        _mm512_storeu_ps(out + d, _mm512_mul_ps(o0, iv));
        if (w > 16)
            _mm512_storeu_ps(out + d + 16, _mm512_mul_ps(o1, iv));
        if (w > 32)
            _mm512_storeu_ps(out + d + 32, _mm512_mul_ps(o2, iv));
        if (w > 48)
            _mm512_storeu_ps(out + d + 48, _mm512_mul_ps(o3, iv));
    }
}
