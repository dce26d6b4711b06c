// fwd.cu -- the engine's forward pass on the GPU (include/turboquant/cuda.h, tq_cuda_session):
// weights as bf16 on the device, cuBLAS GEMMs (bf16 x bf16 -> fp32 accumulate and output),
// small kernels for the embedding lookup, RMSNorm (-> bf16 GEMM input), RoPE (rotate_half, the
// CPU forward's convention, src/model/forward.c), SwiGLU, and the device KV cache of kv_cache.cu
// (append + fused attention) per layer. Residual adds are folded into the Wo and Wdown GEMMs
// (beta = 1 into the fp32 residual stream). One stream per session; batch 1; prefill in chunks of
// up to 64 / group tokens (the attention kernel's rows per pass).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cuda/kv_cuda.cuh"

extern "C" {
#include "cuda/fwd_cuda.h"
}

extern "C" void *tq_malloc(size_t n);
extern "C" void *tq_calloc(size_t n, size_t size);
extern "C" void tq_free(void *p);

namespace {

struct layer_dev {
    float *attn_norm, *ffn_norm;
    __nv_bfloat16 *wqkv; // (qd + 2 kvd, dim): wq | wk | wv
    __nv_bfloat16 *wo;   // (dim, qd)
    __nv_bfloat16 *wgu;  // (2 ffn, dim): w_gate | w_up
    __nv_bfloat16 *wd;   // (dim, ffn)
};

#define TQC_CUBLAS(call)                                                                         \
    do {                                                                                         \
        cublasStatus_t s_ = (call);                                                              \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                         \
            return TQC_FAIL(TQ_E_CUDA, "cuBLAS: %s: status %d", #call, (int)s_);                 \
    } while (0)

__global__ void embed_kernel(const __nv_bfloat16 *emb, const int32_t *tok, int dim, float sc, float *x)
{
    const int t = blockIdx.x;
    const __nv_bfloat16 *e = emb + (size_t)tok[t] * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        x[(size_t)t * dim + i] = __bfloat162float(e[i]) * sc;
}

// y_bf16[t] = x[t] / rms(x[t]) * w  (one block of 256 threads per row)
__global__ void rmsnorm_kernel(const float *x, const float *w, int dim, float eps, __nv_bfloat16 *y)
{
    __shared__ float red[32];
    const int t = blockIdx.x;
    const float *xr = x + (size_t)t * dim;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        ss += xr[i] * xr[i];
    for (int o = 16; o; o >>= 1)
        ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : 0.0f;
        for (int o = 16; o; o >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0)
            red[0] = v;
    }
    __syncthreads();
    const float r = 1.0f / sqrtf(red[0] / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        y[(size_t)t * dim + i] = __float2bfloat16(xr[i] * r * w[i]);
}

// qkv (n, qd + 2 kvd) -> q (n, qd), k (n, kvd) rotated at positions pos0 + t, v (n, kvd).
// RoPE pairs i with i + rope_dim/2 of each head (cos/sin of pos * inv_freq[i], fp32 as the CPU).
__global__ void rope_split_kernel(const float *qkv, int nh, int nkv, int hd, int rd, const float *inv_freq,
                                  int64_t pos0, float *q, float *k, float *v)
{
    const int t = blockIdx.x;
    const int qd = nh * hd, kvd = nkv * hd, w = qd + 2 * kvd, half = rd / 2;
    const float *row = qkv + (size_t)t * w;
    const float pos = (float)(pos0 + t);
    for (int i = threadIdx.x; i < w; i += blockDim.x) {
        float val = row[i];
        const bool isq = i < qd, isk = !isq && i < qd + kvd;
        if (isq || isk) {
            const int j = (isq ? i : i - qd) % hd;
            if (j < rd) {
                const int jj = j < half ? j : j - half;
                const float ang = pos * inv_freq[jj];
                const float c = cosf(ang), s = sinf(ang);
                if (j < half)
                    val = val * c - row[i + half] * s;
                else
                    val = val * c + row[i - half] * s;
            }
        }
        if (isq)
            q[(size_t)t * qd + i] = val;
        else if (isk)
            k[(size_t)t * kvd + i - qd] = val;
        else
            v[(size_t)t * kvd + i - qd - kvd] = val;
    }
}

// h_bf16 (n, ffn) = silu(gu[:, :ffn]) * gu[:, ffn:]
__global__ void swiglu_kernel(const float *gu, int ffn, int64_t total, __nv_bfloat16 *h)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / ffn, j = i % ffn;
        const float g = gu[t * 2 * ffn + j], u = gu[t * 2 * ffn + ffn + j];
        h[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
    }
}

__global__ void to_bf16_kernel(const float *x, int64_t n, __nv_bfloat16 *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16(x[i]);
}

// Decode (one token): y[r] = x . W[r] (+ y[r] when accumulate), the input transform fused in:
//   XM_NORM:   x = bf16(src / rms(src) * nw)         (RMSNorm of the fp32 residual stream)
//   XM_PLAIN:  x = bf16(src)                          (the attention output)
//   XM_SWIGLU: x = bf16(silu(src[j]) * src[cols + j]) (gate | up of the MLP)
// Each block stages x in shared memory (bf16, as the GEMM path rounds it), then one warp per row
// does 16-byte loads of 8 bf16 weights, fp32 accumulation. cols % 8 == 0, cols <= GEMV_MAXC.
enum { XM_NORM = 0, XM_PLAIN = 1, XM_SWIGLU = 2 };
constexpr int GEMV_MAXC = 8192;
template <int XM>
__global__ void __launch_bounds__(256) gemv_kernel(const __nv_bfloat16 *w, int rows, int cols, const float *src,
                                                   const float *nw, float eps, float *y, int accumulate)
{
    __shared__ __align__(16) __nv_bfloat16 xs[GEMV_MAXC];
    __shared__ float red[8];
    const int t = threadIdx.x, lane = t & 31, wid = t >> 5;
    float r = 1.0f;
    if constexpr (XM == XM_NORM) {
        float ss = 0.0f;
        for (int i = t; i < cols; i += 256)
            ss += src[i] * src[i];
        for (int o = 16; o; o >>= 1)
            ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (lane == 0)
            red[wid] = ss;
        __syncthreads();
        ss = 0.0f;
        for (int k = 0; k < 8; k++)
            ss += red[k];
        r = 1.0f / sqrtf(ss / (float)cols + eps);
    }
    for (int i = t; i < cols; i += 256) {
        float v;
        if constexpr (XM == XM_NORM)
            v = src[i] * r * nw[i];
        else if constexpr (XM == XM_PLAIN)
            v = src[i];
        else {
            const float g = src[i];
            v = g / (1.0f + expf(-g)) * src[cols + i];
        }
        xs[i] = __float2bfloat16(v);
    }
    __syncthreads();
    const int row = blockIdx.x * 8 + wid;
    if (row >= rows)
        return;
    const uint4 *wr = reinterpret_cast<const uint4 *>(w + (size_t)row * cols);
    const uint4 *xr = reinterpret_cast<const uint4 *>(xs);
    float acc = 0.0f;
    for (int i = lane; i < cols / 8; i += 32) {
        const uint4 a = __ldg(wr + i), b = xr[i];
        const __nv_bfloat162 *a2 = reinterpret_cast<const __nv_bfloat162 *>(&a);
        const __nv_bfloat162 *b2 = reinterpret_cast<const __nv_bfloat162 *>(&b);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 fa = __bfloat1622float2(a2[k]), fb = __bfloat1622float2(b2[k]);
            acc = fmaf(fa.x, fb.x, acc);
            acc = fmaf(fa.y, fb.y, acc);
        }
    }
    for (int o = 16; o; o >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0)
        y[row] = accumulate ? y[row] + acc : acc;
}

int blocks_for(int64_t n)
{
    const int64_t b = (n + 255) / 256;
    return (int)(b > 1024 ? 1024 : b < 1 ? 1 : b);
}

} // namespace

struct tq_cuda_session {
    tqc_fwd_desc d; // dims only (pointers not kept)
    int qd, kvd, chunk;
    cudaStream_t stream;
    cublasHandle_t blas;
    std::vector<layer_dev> *L;
    std::vector<tq_cuda_kv *> *kv;
    __nv_bfloat16 *embed, *lm_head;
    float *final_norm, *inv_freq;
    // activations, sized for `chunk` tokens
    int32_t *tok;
    float *x, *qkv, *q, *k, *v, *att, *gu, *logits;
    __nv_bfloat16 *xb, *hb;
    int64_t n_past, n_ctx;
    size_t weight_bytes, kv_bytes;
    int gemv_ok; // the shapes fit the fused GEMV kernels
    int gemv;    // 1: decode steps through them (tq_cuda_session_opts.no_gemv: the cuBLAS path)
};

extern "C" void tq_cuda_session_free(tq_cuda_session *s)
{
    if (!s)
        return;
    if (s->stream)
        cudaStreamSynchronize(s->stream);
    if (s->kv) {
        for (tq_cuda_kv *c : *s->kv) {
            if (c)
                tqc_kv_use_stream(c, NULL);
            tq_cuda_kv_free(c);
        }
        delete s->kv;
    }
    if (s->L) {
        for (layer_dev &l : *s->L) {
            cudaFree(l.attn_norm);
            cudaFree(l.ffn_norm);
            cudaFree(l.wqkv);
            cudaFree(l.wo);
            cudaFree(l.wgu);
            cudaFree(l.wd);
        }
        delete s->L;
    }
    if (s->lm_head != s->embed)
        cudaFree(s->lm_head);
    cudaFree(s->embed);
    cudaFree(s->final_norm);
    cudaFree(s->inv_freq);
    void *bufs[] = {s->tok, s->x, s->qkv, s->q, s->k, s->v, s->att, s->gu, s->logits, s->xb, s->hb};
    for (void *p : bufs)
        cudaFree(p);
    if (s->blas)
        cublasDestroy(s->blas);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    tq_free(s);
}

// Device copy of `n` elements of `es` bytes from host parts (concatenated), counted in *bytes.
static tq_status upload(void **dst, size_t *bytes, size_t es, const void *const *parts, const size_t *counts, int n_parts)
{
    size_t total = 0;
    for (int i = 0; i < n_parts; i++)
        total += counts[i];
    TQC_CUDA(cudaMalloc(dst, total * es));
    size_t off = 0;
    for (int i = 0; i < n_parts; i++) {
        TQC_CUDA(cudaMemcpy((uint8_t *)*dst + off * es, parts[i], counts[i] * es, cudaMemcpyHostToDevice));
        off += counts[i];
    }
    *bytes += total * es;
    return TQ_OK;
}

static tq_status upload1(void **dst, size_t *bytes, size_t es, const void *src, size_t n)
{
    return upload(dst, bytes, es, &src, &n, 1);
}

tq_status tqc_fwd_create(const tqc_fwd_desc *d, tq_kv_scheme kvs, int64_t n_ctx, tq_cuda_session **out)
{
    *out = NULL;
    tq_status st = tq_cuda_kv_supported(kvs, d->head_dim);
    if (st != TQ_OK)
        return st;
    tq_cuda_session *s = (tq_cuda_session *)tq_calloc(1, sizeof(*s));
    if (!s)
        return TQC_FAIL(TQ_E_NOMEM, "tq_cuda_session_create: out of host memory");
    s->d = *d;
    s->d.embed = s->d.lm_head = NULL;
    s->d.final_norm = s->d.inv_freq = NULL;
    s->d.layers = NULL;
    s->n_ctx = n_ctx;
    {
        const int cmax = d->dim > d->ffn ? d->dim : d->ffn;
        s->gemv_ok = d->dim % 8 == 0 && d->ffn % 8 == 0 && (d->n_heads * d->head_dim) % 8 == 0 &&
                     cmax <= GEMV_MAXC && d->n_heads * d->head_dim <= GEMV_MAXC;
        s->gemv = s->gemv_ok;
    }
    s->qd = d->n_heads * d->head_dim;
    s->kvd = d->n_kv_heads * d->head_dim;
    const int group = d->n_heads / d->n_kv_heads;
    s->chunk = 64 / group < 1 ? 1 : 64 / group;
    const size_t dim = d->dim, qd = s->qd, kvd = s->kvd, ffn = d->ffn, C = s->chunk;
#define TRY(x)                                                                                   \
    do {                                                                                         \
        if ((st = (x)) != TQ_OK)                                                                 \
            goto fail;                                                                           \
    } while (0)
    {
        cudaError_t e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            st = TQC_FAIL(TQ_E_CUDA, "tq_cuda_session_create: stream: %s", cudaGetErrorString(e));
            goto fail;
        }
        if (cublasCreate(&s->blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(s->blas, s->stream) != CUBLAS_STATUS_SUCCESS) {
            st = TQC_FAIL(TQ_E_CUDA, "tq_cuda_session_create: cuBLAS initialisation failed");
            goto fail;
        }
        s->L = new std::vector<layer_dev>(d->n_layers);
        s->kv = new std::vector<tq_cuda_kv *>(d->n_layers, nullptr);
        size_t wb = 0;
        TRY(upload1((void **)&s->embed, &wb, 2, d->embed, (size_t)d->vocab * dim));
        if (d->lm_head == d->embed)
            s->lm_head = s->embed;
        else
            TRY(upload1((void **)&s->lm_head, &wb, 2, d->lm_head, (size_t)d->vocab * dim));
        TRY(upload1((void **)&s->final_norm, &wb, 4, d->final_norm, dim));
        TRY(upload1((void **)&s->inv_freq, &wb, 4, d->inv_freq, (size_t)d->rope_dim / 2));
        for (int il = 0; il < d->n_layers; il++) {
            const tqc_fwd_layer *w = &d->layers[il];
            layer_dev &l = (*s->L)[il];
            TRY(upload1((void **)&l.attn_norm, &wb, 4, w->attn_norm, dim));
            TRY(upload1((void **)&l.ffn_norm, &wb, 4, w->ffn_norm, dim));
            const void *qkv[3] = {w->wq, w->wk, w->wv};
            const size_t nqkv[3] = {qd * dim, kvd * dim, kvd * dim};
            TRY(upload((void **)&l.wqkv, &wb, 2, qkv, nqkv, 3));
            TRY(upload1((void **)&l.wo, &wb, 2, w->wo, dim * qd));
            const void *gu[2] = {w->w_gate, w->w_up};
            const size_t ngu[2] = {ffn * dim, ffn * dim};
            TRY(upload((void **)&l.wgu, &wb, 2, gu, ngu, 2));
            TRY(upload1((void **)&l.wd, &wb, 2, w->w_down, dim * ffn));
            TRY(tq_cuda_kv_create(kvs, d->head_dim, d->n_kv_heads, n_ctx, 1, &(*s->kv)[il]));
            tqc_kv_use_stream((*s->kv)[il], s->stream);
            s->kv_bytes += tqc_kv_device_bytes((*s->kv)[il]);
        }
        s->weight_bytes = wb;
        const size_t mx = dim > qd ? (dim > ffn ? dim : ffn) : (qd > ffn ? qd : ffn);
        cudaError_t e2 = cudaSuccess;
        void **bp[] = {(void **)&s->tok, (void **)&s->x, (void **)&s->qkv, (void **)&s->q, (void **)&s->k,
                       (void **)&s->v, (void **)&s->att, (void **)&s->gu, (void **)&s->logits,
                       (void **)&s->xb, (void **)&s->hb};
        const size_t bsz[] = {C * 4, C * dim * 4, C * (qd + 2 * kvd) * 4, C * qd * 4, C * kvd * 4, C * kvd * 4,
                              C * qd * 4, C * 2 * ffn * 4, (size_t)d->vocab * 4, C * mx * 2, C * ffn * 2};
        for (int i = 0; i < (int)(sizeof(bsz) / sizeof(bsz[0])) && e2 == cudaSuccess; i++)
            e2 = cudaMalloc(bp[i], bsz[i]);
        if (e2 != cudaSuccess) {
            st = TQC_FAIL(TQ_E_CUDA, "tq_cuda_session_create: activation buffers: %s", cudaGetErrorString(e2));
            goto fail;
        }
    }
#undef TRY
    *out = s;
    return TQ_OK;
fail:
    tq_cuda_session_free(s);
    return st;
}

// y(n, rows) fp32 = x(n, cols) bf16 . W(rows, cols)^T (+ beta * y)
static tq_status gemm(tq_cuda_session *s, const __nv_bfloat16 *w, int rows, int cols, const __nv_bfloat16 *x, int n,
                      float *y, float beta)
{
    const float alpha = 1.0f;
    TQC_CUBLAS(cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, w, CUDA_R_16BF, cols, x,
                            CUDA_R_16BF, cols, &beta, y, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return TQ_OK;
}

static tq_status forward_chunk(tq_cuda_session *s, const int32_t *tokens, int n, float *logits)
{
    const tqc_fwd_desc *d = &s->d;
    const int dim = d->dim, qd = s->qd, kvd = s->kvd, ffn = d->ffn;
    tq_status st;
    TQC_CUDA(cudaMemcpyAsync(s->tok, tokens, (size_t)n * 4, cudaMemcpyHostToDevice, s->stream));
    embed_kernel<<<n, 256, 0, s->stream>>>(s->embed, s->tok, dim, d->embed_scale, s->x);
    const bool gv = n == 1 && s->gemv;
    for (int il = 0; il < d->n_layers && gv; il++) { // decode: 7 launches per layer
        const layer_dev &l = (*s->L)[il];
        tq_cuda_kv *c = (*s->kv)[il];
        const int wq = qd + 2 * kvd;
        gemv_kernel<XM_NORM><<<(wq + 7) / 8, 256, 0, s->stream>>>(l.wqkv, wq, dim, s->x, l.attn_norm, d->eps, s->qkv, 0);
        rope_split_kernel<<<1, 256, 0, s->stream>>>(s->qkv, d->n_heads, d->n_kv_heads, d->head_dim, d->rope_dim,
                                                    s->inv_freq, s->n_past, s->q, s->k, s->v);
        if ((st = tq_cuda_kv_append(c, TQ_DTYPE_F32, s->k, s->v, 1, 1)))
            return st;
        if ((st = tq_cuda_kv_attend(c, s->q, 1, d->n_heads, d->attn_scale, s->att, 1)))
            return st;
        gemv_kernel<XM_PLAIN><<<(dim + 7) / 8, 256, 0, s->stream>>>(l.wo, dim, qd, s->att, NULL, 0.0f, s->x, 1);
        gemv_kernel<XM_NORM><<<(2 * ffn + 7) / 8, 256, 0, s->stream>>>(l.wgu, 2 * ffn, dim, s->x, l.ffn_norm, d->eps,
                                                                       s->gu, 0);
        gemv_kernel<XM_SWIGLU><<<(dim + 7) / 8, 256, 0, s->stream>>>(l.wd, dim, ffn, s->gu, NULL, 0.0f, s->x, 1);
    }
    for (int il = 0; il < d->n_layers && !gv; il++) {
        const layer_dev &l = (*s->L)[il];
        tq_cuda_kv *c = (*s->kv)[il];
        rmsnorm_kernel<<<n, 256, 0, s->stream>>>(s->x, l.attn_norm, dim, d->eps, s->xb);
        if ((st = gemm(s, l.wqkv, qd + 2 * kvd, dim, s->xb, n, s->qkv, 0.0f)))
            return st;
        rope_split_kernel<<<n, 256, 0, s->stream>>>(s->qkv, d->n_heads, d->n_kv_heads, d->head_dim, d->rope_dim,
                                                    s->inv_freq, s->n_past, s->q, s->k, s->v);
        if ((st = tq_cuda_kv_append(c, TQ_DTYPE_F32, s->k, s->v, n, 1)))
            return st;
        if ((st = tq_cuda_kv_attend(c, s->q, n, d->n_heads, d->attn_scale, s->att, 1)))
            return st;
        to_bf16_kernel<<<blocks_for((int64_t)n * qd), 256, 0, s->stream>>>(s->att, (int64_t)n * qd, s->xb);
        if ((st = gemm(s, l.wo, dim, qd, s->xb, n, s->x, 1.0f)))
            return st;
        rmsnorm_kernel<<<n, 256, 0, s->stream>>>(s->x, l.ffn_norm, dim, d->eps, s->xb);
        if ((st = gemm(s, l.wgu, 2 * ffn, dim, s->xb, n, s->gu, 0.0f)))
            return st;
        swiglu_kernel<<<blocks_for((int64_t)n * ffn), 256, 0, s->stream>>>(s->gu, ffn, (int64_t)n * ffn, s->hb);
        if ((st = gemm(s, l.wd, dim, ffn, s->hb, n, s->x, 1.0f)))
            return st;
    }
    TQC_CUDA(cudaGetLastError());
    if (logits) {
        if (gv) {
            gemv_kernel<XM_NORM><<<(d->vocab + 7) / 8, 256, 0, s->stream>>>(s->lm_head, d->vocab, dim, s->x,
                                                                           s->final_norm, d->eps, s->logits, 0);
        } else {
            rmsnorm_kernel<<<1, 256, 0, s->stream>>>(s->x + (size_t)(n - 1) * dim, s->final_norm, dim, d->eps, s->xb);
            if ((st = gemm(s, s->lm_head, d->vocab, dim, s->xb, 1, s->logits, 0.0f)))
                return st;
        }
        TQC_CUDA(cudaMemcpyAsync(logits, s->logits, (size_t)d->vocab * 4, cudaMemcpyDeviceToHost, s->stream));
        TQC_CUDA(cudaStreamSynchronize(s->stream));
    }
    return TQ_OK;
}

extern "C" tq_status tq_cuda_session_eval(tq_cuda_session *s, const int32_t *tokens, int64_t n, float *logits_last)
{
    if (!s || !tokens)
        return TQC_FAIL(TQ_E_ARG, "tq_cuda_session_eval: NULL %s", !s ? "session" : "tokens");
    if (n < 1)
        return TQC_FAIL(TQ_E_ARG, "tq_cuda_session_eval: n = %lld tokens (need >= 1)", (long long)n);
    if (s->n_past + n > s->n_ctx)
        return TQC_FAIL(TQ_E_OVERFLOW, "tq_cuda_session_eval: %lld + %lld tokens exceed n_ctx %lld (%lld fit)",
                        (long long)s->n_past, (long long)n, (long long)s->n_ctx, (long long)(s->n_ctx - s->n_past));
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->d.vocab)
            return TQC_FAIL(TQ_E_ARG, "tq_cuda_session_eval: token %lld is %d (valid: 0..%d)", (long long)i,
                            (int)tokens[i], s->d.vocab - 1);
    for (int64_t t0 = 0; t0 < n; t0 += s->chunk) {
        const int m = (int)(n - t0 < s->chunk ? n - t0 : s->chunk);
        tq_status st = forward_chunk(s, tokens + t0, m, t0 + m == n ? logits_last : NULL);
        if (st != TQ_OK)
            return st;
        s->n_past += m;
    }
    return TQ_OK;
}

extern "C" int64_t tq_cuda_session_n_past(const tq_cuda_session *s)
{
    return s ? s->n_past : 0;
}

extern "C" void tq_cuda_session_reset(tq_cuda_session *s)
{
    if (!s)
        return;
    cudaStreamSynchronize(s->stream);
    for (tq_cuda_kv *c : *s->kv)
        tq_cuda_kv_set_length(c, 0);
    s->n_past = 0;
}

extern "C" tq_status tq_cuda_session_sync(tq_cuda_session *s)
{
    if (!s)
        return TQC_FAIL(TQ_E_ARG, "tq_cuda_session_sync: NULL session");
    TQC_CUDA(cudaStreamSynchronize(s->stream));
    return TQ_OK;
}

extern "C" tq_status tq_cuda_session_set_opts(tq_cuda_session *s, const tq_cuda_session_opts *o)
{
    if (!s || !o)
        return TQC_FAIL(TQ_E_ARG, "tq_cuda_session_set_opts: NULL %s", !s ? "session" : "options");
    for (tq_cuda_kv *c : *s->kv) {
        const tq_status st = tq_cuda_kv_set_opts(c, &o->kv);
        if (st != TQ_OK)
            return st;
    }
    s->gemv = s->gemv_ok && !o->no_gemv;
    return TQ_OK;
}

extern "C" tq_status tq_cuda_session_bytes(const tq_cuda_session *s, size_t *weights, size_t *kv)
{
    if (!s)
        return TQC_FAIL(TQ_E_ARG, "tq_cuda_session_bytes: NULL session");
    if (weights)
        *weights = s->weight_bytes;
    if (kv)
        *kv = s->kv_bytes;
    return TQ_OK;
}

extern "C" tq_status tq_cuda_session_debug(tq_cuda_session *s, int il, tq_cuda_kv **kv, const float **q_last,
                                           const float **att_last)
{
    if (!s || il < 0 || il >= s->d.n_layers)
        return TQC_FAIL(TQ_E_ARG, "tq_cuda_session_debug: %s", !s ? "NULL session" : "layer out of range");
    TQC_CUDA(cudaStreamSynchronize(s->stream));
    if (kv)
        *kv = (*s->kv)[il];
    if (q_last)
        *q_last = s->q;
    if (att_last)
        *att_last = s->att;
    return TQ_OK;
}
