/* turboquant/cuda.h -- CUDA entry points, declared in every build (included by turboquant.h).
 * Without CUDA support compiled in, tq_cuda_available() returns 0 and every other entry point
 * returns TQ_E_UNSUPPORTED, so callers need no #ifdef. */
#ifndef TURBOQUANT_CUDA_H
#define TURBOQUANT_CUDA_H
#ifdef __cplusplus
extern "C" {
#endif

/* tq_cuda_available() -- number of usable CUDA devices (0 without a CUDA build or a device). */
TQ_API int tq_cuda_available(void);
/* tq_cuda_compiled() -- 1 if this library was built with CUDA kernels. */
TQ_API int tq_cuda_compiled(void);
/* tq_cuda_device_name() -- name of device 0 into buf (NUL-terminated, truncated to cap). */
TQ_API tq_status tq_cuda_device_name(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
