/* qdot_affine.h -- f32-activation products with MLX affine weights kept in their block format
 * (the MLX rows of the format table, common/formats.h; issue 14 item 1's MLX row).
 *
 * Specification (qdot_affine.c, the same as the DEQUANT path of cpu/qmatmul.c): for a row and a
 * token, w_e = the reference dequantizer's value of element e (scale * (float)q + bias, rounded
 * multiply then rounded add); acc[e % 32] = fmaf(w_e, x_e, acc[e % 32]) in element order;
 * v[l] = (acc[l] + acc[8 + l]) + (acc[16 + l] + acc[24 + l]);
 * result = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)). Every ISA gives the same bits
 * (finite data), for any n, r0/r1 and thread split (batch-invariant). */
#ifndef TQ_QDOT_AFFINE_H
#define TQ_QDOT_AFFINE_H

#include "common/formats.h"

#define TQ_MLX_N_FMT 18 /* (bits 2 3 4 5 6 8) x (group 32 64 128), ids TQ_FMT_MLX_AFFINE + i */

typedef struct tq_affine_kernels {
    const char *isa;
    tq_isa level;
    tq_qmv_f32_fn mv_f32[TQ_MLX_N_FMT]; /* index id - TQ_FMT_MLX_AFFINE */
} tq_affine_kernels;

/* TQ_AFFINE_TABLE(name, isa_string, level) -- in a kernel file that defines
 *   static void mv_f32(const void *w, size_t row_bytes, int64_t k, const float *x, int64_t ldx,
 *                      int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1, int bits,
 *                      int group);
 * defines one tq_qmv_f32_fn per (bits, group) with the two constants baked in, and the table
 * `static const tq_affine_kernels name` holding them. */
#define TQ_AFFINE_MV_(b, g)                                                                        \
    static void mv_f32_##b##_##g(const void *w, size_t rb, int64_t k, const float *x,             \
                                 int64_t ldx, int64_t n, float *y, int64_t ldy, int64_t r0,       \
                                 int64_t r1)                                                       \
    {                                                                                              \
        mv_f32(w, rb, k, x, ldx, n, y, ldy, r0, r1, b, g);                                         \
    }
#define TQ_AFFINE_MV_B_(b) TQ_AFFINE_MV_(b, 32) TQ_AFFINE_MV_(b, 64) TQ_AFFINE_MV_(b, 128)
#define TQ_AFFINE_SLOT_(b, g) [TQ_FMT_MLX_ID(b, g) - TQ_FMT_MLX_AFFINE] = mv_f32_##b##_##g,
#define TQ_AFFINE_SLOT_B_(b)                                                                       \
    TQ_AFFINE_SLOT_(b, 32) TQ_AFFINE_SLOT_(b, 64) TQ_AFFINE_SLOT_(b, 128)
#define TQ_AFFINE_TABLE(name, isa_string, isa_level)                                               \
    TQ_AFFINE_MV_B_(2)                                                                             \
    TQ_AFFINE_MV_B_(3)                                                                             \
    TQ_AFFINE_MV_B_(4)                                                                             \
    TQ_AFFINE_MV_B_(5)                                                                             \
    TQ_AFFINE_MV_B_(6)                                                                             \
    TQ_AFFINE_MV_B_(8)                                                                             \
    static const tq_affine_kernels name = {                                                        \
        .isa = isa_string,                                                                         \
        .level = isa_level,                                                                        \
        .mv_f32 = {TQ_AFFINE_SLOT_B_(2) TQ_AFFINE_SLOT_B_(3) TQ_AFFINE_SLOT_B_(4)                  \
                   TQ_AFFINE_SLOT_B_(5) TQ_AFFINE_SLOT_B_(6) TQ_AFFINE_SLOT_B_(8)},               \
    };

/* The tables; the SIMD ones are NULL when this CPU (or TQ_CPU) cannot run them. */
const tq_affine_kernels *tq_affine_scalar(void);
const tq_affine_kernels *tq_affine_avx2(void);
const tq_affine_kernels *tq_affine_avx512(void);
/* the tables themselves, without the CPU check (qdot_affine.c checks) */
const tq_affine_kernels *tq_affine_avx2_table(void);
const tq_affine_kernels *tq_affine_avx512_table(void);
/* tq_affine_all() -- every table this CPU can run, scalar first. Returns the count. */
int tq_affine_all(const tq_affine_kernels **out, int cap);
/* tq_affine_register() -- fill the f32 slots of k for format id (an MLX row) from the highest
 * table at or below isa (formats_cpu.c calls it for every MLX row). */
void tq_affine_register(tq_isa isa, int id, tq_format_kernels *k);

#endif /* TQ_QDOT_AFFINE_H */
