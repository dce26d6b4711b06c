/* qdot_iq4nl.c -- the scalar specification of qdot_iq4nl.h and the table lookup. No
 * intrinsics; the library builds with -ffp-contract=off, so only the explicit fmaf() fuses. */
#include <math.h>

#include "core/half.h"
#include "cpu/qdot.h"
#include "cpu/qdot_iq4nl.h"

/* the weight integers of one block in element order, and its scale */
static inline float unpack(const uint8_t *b, int8_t *wq)
{
    for (int j = 0; j < 16; j++) {
        wq[j] = tq_iq4nl_values[b[2 + j] & 0x0f];
        wq[j + 16] = tq_iq4nl_values[b[2 + j] >> 4];
    }
    return tq_f16_to_f32(tq_rd16(b));
}

static float dot_q8(const void *w, const void *act, int64_t k)
{
    const tq_q8a *a = act;
    const uint8_t *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < k / TQ_QK; i++, b += 18) {
        int8_t wq[32];
        const float d = unpack(b, wq);
        int32_t p = 0;
        for (int j = 0; j < 32; j++)
            p += (int32_t)wq[j] * (int32_t)a[i].qs[j];
        acc = fmaf((float)p, d * a[i].d, acc);
    }
    return acc + 0.0f; /* qdot.h: result = acc + accm, accm = 0 */
}

static float dot_f32(const void *w, const float *x, int64_t k)
{
    const uint8_t *b = w;
    float acc[32] = {0};
    for (int64_t i = 0; i < k / TQ_QK; i++, b += 18, x += TQ_QK) {
        int8_t wq[32];
        const float d = unpack(b, wq);
        for (int j = 0; j < 32; j++)
            acc[j] = fmaf(d * (float)wq[j], x[j], acc[j]); /* the dequantizer's d * value */
    }
    float v[8];
    for (int l = 0; l < 8; l++)
        v[l] = (acc[l] + acc[8 + l]) + (acc[16 + l] + acc[24 + l]);
    return tq_qdot_h8(v);
}

static void mv_q8(const void *w, size_t row_bytes, int64_t k, const void *act, int64_t n,
                  float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    const size_t ab = (size_t)(k / TQ_QK) * sizeof(tq_q8a);
    for (int64_t r = r0; r < r1; r++)
        for (int64_t t = 0; t < n; t++)
            y[t * ldy + r] = dot_q8((const uint8_t *)w + (size_t)r * row_bytes,
                                    (const uint8_t *)act + (size_t)t * ab, k);
}

static void mv_f32(const void *w, size_t row_bytes, int64_t k, const float *x, int64_t ldx,
                   int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++)
        for (int64_t t = 0; t < n; t++)
            y[t * ldy + r] = dot_f32((const uint8_t *)w + (size_t)r * row_bytes, x + t * ldx, k);
}

static const tq_iq4nl_kernels scalar_table = {"scalar", TQ_ISA_SCALAR, dot_q8, dot_f32, mv_q8,
                                              mv_f32, NULL};

const tq_iq4nl_kernels *tq_iq4nl_scalar(void)
{
    return &scalar_table;
}

int tq_iq4nl_all(const tq_iq4nl_kernels **out, int cap)
{
    int n = 0;
    if (n < cap)
        out[n++] = &scalar_table;
    if (n < cap && tq_qdot_avx2()) /* the same CPU checks as qdot.h's tables */
        out[n++] = tq_iq4nl_avx2_table();
    if (n < cap && tq_qdot_avx512())
        out[n++] = tq_iq4nl_avx512_table();
    return n;
}

void tq_iq4nl_register(tq_isa isa, int id, tq_format_kernels *k)
{
    if (id != TQ_FMT_IQ4_NL)
        return;
    const tq_qdot_kernels *q[4];
    const int nq = tq_qdot_all(q, 4);
    for (int i = 0; i < nq; i++)
        if (q[i]->level <= isa)
            k->quant_act = q[i]->quant_q8a;
    const tq_iq4nl_kernels *t[3];
    const int nt = tq_iq4nl_all(t, 3);
    for (int i = 0; i < nt; i++) {
        if (t[i]->level > isa)
            continue;
        k->dot_q8 = t[i]->dot_q8;
        k->mv_q8 = t[i]->mv_q8;
        k->gemm_q8 = t[i]->gemm_q8;
        k->isa_q8 = t[i]->isa;
        k->dot_f32 = t[i]->dot_f32;
        k->mv_f32 = t[i]->mv_f32;
        k->isa_f32 = t[i]->isa;
    }
}
