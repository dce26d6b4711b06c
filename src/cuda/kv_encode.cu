// kv_encode.cu -- KV row encoders on the GPU, byte-identical to the CPU scalar reference
// (src/kv/kv_ref.c): one warp per row, the row staged in shared memory, every rounding step an
// explicit IEEE intrinsic (__fdiv_rn, __fmul_rn, __fadd_rn, __fsqrt_rn, rintf) so that no a*b+c
// is fused whatever the flags (the file is also built with --fmad=false, STYLE 3.7).
// Sequential parts of the spec (group min/max with its NaN rule, the 32-term sum of squares)
// run on one lane per group in the reference order; the FWHT runs lane-parallel (each
// butterfly is the same two IEEE operations on the same operands in the same stage order).
#include <cuda_fp16.h>
#include <math.h>

#include <atomic>
#include <mutex>

#include "cuda/kv_cuda.cuh"

namespace {

constexpr int ENC_WARPS = 4; // rows per block

__device__ float d_signs[64 + 128 + 256 + 512];
__device__ float d_bounds[3 + 7 + 15 + 31 + 255];
__device__ float d_fwht_scale[4];

__device__ __forceinline__ const float *signs_of(int d)
{
    return d == 64 ? d_signs : d == 128 ? d_signs + 64 : d == 256 ? d_signs + 192 : d_signs + 448;
}
__device__ __forceinline__ float fwht_scale_of(int d)
{
    return d == 64 ? d_fwht_scale[0] : d == 128 ? d_fwht_scale[1] : d == 256 ? d_fwht_scale[2] : d_fwht_scale[3];
}
__device__ __forceinline__ const float *bounds_of(int bits)
{
    return bits == 2 ? d_bounds : bits == 3 ? d_bounds + 3 : bits == 4 ? d_bounds + 10 : bits == 5 ? d_bounds + 25 : d_bounds + 56;
}

// fp32 -> fp16 bits exactly as tq_f32_to_f16 (RNE; NaN keeps sign and top payload, quiet).
__device__ __forceinline__ uint16_t f16_bits(float f)
{
    const uint32_t x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu));
    return __half_as_ushort(__float2half_rn(f));
}
// tq_kv_f16: NaN -> canonical 0x7e00.
__device__ __forceinline__ uint16_t kv_f16(float f)
{
    return f != f ? (uint16_t)0x7e00u : f16_bits(f);
}
__device__ __forceinline__ float f16_to_f32(uint16_t h)
{
    return __half2float(__ushort_as_half(h));
}
// fp32 -> bf16 bits exactly as tq_f32_to_bf16.
__device__ __forceinline__ uint16_t bf16_bits(float f)
{
    const uint32_t x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ float load_src(const void *src, tq_dtype t, int64_t i)
{
    if (t == TQ_DTYPE_F32)
        return ((const float *)src)[i];
    const uint16_t h = ((const uint16_t *)src)[i];
    if (t == TQ_DTYPE_F16)
        return f16_to_f32(h);
    return __uint_as_float((uint32_t)h << 16);
}

// round_clamp of kv_ref.c: rint, NaN -> 0, clamp.
__device__ __forceinline__ float round_clamp(float v, float lo, float hi)
{
    float q = rintf(v);
    if (q != q)
        q = 0.0f;
    q = q < lo ? lo : q;
    q = q > hi ? hi : q;
    return q;
}

// group_minmax of kv_ref.c (sequential, NaN -> both NaN, +0 canonical).
__device__ void group_minmax(const float *x, int n, float *mn_out, float *mx_out)
{
    float mn = x[0], mx = x[0];
    int nan = 0;
    for (int j = 0; j < n; j++) {
        const float v = x[j];
        if (v != v)
            nan = 1;
        if (v < mn)
            mn = v;
        if (v > mx)
            mx = v;
    }
    if (nan) {
        *mn_out = __int_as_float(0x7fc00000);
        *mx_out = __int_as_float(0x7fc00000);
        return;
    }
    *mn_out = __fadd_rn(mn, 0.0f);
    *mx_out = __fadd_rn(mx, 0.0f);
}

// Pack n (multiple of 8) indices of `bits` into dst, flat LE bitstream (tq_kv_pack_bits).
__device__ void pack_bits(const uint8_t *idx, int n, int bits, uint8_t *dst)
{
    if (bits == 8) {
        for (int i = 0; i < n; i++)
            dst[i] = idx[i];
        return;
    }
    const unsigned mask = (1u << bits) - 1u;
    // 8 indices make `bits` whole bytes.
    for (int i0 = 0; i0 < n; i0 += 8) {
        uint64_t acc = 0;
        for (int k = 0; k < 8; k++)
            acc |= (uint64_t)(idx[i0 + k] & mask) << (k * bits);
        uint8_t *o = dst + (size_t)i0 * bits / 8;
        for (int k = 0; k < bits; k++)
            o[k] = (uint8_t)(acc >> (8 * k));
    }
}

// Count of boundaries strictly below z (boundaries non-decreasing; NaN -> 0): binary search for
// the first j with !(z > B[j]); equals tq_kv_v_index_ref().
__device__ __forceinline__ int v_index(float z, const float *b, int nb)
{
    int lo = 0, hi = nb; // answer in [lo, hi]
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (z > b[mid])
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

// One warp per row. smem per warp: d floats + d index bytes + 16 group floats.
template <int D>
__global__ void __launch_bounds__(ENC_WARPS * 32) encode_rows(tqc_encode_args a, int is_v)
{
    if (is_v < 0) // K and V in one launch: blockIdx.y picks
        is_v = (int)blockIdx.y;
    __shared__ float s_x[ENC_WARPS][D];
    __shared__ uint8_t s_idx[ENC_WARPS][D];
    __shared__ float s_gp[ENC_WARPS][D / 32][2];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t n_rows = (int64_t)a.batch * a.n_new * a.n_heads;
    const int64_t r = (int64_t)blockIdx.x * ENC_WARPS + w;
    if (r >= n_rows)
        return;
    const void *src = is_v ? a.v_src : a.k_src;
    uint8_t *dst_base = is_v ? a.v_dst : a.k_dst;
    const size_t rb = is_v ? a.g.v_row : a.g.k_row;
    const int h = (int)(r % a.n_heads);
    const int64_t t = (r / a.n_heads) % a.n_new;
    const int64_t b = r / ((int64_t)a.n_heads * a.n_new);
    uint8_t *dst = dst_base + (((int64_t)b * a.n_heads + h) * a.cap + a.t0 + t) * (int64_t)rb;
    float *x = s_x[w];
    uint8_t *idx = s_idx[w];
    for (int j = lane; j < D; j += 32)
        x[j] = load_src(src, a.src_type, r * D + j);
    __syncwarp();
    const int fam = a.g.fam;
    if (fam == TQC_F16 || fam == TQC_BF16) {
        for (int j = lane; j < D; j += 32) {
            const uint16_t hb = fam == TQC_F16 ? f16_bits(x[j]) : bf16_bits(x[j]);
            dst[2 * j] = (uint8_t)hb;
            dst[2 * j + 1] = (uint8_t)(hb >> 8);
        }
        return;
    }
    if (fam == TQC_AFF) {
        const int bits = is_v ? a.g.vb : a.g.kb;
        const float maxv = (float)((1 << bits) - 1);
        constexpr int NG = D / 64;
        if (lane < NG) {
            float mn, mx;
            group_minmax(x + 64 * lane, 64, &mn, &mx);
            const uint16_t sh = kv_f16(__fdiv_rn(__fsub_rn(mx, mn), maxv)), bh = kv_f16(mn);
            s_gp[w][lane][0] = f16_to_f32(sh);
            s_gp[w][lane][1] = f16_to_f32(bh);
            uint8_t *sc = dst + (size_t)D * bits / 8;
            sc[2 * lane] = (uint8_t)sh;
            sc[2 * lane + 1] = (uint8_t)(sh >> 8);
            sc[2 * NG + 2 * lane] = (uint8_t)bh;
            sc[2 * NG + 2 * lane + 1] = (uint8_t)(bh >> 8);
        }
        __syncwarp();
        for (int j = lane; j < D; j += 32) {
            const float s = s_gp[w][j / 64][0], m = s_gp[w][j / 64][1];
            idx[j] = s > 0.0f ? (uint8_t)(int)round_clamp(__fdiv_rn(__fsub_rn(x[j], m), s), 0.0f, maxv)
                              : (uint8_t)0;
        }
        __syncwarp();
        if (lane < NG)
            pack_bits(idx + 64 * lane, 64, bits, dst + (size_t)lane * 64 * bits / 8);
        return;
    }
    // ---- turbo
    constexpr int NG = D / 32;
    const float eps = 9.99999993922529e-09f; // tq_kv_eps, float32 0x322bcc77
    if (!is_v) {
        const int bits = a.g.kb;
        const int is_signed = bits == 8;
        if (lane < NG) {
            const float *xg = x + 32 * lane;
            float mn, mx, scale, zero, se;
            group_minmax(xg, 32, &mn, &mx);
            if (is_signed) {
                scale = __fdiv_rn(__fsub_rn(mx, mn), 254.0f);
                se = __fadd_rn(scale, eps);
                zero = rintf(__fdiv_rn(__fadd_rn(mx, mn), __fmul_rn(2.0f, se)));
            } else {
                const float maxv = (float)((1 << bits) - 1);
                scale = __fdiv_rn(__fsub_rn(mx, mn), maxv);
                se = __fadd_rn(scale, eps);
                zero = rintf(__fdiv_rn(mn, se));
            }
            s_gp[w][lane][0] = se;
            s_gp[w][lane][1] = zero;
            const uint16_t sh = kv_f16(scale), zh = kv_f16(zero);
            uint8_t *sc = dst + (size_t)D * bits / 8;
            sc[2 * lane] = (uint8_t)sh;
            sc[2 * lane + 1] = (uint8_t)(sh >> 8);
            sc[2 * NG + 2 * lane] = (uint8_t)zh;
            sc[2 * NG + 2 * lane + 1] = (uint8_t)(zh >> 8);
        }
        __syncwarp();
        const float maxv = (float)((1 << bits) - 1);
        for (int j = lane; j < D; j += 32) {
            const float se = s_gp[w][j / 32][0], zero = s_gp[w][j / 32][1];
            const float v = __fsub_rn(__fdiv_rn(x[j], se), zero);
            if (is_signed)
                idx[j] = (uint8_t)(int8_t)(int)round_clamp(v, -127.0f, 127.0f);
            else
                idx[j] = (uint8_t)(int)round_clamp(v, 0.0f, maxv);
        }
        __syncwarp();
        if (lane < NG)
            pack_bits(idx + 32 * lane, 32, bits, dst + (size_t)lane * 4 * bits);
        return;
    }
    // V: rotate (lane owns E contiguous elements), RMS per group, Lloyd-Max index, pack.
    constexpr int E = D / 32;
    const int bits = a.g.vb;
    const float *sg = signs_of(D);
    float u[E];
#pragma unroll
    for (int k = 0; k < E; k++)
        u[k] = __fmul_rn(x[lane * E + k], sg[lane * E + k]);
#pragma unroll
    for (int hh = 1; hh < E; hh <<= 1) {
#pragma unroll
        for (int k = 0; k < E; k++)
            if ((k & hh) == 0) {
                const float p = u[k], q = u[k + hh];
                u[k] = __fadd_rn(p, q);
                u[k + hh] = __fsub_rn(p, q);
            }
    }
#pragma unroll
    for (int lm = 1; lm < 32; lm <<= 1) {
        const bool upper = (lane & lm) != 0;
#pragma unroll
        for (int k = 0; k < E; k++) {
            const float o = __shfl_xor_sync(0xffffffffu, u[k], lm);
            u[k] = upper ? __fsub_rn(o, u[k]) : __fadd_rn(u[k], o);
        }
    }
    const float sd = fwht_scale_of(D);
    __syncwarp();
#pragma unroll
    for (int k = 0; k < E; k++)
        x[lane * E + k] = __fmul_rn(u[k], sd);
    __syncwarp();
    if (lane < NG) {
        const float *yg = x + 32 * lane;
        float ss = 0.0f;
        for (int k = 0; k < 32; k++)
            ss = __fadd_rn(ss, __fmul_rn(yg[k], yg[k]));
        const float scale = __fsqrt_rn(__fmul_rn(ss, 0.03125f));
        s_gp[w][lane][0] = __fadd_rn(scale, eps);
        const uint16_t sh = kv_f16(scale);
        uint8_t *sc = dst + (size_t)D * bits / 8;
        sc[2 * lane] = (uint8_t)sh;
        sc[2 * lane + 1] = (uint8_t)(sh >> 8);
    }
    __syncwarp();
    const float *bd = bounds_of(bits);
    const int nb = (1 << bits) - 1;
    for (int j = lane; j < D; j += 32)
        idx[j] = (uint8_t)v_index(__fdiv_rn(x[j], s_gp[w][j / 32][0]), bd, nb);
    __syncwarp();
    if (lane < NG)
        pack_bits(idx + 32 * lane, 32, bits, dst + (size_t)lane * 4 * bits);
}

// Counter-based Gaussian generator for benchmark fills (splitmix64 + Box-Muller).
__device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
__global__ void random_normal(float *dst, int64_t n, uint64_t seed)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const uint64_t z = mix64(seed ^ mix64((uint64_t)i));
        const float u1 = ((float)(uint32_t)(z >> 40) + 0.5f) * (1.0f / 16777216.0f);
        const float u2 = (float)(uint32_t)(z & 0xffffffu) * (1.0f / 16777216.0f);
        dst[i] = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    }
}

std::mutex g_tables_mu; // first use may come from several threads
bool g_tables_ready = false;

tq_status init_tables(void)
{
    std::lock_guard<std::mutex> lock(g_tables_mu);
    if (g_tables_ready)
        return TQ_OK;
    float signs[64 + 128 + 256 + 512], bounds[3 + 7 + 15 + 31 + 255], fs[4];
    int o = 0;
    for (int d = 64; d <= 512; d *= 2) {
        const float *s = tq_kv_signs(d);
        for (int j = 0; j < d; j++)
            signs[o++] = s[j];
    }
    o = 0;
    const int bl[5] = {2, 3, 4, 5, 8};
    for (int i = 0; i < 5; i++) {
        const float *b = tq_kv_boundaries(bl[i]);
        for (int j = 0; j < (1 << bl[i]) - 1; j++)
            bounds[o++] = b[j];
    }
    for (int i = 0; i < 4; i++)
        fs[i] = tq_kv_fwht_scale(64 << i);
    TQC_CUDA(cudaMemcpyToSymbol(d_signs, signs, sizeof(signs)));
    TQC_CUDA(cudaMemcpyToSymbol(d_bounds, bounds, sizeof(bounds)));
    TQC_CUDA(cudaMemcpyToSymbol(d_fwht_scale, fs, sizeof(fs)));
    g_tables_ready = true;
    return TQ_OK;
}

// is_v 0 / 1: the K / V rows; -1: both in one launch (grid.y = 2: a decode step's append is one
// kernel, not two)
template <int D>
void launch_d(const tqc_encode_args *a, int is_v)
{
    const int64_t n_rows = (int64_t)a->batch * a->n_new * a->n_heads;
    const unsigned blocks = (unsigned)((n_rows + ENC_WARPS - 1) / ENC_WARPS);
    encode_rows<D><<<dim3(blocks, is_v < 0 ? 2 : 1), ENC_WARPS * 32, 0, a->stream>>>(*a, is_v);
}

} // namespace

tq_status tqc_encode_launch(const tqc_encode_args *a)
{
    tq_status st = init_tables();
    if (st != TQ_OK)
        return st;
    const int64_t n_rows = (int64_t)a->batch * a->n_new * a->n_heads;
    if (n_rows <= 0)
        return TQ_OK;
    if (n_rows > (int64_t)ENC_WARPS * 0x7fffffffLL)
        return TQC_FAIL(TQ_E_ARG, "CUDA encode: %lld rows is too many for one call", (long long)n_rows);
    const int both = a->k_src && a->v_src && !a->two;
    for (int is_v = 0; is_v < 2; is_v++) {
        if (!(is_v ? a->v_src : a->k_src) || (both && is_v))
            continue;
        const int which = both ? -1 : is_v;
        switch (a->g.d) {
        case 64: launch_d<64>(a, which); break;
        case 128: launch_d<128>(a, which); break;
        case 256: launch_d<256>(a, which); break;
        case 512: launch_d<512>(a, which); break;
        default: return TQC_FAIL(TQ_E_UNSUPPORTED, "CUDA encode: head_dim %d (valid: 64, 128, 256, 512)", a->g.d);
        }
        TQC_CUDA(cudaGetLastError());
    }
    return TQ_OK;
}

tq_status tqc_random_launch(float *dst, int64_t n, uint64_t seed, cudaStream_t stream)
{
    if (n <= 0)
        return TQ_OK;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65536)
        blocks = 65536;
    random_normal<<<(unsigned)blocks, 256, 0, stream>>>(dst, n, seed);
    TQC_CUDA(cudaGetLastError());
    return TQ_OK;
}
