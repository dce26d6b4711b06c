/* st_writer.c -- streaming, sharded, atomic safetensors writer.
 *
 * Tensor bytes go to one temporary data file per shard as they arrive, so memory stays bounded
 * by the header. finish() writes each final shard through tq_atomic_file (atomic_file.c: a
 * temporary <name>.tmp.<pid> holding the u64 header length, the JSON header padded with spaces
 * to a multiple of 8 as the reference writer does, then the data copied from the staging file;
 * fsynced and renamed into place), then does the same for
 * model.safetensors.index.json and fsyncs the directory. Readers never see a partial file; a
 * writer freed before finish() deletes its temporary files. docs/FORMAT.md "safetensors writer". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io_internal.h"

typedef struct wt_tensor {
    char *name;
    int dtype;
    int n_dims;
    int64_t shape[TQ_ST_MAX_DIMS];
    size_t begin;
    size_t nbytes;
    int shard;
} wt_tensor;

typedef struct wt_shard {
    char *tmp_path; /* temporary data file */
    int fd;
    size_t size;
} wt_shard;

struct tq_st_writer {
    char *path; /* the .safetensors file, or the directory */
    char *dir;  /* directory of the outputs                */
    int single;
    uint64_t shard_bytes;
    int n_meta;
    char **meta_k;
    char **meta_v;
    int n_shards;
    wt_shard *shards;
    int64_t n;
    int64_t cap;
    wt_tensor *t;
    int done;
};

/* A growable string for headers. */
typedef struct sbuf {
    char *p;
    size_t n;
    size_t cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = tq_realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* A JSON string literal with the required escapes. */
static void sb_json(sbuf *b, const char *s)
{
    sb_add(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p;
            sb_add(b, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", *p);
            sb_add(b, esc, 6);
        } else {
            sb_add(b, (const char *)p, 1);
        }
    }
    sb_add(b, "\"", 1);
}

static tq_status write_all(int fd, const void *p, size_t n, const char *path)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t k = write(fd, b, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return TQ_FAIL(TQ_E_IO, "%s: write failed: %s", path, strerror(errno));
        b += k;
        n -= (size_t)k;
    }
    return TQ_OK;
}

tq_status tq_st_writer_create(const char *path, uint64_t shard_bytes, tq_st_writer **out)
{
    tq_st_writer *w;
    if (!path || !out || !*path)
        return TQ_FAIL(TQ_E_ARG, "tq_st_writer_create: NULL or empty path");
    *out = NULL;
    if (!(w = tq_calloc(1, sizeof(*w))))
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    w->single = tq_ends_with(path, ".safetensors");
    w->shard_bytes = w->single ? 0 : shard_bytes;
    w->path = tq_strdup(path);
    w->dir = tq_strdup(path);
    if (!w->path || !w->dir) {
        tq_st_writer_free(w);
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    }
    if (w->single && tq_is_dir(path)) { /* refused now rather than after staging the data */
        tq_st_writer_free(w);
        return TQ_FAIL(TQ_E_IO, "%s is a directory: name a file to write", path);
    }
    if (w->single) {
        char *slash = strrchr(w->dir, '/');
        if (slash)
            slash[slash == w->dir ? 1 : 0] = 0;
        else
            strcpy(w->dir, ".");
    } else if (!tq_is_dir(path) && mkdir(path, 0755) != 0) {
        tq_status st = TQ_FAIL(TQ_E_IO, "%s: cannot create directory: %s", path, strerror(errno));
        tq_st_writer_free(w);
        return st;
    }
    *out = w;
    return TQ_OK;
}

tq_status tq_st_writer_set_metadata(tq_st_writer *w, const char *key, const char *value)
{
    if (!w || !key || !value || w->done)
        return TQ_FAIL(TQ_E_ARG, "tq_st_writer_set_metadata: NULL argument or finished writer");
    if (!strncmp(key, "__", 2))
        return TQ_FAIL(TQ_E_ARG, "%s: metadata key '%s' must not start with \"__\"", w->path, key);
    for (int i = 0; i < w->n_meta; i++)
        if (!strcmp(w->meta_k[i], key))
            return TQ_FAIL(TQ_E_ARG, "%s: metadata key '%s' set twice", w->path, key);
    char **k = tq_realloc(w->meta_k, (size_t)(w->n_meta + 1) * sizeof(char *));
    if (k)
        w->meta_k = k;
    char **v = k ? tq_realloc(w->meta_v, (size_t)(w->n_meta + 1) * sizeof(char *)) : NULL;
    if (v)
        w->meta_v = v;
    if (!k || !v)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    w->meta_k[w->n_meta] = tq_strdup(key);
    w->meta_v[w->n_meta] = tq_strdup(value);
    w->n_meta++;
    if (!w->meta_k[w->n_meta - 1] || !w->meta_v[w->n_meta - 1])
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    return TQ_OK;
}

static tq_status new_shard(tq_st_writer *w)
{
    char name[96];
    wt_shard *s = tq_realloc(w->shards, (size_t)(w->n_shards + 1) * sizeof(*s));
    if (!s)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    w->shards = s;
    s = &w->shards[w->n_shards];
    memset(s, 0, sizeof(*s));
    s->fd = -1;
    snprintf(name, sizeof(name), ".tq-shard-%d.%ld.data", w->n_shards, (long)getpid());
    if (!(s->tmp_path = tq_path_join(w->dir, name)))
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    w->n_shards++;
    s->fd = open(s->tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s->fd < 0)
        return TQ_FAIL(TQ_E_IO, "%s: cannot create: %s", s->tmp_path, strerror(errno));
    return TQ_OK;
}

tq_status tq_st_writer_add(tq_st_writer *w, const char *name, int dtype, int n_dims,
                           const int64_t *shape, const void *data, size_t nbytes)
{
    size_t need = tq_st_dtype_size(dtype);
    wt_tensor *t;
    wt_shard *s;
    tq_status st;
    if (!w || !name || !*name || w->done || (n_dims > 0 && !shape) || (nbytes && !data))
        return TQ_FAIL(TQ_E_ARG, "tq_st_writer_add: bad argument or finished writer");
    if (!need)
        return TQ_FAIL(TQ_E_ARG, "%s: tensor '%s': unknown dtype %d", w->path, name, dtype);
    if (n_dims < 0 || n_dims > TQ_ST_MAX_DIMS)
        return TQ_FAIL(TQ_E_ARG, "%s: tensor '%s': %d dimensions (valid 0..%d)", w->path, name,
                       n_dims, TQ_ST_MAX_DIMS);
    if (!strcmp(name, "__metadata__"))
        return TQ_FAIL(TQ_E_ARG, "%s: '__metadata__' is reserved", w->path);
    for (int d = 0; d < n_dims; d++)
        if (shape[d] < 0 || !tq_mul_ok(need, (size_t)shape[d], &need))
            return TQ_FAIL(TQ_E_ARG, "%s: tensor '%s': bad or overflowing shape", w->path, name);
    if (need != nbytes)
        return TQ_FAIL(TQ_E_ARG, "%s: tensor '%s': %zu bytes given, shape and dtype need %zu",
                       w->path, name, nbytes, need);
    for (int64_t i = 0; i < w->n; i++)
        if (!strcmp(w->t[i].name, name))
            return TQ_FAIL(TQ_E_ARG, "%s: tensor '%s' added twice", w->path, name);
    if (w->n_shards == 0 || (w->shard_bytes && w->shards[w->n_shards - 1].size > 0 &&
                             w->shards[w->n_shards - 1].size + nbytes > w->shard_bytes))
        if ((st = new_shard(w)))
            return st;
    if (w->n == w->cap) {
        int64_t cap = w->cap ? w->cap * 2 : 64;
        wt_tensor *nt = tq_realloc(w->t, (size_t)cap * sizeof(*nt));
        if (!nt)
            return TQ_FAIL(TQ_E_NOMEM, "out of memory");
        w->t = nt;
        w->cap = cap;
    }
    s = &w->shards[w->n_shards - 1];
    if ((st = write_all(s->fd, data, nbytes, s->tmp_path)))
        return st;
    t = &w->t[w->n];
    memset(t, 0, sizeof(*t));
    if (!(t->name = tq_strdup(name)))
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    t->dtype = dtype;
    t->n_dims = n_dims;
    for (int d = 0; d < n_dims; d++)
        t->shape[d] = shape[d];
    t->begin = s->size;
    t->nbytes = nbytes;
    t->shard = w->n_shards - 1;
    s->size += nbytes;
    w->n++;
    return TQ_OK;
}

static void sb_meta(sbuf *b, const tq_st_writer *w)
{
    for (int i = 0; i < w->n_meta; i++) {
        if (i)
            sb_str(b, ",");
        sb_json(b, w->meta_k[i]);
        sb_str(b, ":");
        sb_json(b, w->meta_v[i]);
    }
}

static char *shard_name(const tq_st_writer *w, int i)
{
    char name[64];
    if (w->single)
        return tq_strdup(w->path);
    if (w->n_shards == 1)
        return tq_path_join(w->dir, "model.safetensors");
    snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", i + 1, w->n_shards);
    return tq_path_join(w->dir, name);
}

/* Write bytes (and optionally the contents of fd_src) to final atomically (tq_atomic_file: a
 * temporary "<final>.tmp.<pid>", fsync, rename; FIFOs/devices in place, symlinks resolved). */
static tq_status commit_file(const char *final, const void *head, size_t head_n, int fd_src,
                             size_t src_n)
{
    tq_atomic_file *af = NULL;
    tq_status st = tq_atomic_file_open(final, &af);
    const char *name;
    int fd;
    if (st)
        return st;
    fd = tq_atomic_file_fd(af);
    name = tq_atomic_file_tmp_path(af) ? tq_atomic_file_tmp_path(af) : final;
    if ((st = write_all(fd, head, head_n, name)))
        goto out;
    if (fd_src >= 0) {
        uint8_t buf[1 << 16];
        size_t left = src_n;
        off_t off = 0;
        while (left) {
            ssize_t k = pread(fd_src, buf, left < sizeof(buf) ? left : sizeof(buf), off);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                st = TQ_FAIL(TQ_E_IO, "%s: reading the staged data failed", final);
                goto out;
            }
            if ((st = write_all(fd, buf, (size_t)k, name)))
                goto out;
            off += k;
            left -= (size_t)k;
        }
    }
out:
    if (st) {
        tq_atomic_file_abort(af);
        return st;
    }
    return tq_atomic_file_commit(af);
}

static tq_status write_shard(tq_st_writer *w, int si, const char *final)
{
    sbuf h = {0};
    tq_status st;
    size_t hlen;
    int first = 1;
    sb_add(&h, "\0\0\0\0\0\0\0\0", 8);
    sb_str(&h, "{");
    if (w->n_meta) {
        sb_str(&h, "\"__metadata__\":{");
        sb_meta(&h, w);
        sb_str(&h, "}");
        first = 0;
    }
    for (int64_t i = 0; i < w->n; i++) {
        const wt_tensor *t = &w->t[i];
        char num[64];
        if (t->shard != si)
            continue;
        if (!first)
            sb_str(&h, ",");
        first = 0;
        sb_json(&h, t->name);
        sb_str(&h, ":{\"dtype\":");
        sb_json(&h, tq_st_dtype_name(t->dtype));
        sb_str(&h, ",\"shape\":[");
        for (int d = 0; d < t->n_dims; d++) {
            snprintf(num, sizeof(num), "%s%lld", d ? "," : "", (long long)t->shape[d]);
            sb_str(&h, num);
        }
        snprintf(num, sizeof(num), "],\"data_offsets\":[%zu,%zu]}", t->begin, t->begin + t->nbytes);
        sb_str(&h, num);
    }
    sb_str(&h, "}");
    while ((h.n - 8) % 8)
        sb_str(&h, " ");
    if (h.oom) {
        tq_free(h.p);
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    }
    hlen = h.n - 8;
    tq_wr64(h.p, (uint64_t)hlen);
    st = commit_file(final, h.p, h.n, w->shards[si].fd, w->shards[si].size);
    tq_free(h.p);
    return st;
}

static tq_status write_index(tq_st_writer *w, char **names)
{
    sbuf b = {0};
    char num[64];
    size_t total = 0;
    tq_status st;
    char *path = tq_path_join(w->dir, "model.safetensors.index.json");
    for (int64_t i = 0; i < w->n; i++)
        total += w->t[i].nbytes;
    snprintf(num, sizeof(num), "%zu", total);
    sb_str(&b, "{\n  \"metadata\": {\"total_size\": ");
    sb_str(&b, num);
    if (w->n_meta) {
        sb_str(&b, ", ");
        sb_meta(&b, w);
    }
    sb_str(&b, "},\n  \"weight_map\": {");
    for (int64_t i = 0; i < w->n; i++) {
        const char *base = strrchr(names[w->t[i].shard], '/');
        sb_str(&b, i ? ",\n    " : "\n    ");
        sb_json(&b, w->t[i].name);
        sb_str(&b, ": ");
        sb_json(&b, base ? base + 1 : names[w->t[i].shard]);
    }
    sb_str(&b, "\n  }\n}\n");
    if (b.oom || !path)
        st = TQ_FAIL(TQ_E_NOMEM, "out of memory");
    else
        st = commit_file(path, b.p, b.n, -1, 0);
    tq_free(b.p);
    tq_free(path);
    return st;
}

tq_status tq_st_writer_finish(tq_st_writer *w)
{
    char **names = NULL;
    tq_status st = TQ_OK;
    if (!w || w->done)
        return TQ_FAIL(TQ_E_ARG, "tq_st_writer_finish: NULL or finished writer");
    w->done = 1;
    if (w->n_shards == 0 && (st = new_shard(w)))
        return st;
    if (!(names = tq_calloc((size_t)w->n_shards, sizeof(char *))))
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    for (int i = 0; i < w->n_shards && !st; i++) {
        if (!(names[i] = shard_name(w, i)))
            st = TQ_FAIL(TQ_E_NOMEM, "out of memory");
        else
            st = write_shard(w, i, names[i]);
    }
    if (!st && !w->single && w->n_shards > 1)
        st = write_index(w, names);
    if (!st) {
        int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd); /* make the renames durable */
            close(dfd);
        }
    }
    for (int i = 0; i < w->n_shards; i++)
        tq_free(names[i]);
    tq_free(names);
    return st;
}

void tq_st_writer_free(tq_st_writer *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->n_shards; i++) {
        if (w->shards[i].fd >= 0)
            close(w->shards[i].fd);
        if (w->shards[i].tmp_path)
            unlink(w->shards[i].tmp_path);
        tq_free(w->shards[i].tmp_path);
    }
    for (int64_t i = 0; i < w->n; i++)
        tq_free(w->t[i].name);
    for (int i = 0; i < w->n_meta; i++) {
        tq_free(w->meta_k[i]);
        tq_free(w->meta_v[i]);
    }
    tq_free(w->meta_k);
    tq_free(w->meta_v);
    tq_free(w->shards);
    tq_free(w->t);
    tq_free(w->path);
    tq_free(w->dir);
    tq_free(w);
}
