/* qgemv_none.c -- the quantized-GEMV entry points (cuda/qgemv.h) for builds without CUDA. */
#include "common/formats.h"
#include "cuda/qgemv.h"

_Static_assert(TQ_CUDA_QGEMV_MLX == TQ_FMT_MLX_AFFINE, "qgemv.h's MLX id is the format table's");

#ifndef TQ_HAVE_CUDA
#include "core/core.h"

#define NO_CUDA(fn) TQ_FAIL(TQ_E_UNSUPPORTED, "%s: this build of turboquant has no CUDA support (no nvcc at build time)", fn)

tq_status tq_cuda_qgemv_check(const tq_cuda_qmat *m)
{
    (void)m;
    return NO_CUDA("tq_cuda_qgemv_check");
}

void tq_cuda_qgemv_set_split(int ks)
{
    (void)ks;
}

void tq_cuda_qgemv_set_staged(int on)
{
    (void)on;
}

size_t tq_cuda_qgemv_packed_bytes(const tq_cuda_qmat *m)
{
    (void)m;
    return 0;
}

int tq_cuda_qgemv_wide(const tq_cuda_qmat *m)
{
    (void)m;
    return 0;
}

size_t tq_cuda_qgemv_act_bytes(const tq_cuda_qmat *m, int n)
{
    (void)m, (void)n;
    return 0;
}

tq_status tq_cuda_qgemv(const tq_cuda_qmat *m, const float *x, int64_t ldx, int n, float *y, int64_t ldy,
                        void *act, void *stream)
{
    (void)m, (void)x, (void)ldx, (void)n, (void)y, (void)ldy, (void)act, (void)stream;
    return NO_CUDA("tq_cuda_qgemv");
}

tq_status tq_cuda_qgemv_job(const tq_cuda_qjob *j, void *stream, int pdl)
{
    (void)j, (void)stream, (void)pdl;
    return NO_CUDA("tq_cuda_qgemv_job");
}

tq_status tq_cuda_qgemv_dequant_bf16(const tq_cuda_qmat *m, void *out, void *stream)
{
    (void)m, (void)out, (void)stream;
    return NO_CUDA("tq_cuda_qgemv_dequant_bf16");
}

tq_status tq_cuda_qgemv_dequant_host(const tq_cuda_qmat *m, uint16_t *out)
{
    (void)m, (void)out;
    return NO_CUDA("tq_cuda_qgemv_dequant_host");
}

tq_status tq_cuda_qgemv_host(const tq_cuda_qmat *m, const float *x, int n, float *y, int8_t *act_qs,
                             float *act_d)
{
    (void)m, (void)x, (void)n, (void)y, (void)act_qs, (void)act_d;
    return NO_CUDA("tq_cuda_qgemv_host");
}

tq_status tq_cuda_qgemv_bench(int fmt, int bits, int group, int64_t rows, int64_t cols, int n, int reps,
                              int cold, tq_cuda_qgemv_timing *out)
{
    (void)fmt, (void)bits, (void)group, (void)rows, (void)cols, (void)n, (void)reps, (void)cold, (void)out;
    return NO_CUDA("tq_cuda_qgemv_bench");
}
#endif
