/* formats.h -- the one table of weight formats (internal API of src/common/; issue 12 item 2).
 *
 * One row per format, in the manner of ggml's type traits: the name, the block (elements and
 * bytes), the scalar dequantize reference (the specification, bit-identical to the `gguf` Python
 * package, docs/FORMAT.md "GGUF"), the quantize reference where one exists, the activation block
 * its q8 dot reads, and the kernels for this CPU. Ids are the GGUF/ggml type ids (pinned by the
 * file format) plus tq-only ids from TQ_FMT_MLX_AFFINE on.
 *
 * The rows (name, block, bytes, references) are constant and live in formats.c, written once
 * in TQ_FORMAT_ROWS below. The kernel slots (tq_format_kernels) are filled once at start by the
 * CPU backend (src/cpu/formats_cpu.c, tq_cpu_formats()) from the ISA tq_cpu_isa() selects:
 * every ISA file offers an array of kernels indexed by format id, and each slot takes the
 * highest ISA that provides it. Adding a format = one X(...) line in TQ_FORMAT_ROWS, its scalar
 * reference, and (optionally) its kernels in the ISA arrays; nothing else changes: the GGUF
 * reader's sizes, the dequantizer, the lists of supported types in messages and the engine's
 * native matmul all read this table (tests/test_formats.c adds a dummy row and shows it).
 *
 * common/ sees only core/; the kernel function types are declared here so that cpu/ can
 * register into the rows without anyone above depending on cpu/ internals. */
#ifndef TQ_FORMATS_H
#define TQ_FORMATS_H

#include "core/core.h"

/* tq-only format ids (after the ggml ids, which stop below TQ_GGML_TYPE_LIMIT = 64). */
enum {
    TQ_FMT_IQ4_NL = 20,     /* ggml's id (= TQ_GGML_IQ4_NL)                              */
    TQ_FMT_MLX_AFFINE = 64, /* MLX affine: 64 + 3 * bits index + group index, 18 ids   */
    TQ_FMT_TEST_DUMMY = 63, /* used only by tests/test_formats.c (TQ_TEST_DUMMY_FORMAT) */
    TQ_FMT_LIMIT = 96       /* ids at or above are unknown                              */
};

/* MLX affine in memory (src/common/affine_ref.c, docs/FORMAT.md "MLX affine"): one block per group
 * of G values of a row: bf16 scale, bf16 bias, then the G codes (G * bits / 8 bytes: the group's
 * slice of the row's little-endian bit stream, exactly as in the file's uint32 words); value =
 * scale * (float)q + bias in f32 (no FMA). Bits 2 3 4 5 6 8 (index 0..5) x group 32 64 128
 * (index 0..2). tq_fmt_mlx_id() -- the id of (bits, group), -1 if none. */
static inline int tq_fmt_mlx_id(int bits, int group)
{
    const int bi = bits == 8 ? 5 : bits >= 2 && bits <= 6 ? bits - 2 : -1;
    const int gi = group == 32 ? 0 : group == 64 ? 1 : group == 128 ? 2 : -1;
    return bi < 0 || gi < 0 ? -1 : TQ_FMT_MLX_AFFINE + 3 * bi + gi;
}
#define TQ_MLX_BLOCK_BYTES(bits, group) (4 + (group) * (bits) / 8)
#define TQ_FMT_MLX_ID(b, g)                                                                        \
    (TQ_FMT_MLX_AFFINE + 3 * ((b) == 8 ? 5 : (b) - 2) + ((g) == 32 ? 0 : (g) == 64 ? 1 : 2))
#define TQ_MLX_ROW(X, b, g)                                                                        \
    X(TQ_FMT_MLX_ID(b, g), "MLX" #b "g" #g, g, TQ_MLX_BLOCK_BYTES(b, g), TQ_ACT_Q8A,              \
      tq_dq_mlx_##b##_##g, NULL)
#define TQ_MLX_ROWS_B(X, b) TQ_MLX_ROW(X, b, 32) TQ_MLX_ROW(X, b, 64) TQ_MLX_ROW(X, b, 128)
#define TQ_FORMAT_ROWS_MLX(X)                                                                      \
    TQ_MLX_ROWS_B(X, 2) TQ_MLX_ROWS_B(X, 3) TQ_MLX_ROWS_B(X, 4) TQ_MLX_ROWS_B(X, 5)               \
    TQ_MLX_ROWS_B(X, 6) TQ_MLX_ROWS_B(X, 8)
#define TQ_MLX_DQ_DECL(b, g) void tq_dq_mlx_##b##_##g(const void *src, float *y, int64_t n);
#define TQ_MLX_DQ_DECL_B(b) TQ_MLX_DQ_DECL(b, 32) TQ_MLX_DQ_DECL(b, 64) TQ_MLX_DQ_DECL(b, 128)
TQ_MLX_DQ_DECL_B(2)
TQ_MLX_DQ_DECL_B(3)
TQ_MLX_DQ_DECL_B(4)
TQ_MLX_DQ_DECL_B(5)
TQ_MLX_DQ_DECL_B(6)
TQ_MLX_DQ_DECL_B(8)
/* tq_dq_mlx() -- the reference of every MLX row: n values (n % group == 0) of blocks. */
void tq_dq_mlx(const void *src, float *y, int64_t n, int bits, int group);

/* Activation blocks of the q8 dot paths (cpu/qdot.h): none, tq_q8a (32), tq_q8k (256). */
typedef enum tq_fmt_act { TQ_ACT_NONE = 0, TQ_ACT_Q8A = 1, TQ_ACT_Q8K = 2 } tq_fmt_act;

/* n elements (a multiple of the block) from src into dst as f32. */
typedef void (*tq_dequant_fn)(const void *src, float *dst, int64_t n);
/* n floats (a multiple of the block) into blocks. */
typedef void (*tq_quant_fn)(const float *src, void *dst, int64_t n);
/* x (k floats) -> the q8 activation blocks the format's q8 dot reads. */
typedef void (*tq_qact_quant_fn)(const float *x, void *act, int64_t k);
/* One weight row (k / block packed blocks) . activation, or . f32 x. */
typedef float (*tq_qdot_q8_fn)(const void *w, const void *act, int64_t k);
typedef float (*tq_qdot_f32_fn)(const void *w, const float *x, int64_t k);
/* Rows [r0, r1) x n tokens: y[t * ldy + r] = row r . token t (cpu/qdot.h). */
typedef void (*tq_qmv_q8_fn)(const void *w, size_t row_bytes, int64_t k, const void *act,
                             int64_t n, float *y, int64_t ldy, int64_t r0, int64_t r1);
typedef void (*tq_qmv_f32_fn)(const void *w, size_t row_bytes, int64_t k, const float *x,
                              int64_t ldx, int64_t n, float *y, int64_t ldy, int64_t r0,
                              int64_t r1);

/* The kernels of one format on this CPU; NULL = none. isa_* name where each slot came from. */
typedef struct tq_format_kernels {
    tq_dequant_fn dequant;    const char *isa_dequant;
    tq_qact_quant_fn quant_act;
    tq_qdot_q8_fn dot_q8;     const char *isa_q8;
    tq_qdot_f32_fn dot_f32;
    tq_qmv_q8_fn mv_q8;       /* decode/prefill with q8 activations                      */
    tq_qmv_f32_fn mv_f32;     /* decode/prefill with f32 activations (exact)              */
    tq_qmv_f32_fn gemm_f32;   /* prefill tile: each weight block decoded once per tile   */
    tq_qmv_q8_fn gemm_q8;     /* prefill tile, q8 path, packed activations (cpu/qdot.h   */
                              /* tq_q8p): the same bits as mv_q8; NULL = mv_q8 does it   */
    const char *isa_f32;
} tq_format_kernels;

typedef struct tq_format {
    int id;                   /* ggml type id or TQ_FMT_*                                 */
    const char *name;         /* "Q4_K"                                                   */
    int64_t block;            /* elements per block                                       */
    size_t block_bytes;       /* bytes per block                                          */
    tq_fmt_act act;           /* activation block of the q8 path                          */
    tq_dequant_fn dequant_ref;/* scalar specification; NULL = we do not run this format   */
    tq_quant_fn quant_ref;    /* scalar quantizer; NULL where none exists yet            */
    tq_format_kernels k;      /* filled once by the CPU backend (tq_cpu_formats())        */
} tq_format;

/* The rows: X(id, name, block, bytes, act, dequant reference, quantize reference). A NULL
 * dequant reference = a type the reader knows (sizes) but the engine does not run. */
#define TQ_FORMAT_ROWS(X)                                                                          \
    X(TQ_GGML_F32, "F32", 1, 4, TQ_ACT_NONE, tq_dq_f32, tq_qz_f32)                                 \
    X(TQ_GGML_F16, "F16", 1, 2, TQ_ACT_NONE, tq_dq_f16, tq_qz_f16)                                 \
    X(TQ_GGML_BF16, "BF16", 1, 2, TQ_ACT_NONE, tq_dq_bf16, tq_qz_bf16)                             \
    X(TQ_GGML_Q4_0, "Q4_0", 32, 18, TQ_ACT_Q8A, tq_dq_q4_0, NULL)                                  \
    X(TQ_GGML_Q4_1, "Q4_1", 32, 20, TQ_ACT_Q8A, tq_dq_q4_1, NULL)                                  \
    X(TQ_GGML_Q5_0, "Q5_0", 32, 22, TQ_ACT_Q8A, tq_dq_q5_0, NULL)                                  \
    X(TQ_GGML_Q5_1, "Q5_1", 32, 24, TQ_ACT_Q8A, tq_dq_q5_1, NULL)                                  \
    X(TQ_GGML_Q8_0, "Q8_0", 32, 34, TQ_ACT_Q8A, tq_dq_q8_0, NULL)                                  \
    X(TQ_GGML_Q4_K, "Q4_K", 256, 144, TQ_ACT_Q8K, tq_dq_q4_k, NULL)                                \
    X(TQ_GGML_Q5_K, "Q5_K", 256, 176, TQ_ACT_Q8K, tq_dq_q5_k, NULL)                                \
    X(TQ_GGML_Q6_K, "Q6_K", 256, 210, TQ_ACT_Q8K, tq_dq_q6_k, NULL)                                \
    X(TQ_GGML_Q8_1, "Q8_1", 32, 36, TQ_ACT_NONE, NULL, NULL)                                       \
    X(TQ_GGML_Q2_K, "Q2_K", 256, 84, TQ_ACT_NONE, NULL, NULL)                                      \
    X(TQ_GGML_Q3_K, "Q3_K", 256, 110, TQ_ACT_NONE, NULL, NULL)                                     \
    X(TQ_GGML_Q8_K, "Q8_K", 256, 292, TQ_ACT_NONE, NULL, NULL)                                     \
    X(TQ_FMT_IQ4_NL, "IQ4_NL", 32, 18, TQ_ACT_Q8A, tq_dq_iq4_nl, NULL)                             \
    X(TQ_GGML_I8, "I8", 1, 1, TQ_ACT_NONE, NULL, NULL)                                             \
    X(TQ_GGML_I16, "I16", 1, 2, TQ_ACT_NONE, NULL, NULL)                                           \
    X(TQ_GGML_I32, "I32", 1, 4, TQ_ACT_NONE, NULL, NULL)                                           \
    X(TQ_GGML_I64, "I64", 1, 8, TQ_ACT_NONE, NULL, NULL)                                           \
    X(TQ_GGML_F64, "F64", 1, 8, TQ_ACT_NONE, NULL, NULL)                                           \
    TQ_FORMAT_ROWS_MLX(X)

/* The scalar references of the rows (formats.c). */
void tq_dq_f32(const void *src, float *y, int64_t n);
void tq_dq_f16(const void *src, float *y, int64_t n);
void tq_dq_bf16(const void *src, float *y, int64_t n);
void tq_dq_q4_0(const void *src, float *y, int64_t n);
void tq_dq_q4_1(const void *src, float *y, int64_t n);
void tq_dq_q5_0(const void *src, float *y, int64_t n);
void tq_dq_q5_1(const void *src, float *y, int64_t n);
void tq_dq_q8_0(const void *src, float *y, int64_t n);
void tq_dq_q4_k(const void *src, float *y, int64_t n);
void tq_dq_q5_k(const void *src, float *y, int64_t n);
void tq_dq_q6_k(const void *src, float *y, int64_t n);
void tq_dq_iq4_nl(const void *src, float *y, int64_t n);
/* IQ4_NL's 16 values (ggml's kvalues_iq4nl, the gguf package's IQ4_NL.kvalues), ascending. */
extern const int8_t tq_iq4nl_values[16];
void tq_qz_f32(const float *x, void *dst, int64_t n);
void tq_qz_f16(const float *x, void *dst, int64_t n);
void tq_qz_bf16(const float *x, void *dst, int64_t n);

/* tq_format_get() -- the row of id, NULL for an unknown id. The kernel slots are those the CPU
 * backend registered (all NULL before tq_cpu_formats() ran). */
const tq_format *tq_format_get(int id);
/* tq_format_at() -- the i-th row in table order (i in [0, tq_format_count())), for listings. */
int tq_format_count(void);
const tq_format *tq_format_at(int i);
/* tq_format_list() -- the names of the rows that pass `want` (NULL: every row with a dequant
 * reference but the MLX ones, i.e. the GGUF types we run), space-separated, into buf (always terminated); returns buf. For messages. */
const char *tq_format_list(char *buf, size_t cap, int (*want)(const tq_format *f));
/* tq_format_runnable() -- 1 if the engine runs the format (it has a dequant reference). */
int tq_format_runnable(const tq_format *f);
/* tq_format_row_bytes() -- bytes of one row of k elements (k a multiple of the block); 0 on a
 * bad k or overflow. */
size_t tq_format_row_bytes(const tq_format *f, int64_t k);

/* tq_format_set_kernels() -- the CPU backend's registration (once, at start, before any reader
 * of the slots; tq_cpu_formats() serializes it). */
void tq_format_set_kernels(int id, const tq_format_kernels *k);

#endif /* TQ_FORMATS_H */
