/* test_kv_data.h -- awkward fp32 rows for the KV codec tests (seeded, deterministic). */
#ifndef TQ_TEST_KV_DATA_H
#define TQ_TEST_KV_DATA_H
#include <math.h>
#include <stdint.h>

#include "core/rng.h"

/* kv_fill_group() -- fill n values of one group with pattern `kind` (0..KV_KINDS-1). */
enum { KV_KINDS = 16 };
static inline void kv_fill_group(tq_rng *r, float *x, int n, int kind)
{
    const float sc = powf(10.0f, (float)((int)(tq_rng_u64(r) % 13) - 6));
    for (int j = 0; j < n; j++) {
        float v = tq_rng_normal(r);
        switch (kind) {
        case 0: break;                                  /* gaussian                     */
        case 1: v *= sc; break;                         /* gaussian, 1e-6 .. 1e6        */
        case 2: v = 0.0f; break;                        /* all zero                     */
        case 3: v = 0.5f; break;                        /* constant (the NaN defect)    */
        case 4: v = (j & 1) ? -0.0f : 0.0f; break;      /* signed zeros                 */
        case 5: v *= 1e-40f; break;                     /* subnormal                    */
        case 6: v *= 1e30f; break;                      /* huge                         */
        case 7: v = j == 3 ? NAN : v; break;            /* one NaN                      */
        case 8: v = j == 5 ? INFINITY : v; break;       /* +inf                         */
        case 9: v = j == 7 ? -INFINITY : v; break;      /* -inf                         */
        case 10: v = 3.0f + v * 1e-4f; break;           /* near constant, offset        */
        case 11: v = (float)((int)(tq_rng_u64(r) % 9) - 4) * 0.25f; break; /* ties/grid */
        case 12: v = j == 0 ? 1000.0f : v * 0.01f; break; /* outlier                     */
        case 13: v = v * 1e-30f; break;                 /* tiny                         */
        case 14: v = tq_bits_f32((uint32_t)tq_rng_u64(r)); break; /* random bit patterns */
        default: v = v + 3.0f; break;                   /* offset gaussian              */
        }
        x[j] = v;
    }
}

/* kv_fill_rows() -- n_rows rows of d: mostly gaussian rows, every 3rd row mixes group kinds. */
static inline void kv_fill_rows(tq_rng *r, float *x, int64_t n_rows, int d)
{
    for (int64_t i = 0; i < n_rows; i++)
        for (int g = 0; g < d / 32; g++) {
            int kind = (i % 3 == 2) ? (int)(tq_rng_u64(r) % KV_KINDS) : (i % 3 == 1 ? 1 : 0);
            kv_fill_group(r, x + i * d + g * 32, 32, kind);
        }
}
#endif
