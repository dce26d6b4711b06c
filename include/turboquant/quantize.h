/* turboquant/quantize.h -- the weights pipeline: `tq quantize`. Included by turboquant.h only.
 *
 * tq_quantize() streams a model (GGUF file or Hugging Face safetensors directory) tensor by
 * tensor: read one tensor as f32, optionally fold the rotation into it (docs/FORMAT.md "Rotation
 * fold"), quantize it, append it to the output, free it. Peak memory is about two copies of the
 * largest tensor (usually the embedding), never the model. The output is written under a
 * temporary name and renamed into place at the end: an interrupted or failed run leaves nothing
 * at `out`, and the source is only read. Provenance (tool version, command line, source
 * fingerprint, transform id, seed, deviations from the references) goes into the output's
 * metadata (GGUF keys "turboquant.*", safetensors "__metadata__"). */
#ifndef TURBOQUANT_QUANTIZE_H
#define TURBOQUANT_QUANTIZE_H
#ifdef __cplusplus
extern "C" {
#endif

/* ==== GGUF block quantizers (the inverse of tq_ggml_dequant) ================================= */
/* tq_ggml_can_quantize() -- 1 for F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K IQ4_NL. */
TQ_API int tq_ggml_can_quantize(int type);
/* tq_ggml_quantize() -- encode n f32 values (n % block size == 0) as `type` into dst (dst_cap
 * bytes, at least tq_ggml_nbytes()). Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 follow ggml's reference rules
 * (same bytes as the `gguf` Python package); the K types search the sub-block scales (a
 * weighted least-squares fit, src/quant/quant_ggml.c) and keep the plain min/max fit where that
 * is better; IQ4_NL searches its block scale (both signs, keeping the plain fit where better).
 * Deterministic, no allocation, thread-safe. */
TQ_API tq_status tq_ggml_quantize(int type, const float *src, int64_t n, void *dst,
                                  size_t dst_cap);

/* ==== rotation signs ========================================================================= */
/* tq_rotation_signs() -- the seed-pinned +-1 vector of (seed, lane), n entries (docs/FORMAT.md
 * "Rotation fold": lane 0 = R1, lane 1 + i = layer i's R2). Same bytes on every machine. */
TQ_API void tq_rotation_signs(uint64_t seed, uint64_t lane, int64_t n, int8_t *out);

/* ==== the pipeline =========================================================================== */
typedef enum tq_qformat {
    TQ_QFORMAT_GGUF = 0,        /* GGUF file (source must be GGUF: metadata + tokenizer copied) */
    TQ_QFORMAT_SAFETENSORS = 1, /* HF directory, f32/f16/bf16 (source must be safetensors)      */
    TQ_QFORMAT_MLX = 2,         /* HF directory in mlx-lm's affine layout (uint32 codes + bf16
                                 * scales/biases per group; config.json "quantization")       */
} tq_qformat;

/* which matrix gets which GGUF type (tq_quantize_opts.mix) */
typedef enum tq_qmix {
    TQ_QMIX_PURE = 0, /* every matrix in `type` (rows that are not a block multiple fall back)  */
    TQ_QMIX_LLAMA,    /* llama-quantize's layout for the file type named by `type` (no imatrix):
                       * the lm_head (or the embedding when tied) Q6_K unless `type` is Q8_0,
                       * Q8_0 where its rows are not a multiple of 256; for Q4_K / Q5_K the *_K_M
                       * bumps (attn_v and ffn_down of the first and last eighth of the layers
                       * and of every third layer between: Q6_K), as llama-quantize's "Q4_K"  */
    TQ_QMIX_LLAMA_S,  /* llama-quantize's Q4_K_S / Q5_K_S: Q4_K_S has attn_v of layers 0-3 and
                       * ffn_down of the first eighth in Q5_K; the lm_head rule as above       */
} tq_qmix;

/* fold switches (tq_quantize_opts.fold); 0 = everything exact for the architecture */
#define TQ_FOLD_GAMMA 1u /* RMSNorm gains into the linears they feed (norms -> ones)          */
#define TQ_FOLD_R1 2u    /* residual-stream Hadamard R1 (implies TQ_FOLD_GAMMA)               */
#define TQ_FOLD_R2 4u    /* per-head R2 on v_proj output / o_proj input                       */

typedef struct tq_quantize_progress {
    int64_t done, total;           /* tensors written / in all                               */
    uint64_t bytes_done, bytes_in; /* source bytes processed / in all                        */
    const char *tensor;            /* the tensor just written                                */
} tq_quantize_progress;

typedef struct tq_quantize_tensor_stats {
    const char *name;     /* output name                                                   */
    const char *src_type; /* "Q4_1", "BF16", ...                                          */
    const char *out_type; /* "Q4_K", "F32", ...                                           */
    int64_t n;            /* elements                                                      */
    int folded;           /* 1 if any fold changed it                                     */
    double maxabs_in, maxabs_out; /* max |w| before / after the fold (before quantization)  */
    double kurt_in, kurt_out;     /* excess kurtosis before / after the fold                */
    double rel_rmse;      /* quantization error: rms(deq(q(w)) - w) / rms(w)               */
} tq_quantize_tensor_stats;

typedef struct tq_quantize_opts {
    const char *src;          /* GGUF file or HF directory                                */
    const char *out;          /* output file (GGUF) or directory (safetensors)            */
    tq_qformat format;
    int type;                 /* tq_ggml_type of the weight matrices (F32/F16/BF16 for
                               * safetensors); 1-D tensors are always F32 in GGUF          */
    int mix;                  /* tq_qmix (GGUF; default TQ_QMIX_PURE)                      */
    int ref_blocks;           /* Q4_0 Q5_0 Q4_1 Q5_1 by ggml's reference rules (the bytes of
                               * llama-quantize without an imatrix) instead of our scale
                               * search (never a larger weighted error per block)           */
    int keep_embed;           /* embedding and lm_head written F16 (GGUF) / bf16 (MLX)     */
    int bits, group;          /* MLX affine: bits 2 3 4 5 6 8, group 32 64 128 (4, 64)     */
    int rotate;               /* fold the rotation                                         */
    unsigned fold;            /* TQ_FOLD_* subset with rotate (0 = all exact ones)         */
    uint64_t seed;            /* rotation seed (default 42)                                */
    int force;                /* replace an existing output                                */
    int dequantize_source;    /* allow --rotate on a source quantized below 8 bits         */
    int stats;                /* fill maxabs/kurtosis/rel_rmse in the tensor callback      */
    const char *command_line; /* recorded in the provenance (NULL: not recorded)           */
    int64_t chunk_elems;      /* GGUF -> GGUF: stream big row-local tensors in chunks of about
                               * this many values (0 = 2^21); the output bytes do not depend
                               * on it                                                      */
    void (*on_progress)(void *ctx, const tq_quantize_progress *p);
    void (*on_tensor)(void *ctx, const tq_quantize_tensor_stats *s);
    void *ctx;
} tq_quantize_opts;

typedef struct tq_quantize_result {
    int64_t n_tensors;
    uint64_t bytes_in, bytes_out;
    int64_t n_fallback;  /* tensors written in a fallback type (rows not a block multiple) */
    char transform[512]; /* what was folded ("none" without --rotate)                      */
} tq_quantize_result;

TQ_API void tq_quantize_opts_default(tq_quantize_opts *o);
/* tq_quantize() -- run the pipeline (see the top of this file). Refusals (TQ_E_ARG /
 * TQ_E_UNSUPPORTED, message names the reason and the fix): --rotate on a source tensor quantized
 * below 8 bits without dequantize_source; a hidden size or head_dim with no Hadamard
 * construction; an architecture not in tq_arch; an existing output without force; a source and
 * output format pair not supported (GGUF -> GGUF, safetensors -> safetensors). */
TQ_API tq_status tq_quantize(const tq_quantize_opts *o, tq_quantize_result *res);

#ifdef __cplusplus
}
#endif
#endif
