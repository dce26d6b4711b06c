/* attn_rot.h -- fused CPU attention over rotated block-coded K/V rows (the rot: KV schemes,
 * src/kv/kv_rot.c) (internal).
 *
 * The kernels see plain views only (pointers, strides, sizes and a code descriptor): they know
 * nothing of the engine or of the codec module; the caller (src/model/kvcache_rot.c) fills the
 * descriptors from the codec's tables, rotates the queries before and un-rotates the outputs
 * after. Everything here is in the ROTATED domain:
 *     out = softmax(scale * q K^T) V      q, K, V, out all rotated (H q, H k, H v)
 * which is the attention of the un-rotated vectors because H is orthonormal ((Hq).(Hk) = q.k and
 * sum_t w_t H v_t = H sum_t w_t v_t): the caller applies H^-1 once per output row.
 *
 * Per unit (kv-head g, block of queries, chunk of TQ_ROT_KC keys at absolute positions):
 *   1. a block of TQ_ROT_KB packed K rows is dequantized into an L1 buffer (float: code value
 *      times the block's fp16 scale, the codec's own product), scored against every query row
 *      of the unit and every query head of g (float dot), masked (causal, sliding window);
 *   2. the packed V rows of the block are dequantized the same way (rotated domain);
 *   3. online softmax per (query, head) in float: m' = max(m, max s), acc = acc e^(m - m') +
 *      sum_t e^(s_t - m') v_t, l likewise.
 * Every row merges its chunk states in chunk order: decode (n_q <= TQ_ROT_QD) runs the chunks of
 * a kv-head in parallel and merges afterwards, prefill runs them one after the other; the
 * operations per row are the same, so a row gives the same floats alone and inside a block of
 * rows (batch invariance) for a given kernel table.
 * The scalar kernels (attn_rot.c) are the specification; the AVX2 and AVX-512 kernels compute
 * the same formulas with other float rounding (vector sums, polynomial exp): tested against it
 * within a stated tolerance (tests/test_attn_rot.c). Decoded values are identical on every ISA.
 *
 * Ring storage: row of absolute position t of kv-head g sits at base + g * head_stride +
 * (t % slots) * row_bytes; slots >= every position held (full layers: slots = n_ctx) or, for a
 * sliding-window layer kept as a ring buffer, a multiple of TQ_ROT_KC. */
#ifndef TQ_ATTN_ROT_H
#define TQ_ATTN_ROT_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#define TQ_ROT_KB 32    /* keys per dequantized block                              */
#define TQ_ROT_KC 256   /* keys per chunk (a multiple of TQ_ROT_KB)                 */
#define TQ_ROT_QB 32    /* queries per unit in prefill                              */
#define TQ_ROT_QD 4     /* n_q <= TQ_ROT_QD: decode form (chunks in parallel)        */
#define TQ_ROT_MAX_HD 512

/* one block code (ggml's q8_0/q5_0/q4_0/iq4_nl or our l<L>g<G> pair code), plain data */
typedef enum tq_rot_code_kind {
    TQ_ROTC_Q8_0 = 0,
    TQ_ROTC_Q5_0 = 1,
    TQ_ROTC_Q4_0 = 2,
    TQ_ROTC_IQ4_NL = 3,
    TQ_ROTC_LM = 4 /* [fp16 s][group/2 pair codes of pair_bits bits, LSB-first stream] */
} tq_rot_code_kind;

typedef struct tq_rot_code {
    tq_rot_code_kind kind;
    int group;          /* elements per block: 32, or 32/64 for LM                   */
    int block_bytes;    /* bytes per block                                          */
    int levels;         /* LM: L; pair code = i0 + L * i1                           */
    int pair_bits;      /* LM: bits of L*L - 1                                      */
    const float *grid;  /* LM: L sorted floats; IQ4_NL: the 16 grid values as floats */
    /* LM, optional (NULL: the kernels look up grid): the pair table, 2^pair_bits entries of two
     * floats, entry v = (grid[v % L], grid[min(v / L, L - 1)]) (tq_rot_code_fill_pairs()), so a
     * pair code is one 64-bit load instead of a division and two lookups. Same decoded values. */
    const float *pairs;
} tq_rot_code;

/* tq_rot_code_pairs_floats() -- floats of c's pair table (0 when c is not LM);
 * tq_rot_code_fill_pairs() writes it (c->grid, c->levels, c->pair_bits). */
size_t tq_rot_code_pairs_floats(const tq_rot_code *c);
void tq_rot_code_fill_pairs(const tq_rot_code *c, float *pairs);

/* tq_rot_code_row_ok() -- 1 when the kernels support rows of d elements of code c (d a multiple
 * of the group and of 64, d <= TQ_ROT_MAX_HD; LM pair_bits <= 16, block_bytes <= 64). */
int tq_rot_code_row_ok(const tq_rot_code *c, int d);

typedef struct tq_attn_rot_kernels {
    const char *name;
    /* dec() -- n rows of d elements (row i at src + i * row_bytes) to floats, rotated domain:
     * out[i * d + j] = value(code_j) * scale_block (one float product, the codec's). */
    void (*dec)(const tq_rot_code *c, const uint8_t *src, size_t row_bytes, int n, int d,
                float *out);
    /* block() -- one query head against nv <= TQ_ROT_KB decoded keys/values: sc[k] = scale *
     * dot(q, K[k]) (float), then the online-softmax update of S = [m, l, acc[d]] (floats;
     * l = 0: no key yet) with the values V[k]. sc: TQ_ROT_KB floats of scratch. */
    void (*block)(const float *q, const float *K, const float *V, int nv, int d, float scale,
                  float *S, float *sc);
} tq_attn_rot_kernels;

extern const tq_attn_rot_kernels tq_attn_rot_scalar;
extern const tq_attn_rot_kernels tq_attn_rot_avx2;   /* x86-64 builds only */
extern const tq_attn_rot_kernels tq_attn_rot_avx512; /* x86-64 builds only */
/* tq_attn_rot_kernels_for() -- the kernels of isa (the best one below it that exists). */
const tq_attn_rot_kernels *tq_attn_rot_kernels_for(tq_isa isa);

/* one layer's attention call */
typedef struct tq_attn_rot_job {
    const tq_attn_rot_kernels *kern;
    const tq_rot_code *kc, *vc;
    const uint8_t *k, *v;    /* kv-head g's rows at k + g * k_head_stride (likewise v)       */
    size_t k_rb, v_rb;       /* bytes per row                                               */
    size_t k_head_stride, v_head_stride;
    int64_t slots;           /* ring size in rows (see above)                               */
    int n_heads, n_kv_heads, hd;
    float scale;
    int64_t window;          /* query p sees keys (p - window, p]; 0 = every key <= p        */
    const float *q;          /* (n_q, n_heads, hd) rotated queries                           */
    int64_t n_q, pos0;       /* query i is at position pos0 + i                             */
    float *out;              /* (n_q, n_heads, hd) rotated-domain outputs                    */
    unsigned char *scratch;  /* n_threads x tq_attn_rot_scratch_bytes(hd, group)            */
    float *part;             /* tq_attn_rot_part_floats(...) floats (decode partial states)  */
} tq_attn_rot_job;

/* per-thread scratch bytes (a multiple of 64) for head_dim hd and group query heads per kv-head */
size_t tq_attn_rot_scratch_bytes(int hd, int group);
/* floats of the decode partial states for up to max_keys keys per query */
size_t tq_attn_rot_part_floats(int n_kv_heads, int group, int hd, int64_t max_keys);
/* tq_attn_rot_run() -- the attention of j on pool (NULL = caller's thread); no allocation;
 * results identical for every thread count. */
void tq_attn_rot_run(const tq_attn_rot_job *j, tq_pool *pool);
/* tq_attn_rot_run_head() -- the output rows of kv-head g's query heads only, on the calling
 * thread, every key chunk one after the other (j->part unused): the same floats as
 * tq_attn_rot_run() (whose decode form merges the same chunk states in the same order). For a
 * batch of sequences, one unit per (sequence, kv-head). scratch: one thread's
 * tq_attn_rot_scratch_bytes(). No allocation. */
void tq_attn_rot_run_head(const tq_attn_rot_job *j, int g, unsigned char *scratch);

#endif /* TQ_ATTN_ROT_H */
