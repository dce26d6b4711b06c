/* cuda_none.c -- CUDA entry points for builds without CUDA: report "not available". */
#ifndef TQ_HAVE_CUDA
#include "core/core.h"

int tq_cuda_available(void)
{
    return 0;
}

int tq_cuda_compiled(void)
{
    return 0;
}

tq_status tq_cuda_device_name(char *buf, size_t cap)
{
    if (buf && cap)
        buf[0] = 0;
    return TQ_FAIL(TQ_E_UNSUPPORTED, "this build of turboquant has no CUDA support (no nvcc at build time)");
}
#else
typedef int tq_cuda_none_unused; /* ISO C forbids an empty translation unit */
#endif
