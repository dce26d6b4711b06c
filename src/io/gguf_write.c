/* gguf_write.c -- streaming GGUF v3 writer (docs/FORMAT.md "GGUF").
 *
 * The caller declares metadata and every tensor (name, type, ggml dims) first; tensor offsets
 * follow from the sizes (each tensor padded to the alignment), so the header is written once and
 * the tensor data is streamed in declaration order, one tensor at a time. Everything goes through
 * tq_atomic_file: the file appears under its name only at tq_gguf_writer_finish(). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io_internal.h"

typedef struct wkv {
    char *key;
    uint32_t type;
    uint8_t *val; /* serialized value (after the type field) */
    size_t len;
} wkv;

typedef struct wtensor {
    char *name;
    int type;
    int n_dims;
    int64_t ne[4];
    uint64_t offset;
    size_t nbytes;
} wtensor;

struct tq_gguf_writer {
    char *path;
    tq_atomic_file *af;
    int fd;
    size_t alignment;
    wkv *kv;
    int64_t n_kv, cap_kv;
    wtensor *t;
    int64_t n_t, cap_t;
    uint64_t data_size; /* bytes of the data section so far (declared) */
    int64_t next;       /* next tensor to write */
    size_t written;     /* bytes of the current tensor written */
    int begun, failed;
};

static tq_status wr_all(tq_gguf_writer *w, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        const ssize_t r = write(w->fd, b, n);
        if (r < 0) {
            w->failed = 1;
            return TQ_FAIL(TQ_E_IO, "%s: write failed (disk full?): %s", w->path,
                           strerror(errno));
        }
        b += r;
        n -= (size_t)r;
    }
    return TQ_OK;
}

tq_status tq_gguf_writer_create(const char *path, tq_gguf_writer **out)
{
    if (!path || !out)
        return TQ_FAIL(TQ_E_ARG, "tq_gguf_writer_create: NULL argument");
    tq_gguf_writer *w = tq_calloc(1, sizeof(*w));
    if (!w || !(w->path = strdup(path))) {
        tq_free(w);
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    }
    w->alignment = 32;
    w->fd = -1;
    *out = w;
    return TQ_OK;
}

void tq_gguf_writer_free(tq_gguf_writer *w)
{
    if (!w)
        return;
    tq_atomic_file_abort(w->af);
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        tq_free(w->kv[i].val);
    }
    for (int64_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    tq_free(w->kv);
    tq_free(w->t);
    free(w->path);
    tq_free(w);
}

tq_status tq_gguf_writer_set_alignment(tq_gguf_writer *w, size_t alignment)
{
    if (!w || w->n_t || alignment == 0 || (alignment & (alignment - 1)) || alignment > 65536)
        return TQ_FAIL(TQ_E_ARG, "gguf writer: alignment %zu (a power of two <= 65536, set "
                                 "before any tensor)", alignment);
    w->alignment = alignment;
    return TQ_OK;
}

/* Add or replace pair `key` with a copy of the serialized value. */
tq_status tq_gguf_writer_set_raw(tq_gguf_writer *w, const char *key, int type, const void *val,
                                 size_t len)
{
    if (!w || !key || !*key || (!val && len) || type < 0 || type >= TQ_GGUF_VTYPE_COUNT ||
        w->begun)
        return TQ_FAIL(TQ_E_ARG, "gguf writer: bad metadata pair '%s'", key ? key : "(null)");
    uint8_t *v = tq_malloc(len ? len : 1);
    if (!v)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    if (len)
        memcpy(v, val, len);
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            tq_free(w->kv[i].val);
            w->kv[i].val = v;
            w->kv[i].len = len;
            w->kv[i].type = (uint32_t)type;
            return TQ_OK;
        }
    if (w->n_kv == w->cap_kv) {
        const int64_t nc = w->cap_kv ? 2 * w->cap_kv : 64;
        wkv *nk = tq_realloc(w->kv, (size_t)nc * sizeof(*nk));
        if (!nk) {
            tq_free(v);
            return TQ_FAIL(TQ_E_NOMEM, "out of memory");
        }
        w->kv = nk;
        w->cap_kv = nc;
    }
    wkv *k = &w->kv[w->n_kv];
    if (!(k->key = strdup(key))) {
        tq_free(v);
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    }
    k->type = (uint32_t)type;
    k->val = v;
    k->len = len;
    w->n_kv++;
    return TQ_OK;
}

tq_status tq_gguf_writer_copy_kv(tq_gguf_writer *w, const tq_gguf *src, int64_t i)
{
    const uint8_t *p;
    size_t len;
    tq_status st = tq_gguf_kv_raw(src, i, &p, &len);
    if (st)
        return st;
    return tq_gguf_writer_set_raw(w, tq_gguf_kv_key(src, i), tq_gguf_kv_type(src, i), p, len);
}

tq_status tq_gguf_writer_set_str(tq_gguf_writer *w, const char *key, const char *value)
{
    const size_t n = strlen(value);
    uint8_t *b = tq_malloc(8 + n);
    if (!b)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    tq_wr64(b, n);
    memcpy(b + 8, value, n);
    const tq_status st = tq_gguf_writer_set_raw(w, key, TQ_GGUF_STRING, b, 8 + n);
    tq_free(b);
    return st;
}

tq_status tq_gguf_writer_set_u32(tq_gguf_writer *w, const char *key, uint32_t value)
{
    uint8_t b[4];
    tq_wr32(b, value);
    return tq_gguf_writer_set_raw(w, key, TQ_GGUF_U32, b, 4);
}

tq_status tq_gguf_writer_set_u64(tq_gguf_writer *w, const char *key, uint64_t value)
{
    uint8_t b[8];
    tq_wr64(b, value);
    return tq_gguf_writer_set_raw(w, key, TQ_GGUF_U64, b, 8);
}

tq_status tq_gguf_writer_set_bool(tq_gguf_writer *w, const char *key, int value)
{
    const uint8_t b = value ? 1 : 0;
    return tq_gguf_writer_set_raw(w, key, TQ_GGUF_BOOL, &b, 1);
}

tq_status tq_gguf_writer_add_tensor(tq_gguf_writer *w, const char *name, int type, int n_dims,
                                    const int64_t *ne)
{
    if (!w || !name || !*name || !ne || n_dims < 1 || n_dims > 4 || w->begun)
        return TQ_FAIL(TQ_E_ARG, "gguf writer: bad tensor '%s'", name ? name : "(null)");
    int64_t n = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] < 1 || n > INT64_MAX / ne[d])
            return TQ_FAIL(TQ_E_ARG, "gguf writer: tensor '%s': bad dimension %lld", name,
                           (long long)ne[d]);
        n *= ne[d];
    }
    if (ne[0] % tq_ggml_block_size(type) != 0 && tq_ggml_block_size(type) > 0)
        return TQ_FAIL(TQ_E_ARG, "gguf writer: tensor '%s': rows of %lld are not a multiple of "
                       "%s's block of %lld", name, (long long)ne[0], tq_ggml_type_name(type),
                       (long long)tq_ggml_block_size(type));
    size_t nb;
    tq_status st = tq_ggml_nbytes(type, n, &nb);
    if (st)
        return st;
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return TQ_FAIL(TQ_E_ARG, "gguf writer: duplicate tensor name '%s'", name);
    if (w->n_t == w->cap_t) {
        const int64_t nc = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *nt = tq_realloc(w->t, (size_t)nc * sizeof(*nt));
        if (!nt)
            return TQ_FAIL(TQ_E_NOMEM, "out of memory");
        w->t = nt;
        w->cap_t = nc;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof(*t));
    if (!(t->name = strdup(name)))
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < 4; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->offset = w->data_size;
    t->nbytes = nb;
    const size_t a = w->alignment;
    w->data_size += (nb + a - 1) / a * a;
    w->n_t++;
    return TQ_OK;
}

/* Header: magic, version 3, counts, pairs, tensor infos, padding. Built in memory (the
 * tokenizer arrays are the largest part: a few MB). */
static tq_status write_header(tq_gguf_writer *w)
{
    size_t size = 24;
    for (int64_t i = 0; i < w->n_kv; i++)
        size += 8 + strlen(w->kv[i].key) + 4 + w->kv[i].len;
    for (int64_t i = 0; i < w->n_t; i++)
        size += 8 + strlen(w->t[i].name) + 4 + 8 * (size_t)w->t[i].n_dims + 4 + 8;
    const size_t padded = (size + w->alignment - 1) / w->alignment * w->alignment;
    uint8_t *b = tq_calloc(1, padded);
    if (!b)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory for the header (%zu bytes)", w->path,
                       padded);
    uint8_t *p = b;
    memcpy(p, "GGUF", 4);
    tq_wr32(p + 4, 3);
    tq_wr64(p + 8, (uint64_t)w->n_t);
    tq_wr64(p + 16, (uint64_t)w->n_kv);
    p += 24;
    for (int64_t i = 0; i < w->n_kv; i++) {
        const size_t kl = strlen(w->kv[i].key);
        tq_wr64(p, kl);
        memcpy(p + 8, w->kv[i].key, kl);
        p += 8 + kl;
        tq_wr32(p, w->kv[i].type);
        p += 4;
        memcpy(p, w->kv[i].val, w->kv[i].len);
        p += w->kv[i].len;
    }
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        const size_t nl = strlen(t->name);
        tq_wr64(p, nl);
        memcpy(p + 8, t->name, nl);
        p += 8 + nl;
        tq_wr32(p, (uint32_t)t->n_dims);
        p += 4;
        for (int d = 0; d < t->n_dims; d++, p += 8)
            tq_wr64(p, (uint64_t)t->ne[d]);
        tq_wr32(p, (uint32_t)t->type);
        tq_wr64(p + 4, t->offset);
        p += 12;
    }
    const tq_status st = wr_all(w, b, padded);
    tq_free(b);
    return st;
}

tq_status tq_gguf_writer_begin(tq_gguf_writer *w)
{
    if (!w || w->begun)
        return TQ_FAIL(TQ_E_ARG, "gguf writer: begin called twice");
    tq_status st = tq_atomic_file_open(w->path, &w->af);
    if (st)
        return st;
    w->fd = tq_atomic_file_fd(w->af);
    w->begun = 1;
    return write_header(w);
}

tq_status tq_gguf_writer_write(tq_gguf_writer *w, const void *data, size_t n)
{
    if (!w || !w->begun || w->failed)
        return TQ_FAIL(TQ_E_ARG, "gguf writer: write before begin or after a failure");
    while (n > 0) {
        if (w->next >= w->n_t)
            return TQ_FAIL(TQ_E_ARG, "%s: %zu bytes more than the declared tensors hold",
                           w->path, n);
        wtensor *t = &w->t[w->next];
        const size_t take = n < t->nbytes - w->written ? n : t->nbytes - w->written;
        tq_status st = wr_all(w, data, take);
        if (st)
            return st;
        data = (const uint8_t *)data + take;
        n -= take;
        w->written += take;
        if (w->written == t->nbytes) {
            static const uint8_t zeros[64];
            size_t pad = (w->alignment - t->nbytes % w->alignment) % w->alignment;
            while (pad > 0) {
                const size_t k = pad < sizeof(zeros) ? pad : sizeof(zeros);
                if ((st = wr_all(w, zeros, k)))
                    return st;
                pad -= k;
            }
            w->next++;
            w->written = 0;
        }
    }
    return TQ_OK;
}

tq_status tq_gguf_writer_finish(tq_gguf_writer *w)
{
    if (!w || !w->begun || w->failed)
        return TQ_FAIL(TQ_E_ARG, "gguf writer: finish before begin or after a failure");
    if (w->next != w->n_t)
        return TQ_FAIL(TQ_E_ARG, "%s: only %lld of %lld tensors written", w->path,
                       (long long)w->next, (long long)w->n_t);
    tq_atomic_file *af = w->af;
    w->af = NULL;
    w->failed = 1; /* nothing more can be written */
    return tq_atomic_file_commit(af);
}
