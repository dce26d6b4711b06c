/* qgemv.h -- quantized GEMV on the GPU (issue 16 item 5; internal API of src/cuda/, plain views).
 *
 * y[t * ldy + r] = row r of a quantized matrix . token t of x, for rows r < rows and tokens
 * t < n (decode: n = 1; small batches up to any n, in chunks of 8). The weights stay in their
 * packed layout on the device:
 *   ggml block formats (docs/FORMAT.md "GGUF", src/common/formats.c): Q8_0, Q4_0, Q4_1, Q4_K,
 *     Q6_K;
 *     row r = cols / block packed blocks at w + r * row_bytes;
 *   MLX affine (docs/FORMAT.md "MLX affine", src/quant/affine.c), bits 4 and 8, groups 32/64/128:
 *     row r = cols * bits / 32 uint32 codes (LSB first) at w + r * row_bytes, its per-group
 *     16-bit scale and bias at scales/biases + (r * cols / group + g) (bf16 as mlx-lm writes
 *     them, or f16), value = scale * q + bias.
 *
 * Q4_1 adds its min like MLX's bias: d * d_a * sum(q * qs) + m * s_a per 32.
 * Arithmetic: the CPU's q8 path (src/cpu/qdot.h). x is quantized once per call and token on the
 * device by the tq_q8a rule (32-formats and MLX: int8 per 32 with one f32 scale d and s = d *
 * sum(qs)) or the tq_q8k rule (K formats: int8 per 256, one d): the same bytes as the CPU's
 * quant_q8a / quant_q8k (tests/test_cuda_qgemv.c checks them bit for bit). Weight integers meet
 * activation integers in int32 (dp4a, exact); each lane's integer partial is scaled in f32 and
 * the lanes are summed by the warp, so a result equals the CPU's scalar q8 dot up to f32
 * rounding of the partial sums (the CPU's order: qdot.h; here: lane partials, then a tree).
 * MLX affine: per 32 activations, (scale * d_a) * sum(q * qs) + bias * s_a, i.e. the value
 * scale * q + bias against the q8a activation, like Q4_1's min.
 *
 * Alignment: w, scales, biases device pointers; for Q4_K and MLX w and row_bytes must be
 * 16-byte aligned (Q4_K rows are 144-byte blocks), for Q4_1 4-byte, for Q8_0/Q4_0/Q6_K 2-byte.
 * Everything goes on `stream` (a cudaStream_t; NULL = the default stream); nothing synchronizes.
 * Without a CUDA build every entry point returns TQ_E_UNSUPPORTED (qgemv_none.c). */
#ifndef TQ_CUDA_QGEMV_H
#define TQ_CUDA_QGEMV_H

#include "turboquant.h" /* tq_status, the TQ_GGML_* ids; core/ is not C++, the .cu includes this */

/* = TQ_FMT_MLX_AFFINE of common/formats.h (qgemv_none.c asserts it) */
#define TQ_CUDA_QGEMV_MLX 64

#ifdef __cplusplus
extern "C" {
#endif

/* One quantized matrix on the device (a view: nothing is owned). */
typedef struct tq_cuda_qmat {
    int fmt;              /* TQ_GGML_Q8_0, TQ_GGML_Q4_0, TQ_GGML_Q4_1, TQ_GGML_Q4_K, TQ_GGML_Q6_K,
                           * TQ_CUDA_QGEMV_MLX (= TQ_FMT_MLX_AFFINE)                                              */
    int64_t rows, cols;   /* y has rows entries per token, x cols                            */
    const void *w;        /* packed rows                                                     */
    size_t row_bytes;     /* stride between rows (>= the packed bytes of one row)            */
    /* MLX affine only */
    int bits, group;      /* 4 or 8; 32, 64 or 128                                           */
    const void *scales, *biases; /* (rows, cols / group) 16-bit values, row-major, packed    */
    int sb_f16;           /* 0: scales/biases are bf16 (mlx-lm), 1: f16                      */
} tq_cuda_qmat;

/* tq_cuda_qgemv_check() -- TQ_OK if the kernels run this view (format, shape, alignment),
 * else TQ_E_UNSUPPORTED / TQ_E_ARG naming what is wrong. Needs no device. */
tq_status tq_cuda_qgemv_check(const tq_cuda_qmat *m);
/* tq_cuda_qgemv_packed_bytes() -- bytes of weights (and scales + biases) one call reads. */
size_t tq_cuda_qgemv_packed_bytes(const tq_cuda_qmat *m);
/* tq_cuda_qgemv_wide() -- 1 if a batch-1 tq_cuda_qgemv() of this view runs the wide kernel
 * (Q8_0 / Q4_0 / Q4_1 / Q4_K, w and row_bytes 16-byte aligned: a packed row of another length
 * padded to a 16-byte stride is read up to the stride, the padding never decoded), with an
 * activation workspace from cudaMalloc. */
int tq_cuda_qgemv_wide(const tq_cuda_qmat *m);
/* tq_cuda_qgemv_act_bytes() -- device workspace for the quantized activations of n tokens of
 * cols values for this format (0 for a format without kernels or a bad cols). */
size_t tq_cuda_qgemv_act_bytes(const tq_cuda_qmat *m, int n);

/* tq_cuda_qgemv() -- y (device f32, token t at y + t * ldy) = m . x (device f32, token t at
 * x + t * ldx) for n tokens; act: device workspace of tq_cuda_qgemv_act_bytes(m, n) bytes. */
tq_status tq_cuda_qgemv(const tq_cuda_qmat *m, const float *x, int64_t ldx, int n, float *y,
                        int64_t ldy, void *act, void *stream);

/* tq_cuda_qgemv_dequant_bf16() -- out (device, rows x cols bf16, row-major, 16-byte aligned) =
 * the matrix's values (the CPU's scalar dequantizer's f32 values rounded to bf16, nearest even),
 * for the ggml formats (MLX affine: TQ_E_UNSUPPORTED). Prefill multiplies these rows with cuBLAS.
 * Asynchronous on `stream`. */
tq_status tq_cuda_qgemv_dequant_bf16(const tq_cuda_qmat *m, void *out, void *stream);

/* tq_cuda_qgemv_dequant_host() -- the same from and to host memory (tests): m->w a host pointer,
 * out rows * cols bf16 values; synchronizes. */
tq_status tq_cuda_qgemv_dequant_host(const tq_cuda_qmat *m, uint16_t *out);

/* A decode job in one launch: y_i (one token, device f32) = M_i . pre(src) for n_out <= 4
 * matrices of the same format, columns and (MLX) group / scale type, where pre is
 *   0: src as is; 1: RMSNorm of src with weight aux, eps, (1 + aux) when plus_one;
 *   2: silu(src) * aux; 3: gelu_tanh(src) * aux   (= TQ_BE_PRE_* of common/backend.h),
 * computed and quantized (q8a / q8k rule, as tq_cuda_qgemv) by every block in shared memory;
 * acc[i] != 0: y_i += instead of =. cols <= TQ_CUDA_QJOB_MAXC. pdl != 0: launched with
 * programmatic dependent launch (the block prefetches its weight rows into L2 before waiting for
 * the previous kernel). Nothing is written to src. */
#define TQ_CUDA_QJOB_MAXC 16384
typedef struct tq_cuda_qjob {
    int n_out;
    const tq_cuda_qmat *m[4];
    float *y[4];
    int acc[4];
    const float *src, *aux;
    int pre;
    float eps;
    int plus_one;
} tq_cuda_qjob;
tq_status tq_cuda_qgemv_job(const tq_cuda_qjob *j, void *stream, int pdl);

/* tq_cuda_qgemv_set_split() -- warps per row at batch 1 (1, 2 or 4; anything else = automatic:
 * 4 below 512 rows, 2 below 2048, else 1) for later calls of this process (benchmarks). Not thread-safe against concurrent calls. */
void tq_cuda_qgemv_set_split(int ks);
/* tq_cuda_qgemv_set_staged() -- batch-1 kernel choice for later calls of this process (A/Bs,
 * tests). 3 (default; anything else than 0..2): the wide kernel for Q8_0 / Q4_0 / Q4_1 / Q4_K
 * with 16-byte aligned rows (persistent blocks, the activation in shared memory, each lane
 * decodes whole blocks from conflict-free 32-bit shared loads, rows streamed through shared
 * memory with cp.async), Q6_K as 1; 1: Q8_0 / Q4_0 / Q4_1 / Q6_K stream each row through shared
 * memory per unit (cp.async, 3 chunks in flight), Q4_K direct; 2: as 1 with Q4_K staged too;
 * 0: the direct kernel everywhere (loads from global memory per unit); 4: as 3 with the
 * activation copied by plain loads instead of cp.async (A/B). Same results up to the order of
 * the f32 partial sums. */
void tq_cuda_qgemv_set_staged(int on);

/* tq_cuda_qgemv_host() -- the same with host memory (tests): m's pointers are host pointers;
 * copies them and x to the device, runs, copies y back (n tokens, x packed (n, cols), y packed
 * (n, rows)), synchronizes. act_qs (n * cols int8) and act_d (n * cols / block floats, block =
 * 32 or 256 as the format's activation) may be NULL, else receive the device-quantized
 * activations in element order (to compare with the CPU's quant_q8a / quant_q8k). */
tq_status tq_cuda_qgemv_host(const tq_cuda_qmat *m, const float *x, int n, float *y,
                             int8_t *act_qs, float *act_d);

/* tq_cuda_qgemv_bench() -- time one (format, rows, cols, n) on the device with seeded random
 * weights (valid finite scales): `reps` calls after 3 warm-ups, each timed with CUDA events,
 * cold (the L2 flushed before each call) when cold != 0. *us_med / *us_min: median and
 * minimum of the whole call (activation quantize + GEMV, the GEMV launched with programmatic
 * dependent launch so that its first weight loads overlap the quantizer); *us_nopdl: the call
 * without it; *us_kernel: median of the GEMV kernel alone; *us_read: median of a plain read of the same packed bytes (16-byte loads, same
 * timing) as the practical floor. *bytes = tq_cuda_qgemv_packed_bytes(). */
typedef struct tq_cuda_qgemv_timing {
    double us_med, us_min, us_kernel, us_read, us_nopdl;
    size_t bytes;
} tq_cuda_qgemv_timing;
tq_status tq_cuda_qgemv_bench(int fmt, int bits, int group, int64_t rows, int64_t cols, int n,
                              int reps, int cold, tq_cuda_qgemv_timing *out);

#ifdef __cplusplus
}
#endif

#endif /* TQ_CUDA_QGEMV_H */
