/* qdot_iq4nl.h -- IQ4_NL (ggml type 20) weights kept in their block format (issue 14's row for
 * the type `tq quantize --type IQ4_NL` writes): the q8 and f32 dots and matvecs of qdot.h.
 *
 * Block (18 bytes, 32 values): f16 d, 16 bytes of nibbles (low: elements 0..15, high: 16..31);
 * element value d * tq_iq4nl_values[nibble] (a 16-entry signed table, -127 .. 113). The weight
 * integers are the table values (int8), so the specification is qdot.h's for the signed
 * 32-formats, word for word: q8 path, per block b in order, P_b = sum_{j<32} wq[j] * qs[j]
 * (int32, exact), acc = fmaf((float)P_b, d_w * d_a, acc), result acc + 0 (one chain); f32 path
 * acc[j] = fmaf(d * (float)wq[j], x[32b + j], acc[j]), v[l] = (acc[l] + acc[8+l]) +
 * (acc[16+l] + acc[24+l]), result H(v). Every ISA gives the scalar bits (finite data), for any
 * n, r0/r1 (tests/test_qdot_iq4nl.c). The activation is qdot.h's tq_q8a.
 *
 * Kernels: scalar (qdot_iq4nl.c, the specification), AVX2 (qdot_iq4nl_avx2.c: the table
 * lookup by vpshufb) and AVX512-VNNI (qdot_iq4nl_avx512vnni.c); their q8 path is
 * cpu/qdot_q8blk.h's, shared with qdot.h's formats (decode: one row . one token with the 8
 * block sums of a step reduced at once; prefill and batches: the tq_q8p tile, tokens in the
 * lanes). */
#ifndef TQ_QDOT_IQ4NL_H
#define TQ_QDOT_IQ4NL_H

#include "common/formats.h"

typedef struct tq_iq4nl_kernels {
    const char *isa; /* "scalar", "avx2", "avx512vnni" */
    tq_isa level;    /* the tq_cpu_isa() level it needs  */
    tq_qdot_q8_fn dot_q8;
    tq_qdot_f32_fn dot_f32;
    tq_qmv_q8_fn mv_q8;
    tq_qmv_f32_fn mv_f32;
    tq_qmv_q8_fn gemm_q8; /* prefill over tq_q8p (qdot.h); NULL = mv_q8 does it */
} tq_iq4nl_kernels;

/* The tables without a CPU check (qdot_iq4nl.c checks). */
const tq_iq4nl_kernels *tq_iq4nl_scalar(void);
const tq_iq4nl_kernels *tq_iq4nl_avx2_table(void);
const tq_iq4nl_kernels *tq_iq4nl_avx512_table(void);
/* tq_iq4nl_all() -- every table this CPU (and TQ_CPU) can run, scalar first; returns the count. */
int tq_iq4nl_all(const tq_iq4nl_kernels **out, int cap);
/* tq_iq4nl_register() -- fill k (the IQ4_NL row's slots) from the highest table at or below
 * isa; the activation quantizer is qdot.h's tq_q8a one of that level (formats_cpu.c). */
void tq_iq4nl_register(tq_isa isa, int id, tq_format_kernels *k);

#endif /* TQ_QDOT_IQ4NL_H */
