// pdl.cuh -- programmatic dependent launch (sm_90+), shared by the CUDA kernels. A kernel launched
// with the attribute may start while the previous kernel of the stream finishes: pdl_wait()
// (griddepcontrol.wait) returns once that kernel has completed and its writes are visible, so
// everything before it may only read data no kernel writes (weights); pdl_trigger()
// (griddepcontrol.launch_dependents) lets the next such kernel be scheduled. No-ops before sm_90
// and without the launch attribute.
#ifndef TQ_PDL_CUH
#define TQ_PDL_CUH

__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#endif /* TQ_PDL_CUH */
