// kv_attend.cu -- fused decode attention over the packed KV cache (flash-decoding, tensor cores).
//
// Grid (split, kv_head * row_block, batch); 4 warps per block; each warp streams its own tiles
// of TT tokens (K and V rows, exactly the codec's bytes) global -> shared with two bulk copies
// (cp.async.bulk on an mbarrier, one lane; TQC_BULK=0: 16-byte cp.async from every lane), NSTAGE
// stages per warp, then per tile:
//   S[8 rows x TT] = Q[rows x d] . K^T; rows = query heads of the kv head's group x query tokens
//     (<= 8 per row block; the MMA's M is padded to 16). The K tile is read once for all rows.
//     - integer codes (turbo k8/k4/k2/k5, kv8/kv4): int8 tensor cores (mma m16n8k32 s8 x s8|u8)
//       straight on the stored bytes; Q is quantized per row to 16-bit fixed point (one step,
//       ~2^-15 of the row's max |q|) and split into int8 hi (MMA rows 0-7) and lo (rows 8-15,
//       otherwise idle: one exact integer MMA gives both); per (token, group):
//       s += scale * (256 hi + lo) + c * sum(q over the group) / step, times the step once per
//       token, with c = zero * scale (turbo) or bias (kv8/kv4): the decoded row's dot product.
//     - bf16 / f16 rows: bf16 / f16 MMA on the stored halves, Q split hi (rows 0-7) + lo
//       (rows 8-15) (~fp32).
//   online softmax in the exp2 domain (Q pre-scaled by scale * log2 e), then
//   O^T[d x 8] += V^T[d x 16] . P^T[16 x 8]: V decoded to fp16 pairs in registers (turbo <= 4
//     bits: one shared-memory lookup gives (C[i_t], C[i_t']) for two tokens, times their fp16
//     scales); turbo values stay in the ROTATED domain; the inverse FWHT runs once per output
//     row in the reduce kernel (deferred, exact by linearity). bf16 rows: bf16 MMA with P hi+lo.
// Each block merges its warps into one partial (m, l, O) per row; the splits' partials are then
// merged, normalised, un-rotated (turbo) and written as fp32 outputs (tq_cuda_merge): by block 0 of
// a thread-block cluster holding the unit's splits, reading the others' shared memory (CLUSTER,
// <= 16 splits), by the unit's last block through L2 (FUSED), or by a reduce kernel (KERNEL).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdlib.h>

#include <atomic>
#include <mutex>

#include <cooperative_groups.h>

#include "cuda/kv_cuda.cuh"
#include "cuda/pdl.cuh"

#pragma nv_diag_suppress 177 // trait members unused by some instantiations

namespace {

// Tuning (measured on the H200, docs/results.md; bench/cuda/NOTES.md): target bytes of one warp stage (K + V rows of
// TT tokens) and the resident blocks per SM the register budget is sized for (head_dim <= 128),
// for integer-coded caches (turbo, kv8/kv4) and for f16/bf16 caches.
#ifndef TQC_STAGE_INT
#define TQC_STAGE_INT 16384
#endif
#ifndef TQC_MINB_INT
#define TQC_MINB_INT 2
#endif
#ifndef TQC_STAGE_HALF
#define TQC_STAGE_HALF 8192
#endif
#ifndef TQC_MINB_HALF
#define TQC_MINB_HALF 3
#endif
// Split partials loaded per step of the reduce loop (independent loads in flight per thread; at
// batch 1 the 33-64 splits make L2 latency, not bandwidth, this loop's bound). 4 is what every
// measured table used; gpu_visit.sh cold A/Bs 16.
#ifndef TQC_RED_UNROLL
#define TQC_RED_UNROLL 4
#endif
// Copies of the turbo V pair table (<= 64 entries: V <= 3 bits) side by side, lane l reading copy
// l % TQC_LUT_REP: the 32 lanes' random lookups then hit at most 32 / TQC_LUT_REP lanes per bank
// (1 = one table: bank conflicts of random indices). Power of two, <= 16. Measured (H200, a3):
// 16 copies gained nothing for k8v3 and cost k4v3 8% at batch 8, so 1.
#ifndef TQC_LUT_REP
#define TQC_LUT_REP 1
#endif
// turbo 8-bit K codes at head_dim 128: stage bytes and stages of their own (measured on the H200:
// 32-token tiles in 3 stages beat 64-token tiles in 2 for k8v3; k4v3 keeps the 64-token tiles).
#ifndef TQC_STAGE_K8
#define TQC_STAGE_K8 8192
#endif
#ifndef TQC_NSTAGE_K8
#define TQC_NSTAGE_K8 3
#endif
// Diagnostic (issue 16 item 6, bench builds only): turbo P.V in ~fp32 -- V = centroid * scale
// computed in f32 and split into fp16 hi + lo, P split likewise, three fp16 MMAs (Vhi Phi + Vhi
// Plo + Vlo Phi) instead of one on fp16-rounded values (the pair-table path off). Slower; 0 in
// every product build.
#ifndef TQC_PV_EXACT
#define TQC_PV_EXACT 0
#endif
// turbo 4-bit K codes at head_dim 128: stages of their own (64-token tiles of 8.7 KB).
#ifndef TQC_NSTAGE_K4
#define TQC_NSTAGE_K4 TQC_NSTAGE_INT
#endif
// Tiles moved by cp.async.bulk + mbarrier (1) or by 16-byte cp.async from every lane (0).
#ifndef TQC_BULK
#define TQC_BULK 1
#endif
// Pipeline stages per warp (tiles in flight while one is computed = stages - 1).
#ifndef TQC_NSTAGE_INT
#define TQC_NSTAGE_INT 2
#endif
#ifndef TQC_NSTAGE_HALF
#define TQC_NSTAGE_HALF 3
#endif
constexpr int NW = 4; // warps per block
// MERGE_AUTO picks the cluster merge where it pays (1) or always the L2 merge (0).
#ifndef TQC_AUTO_CLUSTER
#define TQC_AUTO_CLUSTER 1
#endif
// Automatic split planning: about one split per this many tokens of a (batch, kv head), between
// one block per SM and one full wave of resident blocks.
#ifndef TQC_SPLIT_TOKENS
#define TQC_SPLIT_TOKENS 4096
#endif

constexpr int RED_UNROLL = TQC_RED_UNROLL; // (#pragma unroll does not expand macros)

template <int D, int FAM>
constexpr int min_blocks()
{
    return D >= 256 ? 2 : (FAM == TQC_TURBO || FAM == TQC_AFF) ? TQC_MINB_INT : TQC_MINB_HALF;
}
constexpr float LOG2E = 1.4426950408889634f;

// 2^x with one MUFU.EX2 (flush-to-zero: x < -126 gives 0, -inf gives 0); exp2f() adds a range
// fix-up of 4 instructions per call, which the softmax does not need (p < 2^-126 is 0 anyway).
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Programmatic dependent launch (cuda/pdl.cuh): the attend kernel lets the reduce kernel be
// scheduled as soon as every attend block runs; the reduce waits (full completion and visibility
// of the attend grid) before reading the partials.

__device__ float d_signs[64 + 128 + 256];
__device__ float d_fwht_scale[3];
__device__ float d_cent[4 + 8 + 16 + 32 + 256];

template <int D, int FAM, int KB, int VB>
struct Tr {
    static constexpr int K_ROW = FAM == TQC_TURBO ? D * KB / 8 + D / 8 : FAM == TQC_AFF ? D * KB / 8 + D / 16 : 2 * D;
    static constexpr int V_ROW = FAM == TQC_TURBO ? D * VB / 8 + D / 16 : FAM == TQC_AFF ? D * VB / 8 + D / 16 : 2 * D;
    static constexpr bool INT = FAM == TQC_TURBO || FAM == TQC_AFF;
    static constexpr bool K8 = FAM == TQC_TURBO && KB == 8 && D == 128; // the measured shape
    static constexpr int STAGE_BYTES = INT ? (K8 ? TQC_STAGE_K8 : TQC_STAGE_INT) : TQC_STAGE_HALF;
    static constexpr int TT0 = (STAGE_BYTES / (K_ROW + V_ROW)) & ~15;
    static constexpr int TT = TT0 < 16 ? 16 : TT0 > 64 ? 64 : TT0; // tokens per warp tile
    static constexpr int K_TILE = (TT * K_ROW + 15) / 16 * 16 + 16;  // + slack for word over-reads
    static constexpr int V_TILE = (TT * V_ROW + 15) / 16 * 16 + 16;
    static constexpr int STAGE = K_TILE + V_TILE;
    static constexpr bool K4 = FAM == TQC_TURBO && KB == 4 && D == 128;
    static constexpr int NSTAGE = INT ? (K8 ? TQC_NSTAGE_K8 : K4 ? TQC_NSTAGE_K4 : TQC_NSTAGE_INT) : TQC_NSTAGE_HALF;
    static constexpr int SMEM_PIPE = NW * NSTAGE * STAGE;
    static constexpr int SMEM_MERGE = NW * 8 * (D + 2) * 4;
    // + the block's partial (8 rows x (D + 2) floats) that the cluster merge reads (MERGE_CLUSTER)
    static constexpr int SMEM_PART = SMEM_MERGE + 8 * (D + 2) * 4;
    static constexpr int SMEM = SMEM_PIPE > SMEM_PART ? SMEM_PIPE : SMEM_PART;
    static constexpr bool QK_INT = FAM == TQC_TURBO || FAM == TQC_AFF;
    static constexpr bool PVX = FAM == TQC_TURBO && TQC_PV_EXACT; // hi + lo P.V (diagnostic)
    static constexpr bool PV_LUT2 = FAM == TQC_TURBO && VB <= 4 && !PVX;
    static constexpr bool PV_U8 = FAM == TQC_AFF && VB == 8;
    static constexpr bool BF = FAM == TQC_BF16;
    static constexpr int NG = D / 32;  // 32-groups
    static constexpr int ND = D / 8;   // V dims per thread
    static constexpr int LUT2 = PV_LUT2 ? 1 << (2 * VB) : 1;
    static constexpr int LUT_REP = PV_LUT2 && LUT2 <= 64 ? TQC_LUT_REP : 1; // copies of the pair table
    static constexpr int LUT_SH = LUT_REP == 16 ? 6 : LUT_REP == 8 ? 5 : LUT_REP == 4 ? 4 : LUT_REP == 2 ? 3 : 2;
    static_assert((4 << (LUT_SH - 2)) == 4 * LUT_REP, "TQC_LUT_REP: 1, 2, 4, 8 or 16");
    static_assert(K_ROW % 4 == 0 && V_ROW % 4 == 0, "rows must be 4-byte multiples");
};

__device__ __forceinline__ void mma_f16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// D = A(s8) . B(s8 or u8) with zero accumulator, A rows g = the query row's high bytes (a0, a2),
// rows g + 8 = its low bytes (a1, a3): c0, c1 = hi . k and c2, c3 = lo . k for tokens 2tig, 2tig+1,
// so one MMA gives both halves of the 16-bit Q (rows 8..15 of the M = 16 tile are otherwise idle).
template <bool BU8>
__device__ __forceinline__ void imma(int c[4], uint32_t hi0, uint32_t lo0, uint32_t hi1, uint32_t lo1, uint32_t b0,
                                     uint32_t b1)
{
    if (BU8)
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%10,%10,%10,%10};\n"
                     : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                     : "r"(hi0), "r"(lo0), "r"(hi1), "r"(lo1), "r"(b0), "r"(b1), "r"(0u));
    else
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%10,%10,%10,%10};\n"
                     : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                     : "r"(hi0), "r"(lo0), "r"(hi1), "r"(lo1), "r"(b0), "r"(b1), "r"(0u));
}

__device__ __forceinline__ uint32_t h2_bits(__half2 h)
{
    return *reinterpret_cast<uint32_t *>(&h);
}
__device__ __forceinline__ __half2 bits_h2(uint32_t u)
{
    return *reinterpret_cast<__half2 *>(&u);
}
__device__ __forceinline__ uint32_t pack_f2(float lo, float hi)
{
    return h2_bits(__floats2half2_rn(lo, hi));
}
__device__ __forceinline__ uint32_t pack_bf2(float lo, float hi)
{
    __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&b);
}
__device__ __forceinline__ float2 unpack_bf2(uint32_t u)
{
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}
__device__ __forceinline__ float f16f(uint16_t h)
{
    return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ uint16_t lds_u16(const uint8_t *p)
{
    return *reinterpret_cast<const uint16_t *>(p);
}
__device__ __forceinline__ uint32_t lds_u32(const uint8_t *p)
{
    return *reinterpret_cast<const uint32_t *>(p);
}

// N fp16 values (4-byte aligned unless N == 1) to fp32.
template <int N>
__device__ __forceinline__ void load_halves(const uint8_t *p, float *out)
{
    if constexpr (N == 1) {
        out[0] = f16f(lds_u16(p));
    } else {
#pragma unroll
        for (int k = 0; k < N / 2; k++) {
            const float2 f = __half22float2(bits_h2(lds_u32(p + 4 * k)));
            out[2 * k] = f.x;
            out[2 * k + 1] = f.y;
        }
    }
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Bulk copies (TQC_BULK=1): one lane per warp moves a tile's K rows and V rows (each contiguous) with
// two cp.async.bulk copies completing on an mbarrier (expect_tx = their bytes), instead of 32 lanes
// issuing 16-byte cp.async; the consumer lanes wait on the barrier's phase parity.
__device__ __forceinline__ void mbar_init(uint64_t *bar)
{
    const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(b));
}
__device__ __forceinline__ void mbar_fence_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, unsigned bytes)
{
    const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_g2s(void *smem, const void *gmem, unsigned bytes, uint64_t *bar)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(s),
                 "l"(gmem), "r"(bytes), "r"(b)
                 : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, unsigned parity)
{
    const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT_%=;\n"
                 "}\n" ::"r"(b),
                 "r"(parity)
                 : "memory");
}
// Orders this thread's earlier shared-memory reads (generic proxy) before later bulk-copy writes.
__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Bits [bit0, bit0 + NBITS) of a 4-byte aligned byte stream, as little-endian words aligned so
// that the first wanted bit is bit 0 of w[0].
template <int NBITS>
struct Bits {
    static constexpr int NW_OUT = (NBITS + 31) / 32;
    uint32_t w[NW_OUT];
    __device__ __forceinline__ void load(const uint8_t *base, int bit0)
    {
        const uint8_t *p = base + ((bit0 >> 5) << 2);
        const int sh = bit0 & 31;
        uint32_t raw[NW_OUT + 1];
#pragma unroll
        for (int k = 0; k <= NW_OUT; k++)
            raw[k] = lds_u32(p + 4 * k);
#pragma unroll
        for (int k = 0; k < NW_OUT; k++)
            w[k] = __funnelshift_r(raw[k], raw[k + 1], sh);
    }
    // bits [b, b + B) (b, B compile-time after unrolling) shifted so that they land at bit `at`.
    template <int B>
    __device__ __forceinline__ uint32_t field(int b, int at) const
    {
        const int k = b >> 5, s = b & 31;
        uint32_t v;
        if (s + B > 32 && k + 1 < NW_OUT)
            v = __funnelshift_r(w[k], w[k + 1], s);
        else
            v = w[k] >> s;
        return (v & ((1u << B) - 1u)) << at;
    }
    template <int B>
    __device__ __forceinline__ uint32_t get(int i) const
    {
        return field<B>(i * B, 0);
    }
    __device__ __forceinline__ uint64_t w64() const
    {
        if constexpr (NW_OUT == 1)
            return (uint64_t)w[0];
        else
            return (uint64_t)w[0] | ((uint64_t)w[1] << 32);
    }
};

// Mask of the even VB-bit fields (elements 0, 2, 4, ...) of a 64-bit word.
template <int VB>
__host__ __device__ constexpr uint64_t even_mask()
{
    uint64_t m = 0;
    for (int k = 0; 2 * k * VB < 64; k++)
        m |= (((1ull << VB) - 1) << (2 * k * VB));
    return m;
}

// Byte-slot permutation of the 8 dims a thread feeds to one 32-group of the int8 Q.K MMA:
// slot k (k < 4: B register 0 byte k; k >= 4: register 1 byte k-4) holds local dim perm(k).
template <int FAM, int KB>
__device__ __forceinline__ constexpr int k_perm(int k)
{
    return (KB == 4) ? (k < 4 ? 2 * k : 2 * (k - 4) + 1) : k;
}

// The thread's 8 K codes of one token and one 32-group (dims 32*grp + 8*tig + 0..7) as two
// registers of 4 bytes, slot order k_perm.
template <int D, int FAM, int KB>
__device__ __forceinline__ void k_bytes(const uint8_t *row, int grp, int tig, uint32_t &b0, uint32_t &b1)
{
    if constexpr (KB == 8) {
        b0 = lds_u32(row + 32 * grp + 8 * tig);
        b1 = lds_u32(row + 32 * grp + 8 * tig + 4);
    } else if constexpr (KB == 4) {
        const uint32_t w = lds_u32(row + 16 * grp + 4 * tig);
        b0 = w & 0x0f0f0f0fu;         // dims 0, 2, 4, 6
        b1 = (w >> 4) & 0x0f0f0f0fu;  // dims 1, 3, 5, 7
    } else { // 2 or 5 bits: generic
        Bits<8 * KB> bb;
        bb.load(row, (32 * grp + 8 * tig) * KB);
        b0 = b1 = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            b0 |= bb.template get<KB>(k) << (8 * k);
            b1 |= bb.template get<KB>(k + 4) << (8 * k);
        }
    }
}

// Split partials: per (batch, kv head, row block, split) 8 rows of D floats (O, not normalised),
// then 8 (m, l) pairs (m in the exp2 domain); O rows stay 16-byte aligned for vector loads.
template <int D>
__host__ __device__ constexpr size_t part_floats()
{
    return (size_t)8 * (D + 2);
}

// PER consecutive floats from L2 (__ldcg: other SMs wrote them in this call, and this SM's L1 may
// hold the previous call's lines); p is 8-byte aligned (PER == 2) or 16-byte aligned.
template <int PER>
__device__ __forceinline__ void ldcg_vec(const float *p, float v[PER])
{
    if constexpr (PER == 2) {
        const float2 x = __ldcg(reinterpret_cast<const float2 *>(p));
        v[0] = x.x;
        v[1] = x.y;
    } else {
#pragma unroll
        for (int k = 0; k < PER / 4; k++) {
            const float4 x = __ldcg(reinterpret_cast<const float4 *>(p) + k);
            v[4 * k] = x.x;
            v[4 * k + 1] = x.y;
            v[4 * k + 2] = x.z;
            v[4 * k + 3] = x.w;
        }
    }
}

// PER consecutive floats of another block's shared memory in this cluster (distributed shared
// memory; generic loads of a mapa-mapped address), or from L2 (ldcg_vec).
template <int PER, bool DSM>
__device__ __forceinline__ void ld_part(const float *p, float v[PER])
{
    if constexpr (!DSM) {
        ldcg_vec<PER>(p, v);
    } else if constexpr (PER == 2) {
        const float2 x = *reinterpret_cast<const float2 *>(p);
        v[0] = x.x;
        v[1] = x.y;
    } else {
#pragma unroll
        for (int k = 0; k < PER / 4; k++) {
            const float4 x = reinterpret_cast<const float4 *>(p)[k];
            v[4 * k] = x.x;
            v[4 * k + 1] = x.y;
            v[4 * k + 2] = x.z;
            v[4 * k + 3] = x.w;
        }
    }
}

// Fused split reduce (a.merge FUSED, or CLUSTER with DSM: the partials in the cluster's blocks'
// shared memory at `sp`, split s = block rank s): the last block of a (batch, kv head, row block) to finish merges
// the splits' partials of its rows: one warp per row (rows wid, wid + NW, ...), each lane owns
// D / 32 consecutive dims. The split weights exp2(m_s - M) are computed 32 at a time, one split
// per lane, and broadcast with shuffles; the partial rows are read as vectors with many loads in
// flight (unrolled). The inverse FWHT (turbo) runs in registers: butterflies of span < D / 32
// inside a lane, larger spans across lanes with shuffles -- the same sums and differences as the
// reduce kernel's shared-memory butterflies.
template <int D, bool UNROT, bool DSM>
__device__ void merge_splits(const tqc_attend_args &a, int n_rb, int n_splits, int bhr, int n_rows, float *sp)
{
    constexpr int PER = D / 32;
    constexpr size_t stride = part_floats<D>();
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int rb = bhr % n_rb, h = (bhr / n_rb) % a.n_kv_heads, b = bhr / (n_rb * a.n_kv_heads);
    const int G = a.n_heads / a.n_kv_heads;
    const float *unit = a.work + (size_t)bhr * n_splits * stride;
    // split s's partial: in L2 (unit + s * stride) or in cluster block s's shared memory
    auto part = [&](int s) -> const float * {
        if constexpr (DSM) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            return cooperative_groups::this_cluster().map_shared_rank(sp, (unsigned)s);
#else
            return sp;
#endif
        } else {
            return unit + (size_t)s * stride;
        }
    };
    for (int rr = wid; rr < n_rows; rr += NW) {
        // 32 splits at a time, one per lane, merged online (running max M over the chunks); the
        // chunk's partial rows are loaded 16 at a time before any is used (loads in flight).
        float M = -INFINITY, L = 0.0f, o[PER];
#pragma unroll
        for (int k = 0; k < PER; k++)
            o[k] = 0.0f;
        for (int c0 = 0; c0 < n_splits; c0 += 32) {
            const bool has = c0 + lane < n_splits;
            float ml[2] = {-INFINITY, 0.0f};
            if (has)
                ld_part<2, DSM>(part(c0 + lane) + (size_t)8 * D + 2 * rr, ml);
            const float m = ml[0], l = ml[1];
            float mc = m;
#pragma unroll
            for (int x = 16; x; x >>= 1)
                mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, x));
            const float mn = fmaxf(M, mc);
            if (mn == -INFINITY)
                continue; // no split so far saw a token (warp-uniform)
            const float so = M == -INFINITY ? 0.0f : ex2(M - mn);
            L *= so;
#pragma unroll
            for (int k = 0; k < PER; k++)
                o[k] *= so;
            M = mn;
            const float e = m == -INFINITY ? 0.0f : ex2(m - mn);
            L += e * l;
            const int nc = n_splits - c0 < 32 ? n_splits - c0 : 32;
            for (int j0 = 0; j0 < nc; j0 += 16) {
                float v[16][PER];
#pragma unroll
                for (int j = 0; j < 16; j++)
                    if (j0 + j < nc)
                        ld_part<PER, DSM>(part(c0 + j0 + j) + (size_t)rr * D + lane * PER, v[j]);
#pragma unroll
                for (int j = 0; j < 16; j++) {
                    const float wj = __shfl_sync(0xffffffffu, e, (j0 + j) & 31);
                    if (j0 + j < nc)
#pragma unroll
                        for (int k = 0; k < PER; k++)
                            o[k] += wj * v[j][k];
                }
            }
        }
#pragma unroll
        for (int s = 16; s; s >>= 1)
            L += __shfl_xor_sync(0xffffffffu, L, s);
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;
#pragma unroll
        for (int k = 0; k < PER; k++)
            o[k] = L > 0.0f ? o[k] * inv : 0.0f;
        if constexpr (UNROT) {
            const float *sg = D == 64 ? d_signs : D == 128 ? d_signs + 64 : d_signs + 192;
            const float sd = D == 64 ? d_fwht_scale[0] : D == 128 ? d_fwht_scale[1] : d_fwht_scale[2];
#pragma unroll
            for (int hh = 1; hh < PER; hh <<= 1)
#pragma unroll
                for (int k = 0; k < PER; k++)
                    if ((k & hh) == 0) {
                        const float x = o[k], y = o[k + hh];
                        o[k] = x + y;
                        o[k + hh] = x - y;
                    }
#pragma unroll
            for (int hl = 1; hl < 32; hl <<= 1) {
                const bool upper = (lane & hl) != 0;
#pragma unroll
                for (int k = 0; k < PER; k++) {
                    const float y = __shfl_xor_sync(0xffffffffu, o[k], hl);
                    o[k] = upper ? y - o[k] : o[k] + y;
                }
            }
#pragma unroll
            for (int k = 0; k < PER; k++)
                o[k] = (o[k] * sd) * sg[lane * PER + k];
        }
        const int r = rb * 8 + rr;
        const int qi = r / G, head = h * G + r % G;
        float *dst = a.out + (((int64_t)b * a.n_q + qi) * a.n_heads + head) * D + lane * PER;
        if constexpr (PER == 2) {
            *reinterpret_cast<float2 *>(dst) = make_float2(o[0], o[1]);
        } else {
#pragma unroll
            for (int k = 0; k < PER / 4; k++)
                reinterpret_cast<float4 *>(dst)[k] = make_float4(o[4 * k], o[4 * k + 1], o[4 * k + 2], o[4 * k + 3]);
        }
    }
}

template <int D, int FAM, int KB, int VB>
__global__ void __launch_bounds__(NW * 32, min_blocks<D, FAM>()) attend_kernel(tqc_attend_args a, int n_rb, int chunk)
{
    using T = Tr<D, FAM, KB, VB>;
    constexpr int TT = T::TT, NG = T::NG, ND = T::ND, NT = TT / 8;
    extern __shared__ __align__(16) uint8_t smem[];
    // (C[i0], C[i1]) half2 at word (i0 | i1 << VB) * LUT_REP + copy
    __shared__ uint32_t lut2[T::LUT2 * T::LUT_REP];
    __shared__ float lut1[FAM == TQC_TURBO ? 1 << VB : 1];

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, tig = lane & 3;
    const int split = blockIdx.x, h = blockIdx.y / n_rb, rb = blockIdx.y % n_rb, b = blockIdx.z;
    const int G = a.n_heads / a.n_kv_heads, R = G * a.n_q;
    pdl_trigger();

    // ---- token range of this block and this warp's tiles; the first tiles' copies go out before
    // the tables and Q are set up, so their DRAM latency overlaps that work.
    constexpr int NS = T::NSTAGE;
    const int64_t t_begin = (int64_t)split * chunk;
    const int64_t t_end = t_begin + chunk < a.len ? t_begin + chunk : a.len;
    const int n_tiles = t_begin < t_end ? (int)((t_end - t_begin + TT - 1) / TT) : 0;
    const int64_t head_row0 = ((int64_t)b * a.n_kv_heads + h) * a.cap;
    const uint8_t *kg = a.k + head_row0 * T::K_ROW;
    const uint8_t *vg = a.v + head_row0 * T::V_ROW;
    uint8_t *const stage0 = smem + (warp * NS) * T::STAGE;

#if TQC_BULK
    __shared__ uint64_t bars[NW][NS];
    if (lane == 0) {
#pragma unroll
        for (int i = 0; i < NS; i++)
            mbar_init(&bars[warp][i]);
        mbar_fence_init();
    }
    __syncwarp();
#endif
    auto issue = [&](int it, int buf) {
        const int tile = warp + it * NW;
        if (tile < n_tiles) {
            uint8_t *st = stage0 + buf * T::STAGE;
            const int64_t t0 = t_begin + (int64_t)tile * TT;
            const int n = (int)(t_end - t0 < TT ? t_end - t0 : TT);
            const int kbytes = (n * T::K_ROW + 15) & ~15, vbytes = (n * T::V_ROW + 15) & ~15;
            const uint8_t *ks = kg + t0 * T::K_ROW, *vs = vg + t0 * T::V_ROW;
#if TQC_BULK
            if (lane == 0) {
                fence_proxy_async();
                mbar_expect_tx(&bars[warp][buf], (unsigned)(kbytes + vbytes));
                bulk_g2s(st, ks, (unsigned)kbytes, &bars[warp][buf]);
                bulk_g2s(st + T::K_TILE, vs, (unsigned)vbytes, &bars[warp][buf]);
            }
#else
            for (int o = lane * 16; o < kbytes; o += 32 * 16)
                cp_async16(st + o, ks + o);
            for (int o = lane * 16; o < vbytes; o += 32 * 16)
                cp_async16(st + T::K_TILE + o, vs + o);
#endif
        }
#if !TQC_BULK
        cp_commit();
#endif
    };
    const int my_tiles = n_tiles > warp ? (n_tiles - warp + NW - 1) / NW : 0;
#pragma unroll
    for (int i = 0; i < NS; i++)
        issue(i, i);

    if constexpr (FAM == TQC_TURBO) {
        constexpr int off = VB == 2 ? 0 : VB == 3 ? 4 : VB == 4 ? 12 : VB == 5 ? 28 : 60;
        for (int i = threadIdx.x; i < (1 << VB); i += blockDim.x)
            lut1[i] = d_cent[off + i];
        if constexpr (T::PV_LUT2)
            for (int i = threadIdx.x; i < T::LUT2 * T::LUT_REP; i += blockDim.x) {
                const int e = i >> (T::LUT_SH - 2);
                lut2[i] = pack_f2(d_cent[off + (e & ((1 << VB) - 1))], d_cent[off + (e >> VB)]);
            }
        __syncthreads();
    }

    // ---- this thread's query row (row g of the row block)
    const int r = rb * 8 + g;
    const bool row_ok = r < R;
    const int qi = row_ok ? r / G : 0;
    const int head = h * G + (row_ok ? r % G : 0);
    const int64_t lim = row_ok ? a.len - a.n_q + qi + 1 : 0; // tokens [0, lim) visible
    // QK_INT: qa[grp][0..3] = hi slots 0-3, lo slots 0-3, hi slots 4-7, lo slots 4-7 (int8 x4) of
    // the row quantized with ONE step qstep for the whole row (so the step multiplies each token's
    // score once, not each 32-group's); qsq = (sum of the group's q) / qstep.
    // f16/bf16: qa[grp][0..3] hi slots, ql[grp][0..3] lo slots.
    uint32_t qa[NG][4], ql[NG][T::QK_INT ? 1 : 4];
    float qsq[NG];
    float qstep = 1.0f;
    {
        const float *qp = a.q + (((int64_t)b * a.n_q + qi) * a.n_heads + head) * D;
        const float sc = a.scale * LOG2E;
        float x[NG][8];
        float mx = 0.0f;
#pragma unroll
        for (int grp = 0; grp < NG; grp++) {
            if (row_ok) {
                const float4 v0 = *reinterpret_cast<const float4 *>(qp + 32 * grp + 8 * tig);
                const float4 v1 = *reinterpret_cast<const float4 *>(qp + 32 * grp + 8 * tig + 4);
                x[grp][0] = v0.x * sc; x[grp][1] = v0.y * sc; x[grp][2] = v0.z * sc; x[grp][3] = v0.w * sc;
                x[grp][4] = v1.x * sc; x[grp][5] = v1.y * sc; x[grp][6] = v1.z * sc; x[grp][7] = v1.w * sc;
            } else {
#pragma unroll
                for (int k = 0; k < 8; k++)
                    x[grp][k] = 0.0f;
            }
            float sum = 0.0f;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                sum += x[grp][k];
                mx = fmaxf(mx, fabsf(x[grp][k]));
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            qsq[grp] = sum;
        }
        if constexpr (T::QK_INT) {
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            qstep = mx * (1.0f / 32639.0f); // q ~= round(x / qstep)
            const float inv = mx > 0.0f ? __fdividef(32639.0f, mx) : 0.0f;
#pragma unroll
            for (int grp = 0; grp < NG; grp++) {
                qsq[grp] *= inv;
                uint32_t hi[2] = {0, 0}, lo[2] = {0, 0};
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    int q = __float2int_rn(x[grp][k_perm<FAM, KB>(k)] * inv);
                    q = q > 32639 ? 32639 : q < -32639 ? -32639 : q;
                    const int qh = (q + 128) >> 8, qlo = q - qh * 256;
                    hi[k >> 2] |= (uint32_t)(qh & 0xff) << (8 * (k & 3));
                    lo[k >> 2] |= (uint32_t)(qlo & 0xff) << (8 * (k & 3));
                }
                qa[grp][0] = hi[0];
                qa[grp][1] = lo[0];
                qa[grp][2] = hi[1];
                qa[grp][3] = lo[1];
            }
        } else {
#pragma unroll
            for (int grp = 0; grp < NG; grp++)
#pragma unroll
                for (int s = 0; s < 4; s++) {
                    const float x0 = x[grp][2 * s], x1 = x[grp][2 * s + 1];
                    if constexpr (T::BF) {
                        qa[grp][s] = pack_bf2(x0, x1);
                        const float2 hf = unpack_bf2(qa[grp][s]);
                        ql[grp][s] = pack_bf2(x0 - hf.x, x1 - hf.y);
                    } else {
                        const __half2 hi = __floats2half2_rn(x0, x1);
                        const float2 hf = __half22float2(hi);
                        qa[grp][s] = h2_bits(hi);
                        ql[grp][s] = pack_f2(x0 - hf.x, x1 - hf.y);
                    }
                }
        }
    }

    float m_run = -INFINITY, l_run = 0.0f;
    float o_acc[D / 16][4];
#pragma unroll
    for (int i = 0; i < D / 16; i++)
        o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.0f;

    int buf = 0; // stage of tile it = it % NS
    for (int it = 0; it < my_tiles; it++) {
#if TQC_BULK
        mbar_wait(&bars[warp][buf], (unsigned)(it / NS) & 1u); // use it / NS of this stage
#else
        cp_wait<NS - 1>();
#endif
        __syncwarp();
        const uint8_t *ks = stage0 + buf * T::STAGE, *vs = ks + T::K_TILE;
        const int64_t t0 = t_begin + (int64_t)(warp + it * NW) * TT;
        const int nvalid = (int)(t_end - t0 < TT ? t_end - t0 : TT);
        const int64_t vis64 = lim - t0; // this row sees tile tokens [0, vis)
        const int vis = vis64 < 0 ? 0 : vis64 < nvalid ? (int)vis64 : nvalid;

        // S = Q K^T: n-tile j covers tokens 8j..8j+7; this thread's B token is 8j+g, its C
        // tokens 8j+2tig+{0,1}.
        float sc[NT][2];
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const uint8_t *rowB = ks + (8 * j + g) * T::K_ROW;
            float s0 = 0.0f, s1 = 0.0f;
            if constexpr (T::QK_INT) {
                const uint8_t *rowC0 = ks + (8 * j + 2 * tig) * T::K_ROW;
                const uint8_t *rowC1 = rowC0 + T::K_ROW;
                constexpr int NA = FAM == TQC_TURBO ? NG : D / 64; // affine groups per row
                float af0[NA], af1[NA], cf0[NA], cf1[NA];
                load_halves<NA>(rowC0 + D * KB / 8, af0);
                load_halves<NA>(rowC1 + D * KB / 8, af1);
                load_halves<NA>(rowC0 + D * KB / 8 + 2 * NA, cf0);
                load_halves<NA>(rowC1 + D * KB / 8 + 2 * NA, cf1);
#pragma unroll
                for (int grp = 0; grp < NG; grp++) {
                    uint32_t b0, b1;
                    k_bytes<D, FAM, KB>(rowB, grp, tig, b0, b1);
                    int c[4];
                    constexpr bool U8 = !(FAM == TQC_TURBO && KB == 8);
                    imma<U8>(c, qa[grp][0], qa[grp][1], qa[grp][2], qa[grp][3], b0, b1);
                    const int ag = FAM == TQC_TURBO ? grp : grp >> 1;
                    const float x0 = (float)(c[0] * 256 + c[2]); // in units of qstep
                    const float x1 = (float)(c[1] * 256 + c[3]);
                    if constexpr (FAM == TQC_TURBO) { // scale * (q.x + zero * sum q)
                        s0 = fmaf(af0[ag], fmaf(cf0[ag], qsq[grp], x0), s0);
                        s1 = fmaf(af1[ag], fmaf(cf1[ag], qsq[grp], x1), s1);
                    } else { // scale * q.x + bias * sum q
                        s0 = fmaf(af0[ag], x0, fmaf(cf0[ag], qsq[grp], s0));
                        s1 = fmaf(af1[ag], x1, fmaf(cf1[ag], qsq[grp], s1));
                    }
                }
                s0 *= qstep;
                s1 *= qstep;
            } else {
                // rows g = Q hi, rows g + 8 = Q lo of the same row: acc[0..1] + acc[2..3]
                float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int grp = 0; grp < NG; grp++) {
                    const uint4 kv = *reinterpret_cast<const uint4 *>(rowB + 2 * (32 * grp + 8 * tig));
                    const uint32_t a0[4] = {qa[grp][0], ql[grp][0], qa[grp][1], ql[grp][1]};
                    const uint32_t a1[4] = {qa[grp][2], ql[grp][2], qa[grp][3], ql[grp][3]};
                    if constexpr (T::BF) {
                        mma_bf16(acc, a0, kv.x, kv.y);
                        mma_bf16(acc, a1, kv.z, kv.w);
                    } else {
                        mma_f16(acc, a0, kv.x, kv.y);
                        mma_f16(acc, a1, kv.z, kv.w);
                    }
                }
                s0 = acc[0] + acc[2];
                s1 = acc[1] + acc[3];
            }
            const bool v0 = 8 * j + 2 * tig < vis;
            const bool v1 = 8 * j + 2 * tig + 1 < vis;
            sc[j][0] = v0 ? s0 : -INFINITY;
            sc[j][1] = v1 ? s1 : -INFINITY;
        }
        // online softmax (row g; the 4 lanes of a row hold disjoint tokens)
        float mt = m_run;
#pragma unroll
        for (int j = 0; j < NT; j++)
            mt = fmaxf(mt, fmaxf(sc[j][0], sc[j][1]));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
        const float mref = mt == -INFINITY ? 0.0f : mt;
        // alpha = 1 when the row's max did not move (also for padding rows, whose m stays -inf)
        const float alpha = mt == m_run ? 1.0f : ex2(m_run - mref); // m_run = -inf -> 0
        m_run = mt;
        float psum = 0.0f;
        uint32_t pb[NT], pl[T::BF || T::PVX ? NT : 1]; // P^T B operand: (tokens 8j+2tig, +1) of row g
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const float p0 = ex2(sc[j][0] - mref), p1 = ex2(sc[j][1] - mref);
            psum += p0 + p1;
            if constexpr (T::BF) {
                pb[j] = pack_bf2(p0, p1);
                const float2 hf = unpack_bf2(pb[j]);
                pl[j] = pack_bf2(p0 - hf.x, p1 - hf.y);
            } else {
                pb[j] = pack_f2(p0, p1);
                if constexpr (T::PVX) {
                    const float2 hf = __half22float2(bits_h2(pb[j]));
                    pl[j] = pack_f2(p0 - hf.x, p1 - hf.y);
                }
            }
        }
        l_run = l_run * alpha + psum;
        // O^T columns are rows 2tig, 2tig+1: their alpha lives in lanes 4*(2tig), 4*(2tig+1)
        // (skipped when no row's max moved: the common case once the first tiles are seen)
        if (__any_sync(0xffffffffu, alpha != 1.0f)) {
            const float al0 = __shfl_sync(0xffffffffu, alpha, 8 * tig);
            const float al1 = __shfl_sync(0xffffffffu, alpha, 8 * tig + 4);
#pragma unroll
            for (int i = 0; i < D / 16; i++) {
                o_acc[i][0] *= al0;
                o_acc[i][1] *= al1;
                o_acc[i][2] *= al0;
                o_acc[i][3] *= al1;
            }
        }
        // O^T += V^T P^T per 16-token k-step: this thread's A tokens 2tig, 2tig+1, 2tig+8, 2tig+9
        // (u = 0..3) and dims [g*ND, g*ND + ND): m-tile mt, row g = local dim 2mt, row g+8 = 2mt+1.
#pragma unroll
        for (int kk = 0; kk < NT / 2; kk++) {
            const uint8_t *vrow[4];
            bool ok[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int tl = 16 * kk + 2 * tig + (u & 1) + 8 * (u >> 1);
                vrow[u] = vs + tl * T::V_ROW;
                ok[u] = tl < nvalid;
            }
            if constexpr (FAM == TQC_F16 || FAM == TQC_BF16) {
#pragma unroll
                for (int c4 = 0; c4 < ND / 8; c4++) { // 8 dims = 16 bytes per token at a time
                    uint4 w[4];
#pragma unroll
                    for (int u = 0; u < 4; u++) {
                        w[u] = *reinterpret_cast<const uint4 *>(vrow[u] + 2 * (g * ND + 8 * c4));
                        if (!ok[u])
                            w[u] = make_uint4(0, 0, 0, 0);
                    }
#pragma unroll
                    for (int e = 0; e < 4; e++) { // dims 2e, 2e+1 of this 8
                        const uint32_t x0 = e == 0 ? w[0].x : e == 1 ? w[0].y : e == 2 ? w[0].z : w[0].w;
                        const uint32_t x1 = e == 0 ? w[1].x : e == 1 ? w[1].y : e == 2 ? w[1].z : w[1].w;
                        const uint32_t x2 = e == 0 ? w[2].x : e == 1 ? w[2].y : e == 2 ? w[2].z : w[2].w;
                        const uint32_t x3 = e == 0 ? w[3].x : e == 1 ? w[3].y : e == 2 ? w[3].z : w[3].w;
                        const uint32_t av[4] = {__byte_perm(x0, x1, 0x5410), __byte_perm(x0, x1, 0x7632),
                                                __byte_perm(x2, x3, 0x5410), __byte_perm(x2, x3, 0x7632)};
                        const int mt2 = 4 * c4 + e;
                        if constexpr (T::BF) {
                            mma_bf16(o_acc[mt2], av, pb[2 * kk], pb[2 * kk + 1]);
                            mma_bf16(o_acc[mt2], av, pl[2 * kk], pl[2 * kk + 1]);
                        } else {
                            mma_f16(o_acc[mt2], av, pb[2 * kk], pb[2 * kk + 1]);
                        }
                    }
                }
            } else if constexpr (T::PV_LUT2) {
                Bits<ND * VB> vb[4];
                __half2 s01, s23;
                {
                    float s[4];
#pragma unroll
                    for (int u = 0; u < 4; u++) {
                        vb[u].load(vrow[u], g * ND * VB);
                        s[u] = ok[u] ? f16f(lds_u16(vrow[u] + D * VB / 8 + 2 * ((g * ND) / 32))) : 0.0f;
                    }
                    s01 = __floats2half2_rn(s[0], s[1]);
                    s23 = __floats2half2_rn(s[2], s[3]);
                }
                if constexpr (ND * VB <= 64) {
                    // Interleave the two tokens of each pair once: E holds (t, t') index pairs of
                    // the even local dims, O of the odd ones, 2*VB bits per pair, so one shift and
                    // one mask give a byte offset into the pair table.
                    constexpr uint64_t ME = even_mask<VB>();
                    uint64_t E[2], O[2];
#pragma unroll
                    for (int pr = 0; pr < 2; pr++) {
                        const uint64_t x0 = vb[2 * pr].w64(), x1 = vb[2 * pr + 1].w64();
                        E[pr] = (x0 & ME) | ((x1 << VB) & ~ME);
                        O[pr] = ((x0 >> VB) & ME) | (x1 & ~ME);
                    }
                    const uint8_t *lb = reinterpret_cast<const uint8_t *>(lut2);
                    const uint32_t lcopy = (uint32_t)(lane & (T::LUT_REP - 1)) << 2; // byte offset of my copy
#pragma unroll
                    for (int mt2 = 0; mt2 < D / 16; mt2++) {
                        constexpr uint64_t M = ((1ull << (2 * VB)) - 1) << T::LUT_SH;
                        const int sh = 2 * VB * mt2 - T::LUT_SH;
                        uint32_t av[4];
#pragma unroll
                        for (int pr = 0; pr < 2; pr++) {
                            const uint32_t oe = (uint32_t)((sh >= 0 ? E[pr] >> sh : E[pr] << -sh) & M) | lcopy;
                            const uint32_t oo = (uint32_t)((sh >= 0 ? O[pr] >> sh : O[pr] << -sh) & M) | lcopy;
                            const __half2 sp = pr ? s23 : s01;
                            av[2 * pr] = h2_bits(__hmul2(bits_h2(*reinterpret_cast<const uint32_t *>(lb + oe)), sp));
                            av[2 * pr + 1] = h2_bits(__hmul2(bits_h2(*reinterpret_cast<const uint32_t *>(lb + oo)), sp));
                        }
                        mma_f16(o_acc[mt2], av, pb[2 * kk], pb[2 * kk + 1]);
                    }
                } else {
#pragma unroll
                for (int mt2 = 0; mt2 < D / 16; mt2++) {
                    uint32_t av[4];
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int bit = (2 * mt2 + e) * VB;
                        const uint32_t i01 = vb[0].template field<VB>(bit, 0) | vb[1].template field<VB>(bit, VB);
                        const uint32_t i23 = vb[2].template field<VB>(bit, 0) | vb[3].template field<VB>(bit, VB);
                        const int lc = lane & (T::LUT_REP - 1);
                        av[e] = h2_bits(__hmul2(bits_h2(lut2[i01 * T::LUT_REP + lc]), s01));
                        av[2 + e] = h2_bits(__hmul2(bits_h2(lut2[i23 * T::LUT_REP + lc]), s23));
                    }
                    mma_f16(o_acc[mt2], av, pb[2 * kk], pb[2 * kk + 1]);
                }
                }
            } else if constexpr (T::PV_U8) {
                // kv8: bytes of dims [g*ND, +ND); value = q * s + m in half2 arithmetic
                __half2 s01, s23, m01, m23;
                {
                    float s[4], m[4];
#pragma unroll
                    for (int u = 0; u < 4; u++) {
                        const uint8_t *sc = vrow[u] + D + 2 * ((g * ND) / 64);
                        s[u] = ok[u] ? f16f(lds_u16(sc)) : 0.0f;
                        m[u] = ok[u] ? f16f(lds_u16(sc + 2 * (D / 64))) : 0.0f;
                    }
                    s01 = __floats2half2_rn(s[0], s[1]);
                    s23 = __floats2half2_rn(s[2], s[3]);
                    m01 = __floats2half2_rn(m[0], m[1]);
                    m23 = __floats2half2_rn(m[2], m[3]);
                }
                const __half2 off = __half2half2(__ushort_as_half(0x6400));
#pragma unroll
                for (int c4 = 0; c4 < ND / 4; c4++) { // 4 dims = 4 bytes per token at a time
                    uint32_t w[4];
#pragma unroll
                    for (int u = 0; u < 4; u++)
                        w[u] = lds_u32(vrow[u] + g * ND + 4 * c4);
#pragma unroll
                    for (int e = 0; e < 2; e++) { // dims 2e, 2e+1 of these 4
                        const uint32_t p01 = __byte_perm(w[0], w[1], e ? 0x7362 : 0x5140);
                        const uint32_t p23 = __byte_perm(w[2], w[3], e ? 0x7362 : 0x5140);
                        uint32_t av[4];
                        av[0] = h2_bits(__hfma2(__hsub2(bits_h2(__byte_perm(p01, 0x64646464u, 0x4140)), off), s01, m01));
                        av[1] = h2_bits(__hfma2(__hsub2(bits_h2(__byte_perm(p01, 0x64646464u, 0x4342)), off), s01, m01));
                        av[2] = h2_bits(__hfma2(__hsub2(bits_h2(__byte_perm(p23, 0x64646464u, 0x4140)), off), s23, m23));
                        av[3] = h2_bits(__hfma2(__hsub2(bits_h2(__byte_perm(p23, 0x64646464u, 0x4342)), off), s23, m23));
                        mma_f16(o_acc[2 * c4 + e], av, pb[2 * kk], pb[2 * kk + 1]);
                    }
                }
            } else {
                // generic: turbo 5/8-bit values, kv4
                Bits<ND * VB> vb[4];
                float s[4], m[4];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    vb[u].load(vrow[u], g * ND * VB);
                    const uint8_t *scp = vrow[u] + D * VB / 8;
                    if constexpr (FAM == TQC_TURBO) {
                        s[u] = ok[u] ? f16f(lds_u16(scp + 2 * ((g * ND) / 32))) : 0.0f;
                        m[u] = 0.0f;
                    } else {
                        s[u] = ok[u] ? f16f(lds_u16(scp + 2 * ((g * ND) / 64))) : 0.0f;
                        m[u] = ok[u] ? f16f(lds_u16(scp + 2 * (D / 64) + 2 * ((g * ND) / 64))) : 0.0f;
                    }
                }
#pragma unroll
                for (int mt2 = 0; mt2 < D / 16; mt2++) {
                    float v[4][2];
#pragma unroll
                    for (int u = 0; u < 4; u++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const uint32_t q = vb[u].template get<VB>(2 * mt2 + e);
                            if constexpr (FAM == TQC_TURBO)
                                v[u][e] = lut1[q] * s[u];
                            else
                                v[u][e] = (float)q * s[u] + m[u];
                        }
                    const uint32_t av[4] = {pack_f2(v[0][0], v[1][0]), pack_f2(v[0][1], v[1][1]),
                                            pack_f2(v[2][0], v[3][0]), pack_f2(v[2][1], v[3][1])};
                    mma_f16(o_acc[mt2], av, pb[2 * kk], pb[2 * kk + 1]);
                    if constexpr (T::PVX) { // + Vhi Plo + Vlo Phi
                        const uint32_t ix[4][2] = {{0, 1}, {0, 1}, {2, 3}, {2, 3}};
                        uint32_t al[4];
#pragma unroll
                        for (int c = 0; c < 4; c++) {
                            const float2 hf = __half22float2(bits_h2(av[c]));
                            const int e = c & 1;
                            al[c] = pack_f2(v[ix[c][0]][e] - hf.x, v[ix[c][1]][e] - hf.y);
                        }
                        mma_f16(o_acc[mt2], av, pl[2 * kk], pl[2 * kk + 1]);
                        mma_f16(o_acc[mt2], al, pb[2 * kk], pb[2 * kk + 1]);
                    }
                }
            }
        }
        __syncwarp();
        issue(it + NS, buf);
        buf = buf + 1 == NS ? 0 : buf + 1;
    }
#if !TQC_BULK
    cp_wait<0>();
#endif
    l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
    l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
    __syncthreads();

    // ---- merge the warps: smem [warp][8 rows][D] + m, l
    float *mo = reinterpret_cast<float *>(smem);
    float *mml = mo + NW * 8 * D;
#pragma unroll
    for (int mt2 = 0; mt2 < D / 16; mt2++) {
        const int d0 = g * ND + 2 * mt2;
        float *w0 = mo + (warp * 8 + 2 * tig) * D, *w1 = w0 + D;
        w0[d0] = o_acc[mt2][0];
        w1[d0] = o_acc[mt2][1];
        w0[d0 + 1] = o_acc[mt2][2];
        w1[d0 + 1] = o_acc[mt2][3];
    }
    if (tig == 0) {
        mml[(warp * 8 + g) * 2] = m_run;
        mml[(warp * 8 + g) * 2 + 1] = l_run;
    }
    __syncthreads();
    const int n_rows = R - rb * 8 < 8 ? R - rb * 8 : 8;
    const int64_t pidx = (((int64_t)b * a.n_kv_heads + h) * n_rb + rb) * gridDim.x + split;
    // layout: part_floats(); MERGE_CLUSTER keeps it in this block's shared memory
    float *const sp = reinterpret_cast<float *>(smem + T::SMEM_MERGE);
    float *po = a.merge == TQ_CUDA_MERGE_CLUSTER ? sp : a.work + pidx * part_floats<D>();
    for (int i = threadIdx.x; i < n_rows * D; i += blockDim.x) {
        const int rr = i / D, dd = i % D;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; w++)
            M = fmaxf(M, mml[(w * 8 + rr) * 2]);
        float o = 0.0f, L = 0.0f;
        if (M != -INFINITY) {
#pragma unroll
            for (int w = 0; w < NW; w++) {
                const float e = ex2(mml[(w * 8 + rr) * 2] - M);
                o += e * mo[(w * 8 + rr) * D + dd];
                L += e * mml[(w * 8 + rr) * 2 + 1];
            }
        }
        po[rr * D + dd] = o;
        if (dd == 0) {
            po[8 * D + 2 * rr] = M;
            po[8 * D + 2 * rr + 1] = L;
        }
    }
    if (a.merge == TQ_CUDA_MERGE_CLUSTER) { // block 0 of the cluster (= the unit's splits) merges them
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        const int bhr = ((int)b * a.n_kv_heads + h) * n_rb + rb;
        cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
        cl.sync(); // every block's partial written (release / acquire across the cluster)
        if (cl.block_rank() == 0)
            merge_splits<D, FAM == TQC_TURBO, true>(a, n_rb, (int)gridDim.x, bhr, n_rows, sp);
        cl.sync(); // no block leaves (freeing its shared memory) before block 0 has read it
#endif
    } else if (a.merge == TQ_CUDA_MERGE_FUSED) { // the last block of this (b, h, rb) to finish merges every split (threadFenceReduction)
        __shared__ int s_last;
        const int bhr = ((int)b * a.n_kv_heads + h) * n_rb + rb;
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            const unsigned old = atomicAdd(a.counters + bhr, 1u);
            s_last = old == gridDim.x - 1;
            if (s_last)
                a.counters[bhr] = 0; // every split has counted: ready for the next call
        }
        __syncthreads();
        if (s_last) {
            __threadfence();
            merge_splits<D, FAM == TQC_TURBO, false>(a, n_rb, (int)gridDim.x, bhr, n_rows, sp);
        }
    }
}

// Merge the splits of one (batch, kv head, row block, row): block (bhr, row), D threads; the
// splits' weights are computed in parallel, then every thread sums its dim over the splits;
// un-rotate (turbo: butterflies, * 1/sqrt(d), * sign) and write the fp32 output row.
template <int D, bool UNROT>
__global__ void __launch_bounds__(D) reduce_kernel(tqc_attend_args a, int n_rb, int n_splits)
{
    __shared__ float x[D];
    __shared__ float red[D / 32][2];
    extern __shared__ float wsp[]; // n_splits weights
    const int dd = threadIdx.x, lane = dd & 31, wid = dd >> 5;
    const int bhr = blockIdx.x, rr = blockIdx.y;
    const int rb = bhr % n_rb, h = (bhr / n_rb) % a.n_kv_heads, b = bhr / (n_rb * a.n_kv_heads);
    const int G = a.n_heads / a.n_kv_heads, R = G * a.n_q;
    pdl_wait();
    if (rb * 8 + rr >= R)
        return;
    const size_t stride = part_floats<D>();
    const float *base = a.work + (size_t)bhr * n_splits * stride + (size_t)rr * D;     // O row
    const float *mlb = a.work + (size_t)bhr * n_splits * stride + (size_t)8 * D + 2 * rr; // m, l
    float M = -INFINITY;
    for (int s = dd; s < n_splits; s += D)
        M = fmaxf(M, mlb[s * stride]);
    for (int o = 16; o; o >>= 1)
        M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    if (lane == 0)
        red[wid][0] = M;
    __syncthreads();
    M = red[0][0];
    for (int w = 1; w < D / 32; w++)
        M = fmaxf(M, red[w][0]);
    float L = 0.0f;
    for (int s = dd; s < n_splits; s += D) {
        const float m = mlb[s * stride];
        const float e = M == -INFINITY || m == -INFINITY ? 0.0f : ex2(m - M);
        wsp[s] = e;
        L += e * mlb[s * stride + 1];
    }
    for (int o = 16; o; o >>= 1)
        L += __shfl_xor_sync(0xffffffffu, L, o);
    __syncthreads();
    if (lane == 0)
        red[wid][1] = L;
    __syncthreads();
    L = 0.0f;
    for (int w = 0; w < D / 32; w++)
        L += red[w][1];
    float o = 0.0f;
#pragma unroll RED_UNROLL
    for (int s = 0; s < n_splits; s++)
        o += wsp[s] * base[s * stride + dd];
    o = L > 0.0f ? o / L : 0.0f;
    if (UNROT) {
        const float *sg = D == 64 ? d_signs : D == 128 ? d_signs + 64 : d_signs + 192;
        const float sd = D == 64 ? d_fwht_scale[0] : D == 128 ? d_fwht_scale[1] : d_fwht_scale[2];
        x[dd] = o;
        __syncthreads();
        for (int hh = 1; hh < D; hh <<= 1) {
            const float nv = (dd & hh) == 0 ? x[dd] + x[dd + hh] : x[dd - hh] - x[dd];
            __syncthreads();
            x[dd] = nv;
            __syncthreads();
        }
        o = (x[dd] * sd) * sg[dd];
    }
    const int r = rb * 8 + rr;
    const int qi = r / G, head = h * G + r % G;
    a.out[(((int64_t)b * a.n_q + qi) * a.n_heads + head) * D + dd] = o;
}

std::mutex g_tables_mu; // first use may come from several threads
bool g_tables_ready = false;

tq_status init_tables(void)
{
    std::lock_guard<std::mutex> lock(g_tables_mu);
    if (g_tables_ready)
        return TQ_OK;
    float signs[64 + 128 + 256], fs[3], cent[4 + 8 + 16 + 32 + 256];
    int o = 0;
    for (int d = 64; d <= 256; d *= 2) {
        const float *s = tq_kv_signs(d);
        for (int j = 0; j < d; j++)
            signs[o++] = s[j];
    }
    for (int i = 0; i < 3; i++)
        fs[i] = tq_kv_fwht_scale(64 << i);
    o = 0;
    const int bl[5] = {2, 3, 4, 5, 8};
    for (int i = 0; i < 5; i++) {
        const float *c = tq_kv_centroids(bl[i]);
        for (int j = 0; j < (1 << bl[i]); j++)
            cent[o++] = c[j];
    }
    TQC_CUDA(cudaMemcpyToSymbol(d_signs, signs, sizeof(signs)));
    TQC_CUDA(cudaMemcpyToSymbol(d_fwht_scale, fs, sizeof(fs)));
    TQC_CUDA(cudaMemcpyToSymbol(d_cent, cent, sizeof(cent)));
    g_tables_ready = true;
    return TQ_OK;
}

// Compute capability 9.0+ (programmatic dependent launch, thread-block clusters).
bool sm90()
{
    static std::atomic<int> ok{-1};
    int v = ok.load();
    if (v < 0) {
        int dev = 0, major = 0;
        v = (cudaGetDevice(&dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
             major >= 9) ? 1 : 0;
        cudaGetLastError();
        ok.store(v);
    }
    return v == 1;
}

int n_rb_of(int R)
{
    return (R + 7) / 8;
}

// Resident blocks per SM of one instantiation (sets its shared-memory attribute once).
template <int D, int FAM, int KB, int VB>
int occupancy()
{
    using T = Tr<D, FAM, KB, VB>;
    static std::atomic<int> occ{0};
    if (!occ.load()) {
        auto kern = attend_kernel<D, FAM, KB, VB>;
        int n = 0;
        if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, T::SMEM) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kern, NW * 32, T::SMEM) != cudaSuccess || n < 1) {
            cudaGetLastError();
            return 1;
        }
        occ.store(n);
    }
    return occ.load();
}

// The largest thread-block cluster (16, 8 or 0 = none) of one instantiation that the device can
// hold: MERGE_CLUSTER puts the <= that many splits of a (batch, kv head, row block) in one cluster.
template <int D, int FAM, int KB, int VB>
int max_cluster()
{
    using T = Tr<D, FAM, KB, VB>;
    static std::atomic<int> mc{-1};
    if (mc.load() < 0) {
        int v = 0;
        if (sm90()) {
            occupancy<D, FAM, KB, VB>(); // sets the shared-memory attribute
            auto kern = attend_kernel<D, FAM, KB, VB>;
            for (int cs = 16; cs >= 8 && !v; cs -= 8) {
                if (cs > 8 && cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
                    continue;
                cudaLaunchConfig_t cfg = {};
                cfg.gridDim = dim3((unsigned)cs, 1, 1);
                cfg.blockDim = dim3(NW * 32);
                cfg.dynamicSmemBytes = T::SMEM;
                cudaLaunchAttribute at[1];
                at[0].id = cudaLaunchAttributeClusterDimension;
                at[0].val.clusterDim.x = (unsigned)cs;
                at[0].val.clusterDim.y = 1;
                at[0].val.clusterDim.z = 1;
                cfg.attrs = at;
                cfg.numAttrs = 1;
                int n = 0;
                if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) == cudaSuccess && n >= 1)
                    v = cs;
            }
        }
        cudaGetLastError();
        mc.store(v);
    }
    return mc.load();
}

template <int D, int FAM, int KB, int VB>
tq_status launch(const tqc_attend_args *a0)
{
    using T = Tr<D, FAM, KB, VB>;
    occupancy<D, FAM, KB, VB>(); // sets the shared-memory attribute
    auto kern = attend_kernel<D, FAM, KB, VB>;
    tqc_attend_args b = *a0;
    const tqc_attend_args *a = &b;
    const int R = a->n_heads / a->n_kv_heads * a->n_q;
    const int n_rb = n_rb_of(R);
    const int64_t per = (a->len + a->n_splits - 1) / a->n_splits;
    const int chunk = (int)((per + T::TT - 1) / T::TT * T::TT);
    dim3 grid((unsigned)a->n_splits, (unsigned)(a->n_kv_heads * n_rb), (unsigned)a->batch);
    if (a->merge == TQ_CUDA_MERGE_CLUSTER) {
        if (a->n_splits <= max_cluster<D, FAM, KB, VB>()) {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = grid;
            cfg.blockDim = dim3(NW * 32);
            cfg.dynamicSmemBytes = T::SMEM;
            cfg.stream = a->stream;
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeClusterDimension;
            at[0].val.clusterDim.x = (unsigned)a->n_splits;
            at[0].val.clusterDim.y = 1;
            at[0].val.clusterDim.z = 1;
            cfg.attrs = at;
            cfg.numAttrs = 1;
            if (cudaLaunchKernelEx(&cfg, kern, *a, n_rb, chunk) == cudaSuccess)
                return TQ_OK; // the split merge ran inside the clusters
            cudaGetLastError(); // a cluster shape the device refuses: merge through L2 instead
        }
        b.merge = a->counters ? TQ_CUDA_MERGE_FUSED : TQ_CUDA_MERGE_KERNEL;
    }
    kern<<<grid, NW * 32, T::SMEM, a->stream>>>(*a, n_rb, chunk);
    TQC_CUDA(cudaGetLastError());
    if (a->merge == TQ_CUDA_MERGE_FUSED)
        return TQ_OK; // the split reduce ran inside the attend kernel
    const dim3 rgrid((unsigned)(a->batch * a->n_kv_heads * n_rb), (unsigned)(R < 8 ? R : 8));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = rgrid;
    cfg.blockDim = dim3(D);
    cfg.dynamicSmemBytes = (size_t)a->n_splits * sizeof(float);
    cfg.stream = a->stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = a->pdl && sm90() ? 1 : 0;
    TQC_CUDA(cudaLaunchKernelEx(&cfg, reduce_kernel<D, FAM == TQC_TURBO>, *a, n_rb, a->n_splits));
    return TQ_OK;
}

typedef tq_status (*launch_fn)(const tqc_attend_args *);
typedef int (*occ_fn)();
struct entry {
    int fam, kb, vb;
    launch_fn f[3]; // d = 64, 128, 256
    int tt[3];
    occ_fn occ[3];
    occ_fn mc[3]; // max_cluster
};

#define TQC_E(FAM, KB, VB)                                                                        \
    {FAM, KB, VB, {launch<64, FAM, KB, VB>, launch<128, FAM, KB, VB>, launch<256, FAM, KB, VB>},   \
     {Tr<64, FAM, KB, VB>::TT, Tr<128, FAM, KB, VB>::TT, Tr<256, FAM, KB, VB>::TT},                \
     {occupancy<64, FAM, KB, VB>, occupancy<128, FAM, KB, VB>, occupancy<256, FAM, KB, VB>},             \
     {max_cluster<64, FAM, KB, VB>, max_cluster<128, FAM, KB, VB>, max_cluster<256, FAM, KB, VB>}}

// TQC_BENCH_ONLY: the four benchmarked schemes only (variant builds of bench/cuda/gpu_visit.sh,
// a third of the compile time; test_cuda_kv needs the full table).
const entry g_table[] = {
#ifdef TQC_BENCH_ONLY
    TQC_E(TQC_BF16, 16, 16), TQC_E(TQC_AFF, 8, 8), TQC_E(TQC_TURBO, 8, 3), TQC_E(TQC_TURBO, 4, 3),
#else
    TQC_E(TQC_F16, 16, 16),  TQC_E(TQC_BF16, 16, 16), TQC_E(TQC_AFF, 8, 8),
    TQC_E(TQC_AFF, 4, 4),    TQC_E(TQC_TURBO, 8, 3),  TQC_E(TQC_TURBO, 4, 3),
    TQC_E(TQC_TURBO, 8, 4),  TQC_E(TQC_TURBO, 8, 2),  TQC_E(TQC_TURBO, 4, 2),
    TQC_E(TQC_TURBO, 4, 4),
#endif
};

const entry *find(const tqc_geom *g)
{
    for (const entry &e : g_table)
        if (e.fam == g->fam && e.kb == g->kb && e.vb == g->vb)
            return &e;
    return nullptr;
}

int dslot(int d)
{
    return d == 64 ? 0 : d == 128 ? 1 : d == 256 ? 2 : -1;
}

} // namespace

tq_status tqc_geom_of(tq_kv_scheme s, int d, tqc_geom *g)
{
    tqc_geom x = {};
    x.d = d;
    switch (s.kind) {
    case TQ_KV_F16: x.fam = TQC_F16; x.kb = x.vb = 16; break;
    case TQ_KV_BF16: x.fam = TQC_BF16; x.kb = x.vb = 16; break;
    case TQ_KV_KV8: x.fam = TQC_AFF; x.kb = x.vb = 8; break;
    case TQ_KV_KV4: x.fam = TQC_AFF; x.kb = x.vb = 4; break;
    case TQ_KV_TURBO: x.fam = TQC_TURBO; x.kb = s.k_bits; x.vb = s.v_bits; break;
    default: x.fam = 0; break;
    }
    if (!x.fam || !find(&x) || dslot(d) < 0)
        return TQC_FAIL(TQ_E_UNSUPPORTED,
                        "CUDA KV cache: scheme (kind %d, k%d v%d) with head_dim %d is not supported "
                        "on the GPU (valid: f16, bf16, kv8, kv4, turbo:k8v3, k4v3, k8v4, k8v2, k4v2, "
                        "k4v4; head_dim 64, 128, 256)",
                        (int)s.kind, s.k_bits, s.v_bits, d);
    x.k_row = tq_kv_row_bytes1(s, 0, d);
    x.v_row = tq_kv_row_bytes1(s, 1, d);
    *g = x;
    return TQ_OK;
}

void tqc_attend_plan(const tqc_geom *g, int batch, int n_kv_heads, int n_heads, int n_q, int64_t len,
                     int n_splits_req, int merge_req, int *n_splits, int *merge, size_t *work_floats)
{
    const entry *e = find(g);
    const int tt = e ? e->tt[dslot(g->d) < 0 ? 0 : dslot(g->d)] : 16;
    const int R = n_heads / n_kv_heads * n_q;
    const int n_rb = n_rb_of(R);
    const int64_t units = (int64_t)batch * n_kv_heads * n_rb;
    int64_t ns = n_splits_req;
    static std::atomic<int> sms_cache{0};
    int sms = sms_cache.load();
    if (!sms) {
        if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || sms < 1) {
            cudaGetLastError();
            sms = 132;
        }
        sms_cache.store(sms);
    }
    if (ns <= 0) {
        // One split per TQC_SPLIT_TOKENS tokens, between one block per SM and one full wave
        // (resident blocks per SM x SMs), divided over (batch, kv head, row block); at least NW
        // tiles per block. Measured (H200, split sweep of issue 16 visit v1): at batch 1 one block
        // per SM (16 splits of 8 kv heads) beats the full wave (33-49 splits) up to 32k (bf16 32k
        // 42.9 vs 47.5 us, k8v3 4k 14.2 vs 15.6), at 128k 32 splits win; at batch 8 the wave
        // (4-6 splits) or 2 splits are within 2%.
        const int ds = dslot(g->d);
        const int64_t slots = (int64_t)sms * (e && ds >= 0 ? e->occ[ds]() : 2);
        // turbo 4-bit K at head_dim 256 is issue-bound (twice the unpack work per token): it needs
        // the full wave's warps (v2: B1 64k 115 us with 16 splits vs 80 with 33)
        const bool wave = g->fam == TQC_TURBO && g->kb == 4 && g->d == 256;
        int64_t lo = sms / units > 1 ? sms / units : 1;
        const int64_t hi = slots / units > lo ? slots / units : lo;
        if (wave)
            lo = hi;
        ns = (len + TQC_SPLIT_TOKENS - 1) / TQC_SPLIT_TOKENS;
        ns = ns < lo ? lo : ns > hi ? hi : ns;
        const int64_t max_ns = (len + (int64_t)tt * NW - 1) / ((int64_t)tt * NW);
        if (ns > max_ns)
            ns = max_ns;
        // Few units (batch 1, 1-4 kv heads: the small models of the GPU forward) would get up to a
        // few hundred splits, and the reduce kernel's per-row loop over them costs more than the
        // parallelism gains; 64 splits x units blocks still cover the SMs once units >= 3.
        if (ns > 64)
            ns = 64;
    }
    if (ns < 1)
        ns = 1;
    if (ns > 4096)
        ns = 4096;
    if (n_splits_req <= 0 && len > 0) { // drop splits the tile rounding leaves empty (fewer to merge)
        const int64_t per = (len + ns - 1) / ns, chunk = (per + tt - 1) / tt * tt;
        ns = (len + chunk - 1) / chunk;
    }
    *n_splits = (int)ns;
    // the merge: a cluster of the unit's splits where the device holds one that large, else the
    // last block through L2; KERNEL only on request. AUTO takes the cluster only for <= 8 splits
    // in at most one block per SM: clusters cost occupancy (GPC-granular placement, blocks held
    // until block 0 has merged), measured in visit v1: k8v3 batch 8 / 128k 648 us in clusters of
    // 4 vs 431 through L2, but batch 1 / 1k 11.5 vs 12.2 us, k4v3 12.4 vs 13.6.
    const int ds = dslot(g->d);
    const bool auto_cl = merge_req == TQ_CUDA_MERGE_AUTO && TQC_AUTO_CLUSTER && ns <= 8 && ns * units <= sms;
    const int mc = e && ds >= 0 && (merge_req == TQ_CUDA_MERGE_CLUSTER || auto_cl) ? e->mc[ds]() : 0;
    if (merge_req == TQ_CUDA_MERGE_AUTO || merge_req == TQ_CUDA_MERGE_CLUSTER)
        *merge = ns <= mc ? TQ_CUDA_MERGE_CLUSTER : TQ_CUDA_MERGE_FUSED;
    else
        *merge = merge_req == TQ_CUDA_MERGE_KERNEL ? TQ_CUDA_MERGE_KERNEL : TQ_CUDA_MERGE_FUSED;
    *work_floats = (size_t)units * (size_t)ns * 8 * (size_t)(g->d + 2);
}

tq_status tqc_attend_launch(const tqc_attend_args *a)
{
    tq_status st = init_tables();
    if (st != TQ_OK)
        return st;
    const entry *e = find(&a->g);
    const int ds = dslot(a->g.d);
    if (!e || ds < 0)
        return TQC_FAIL(TQ_E_UNSUPPORTED, "CUDA attend: scheme/head_dim not supported");
    return e->f[ds](a);
}
