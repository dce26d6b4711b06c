/* qdot_avx512vnni.c -- the AVX512-VNNI table of qdot.h: qdot_avx2.c's kernels with the int8 dot of
 * the 32-element formats done by vpdpbusd (256-bit, AVX512-VL) instead of vpmaddubsw +
 * vpmaddwd. Its int32 lanes are the same exact sums (no saturation either way), so every result
 * equals the scalar reference bit for bit (tests/test_qdot.c). Which formats this table offers
 * was picked by a same-run measurement (bench/qdot_bench.c; docs/results.md "Native weights vs
 * llama.cpp"): a format left out keeps its AVX2 kernel (cpu/formats_cpu.c takes each slot from
 * the highest table that has it). */
/* ISA flags: the _avx512vnni.c rule of CMakeLists.txt (gcc and clang alike) */
#pragma GCC diagnostic ignored "-Wunused-function" /* the K kernels it does not offer */
#define QDOT_VNNI 1
/* the formats whose q8 dot gains from vpdpbusd (the K formats keep vpmaddwd for their scales) */
#define QDOT_VNNI_FORMATS(X)                                                                       \
    X(TQ_GGML_Q8_0, q8_0, quant_q8a)                                                               \
    X(TQ_GGML_Q4_0, q4_0, quant_q8a)                                                               \
    X(TQ_GGML_Q4_1, q4_1, quant_q8a)                                                               \
    X(TQ_GGML_Q5_0, q5_0, quant_q8a)                                                               \
    X(TQ_GGML_Q5_1, q5_1, quant_q8a)                                                               \
    X(TQ_GGML_Q4_K, q4_k, quant_q8k)                                                               \
    X(TQ_GGML_Q5_K, q5_k, quant_q8k)                                                               \
    X(TQ_GGML_Q6_K, q6_k, quant_q8k)
#include "qdot_avx2.c"
