/* turboquant.h -- public API of libturboquant (the one header tools and users include).
 *
 * Conventions (stated once):
 * - Every fallible function returns tq_status (TQ_OK == 0); results come back through out-params.
 *   On failure tq_last_error() holds a human-readable, thread-local message naming the problem.
 * - Handles are opaque; X_create(..., &out) pairs with X_free(x), and X_free(NULL) is a no-op.
 * - Element counts are int64_t, byte sizes size_t. Shapes are written outermost first, last index
 *   contiguous: a K/V block of shape (rows, head_dim) has head_dim floats per row.
 * - The library never calls exit() or abort() on bad input; it never frees what it did not allocate.
 * Area headers under turboquant/ are included at the end; do not include them directly.
 */
#ifndef TURBOQUANT_H
#define TURBOQUANT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TQ_VERSION_MAJOR 0
#define TQ_VERSION_MINOR 1
#define TQ_VERSION_PATCH 0
#define TQ_VERSION_NUMBER (TQ_VERSION_MAJOR * 10000 + TQ_VERSION_MINOR * 100 + TQ_VERSION_PATCH)

#if defined(__GNUC__)
#define TQ_API __attribute__((visibility("default")))
#else
#define TQ_API
#endif

/* Status codes: pinned values, append-only. */
typedef enum tq_status {
    TQ_OK = 0,
    TQ_E_ARG = -1,         /* invalid argument (NULL, bad scheme string, bad size)        */
    TQ_E_NOMEM = -2,       /* allocation failed                                           */
    TQ_E_IO = -3,          /* open/read/write/rename failed                               */
    TQ_E_FORMAT = -4,      /* malformed file or data                                      */
    TQ_E_UNSUPPORTED = -5, /* valid but not supported (head_dim, dtype, architecture)     */
    TQ_E_CUDA = -6,        /* CUDA runtime error, or no CUDA device                       */
    TQ_E_MISMATCH = -7,    /* data does not belong here (other model, other scheme)       */
    TQ_E_OVERFLOW = -8,    /* context or buffer capacity exceeded                         */
} tq_status;

/* tq_status_str() -- constant name of a status ("TQ_E_FORMAT"); never NULL. */
TQ_API const char *tq_status_str(tq_status st);
/* tq_last_error() -- message of the last failure on this thread ("" if none). Valid until the
 * next failing call on the same thread. For humans only; branch on tq_status. */
TQ_API const char *tq_last_error(void);
/* tq_version() -- TQ_VERSION_NUMBER of the linked library; tq_version_string() "0.1.0". */
TQ_API unsigned tq_version(void);
TQ_API const char *tq_version_string(void);

/* Element types of inputs/outputs. Pinned values, append-only. */
typedef enum tq_dtype {
    TQ_DTYPE_F32 = 0,
    TQ_DTYPE_F16 = 1,
    TQ_DTYPE_BF16 = 2,
    TQ_DTYPE_COUNT
} tq_dtype;
/* tq_dtype_size() -- bytes per element (4, 2, 2); 0 for an invalid dtype. */
TQ_API size_t tq_dtype_size(tq_dtype t);
TQ_API const char *tq_dtype_name(tq_dtype t);

/* ---- threads ------------------------------------------------------------------------------- */
typedef struct tq_pool tq_pool;
/* tq_pool_create() -- a pool of n_threads workers (the caller counts as one; n_threads <= 0
 * means one per online CPU). Threads sleep on a condition variable between jobs. */
TQ_API tq_status tq_pool_create(int n_threads, tq_pool **out);
TQ_API void tq_pool_free(tq_pool *pool);
/* tq_pool_size() -- number of threads a job runs on (1 for a NULL pool). */
TQ_API int tq_pool_size(const tq_pool *pool);
/* Job body: called once per thread with ith in [0, nth). Must split work by (ith, nth) only. */
typedef void (*tq_task_fn)(void *ctx, int ith, int nth);
/* tq_pool_run() -- run fn on every thread of the pool and wait for all. A NULL pool runs
 * fn(ctx, 0, 1) on the caller. Not re-entrant: one job at a time per pool. */
TQ_API void tq_pool_run(tq_pool *pool, tq_task_fn fn, void *ctx);
/* tq_pool_set_default_spin() -- pause iterations a worker of pools created from now on spins
 * before it sleeps between jobs (default 2000, about 10-50 us; 0 = always sleep, best on an
 * oversubscribed machine; < 0 = back to the default). Process-wide; call it at start. */
TQ_API void tq_pool_set_default_spin(int spin);

/* ---- CPU -------------------------------------------------------------------------------- */
/* Instruction-set levels the CPU kernels are built for. Pinned values. */
typedef enum tq_isa { TQ_ISA_SCALAR = 0, TQ_ISA_AVX2 = 1, TQ_ISA_AVX512 = 2, TQ_ISA_COUNT } tq_isa;
/* tq_cpu_isa() -- the level kernels use: the best this CPU supports, or what tq_cpu_select()
 * chose. The library reads no environment variable; the tq tool maps TQ_CPU (and --cpu) here. */
TQ_API tq_isa tq_cpu_isa(void);
/* tq_cpu_select() -- make the kernels use level isa from now on (process-wide; call it at start,
 * before models, caches and pools exist). Errors: TQ_E_ARG (not a level), TQ_E_UNSUPPORTED
 * (this CPU cannot run it; the level in use does not change). */
TQ_API tq_status tq_cpu_select(tq_isa isa);
/* tq_cpu_supports() -- 1 if this CPU (and OS) can run kernels of that level. */
TQ_API int tq_cpu_supports(tq_isa isa);
TQ_API const char *tq_isa_name(tq_isa isa);
/* tq_cpu_amx() -- 1 if the q8 matmuls of the 32-element formats run on AMX int8 tiles: the level
 * in use is avx512, the CPU reports AMX-TILE and AMX-INT8, the OS saves the tile state, Linux
 * granted the permission (arch_prctl ARCH_REQ_XCOMP_PERM, requested once, on the first call),
 * the library was built with AMX, and tq_cpu_set_amx() did not turn it off. The decision is
 * logged once (info). Same results either way (bit for bit). */
TQ_API int tq_cpu_amx(void);
/* tq_cpu_set_amx() -- allow (1, the default) or forbid (0) the AMX tiles; process-wide, call it
 * at start (with tq_cpu_select(), before any model is loaded). The tq tool maps TQ_CPU=avx512vnni
 * (and --cpu avx512vnni) to avx512 without AMX. */
TQ_API void tq_cpu_set_amx(int allow);
/* tq_cpu_r16() / tq_cpu_set_r16() -- whether models loaded from now on may repack their Q4_0 /
 * Q4_1 / Q8_0 matrices at load into the r16 layout (16 rows interleaved, docs/FORMAT.md "r16";
 * decode reads it with AVX512-VNNI): 1 (the default) or 0 (the file's rows). Process-wide; same
 * results either way (bit for bit). The tq tool maps TQ_R16=0 to 0. */
TQ_API int tq_cpu_r16(void);
TQ_API void tq_cpu_set_r16(int allow);

/* ---- log ------------------------------------------------------------------------------------ */
/* Messages the library prints to stderr ("tq: warning: ..."), by level. */
typedef enum tq_log_level {
    TQ_LOG_ERROR = 0,
    TQ_LOG_WARN = 1, /* default */
    TQ_LOG_INFO = 2,
    TQ_LOG_DEBUG = 3
} tq_log_level;
/* tq_log_set_level() -- print messages up to lvl from now on (process-wide). */
TQ_API void tq_log_set_level(tq_log_level lvl);

/* ---- memory accounting ---------------------------------------------------------------------- */
/* tq_alloc_count() -- number of allocations the library has made so far (all threads). Tests use
 * it to prove that hot paths (encode, decode, forward step) never allocate. */
TQ_API uint64_t tq_alloc_count(void);

#ifdef __cplusplus
}
#endif

/* Area headers: each declares one part of the API. */
#include "turboquant/kv.h"
#include "turboquant/io.h"
#include "turboquant/tokenizer.h"
#include "turboquant/model.h"
#include "turboquant/generate.h"
#include "turboquant/eval.h"
#include "turboquant/cuda.h"
#include "turboquant/quantize.h"

#endif /* TURBOQUANT_H */
