// backend_cuda.cu -- the CUDA backend of the one forward (backend_cuda.h, common/backend.h):
// device buffers, one stream per context. Products: decode (n = 1) through a fused GEMV kernel
// (input transform in shared memory as bf16, one warp per row, 16-byte weight loads, fp32
// accumulation; every output of a job in one launch; residual add folded in when there is no
// post-norm); prefill through cuBLAS (bf16 x bf16 -> fp32). Elementwise ops are small kernels
// with the CPU backend's formulas (fp32; RMSNorm sums in fp32 here, in double on the CPU).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <float.h>
#include <math.h>

#include "cuda/cublas_lazy.h"
#include "cuda/kv_cuda.cuh"
#include "cuda/pdl.cuh"
#include "cuda/qgemv.h"

extern "C" {
#include "cuda/backend_cuda.h"
}

extern "C" void *tq_calloc(size_t n, size_t size);
extern "C" void tq_free(void *p);

struct tqc_be {
    cudaStream_t stream;
    cublasHandle_t blas;
    int max_n, n_heads;
    int64_t max_cols;
    float scale;
    __nv_bfloat16 *xb; // (max_n, max_cols) bf16 GEMM input
    __nv_bfloat16 *xlo; // (max_n, max_cols) its low part: bf16(x - xb) (exact inputs, tqc_be_set_exact)
    int exact;          // TQC_EXACT_*: which dense bf16 products take their input exactly
    int wide_head;      // a native head-sized decode product through the wide kernel
    float *ys;         // (max_n, max_rows) one GEMM of a job's outputs, before the scatter
    int64_t max_rows;
    int32_t *tok;      // (max_n) token ids
    void *qact;        // quantized activations of max_n tokens (native products, tq_cuda_qgemv)
    size_t qact_bytes;
    void *dq;          // one native matrix dequantized to bf16 (prefill products through cuBLAS)
    size_t dq_bytes;
    int dq_min_n;      // native products of >= dq_min_n tokens: dequantize + cuBLAS (0: never)
    tq_status err;     // first failure of a void op
    int gemv;
    int pdl;               // decode GEMVs launched with programmatic dependent launch (sm_90+)
    float *xf;             // (max_n, max_cols) f32 GEMM input (dense f32 weights)
    float *kvf;            // f32 KV cache (tqc_be_kv_f32): [layer][K, V][kv head][cap][head_dim]
    int kvf_layers, kvf_heads, kvf_hd;
    int64_t kvf_cap;
    cudaGraphExec_t gexec; // the decode step's graph (tqc_be_graph_end), updated in place each step
    long n_inst, n_update; // graph instantiations and in-place updates so far
    float *gr_v;           // device greedy sampler: per-block best keys, ids, the blocks-done
    int *gr_i;             // counter, the result slot (tqc_be_greedy); gr_cap blocks
    unsigned *gr_count;
    int32_t *gr_out;
    int gr_cap;
};

namespace {

#define BE_TRY(b, call)                                                                          \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess && (b)->err == TQ_OK)                                              \
            (b)->err = TQC_FAIL(TQ_E_CUDA, "CUDA: %s: %s", #call, cudaGetErrorString(e_));      \
    } while (0)

int blocks_for(int64_t n)
{
    const int64_t b = (n + 255) / 256;
    return (int)(b > 4096 ? 4096 : b < 1 ? 1 : b);
}

__device__ inline float silu_f(float x)
{
    return x / (1.0f + expf(-x));
}

__device__ inline float gelu_f(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

// sum of v over the block (blockDim.x a multiple of 32, <= 1024); every thread gets it
__device__ float block_sum(float v, float *red)
{
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (lane == 0)
        red[wid] = v;
    __syncthreads();
    float s = 0.0f;
    for (int k = 0; k < nw; k++)
        s += red[k];
    return s;
}

// tok NULL: one token, id tok0 (a kernel parameter: no host copy, so a captured step replays it)
__device__ inline float to_f(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}
__device__ inline float to_f(float v)
{
    return v;
}

template <typename T>
__global__ void embed_kernel(const T *emb, const int32_t *tok, int32_t tok0, int dim, float sc, float *x)
{
    const int t = blockIdx.x;
    const T *e = emb + (size_t)(tok ? tok[t] : tok0) * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = to_f(e[i]);
        x[(size_t)t * dim + i] = sc != 0.0f && sc != 1.0f ? v * sc : v;
    }
}

// o[row] = x[row] / rms(x[row]) * (w | 1 + w | 1); one block per row; o may be x
__global__ void rmsnorm_kernel(float *o, const float *x, const float *w, int width, float eps, int p1)
{
    __shared__ float red[32];
    const float *xr = x + (size_t)blockIdx.x * width;
    float *orow = o + (size_t)blockIdx.x * width;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < width; i += blockDim.x)
        ss += xr[i] * xr[i];
    ss = block_sum(ss, red);
    const float r = 1.0f / sqrtf(ss / (float)width + eps);
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        const float y = xr[i] * r;
        orow[i] = w ? y * (p1 ? 1.0f + w[i] : w[i]) : y;
    }
}

// res[row] += (post ? rmsnorm(y[row]) : y[row]); one block per row
__global__ void add_norm_kernel(float *res, const float *y, int64_t ldy, const float *post, int width, float eps,
                                int p1)
{
    __shared__ float red[32];
    const float *yr = y + (size_t)blockIdx.x * ldy;
    float *rr = res + (size_t)blockIdx.x * width;
    float r = 1.0f;
    if (post) {
        float ss = 0.0f;
        for (int i = threadIdx.x; i < width; i += blockDim.x)
            ss += yr[i] * yr[i];
        ss = block_sum(ss, red);
        r = 1.0f / sqrtf(ss / (float)width + eps);
    }
    for (int i = threadIdx.x; i < width; i += blockDim.x)
        rr[i] += post ? yr[i] * r * (p1 ? 1.0f + post[i] : post[i]) : yr[i];
}

__device__ inline void store_as(__nv_bfloat16 *p, float v)
{
    *p = __float2bfloat16(v);
}
__device__ inline void store_as(float *p, float v)
{
    *p = v;
}

// the matmul's input transform into bf16 (or, for dense f32 weights, f32) rows (n, cols): one
// block per row
template <int PRE, typename OT = __nv_bfloat16>
__global__ void pre_kernel(const float *x, const float *aux, int cols, float eps, int p1, OT *xb,
                           __nv_bfloat16 *lo = nullptr)
{
    __shared__ float red[32];
    const float *xr = x + (size_t)blockIdx.x * cols;
    const float *ar = aux ? aux + (size_t)blockIdx.x * cols : nullptr;
    float r = 1.0f;
    if constexpr (PRE == TQ_BE_PRE_NORM) {
        float ss = 0.0f;
        for (int i = threadIdx.x; i < cols; i += blockDim.x)
            ss += xr[i] * xr[i];
        ss = block_sum(ss, red);
        r = 1.0f / sqrtf(ss / (float)cols + eps);
    }
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        float v;
        if constexpr (PRE == TQ_BE_PRE_NORM)
            v = xr[i] * r * (p1 ? 1.0f + aux[i] : aux[i]);
        else if constexpr (PRE == TQ_BE_PRE_SILU)
            v = silu_f(xr[i]) * ar[i];
        else if constexpr (PRE == TQ_BE_PRE_GELU)
            v = gelu_f(xr[i]) * ar[i];
        else
            v = xr[i];
        store_as(&xb[(size_t)blockIdx.x * cols + i], v);
        if (lo) { // the rest of v below its bf16 rounding (exact: W hi + W lo, two GEMMs)
            const float h = __bfloat162float(__float2bfloat16(v));
            lo[(size_t)blockIdx.x * cols + i] = __float2bfloat16(v - h);
        }
    }
}

// Decode GEMV over up to 4 outputs of the same input: block b belongs to the output whose
// block range holds it; 8 warps, one row each. The input (transformed) is staged in dynamic
// shared memory by every block: as bf16, or as f32 for an exact output (ex[i]: the K / V
// projections, whose rows a quantized cache encodes -- the CPU's f32 activations, issue 16
// item 6). cols % 8 == 0, cols <= GEMV_MAXC; shared bytes cols * (any ex ? 4 : 2).
constexpr int GEMV_MAXC = 8192;
struct gemv_outs {
    const __nv_bfloat16 *w[4];
    float *y[4];
    int rows[4];
    int blk_end[4];
    int acc[4];
    int ex[4];
    int n;
};

template <int PRE>
__global__ void __launch_bounds__(256) gemv_kernel(gemv_outs o, int cols, const float *src, const float *aux,
                                                   float eps, int p1)
{
    extern __shared__ __align__(16) unsigned char gemv_sm[];
    __nv_bfloat16 *xs = reinterpret_cast<__nv_bfloat16 *>(gemv_sm);
    float *xf = reinterpret_cast<float *>(gemv_sm);
    __shared__ float red[32];
    const int t = threadIdx.x, lane = t & 31, wid = t >> 5;
    // this block's output, selected with constant indices (a dynamically indexed kernel
    // parameter would be copied to local memory by every thread)
    const __nv_bfloat16 *wk = o.w[0];
    float *yk = o.y[0];
    int rows = o.rows[0], acck = o.acc[0], exk = o.ex[0], b0 = 0;
#pragma unroll
    for (int j = 1; j < 4; j++)
        if (j < o.n && (int)blockIdx.x >= o.blk_end[j - 1]) {
            wk = o.w[j], yk = o.y[j], rows = o.rows[j], acck = o.acc[j], exk = o.ex[j], b0 = o.blk_end[j - 1];
        }
    const int row = ((int)blockIdx.x - b0) * 8 + wid;
    // the weight row into L2 while the previous kernel finishes (launched with PDL), then wait
    // for the input it writes
    if (row < rows) {
        const char *wp = reinterpret_cast<const char *>(wk + (size_t)row * cols);
        for (int off = lane * 128; off < cols * 2; off += 32 * 128)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(wp + off));
    }
    pdl_trigger();
    pdl_wait();
    float r = 1.0f;
    if constexpr (PRE == TQ_BE_PRE_NORM) {
        float ss = 0.0f;
        for (int i = t; i < cols; i += 256)
            ss += src[i] * src[i];
        ss = block_sum(ss, red);
        r = 1.0f / sqrtf(ss / (float)cols + eps);
    }
    for (int i = t; i < cols; i += 256) {
        float v;
        if constexpr (PRE == TQ_BE_PRE_NORM)
            v = src[i] * r * (p1 ? 1.0f + aux[i] : aux[i]);
        else if constexpr (PRE == TQ_BE_PRE_SILU)
            v = silu_f(src[i]) * aux[i];
        else if constexpr (PRE == TQ_BE_PRE_GELU)
            v = gelu_f(src[i]) * aux[i];
        else
            v = src[i];
        if (exk)
            xf[i] = v;
        else
            xs[i] = __float2bfloat16(v);
    }
    __syncthreads();
    if (row >= rows)
        return;
    const uint4 *wr = reinterpret_cast<const uint4 *>(wk + (size_t)row * cols);
    const uint4 *xr = reinterpret_cast<const uint4 *>(xs);
    float acc = 0.0f;
    if (exk) { // f32 activations: 8 weights against two float4 pieces
        const float4 *xr4 = reinterpret_cast<const float4 *>(xf);
        for (int i = lane; i < cols / 8; i += 32) {
            const uint4 a = __ldg(wr + i);
            const float4 f0 = xr4[2 * i], f1 = xr4[2 * i + 1];
            const __nv_bfloat162 *a2 = reinterpret_cast<const __nv_bfloat162 *>(&a);
            const float2 w0 = __bfloat1622float2(a2[0]), w1 = __bfloat1622float2(a2[1]);
            const float2 w2 = __bfloat1622float2(a2[2]), w3 = __bfloat1622float2(a2[3]);
            acc = fmaf(w0.x, f0.x, acc);
            acc = fmaf(w0.y, f0.y, acc);
            acc = fmaf(w1.x, f0.z, acc);
            acc = fmaf(w1.y, f0.w, acc);
            acc = fmaf(w2.x, f1.x, acc);
            acc = fmaf(w2.y, f1.y, acc);
            acc = fmaf(w3.x, f1.z, acc);
            acc = fmaf(w3.y, f1.w, acc);
        }
    } else {
        for (int i = lane; i < cols / 8; i += 32) {
            const uint4 a = __ldg(wr + i), b = xr[i];
            const __nv_bfloat162 *a2 = reinterpret_cast<const __nv_bfloat162 *>(&a);
            const __nv_bfloat162 *b2 = reinterpret_cast<const __nv_bfloat162 *>(&b);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 fa = __bfloat1622float2(a2[j]), fb = __bfloat1622float2(b2[j]);
                acc = fmaf(fa.x, fb.x, acc);
                acc = fmaf(fa.y, fb.y, acc);
            }
        }
    }
    for (int off = 16; off; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0)
        yk[row] = acck ? yk[row] + acc : acc;
}

// x := act(x) * up elementwise (the native products' SiLU / GELU input, in place)
template <int PRE>
__global__ void act_kernel(float *x, const float *up, int64_t total)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = (PRE == TQ_BE_PRE_SILU ? silu_f(x[i]) : gelu_f(x[i])) * up[i];
}

static_assert(TQ_BE_PRE_NONE == 0 && TQ_BE_PRE_NORM == 1 && TQ_BE_PRE_SILU == 2 && TQ_BE_PRE_GELU == 3,
              "tq_cuda_qjob.pre uses the backend's input-transform ids");

__global__ void bias_kernel(float *y, const float *b, int64_t total, int width)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        y[i] += b[i % width];
}

// rotate_half RoPE of token blockIdx.x (position pos0 + t): q heads then k heads
__global__ void rope_kernel(float *q, int nh, float *k, int nkv, int hd, int rd, const float *inv_freq, int64_t pos0)
{
    const int t = blockIdx.x, half = rd / 2;
    const float pos = (float)(pos0 + t);
    const int nq = nh * half, nk = nkv * half;
    for (int i = threadIdx.x; i < nq + nk; i += blockDim.x) {
        const bool isq = i < nq;
        const int ii = isq ? i : i - nq;
        const int h = ii / half, j = ii % half;
        float *x = isq ? q + ((size_t)t * nh + h) * hd : k + ((size_t)t * nkv + h) * hd;
        const float ang = pos * inv_freq[j];
        const float c = cosf(ang), s = sinf(ang);
        const float a = x[j], b = x[j + half];
        x[j] = a * c - b * s;
        x[j + half] = b * c + a * s;
    }
}

__global__ void softcap_kernel(float *y, int64_t n, float c)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = c * tanhf(y[i] / c);
}

// y_i[t * ldy_i + r] = ys[t * R + off_i + r]: the outputs of one GEMM over contiguous weights
struct scatter_outs {
    float *y[4];
    int64_t ldy[4];
    int off[5]; // off[i] .. off[i + 1]: output i's rows; off[n] = R
    int n;
};
__global__ void scatter_kernel(const float *ys, scatter_outs o)
{
    const int t = blockIdx.x, R = o.off[o.n];
    for (int c = threadIdx.x; c < R; c += blockDim.x) {
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (j < o.n && c >= o.off[j] && c < o.off[j + 1])
                o.y[j][(size_t)t * o.ldy[j] + c - o.off[j]] = ys[(size_t)t * R + c];
    }
}

// f32 KV cache rows: token t's K/V heads (n, nkv, hd) into [head][pos0 + t][hd]
__global__ void kvf32_append_kernel(const float *k, const float *v, int nkv, int hd, int64_t cap, int64_t pos0,
                                    float *kc, float *vc)
{
    const int t = blockIdx.x;
    for (int i = threadIdx.x; i < nkv * hd; i += blockDim.x) {
        const int h = i / hd, d = i % hd;
        const size_t dst = ((size_t)h * cap + pos0 + t) * hd + d;
        kc[dst] = k[(size_t)t * nkv * hd + i];
        vc[dst] = v[(size_t)t * nkv * hd + i];
    }
}

__device__ float block_max(float v, float *red)
{
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0)
        red[wid] = v;
    __syncthreads();
    float m = red[0];
    for (int k = 1; k < nw; k++)
        m = fmaxf(m, red[k]);
    return m;
}

// Causal attention over the f32 cache, fp32 throughout (the CPU's f32-cache attention up to
// summation order): block (token t, query head h) at position pos0 + t sees keys 0..pos0 + t of
// kv head h / group; scores in shared memory (hd + pos0 + n floats).
__global__ void __launch_bounds__(128) attend_f32_kernel(const float *kc, const float *vc, int64_t cap, int group,
                                                         int hd, int64_t pos0, const float *q, int nh, float scale,
                                                         float *out)
{
    extern __shared__ float sm[];
    __shared__ float red[32];
    const int t = blockIdx.x, h = blockIdx.y, kh = h / group;
    const int64_t len = pos0 + t + 1;
    float *qs = sm, *sc = sm + hd;
    const float *qr = q + ((size_t)t * nh + h) * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x)
        qs[i] = qr[i];
    __syncthreads();
    const float *K = kc + (size_t)kh * cap * hd, *V = vc + (size_t)kh * cap * hd;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
        const float *kr = K + (size_t)j * hd;
        float d = 0.0f;
        for (int i = 0; i < hd; i++)
            d = fmaf(qs[i], kr[i], d);
        d *= scale;
        sc[j] = d;
        mx = fmaxf(mx, d);
    }
    mx = block_max(mx, red);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
        const float e = expf(sc[j] - mx);
        sc[j] = e;
        sum += e;
    }
    sum = block_sum(sum, red);
    __syncthreads();
    const float inv = 1.0f / sum;
    float *orow = out + ((size_t)t * nh + h) * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        float acc = 0.0f;
        for (int64_t j = 0; j < len; j++)
            acc = fmaf(sc[j], V[(size_t)j * hd + i], acc);
        orow[i] = acc * inv;
    }
}

// Per logits row (one block each): the first index of the largest value, the log-sum-exp in
// double (max, then the sum of exp(x - max) in double: tq_evl_row_lse's expression), and the
// values at k ids of the row.
__global__ void row_stats_kernel(const float *lg, int vocab, const int32_t *ids, int k, float *picked, double *lse,
                                 int32_t *am)
{
    __shared__ float rv[32];
    __shared__ int ri[32];
    __shared__ double rd[32];
    const float *x = lg + (size_t)blockIdx.x * vocab;
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x)
        if (x[i] > bv || (x[i] == bv && i < bi)) {
            bv = x[i];
            bi = i;
        }
    for (int o = 16; o; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > bv || (ov == bv && oi < bi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) {
        rv[wid] = bv;
        ri[wid] = bi;
    }
    __syncthreads();
    bv = rv[0];
    bi = ri[0];
    for (int w = 1; w < nw; w++)
        if (rv[w] > bv || (rv[w] == bv && ri[w] < bi)) {
            bv = rv[w];
            bi = ri[w];
        }
    double s = 0.0;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x)
        s += exp((double)x[i] - (double)bv);
    for (int o = 16; o; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0)
        rd[wid] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double tot = 0.0;
        for (int w = 0; w < nw; w++)
            tot += rd[w];
        if (lse)
            lse[blockIdx.x] = (double)bv + log(tot);
        if (am)
            am[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
    }
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
        const int32_t id = ids[(size_t)blockIdx.x * k + j];
        picked[(size_t)blockIdx.x * k + j] = id >= 0 && id < vocab ? x[id] : 0.0f;
    }
}

tq_status be_embed(void *ctx, const tq_be_mat *e, const int32_t *tok, int n, float scale, float *x)
{
    tqc_be *b = (tqc_be *)ctx;
    const bool f32 = e->dtype == TQ_DTYPE_F32;
    if ((e->dtype != TQ_DTYPE_BF16 && !f32) || n > b->max_n)
        return TQC_FAIL(TQ_E_UNSUPPORTED, "CUDA backend: embedding lookup takes bf16 or f32 rows and <= %d tokens",
                        b->max_n);
    const int32_t *dt = nullptr;
    int32_t t0 = tok[0];
    if (n > 1) {
        TQC_CUDA(cudaMemcpyAsync(b->tok, tok, (size_t)n * 4, cudaMemcpyHostToDevice, b->stream));
        dt = b->tok;
        t0 = 0;
    }
    if (f32)
        embed_kernel<<<n, 256, 0, b->stream>>>((const float *)e->w, dt, t0, (int)e->cols, scale, x);
    else
        embed_kernel<<<n, 256, 0, b->stream>>>((const __nv_bfloat16 *)e->w, dt, t0, (int)e->cols, scale, x);
    return TQ_OK;
}

void be_rmsnorm(void *ctx, float *o, const float *x, const float *w, int64_t rows, int width, float eps, int p1)
{
    tqc_be *b = (tqc_be *)ctx;
    if (rows > 0)
        rmsnorm_kernel<<<(unsigned)rows, width >= 256 ? 256 : 128, 0, b->stream>>>(o, x, w, width, eps, p1);
}

template <int PRE>
void launch_gemv(tqc_be *b, const gemv_outs &o, int cols, const float *src, const float *aux, float eps, int p1)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)o.blk_end[o.n - 1]);
    cfg.blockDim = dim3(256);
    cfg.stream = b->stream;
    int any_ex = 0;
    for (int i = 0; i < o.n; i++)
        any_ex |= o.ex[i];
    cfg.dynamicSmemBytes = (size_t)cols * (any_ex ? 4 : 2);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = b->pdl ? 1 : 0;
    BE_TRY(b, cudaLaunchKernelEx(&cfg, gemv_kernel<PRE>, o, cols, src, aux, eps, p1));
}

template <int PRE>
void launch_pre(tqc_be *b, const tq_be_mm *a, const float *aux, bool lo)
{
    pre_kernel<PRE><<<(unsigned)a->n, 256, 0, b->stream>>>(a->x, aux, (int)a->cols, a->eps, a->plus_one, b->xb,
                                                           lo ? b->xlo : nullptr);
}

// output i of job a takes its input exactly (TQC_EXACT_*; tq_be_mm.kv_first: the K / V outputs)
bool exact_out(const tqc_be *b, const tq_be_mm *a, int i)
{
    return b->exact == TQC_EXACT_ALL || (b->exact == TQC_EXACT_KV && a->kv_first > 0 && i >= a->kv_first);
}

// y (rows x n, ld ldy) = beta y + W xb; exact: + W xlo too (a second GEMM, beta 1): the input as
// hi + lo bf16 parts is x to 2^-16 relative, and the products of bf16 operands are exact in the
// fp32 accumulation, so the sum is the f32-input product up to fp32 summation order
tq_status cublas_gemm(tqc_be *b, int rows, int n, int cols, const void *w, float beta, float *y, int ldy,
                      bool exact = false)
{
    const float alpha = 1.0f, one = 1.0f;
    cublasStatus_t cs = cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, w, CUDA_R_16BF,
                                     cols, b->xb, CUDA_R_16BF, cols, &beta, y, CUDA_R_32F, ldy,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (cs == CUBLAS_STATUS_SUCCESS && exact)
        cs = cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, w, CUDA_R_16BF, cols, b->xlo,
                          CUDA_R_16BF, cols, &one, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (cs != CUBLAS_STATUS_SUCCESS)
        return TQC_FAIL(TQ_E_CUDA, "cuBLAS: cublasGemmEx (%d x %d x %d%s): status %d", rows, n, cols,
                        exact ? ", hi + lo" : "", (int)cs);
    return TQ_OK;
}

// native single products of at least this many rows (a vocabulary head) decode through the
// wide kernel when it runs them (tq_cuda_qgemv_wide)
constexpr int64_t TQC_WIDE_MIN_ROWS = 16384;

// same job of two matrices (one launch of tq_cuda_qgemv_job)?
bool same_qjob(const tq_cuda_qmat *x, const tq_cuda_qmat *y)
{
    return x->fmt == y->fmt && x->cols == y->cols && x->bits == y->bits && x->group == y->group &&
           x->sb_f16 == y->sb_f16;
}

// A job with native (quantized, tq_be_mat.native = tq_cuda_qmat) outputs; dense bf16 outputs of
// the same job go through the dense kernels. Decode (n = 1, the GEMV kernels on): per run of
// outputs of one format a fused tq_cuda_qgemv_job (input transform + quantizer + GEMV, residual
// folded in), the dense ones one GEMV launch. Otherwise (prefill): the transform into f32 rows
// (NORM into xn, SILU/GELU in place, as backend.h), then tq_cuda_qgemv per native output (the
// activation quantized once per call, tokens in launches of <= 8) and cuBLAS for dense outputs.
tq_status matmul_native(tqc_be *b, const tq_be_mm *a)
{
    const int cols = (int)a->cols, n = (int)a->n;
    const float *aux = a->pre == TQ_BE_PRE_NORM ? a->norm : a->up;
    bool dense_ok = true;
    for (int i = 0; i < a->n_out; i++)
        if (!a->out[i].w.native && a->out[i].w.dtype != TQ_DTYPE_BF16)
            dense_ok = false;
    if (!dense_ok)
        return TQC_FAIL(TQ_E_UNSUPPORTED, "CUDA backend matmul: dense weights must be bf16");
    if (n == 1 && b->gemv && b->wide_head && a->n_out == 1 && !a->res && (a->pre == TQ_BE_PRE_NORM || a->pre == TQ_BE_PRE_NONE) &&
        ((const tq_cuda_qmat *)a->out[0].w.native)->rows >= TQC_WIDE_MIN_ROWS &&
        tq_cuda_qgemv_wide((const tq_cuda_qmat *)a->out[0].w.native)) {
        // a head-sized single product (the vocabulary rows): the norm, then the wide kernel
        // (persistent blocks streaming rows through shared memory) instead of the decode job's
        // one warp per row (SmolLM2's Q8_0 head: 43.5 us cold, ncu s24)
        const float *xin = a->x;
        if (a->pre == TQ_BE_PRE_NORM) {
            rmsnorm_kernel<<<1, 256, 0, b->stream>>>(a->xn, a->x, a->norm, cols, a->eps, a->plus_one);
            xin = a->xn;
        }
        return tq_cuda_qgemv((const tq_cuda_qmat *)a->out[0].w.native, xin, cols, 1, a->out[0].y, a->out[0].ldy,
                             b->qact, b->stream);
    }
    if (n == 1 && b->gemv && a->cols <= TQ_CUDA_QJOB_MAXC && cols % 8 == 0 && cols <= GEMV_MAXC) {
        const bool fold = a->res && !a->post_norm;
        gemv_outs o = {};
        int be = 0;
        for (int i = 0; i < a->n_out; i++) {
            if (a->out[i].w.native)
                continue;
            o.w[o.n] = (const __nv_bfloat16 *)a->out[i].w.w;
            o.rows[o.n] = (int)a->out[i].w.rows;
            o.y[o.n] = fold ? a->res : a->out[i].y;
            o.acc[o.n] = fold;
            o.ex[o.n] = exact_out(b, a, i);
            be += (o.rows[o.n] + 7) / 8;
            o.blk_end[o.n++] = be;
        }
        if (o.n)
            switch (a->pre) {
            case TQ_BE_PRE_NORM: launch_gemv<TQ_BE_PRE_NORM>(b, o, cols, a->x, aux, a->eps, a->plus_one); break;
            case TQ_BE_PRE_SILU: launch_gemv<TQ_BE_PRE_SILU>(b, o, cols, a->x, aux, a->eps, a->plus_one); break;
            case TQ_BE_PRE_GELU: launch_gemv<TQ_BE_PRE_GELU>(b, o, cols, a->x, aux, a->eps, a->plus_one); break;
            default: launch_gemv<TQ_BE_PRE_NONE>(b, o, cols, a->x, aux, a->eps, a->plus_one); break;
            }
        for (int i = 0; i < a->n_out;) {
            if (!a->out[i].w.native) {
                i++;
                continue;
            }
            tq_cuda_qjob j = {};
            j.src = a->x;
            j.aux = aux;
            j.pre = a->pre;
            j.eps = a->eps;
            j.plus_one = a->plus_one;
            const tq_cuda_qmat *m0 = (const tq_cuda_qmat *)a->out[i].w.native;
            for (; i < a->n_out && a->out[i].w.native && j.n_out < 4 &&
                   same_qjob(m0, (const tq_cuda_qmat *)a->out[i].w.native); i++) {
                j.m[j.n_out] = (const tq_cuda_qmat *)a->out[i].w.native;
                j.y[j.n_out] = fold ? a->res : a->out[i].y;
                j.acc[j.n_out++] = fold;
            }
            const tq_status st = tq_cuda_qgemv_job(&j, b->stream, b->pdl);
            if (st != TQ_OK)
                return st;
        }
        if (a->res && !fold)
            add_norm_kernel<<<n, 256, 0, b->stream>>>(a->res, a->out[0].y, a->out[0].ldy, a->post_norm,
                                                       (int)a->out[0].w.rows, a->eps, a->plus_one);
        return TQ_OK;
    }
    const float *xin = a->x;
    if (a->pre == TQ_BE_PRE_NORM) {
        rmsnorm_kernel<<<(unsigned)n, 256, 0, b->stream>>>(a->xn, a->x, a->norm, cols, a->eps, a->plus_one);
        xin = a->xn;
    } else if (a->pre == TQ_BE_PRE_SILU) {
        act_kernel<TQ_BE_PRE_SILU><<<blocks_for((int64_t)n * cols), 256, 0, b->stream>>>(a->x, a->up, (int64_t)n * cols);
    } else if (a->pre == TQ_BE_PRE_GELU) {
        act_kernel<TQ_BE_PRE_GELU><<<blocks_for((int64_t)n * cols), 256, 0, b->stream>>>(a->x, a->up, (int64_t)n * cols);
    }
    bool have_xb = false, lo = false;
    for (int i = 0; i < a->n_out; i++)
        lo |= !a->out[i].w.native && exact_out(b, a, i);
    for (int i = 0; i < a->n_out; i++) {
        const tq_be_out *o = &a->out[i];
        tq_status st;
        if (o->w.native && b->dq_min_n > 0 && n >= b->dq_min_n &&
            ((const tq_cuda_qmat *)o->w.native)->fmt != TQ_CUDA_QGEMV_MLX) {
            // prefill: the matrix as bf16 rows in the scratch (grown on demand; prefill is never
            // captured in a graph), then the dense GEMM
            const tq_cuda_qmat *q = (const tq_cuda_qmat *)o->w.native;
            const size_t need = (size_t)q->rows * (size_t)q->cols * 2;
            if (need > b->dq_bytes) {
                cudaFree(b->dq);
                b->dq = nullptr;
                b->dq_bytes = 0;
                const cudaError_t e = cudaMalloc(&b->dq, need);
                if (e != cudaSuccess)
                    return TQC_FAIL(TQ_E_CUDA, "CUDA backend: bf16 scratch of %zu bytes: %s", need, cudaGetErrorString(e));
                b->dq_bytes = need;
            }
            st = tq_cuda_qgemv_dequant_bf16(q, b->dq, b->stream);
            if (st != TQ_OK)
                return st;
            if (!have_xb) {
                pre_kernel<TQ_BE_PRE_NONE><<<(unsigned)n, 256, 0, b->stream>>>(xin, nullptr, cols, a->eps, 0, b->xb,
                                                                             lo ? b->xlo : nullptr);
                have_xb = true;
            }
            st = cublas_gemm(b, (int)o->w.rows, n, cols, b->dq, 0.0f, o->y, (int)o->ldy);
        } else if (o->w.native) {
            const tq_cuda_qmat *q = (const tq_cuda_qmat *)o->w.native;
            if (tq_cuda_qgemv_act_bytes(q, n) > b->qact_bytes)
                return TQC_FAIL(TQ_E_ARG, "CUDA backend matmul: %d tokens of %d columns exceed the activation "
                                "workspace (%zu bytes)", n, cols, b->qact_bytes);
            st = tq_cuda_qgemv(q, xin, cols, n, o->y, o->ldy, b->qact, b->stream);
        } else {
            if (!have_xb) {
                pre_kernel<TQ_BE_PRE_NONE><<<(unsigned)n, 256, 0, b->stream>>>(xin, nullptr, cols, a->eps, 0, b->xb,
                                                                             lo ? b->xlo : nullptr);
                have_xb = true;
            }
            st = cublas_gemm(b, (int)o->w.rows, n, cols, o->w.w, 0.0f, o->y, (int)o->ldy, exact_out(b, a, i));
        }
        if (st != TQ_OK)
            return st;
    }
    if (a->res)
        add_norm_kernel<<<n, 256, 0, b->stream>>>(a->res, a->out[0].y, a->out[0].ldy, a->post_norm,
                                                   (int)a->out[0].w.rows, a->eps, a->plus_one);
    return TQ_OK;
}

// A job of dense f32 weights (the evaluation path: `tq ppl/kl/teacher --cuda --weights f32`):
// the input transform into f32 rows (xf), then cuBLAS SGEMM-class products with f32 inputs and
// CUBLAS_COMPUTE_32F_PEDANTIC: plain fp32 FMA arithmetic, never TF32 (nor any reduced-precision
// tensor-core path), so the GPU differs from the CPU's f32 forward only in summation order.
// Every n (decode too) takes this path.
tq_status matmul_f32(tqc_be *b, const tq_be_mm *a)
{
    const int cols = (int)a->cols, n = (int)a->n;
    const float *aux = a->pre == TQ_BE_PRE_NORM ? a->norm : a->up;
    const bool fold = a->res && !a->post_norm;
    switch (a->pre) {
    case TQ_BE_PRE_NORM: pre_kernel<TQ_BE_PRE_NORM, float><<<(unsigned)n, 256, 0, b->stream>>>(a->x, aux, cols, a->eps, a->plus_one, b->xf); break;
    case TQ_BE_PRE_SILU: pre_kernel<TQ_BE_PRE_SILU, float><<<(unsigned)n, 256, 0, b->stream>>>(a->x, aux, cols, a->eps, a->plus_one, b->xf); break;
    case TQ_BE_PRE_GELU: pre_kernel<TQ_BE_PRE_GELU, float><<<(unsigned)n, 256, 0, b->stream>>>(a->x, aux, cols, a->eps, a->plus_one, b->xf); break;
    default: pre_kernel<TQ_BE_PRE_NONE, float><<<(unsigned)n, 256, 0, b->stream>>>(a->x, aux, cols, a->eps, a->plus_one, b->xf); break;
    }
    int64_t R = 0;
    bool one = a->n_out > 1 && !fold;
    for (int i = 0; i < a->n_out; i++) {
        const tq_be_out *o = &a->out[i];
        if (i + 1 < a->n_out && (const char *)o->w.w + o->w.rows * cols * 4 != (const char *)a->out[i + 1].w.w)
            one = false;
        R += o->w.rows;
    }
    const float alpha = 1.0f;
    if (one && R <= b->max_rows) {
        const float beta = 0.0f;
        const cublasStatus_t cs =
            cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)R, n, cols, &alpha, a->out[0].w.w, CUDA_R_32F, cols,
                         b->xf, CUDA_R_32F, cols, &beta, b->ys, CUDA_R_32F, (int)R, CUBLAS_COMPUTE_32F_PEDANTIC,
                         CUBLAS_GEMM_DEFAULT);
        if (cs != CUBLAS_STATUS_SUCCESS)
            return TQC_FAIL(TQ_E_CUDA, "cuBLAS: cublasGemmEx f32 (%d x %d x %d): status %d", (int)R, n, cols, (int)cs);
        scatter_outs so = {};
        so.n = a->n_out;
        for (int i = 0; i < a->n_out; i++) {
            so.y[i] = a->out[i].y;
            so.ldy[i] = a->out[i].ldy;
            so.off[i + 1] = so.off[i] + (int)a->out[i].w.rows;
        }
        scatter_kernel<<<n, 256, 0, b->stream>>>(b->ys, so);
        return TQ_OK;
    }
    for (int i = 0; i < a->n_out; i++) {
        const tq_be_out *o = &a->out[i];
        const int rows = (int)o->w.rows;
        const float beta = fold ? 1.0f : 0.0f;
        float *y = fold ? a->res : o->y;
        const int ldy = fold ? rows : (int)o->ldy;
        const cublasStatus_t cs =
            cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, o->w.w, CUDA_R_32F, cols, b->xf,
                         CUDA_R_32F, cols, &beta, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT);
        if (cs != CUBLAS_STATUS_SUCCESS)
            return TQC_FAIL(TQ_E_CUDA, "cuBLAS: cublasGemmEx f32 (%d x %d x %d): status %d", rows, n, cols, (int)cs);
    }
    if (a->res && !fold)
        add_norm_kernel<<<n, 256, 0, b->stream>>>(a->res, a->out[0].y, a->out[0].ldy, a->post_norm,
                                                   (int)a->out[0].w.rows, a->eps, a->plus_one);
    return TQ_OK;
}

tq_status be_matmul(void *ctx, const tq_be_mm *a)
{
    tqc_be *b = (tqc_be *)ctx;
    const int cols = (int)a->cols, n = (int)a->n;
    if (a->n_out < 1 || a->n_out > 4 || n < 1 || n > b->max_n || a->cols > b->max_cols)
        return TQC_FAIL(TQ_E_ARG, "CUDA backend matmul: %d outputs, %d rows of %d (max %d rows of %lld)", a->n_out,
                        n, cols, b->max_n, (long long)b->max_cols);
    for (int i = 0; i < a->n_out; i++)
        if (a->out[i].w.native)
            return matmul_native(b, a);
    int nf32 = 0;
    for (int i = 0; i < a->n_out; i++)
        nf32 += a->out[i].w.dtype == TQ_DTYPE_F32;
    if (nf32 == a->n_out && b->xf)
        return matmul_f32(b, a);
    for (int i = 0; i < a->n_out; i++)
        if (a->out[i].w.dtype != TQ_DTYPE_BF16)
            return TQC_FAIL(TQ_E_UNSUPPORTED, "CUDA backend matmul: dense weights must be bf16 (or all f32)");
    const float *aux = a->pre == TQ_BE_PRE_NORM ? a->norm : a->up;
    const bool fold = a->res && !a->post_norm; // residual add inside the product
    if (n == 1 && b->gemv && cols % 8 == 0 && cols <= GEMV_MAXC) {
        gemv_outs o = {};
        o.n = a->n_out;
        int be = 0;
        for (int i = 0; i < a->n_out; i++) {
            o.w[i] = (const __nv_bfloat16 *)a->out[i].w.w;
            o.rows[i] = (int)a->out[i].w.rows;
            o.y[i] = fold ? a->res : a->out[i].y;
            o.acc[i] = fold;
            o.ex[i] = exact_out(b, a, i);
            be += (o.rows[i] + 7) / 8;
            o.blk_end[i] = be;
        }
        switch (a->pre) {
        case TQ_BE_PRE_NORM: launch_gemv<TQ_BE_PRE_NORM>(b, o, cols, a->x, aux, a->eps, a->plus_one); break;
        case TQ_BE_PRE_SILU: launch_gemv<TQ_BE_PRE_SILU>(b, o, cols, a->x, aux, a->eps, a->plus_one); break;
        case TQ_BE_PRE_GELU: launch_gemv<TQ_BE_PRE_GELU>(b, o, cols, a->x, aux, a->eps, a->plus_one); break;
        default: launch_gemv<TQ_BE_PRE_NONE>(b, o, cols, a->x, aux, a->eps, a->plus_one); break;
        }
    } else {
        int ex0 = a->n_out; // the first exact output (the exact ones are a suffix: kv_first.. or all)
        for (int i = a->n_out - 1; i >= 0 && exact_out(b, a, i); i--)
            ex0 = i;
        const bool lo = ex0 < a->n_out;
        switch (a->pre) {
        case TQ_BE_PRE_NORM: launch_pre<TQ_BE_PRE_NORM>(b, a, aux, lo); break;
        case TQ_BE_PRE_SILU: launch_pre<TQ_BE_PRE_SILU>(b, a, aux, lo); break;
        case TQ_BE_PRE_GELU: launch_pre<TQ_BE_PRE_GELU>(b, a, aux, lo); break;
        default: launch_pre<TQ_BE_PRE_NONE>(b, a, aux, lo); break;
        }
        // outputs whose weights follow each other in memory (the session uploads q|k|v and
        // gate|up that way): one GEMM into ys, one scatter
        int64_t R = 0;
        bool one = a->n_out > 1 && !fold;
        for (int i = 0; i < a->n_out; i++) {
            const tq_be_out *o = &a->out[i];
            if (i + 1 < a->n_out && (const char *)o->w.w + o->w.rows * cols * 2 != (const char *)a->out[i + 1].w.w)
                one = false;
            R += o->w.rows;
        }
        if (one && R <= b->max_rows) {
            const float alpha = 1.0f, beta = 0.0f;
            const cublasStatus_t cs =
                cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)R, n, cols, &alpha, a->out[0].w.w, CUDA_R_16BF,
                             cols, b->xb, CUDA_R_16BF, cols, &beta, b->ys, CUDA_R_32F, (int)R, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT);
            if (cs != CUBLAS_STATUS_SUCCESS)
                return TQC_FAIL(TQ_E_CUDA, "cuBLAS: cublasGemmEx (%d x %d x %d): status %d", (int)R, n, cols, (int)cs);
            scatter_outs so = {};
            so.n = a->n_out;
            for (int i = 0; i < a->n_out; i++) {
                so.y[i] = a->out[i].y;
                so.ldy[i] = a->out[i].ldy;
                so.off[i + 1] = so.off[i] + (int)a->out[i].w.rows;
            }
            if (lo) { // the exact outputs' rows (a suffix of ys's columns): + W xlo
                const cublasStatus_t cl = cublasGemmEx(
                    b->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)R - so.off[ex0], n, cols, &alpha, a->out[ex0].w.w,
                    CUDA_R_16BF, cols, b->xlo, CUDA_R_16BF, cols, &alpha, b->ys + so.off[ex0], CUDA_R_32F, (int)R,
                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                if (cl != CUBLAS_STATUS_SUCCESS)
                    return TQC_FAIL(TQ_E_CUDA, "cuBLAS: cublasGemmEx (lo part, %d x %d x %d): status %d",
                                    (int)R - so.off[ex0], n, cols, (int)cl);
            }
            scatter_kernel<<<n, 256, 0, b->stream>>>(b->ys, so);
            return TQ_OK;
        }
        for (int i = 0; i < a->n_out; i++) {
            const tq_be_out *o = &a->out[i];
            const int rows = (int)o->w.rows;
            float *y = fold ? a->res : o->y;
            const int ldy = fold ? rows : (int)o->ldy;
            const tq_status st = cublas_gemm(b, rows, n, cols, o->w.w, fold ? 1.0f : 0.0f, y, ldy, i >= ex0);
            if (st != TQ_OK)
                return st;
        }
    }
    if (a->res && !fold) {
        const int rows = (int)a->out[0].w.rows;
        add_norm_kernel<<<n, 256, 0, b->stream>>>(a->res, a->out[0].y, a->out[0].ldy, a->post_norm, rows, a->eps,
                                                   a->plus_one);
    }
    return TQ_OK;
}

void be_bias(void *ctx, float *y, const float *bv, int64_t n, int width)
{
    tqc_be *b = (tqc_be *)ctx;
    bias_kernel<<<blocks_for(n * width), 256, 0, b->stream>>>(y, bv, n * width, width);
}

void be_rope(void *ctx, float *q, int nh, float *k, int nkv, int64_t n, int hd, int rd, const float *inv_freq,
             int64_t pos0, float *cs)
{
    tqc_be *b = (tqc_be *)ctx;
    if (n > 0 && rd >= 2)
        rope_kernel<<<(unsigned)n, 256, 0, b->stream>>>(q, nh, k, nkv, hd, rd, inv_freq, pos0);
}

tq_status be_attend(void *ctx, void *kvp, int il, int64_t pos0, const float *k, const float *v, const float *q,
                    int64_t n, float *out)
{
    tqc_be *b = (tqc_be *)ctx;
    if (b->kvf) { // the f32 cache: stateless here (its length is pos0 + n)
        if (il < 0 || il >= b->kvf_layers || pos0 < 0 || pos0 + n > b->kvf_cap)
            return TQC_FAIL(TQ_E_ARG, "CUDA backend attend (f32 cache): layer %d, tokens %lld..%lld of %lld", il,
                            (long long)pos0, (long long)(pos0 + n), (long long)b->kvf_cap);
        const int nkv = b->kvf_heads, hd = b->kvf_hd;
        const size_t plane = (size_t)nkv * (size_t)b->kvf_cap * hd;
        float *kc = b->kvf + (size_t)il * 2 * plane, *vc = kc + plane;
        kvf32_append_kernel<<<(unsigned)n, 256, 0, b->stream>>>(k, v, nkv, hd, b->kvf_cap, pos0, kc, vc);
        const size_t shm = ((size_t)hd + (size_t)(pos0 + n)) * 4;
        attend_f32_kernel<<<dim3((unsigned)n, (unsigned)b->n_heads), 128, shm, b->stream>>>(
            kc, vc, b->kvf_cap, b->n_heads / nkv, hd, pos0, q, b->n_heads, b->scale, out);
        return TQ_OK;
    }
    tq_cuda_kv *c = ((tq_cuda_kv **)kvp)[il];
    if (tq_cuda_kv_length(c) != pos0)
        return TQC_FAIL(TQ_E_ARG, "CUDA backend attend: layer %d holds %lld tokens, the forward appends at %lld", il,
                        (long long)tq_cuda_kv_length(c), (long long)pos0);
    tq_status st = tq_cuda_kv_append(c, TQ_DTYPE_F32, k, v, (int)n, 1);
    if (st != TQ_OK)
        return st;
    // the attention kernel takes n_q * group <= 64 query rows per call: a longer prefill chunk
    // attends in blocks of queries, each over the cache cut at its last query (causal)
    int nkv = 1, hd = 1;
    tqc_kv_shape(c, &nkv, &hd);
    const int qb = 64 / (b->n_heads / nkv);
    if (n <= qb)
        return tq_cuda_kv_attend(c, q, (int)n, b->n_heads, b->scale, out, 1);
    const size_t qd = (size_t)b->n_heads * hd;
    for (int64_t i0 = 0; i0 < n && st == TQ_OK; i0 += qb) {
        const int m = (int)(n - i0 < qb ? n - i0 : qb);
        if ((st = tq_cuda_kv_set_length(c, pos0 + i0 + m)) == TQ_OK)
            st = tq_cuda_kv_attend(c, q + (size_t)i0 * qd, m, b->n_heads, b->scale, out + (size_t)i0 * qd, 1);
    }
    const tq_status sl = tq_cuda_kv_set_length(c, pos0 + n);
    return st != TQ_OK ? st : sl;
}

void be_softcap(void *ctx, float *y, int64_t n, float c)
{
    tqc_be *b = (tqc_be *)ctx;
    softcap_kernel<<<blocks_for(n), 256, 0, b->stream>>>(y, n, c);
}

// ---- the device greedy sampler (tqc_be_greedy) ----------------------------------------------
// Block b scans ids [b * GR_PER, (b + 1) * GR_PER): the key of a logit is tq_sampler's (NaN ->
// -inf, +inf -> FLT_MAX), a penalised id (a bit set in the block's shared mask) gets the
// repetition penalty's formula on that key, and the best is the larger key, then the lower id
// (strictly greater wins within a thread, whose ids rise). The last block to finish (an atomic
// counter, reset by it) merges the blocks' bests in the same order. -inf never wins: a row
// without a finite key gives -1 (the CPU sampler's error).
constexpr int GR_PER = 2048, GR_T = 256;

__device__ inline void gr_better(float &bv, int &bi, float v, int i)
{
    if (v > bv || (v == bv && i < bi)) {
        bv = v;
        bi = i;
    }
}

__device__ inline void gr_block_best(float &bv, int &bi, float *wv, int *wi)
{
    for (int o = 16; o; o >>= 1)
        gr_better(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) {
        wv[wid] = bv;
        wi[wid] = bi;
    }
    __syncthreads();
    bv = wv[0];
    bi = wi[0];
    for (int w = 1; w < GR_T / 32; w++)
        gr_better(bv, bi, wv[w], wi[w]);
}

__global__ void __launch_bounds__(GR_T) greedy_kernel(const float *lg, int vocab, tqc_greedy_pen pen, float *pv,
                                                      int *pi, unsigned *count, int32_t *out)
{
    __shared__ unsigned mark[GR_PER / 32];
    __shared__ float wv[GR_T / 32];
    __shared__ int wi[GR_T / 32];
    __shared__ bool last;
    const int lo = blockIdx.x * GR_PER, hi = min(vocab, lo + GR_PER);
    for (int j = threadIdx.x; j < GR_PER / 32; j += GR_T)
        mark[j] = 0;
    __syncthreads();
    for (int j = threadIdx.x; j < pen.n; j += GR_T) {
        const int t = pen.id[j];
        if (t >= lo && t < hi)
            atomicOr(&mark[(t - lo) >> 5], 1u << ((t - lo) & 31));
    }
    __syncthreads();
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int i = lo + threadIdx.x; i < hi; i += GR_T) {
        float v = __ldg(lg + i);
        v = isnan(v) ? -INFINITY : v == INFINITY ? FLT_MAX : v;
        if ((mark[(i - lo) >> 5] >> ((i - lo) & 31)) & 1u)
            v = v > 0.0f ? __fdiv_rn(v, pen.penalty) : __fmul_rn(v, pen.penalty);
        if (v > bv) {
            bv = v;
            bi = i;
        }
    }
    gr_block_best(bv, bi, wv, wi);
    if (threadIdx.x == 0) {
        pv[blockIdx.x] = bv;
        pi[blockIdx.x] = bi;
        __threadfence();
        last = atomicAdd(count, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    bv = -INFINITY;
    bi = 0x7fffffff;
    for (int j = threadIdx.x; j < (int)gridDim.x; j += GR_T)
        gr_better(bv, bi, __ldcg(pv + j), __ldcg(pi + j));
    __syncthreads(); // wv / wi reused
    gr_block_best(bv, bi, wv, wi);
    if (threadIdx.x == 0) {
        *out = bv == -INFINITY ? -1 : bi;
        *count = 0;
    }
}

} // namespace

extern "C" const tq_backend tq_backend_cuda = {
    "cuda", be_embed, be_rmsnorm, be_matmul, be_bias, be_rope, be_attend, be_softcap, nullptr,
};

extern "C" void tqc_be_free(tqc_be *b)
{
    if (!b)
        return;
    if (b->stream)
        cudaStreamSynchronize(b->stream);
    if (b->gexec)
        cudaGraphExecDestroy(b->gexec);
    cudaFree(b->xb);
    cudaFree(b->xlo);
    cudaFree(b->xf);
    cudaFree(b->kvf);
    cudaFree(b->ys);
    cudaFree(b->tok);
    cudaFree(b->qact);
    cudaFree(b->dq);
    cudaFree(b->gr_v);
    cudaFree(b->gr_i);
    cudaFree(b->gr_count);
    cudaFree(b->gr_out);
    if (b->blas)
        cublasDestroy(b->blas);
    if (b->stream)
        cudaStreamDestroy(b->stream);
    tq_free(b);
}

extern "C" tq_status tqc_be_create(int max_n, int64_t max_cols, int64_t max_rows, int n_heads, float attn_scale,
                                   tqc_be **out)
{
    *out = NULL;
    tqc_be *b = (tqc_be *)tq_calloc(1, sizeof(*b));
    if (!b)
        return TQC_FAIL(TQ_E_NOMEM, "CUDA backend: out of host memory");
    b->max_n = max_n;
    b->max_cols = max_cols;
    b->max_rows = max_rows;
    b->n_heads = n_heads;
    b->scale = attn_scale;
    b->gemv = 1;
    b->wide_head = 1;
    b->dq_min_n = 9; // above the qgemv's 8-token launches
    int dev = 0, major = 0;
    b->pdl = cudaGetDevice(&dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
    (void)cudaGetLastError();
    tq_status st = TQ_OK;
    cudaError_t e = cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&b->xb, (size_t)max_n * (size_t)max_cols * 2);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&b->xlo, (size_t)max_n * (size_t)max_cols * 2);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&b->xf, (size_t)max_n * (size_t)max_cols * 4);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&b->ys, (size_t)max_n * (size_t)max_rows * 4);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&b->tok, (size_t)max_n * 4);
    if (e == cudaSuccess) { // the widest activation of the native products (the q8a layout is the larger)
        tq_cuda_qmat qm = {};
        qm.fmt = TQ_GGML_Q8_0;
        qm.rows = 1;
        qm.cols = (max_cols + 255) / 256 * 256;
        b->qact_bytes = tq_cuda_qgemv_act_bytes(&qm, max_n);
        e = cudaMalloc(&b->qact, b->qact_bytes + 16);
    }
    if (e != cudaSuccess)
        st = TQC_FAIL(TQ_E_CUDA, "CUDA backend: %s", cudaGetErrorString(e));
    else if (cublasCreate(&b->blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(b->blas, b->stream) != CUBLAS_STATUS_SUCCESS)
        st = TQC_FAIL(TQ_E_CUDA, "CUDA backend: cuBLAS initialisation failed: %s", tqc_cublas_error());
    if (st != TQ_OK) {
        tqc_be_free(b);
        return st;
    }
    *out = b;
    return TQ_OK;
}

extern "C" tq_status tqc_be_alloc(tqc_be *b, void **p, size_t n, size_t *bytes)
{
    *p = NULL;
    TQC_CUDA(cudaMalloc(p, n ? n : 1));
    if (bytes)
        *bytes += n;
    return TQ_OK;
}

extern "C" tq_status tqc_be_upload(tqc_be *b, void *dst, const void *src, size_t n)
{
    TQC_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, b->stream));
    TQC_CUDA(cudaStreamSynchronize(b->stream));
    return TQ_OK;
}

extern "C" tq_status tqc_be_download(tqc_be *b, void *dst, const void *src, size_t n)
{
    TQC_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, b->stream));
    TQC_CUDA(cudaStreamSynchronize(b->stream));
    return TQ_OK;
}

extern "C" void tqc_be_dfree(void *p)
{
    cudaFree(p);
}

extern "C" tq_status tqc_be_status(tqc_be *b)
{
    BE_TRY(b, cudaGetLastError()); // a failed launch of any op since the last call
    const tq_status st = b->err;
    b->err = TQ_OK;
    return st;
}

extern "C" tq_status tqc_be_sync(tqc_be *b)
{
    TQC_CUDA(cudaStreamSynchronize(b->stream));
    return tqc_be_status(b);
}

extern "C" void tqc_be_bind_kv(tqc_be *b, tq_cuda_kv *c, int on)
{
    tqc_kv_use_stream(c, on ? b->stream : NULL);
}

extern "C" void tqc_be_set_gemv(tqc_be *b, int on)
{
    b->gemv = on;
}

extern "C" void tqc_be_set_wide_head(tqc_be *b, int on)
{
    b->wide_head = on;
}

extern "C" void tqc_be_set_exact(tqc_be *b, int mode)
{
    b->exact = mode == TQC_EXACT_NONE || mode == TQC_EXACT_ALL ? mode : TQC_EXACT_KV;
}

extern "C" void tqc_be_set_prefill_dq(tqc_be *b, int min_n)
{
    b->dq_min_n = min_n > 0 ? min_n : 0;
}

extern "C" void tqc_be_set_pdl(tqc_be *b, int on)
{
    int dev = 0, major = 0;
    b->pdl = on && cudaGetDevice(&dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
    (void)cudaGetLastError();
}

extern "C" size_t tqc_be_kv_bytes(const tq_cuda_kv *c)
{
    return tqc_kv_device_bytes(c);
}

extern "C" tq_status tqc_be_graph_begin(tqc_be *b)
{
    BE_TRY(b, cudaGetLastError()); // an earlier failure is reported, not captured over
    if (b->err != TQ_OK)
        return tqc_be_status(b);
    // relaxed: the ops may call cudaMalloc-class functions (they are not stream work); a stream
    // synchronize or a host copy inside the capture invalidates it, and tqc_be_graph_end says so
    TQC_CUDA(cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeRelaxed));
    return TQ_OK;
}

extern "C" int tqc_be_graph_end(tqc_be *b, int launch)
{
    cudaGraph_t g = nullptr;
    const cudaError_t e = cudaStreamEndCapture(b->stream, &g);
    const bool bad = e != cudaSuccess || !g || b->err != TQ_OK;
    b->err = TQ_OK;
    (void)cudaGetLastError();
    if (bad || !launch) {
        if (g)
            cudaGraphDestroy(g);
        return 0;
    }
    if (b->gexec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(b->gexec, g, &info) == cudaSuccess) {
            b->n_update++;
        } else { // another topology (the attention's plan changed): instantiate anew
            (void)cudaGetLastError();
            cudaGraphExecDestroy(b->gexec);
            b->gexec = nullptr;
        }
    }
    if (!b->gexec) {
        if (cudaGraphInstantiate(&b->gexec, g, 0) != cudaSuccess) {
            (void)cudaGetLastError();
            b->gexec = nullptr;
            cudaGraphDestroy(g);
            return 0;
        }
        b->n_inst++;
    }
    cudaGraphDestroy(g);
    if (cudaGraphLaunch(b->gexec, b->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return 1;
}

extern "C" void tqc_be_graph_counts(const tqc_be *b, long *inst, long *update)
{
    *inst = b->n_inst;
    *update = b->n_update;
}

extern "C" tq_status tqc_be_kv_f32(tqc_be *b, int n_layers, int n_kv_heads, int head_dim, int64_t cap, size_t *bytes)
{
    if (n_layers < 1 || n_kv_heads < 1 || head_dim < 1 || cap < 1 || b->n_heads % n_kv_heads)
        return TQC_FAIL(TQ_E_ARG, "CUDA backend: f32 cache of %d layers, %d kv heads, head_dim %d, %lld tokens",
                        n_layers, n_kv_heads, head_dim, (long long)cap);
    int dev = 0, optin = 0;
    TQC_CUDA(cudaGetDevice(&dev));
    TQC_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const size_t shm = ((size_t)head_dim + (size_t)cap) * 4;
    if (shm + 32 * 4 > (size_t)optin)
        return TQC_FAIL(TQ_E_UNSUPPORTED, "CUDA backend: the f32 cache's attention keeps a row of scores in shared "
                        "memory: %lld tokens need %zu bytes, this GPU has %d per block (use n_ctx <= %lld)",
                        (long long)cap, shm, optin, (long long)(optin / 4 - head_dim - 64));
    TQC_CUDA(cudaFuncSetAttribute(attend_f32_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm));
    const size_t n = (size_t)n_layers * 2 * n_kv_heads * (size_t)cap * head_dim * 4;
    cudaFree(b->kvf);
    b->kvf = nullptr;
    TQC_CUDA(cudaMalloc((void **)&b->kvf, n));
    TQC_CUDA(cudaMemsetAsync(b->kvf, 0, n, b->stream));
    b->kvf_layers = n_layers;
    b->kvf_heads = n_kv_heads;
    b->kvf_hd = head_dim;
    b->kvf_cap = cap;
    if (bytes)
        *bytes = n;
    return TQ_OK;
}

extern "C" tq_status tqc_be_row_stats(tqc_be *b, const float *lg, int rows, int vocab, const int32_t *ids, int k,
                                      float *picked, double *lse, int32_t *am)
{
    if (rows < 1)
        return TQ_OK;
    row_stats_kernel<<<(unsigned)rows, 256, 0, b->stream>>>(lg, vocab, ids, k, picked, lse, am);
    TQC_CUDA(cudaGetLastError());
    return TQ_OK;
}

extern "C" tq_status tqc_be_greedy(tqc_be *b, const float *lg, int vocab, const tqc_greedy_pen *pen)
{
    if (vocab < 1 || (pen && (pen->n < 0 || pen->n > TQC_GREEDY_MAX_PEN || (pen->n && !(pen->penalty > 0.0f)))))
        return TQC_FAIL(TQ_E_ARG, "CUDA backend: greedy over %d logits, %d penalised ids", vocab, pen ? pen->n : 0);
    const int nb = (vocab + GR_PER - 1) / GR_PER;
    if (nb > b->gr_cap) { // first call (eager: the prompt's step), or a larger row
        cudaFree(b->gr_v);
        cudaFree(b->gr_i);
        b->gr_v = nullptr;
        b->gr_i = nullptr;
        b->gr_cap = 0;
        TQC_CUDA(cudaMalloc((void **)&b->gr_v, (size_t)nb * 4));
        TQC_CUDA(cudaMalloc((void **)&b->gr_i, (size_t)nb * 4));
        if (!b->gr_count) {
            TQC_CUDA(cudaMalloc((void **)&b->gr_count, 4));
            TQC_CUDA(cudaMalloc((void **)&b->gr_out, 4));
            TQC_CUDA(cudaMemsetAsync(b->gr_count, 0, 4, b->stream));
        }
        b->gr_cap = nb;
    }
    tqc_greedy_pen none = {};
    greedy_kernel<<<(unsigned)nb, GR_T, 0, b->stream>>>(lg, vocab, pen ? *pen : none, b->gr_v, b->gr_i, b->gr_count,
                                                        b->gr_out);
    BE_TRY(b, cudaGetLastError()); // reported by tqc_be_status() / the fetch
    return TQ_OK;
}

extern "C" tq_status tqc_be_greedy_fetch(tqc_be *b, int32_t *tok)
{
    if (!b->gr_out)
        return TQC_FAIL(TQ_E_ARG, "CUDA backend: greedy result fetched before any greedy call");
    const tq_status st = tqc_be_download(b, tok, b->gr_out, 4);
    return st != TQ_OK ? st : tqc_be_status(b);
}
