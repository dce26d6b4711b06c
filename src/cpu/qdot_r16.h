/* qdot_r16.h -- the "r16" load-time layout of Q4_0 / Q4_1 / Q8_0 matrices and its decode kernel
 * (issue 14: decode from interleaved rows, internal to src/cpu/; docs/FORMAT.md "r16").
 *
 * Layout (in memory only, never on disk). A matrix whose rows are a multiple of 16 is cut into
 * groups of 16 consecutive rows; group G keeps exactly the bytes of its 16 file rows
 * [16 G row_bytes, 16 (G + 1) row_bytes), rearranged into two parts (docs/FORMAT.md "The r16
 * layout"): first the quant dwords of every block b (in block order, 16 Q bytes per block at
 * offset 16 Q b; Q = 16 for Q4_0/Q4_1, 32 for Q8_0): dword i (file quant bytes 4i .. 4i+3 of the
 * block) of the 16 rows, row order (64 bytes per i); Q8_0's quant bytes stored XOR 0x80 (w + 128,
 * unsigned), Q4_0/Q4_1 unchanged; then the f16 fields of every block (16 H bytes per block at
 * nb 16 Q + 16 H b, H = 2, Q4_1 4): the 16 rows' d (row order), Q4_1 then the 16 rows' m.
 * So one 64-byte load is 16 rows x 4 consecutive file bytes -- the operand of one vpdpbusd with
 * the token's 4 activation bytes broadcast: P_b of 16 rows in the int32 lanes, no add tree, and
 * one cvt + mul + fma per block for 16 rows (Q4_0/Q4_1: low nibbles of dword i = elements
 * 4i .. 4i+3, high nibbles = 16 + 4i .. 16 + 4i + 3). The result is qdot.h's q8 path bit for bit
 * (P_b exact in int32: unsigned w (Q4_0 nibble, Q8_0 w + 128) times a, started at -8 sum(a) /
 * -128 sum(a)).
 *
 * Every other reader of such a matrix sees the file bytes through tq_r16_unpack() (qmatmul.c's
 * unpacked view for prefill tiles and AMX, the embedding row, the GPU upload).
 */
#ifndef TQ_CPU_QDOT_R16_H
#define TQ_CPU_QDOT_R16_H

#include <stddef.h>
#include <stdint.h>

#include "common/formats.h"

#define TQ_R16 16
/* the largest 16-row group the unpacked view takes on the stack (qmatmul.c): a wider matrix
 * keeps the file layout */
#define TQ_R16_MAX_GROUP 65536

/* tq_r16_format() -- 1 if format id has the r16 layout (Q4_0, Q4_1, Q8_0). */
int tq_r16_format(int id);
/* tq_r16_pack() / tq_r16_unpack() -- one group: 16 file rows of nb blocks (row_bytes = nb *
 * block_bytes apart, at src) <-> the group's r16 bytes (dst, 16 row_bytes). src != dst. */
void tq_r16_pack(int id, const uint8_t *src, int64_t nb, uint8_t *dst);
void tq_r16_unpack(int id, const uint8_t *src, int64_t nb, uint8_t *dst);
void tq_r16_unpack_avx512(int id, const uint8_t *src, int64_t nb, uint8_t *dst); /* no CPU check */
/* tq_r16_unpack_row() -- row r (0..15) of the group at g (nb blocks) in the file layout. */
void tq_r16_unpack_row(int id, const uint8_t *g, int64_t nb, int r, uint8_t *dst);

/* tq_r16_mv() -- the decode kernel of format id over r16 weights (a tq_qmv_q8_fn over tq_q8a
 * activations: r0, r1 multiples of 16, any n; qdot.h's q8 bits), NULL when this CPU (or
 * TQ_CPU) has no AVX512-VNNI or the format no r16 layout. */
tq_qmv_q8_fn tq_r16_mv(int id);
tq_qmv_q8_fn tq_r16_mv_avx512(int id); /* the table itself, no CPU check (qdot_r16.c) */

#endif /* TQ_CPU_QDOT_R16_H */
