/* kv_dispatch.c -- pick the KV kernel table of an ISA (STYLE 3.6). */
#include "cpu/kv_cpu.h"

const tq_kv_kernels *tq_kv_kernels_get(tq_isa isa)
{
    if (!tq_cpu_supports(isa))
        return NULL;
    switch (isa) {
    case TQ_ISA_SCALAR: return &tq_kv_kernels_scalar;
#if defined(__x86_64__)
    case TQ_ISA_AVX2: return &tq_kv_kernels_avx2;
    case TQ_ISA_AVX512: return &tq_kv_kernels_avx512;
#endif
    default: return NULL;
    }
}
