/* cublas_lazy.h -- cuBLAS is dlopen()ed on first use (cublas_lazy.cu); why it failed, if it did. */
#ifndef TQ_CUDA_CUBLAS_LAZY_H
#define TQ_CUDA_CUBLAS_LAZY_H

#ifdef __cplusplus
extern "C" {
#endif

/* The reason the last cuBLAS load failed ("cannot load libcublas.so.13 (...)"), or a generic text. */
const char *tqc_cublas_error(void);

#ifdef __cplusplus
}
#endif

#endif
