/* cuda_none.c -- CUDA entry points for builds without CUDA: report "not available". */
#ifndef TQ_HAVE_CUDA
#include "core/core.h"
#include "cuda/backend_cuda.h"

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

/* the CUDA backend of the one forward (cuda/backend_cuda.h): not available */
tq_status tqc_be_create(int max_n, int64_t max_cols, int64_t max_rows, int n_heads,
                        float attn_scale, tqc_be **out)
{
    (void)max_n, (void)max_cols, (void)max_rows, (void)n_heads, (void)attn_scale;
    *out = NULL;
    return NO_CUDA("tqc_be_create");
}

void tqc_be_free(tqc_be *b)
{
    (void)b;
}

tq_status tqc_be_alloc(tqc_be *b, void **p, size_t n, size_t *bytes)
{
    (void)b, (void)n, (void)bytes;
    *p = NULL;
    return NO_CUDA("tqc_be_alloc");
}

tq_status tqc_be_upload(tqc_be *b, void *dst, const void *src, size_t n)
{
    (void)b, (void)dst, (void)src, (void)n;
    return NO_CUDA("tqc_be_upload");
}

tq_status tqc_be_download(tqc_be *b, void *dst, const void *src, size_t n)
{
    (void)b, (void)dst, (void)src, (void)n;
    return NO_CUDA("tqc_be_download");
}

void tqc_be_dfree(void *p)
{
    (void)p;
}

tq_status tqc_be_sync(tqc_be *b)
{
    (void)b;
    return NO_CUDA("tqc_be_sync");
}

tq_status tqc_be_status(tqc_be *b)
{
    (void)b;
    return NO_CUDA("tqc_be_status");
}

void tqc_be_bind_kv(tqc_be *b, tq_cuda_kv *c, int on)
{
    (void)b, (void)c, (void)on;
}

size_t tqc_be_kv_bytes(const tq_cuda_kv *c)
{
    (void)c;
    return 0;
}

void tqc_be_set_gemv(tqc_be *b, int on)
{
    (void)b, (void)on;
}

void tqc_be_set_pdl(tqc_be *b, int on)
{
    (void)b, (void)on;
}

void tqc_be_set_wide_head(tqc_be *b, int on)
{
    (void)b;
    (void)on;
}

void tqc_be_set_exact(tqc_be *b, int mode)
{
    (void)b;
    (void)mode;
}

void tqc_be_set_prefill_dq(tqc_be *b, int min_n)
{
    (void)b, (void)min_n;
}

tq_status tqc_be_graph_begin(tqc_be *b)
{
    (void)b;
    return NO_CUDA("tqc_be_graph_begin");
}

int tqc_be_graph_end(tqc_be *b, int launch)
{
    (void)b, (void)launch;
    return 0;
}

void tqc_be_graph_counts(const tqc_be *b, long *inst, long *update)
{
    (void)b;
    *inst = *update = 0;
}

tq_status tqc_be_kv_f32(tqc_be *b, int n_layers, int n_kv_heads, int head_dim, int64_t cap,
                        size_t *bytes)
{
    (void)b, (void)n_layers, (void)n_kv_heads, (void)head_dim, (void)cap, (void)bytes;
    return NO_CUDA("tqc_be_kv_f32");
}

tq_status tqc_be_row_stats(tqc_be *b, const float *lg, int rows, int vocab, const int32_t *ids,
                           int k, float *picked, double *lse, int32_t *am)
{
    (void)b, (void)lg, (void)rows, (void)vocab, (void)ids, (void)k, (void)picked, (void)lse, (void)am;
    return NO_CUDA("tqc_be_row_stats");
}

tq_status tqc_be_greedy(tqc_be *b, const float *lg, int vocab, const tqc_greedy_pen *pen)
{
    (void)b, (void)lg, (void)vocab, (void)pen;
    return NO_CUDA("tqc_be_greedy");
}

tq_status tqc_be_greedy_fetch(tqc_be *b, int32_t *tok)
{
    (void)b, (void)tok;
    return NO_CUDA("tqc_be_greedy_fetch");
}

/* never called: tqc_be_create() fails first */
const tq_backend tq_backend_cuda = {"cuda (not built)", 0, 0, 0, 0, 0, 0, 0, 0};
#else
typedef int tq_cuda_none_unused; /* ISO C forbids an empty translation unit */
#endif
