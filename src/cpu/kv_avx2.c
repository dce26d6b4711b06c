/* kv_avx2.c -- AVX2 KV codec kernels (filled in incrementally; NULL = scalar). */
#include "cpu/kv_cpu.h"

const tq_kv_kernels tq_kv_kernels_avx2 = {.isa = TQ_ISA_AVX2};
