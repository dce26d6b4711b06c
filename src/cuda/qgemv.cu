// qgemv.cu -- quantized GEMV on the GPU: Q8_0, Q4_0, Q4_1, Q4_K, Q6_K and MLX affine (bits 4/8) rows
// against q8-quantized activations (qgemv.h says what is computed and how it relates to the CPU's
// q8 path in src/cpu/qdot.c).
//
// Layout of the work: one warp per row (4 rows per 128-thread block); a row is cut into "units"
// of 8 or 16 weights (a few bytes of one block), lane l takes units l, l + 32, ...; each lane
// first loads U units (U * 32 lanes in flight per warp), then decodes them: nibbles / 6-bit
// values into bytes with one or two LOP3s per 4 weights, dp4a against the int8 activation (exact
// int32), one f32 scale multiply per unit. The lanes' partials are summed by shuffles. Blocks
// that are only 2-byte aligned (18 / 34 / 210 bytes) are read as 16-bit halves.
//
// Activations (per token, tok_stride bytes apart, 16-byte aligned): qs int8[cols], then f32 d per
// block (32 or 256 values), then (32-blocks) f32 s = d * sum(qs). For MLX 4-bit the int8 values of
// each 8 are stored in the order 0 2 4 6 1 3 5 7 (the order of the low and high nibbles of a code
// word), so that one LOP3 per 4 weights lines them up; tq_cuda_qgemv_host() undoes it.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda/pdl.cuh"
#include "cuda/qgemv.h"
extern "C" tq_status tq_fail_(tq_status st, const char *file, int line, const char *fmt, ...);

#define QG_FAIL(st, ...) tq_fail_((st), __FILE__, __LINE__, __VA_ARGS__)
#define QG_CUDA(call)                                                                            \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess)                                                                   \
            return QG_FAIL(TQ_E_CUDA, "CUDA: %s: %s", #call, cudaGetErrorString(e_));           \
    } while (0)

namespace {

// Kernel-side format ids (the template argument).
enum { F_Q8_0 = 1, F_Q4_0, F_Q4_K, F_Q6_K, F_MLX4, F_MLX8, F_Q4_1 };

int kfmt(const tq_cuda_qmat *m)
{
    switch (m->fmt) {
    case TQ_GGML_Q8_0: return F_Q8_0;
    case TQ_GGML_Q4_0: return F_Q4_0;
    case TQ_GGML_Q4_1: return F_Q4_1;
    case TQ_GGML_Q4_K: return F_Q4_K;
    case TQ_GGML_Q6_K: return F_Q6_K;
    case TQ_CUDA_QGEMV_MLX: return m->bits == 4 ? F_MLX4 : m->bits == 8 ? F_MLX8 : 0;
    default: return 0;
    }
}

// activation block of a format: 32 (q8a rule) or 256 (q8k rule)
int act_block(int f)
{
    return f == F_Q4_K || f == F_Q6_K ? 256 : 32;
}

size_t al16(size_t v)
{
    return (v + 15) & ~(size_t)15;
}
__host__ __device__ inline size_t al16_d(size_t v)
{
    return (v + 15) & ~(size_t)15;
}

struct act_geom {
    size_t off_d, off_s, stride;
};

act_geom act_geom_of(int f, int64_t cols)
{
    act_geom g;
    const size_t nb = (size_t)cols / (size_t)act_block(f);
    g.off_d = al16((size_t)cols);
    g.off_s = al16(g.off_d + 4 * nb);
    g.stride = act_block(f) == 32 ? al16(g.off_s + 4 * nb) : g.off_s;
    return g;
}

// Programmatic dependent launch (cuda/pdl.cuh): the quantizer lets the GEMV start at once; the
// GEMV issues its first weight loads, then waits for the quantizer's activations.

// ---- activation quantizers (the bytes of src/cpu/qdot.c quant_q8a / quant_q8k) -------------
// One warp per 32-block; PERM: MLX 4-bit order inside each 8.
template <bool PERM>
__global__ void quant_a32_kernel(const float *__restrict__ x, int64_t ldx, int64_t cols,
                                 uint8_t *__restrict__ act, act_geom ag)
{
    pdl_trigger();
    const int lane = threadIdx.x & 31;
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= cols / 32)
        return;
    const int t = blockIdx.y;
    const float v = x[t * ldx + 32 * b + lane];
    float amax = fabsf(v); // fmaxf ignores NaN, as the CPU's "v > amax ? v : amax"
    for (int o = 16; o; o >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const int q = __float2int_rn(fminf(fmaxf(v * id, -127.0f), 127.0f)); // nearbyintf
    uint8_t *a = act + (size_t)t * ag.stride;
    int pos = lane;
    if (PERM) {
        const int k = lane & 7;
        pos = (lane & ~7) | ((k & 1) ? 4 + (k >> 1) : (k >> 1));
    }
    a[32 * b + pos] = (uint8_t)(int8_t)q;
    const int sum = __reduce_add_sync(0xffffffffu, q);
    if (lane == 0) {
        ((float *)(a + ag.off_d))[b] = d;
        ((float *)(a + ag.off_s))[b] = d * (float)sum;
    }
}

// One warp per 256-block (the tq_q8k rule; the kernels need no bsums).
__global__ void quant_a256_kernel(const float *__restrict__ x, int64_t ldx, int64_t cols,
                                  uint8_t *__restrict__ act, act_geom ag)
{
    pdl_trigger();
    const int lane = threadIdx.x & 31;
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= cols / 256)
        return;
    const int t = blockIdx.y;
    const float *xb = x + t * ldx + 256 * b;
    float v[8];
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        v[e] = xb[32 * e + lane];
        amax = fmaxf(amax, fabsf(v[e]));
    }
    for (int o = 16; o; o >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t *a = act + (size_t)t * ag.stride;
#pragma unroll
    for (int e = 0; e < 8; e++)
        a[256 * b + 32 * e + lane] = (uint8_t)(int8_t)__float2int_rn(fminf(fmaxf(v[e] * id, -127.0f), 127.0f));
    if (lane == 0)
        ((float *)(a + ag.off_d))[b] = d;
}

// ---- the GEMV ---------------------------------------------------------------------------------
struct qargs {
    const uint8_t *w;
    size_t row_bytes;
    int64_t rows, cols;
    const uint16_t *sc, *bi; // MLX
    int sb_f16, group;
    const uint8_t *act;
    act_geom ag;
    float *y;
    int64_t ldy;
};

__device__ __forceinline__ int dp4a(int a, int b, int c)
{
    return __dp4a(a, b, c);
}
// unsigned bytes of a times signed bytes of b (MLX 8-bit codes 0..255)
__device__ __forceinline__ int dp4a_us(unsigned a, int b, int c)
{
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t *p)
{
    const uint16_t *q = (const uint16_t *)p;
    return (uint32_t)q[0] | ((uint32_t)q[1] << 16);
}
__device__ __forceinline__ float h2f(uint32_t h)
{
    return __half2float(__ushort_as_half((unsigned short)h));
}
__device__ __forceinline__ float sb2f(uint32_t h, int f16)
{
    return f16 ? h2f(h) : __uint_as_float(h << 16);
}

// Per format: elements and bytes of a block, units per block, the raw registers of one unit,
// its loader and its dot against one token's activation.
template <int F> struct fmt;

template <> struct fmt<F_Q4_0> {
    static constexpr int BE = 32, BB = 18, UPB = 4, U = 8;
    struct raw { uint32_t d, q; };
    struct av { int a0, a1; float da; };
    static __device__ __forceinline__ void load(raw &r, const uint8_t *row, int u, const qargs &)
    {
        const uint8_t *p = row + BB * (u >> 2);
        r.d = *(const uint16_t *)p;
        r.q = ld_u32_a2(p + 2 + 4 * (u & 3));
    }
    static __device__ __forceinline__ void lda(av &v, const uint8_t *a, const qargs &g, int u)
    {
        const int b = u >> 2;
        const int i = (u & 3);
        v.a0 = *(const int *)(a + 32 * b + 4 * i);
        v.a1 = *(const int *)(a + 32 * b + 16 + 4 * i);
        v.da = ((const float *)(a + g.ag.off_d))[b];
    }
    static __device__ __forceinline__ float dot(const raw &r, const av &v, const qargs &, int)
    {
        const int lo = (int)(r.q & 0x0f0f0f0fu), hi = (int)((r.q >> 4) & 0x0f0f0f0fu);
        const int s = dp4a(lo, v.a0, dp4a(hi, v.a1, 0)) - dp4a(0x08080808, v.a0, dp4a(0x08080808, v.a1, 0));
        return (h2f(r.d) * v.da) * (float)s;
    }
};

// Q4_1: value d * q + m; against the q8a activation (d_a, s_a = d_a * sum(a)) per block
// d * d_a * sum(q * a) + m * s_a, the min added by the block's first unit
template <> struct fmt<F_Q4_1> {
    static constexpr int BE = 32, BB = 20, UPB = 4, U = 8;
    struct raw { uint32_t dm, q; };
    struct av { int a0, a1; float da, sa; };
    static __device__ __forceinline__ void load(raw &r, const uint8_t *row, int u, const qargs &)
    {
        const uint8_t *p = row + BB * (u >> 2);
        r.dm = *(const uint32_t *)p;
        r.q = *(const uint32_t *)(p + 4 + 4 * (u & 3));
    }
    static __device__ __forceinline__ void lda(av &v, const uint8_t *a, const qargs &g, int u)
    {
        const int b = u >> 2;
        const int i = (u & 3);
        v.a0 = *(const int *)(a + 32 * b + 4 * i);
        v.a1 = *(const int *)(a + 32 * b + 16 + 4 * i);
        v.da = ((const float *)(a + g.ag.off_d))[b];
        v.sa = i ? 0.0f : ((const float *)(a + g.ag.off_s))[b];
    }
    static __device__ __forceinline__ float dot(const raw &r, const av &v, const qargs &, int)
    {
        const int lo = (int)(r.q & 0x0f0f0f0fu), hi = (int)((r.q >> 4) & 0x0f0f0f0fu);
        const int s = dp4a(lo, v.a0, dp4a(hi, v.a1, 0));
        return (h2f(r.dm & 0xffffu) * v.da) * (float)s + h2f(r.dm >> 16) * v.sa;
    }
};

template <> struct fmt<F_Q8_0> {
    static constexpr int BE = 32, BB = 34, UPB = 4, U = 4;
    struct raw { uint32_t d, q0, q1; };
    struct av { int2 a; float da; };
    static __device__ __forceinline__ void load(raw &r, const uint8_t *row, int u, const qargs &)
    {
        const uint8_t *p = row + BB * (u >> 2);
        r.d = *(const uint16_t *)p;
        r.q0 = ld_u32_a2(p + 2 + 8 * (u & 3));
        r.q1 = ld_u32_a2(p + 6 + 8 * (u & 3));
    }
    static __device__ __forceinline__ void lda(av &v, const uint8_t *a, const qargs &g, int u)
    {
        const int b = u >> 2;
        v.a = *(const int2 *)(a + 32 * b + 8 * (u & 3));
        v.da = ((const float *)(a + g.ag.off_d))[b];
    }
    static __device__ __forceinline__ float dot(const raw &r, const av &v, const qargs &, int)
    {
        const int s = dp4a((int)r.q0, v.a.x, dp4a((int)r.q1, v.a.y, 0));
        return (h2f(r.d) * v.da) * (float)s;
    }
};

template <> struct fmt<F_Q4_K> {
    static constexpr int BE = 256, BB = 144, UPB = 16, U = 4;
    struct raw { uint4 h; uint2 q; };
    struct av { int2 al, ah; float da; };
    static __device__ __forceinline__ void load(raw &r, const uint8_t *row, int u, const qargs &)
    {
        const uint8_t *p = row + BB * (u >> 4);
        const int t = (u & 15), j = t >> 2, i = t & 3;
        r.h = *(const uint4 *)p; // d, dmin, 12 scale bytes
        r.q = *(const uint2 *)(p + 16 + 32 * j + 8 * i);
    }
    static __device__ __forceinline__ void lda(av &v, const uint8_t *a, const qargs &g, int u)
    {
        const int b = u >> 4;
        const int t = (u & 15), j = t >> 2, i = t & 3;
        v.al = *(const int2 *)(a + 256 * b + 64 * j + 8 * i);
        v.ah = *(const int2 *)(a + 256 * b + 64 * j + 32 + 8 * i);
        v.da = ((const float *)(a + g.ag.off_d))[b];
    }
    static __device__ __forceinline__ int sbyte(const uint4 &h, int k) // scale byte k (0..11)
    {
        const uint32_t w = k < 4 ? h.y : k < 8 ? h.z : h.w;
        return (int)((w >> (8 * (k & 3))) & 0xffu);
    }
    static __device__ __forceinline__ void scale_min(const uint4 &h, int g, int &sc, int &m)
    {
        if (g < 4) {
            sc = sbyte(h, g) & 63;
            m = sbyte(h, g + 4) & 63;
        } else {
            sc = (sbyte(h, g + 4) & 0x0f) | ((sbyte(h, g - 4) >> 6) << 4);
            m = (sbyte(h, g + 4) >> 4) | ((sbyte(h, g) >> 6) << 4);
        }
    }
    static __device__ __forceinline__ float dot(const raw &r, const av &v, const qargs &, int u)
    {
        const int j = (u & 15) >> 2;
        int sc0, m0, sc1, m1;
        scale_min(r.h, 2 * j, sc0, m0);
        scale_min(r.h, 2 * j + 1, sc1, m1);
        const int lo0 = (int)(r.q.x & 0x0f0f0f0fu), lo1 = (int)(r.q.y & 0x0f0f0f0fu);
        const int hi0 = (int)((r.q.x >> 4) & 0x0f0f0f0fu), hi1 = (int)((r.q.y >> 4) & 0x0f0f0f0fu);
        const int P = sc0 * dp4a(lo0, v.al.x, dp4a(lo1, v.al.y, 0)) + sc1 * dp4a(hi0, v.ah.x, dp4a(hi1, v.ah.y, 0));
        const int M = m0 * dp4a(0x01010101, v.al.x, dp4a(0x01010101, v.al.y, 0)) +
                      m1 * dp4a(0x01010101, v.ah.x, dp4a(0x01010101, v.ah.y, 0));
        return (h2f(r.h.x & 0xffffu) * v.da) * (float)P - (h2f(r.h.x >> 16) * v.da) * (float)M;
    }
};

template <> struct fmt<F_Q6_K> {
    static constexpr int BE = 256, BB = 210, UPB = 16, U = 4;
    struct raw { uint32_t ql0, ql1, qh, s01, s23, d; };
    struct av { int a[4]; float da; };
    static __device__ __forceinline__ void load(raw &r, const uint8_t *row, int u, const qargs &)
    {
        const uint8_t *p = row + BB * (u >> 4);
        const int t = (u & 15), h = t >> 3, i = t & 7;
        r.ql0 = ld_u32_a2(p + 64 * h + 4 * i);
        r.ql1 = ld_u32_a2(p + 64 * h + 32 + 4 * i);
        r.qh = ld_u32_a2(p + 128 + 32 * h + 4 * i);
        r.s01 = ld_u32_a2(p + 192 + 8 * h);     // scale bytes 8h .. 8h+3
        r.s23 = ld_u32_a2(p + 192 + 8 * h + 4); // 8h+4 .. 8h+7
        r.d = *(const uint16_t *)(p + 208);
    }
    static __device__ __forceinline__ void lda(av &v, const uint8_t *a, const qargs &g, int u)
    {
        const int b = u >> 4;
        const int t = (u & 15), h = t >> 3, i = t & 7;
        const uint8_t *ab = a + 256 * b + 128 * h + 4 * i;
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            v.a[kk] = *(const int *)(ab + 32 * kk);
        v.da = ((const float *)(a + g.ag.off_d))[b];
    }
    static __device__ __forceinline__ float dot(const raw &r, const av &v, const qargs &, int u)
    {
        const int sh = 8 * ((u & 7) >> 2); // byte (i/4) of the 16-bit pair (8h + 2kk, +1)
        int P = 0;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            const uint32_t ql = (kk & 1) ? r.ql1 : r.ql0;
            const uint32_t nib = (kk >> 1) ? (ql >> 4) & 0x0f0f0f0fu : ql & 0x0f0f0f0fu;
            const int q = (int)(nib | (((r.qh >> (2 * kk)) & 0x03030303u) << 4));
            const uint32_t sw = kk < 2 ? r.s01 : r.s23;
            const int sc = (int)(int8_t)(uint8_t)(sw >> (16 * (kk & 1) + sh));
            P += sc * (dp4a(q, v.a[kk], 0) - dp4a(0x20202020, v.a[kk], 0));
        }
        return (h2f(r.d) * v.da) * (float)P;
    }
};

// MLX affine: a unit = 16 weights (two 4-bit words / four 8-bit words) inside one 32-block.
struct mlx_av { int4 a; float da, sa; };
__device__ __forceinline__ void mlx_lda(mlx_av &v, const uint8_t *a, const qargs &g, int u)
{
    v.a = *(const int4 *)(a + 16 * u);
    v.da = ((const float *)(a + g.ag.off_d))[u >> 1];
    v.sa = (u & 1) ? 0.0f : ((const float *)(a + g.ag.off_s))[u >> 1]; // the bias once per 32
}

template <> struct fmt<F_MLX4> {
    static constexpr int BE = 32, BB = 16, UPB = 1, U = 2;
    struct raw { uint4 q; uint32_t s, b; };
    struct av { int4 a0, a1; float da, sa; };
    static __device__ __forceinline__ void load(raw &r, const uint8_t *row, int u, const qargs &g)
    {
        r.q = *(const uint4 *)(row + BB * u);
        const int gi = u / (g.group / 32);
        r.s = g.sc[gi];
        r.b = g.bi[gi];
    }
    static __device__ __forceinline__ void lda(av &v, const uint8_t *a, const qargs &g, int u)
    {
        v.a0 = *(const int4 *)(a + 32 * u);
        v.a1 = *(const int4 *)(a + 32 * u + 16);
        v.da = ((const float *)(a + g.ag.off_d))[u];
        v.sa = ((const float *)(a + g.ag.off_s))[u];
    }
    static __device__ __forceinline__ float dot(const raw &r, const av &v, const qargs &g, int)
    {
        const uint32_t m = 0x0f0f0f0fu;
        int s = dp4a((int)(r.q.x & m), v.a0.x, dp4a((int)((r.q.x >> 4) & m), v.a0.y, 0));
        s = dp4a((int)(r.q.y & m), v.a0.z, dp4a((int)((r.q.y >> 4) & m), v.a0.w, s));
        s = dp4a((int)(r.q.z & m), v.a1.x, dp4a((int)((r.q.z >> 4) & m), v.a1.y, s));
        s = dp4a((int)(r.q.w & m), v.a1.z, dp4a((int)((r.q.w >> 4) & m), v.a1.w, s));
        return (sb2f(r.s, g.sb_f16) * v.da) * (float)s + sb2f(r.b, g.sb_f16) * v.sa;
    }
};

template <> struct fmt<F_MLX8> {
    static constexpr int BE = 16, BB = 16, UPB = 1, U = 2;
    struct raw { uint4 q; uint32_t s, b; };
    typedef mlx_av av;
    static __device__ __forceinline__ void load(raw &r, const uint8_t *row, int u, const qargs &g)
    {
        r.q = *(const uint4 *)(row + BB * u);
        const int gi = u / (g.group / 16);
        r.s = g.sc[gi];
        r.b = g.bi[gi];
    }
    static __device__ __forceinline__ void lda(av &v, const uint8_t *a, const qargs &g, int u)
    {
        mlx_lda(v, a, g, u);
    }
    static __device__ __forceinline__ float dot(const raw &r, const av &v, const qargs &g, int)
    {
        const int s = dp4a_us(r.q.x, v.a.x, dp4a_us(r.q.y, v.a.y, dp4a_us(r.q.z, v.a.z, dp4a_us(r.q.w, v.a.w, 0))));
        return (sb2f(r.s, g.sb_f16) * v.da) * (float)s + sb2f(r.b, g.sb_f16) * v.sa;
    }
};

constexpr int WARPS = 4;

// One row per KS warps (KS = 1, 2, 4: the warps of a row take interleaved units and meet in
// shared memory), WARPS / KS rows per block. Per lane and step: the weights of U units, then
// (after the quantizer, see pdl_wait) their activations, then the dots.
template <int F, int NT, int KS>
__global__ void __launch_bounds__(32 * WARPS, NT == 1 ? 8 : 1) qgemv_kernel(const qargs g)
{
    using FM = fmt<F>;
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int64_t r = (int64_t)blockIdx.x * (WARPS / KS) + wid / KS;
    const int part = wid % KS;
    const bool live = r < g.rows;
    const uint8_t *row = g.w + (size_t)(live ? r : 0) * g.row_bytes;
    qargs gr = g;
    if (F == F_MLX4 || F == F_MLX8) {
        gr.sc = g.sc + (live ? r : 0) * (g.cols / g.group);
        gr.bi = g.bi + (live ? r : 0) * (g.cols / g.group);
    }
    const int units = live ? (int)(g.cols / FM::BE * FM::UPB) : 0;
    constexpr int STEP = 32 * KS;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++)
        acc[t] = 0.0f;
    bool waited = false;
    for (int u0 = lane + 32 * part; u0 < units; u0 += STEP * FM::U) {
        typename FM::raw w[FM::U];
#pragma unroll
        for (int k = 0; k < FM::U; k++)
            if (u0 + STEP * k < units)
                FM::load(w[k], row, u0 + STEP * k, gr);
        if (!waited) {
            pdl_wait();
            waited = true;
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            typename FM::av v[FM::U];
            const uint8_t *a = g.act + (size_t)t * g.ag.stride;
#pragma unroll
            for (int k = 0; k < FM::U; k++)
                if (u0 + STEP * k < units)
                    FM::lda(v[k], a, gr, u0 + STEP * k);
#pragma unroll
            for (int k = 0; k < FM::U; k++)
                if (u0 + STEP * k < units)
                    acc[t] += FM::dot(w[k], v[k], gr, u0 + STEP * k);
        }
    }
    if (!waited) // a lane without units
        pdl_wait();
    __shared__ float red[WARPS][NT];
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float v = acc[t];
        for (int o = 16; o; o >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, o);
        if (KS == 1) {
            if (lane == 0 && live)
                g.y[t * g.ldy + r] = v;
        } else if (lane == 0) {
            red[wid][t] = v;
        }
    }
    if (KS > 1) {
        __syncthreads();
        if (part == 0 && lane < NT && live) {
            float v = red[wid][lane];
#pragma unroll
            for (int k = 1; k < KS; k++)
                v += red[wid + k][lane];
            g.y[lane * g.ldy + r] = v;
        }
    }
}

// Batch 1, staged: each warp streams its row through shared memory in chunks of NBC whole blocks
// (a multiple of 16 bytes), 16-byte cp.async copies, NST chunks in flight, and decodes each
// chunk from shared memory with the format's unit loader (the 2-byte aligned blocks of Q8_0 /
// Q4_0 / Q6_K cost 16-bit loads from shared memory instead of from L1). Rows must be 16-byte
// aligned (row_bytes % 16 == 0); other rows take qgemv_kernel.
template <int F> struct stage_of;
template <> struct stage_of<F_Q4_0> { static constexpr int NBC = 64; };
template <> struct stage_of<F_Q4_1> { static constexpr int NBC = 64; };
template <> struct stage_of<F_Q8_0> { static constexpr int NBC = 32; };
template <> struct stage_of<F_Q4_K> { static constexpr int NBC = 8; };
template <> struct stage_of<F_Q6_K> { static constexpr int NBC = 8; };
constexpr int NST = 3;

template <int F> constexpr int stage_bytes()
{
    return stage_of<F>::NBC * fmt<F>::BB;
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}

template <int F>
__global__ void __launch_bounds__(32 * WARPS, 8) qgemv_staged_kernel(const qargs g)
{
    using FM = fmt<F>;
    constexpr int NBC = stage_of<F>::NBC, CH = NBC * FM::BB, UC = NBC * FM::UPB / 32;
    static_assert(CH % 16 == 0 && (NBC * FM::UPB) % 32 == 0, "chunk of whole blocks, 16-byte pieces");
    extern __shared__ __align__(16) uint8_t qg_smem[];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int64_t r = (int64_t)blockIdx.x * WARPS + wid;
    const bool live = r < g.rows;
    uint8_t *buf = qg_smem + wid * NST * CH;
    const uint8_t *row = g.w + (size_t)(live ? r : 0) * g.row_bytes;
    const int nblk = live ? (int)(g.cols / FM::BE) : 0;
    const int nch = (nblk + NBC - 1) / NBC;
    const int row_pieces = nblk * FM::BB / 16;
    auto issue = [&](int c) {
        if (c < nch) {
            const int p0 = c * (CH / 16), np = min(CH / 16, row_pieces - p0);
            for (int p = lane; p < np; p += 32)
                cp_async16(buf + (c % NST) * CH + 16 * p, row + 16 * (size_t)(p0 + p));
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
#pragma unroll
    for (int c = 0; c < NST - 1; c++)
        issue(c);
    pdl_wait();
    float acc = 0.0f;
    for (int c = 0; c < nch; c++) {
        issue(c + NST - 1);
        asm volatile("cp.async.wait_group %0;" ::"n"(NST - 1) : "memory");
        __syncwarp();
        const uint8_t *cb = buf + (c % NST) * CH;
        const int units_c = min(NBC, nblk - c * NBC) * FM::UPB, ubase = c * NBC * FM::UPB;
        typename FM::raw w[UC];
        typename FM::av v[UC];
#pragma unroll
        for (int k = 0; k < UC; k++)
            if (lane + 32 * k < units_c) {
                FM::load(w[k], cb, lane + 32 * k, g);
                FM::lda(v[k], g.act, g, ubase + lane + 32 * k);
            }
#pragma unroll
        for (int k = 0; k < UC; k++)
            if (lane + 32 * k < units_c)
                acc += FM::dot(w[k], v[k], g, ubase + lane + 32 * k);
        __syncwarp();
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    for (int o = 16; o; o >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0 && live)
        g.y[r] = acc;
}

template <int F>
cudaError_t launch_staged(const qargs &g, cudaStream_t s, int pdl)
{
    const size_t smem = (size_t)WARPS * NST * stage_bytes<F>();
    static bool attr = false; // > 48 KB of dynamic shared memory needs the opt-in
    if (!attr) {
        cudaError_t e = cudaFuncSetAttribute(qgemv_staged_kernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem);
        if (e != cudaSuccess)
            return e;
        attr = true;
    }
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3((unsigned)((g.rows + WARPS - 1) / WARPS));
    c.blockDim = dim3(32 * WARPS);
    c.dynamicSmemBytes = smem;
    c.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    c.attrs = at;
    c.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&c, qgemv_staged_kernel<F>, g);
}

// Batch 1, wide (tq_cuda_qgemv_set_staged(3)): persistent blocks of WW warps (at most the
// resident blocks of the device), the block's activation copied once into shared memory, each
// warp streaming its rows (gw, gw + all warps, ...) through NST shared-memory chunks of whole
// blocks (16-byte cp.async, the next row's first chunks in flight while the current row ends).
// A lane decodes a group of G consecutive blocks (Q4_0 / Q8_0: 2, Q4_1: 1; Q4_K: a quarter
// super-block = 64 weights) from NW 32-bit shared-memory words at word NW * lane (NW odd: no
// bank conflicts), and reads the group's activations as 16-byte pieces (swizzled: piece p is
// stored at p ^ ((p >> 3) & 7), so the 8 lanes of a quarter warp hit 8 different bank groups).
// Per 32 weights: ~5 shared loads, 8 dp4a, one scale multiply (Q4_0's -8 through the
// activation sum s: d (d_a sum(q a) - 8 s_a)); Q4_K's min term through per-32 activation sums
// computed once per block in shared memory.
template <int F> struct wide_of;
template <> struct wide_of<F_Q4_0> { static constexpr int BE = 32, BB = 18, G = 2, NW = 9, K = 2, NST = 4, CH = 32 * K * G * BB; };
template <> struct wide_of<F_Q8_0> { static constexpr int BE = 32, BB = 34, G = 2, NW = 17, K = 1, NST = 4, CH = 32 * K * G * BB; };
template <> struct wide_of<F_Q4_1> { static constexpr int BE = 32, BB = 20, G = 1, NW = 5, K = 4, NST = 4, CH = 32 * K * G * BB; };
template <> struct wide_of<F_Q4_K> { static constexpr int BE = 256, BB = 144, G = 1, K = 2, NST = 4, CH = 8 * K * BB; };
constexpr int WW = 8;
constexpr size_t WIDE_MAX_SMEM = 200 * 1024; // or the device's opt-in limit if lower (sm_80: 163 KB)

template <int F> __host__ __device__ inline int wide_groups(int nblk)
{
    return F == F_Q4_K ? 4 * nblk : (nblk + wide_of<F>::G - 1) / wide_of<F>::G;
}
// shared memory of the activation: qs (cols rounded up to 128, the swizzle stays inside), d per
// activation block, s per 32 (32-formats) or int sums per 32 (Q4_K)
__host__ __device__ inline int wide_sq(int64_t cols)
{
    return (int)((cols + 127) & ~(int64_t)127);
}
__host__ __device__ inline int wide_act_smem(int64_t cols, int ablk)
{
    return wide_sq(cols) + (int)al16_d(4 * (size_t)(cols / ablk)) + (int)al16_d(4 * (size_t)(cols / 32));
}

__device__ __forceinline__ void cp_async4(void *dst, const void *src)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ int swz(int p)
{
    return p ^ ((p >> 3) & 7);
}
__device__ __forceinline__ int4 apiece(const uint8_t *sq, int p)
{
    return *(const int4 *)(sq + 16 * swz(p));
}
__device__ __forceinline__ int dot4_nib(const uint32_t *q, const int4 &lo, const int4 &hi, int s)
{
    const uint32_t m = 0x0f0f0f0fu;
    s = dp4a((int)(q[0] & m), lo.x, s);
    s = dp4a((int)((q[0] >> 4) & m), hi.x, s);
    s = dp4a((int)(q[1] & m), lo.y, s);
    s = dp4a((int)((q[1] >> 4) & m), hi.y, s);
    s = dp4a((int)(q[2] & m), lo.z, s);
    s = dp4a((int)((q[2] >> 4) & m), hi.z, s);
    s = dp4a((int)(q[3] & m), lo.w, s);
    s = dp4a((int)((q[3] >> 4) & m), hi.w, s);
    return s;
}
__device__ __forceinline__ int dot8_q8(const uint32_t *q, const int4 &a0, const int4 &a1)
{
    int s = dp4a((int)q[0], a0.x, 0);
    s = dp4a((int)q[1], a0.y, s);
    s = dp4a((int)q[2], a0.z, s);
    s = dp4a((int)q[3], a0.w, s);
    s = dp4a((int)q[4], a1.x, s);
    s = dp4a((int)q[5], a1.y, s);
    s = dp4a((int)q[6], a1.z, s);
    return dp4a((int)q[7], a1.w, s);
}

// group gi of the row (its bytes at cb + ci * NW words, or the super-block quarter) against the
// shared activation
template <int F>
__device__ __forceinline__ float wide_dot(const uint8_t *cb, int ci, int gi, int nblk, const uint8_t *sq,
                                          const float *sd, const float *ss)
{
    using W = wide_of<F>;
    if constexpr (F == F_Q4_K) {
        const uint8_t *p = cb + 144 * (ci >> 2);
        const int jj = ci & 3, sb = gi >> 2;
        const uint4 h = *(const uint4 *)p;
        const uint4 qa = *(const uint4 *)(p + 16 + 32 * jj), qb = *(const uint4 *)(p + 32 + 32 * jj);
        const uint32_t q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
        const int pb = 16 * sb + 4 * jj;
        const int4 a0 = apiece(sq, pb), a1 = apiece(sq, pb + 1), a2 = apiece(sq, pb + 2), a3 = apiece(sq, pb + 3);
        const uint32_t m = 0x0f0f0f0fu;
        const uint32_t lo[8] = {q[0] & m, q[1] & m, q[2] & m, q[3] & m, q[4] & m, q[5] & m, q[6] & m, q[7] & m};
        const uint32_t hi[8] = {(q[0] >> 4) & m, (q[1] >> 4) & m, (q[2] >> 4) & m, (q[3] >> 4) & m,
                                (q[4] >> 4) & m, (q[5] >> 4) & m, (q[6] >> 4) & m, (q[7] >> 4) & m};
        const int sl = dot8_q8(lo, a0, a1), sh = dot8_q8(hi, a2, a3);
        int sc0, m0, sc1, m1;
        fmt<F_Q4_K>::scale_min(h, 2 * jj, sc0, m0);
        fmt<F_Q4_K>::scale_min(h, 2 * jj + 1, sc1, m1);
        const int *sum = (const int *)ss;
        const int P = sc0 * sl + sc1 * sh, M = m0 * sum[8 * sb + 2 * jj] + m1 * sum[8 * sb + 2 * jj + 1];
        const float da = sd[sb];
        return (h2f(h.x & 0xffffu) * da) * (float)P - (h2f(h.x >> 16) * da) * (float)M;
    } else {
        const uint32_t *ws = (const uint32_t *)cb + W::NW * ci;
        uint32_t w[W::NW];
#pragma unroll
        for (int i = 0; i < W::NW; i++)
            w[i] = ws[i];
        const int b0 = W::G * gi;
        if constexpr (F == F_Q4_1) {
            const int4 lo = apiece(sq, 2 * b0), hi = apiece(sq, 2 * b0 + 1);
            const int s = dot4_nib(w + 1, lo, hi, 0);
            return (h2f(w[0] & 0xffffu) * sd[b0]) * (float)s + h2f(w[0] >> 16) * ss[b0];
        } else {
        const float2 da = *(const float2 *)(sd + b0);
        const float2 sa = *(const float2 *)(ss + b0);
        float r;
        if constexpr (F == F_Q4_0) {
            const uint32_t q0[4] = {__byte_perm(w[0], w[1], 0x5432), __byte_perm(w[1], w[2], 0x5432),
                                    __byte_perm(w[2], w[3], 0x5432), __byte_perm(w[3], w[4], 0x5432)};
            const int s0 = dot4_nib(q0, apiece(sq, 2 * b0), apiece(sq, 2 * b0 + 1), 0);
            r = h2f(w[0] & 0xffffu) * (da.x * (float)s0 - 8.0f * sa.x);
            if (b0 + 1 < nblk) {
                const int s1 = dot4_nib(w + 5, apiece(sq, 2 * b0 + 2), apiece(sq, 2 * b0 + 3), 0);
                r += h2f(w[4] >> 16) * (da.y * (float)s1 - 8.0f * sa.y);
            }
        } else { // Q8_0
            uint32_t q0[8];
#pragma unroll
            for (int i = 0; i < 8; i++)
                q0[i] = __byte_perm(w[i], w[i + 1], 0x5432);
            const int s0 = dot8_q8(q0, apiece(sq, 2 * b0), apiece(sq, 2 * b0 + 1));
            r = (h2f(w[0] & 0xffffu) * da.x) * (float)s0;
            if (b0 + 1 < nblk) {
                const int s1 = dot8_q8(w + 9, apiece(sq, 2 * b0 + 2), apiece(sq, 2 * b0 + 3));
                r += (h2f(w[8] >> 16) * da.y) * (float)s1;
            }
        }
        return r;
        }
    }
}

template <int F, bool ASYNC>
__global__ void __launch_bounds__(32 * WW, 2) qgemv_wide_kernel(const qargs g)
{
    using W = wide_of<F>;
    constexpr int CH = wide_of<F>::CH, GPC = 32 * W::K, NS = W::NST;
    static_assert(CH % 16 == 0, "chunks of 16-byte pieces");
    extern __shared__ __align__(16) uint8_t qg_smem[];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int ablk = F == F_Q4_K ? 256 : 32;
    const int nbA = (int)(g.cols / ablk), nb32 = (int)(g.cols / 32);
    uint8_t *sq = qg_smem;
    float *sd = (float *)(qg_smem + wide_sq(g.cols));
    float *ss = (float *)((uint8_t *)sd + al16_d(4 * (size_t)nbA));
    uint8_t *buf = qg_smem + wide_act_smem(g.cols, ablk) + wid * NS * CH;
    const int64_t gw = (int64_t)blockIdx.x * WW + wid, gstep = (int64_t)gridDim.x * WW;
    const int nmine = gw < g.rows ? (int)((g.rows - 1 - gw) / gstep + 1) : 0;
    const int nblk = (int)(g.cols / W::BE);
    const int ngr = wide_groups<F>(nblk), nch = (ngr + GPC - 1) / GPC;
    // 16-byte pieces of a row: a packed row that is not a multiple of 16 bytes (Q8_0 / Q4_0 /
    // Q4_1 at cols % 256 != 0, e.g. 576) is read up to its 16-byte padded stride (row_bytes % 16
    // == 0), the padding copied but never decoded
    const int row_pieces = (nblk * W::BB + 15) / 16;
    const int total = nmine * nch;
    auto issue = [&](int c) {
        if (c < total) {
            const int64_t r = gw + (int64_t)(c / nch) * gstep;
            const int j = c % nch;
            const uint8_t *src = g.w + (size_t)r * g.row_bytes;
            const int p0 = j * (CH / 16), np = min(CH / 16, row_pieces - p0);
            uint8_t *dst = buf + (c % NS) * CH;
            for (int p = lane; p < np; p += 32)
                cp_async16(dst + 16 * p, src + 16 * (size_t)(p0 + p));
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
#pragma unroll
    for (int c = 0; c < NS - 1; c++)
        issue(c);
    pdl_wait();
    const float *gd = (const float *)(g.act + g.ag.off_d), *gs = (const float *)(g.act + g.ag.off_s);
    const int nq = (int)(g.cols / 16);
    if (ASYNC) { // every piece in flight at once (one L2 round trip), then wait for them and the weight prologue
        for (int p = threadIdx.x; p < nq; p += 32 * WW)
            cp_async16(sq + 16 * swz(p), g.act + 16 * (size_t)p);
        for (int i = threadIdx.x; i < nbA; i += 32 * WW)
            cp_async4(sd + i, gd + i);
        if (F != F_Q4_K)
            for (int i = threadIdx.x; i < nb32; i += 32 * WW)
                cp_async4(ss + i, gs + i);
        asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
    } else { // plain loads and stores (A/B: tq_cuda_qgemv_set_staged(4))
        for (int p = threadIdx.x; p < nq; p += 32 * WW)
            *(int4 *)(sq + 16 * swz(p)) = *(const int4 *)(g.act + 16 * (size_t)p);
        for (int i = threadIdx.x; i < nbA; i += 32 * WW)
            sd[i] = gd[i];
        if (F != F_Q4_K)
            for (int i = threadIdx.x; i < nb32; i += 32 * WW)
                ss[i] = gs[i];
    }
    __syncthreads();
    if (F == F_Q4_K) { // integer sums of the activation per 32 (the min term)
        int *sum = (int *)ss;
        for (int b = threadIdx.x; b < nb32; b += 32 * WW) {
            const int4 a0 = apiece(sq, 2 * b), a1 = apiece(sq, 2 * b + 1);
            const uint32_t one[8] = {0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u,
                                     0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u};
            sum[b] = dot8_q8(one, a0, a1);
        }
        __syncthreads();
    }
    float acc = 0.0f;
    for (int c = 0; c < total; c++) {
        issue(c + NS - 1);
        asm volatile("cp.async.wait_group %0;" ::"n"(NS - 1) : "memory");
        __syncwarp();
        const uint8_t *cb = buf + (c % NS) * CH;
        const int j = c % nch;
#pragma unroll
        for (int k = 0; k < W::K; k++) {
            const int ci = 32 * k + lane, gi = j * GPC + ci;
            if (gi < ngr)
                acc += wide_dot<F>(cb, ci, gi, nblk, sq, sd, ss);
        }
        __syncwarp();
        if (j == nch - 1) {
            for (int o = 16; o; o >>= 1)
                acc += __shfl_xor_sync(0xffffffffu, acc, o);
            if (lane == 0)
                g.y[gw + (int64_t)(c / nch) * gstep] = acc;
            acc = 0.0f;
        }
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
}

template <int F> size_t wide_smem(int64_t cols)
{
    return (size_t)wide_act_smem(cols, F == F_Q4_K ? 256 : 32) + (size_t)WW * wide_of<F>::NST * wide_of<F>::CH;
}

template <int F, bool ASYNC>
cudaError_t launch_wide_a(const qargs &g, cudaStream_t s, int pdl)
{
    const size_t smem = wide_smem<F>(g.cols);
    static int attr_for = -1, n_sm = 0; // the opt-in is per kernel; set once to the largest
    if (attr_for < 0) {
        int dev = 0;
        cudaError_t e = cudaGetDevice(&dev);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev);
        int optin = 0;
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(qgemv_wide_kernel<F, ASYNC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)std::min((size_t)optin, WIDE_MAX_SMEM));
        if (e != cudaSuccess)
            return e;
        attr_for = 1;
    }
    int per_sm = 0;
    cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, qgemv_wide_kernel<F, ASYNC>, 32 * WW, smem);
    if (e != cudaSuccess)
        return e;
    const int64_t want = (g.rows + WW - 1) / WW, cap = (int64_t)std::max(per_sm, 1) * n_sm;
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3((unsigned)std::min(want, cap));
    c.blockDim = dim3(32 * WW);
    c.dynamicSmemBytes = smem;
    c.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    c.attrs = at;
    c.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&c, qgemv_wide_kernel<F, ASYNC>, g);
}

// tq_cuda_qgemv_set_staged(4): the wide kernel with the plain activation copy (A/B)
int g_staged_4 = 0;
template <int F>
cudaError_t launch_wide(const qargs &g, cudaStream_t s, int pdl)
{
    return g_staged_4 ? launch_wide_a<F, false>(g, s, pdl) : launch_wide_a<F, true>(g, s, pdl);
}

size_t packed_bytes_of(int f, int64_t cols)
{
    const int be = f == F_Q4_K || f == F_Q6_K ? 256 : 32;
    const int bb = f == F_Q8_0 ? 34 : f == F_Q4_0 ? 18 : f == F_Q4_1 ? 20 : f == F_Q4_K ? 144 : 210;
    return (size_t)(cols / be) * (size_t)bb;
}

// tq_cuda_qgemv_set_staged(0): batch 1 of the ggml formats without the shared-memory staging;
// 2: Q4_K staged too (A/B, tests). The library reads no environment (the caller's options decide).
int g_staged = 3; // the wide kernel (H200 visit s23: 1.2-1.8x the staged / direct kernels)
// the wide kernel (g_staged 3): Q8_0 / Q4_0 / Q4_1 / Q4_K, 16-byte aligned rows (a packed row
// of another length padded to a 16-byte stride), the activation and the chunks within 160 KB of
// shared memory
bool use_wide(int f, const qargs &g, int nt)
{
    if (g_staged != 3 || nt != 1 || (f != F_Q8_0 && f != F_Q4_0 && f != F_Q4_1 && f != F_Q4_K))
        return false;
    if (g.row_bytes % 16 || (uintptr_t)g.w % 16 || (uintptr_t)g.act % 16)
        return false;
    const size_t sm = f == F_Q8_0 ? wide_smem<F_Q8_0>(g.cols) : f == F_Q4_0 ? wide_smem<F_Q4_0>(g.cols)
                    : f == F_Q4_1 ? wide_smem<F_Q4_1>(g.cols) : wide_smem<F_Q4_K>(g.cols);
    return sm <= 160 * 1024;
}
bool use_staged(int f, const qargs &g, int nt)
{
    // Q4_K (16-byte aligned blocks) reads directly by default: staged 10% slower (H200, visit q4)
    return g_staged && nt == 1 && (f == F_Q4_0 || f == F_Q4_1 || f == F_Q8_0 || (f == F_Q4_K && g_staged == 2) || f == F_Q6_K) &&
           g.row_bytes % 16 == 0 && (uintptr_t)g.w % 16 == 0 && packed_bytes_of(f, g.cols) % 16 == 0;
}

// warps per row: tq_cuda_qgemv_set_split() (1, 2, 4); 0 = auto: enough warps for two waves of 64
// per SM at batch 1, 1 for batches
int g_split = 0;
int split_for(int64_t rows, int nt)
{
    if (nt > 1)
        return 1;
    if (g_split == 1 || g_split == 2 || g_split == 4)
        return g_split;
    return rows >= 2048 ? 1 : rows >= 512 ? 2 : 4;
}

template <int F, int NT, int KS>
cudaError_t launch_k(const qargs &g, cudaStream_t s, int pdl)
{
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3((unsigned)((g.rows + WARPS / KS - 1) / (WARPS / KS)));
    c.blockDim = dim3(32 * WARPS);
    c.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    c.attrs = at;
    c.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&c, qgemv_kernel<F, NT, KS>, g);
}

template <int F>
cudaError_t launch_f(const qargs &g, int nt, cudaStream_t s, int pdl)
{
    switch (nt) {
    case 1: {
        const int ks = split_for(g.rows, 1);
        return ks == 4 ? launch_k<F, 1, 4>(g, s, pdl) : ks == 2 ? launch_k<F, 1, 2>(g, s, pdl) : launch_k<F, 1, 1>(g, s, pdl);
    }
    case 2: return launch_k<F, 2, 1>(g, s, pdl);
    case 4: return launch_k<F, 4, 1>(g, s, pdl);
    default: return launch_k<F, 8, 1>(g, s, pdl);
    }
}

cudaError_t launch_gemv(int f, const qargs &g, int nt, cudaStream_t s, int pdl)
{
    if (use_wide(f, g, nt))
        switch (f) {
        case F_Q8_0: return launch_wide<F_Q8_0>(g, s, pdl);
        case F_Q4_0: return launch_wide<F_Q4_0>(g, s, pdl);
        case F_Q4_1: return launch_wide<F_Q4_1>(g, s, pdl);
        default: return launch_wide<F_Q4_K>(g, s, pdl);
        }
    if (use_staged(f, g, nt))
        switch (f) {
        case F_Q8_0: return launch_staged<F_Q8_0>(g, s, pdl);
        case F_Q4_0: return launch_staged<F_Q4_0>(g, s, pdl);
        case F_Q4_1: return launch_staged<F_Q4_1>(g, s, pdl);
        case F_Q4_K: return launch_staged<F_Q4_K>(g, s, pdl);
        default: return launch_staged<F_Q6_K>(g, s, pdl);
        }
    switch (f) {
    case F_Q8_0: return launch_f<F_Q8_0>(g, nt, s, pdl);
    case F_Q4_0: return launch_f<F_Q4_0>(g, nt, s, pdl);
    case F_Q4_1: return launch_f<F_Q4_1>(g, nt, s, pdl);
    case F_Q4_K: return launch_f<F_Q4_K>(g, nt, s, pdl);
    case F_Q6_K: return launch_f<F_Q6_K>(g, nt, s, pdl);
    case F_MLX4: return launch_f<F_MLX4>(g, nt, s, pdl);
    default: return launch_f<F_MLX8>(g, nt, s, pdl);
    }
}

// programmatic dependent launch is on; the timing call measures the call without it too (us_nopdl)
int pdl_default()
{
    return 1;
}

cudaError_t launch_quant(int f, const float *x, int64_t ldx, int64_t cols, int n, uint8_t *act, act_geom ag,
                         cudaStream_t s)
{
    const int blk = act_block(f);
    const dim3 grid((unsigned)((cols / blk + 3) / 4), (unsigned)n), block(128);
    if (blk == 256)
        quant_a256_kernel<<<grid, block, 0, s>>>(x, ldx, cols, act, ag);
    else if (f == F_MLX4)
        quant_a32_kernel<true><<<grid, block, 0, s>>>(x, ldx, cols, act, ag);
    else
        quant_a32_kernel<false><<<grid, block, 0, s>>>(x, ldx, cols, act, ag);
    return cudaGetLastError();
}

// elements and bytes of a block of the ggml formats (src/common/formats.c TQ_FORMAT_ROWS)
void block_of(int f, int *be, int *bb)
{
    *be = f == F_Q4_K || f == F_Q6_K ? 256 : f == F_MLX4 || f == F_MLX8 ? 16 : 32;
    *bb = f == F_Q8_0 ? 34 : f == F_Q4_0 ? 18 : f == F_Q4_1 ? 20 : f == F_Q4_K ? 144 : f == F_Q6_K ? 210 : f == F_MLX4 ? 8 : 16;
}

const char *fname(int f)
{
    return f == F_Q8_0 ? "Q8_0" : f == F_Q4_0 ? "Q4_0" : f == F_Q4_1 ? "Q4_1" : f == F_Q4_K ? "Q4_K" : f == F_Q6_K ? "Q6_K" : "MLX affine";
}

size_t packed_row_bytes(const tq_cuda_qmat *m)
{
    int be, bb;
    const int f = kfmt(m);
    if (!f || m->cols <= 0)
        return 0;
    block_of(f, &be, &bb);
    return (size_t)(m->cols / be) * (size_t)bb;
}

size_t sb_count(const tq_cuda_qmat *m)
{
    return m->fmt == TQ_CUDA_QGEMV_MLX ? (size_t)m->rows * (size_t)(m->cols / m->group) : 0;
}

// split n tokens into launches of 8, 4, 2, 1
int chunk_of(int left)
{
    return left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
}

// ---- decode job: input transform + activation quantizer + GEMV of up to 4 matrices, one launch --
// Every block (8 warps) computes the transformed input (RMSNorm with its weight, or the SiLU /
// GELU gate against aux, or as is) and quantizes it into shared memory by the format's activation
// rule (the same code as quant_a32_kernel / quant_a256_kernel, on the transformed values); then
// each warp computes one row of its output with the format's unit loop (qgemv_kernel, batch 1).
// Blocks are assigned to the outputs by block ranges, like the dense GEMV of backend_cuda.cu.
struct qjob_k {
    const uint8_t *w[4];
    size_t row_bytes[4];
    const uint16_t *sc[4], *bi[4];
    float *y[4];
    int rows[4], blk_end[4], acc[4];
    int n;
    int64_t cols;
    int group, sb_f16;
    const float *src, *aux;
    float eps;
    int p1;
    act_geom ag;
};

constexpr int QJ_WARPS = 8;

__device__ __forceinline__ float qj_silu(float x)
{
    return x / (1.0f + expf(-x));
}
__device__ __forceinline__ float qj_gelu(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
template <int PRE>
__device__ __forceinline__ float qj_in(const qjob_k &j, int64_t i, float r)
{
    if (PRE == 1) // RMSNorm with weight aux ((1 + w) when p1)
        return j.src[i] * r * (j.p1 ? 1.0f + j.aux[i] : j.aux[i]);
    if (PRE == 2)
        return qj_silu(j.src[i]) * j.aux[i];
    if (PRE == 3)
        return qj_gelu(j.src[i]) * j.aux[i];
    return j.src[i];
}

template <int F, int PRE>
__global__ void __launch_bounds__(32 * QJ_WARPS) qjob_kernel(const qjob_k j)
{
    using FM = fmt<F>;
    __shared__ __align__(16) uint8_t as[TQ_CUDA_QJOB_MAXC + TQ_CUDA_QJOB_MAXC / 4 + 64];
    __shared__ float red[QJ_WARPS];
    const int t = threadIdx.x, lane = t & 31, wid = t >> 5;
    // this block's output, selected with constant indices (no local-memory copy of the params)
    const uint8_t *wk = j.w[0];
    size_t rb = j.row_bytes[0];
    const uint16_t *sck = j.sc[0], *bik = j.bi[0];
    float *yk = j.y[0];
    int rows = j.rows[0], acck = j.acc[0], b0 = 0;
#pragma unroll
    for (int k = 1; k < 4; k++)
        if (k < j.n && (int)blockIdx.x >= j.blk_end[k - 1]) {
            wk = j.w[k], rb = j.row_bytes[k], sck = j.sc[k], bik = j.bi[k], yk = j.y[k];
            rows = j.rows[k], acck = j.acc[k], b0 = j.blk_end[k - 1];
        }
    const int row = ((int)blockIdx.x - b0) * QJ_WARPS + wid;
    const bool live = row < rows;
    const uint8_t *wrow = wk + (size_t)(live ? row : 0) * rb;
    const int64_t cols = j.cols;
    qargs g = {};
    g.cols = cols;
    g.group = j.group;
    g.sb_f16 = j.sb_f16;
    g.ag = j.ag;
    if (F == F_MLX4 || F == F_MLX8) {
        g.sc = sck + (int64_t)(live ? row : 0) * (cols / j.group);
        g.bi = bik + (int64_t)(live ? row : 0) * (cols / j.group);
    }
    const int units = live ? (int)(cols / FM::BE * FM::UPB) : 0;
    // the row's first 32 * U units into registers (the whole row up to 256-1024 weights per
    // lane pass) and the rest into L2, while the previous kernel finishes (PDL); the weights
    // never depend on it. Then wait for its output.
    typename FM::raw w0[FM::U];
#pragma unroll
    for (int k = 0; k < FM::U; k++)
        if (lane + 32 * k < units)
            FM::load(w0[k], wrow, lane + 32 * k, g);
    if (live)
        for (size_t off = (size_t)(32 * FM::U * FM::BB / FM::UPB) + (size_t)lane * 128; off < rb; off += 32 * 128)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(wrow + off));
    pdl_trigger();
    pdl_wait();
    float r = 1.0f;
    if (PRE == 1) {
        float ss = 0.0f;
        for (int64_t i = t; i < cols; i += 32 * QJ_WARPS)
            ss += j.src[i] * j.src[i];
        for (int o = 16; o; o >>= 1)
            ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (lane == 0)
            red[wid] = ss;
        __syncthreads();
        ss = 0.0f;
#pragma unroll
        for (int k = 0; k < QJ_WARPS; k++)
            ss += red[k];
        r = 1.0f / sqrtf(ss / (float)cols + j.eps);
    }
    if (F == F_Q4_K || F == F_Q6_K) { // the q8k rule (act_block)
        for (int64_t b = wid; b < cols / 256; b += QJ_WARPS) {
            float v[8];
            float amax = 0.0f;
#pragma unroll
            for (int e = 0; e < 8; e++) {
                v[e] = qj_in<PRE>(j, 256 * b + 32 * e + lane, r);
                amax = fmaxf(amax, fabsf(v[e]));
            }
            for (int o = 16; o; o >>= 1)
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
#pragma unroll
            for (int e = 0; e < 8; e++)
                as[256 * b + 32 * e + lane] = (uint8_t)(int8_t)__float2int_rn(fminf(fmaxf(v[e] * id, -127.0f), 127.0f));
            if (lane == 0)
                ((float *)(as + j.ag.off_d))[b] = d;
        }
    } else {
        for (int64_t b = wid; b < cols / 32; b += QJ_WARPS) {
            const float v = qj_in<PRE>(j, 32 * b + lane, r);
            // max |v| of the 32 in one warp reduction (non-negative floats order as their bits)
            const float amax = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(fabsf(v))));
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            const int q = __float2int_rn(fminf(fmaxf(v * id, -127.0f), 127.0f));
            int pos = lane;
            if (F == F_MLX4) {
                const int k = lane & 7;
                pos = (lane & ~7) | ((k & 1) ? 4 + (k >> 1) : (k >> 1));
            }
            as[32 * b + pos] = (uint8_t)(int8_t)q;
            const int sum = __reduce_add_sync(0xffffffffu, q);
            if (lane == 0) {
                ((float *)(as + j.ag.off_d))[b] = d;
                ((float *)(as + j.ag.off_s))[b] = d * (float)sum;
            }
        }
    }
    __syncthreads();
    if (!live)
        return;
    float acc = 0.0f;
    for (int u0 = lane; u0 < units; u0 += 32 * FM::U) {
        typename FM::raw w[FM::U];
        typename FM::av v[FM::U];
#pragma unroll
        for (int k = 0; k < FM::U; k++)
            if (u0 + 32 * k < units) {
                if (u0 == lane)
                    w[k] = w0[k];
                else
                    FM::load(w[k], wrow, u0 + 32 * k, g);
                FM::lda(v[k], as, g, u0 + 32 * k);
            }
#pragma unroll
        for (int k = 0; k < FM::U; k++)
            if (u0 + 32 * k < units)
                acc += FM::dot(w[k], v[k], g, u0 + 32 * k);
    }
    for (int o = 16; o; o >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0)
        yk[row] = acck ? yk[row] + acc : acc;
}

template <int F>
cudaError_t launch_job_f(const qjob_k &k, int pre, cudaStream_t s, int pdl)
{
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3((unsigned)k.blk_end[k.n - 1]);
    c.blockDim = dim3(32 * QJ_WARPS);
    c.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    c.attrs = at;
    c.numAttrs = pdl ? 1 : 0;
    switch (pre) {
    case 1: return cudaLaunchKernelEx(&c, qjob_kernel<F, 1>, k);
    case 2: return cudaLaunchKernelEx(&c, qjob_kernel<F, 2>, k);
    case 3: return cudaLaunchKernelEx(&c, qjob_kernel<F, 3>, k);
    default: return cudaLaunchKernelEx(&c, qjob_kernel<F, 0>, k);
    }
}

cudaError_t launch_job(int f, const qjob_k &k, int pre, cudaStream_t s, int pdl)
{
    switch (f) {
    case F_Q8_0: return launch_job_f<F_Q8_0>(k, pre, s, pdl);
    case F_Q4_0: return launch_job_f<F_Q4_0>(k, pre, s, pdl);
    case F_Q4_1: return launch_job_f<F_Q4_1>(k, pre, s, pdl);
    case F_Q4_K: return launch_job_f<F_Q4_K>(k, pre, s, pdl);
    case F_Q6_K: return launch_job_f<F_Q6_K>(k, pre, s, pdl);
    case F_MLX4: return launch_job_f<F_MLX4>(k, pre, s, pdl);
    default: return launch_job_f<F_MLX8>(k, pre, s, pdl);
    }
}

// ---- dequantize to bf16 (prefill: the rows as bf16 for a cuBLAS GEMM) -------------------------
// One thread per 32 weights (a block of the 32-formats, a sub-block of the K formats), values
// computed in f32 in the order of the CPU's scalar dequantizers (src/common/formats.c, products
// rounded one by one: __fmul_rn / __fsub_rn keep the compiler from fusing them), then rounded to
// bf16 (nearest even) and stored as 4 x 16 bytes.
__device__ __forceinline__ uint32_t bf2(float a, float b)
{
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *(const uint32_t *)&h;
}

template <int F>
__global__ void dequant_bf16_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int64_t rows, int64_t cols,
                                    uint16_t *__restrict__ out)
{
    const int64_t per_row = cols / 32;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * per_row)
        return;
    const int64_t r = i / per_row, c32 = i % per_row;
    const uint8_t *row = w + (size_t)r * row_bytes;
    float v[32];
    if (F == F_Q8_0 || F == F_Q4_0 || F == F_Q4_1) {
        const uint8_t *b = row + (size_t)c32 * (F == F_Q8_0 ? 34 : F == F_Q4_0 ? 18 : 20);
        const float d = h2f(*(const uint16_t *)b);
        if (F == F_Q8_0) {
#pragma unroll
            for (int j = 0; j < 32; j++)
                v[j] = __fmul_rn((float)(int8_t)b[2 + j], d);
        } else if (F == F_Q4_0) {
#pragma unroll
            for (int j = 0; j < 16; j++) {
                v[j] = __fmul_rn(d, (float)((b[2 + j] & 0x0f) - 8));
                v[j + 16] = __fmul_rn(d, (float)((b[2 + j] >> 4) - 8));
            }
        } else {
            const float m = h2f(*(const uint16_t *)(b + 2));
#pragma unroll
            for (int j = 0; j < 16; j++) {
                v[j] = __fadd_rn(__fmul_rn(d, (float)(b[4 + j] & 0x0f)), m);
                v[j + 16] = __fadd_rn(__fmul_rn(d, (float)(b[4 + j] >> 4)), m);
            }
        }
    } else if (F == F_Q4_K) {
        const uint8_t *b = row + (size_t)(c32 / 8) * 144;
        const int g = (int)(c32 % 8);
        const float d = h2f(*(const uint16_t *)b), dmin = h2f(*(const uint16_t *)(b + 2));
        const uint8_t *sc = b + 4;
        int s, m;
        if (g < 4) {
            s = sc[g] & 63;
            m = sc[g + 4] & 63;
        } else {
            s = (sc[g + 4] & 0x0f) | ((sc[g - 4] >> 6) << 4);
            m = (sc[g + 4] >> 4) | ((sc[g] >> 6) << 4);
        }
        const float d1 = __fmul_rn(d, (float)s), m1 = __fmul_rn(dmin, (float)m);
        const uint8_t *q = b + 16 + 32 * (g / 2);
        const int shift = (g & 1) * 4;
#pragma unroll
        for (int l = 0; l < 32; l++)
            v[l] = __fsub_rn(__fmul_rn(d1, (float)((q[l] >> shift) & 0x0f)), m1);
    } else { // Q6_K: sub-block g = half h, line k
        const uint8_t *b = row + (size_t)(c32 / 8) * 210;
        const int g = (int)(c32 % 8), h = g / 4, k = g % 4;
        const float d = h2f(*(const uint16_t *)(b + 208));
        const int8_t *scales = (const int8_t *)(b + 192);
        const uint8_t *ql = b + 64 * h + 32 * (k & 1), *qh = b + 128 + 32 * h;
#pragma unroll
        for (int l = 0; l < 32; l++) {
            const int lo = (ql[l] >> (4 * (k >> 1))) & 0x0f, hi = (qh[l] >> (2 * k)) & 3;
            const float ds = __fmul_rn(d, (float)scales[(128 * h + 32 * k + l) / 16]);
            v[l] = __fmul_rn(ds, (float)((lo | (hi << 4)) - 32));
        }
    }
    uint4 *o = (uint4 *)(out + (size_t)r * (size_t)cols + 32 * (size_t)c32);
#pragma unroll
    for (int k = 0; k < 4; k++)
        o[k] = make_uint4(bf2(v[8 * k], v[8 * k + 1]), bf2(v[8 * k + 2], v[8 * k + 3]), bf2(v[8 * k + 4], v[8 * k + 5]),
                          bf2(v[8 * k + 6], v[8 * k + 7]));
}

// gemv_only: the activations are already there (bench); pdl: -1 = the default
tq_status run_dev(const tq_cuda_qmat *m, const float *x, int64_t ldx, int n, float *y, int64_t ldy, void *act,
                  cudaStream_t s, int gemv_only, int pdl = -1)
{
    const int f = kfmt(m);
    const act_geom ag = act_geom_of(f, m->cols);
    if (!gemv_only)
        QG_CUDA(launch_quant(f, x, ldx, m->cols, n, (uint8_t *)act, ag, s));
    qargs g = {};
    g.w = (const uint8_t *)m->w;
    g.row_bytes = m->row_bytes;
    g.rows = m->rows;
    g.cols = m->cols;
    g.sc = (const uint16_t *)m->scales;
    g.bi = (const uint16_t *)m->biases;
    g.sb_f16 = m->sb_f16;
    g.group = m->group > 0 ? m->group : 32;
    g.ag = ag;
    g.ldy = ldy;
    for (int t = 0; t < n;) {
        const int nt = chunk_of(n - t);
        g.act = (const uint8_t *)act + (size_t)t * ag.stride;
        g.y = y + (int64_t)t * ldy;
        QG_CUDA(launch_gemv(f, g, nt, s, gemv_only ? 0 : pdl < 0 ? pdl_default() : pdl));
        t += nt;
    }
    return TQ_OK;
}

} // namespace

extern "C" void tq_cuda_qgemv_set_staged(int on)
{
    g_staged = on == 0 || on == 1 || on == 2 ? on : 3;
    g_staged_4 = on == 4;
}

extern "C" void tq_cuda_qgemv_set_split(int ks)
{
    g_split = ks == 1 || ks == 2 || ks == 4 ? ks : 0;
}

extern "C" tq_status tq_cuda_qgemv_check(const tq_cuda_qmat *m)
{
    if (!m)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv: NULL matrix view");
    const int f = kfmt(m);
    if (!f) {
        if (m->fmt == TQ_CUDA_QGEMV_MLX)
            return QG_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_qgemv: MLX affine with %d bits has no GPU kernel (bits 4 "
                           "and 8 do; dequantize the others at load)", m->bits);
        return QG_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_qgemv: format id %d has no GPU kernel (Q8_0 Q4_0 Q4_1 "
                       "Q4_K Q6_K and MLX affine 4/8-bit do)", m->fmt);
    }
    if (m->rows <= 0 || m->cols <= 0 || m->rows > ((int64_t)1 << 31) * WARPS)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv: %lld x %lld matrix (rows and cols must be >= 1)",
                       (long long)m->rows, (long long)m->cols);
    const int blk = f == F_Q4_K || f == F_Q6_K ? 256 : 32;
    if (m->cols % blk)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv: %lld columns are not a multiple of %d (the block of the "
                       "format and of its activation)", (long long)m->cols, blk);
    if (m->fmt == TQ_CUDA_QGEMV_MLX && m->group != 32 && m->group != 64 && m->group != 128)
        return QG_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_qgemv: MLX affine group %d (32, 64 or 128)", m->group);
    if (m->fmt == TQ_CUDA_QGEMV_MLX && (m->cols % m->group || !m->scales || !m->biases))
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv: MLX affine needs cols (%lld) a multiple of the group (%d) "
                       "and scales and biases", (long long)m->cols, m->group);
    const size_t prb = packed_row_bytes(m);
    if (!m->w || m->row_bytes < prb)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv: rows of %zu bytes (the packed row is %zu), w %p",
                       m->row_bytes, prb, m->w);
    const size_t al = (f == F_Q4_K || f == F_MLX4 || f == F_MLX8) ? 16 : f == F_Q4_1 ? 4 : 2;
    if ((uintptr_t)m->w % al || m->row_bytes % al)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv: %s weights must start and have rows %zu-byte aligned (w %p, "
                       "row_bytes %zu)", fname(f),
                       al, m->w, m->row_bytes);
    if (m->fmt == TQ_CUDA_QGEMV_MLX && ((uintptr_t)m->scales % 2 || (uintptr_t)m->biases % 2))
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv: MLX scales/biases must be 2-byte aligned");
    return TQ_OK;
}

extern "C" size_t tq_cuda_qgemv_packed_bytes(const tq_cuda_qmat *m)
{
    if (!m || !kfmt(m))
        return 0;
    return (size_t)m->rows * packed_row_bytes(m) + 4 * sb_count(m);
}

extern "C" int tq_cuda_qgemv_wide(const tq_cuda_qmat *m)
{
    const int f = m ? kfmt(m) : 0;
    if (!f || m->cols <= 0 || m->cols % act_block(f))
        return 0;
    qargs g = {};
    g.w = (const uint8_t *)m->w;
    g.row_bytes = m->row_bytes;
    g.rows = m->rows;
    g.cols = m->cols;
    g.act = nullptr; // the caller's workspace: cudaMalloc'ed, 16-byte aligned
    return use_wide(f, g, 1) ? 1 : 0;
}

extern "C" size_t tq_cuda_qgemv_act_bytes(const tq_cuda_qmat *m, int n)
{
    const int f = m ? kfmt(m) : 0;
    if (!f || n < 1 || m->cols <= 0 || m->cols % act_block(f))
        return 0;
    return act_geom_of(f, m->cols).stride * (size_t)n;
}

extern "C" tq_status tq_cuda_qgemv(const tq_cuda_qmat *m, const float *x, int64_t ldx, int n, float *y,
                                   int64_t ldy, void *act, void *stream)
{
    tq_status st = tq_cuda_qgemv_check(m);
    if (st != TQ_OK)
        return st;
    if (!x || !y || !act || n < 1 || ldx < m->cols || ldy < m->rows)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv: x %p (ldx %lld >= cols %lld), y %p (ldy %lld >= rows %lld), "
                       "act %p, n %d (>= 1)", (const void *)x, (long long)ldx, (long long)m->cols, (void *)y,
                       (long long)ldy, (long long)m->rows, act, n);
    if ((uintptr_t)act % 16)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv: the activation workspace must be 16-byte aligned");
    return run_dev(m, x, ldx, n, y, ldy, act, (cudaStream_t)stream, 0);
}

extern "C" tq_status tq_cuda_qgemv_job(const tq_cuda_qjob *jb, void *stream, int pdl)
{
    if (!jb || jb->n_out < 1 || jb->n_out > 4 || !jb->src || jb->pre < 0 || jb->pre > 3 || (jb->pre && !jb->aux))
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv_job: %d outputs (1..4), src %p, pre %d (0..3, 1..3 need aux)",
                       jb ? jb->n_out : 0, jb ? (const void *)jb->src : NULL, jb ? jb->pre : -1);
    const tq_cuda_qmat *m0 = jb->m[0];
    for (int i = 0; i < jb->n_out; i++) {
        const tq_cuda_qmat *m = jb->m[i];
        tq_status st = tq_cuda_qgemv_check(m);
        if (st != TQ_OK)
            return st;
        if (kfmt(m) != kfmt(m0) || m->cols != m0->cols || m->group != m0->group || m->sb_f16 != m0->sb_f16 ||
            !jb->y[i])
            return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv_job: output %d: the outputs of a job share the format, "
                           "the columns and (MLX) the group and scale type, and each needs y", i);
    }
    if (m0->cols > TQ_CUDA_QJOB_MAXC)
        return QG_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_qgemv_job: %lld columns (the fused kernel stages at most %d)",
                       (long long)m0->cols, TQ_CUDA_QJOB_MAXC);
    const int f = kfmt(m0);
    qjob_k k = {};
    k.n = jb->n_out;
    int be = 0;
    for (int i = 0; i < jb->n_out; i++) {
        const tq_cuda_qmat *m = jb->m[i];
        k.w[i] = (const uint8_t *)m->w;
        k.row_bytes[i] = m->row_bytes;
        k.sc[i] = (const uint16_t *)m->scales;
        k.bi[i] = (const uint16_t *)m->biases;
        k.y[i] = jb->y[i];
        k.rows[i] = (int)m->rows;
        k.acc[i] = jb->acc[i] != 0;
        be += (int)((m->rows + QJ_WARPS - 1) / QJ_WARPS);
        k.blk_end[i] = be;
    }
    k.cols = m0->cols;
    k.group = m0->group > 0 ? m0->group : 32;
    k.sb_f16 = m0->sb_f16;
    k.src = jb->src;
    k.aux = jb->aux;
    k.eps = jb->eps;
    k.p1 = jb->plus_one;
    k.ag = act_geom_of(f, m0->cols);
    QG_CUDA(launch_job(f, k, jb->pre, (cudaStream_t)stream, pdl));
    return TQ_OK;
}

extern "C" tq_status tq_cuda_qgemv_dequant_bf16(const tq_cuda_qmat *m, void *out, void *stream)
{
    tq_status st = tq_cuda_qgemv_check(m);
    if (st != TQ_OK)
        return st;
    const int f = kfmt(m);
    if (f == F_MLX4 || f == F_MLX8)
        return QG_FAIL(TQ_E_UNSUPPORTED, "tq_cuda_qgemv_dequant_bf16: MLX affine rows (dequantized at upload)");
    if (!out || (uintptr_t)out % 16 || m->cols % 8)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv_dequant_bf16: out %p must be 16-byte aligned", out);
    const int64_t n = m->rows * (m->cols / 32);
    const unsigned grid = (unsigned)((n + 255) / 256);
    const cudaStream_t s = (cudaStream_t)stream;
    const uint8_t *w = (const uint8_t *)m->w;
    uint16_t *o = (uint16_t *)out;
    switch (f) {
    case F_Q8_0: dequant_bf16_kernel<F_Q8_0><<<grid, 256, 0, s>>>(w, m->row_bytes, m->rows, m->cols, o); break;
    case F_Q4_0: dequant_bf16_kernel<F_Q4_0><<<grid, 256, 0, s>>>(w, m->row_bytes, m->rows, m->cols, o); break;
    case F_Q4_1: dequant_bf16_kernel<F_Q4_1><<<grid, 256, 0, s>>>(w, m->row_bytes, m->rows, m->cols, o); break;
    case F_Q4_K: dequant_bf16_kernel<F_Q4_K><<<grid, 256, 0, s>>>(w, m->row_bytes, m->rows, m->cols, o); break;
    default: dequant_bf16_kernel<F_Q6_K><<<grid, 256, 0, s>>>(w, m->row_bytes, m->rows, m->cols, o); break;
    }
    QG_CUDA(cudaGetLastError());
    return TQ_OK;
}

namespace {
// device buffers freed on scope exit
struct dbufs {
    std::vector<void *> p;
    ~dbufs()
    {
        for (void *q : p)
            cudaFree(q);
    }
    cudaError_t get(void **out, size_t n)
    {
        *out = NULL;
        cudaError_t e = cudaMalloc(out, n ? n : 16);
        if (e == cudaSuccess)
            p.push_back(*out);
        return e;
    }
};
} // namespace

extern "C" tq_status tq_cuda_qgemv_host(const tq_cuda_qmat *m, const float *x, int n, float *y, int8_t *act_qs,
                                        float *act_d)
{
    if (!m)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv_host: NULL matrix view");
    tq_cuda_qmat d = *m;
    const size_t wb = (size_t)m->rows * m->row_bytes, sbb = 2 * sb_count(m);
    const size_t ab = tq_cuda_qgemv_act_bytes(m, n);
    dbufs B;
    void *dw, *ds = NULL, *dbi = NULL, *dx, *dy, *da;
    QG_CUDA(B.get(&dw, wb));
    d.w = dw; // checked with the device pointer's alignment
    if (m->fmt == TQ_CUDA_QGEMV_MLX) {
        QG_CUDA(B.get(&ds, sbb));
        QG_CUDA(B.get(&dbi, sbb));
        d.scales = ds;
        d.biases = dbi;
        if (!m->scales || !m->biases)
            d.scales = d.biases = NULL;
    }
    tq_status st = tq_cuda_qgemv_check(&d);
    if (st != TQ_OK)
        return st;
    if (!x || !y || n < 1 || !ab)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv_host: x %p, y %p, n %d", (const void *)x, (void *)y, n);
    QG_CUDA(B.get(&dx, sizeof(float) * (size_t)n * m->cols));
    QG_CUDA(B.get(&dy, sizeof(float) * (size_t)n * m->rows));
    QG_CUDA(B.get(&da, ab));
    QG_CUDA(cudaMemcpy(dw, m->w, wb, cudaMemcpyHostToDevice));
    if (ds) {
        QG_CUDA(cudaMemcpy(ds, m->scales, sbb, cudaMemcpyHostToDevice));
        QG_CUDA(cudaMemcpy(dbi, m->biases, sbb, cudaMemcpyHostToDevice));
    }
    QG_CUDA(cudaMemcpy(dx, x, sizeof(float) * (size_t)n * m->cols, cudaMemcpyHostToDevice));
    st = tq_cuda_qgemv(&d, (const float *)dx, m->cols, n, (float *)dy, m->rows, da, NULL);
    if (st != TQ_OK)
        return st;
    QG_CUDA(cudaDeviceSynchronize());
    QG_CUDA(cudaMemcpy(y, dy, sizeof(float) * (size_t)n * m->rows, cudaMemcpyDeviceToHost));
    if (act_qs || act_d) {
        const int f = kfmt(m), blk = act_block(f);
        const act_geom ag = act_geom_of(f, m->cols);
        std::vector<uint8_t> h(ab);
        QG_CUDA(cudaMemcpy(h.data(), da, ab, cudaMemcpyDeviceToHost));
        for (int t = 0; t < n; t++) {
            const uint8_t *a = h.data() + (size_t)t * ag.stride;
            for (int64_t j = 0; act_qs && j < m->cols; j++) {
                int64_t pos = j;
                if (f == F_MLX4) {
                    const int k = (int)(j & 7);
                    pos = (j & ~(int64_t)7) | ((k & 1) ? 4 + (k >> 1) : (k >> 1));
                }
                act_qs[(size_t)t * m->cols + j] = (int8_t)a[pos];
            }
            for (int64_t b = 0; act_d && b < m->cols / blk; b++)
                memcpy(&act_d[(size_t)t * (m->cols / blk) + b], a + ag.off_d + 4 * b, 4);
        }
    }
    return TQ_OK;
}

extern "C" tq_status tq_cuda_qgemv_dequant_host(const tq_cuda_qmat *m, uint16_t *out)
{
    if (!m || !out)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv_dequant_host: NULL argument");
    tq_cuda_qmat d = *m;
    const size_t wb = (size_t)m->rows * m->row_bytes, ob = (size_t)m->rows * (size_t)m->cols * 2;
    dbufs B;
    void *dw, *dout;
    QG_CUDA(B.get(&dw, wb));
    QG_CUDA(B.get(&dout, ob));
    d.w = dw;
    QG_CUDA(cudaMemcpy(dw, m->w, wb, cudaMemcpyHostToDevice));
    const tq_status st = tq_cuda_qgemv_dequant_bf16(&d, dout, NULL);
    if (st != TQ_OK)
        return st;
    QG_CUDA(cudaDeviceSynchronize());
    QG_CUDA(cudaMemcpy(out, dout, ob, cudaMemcpyDeviceToHost));
    return TQ_OK;
}

// ---- benchmark --------------------------------------------------------------------------------
namespace {
__device__ __forceinline__ uint32_t hash32(uint64_t i, uint32_t seed)
{
    uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(z ^ (z >> 31));
}

__global__ void fill_kernel(uint32_t *p, size_t n_words, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n_words; i += (size_t)gridDim.x * blockDim.x)
        p[i] = hash32(i, seed);
}

// valid small scales (f16 0x1c00 = 2^-8) in every block's f16 fields; 16-bit scale/bias arrays
__global__ void fix_scales_kernel(uint8_t *w, size_t n_blocks, int bb, int off0, int off1)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n_blocks; i += (size_t)gridDim.x * blockDim.x) {
        *(uint16_t *)(w + i * bb + off0) = 0x1c00;
        if (off1 >= 0)
            *(uint16_t *)(w + i * bb + off1) = 0x1c00;
    }
}

__global__ void set16_kernel(uint16_t *p, size_t n, uint16_t v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

// reads n 16-byte words; the sum is stored only on an impossible condition (keeps the loads)
__global__ void read_kernel(const uint4 *p, size_t n, unsigned *sink)
{
    unsigned acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 w = p[i];
        acc ^= w.x ^ w.y ^ w.z ^ w.w;
    }
    if (acc == 0x9e3779b9u && threadIdx.x == 1023)
        *sink = acc;
}

double median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : (double)v[v.size() / 2];
}
} // namespace

extern "C" tq_status tq_cuda_qgemv_bench(int fmt, int bits, int group, int64_t rows, int64_t cols, int n, int reps,
                                         int cold, tq_cuda_qgemv_timing *out)
{
    if (!out || reps < 1 || n < 1)
        return QG_FAIL(TQ_E_ARG, "tq_cuda_qgemv_bench: reps %d, n %d (>= 1), out %p", reps, n, (void *)out);
    tq_cuda_qmat m = {};
    m.fmt = fmt;
    m.rows = rows;
    m.cols = cols;
    m.bits = bits;
    m.group = group;
    m.w = (const void *)(uintptr_t)256; // placeholders for the check
    m.scales = m.biases = m.w;
    m.row_bytes = packed_row_bytes(&m);
    tq_status st = tq_cuda_qgemv_check(&m);
    if (st != TQ_OK)
        return st;
    const int f = kfmt(&m);
    const size_t wb = (size_t)rows * m.row_bytes, nsb = sb_count(&m);
    dbufs B;
    void *dw, *ds = NULL, *dbi = NULL, *dx, *dy, *da, *flush = NULL;
    QG_CUDA(B.get(&dw, al16(wb)));
    fill_kernel<<<1024, 256>>>((uint32_t *)dw, al16(wb) / 4, 12345u);
    if (f == F_MLX4 || f == F_MLX8) {
        QG_CUDA(B.get(&ds, 2 * nsb));
        QG_CUDA(B.get(&dbi, 2 * nsb));
        set16_kernel<<<1024, 256>>>((uint16_t *)ds, nsb, 0x3c00);  // bf16 2^-7
        set16_kernel<<<1024, 256>>>((uint16_t *)dbi, nsb, 0xbc00); // -2^-7
    } else {
        int be, bb;
        block_of(f, &be, &bb);
        const size_t nblk = (size_t)rows * (size_t)(cols / be);
        const int off0 = f == F_Q6_K ? 208 : 0, off1 = f == F_Q4_K || f == F_Q4_1 ? 2 : -1;
        fix_scales_kernel<<<1024, 256>>>((uint8_t *)dw, nblk, bb, off0, off1);
    }
    QG_CUDA(cudaGetLastError());
    m.w = dw;
    m.scales = ds;
    m.biases = dbi;
    QG_CUDA(B.get(&dx, sizeof(float) * (size_t)n * cols));
    {
        std::vector<float> hx((size_t)n * cols);
        for (size_t i = 0; i < hx.size(); i++)
            hx[i] = (float)((int)((i * 2654435761u) % 2001) - 1000) * 1e-3f;
        QG_CUDA(cudaMemcpy(dx, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
    QG_CUDA(B.get(&dy, sizeof(float) * (size_t)n * rows));
    QG_CUDA(B.get(&da, tq_cuda_qgemv_act_bytes(&m, n)));
    const size_t flush_bytes = (size_t)256 << 20;
    if (cold) {
        QG_CUDA(B.get(&flush, flush_bytes + 64));
        QG_CUDA(cudaMemset(flush, 0x5a, flush_bytes + 64));
    }
    cudaEvent_t e0, e1;
    QG_CUDA(cudaEventCreate(&e0));
    QG_CUDA(cudaEventCreate(&e1));
    std::vector<float> tall, tker, tread, tnopdl;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < 3 && st == TQ_OK; i++)
        st = tq_cuda_qgemv(&m, (const float *)dx, cols, n, (float *)dy, rows, da, NULL);
    // 0: the whole call, 1: the GEMV kernel (activation already quantized), 2: plain read,
    // 3: the whole call without programmatic dependent launch
    for (int what = 0; what < 4 && st == TQ_OK && e == cudaSuccess; what++)
        for (int i = 0; i < reps && st == TQ_OK && e == cudaSuccess; i++) {
            if (flush)
                read_kernel<<<1024, 256>>>((const uint4 *)flush, flush_bytes / 16,
                                           (unsigned *)((uint8_t *)flush + flush_bytes));
            if ((e = cudaEventRecord(e0)) != cudaSuccess)
                break;
            if (what == 2)
                read_kernel<<<132 * 8, 256>>>((const uint4 *)dw, wb / 16, (unsigned *)dy);
            else
                st = run_dev(&m, (const float *)dx, cols, n, (float *)dy, rows, da, NULL, what == 1, what == 3 ? 0 : 1);
            float ms = 0;
            if (st == TQ_OK && (e = cudaEventRecord(e1)) == cudaSuccess && (e = cudaEventSynchronize(e1)) == cudaSuccess)
                e = cudaEventElapsedTime(&ms, e0, e1);
            (what == 0 ? tall : what == 1 ? tker : what == 2 ? tread : tnopdl).push_back(ms * 1000.0f);
        }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (st != TQ_OK)
        return st;
    if (e != cudaSuccess || (e = cudaDeviceSynchronize()) != cudaSuccess)
        return QG_FAIL(TQ_E_CUDA, "tq_cuda_qgemv_bench: %s", cudaGetErrorString(e));
    out->us_med = median(tall);
    out->us_min = *std::min_element(tall.begin(), tall.end());
    out->us_kernel = median(tker);
    out->us_read = median(tread);
    out->us_nopdl = median(tnopdl);
    out->bytes = tq_cuda_qgemv_packed_bytes(&m);
    return TQ_OK;
}
