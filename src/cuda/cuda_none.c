/* cuda_none.c -- CUDA entry points for builds without CUDA: report "not available". */
#ifndef TQ_HAVE_CUDA
#include "core/core.h"

#define NO_CUDA(fn) TQ_FAIL(TQ_E_UNSUPPORTED, "%s: this build of turboquant has no CUDA support (no nvcc at build time)", fn)

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
    return NO_CUDA("tq_cuda_device_name");
}

tq_status tq_cuda_kv_supported(tq_kv_scheme s, int head_dim)
{
    (void)s, (void)head_dim;
    return NO_CUDA("tq_cuda_kv_supported");
}

tq_status tq_cuda_kv_encode(tq_kv_scheme s, int head_dim, tq_dtype src_type, const void *src, int64_t n_rows,
                            void *k_dst, void *v_dst)
{
    (void)s, (void)head_dim, (void)src_type, (void)src, (void)n_rows, (void)k_dst, (void)v_dst;
    return NO_CUDA("tq_cuda_kv_encode");
}

tq_status tq_cuda_kv_create(tq_kv_scheme s, int head_dim, int n_kv_heads, int64_t max_tokens, int batch,
                            tq_cuda_kv **out)
{
    (void)s, (void)head_dim, (void)n_kv_heads, (void)max_tokens, (void)batch;
    if (out)
        *out = NULL;
    return NO_CUDA("tq_cuda_kv_create");
}

void tq_cuda_kv_free(tq_cuda_kv *c)
{
    (void)c;
}

int64_t tq_cuda_kv_length(const tq_cuda_kv *c)
{
    (void)c;
    return 0;
}

tq_status tq_cuda_kv_set_length(tq_cuda_kv *c, int64_t n)
{
    (void)c, (void)n;
    return NO_CUDA("tq_cuda_kv_set_length");
}

tq_status tq_cuda_kv_append(tq_cuda_kv *c, tq_dtype src_type, const void *k, const void *v, int n_new,
                            int on_device)
{
    (void)c, (void)src_type, (void)k, (void)v, (void)n_new, (void)on_device;
    return NO_CUDA("tq_cuda_kv_append");
}

tq_status tq_cuda_kv_append_rows(tq_cuda_kv *c, const void *k_rows, const void *v_rows, int n_new)
{
    (void)c, (void)k_rows, (void)v_rows, (void)n_new;
    return NO_CUDA("tq_cuda_kv_append_rows");
}

tq_status tq_cuda_kv_read_rows(tq_cuda_kv *c, int64_t t0, int n, void *k_rows, void *v_rows)
{
    (void)c, (void)t0, (void)n, (void)k_rows, (void)v_rows;
    return NO_CUDA("tq_cuda_kv_read_rows");
}

tq_status tq_cuda_kv_fill_random(tq_cuda_kv *c, int64_t n_new, uint64_t seed)
{
    (void)c, (void)n_new, (void)seed;
    return NO_CUDA("tq_cuda_kv_fill_random");
}

tq_status tq_cuda_kv_attend(tq_cuda_kv *c, const float *q, int n_q, int n_heads, float scale, float *out,
                            int on_device)
{
    (void)c, (void)q, (void)n_q, (void)n_heads, (void)scale, (void)out, (void)on_device;
    return NO_CUDA("tq_cuda_kv_attend");
}

tq_status tq_cuda_kv_set_splits(tq_cuda_kv *c, int n_splits)
{
    (void)c, (void)n_splits;
    return NO_CUDA("tq_cuda_kv_set_splits");
}

tq_status tq_cuda_kv_set_opts(tq_cuda_kv *c, const tq_cuda_kv_opts *o)
{
    (void)c, (void)o;
    return NO_CUDA("tq_cuda_kv_set_opts");
}

tq_status tq_cuda_kv_sync(tq_cuda_kv *c)
{
    (void)c;
    return NO_CUDA("tq_cuda_kv_sync");
}

tq_status tq_cuda_malloc(void **p, size_t bytes)
{
    (void)bytes;
    if (p)
        *p = NULL;
    return NO_CUDA("tq_cuda_malloc");
}

void tq_cuda_free(void *p)
{
    (void)p;
}

tq_status tq_cuda_memcpy(void *dst, const void *src, size_t bytes, int dir)
{
    (void)dst, (void)src, (void)bytes, (void)dir;
    return NO_CUDA("tq_cuda_memcpy");
}

tq_status tq_cuda_kv_time_attend(tq_cuda_kv *c, const float *q_dev, int n_q, int n_heads, float scale,
                                 float *out_dev, int warmup, int reps, tq_cuda_timing timing,
                                 float *times_ms)
{
    (void)c, (void)q_dev, (void)n_q, (void)n_heads, (void)scale, (void)out_dev, (void)warmup, (void)reps,
        (void)timing, (void)times_ms;
    return NO_CUDA("tq_cuda_kv_time_attend");
}

tq_status tq_cuda_copy_bandwidth(size_t bytes, int reps, double *gbps, double *read_gbps)
{
    (void)bytes, (void)reps, (void)gbps, (void)read_gbps;
    return NO_CUDA("tq_cuda_copy_bandwidth");
}

size_t tq_cuda_kv_bytes_read(const tq_cuda_kv *c, int n_q, int n_heads)
{
    (void)c, (void)n_q, (void)n_heads;
    return 0;
}

tq_status tq_cuda_session_create(const tq_model *model, tq_kv_scheme kv, int64_t n_ctx, tq_cuda_session **out)
{
    (void)model, (void)kv, (void)n_ctx;
    if (out)
        *out = NULL;
    return NO_CUDA("tq_cuda_session_create");
}

void tq_cuda_session_free(tq_cuda_session *s)
{
    (void)s;
}

tq_status tq_cuda_session_eval(tq_cuda_session *s, const int32_t *tokens, int64_t n, float *logits_last)
{
    (void)s, (void)tokens, (void)n, (void)logits_last;
    return NO_CUDA("tq_cuda_session_eval");
}

int64_t tq_cuda_session_n_past(const tq_cuda_session *s)
{
    (void)s;
    return 0;
}

void tq_cuda_session_reset(tq_cuda_session *s)
{
    (void)s;
}

tq_status tq_cuda_session_set_opts(tq_cuda_session *s, const tq_cuda_session_opts *o)
{
    (void)s, (void)o;
    return NO_CUDA("tq_cuda_session_set_opts");
}

tq_status tq_cuda_session_sync(tq_cuda_session *s)
{
    (void)s;
    return NO_CUDA("tq_cuda_session_sync");
}

tq_status tq_cuda_session_debug(tq_cuda_session *s, int il, tq_cuda_kv **kv, const float **q_last,
                                const float **att_last)
{
    (void)s, (void)il;
    if (kv)
        *kv = NULL;
    if (q_last)
        *q_last = NULL;
    if (att_last)
        *att_last = NULL;
    return NO_CUDA("tq_cuda_session_debug");
}

tq_status tq_cuda_session_bytes(const tq_cuda_session *s, size_t *weights, size_t *kv)
{
    (void)s;
    if (weights)
        *weights = 0;
    if (kv)
        *kv = 0;
    return NO_CUDA("tq_cuda_session_bytes");
}
#else
typedef int tq_cuda_none_unused; /* ISO C forbids an empty translation unit */
#endif
