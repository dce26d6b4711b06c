/* qdot_amx.h -- AMX int8 tiles for the q8 path of the 32-element formats (issue 15).
 *
 * Formats: Q8_0, Q4_0, Q5_0, IQ4_NL (signed weight integers: TDPBSSD) and Q4_1, Q5_1 (unsigned
 * weight integers x signed activations: TDPBUSD). The result is qdot.h's q8 path, bit for bit:
 * per block b in order, P_b = the exact int32 sum of the block's 32 products (the tile's sum
 * over K = 32), acc = fmaf((float)P_b, d_w * d_a, acc), Q4_1/Q5_1 accm = accm + m_w * s_a,
 * result acc + accm -- the tile only produces P_b, the float part runs on AVX-512 per
 * (row, token) lane in the same order.
 *
 * Tile: 16 weight rows (A, 16 x 32 bytes: one block of each row, unpacked to int8 / uint8) times
 * up to 16 tokens (B, 8 x 4*16 bytes: the block's activations in the VNNI layout = qdot.h's
 * tq_q8p, packed once per call by qmatmul.c for gemm_q8, or on the stack per token group for
 * mv_q8), C = 16 x 16 int32. Two C tiles alternate, so the
 * tile product of block b+1 runs while the float part of block b does. A token group of <= 8
 * tokens (the batched decode step; the last group of a prefill) runs as row pairs: A = 16 x 64
 * bytes, tile row q = weight row q's block then weight row 16 + q's block; B = the block's
 * activations twice, block-diagonal (rows 0..7: tokens in columns 0..7, rows 8..15: in columns
 * 8..15), so C[q][t] = P_b(row q, t) and C[q][8 + t] = P_b(row 16 + q, t): one tile load pair,
 * dot product and C store per 32 rows and block instead of per 16 (K = 64; the tile op count
 * per block was the floor of the 8-column tile). For the nibble formats (Q4_0, Q4_1, IQ4_NL)
 * such a group swaps the roles instead: A = the tokens' activations of a block pair (tile row t:
 * block 2p, row 8 + t: block 2p + 1, block-diagonal in K = 64), B = 16 weight rows of both
 * blocks transposed to the VNNI layout in the unpack, C[t][c] = P(row c, token t): the float
 * part then has the 16 rows in the lanes (one cvt, mul, fma per token present and block, no
 * shuffles, no transpose) and costs in proportion to the tokens (2-4 token steps).
 *
 * Scope: gemm_q8 any n and k; mv_q8 k <= TQ_AMX_MAXK (the stack pack) and n >= TQ_AMX_MIN_N
 * (TQ_AMX_MIN_N_NIB for the nibble formats),
 * otherwise the AVX-512 VNNI kernel, so it takes any k and n too.
 *
 * Availability: tq_cpu_amx() (core/core.h: CPUID, XCR0, the Linux permission request, and the
 * caller's switch); tq_qdot_amx_register() installs the tiles only when it says yes. */
#ifndef TQ_QDOT_AMX_H
#define TQ_QDOT_AMX_H

#include "common/formats.h"

#define TQ_AMX_MAXK 2048
/* mv_q8 takes the tile from 3 tokens: at 2 the VNNI row kernel is faster (the tile's 8 columns
 * and float part cost the same for 2 tokens as for 8; 1536x576 Q4_1, 1 thread: 48 vs 73 us),
 * at 3 they are even in cache and AMX leads from DRAM, from 4 AMX leads */
#define TQ_AMX_MIN_N 3
/* the nibble formats (Q4_0, Q4_1, IQ4_NL: weights as B, the float part per token present) from 2:
 * 1536x576 x 2 tokens, 1 thread: Q4_0 36 vs 57 us, Q4_1 39 vs 45 */
#define TQ_AMX_MIN_N_NIB 2

/* tq_qdot_amx_built() -- 1 when this library was compiled with the AMX kernels. */
int tq_qdot_amx_built(void);

/* tq_qdot_amx_mv() -- the AMX matvec of format id (a tq_qmv_q8_fn over tq_q8a activations),
 * NULL when none or not built. Runs only where tq_cpu_amx() said yes (tests check it). */
tq_qmv_q8_fn tq_qdot_amx_mv(int id);
/* tq_qdot_amx_gemm() -- the same tile over qdot.h's packed tq_q8p groups (a gemm_q8 slot: any n,
 * any k), NULL when none. */
tq_qmv_q8_fn tq_qdot_amx_gemm(int id);

/* tq_qdot_amx_r16() -- the weights-as-B tile over r16 weights (cpu/qdot_r16.h: Q4_0, Q4_1, Q8_0;
 * a tq_qmv_q8_fn over tq_q8a activations, r0 and r1 multiples of 16, the r16 B rows read in
 * place, scales without a gather) for 1..8 tokens (more, or k above TQ_AMX_MAXK: the r16
 * AVX512-VNNI kernel); NULL when none or not built. Runs only where tq_cpu_amx() said yes.
 * qmatmul.c takes it for TQ_AMX_R16_MIN_N..8 tokens: its cost is flat in the tokens, the r16
 * VNNI kernel's one pass per token. 1536 x 576, 1 thread, best of 7 x 50 calls, loaded box, us,
 * r16 VNNI / AMX r16: Q4_1 n=1 8.0 / 21.1, n=2 16.1 / 22.1, n=3 24.4 / 23.8, n=4 30.1 / 21.8,
 * n=8 65.0 / 31.0; Q4_0 n=3 22.5 / 22.5, n=4 26.8 / 20.6, n=8 57.4 / 23.5; Q8_0 n=4 28.2 / 22.8,
 * n=8 55.0 / 25.2 (576 x 576 Q4_1: n=4 12.4 / 9.2, n=8 22.9 / 10.7). Against gemm's r16 kernel
 * of 4 tokens per pass (47e661a; quiet box, 20:56 UTC): Q4_1 n=4 17.1 / 21.5, n=6 27.5 / 28.3,
 * n=7 33.5 / 30.4, n=8 36.9 / 30.4; Q4_0 n=6 27.4 / 25.3, n=7 30.9 / 25.5, n=8 33.6 / 25.7;
 * 576 x 576 Q4_1 n=7 12.5 / 11.6, n=8 13.9 / 11.7: the tile from 7. */
tq_qmv_q8_fn tq_qdot_amx_r16(int id);
#define TQ_AMX_R16_MIN_N 7

/* tq_qdot_amx_register() -- when tq_cpu_amx() and format id has an AMX tile: k->mv_q8 = the
 * tile (n < TQ_AMX_MIN_N and k > TQ_AMX_MAXK go to the AVX-512 VNNI kernel), k->gemm_q8 = the tile over
 * tq_q8p (qmatmul.c takes it from 8 tokens), k->isa_q8 = "amx-int8". Called from formats_cpu.c once per format, after the
 * ISA tables. */
void tq_qdot_amx_register(tq_isa isa, int id, tq_format_kernels *k);

#endif /* TQ_QDOT_AMX_H */
