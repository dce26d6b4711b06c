// device.cu -- CUDA device discovery for the C API (built only when nvcc is present).
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "turboquant.h"

extern "C" tq_status tq_fail_(tq_status st, const char *file, int line, const char *fmt, ...);

extern "C" int tq_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); // clear the sticky "no device" error
        return 0;
    }
    return n;
}

extern "C" int tq_cuda_compiled(void)
{
    return 1;
}

extern "C" tq_status tq_cuda_device_name(char *buf, size_t cap)
{
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, 0);
    if (buf && cap)
        buf[0] = 0;
    if (e != cudaSuccess)
        return tq_fail_(TQ_E_CUDA, __FILE__, __LINE__, "no CUDA device: %s", cudaGetErrorString(e));
    if (buf && cap)
        snprintf(buf, cap, "%s", prop.name);
    return TQ_OK;
}
