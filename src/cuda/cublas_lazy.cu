// cublas_lazy.cu -- cuBLAS loaded on first use instead of at program start.
//
// Linking libcublas makes the dynamic loader map and relocate libcublas + libcublasLt (about 200 MiB
// of resident memory) in every process, so `tq version` or a CPU-only `tq generate` of a CUDA build
// paid for a library it never called. This file defines the four cuBLAS entry points the backend uses
// (cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2, cublasGemmEx) with the header's own
// signatures; the first cublasCreate dlopen()s libcublas.so.<major> and resolves the real ones. The
// library is not linked (CMakeLists.txt), so a call to any other cuBLAS function fails at link time:
// add it here. A missing or broken libcublas makes cublasCreate return CUBLAS_STATUS_NOT_INITIALIZED
// and tqc_cublas_error() says why (the backend puts that in its error message).
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "cuda/cublas_lazy.h"

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*set_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                     const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                                     int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                                     cublasGemmAlgo_t);

static struct {
    pthread_once_t once;
    int ok;
    char err[256];
    create_fn create;
    destroy_fn destroy;
    set_stream_fn set_stream;
    gemm_ex_fn gemm_ex;
} g_blas = {PTHREAD_ONCE_INIT, 0, "", 0, 0, 0, 0};

#define TQC_STR2(x) #x
#define TQC_STR(x) TQC_STR2(x)

static void blas_load(void)
{
    // the loader's search first (LD_LIBRARY_PATH, ld.so.cache: where a linked libcublas was found
    // before), then the toolkit's library directory of the build machine
    const char *names[] = {"libcublas.so." TQC_STR(CUBLAS_VER_MAJOR),
#ifdef TQ_CUBLAS_DIR
                           TQ_CUBLAS_DIR "/libcublas.so." TQC_STR(CUBLAS_VER_MAJOR),
#endif
                           "libcublas.so"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(g_blas.err, sizeof g_blas.err, "cannot load %s (%s); install the CUDA %d cuBLAS runtime or put its "
                 "directory in LD_LIBRARY_PATH", names[0], e ? e : "not found", CUBLAS_VER_MAJOR);
        return;
    }
    g_blas.create = (create_fn)dlsym(h, "cublasCreate_v2");
    g_blas.destroy = (destroy_fn)dlsym(h, "cublasDestroy_v2");
    g_blas.set_stream = (set_stream_fn)dlsym(h, "cublasSetStream_v2");
    g_blas.gemm_ex = (gemm_ex_fn)dlsym(h, "cublasGemmEx");
    if (!g_blas.create || !g_blas.destroy || !g_blas.set_stream || !g_blas.gemm_ex) {
        snprintf(g_blas.err, sizeof g_blas.err, "%s lacks cublasCreate_v2/cublasDestroy_v2/cublasSetStream_v2/"
                 "cublasGemmEx", names[0]);
        dlclose(h);
        return;
    }
    g_blas.ok = 1; // the handle stays open for the life of the process
}

static int blas_ready(void)
{
    pthread_once(&g_blas.once, blas_load);
    return g_blas.ok;
}

extern "C" const char *tqc_cublas_error(void)
{
    return g_blas.err[0] ? g_blas.err : "cuBLAS call failed";
}

extern "C" cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t *handle)
{
    return blas_ready() ? g_blas.create(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

extern "C" cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle)
{
    return blas_ready() ? g_blas.destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

extern "C" cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    return blas_ready() ? g_blas.set_stream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

extern "C" cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                                    cublasOperation_t transb, int m, int n, int k, const void *alpha,
                                                    const void *A, cudaDataType Atype, int lda, const void *B,
                                                    cudaDataType Btype, int ldb, const void *beta, void *C,
                                                    cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                                    cublasGemmAlgo_t algo)
{
    if (!blas_ready())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return g_blas.gemm_ex(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                          computeType, algo);
}
