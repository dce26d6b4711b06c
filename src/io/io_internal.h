/* io_internal.h -- helpers shared by the readers and writers in src/io/ (not public). */
#ifndef TQ_IO_INTERNAL_H
#define TQ_IO_INTERNAL_H

#include "core/core.h"

/* A read-only mapping of a whole file (data == NULL when size == 0), plus the open descriptor.
 * Another process may truncate or rewrite the file while we hold it; touching a mapped page past
 * the new end raises SIGBUS. So the readers never parse or copy from the mapping: headers and
 * tensor data are read with tq_map_read() (pread: a short read becomes TQ_E_IO naming the file).
 * The mapping only backs the `data` pointers of the public tensor views. */
typedef struct tq_map {
    const uint8_t *data;
    size_t size;      /* size at open */
    int mapped;       /* 1 if munmap is needed */
    int fd;           /* open read-only descriptor, -1 for a memory image */
    int64_t mtime_ns; /* modification time at open */
    char *path;       /* for messages (owned) */
} tq_map;

/* tq_map_file() -- map `path` read-only; TQ_E_IO naming the path on failure. */
tq_status tq_map_file(const char *path, tq_map *m);
/* tq_map_memory() -- describe a caller buffer as a tq_map (borrowed; nothing to unmap). */
void tq_map_memory(tq_map *m, const void *data, size_t size);
void tq_unmap_file(tq_map *m);
/* tq_map_read() -- copy bytes [off, off + n) of the file into dst: pread for a file (never
 * through the mapping), memcpy for a memory image. TQ_E_IO naming the file when the file is
 * now shorter than that (truncated by another process). */
tq_status tq_map_read(const tq_map *m, size_t off, void *dst, size_t n);
/* tq_map_check() -- TQ_E_IO naming the file if its size or mtime is not what it was at open
 * (call after a read: what was read is then consistent with what was validated at open). */
tq_status tq_map_check(const tq_map *m);

/* tq_gguf_read_tensor()/tq_st_read_tensor() -- bytes [off, off + n) of tensor i's data into dst
 * with tq_map_read() (i must be a valid index); tq_gguf_check()/tq_st_check_tensor() run
 * tq_map_check() on the file that holds it. */
tq_status tq_gguf_read_tensor(const tq_gguf *g, int64_t i, size_t off, void *dst, size_t n);
tq_status tq_st_read_tensor(const tq_st *st, int64_t i, size_t off, void *dst, size_t n);
tq_status tq_gguf_check(const tq_gguf *g);
/* tq_gguf_kv_raw() -- the serialized bytes of metadata value i exactly as in the file (after the
 * u32 value type: a scalar, a string's u64 length + bytes, or an array's element type, length and
 * elements), for copying a pair verbatim (the GGUF writer). Valid while g lives. */
tq_status tq_gguf_kv_raw(const tq_gguf *g, int64_t i, const uint8_t **p, size_t *len);
tq_status tq_st_check_tensor(const tq_st *st, int64_t i);

/* tq_ggml_unsupported() -- TQ_E_UNSUPPORTED naming the file, the tensor, its type and the
 * supported list (from the format table). */
tq_status tq_ggml_unsupported(const char *file, const char *tensor, int type);

/* tq_path_join() -- "dir/name" in a new allocation (NULL on OOM). */
char *tq_path_join(const char *dir, const char *name);
/* tq_is_dir() -- 1 if path names a directory. */
int tq_is_dir(const char *path);
/* tq_ends_with() -- 1 if s ends with suffix. */
int tq_ends_with(const char *s, const char *suffix);

#endif
