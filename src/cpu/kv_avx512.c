/* kv_avx512.c -- AVX-512 KV codec kernels (filled in incrementally; NULL = scalar). */
#include "cpu/kv_cpu.h"

const tq_kv_kernels tq_kv_kernels_avx512 = {.isa = TQ_ISA_AVX512};
