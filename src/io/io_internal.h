/* io_internal.h -- helpers shared by the readers and writers in src/io/ (not public). */
#ifndef TQ_IO_INTERNAL_H
#define TQ_IO_INTERNAL_H

#include "core/core.h"

/* A read-only mapping of a whole file (data == NULL when size == 0). */
typedef struct tq_map {
    const uint8_t *data;
    size_t size;
    int mapped; /* 1 if munmap is needed */
} tq_map;

/* tq_map_file() -- map `path` read-only; TQ_E_IO naming the path on failure. */
tq_status tq_map_file(const char *path, tq_map *m);
void tq_unmap_file(tq_map *m);

/* Dequantization kernels: n elements (multiple of the block) from src into dst. */
typedef void (*tq_dequant_fn)(const void *src, float *dst, int64_t n);

/* tq_dequant_kernel() -- kernel for (isa, type) or NULL when that level has none. */
tq_dequant_fn tq_dequant_kernel_scalar(int type);
tq_dequant_fn tq_dequant_kernel_avx2(int type);

/* tq_path_join() -- "dir/name" in a new allocation (NULL on OOM). */
char *tq_path_join(const char *dir, const char *name);
/* tq_is_dir() -- 1 if path names a directory. */
int tq_is_dir(const char *path);
/* tq_ends_with() -- 1 if s ends with suffix. */
int tq_ends_with(const char *s, const char *suffix);

#endif
