/* turboquant/io.h -- model files: GGUF v3 and safetensors readers, a streaming safetensors writer,
 * Hugging Face config.json, and one uniform tensor source (tq_weights) that always presents
 * Hugging Face names and layout. Included by turboquant.h only. Byte-level notes: docs/FORMAT.md.
 *
 * Shapes here are outermost first like everywhere in turboquant. GGUF stores dimensions the other
 * way round (ggml's ne[0] is the contiguous one); tq_gguf_tensor_info carries both, named apart.
 * Every reader maps the file read-only; pointers into a file stay valid until its handle is freed.
 * The readers themselves never read through the mapping: headers are parsed from a copy and
 * tq_weights_read*() use pread, so a file truncated or rewritten by another process while it is
 * open gives TQ_E_IO naming it (not SIGBUS); a change of size or mtime since open is refused too.
 * The `data` pointers of the tensor views do read the mapping (the caller's risk).
 * Handles are safe to read from several threads at once; after open, only tq_weights_read()
 * (f16/bf16 output of GGUF tensors) and the safetensors writer allocate. */
#ifndef TURBOQUANT_IO_H
#define TURBOQUANT_IO_H
#include <stdio.h> /* FILE, for tq_atomic_file_stream() */
#ifdef __cplusplus
extern "C" {
#endif

/* ==== ggml tensor types (values pinned by the GGUF format) ================================ */
typedef enum tq_ggml_type {
    TQ_GGML_F32 = 0,
    TQ_GGML_F16 = 1,
    TQ_GGML_Q4_0 = 2,
    TQ_GGML_Q4_1 = 3,
    TQ_GGML_Q5_0 = 6,
    TQ_GGML_Q5_1 = 7,
    TQ_GGML_Q8_0 = 8,
    TQ_GGML_Q8_1 = 9,
    TQ_GGML_Q2_K = 10,
    TQ_GGML_Q3_K = 11,
    TQ_GGML_Q4_K = 12,
    TQ_GGML_Q5_K = 13,
    TQ_GGML_Q6_K = 14,
    TQ_GGML_Q8_K = 15,
    TQ_GGML_IQ4_NL = 20,
    TQ_GGML_I8 = 24,
    TQ_GGML_I16 = 25,
    TQ_GGML_I32 = 26,
    TQ_GGML_I64 = 27,
    TQ_GGML_F64 = 28,
    TQ_GGML_BF16 = 30,
    TQ_GGML_TYPE_LIMIT = 64 /* ids at or above are rejected as unknown */
} tq_ggml_type;

/* tq_ggml_type_name() -- "Q4_K" etc.; "?" for an id this library does not know. */
TQ_API const char *tq_ggml_type_name(int type);
/* tq_ggml_block_size()/tq_ggml_type_size() -- elements per block and bytes per block (32 and 18
 * for Q4_0); 0 for an unknown id. */
TQ_API int64_t tq_ggml_block_size(int type);
TQ_API size_t tq_ggml_type_size(int type);
/* tq_ggml_can_dequant() -- 1 if tq_ggml_dequant() handles this type (F32 F16 BF16 Q4_0 Q4_1 Q5_0
 * Q5_1 Q8_0 Q4_K Q5_K Q6_K IQ4_NL). */
TQ_API int tq_ggml_can_dequant(int type);
/* tq_ggml_nbytes() -- bytes of n elements of `type` into *out. TQ_E_FORMAT if n is not a multiple
 * of the block size or the size overflows; TQ_E_UNSUPPORTED for an unknown type. */
TQ_API tq_status tq_ggml_nbytes(int type, int64_t n, size_t *out);
/* tq_ggml_dequant() -- decode n elements (n % block == 0) from src (src_len bytes, at least
 * tq_ggml_nbytes) into dst as f32, using the best CPU kernel (tq_cpu_isa()). The result is
 * bit-identical to tq_ggml_dequant_ref() and to the `gguf` Python package. No allocation. */
TQ_API tq_status tq_ggml_dequant(int type, const void *src, size_t src_len, float *dst, int64_t n);
/* tq_ggml_dequant_ref() -- the scalar specification of tq_ggml_dequant(). */
TQ_API tq_status tq_ggml_dequant_ref(int type, const void *src, size_t src_len, float *dst,
                                     int64_t n);
/* tq_ggml_dequant_isa() -- as tq_ggml_dequant() with one kernel level forced (tests); an ISA the
 * CPU lacks, or a type without a kernel at that level, falls back to the next lower level. */
TQ_API tq_status tq_ggml_dequant_isa(tq_isa isa, int type, const void *src, size_t src_len,
                                     float *dst, int64_t n);

/* ==== GGUF ================================================================================= */
typedef struct tq_gguf tq_gguf;

/* Metadata value types (pinned by the GGUF format). */
typedef enum tq_gguf_vtype {
    TQ_GGUF_U8 = 0,
    TQ_GGUF_I8 = 1,
    TQ_GGUF_U16 = 2,
    TQ_GGUF_I16 = 3,
    TQ_GGUF_U32 = 4,
    TQ_GGUF_I32 = 5,
    TQ_GGUF_F32 = 6,
    TQ_GGUF_BOOL = 7,
    TQ_GGUF_STRING = 8,
    TQ_GGUF_ARRAY = 9,
    TQ_GGUF_U64 = 10,
    TQ_GGUF_I64 = 11,
    TQ_GGUF_F64 = 12,
    TQ_GGUF_VTYPE_COUNT
} tq_gguf_vtype;

/* tq_gguf_open() -- map and validate a GGUF v2/v3 file: header, every metadata value (nested
 * arrays included), tensor infos, alignment (general.alignment, default 32), and that every
 * tensor's data lies inside the file, aligned, without overlap. Bad files give TQ_E_FORMAT with a
 * message naming the file and the problem; nothing is read out of bounds. */
TQ_API tq_status tq_gguf_open(const char *path, tq_gguf **out);
/* tq_gguf_open_memory() -- the same over a caller buffer (kept borrowed, must outlive the handle);
 * `name` is used in messages. Used by fuzzing and tests. */
TQ_API tq_status tq_gguf_open_memory(const void *data, size_t size, const char *name,
                                     tq_gguf **out);
TQ_API void tq_gguf_free(tq_gguf *g);
/* tq_gguf_version() -- format version (2 or 3); tq_gguf_alignment() -- data alignment in bytes;
 * tq_gguf_data_offset() -- file offset of the tensor data section; tq_gguf_path(). */
TQ_API uint32_t tq_gguf_version(const tq_gguf *g);
TQ_API size_t tq_gguf_alignment(const tq_gguf *g);
TQ_API size_t tq_gguf_data_offset(const tq_gguf *g);
TQ_API const char *tq_gguf_path(const tq_gguf *g);

/* --- metadata --- */
/* tq_gguf_n_kv() -- number of metadata pairs; tq_gguf_kv_key() -- key i (NUL-terminated, valid
 * while g lives; NULL if i is out of range); tq_gguf_find_key() -- index of key, or -1. */
TQ_API int64_t tq_gguf_n_kv(const tq_gguf *g);
TQ_API const char *tq_gguf_kv_key(const tq_gguf *g, int64_t i);
TQ_API int64_t tq_gguf_find_key(const tq_gguf *g, const char *key);
/* tq_gguf_kv_type() -- value type of pair i (-1 if out of range). For TQ_GGUF_ARRAY,
 * tq_gguf_kv_arr_type() gives the element type and tq_gguf_kv_arr_len() the length (arrays of
 * arrays are parsed and validated; their elements are not exposed beyond this). */
TQ_API int tq_gguf_kv_type(const tq_gguf *g, int64_t i);
TQ_API int tq_gguf_kv_arr_type(const tq_gguf *g, int64_t i);
TQ_API int64_t tq_gguf_kv_arr_len(const tq_gguf *g, int64_t i);

/* Typed getters by key. All return TQ_E_ARG (message names the key) when the key is missing and
 * TQ_E_FORMAT when its type does not fit; *out is untouched on failure.
 * tq_gguf_get_i64() accepts every integer type (and bool); a U64 above INT64_MAX fails.
 * tq_gguf_get_u32() accepts any integer value in [0, UINT32_MAX].
 * tq_gguf_get_f32() accepts F32, F64 (rounded) and integer types.
 * tq_gguf_get_str() returns a NUL-terminated copy kept by g (valid while g lives) and, if len is
 * not NULL, its byte length (GGUF strings may contain NUL bytes; len is then the real length). */
TQ_API tq_status tq_gguf_get_i64(const tq_gguf *g, const char *key, int64_t *out);
TQ_API tq_status tq_gguf_get_u32(const tq_gguf *g, const char *key, uint32_t *out);
TQ_API tq_status tq_gguf_get_f32(const tq_gguf *g, const char *key, float *out);
TQ_API tq_status tq_gguf_get_bool(const tq_gguf *g, const char *key, int *out);
TQ_API tq_status tq_gguf_get_str(const tq_gguf *g, const char *key, const char **out, size_t *len);

/* Arrays by key. tq_gguf_get_arr() gives the element type and length of an array value.
 * tq_gguf_get_arr_str() -- element i of a string array as a pointer into the file (NOT
 * NUL-terminated) and its length; O(1).
 * tq_gguf_get_arr_data() -- raw little-endian bytes of a numeric array (element type in *type,
 * element count in *n); the pointer may be unaligned: read with memcpy.
 * tq_gguf_get_arr_f32()/_i32() -- convert a numeric array into dst (cap elements at least the
 * array length, else TQ_E_OVERFLOW). _f32 accepts F32/F64/integers, _i32 integers that fit. */
TQ_API tq_status tq_gguf_get_arr(const tq_gguf *g, const char *key, int *elem_type, int64_t *n);
TQ_API tq_status tq_gguf_get_arr_str(const tq_gguf *g, const char *key, int64_t i, const char **s,
                                     size_t *len);
TQ_API tq_status tq_gguf_get_arr_data(const tq_gguf *g, const char *key, int *elem_type,
                                      const void **data, int64_t *n);
TQ_API tq_status tq_gguf_get_arr_f32(const tq_gguf *g, const char *key, float *dst, int64_t cap);
TQ_API tq_status tq_gguf_get_arr_i32(const tq_gguf *g, const char *key, int32_t *dst, int64_t cap);

/* --- tensors --- */
/* A view of one tensor of a GGUF file (valid while g lives). */
typedef struct tq_gguf_tensor_info {
    const char *name; /* GGUF name, e.g. "blk.0.attn_q.weight" (NUL-terminated) */
    int type;         /* tq_ggml_type */
    int n_dims;       /* 1..4 */
    int64_t ne[4];    /* ggml order: ne[0] is the contiguous dimension; unused = 1 */
    int64_t shape[4]; /* outermost first: shape[n_dims-1] == ne[0]; unused = 0 */
    int64_t n_elem;   /* product of the dimensions */
    uint64_t offset;  /* offset inside the data section */
    size_t nbytes;    /* bytes of the tensor data */
    const void *data; /* pointer to the data inside the mapped file */
} tq_gguf_tensor_info;

/* tq_gguf_n_tensors() -- number of tensors; tq_gguf_find_tensor() -- index by name or -1;
 * tq_gguf_tensor() -- fill *out for tensor i (TQ_E_ARG if out of range). */
TQ_API int64_t tq_gguf_n_tensors(const tq_gguf *g);
TQ_API int64_t tq_gguf_find_tensor(const tq_gguf *g, const char *name);
TQ_API tq_status tq_gguf_tensor(const tq_gguf *g, int64_t i, tq_gguf_tensor_info *out);

/* ==== safetensors =========================================================================== */
typedef struct tq_st tq_st;

/* safetensors dtypes this library reads (values are ours, pinned, append-only). */
typedef enum tq_st_dtype {
    TQ_ST_F32 = 0,
    TQ_ST_F16 = 1,
    TQ_ST_BF16 = 2,
    TQ_ST_I8 = 3,
    TQ_ST_U8 = 4,
    TQ_ST_I32 = 5,
    TQ_ST_U32 = 6,
    TQ_ST_I16 = 7,
    TQ_ST_U16 = 8,
    TQ_ST_I64 = 9,
    TQ_ST_U64 = 10,
    TQ_ST_F64 = 11,
    TQ_ST_BOOL = 12,
    TQ_ST_DTYPE_COUNT
} tq_st_dtype;
/* tq_st_dtype_name() -- the file's spelling ("BF16"); tq_st_dtype_size() -- bytes per element. */
TQ_API const char *tq_st_dtype_name(int dtype);
TQ_API size_t tq_st_dtype_size(int dtype);

#define TQ_ST_MAX_DIMS 8
/* A view of one safetensors tensor (valid while the handle lives). */
typedef struct tq_st_tensor_info {
    const char *name;              /* tensor name (NUL-terminated) */
    int dtype;                     /* tq_st_dtype */
    int n_dims;                    /* 0..TQ_ST_MAX_DIMS (0 = scalar) */
    int64_t shape[TQ_ST_MAX_DIMS]; /* outermost first */
    int64_t n_elem;                /* product of shape (1 for a scalar) */
    size_t nbytes;                 /* n_elem * dtype size */
    const void *data;              /* inside the mapped shard */
    const char *file;              /* path of the shard that holds it */
} tq_st_tensor_info;

/* tq_st_open() -- open a .safetensors file, a model.safetensors.index.json, or a directory
 * holding either (an index wins; else model.safetensors; else the single *.safetensors file).
 * Validates the header JSON (object, 8-byte length, no duplicate names, known dtypes, shapes and
 * data_offsets that agree, contiguous in-bounds data, no overflow) and every shard named by the
 * index. Bad files give TQ_E_FORMAT naming the file and the problem. */
TQ_API tq_status tq_st_open(const char *path, tq_st **out);
/* tq_st_open_memory() -- one safetensors image in a caller buffer (borrowed); for fuzzing/tests. */
TQ_API tq_status tq_st_open_memory(const void *data, size_t size, const char *name, tq_st **out);
TQ_API void tq_st_free(tq_st *st);
TQ_API int64_t tq_st_n_tensors(const tq_st *st);
TQ_API int64_t tq_st_find(const tq_st *st, const char *name);
TQ_API tq_status tq_st_tensor(const tq_st *st, int64_t i, tq_st_tensor_info *out);
/* tq_st_metadata() -- value of a "__metadata__" string entry (first shard; NULL if absent);
 * tq_st_n_metadata()/tq_st_metadata_at() enumerate them. */
TQ_API const char *tq_st_metadata(const tq_st *st, const char *key);
TQ_API int64_t tq_st_n_metadata(const tq_st *st);
TQ_API tq_status tq_st_metadata_at(const tq_st *st, int64_t i, const char **key,
                                   const char **value);

/* --- streaming writer --- */
typedef struct tq_st_writer tq_st_writer;
/* tq_st_writer_create() -- start writing. `path` ending in ".safetensors" writes one file (no
 * shard limit); any other path is a directory (created if missing) that receives
 * model.safetensors, or model-0000i-of-0000N.safetensors + model.safetensors.index.json when the
 * data exceeds shard_bytes (0 = never shard). Tensor data goes to temporary files as it arrives
 * (memory stays bounded); tq_st_writer_finish() writes each final file through tq_atomic_file
 * (below: <name>.tmp.<pid>, fsync, rename into place), so readers never see a half-written file. */
TQ_API tq_status tq_st_writer_create(const char *path, uint64_t shard_bytes, tq_st_writer **out);
/* tq_st_writer_set_metadata() -- add a "__metadata__" string pair (written in every shard and in
 * the index). Keys must be unique and not start with "__". */
TQ_API tq_status tq_st_writer_set_metadata(tq_st_writer *w, const char *key, const char *value);
/* tq_st_writer_add() -- append one tensor (its bytes are copied out before return). Names must be
 * unique; nbytes must equal prod(shape) * dtype size. */
TQ_API tq_status tq_st_writer_add(tq_st_writer *w, const char *name, int dtype, int n_dims,
                                  const int64_t *shape, const void *data, size_t nbytes);
/* tq_st_writer_finish() -- write the final files atomically. After it (success or not) only
 * tq_st_writer_free() may be called. */
TQ_API tq_status tq_st_writer_finish(tq_st_writer *w);
/* tq_st_writer_free() -- release; an unfinished writer deletes its temporary files. */
TQ_API void tq_st_writer_free(tq_st_writer *w);

/* ==== atomic file replacement =============================================================== */
/* Every file the library and the tools save (safetensors, prompt caches, --json) goes through
 * this. Writing a regular or missing file F: the bytes go to "F.tmp.<pid>" in F's directory;
 * commit fsyncs it, renames it over F and fsyncs the directory, so readers (and a crash) see the
 * old F or the new one, never a part. Other targets (docs/FORMAT.md "Atomic saves"):
 * a FIFO or character device is written in place (no temporary, no rename); a symbolic link is
 * resolved and its final target replaced atomically (the link stays a link); a directory,
 * socket or block device is refused; a regular file we may not write (or with no write bit at
 * all, even for root) is refused. Temporary files "F.tmp.<pid>" of processes that no longer
 * exist are removed when F is next opened. Errors are TQ_E_IO naming the file. */
typedef struct tq_atomic_file tq_atomic_file;
/* tq_atomic_file_open() -- start writing path (rules above). */
TQ_API tq_status tq_atomic_file_open(const char *path, tq_atomic_file **out);
/* tq_atomic_file_fd() -- descriptor to write to (valid until commit/abort). */
TQ_API int tq_atomic_file_fd(const tq_atomic_file *f);
/* tq_atomic_file_stream() -- a stdio stream over that descriptor, owned by f (do not fclose);
 * NULL on failure. Use either the stream or the descriptor, not both. */
TQ_API FILE *tq_atomic_file_stream(tq_atomic_file *f);
/* tq_atomic_file_tmp_path() -- the temporary file's name, NULL when writing in place. */
TQ_API const char *tq_atomic_file_tmp_path(const tq_atomic_file *f);
/* tq_atomic_file_commit() -- flush, fsync, close and rename into place; frees f whatever the
 * result. On failure the old file is untouched and the temporary removed. */
TQ_API tq_status tq_atomic_file_commit(tq_atomic_file *f);
/* tq_atomic_file_abort() -- close, remove the temporary (the old file stays), free f.
 * NULL is a no-op. After a partial in-place write (FIFO, device) nothing can be undone. */
TQ_API void tq_atomic_file_abort(tq_atomic_file *f);

/* ==== model configuration =================================================================== */
typedef enum tq_arch {
    TQ_ARCH_UNKNOWN = 0,
    TQ_ARCH_LLAMA = 1,
    TQ_ARCH_MISTRAL = 2,
    TQ_ARCH_QWEN2 = 3,
    TQ_ARCH_QWEN3 = 4,
    TQ_ARCH_GEMMA3 = 5,
    TQ_ARCH_COUNT
} tq_arch;
/* tq_arch_name() -- "llama", "mistral", "qwen2", "qwen3", "gemma3", "unknown". */
TQ_API const char *tq_arch_name(tq_arch a);

typedef enum tq_rope_scaling {
    TQ_ROPE_SCALING_NONE = 0,
    TQ_ROPE_SCALING_LINEAR = 1,
    TQ_ROPE_SCALING_LLAMA3 = 2,
    TQ_ROPE_SCALING_YARN = 3,
} tq_rope_scaling;

/* RoPE pair ordering for weights in Hugging Face layout (what tq_weights delivers):
 * NEOX pairs element i with i + rot_dim/2 (HF rotate_half; every architecture here), NORM pairs
 * 2i with 2i+1 (what llama.cpp uses on GGUF Llama weights, whose q/k rows the converter
 * permuted; tq_weights undoes that permutation, docs/FORMAT.md). */
typedef enum tq_rope_order { TQ_ROPE_NEOX = 0, TQ_ROPE_NORM = 1 } tq_rope_order;

/* Hyper-parameters of a decoder-only model, from GGUF metadata or HF config.json. Fields that a
 * source does not give keep the architecture's default (documented per field). */
typedef struct tq_model_config {
    tq_arch arch;
    char arch_name[32];     /* as the source spells it ("llama", "Gemma3ForCausalLM" -> "gemma3") */
    int n_layers;           /* decoder blocks */
    int hidden;             /* residual width */
    int n_heads;            /* query heads */
    int n_kv_heads;         /* key/value heads (GQA); = n_heads if not given */
    int head_dim;           /* from the source when given, else hidden / n_heads */
    int ffn_hidden;         /* MLP intermediate size */
    int vocab;              /* vocabulary size (rows of the embedding) */
    int64_t max_ctx;        /* max_position_embeddings / context_length */
    float rope_theta;       /* base frequency of global layers */
    float rope_theta_local; /* base of sliding-window layers (gemma3: 10000); else = theta */
    int rope_dim;           /* rotated dimensions per head (= head_dim unless partial) */
    tq_rope_order rope_order; /* for HF-layout weights; always NEOX for these arches */
    tq_rope_scaling rope_scaling;
    float rope_factor;           /* linear/llama3/yarn factor (1 if none) */
    float rope_low_freq_factor;  /* llama3 */
    float rope_high_freq_factor; /* llama3 */
    int64_t rope_orig_max_pos;   /* llama3/yarn original_max_position_embeddings */
    float rms_eps;               /* RMSNorm epsilon */
    int tied_embeddings;         /* lm_head shares model.embed_tokens.weight */
    int qkv_bias;                /* q/k/v projections have biases (qwen2) */
    int qk_norm;                 /* per-head RMSNorm on q and k (qwen3, gemma3) */
    int norm_plus_one;           /* every RMSNorm (q/k norms too) multiplies by (1 + w): gemma3
                                  * from config.json. 0 for gemma3 GGUF, whose converter already
                                  * stored w + 1 (delivered as stored: exact) */
    int sliding_window;          /* tokens in the window of sliding layers, 0 = none */
    int sliding_window_pattern;  /* every Nth layer is global (gemma3: 6); 0: all slide */
    float query_pre_attn_scalar; /* gemma3: attention scale is 1/sqrt(this); 0 = head_dim */
    float final_logit_softcap;   /* 0 = none */
    float attn_logit_softcap;    /* 0 = none */
    float embed_scale;           /* multiply embeddings by this (gemma: sqrt(hidden)); else 1 */
    int act_gelu;                /* MLP activation: 0 = SiLU (swiglu), 1 = GELU tanh (gegelu) */
    int32_t bos_id;              /* -1 if unknown */
    int32_t eos_id;              /* -1 if unknown */
} tq_model_config;

/* tq_model_config_from_gguf() -- fill *cfg from the `<arch>.*` and tokenizer.ggml.* keys. */
TQ_API tq_status tq_model_config_from_gguf(const tq_gguf *g, tq_model_config *cfg);
/* tq_model_config_from_json() -- parse a Hugging Face config.json file (path) into *cfg
 * (model_type llama/mistral/qwen2/qwen3/gemma3/gemma3_text; text_config of a multimodal gemma3
 * is used). head_dim is taken from the file when present, never derived then. */
TQ_API tq_status tq_model_config_from_json(const char *path, tq_model_config *cfg);
/* tq_model_config_layer_is_sliding() -- 1 if layer il uses the sliding window. */
TQ_API int tq_model_config_layer_is_sliding(const tq_model_config *cfg, int il);

/* ==== uniform tensor source ================================================================= */
typedef struct tq_weights tq_weights;

/* Source formats and dtypes of a tensor as stored. */
typedef enum tq_weights_format {
    TQ_WEIGHTS_GGUF = 0,
    TQ_WEIGHTS_SAFETENSORS = 1
} tq_weights_format;

/* A tensor as tq_weights presents it (valid while w lives). */
typedef struct tq_weights_tensor {
    const char *name;     /* Hugging Face name ("model.layers.3.self_attn.q_proj.weight") */
    const char *src_name; /* name in the file ("blk.3.attn_q.weight" for GGUF) */
    int n_dims;           /* 1..4 */
    int64_t shape[4];     /* outermost first, HF layout ((out, in) for linear weights) */
    int64_t n_elem;
    const char *src_type; /* stored type: "Q4_K", "BF16", ... */
    size_t src_nbytes;    /* bytes on disk */
    int ggml_type;        /* GGUF: the stored ggml type id (tq_ggml_type); -1 for safetensors */
} tq_weights_tensor;

/* tq_weights_open() -- a GGUF file, a safetensors file, an index json, or a Hugging Face
 * directory (config.json + safetensors). Files are told apart by their first bytes (GGUF magic;
 * safetensors: u64 header length then '{'), whatever their names; then by extension. Fills the model config (GGUF metadata or config.json).
 * An architecture this library does not know (or a lone .safetensors without config.json) still
 * opens, with cfg->arch == TQ_ARCH_UNKNOWN and only the fields the source gave: callers that run
 * the model must check arch. Malformed configs of known architectures fail (TQ_E_FORMAT). */
TQ_API tq_status tq_weights_open(const char *path, tq_weights **out);
/* tq_weights_open_gguf_memory() -- the same over a GGUF image in a caller buffer (borrowed, must
 * outlive the handle); `name` is used in messages. For fuzzing and tests. */
TQ_API tq_status tq_weights_open_gguf_memory(const void *data, size_t size, const char *name,
                                             tq_weights **out);
TQ_API void tq_weights_free(tq_weights *w);
TQ_API tq_weights_format tq_weights_source_format(const tq_weights *w);
/* tq_weights_config() -- the model configuration (valid while w lives). */
TQ_API const tq_model_config *tq_weights_config(const tq_weights *w);
/* tq_weights_gguf()/tq_weights_st() -- the underlying reader (NULL for the other format), e.g. for
 * the GGUF tokenizer; valid while w lives. */
TQ_API const tq_gguf *tq_weights_gguf(const tq_weights *w);
TQ_API const tq_st *tq_weights_st(const tq_weights *w);
TQ_API int64_t tq_weights_count(const tq_weights *w);
TQ_API int64_t tq_weights_find(const tq_weights *w, const char *hf_name);
TQ_API tq_status tq_weights_tensor_at(const tq_weights *w, int64_t i, tq_weights_tensor *out);
/* tq_weights_get() -- info of a tensor by HF name (TQ_E_ARG naming it if absent). */
TQ_API tq_status tq_weights_get(const tq_weights *w, const char *hf_name, tq_weights_tensor *out);
/* tq_weights_read() -- convert tensor `hf_name` into dst as f32, f16 or bf16 (RNE), in HF layout
 * (GGUF Llama/Mistral q/k rows un-permuted; values otherwise exactly as stored, so see
 * cfg->norm_plus_one). dst_cap in bytes must be >= n_elem * dtype size. f16/bf16 output of a
 * GGUF source allocates one scratch block of rows per call; thread-safe. */
TQ_API tq_status tq_weights_read(const tq_weights *w, const char *hf_name, tq_dtype dtype,
                                 void *dst, size_t dst_cap);

/* tq_weights_read_raw() -- tensor `hf_name` of a GGUF source as stored (its block format, no
 * conversion) into dst, rows in HF order (the Llama q/k row permutation undone by moving whole
 * rows; a row = n_elem / shape[0] elements). *type gets the ggml type id, *row_bytes the bytes
 * of one row. Refused: a safetensors source (TQ_E_UNSUPPORTED), rows that split blocks, a byte
 * size that does not match type and shape (TQ_E_FORMAT naming the tensor), dst_cap too small. */
TQ_API tq_status tq_weights_read_raw(const tq_weights *w, const char *hf_name, int *type,
                                     size_t *row_bytes, void *dst, size_t dst_cap);

/* tq_weights_read_rows() -- rows [r0, r0 + n) of tensor `hf_name` into dst as dtype, HF layout
 * (row = index along shape[0]; a row holds n_elem / shape[0] elements). For embedding lookups in
 * a quantized GGUF table without dequantizing the whole table, and for streaming large tensors.
 * Identical values to the same rows of tq_weights_read(). f32 output never allocates (safe in a
 * forward step); f16/bf16 output of GGUF tensors allocates one row of scratch per call. */
TQ_API tq_status tq_weights_read_rows(const tq_weights *w, const char *hf_name, int64_t r0,
                                      int64_t n, tq_dtype dtype, void *dst, size_t dst_cap);

/* ==== GGUF writer (streaming) ================================================================ */
/* Declare metadata (copied from a source file or set) and every tensor first, then
 * tq_gguf_writer_begin() writes the header and tq_gguf_writer_write() streams the tensor bytes in
 * declaration order (any chunking; padding to the alignment is added). The file is written
 * through tq_atomic_file and appears under `path` only at tq_gguf_writer_finish(); freeing an
 * unfinished writer removes the temporary. Version 3, little-endian, alignment 32 unless set. */
typedef struct tq_gguf_writer tq_gguf_writer;
TQ_API tq_status tq_gguf_writer_create(const char *path, tq_gguf_writer **out);
TQ_API tq_status tq_gguf_writer_set_alignment(tq_gguf_writer *w, size_t alignment);
/* tq_gguf_writer_copy_kv() -- pair i of src, value bytes verbatim (any type, nested arrays too).
 * A key set again replaces the earlier value (keeping its place). */
TQ_API tq_status tq_gguf_writer_copy_kv(tq_gguf_writer *w, const tq_gguf *src, int64_t i);
TQ_API tq_status tq_gguf_writer_set_raw(tq_gguf_writer *w, const char *key, int type,
                                        const void *val, size_t len);
TQ_API tq_status tq_gguf_writer_set_str(tq_gguf_writer *w, const char *key, const char *value);
TQ_API tq_status tq_gguf_writer_set_u32(tq_gguf_writer *w, const char *key, uint32_t value);
TQ_API tq_status tq_gguf_writer_set_u64(tq_gguf_writer *w, const char *key, uint64_t value);
TQ_API tq_status tq_gguf_writer_set_bool(tq_gguf_writer *w, const char *key, int value);
/* tq_gguf_writer_add_tensor() -- declare a tensor: ggml dims (ne[0] contiguous), type. */
TQ_API tq_status tq_gguf_writer_add_tensor(tq_gguf_writer *w, const char *name, int type,
                                           int n_dims, const int64_t *ne);
TQ_API tq_status tq_gguf_writer_begin(tq_gguf_writer *w);
TQ_API tq_status tq_gguf_writer_write(tq_gguf_writer *w, const void *data, size_t n);
TQ_API tq_status tq_gguf_writer_finish(tq_gguf_writer *w);
TQ_API void tq_gguf_writer_free(tq_gguf_writer *w);

#ifdef __cplusplus
}
#endif
#endif
