/* turboquant/kv.h -- KV-cache codec: schemes, row sizes, encode/decode of K and V rows.
 * Included by turboquant.h only.
 *
 * A "row" is one (token, kv-head) vector of head_dim elements. Encoders take n_rows rows
 * (shape (n_rows, head_dim), last index contiguous) and write n_rows encoded rows back to back,
 * each exactly tq_kv_row_bytes() long. Byte layouts are in docs/FORMAT.md ("KV rows").
 * Reference semantics for `turbo`: vllm-metal turboquant.py on fp32 inputs (SPEC A1);
 * f16/bf16 inputs are upcast to fp32 first. Every ISA (and CUDA) writes identical bytes.
 */
#ifndef TURBOQUANT_KV_H
#define TURBOQUANT_KV_H
#ifdef __cplusplus
extern "C" {
#endif

/* Scheme families. Pinned values, append-only. */
typedef enum tq_kv_kind {
    TQ_KV_F32 = 0,   /* plain fp32 rows                                               */
    TQ_KV_F16 = 1,   /* IEEE half rows (RNE)                                          */
    TQ_KV_BF16 = 2,  /* bfloat16 rows (RNE)                                           */
    TQ_KV_KV8 = 3,   /* uniform affine, 8 bit, group 64, fp16 scale + bias, K and V   */
    TQ_KV_KV4 = 4,   /* uniform affine, 4 bit, group 64, fp16 scale + bias, K and V   */
    TQ_KV_TURBO = 5, /* TurboQuant: affine keys (k_bits), rotated Lloyd-Max values    */
    TQ_KV_ROT = 6,   /* Hadamard-rotated rows in 32-element block codes (tq_kv_code): the
                      * ggml types q8_0/q5_0/q4_0/iq4_nl (llama.cpp's rotated KV cache) and
                      * our own codes; K and V each pick a code                      */
    TQ_KV_KIND_COUNT
} tq_kv_kind;

/* Block codes of TQ_KV_ROT rows (pinned values, append-only). Each codes a row in blocks of 32
 * elements after a Hadamard rotation; byte layouts in docs/FORMAT.md "KV rows". */
typedef enum tq_kv_code {
    TQ_KV_CODE_Q8_0 = 1,   /* ggml q8_0: fp16 d + 32 x int8, 8.5 bits/elem                  */
    TQ_KV_CODE_Q5_0 = 2,   /* ggml q5_0: fp16 d + 32 bit high plane + 16 B nibbles, 5.5      */
    TQ_KV_CODE_Q4_0 = 3,   /* ggml q4_0: fp16 d + 16 B nibbles, 4.5                          */
    TQ_KV_CODE_IQ4_NL = 4, /* ggml iq4_nl: fp16 d + 16 B nibbles into the 16-level grid, 4.5 */
    TQ_KV_CODE_COUNT,
    /* Our codes "l<L>g<G>" (L-level grid for absmax-normalised rotated blocks of G elements,
     * pair-packed; docs/FORMAT.md) are TQ_KV_CODE_LM + their index in the generated table. */
    TQ_KV_CODE_LM = 256
} tq_kv_code;

/* A parsed scheme. For TQ_KV_ROT, k_bits/v_bits hold the K and V tq_kv_code (not bits).
 * Otherwise k_bits/v_bits are meaningful for TQ_KV_TURBO only (K in {2,4,5,8}, 8 =
 * signed int8; V in {2,3,4,5,8}); flags selects our own cache-level variants of a turbo scheme
 * (TQ_KV_FLAG_*; 0 = the reference). The row codec (encode/decode below) runs flags == 0 only;
 * the engine's turbo cache implements the variants (src/model/kvcache_turbo.c). */
#define TQ_KV_FLAG_ROTK 0x100u  /* "+rk": keys Hadamard-rotated at encode, queries at attention   */
#define TQ_KV_FLAG_EDGE8 0x200u /* first and last layer stored as turbo:k8v8; measured, did not
                                 * earn a scheme name (not parsed; docs/results.md)            */
#define TQ_KV_FLAG_SWAQ 0x400u  /* "+sq": sliding-window layers quantized with the scheme too
                                 * (default: kept bf16, within their window)                  */
#define TQ_KV_FLAGS_ALL 0x700u
typedef struct tq_kv_scheme {
    tq_kv_kind kind;
    int k_bits;
    int v_bits;
    unsigned flags;
} tq_kv_scheme;

/* tq_kv_scheme_parse() -- "f32", "f16", "bf16", "kv8", "kv4", "turbo" (= turbo:k8v3) or
 * "turbo:k<K>v<V>", optionally followed by "+rk" (TQ_KV_FLAG_ROTK); "rot:<C>" (K and V in code
 * C) or "rot:<CK>/<CV>" with codes q8_0, q5_0, q4_0, iq4_nl or our l<L>g<G> (tq_kv_code). On failure
 * returns TQ_E_ARG with a message listing the valid choices. */
TQ_API tq_status tq_kv_scheme_parse(const char *str, tq_kv_scheme *out);
/* tq_kv_scheme_name() -- canonical name ("turbo:k8v3", "kv8") into buf; returns buf. */
TQ_API const char *tq_kv_scheme_name(tq_kv_scheme s, char *buf, size_t cap);
/* tq_kv_scheme_key() -- the identifier used in files ("turbo-k8v3", "kv8") into buf. */
TQ_API const char *tq_kv_scheme_key(tq_kv_scheme s, char *buf, size_t cap);
/* tq_kv_schemes_help() -- one line listing every valid scheme string. */
TQ_API const char *tq_kv_schemes_help(void);

/* tq_kv_check() -- TQ_OK if the scheme is valid and supports head_dim (turbo: 64/128/256/512;
 * rot: a multiple of 64 up to 512; others: a positive multiple of 64). Otherwise TQ_E_UNSUPPORTED / TQ_E_ARG naming the choices. */
TQ_API tq_status tq_kv_check(tq_kv_scheme s, int head_dim);
/* tq_kv_row_bytes() -- bytes of one encoded K row and one encoded V row. */
TQ_API tq_status tq_kv_row_bytes(tq_kv_scheme s, int head_dim, size_t *k_bytes, size_t *v_bytes);

/* tq_kv_encode_k()/tq_kv_encode_v() -- encode n_rows rows of head_dim elements of src_type
 * into dst (dst_cap >= n_rows * row bytes). Row-parallel on pool (NULL = caller's thread);
 * output identical for every thread count and ISA. No allocation. Kernels: tq_cpu_isa() (the
 * best this CPU runs, lowered by TQ_CPU=scalar|avx2|avx512). n_rows == 0 is a no-op. Errors:
 * TQ_E_ARG (NULL src/dst, negative n_rows, bad src_type, invalid scheme), TQ_E_UNSUPPORTED
 * (head_dim, or a cache-level variant flag), TQ_E_OVERFLOW (dst_cap too small). */
TQ_API tq_status tq_kv_encode_k(tq_kv_scheme s, int head_dim, tq_dtype src_type, const void *src,
                                int64_t n_rows, void *dst, size_t dst_cap, tq_pool *pool);
TQ_API tq_status tq_kv_encode_v(tq_kv_scheme s, int head_dim, tq_dtype src_type, const void *src,
                                int64_t n_rows, void *dst, size_t dst_cap, tq_pool *pool);
/* tq_kv_decode_k()/tq_kv_decode_v() -- decode n_rows encoded rows into fp32
 * (dst_count >= n_rows * head_dim floats). Row-parallel on pool; no allocation. */
TQ_API tq_status tq_kv_decode_k(tq_kv_scheme s, int head_dim, const void *src, int64_t n_rows,
                                float *dst, int64_t dst_count, tq_pool *pool);
TQ_API tq_status tq_kv_decode_v(tq_kv_scheme s, int head_dim, const void *src, int64_t n_rows,
                                float *dst, int64_t dst_count, tq_pool *pool);

/* Encode options of the codec. The constant-key-block defect (SPEC A1/A3): a 32-group of a turbo
 * K row whose range (max - min) is below fp16 resolution gets zero = -min/scale = +-inf in fp16,
 * and the reference's row then decodes to NaN. Two named behaviours:
 *   TQ_KV_ENC_REFERENCE_EXACT  the reference's bytes, always (the KV goldens pin them)
 *   TQ_KV_ENC_SAFE             such a group (fp16 zero not finite, every input of the group
 *                              finite) is stored in the same byte format as: every index = qmax
 *                              (127 signed, 2^b - 1 unsigned), zero_h = 0, scale_h =
 *                              f16(mid / qmax), mid = min/2 + max/2; it decodes to mid within
 *                              fp16 rounding. Every other group keeps the reference's bytes.
 * Only turbo K rows are affected; every other row and scheme is reference-exact either way. */
typedef enum tq_kv_enc_mode {
    TQ_KV_ENC_REFERENCE_EXACT = 0,
    TQ_KV_ENC_SAFE = 1
} tq_kv_enc_mode;
typedef struct tq_kv_encode_opts {
    tq_kv_enc_mode mode;  /* default TQ_KV_ENC_REFERENCE_EXACT (zero-initialised)             */
    int64_t n_safe;       /* out: groups this call stored with the safe encoding             */
} tq_kv_encode_opts;

/* tq_kv_encode_k_opts() -- tq_kv_encode_k() with options (opts NULL = reference-exact). */
TQ_API tq_status tq_kv_encode_k_opts(tq_kv_scheme s, int head_dim, tq_dtype src_type,
                                     const void *src, int64_t n_rows, void *dst, size_t dst_cap,
                                     tq_pool *pool, tq_kv_encode_opts *opts);

/* tq_kv_encode_isa()/tq_kv_decode_isa() -- the same with the K (is_v = 0) or V (is_v = 1) side
 * and the CPU kernel level chosen explicitly (tests and benchmarks). TQ_E_UNSUPPORTED if this
 * CPU cannot run isa. Every isa writes the same bytes. */
TQ_API tq_status tq_kv_encode_isa(tq_kv_scheme s, int is_v, int head_dim, tq_dtype src_type,
                                  const void *src, int64_t n_rows, void *dst, size_t dst_cap,
                                  tq_pool *pool, tq_isa isa);
TQ_API tq_status tq_kv_decode_isa(tq_kv_scheme s, int is_v, int head_dim, const void *src,
                                  int64_t n_rows, float *dst, int64_t dst_count, tq_pool *pool,
                                  tq_isa isa);

#ifdef __cplusplus
}
#endif
#endif
