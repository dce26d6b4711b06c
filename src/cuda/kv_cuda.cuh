// kv_cuda.cuh -- shared declarations of the CUDA KV kernels (encode, attend) and the device
// cache: error macros, row geometry of each scheme (docs/FORMAT.md "KV rows", same bytes as the
// CPU codec), and the launcher interfaces between the .cu files (kernel -> launcher -> C entry).
#ifndef TQ_KV_CUDA_CUH
#define TQ_KV_CUDA_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "turboquant.h"
#include "kv/kv_internal.h"
tq_status tq_fail_(tq_status st, const char *file, int line, const char *fmt, ...);
}

#define TQC_FAIL(st, ...) tq_fail_((st), __FILE__, __LINE__, __VA_ARGS__)
// TQC_CUDA(call) -- return TQ_E_CUDA naming the call and cudaGetErrorString() on failure.
#define TQC_CUDA(call)                                                                           \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess)                                                                   \
            return TQC_FAIL(TQ_E_CUDA, "CUDA: %s: %s", #call, cudaGetErrorString(e_));          \
    } while (0)

// Scheme families as the kernels see them.
enum { TQC_F16 = 1, TQC_BF16 = 2, TQC_AFF = 3, TQC_TURBO = 5 };

// Geometry of one (scheme, head_dim): byte sizes and offsets inside a row.
struct tqc_geom {
    int fam;        // TQC_*
    int d;          // head_dim
    int kb, vb;     // bits per K / V element (16 for f16/bf16)
    size_t k_row, v_row;
};

// tqc_geom_of() -- TQ_OK and *g for a scheme the GPU kernels support, else TQ_E_UNSUPPORTED.
tq_status tqc_geom_of(tq_kv_scheme s, int d, tqc_geom *g);

// Encode `n_rows` source rows (device memory, src_type) as K and V rows of the scheme into device
// memory. Source row r = ((b * n_new + t) * n_heads + h); destination row address =
// dst + ((b * n_heads + h) * cap + t0 + t) * row_bytes. k_src/v_src may be NULL to skip one.
struct tqc_encode_args {
    tqc_geom g;
    tq_dtype src_type;
    const void *k_src, *v_src;
    uint8_t *k_dst, *v_dst;
    int batch, n_new, n_heads;
    int64_t cap, t0;
    cudaStream_t stream;
    int two; // 1: K and V in two launches even when both are given (A/B; tq_cuda_kv_opts.enc_two)
};
tq_status tqc_encode_launch(const tqc_encode_args *a);
// Gaussian rows on the device (seeded counter hash + Box-Muller), f32, n floats.
tq_status tqc_random_launch(float *dst, int64_t n, uint64_t seed, cudaStream_t stream);

// Decode attention over the device cache (layout of tqc_encode_args, t0 = 0).
struct tqc_attend_args {
    tqc_geom g;
    const uint8_t *k, *v;
    int64_t cap, len;
    int batch, n_kv_heads, n_heads, n_q;
    float scale;
    const float *q;  // (batch, n_q, n_heads, d), device
    float *out;      // same shape, device
    float *work;     // partials, tqc_attend_work_floats() floats
    int n_splits;    // >= 1
    int merge;       // how the splits' partials are merged (TQ_CUDA_MERGE_*, never AUTO here):
                     // FUSED: the last block per (batch, kv head, row block) merges them through
                     // L2 (needs counters); KERNEL: a reduce kernel; CLUSTER: the splits of a
                     // (batch, kv head, row block) are one thread-block cluster and block 0
                     // merges the others' partials from their shared memory (n_splits <= 16)
    int pdl;         // KERNEL: launch the reduce kernel with programmatic dependent launch
    unsigned *counters; // >= batch * n_kv_heads * 8 zeroed counters, left zeroed by each call
    cudaStream_t stream;
};
// tqc_attend_plan() -- splits (n_splits_req > 0 forces it) and merge path (merge_req, a
// TQ_CUDA_MERGE_*; AUTO chooses) to use, and the workspace floats needed.
void tqc_attend_plan(const tqc_geom *g, int batch, int n_kv_heads, int n_heads, int n_q,
                     int64_t len, int n_splits_req, int merge_req, int *n_splits, int *merge,
                     size_t *work_floats);
tq_status tqc_attend_launch(const tqc_attend_args *a);

// tqc_kv_use_stream() -- run the cache's work on stream s (the caller's, which must outlive the
// use; NULL = back to the handle's own stream). tqc_kv_device_bytes() -- bytes of its K/V rows.
void tqc_kv_use_stream(tq_cuda_kv *c, cudaStream_t s);
size_t tqc_kv_device_bytes(const tq_cuda_kv *c);
// tqc_kv_shape() -- the cache's kv heads and head_dim.
void tqc_kv_shape(const tq_cuda_kv *c, int *n_kv_heads, int *head_dim);

#endif
