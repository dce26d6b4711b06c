/* gguf.c -- GGUF v2/v3 reader over a read-only mapping.
 *
 * Layout (docs/FORMAT.md "GGUF"): "GGUF" magic, u32 version, u64 tensor count, u64 metadata
 * count; metadata pairs (string key, u32 value type, value); tensor infos (string name, u32
 * n_dims, u64 ne[n_dims] with ne[0] contiguous, u32 ggml type, u64 offset); padding to
 * general.alignment (default 32); the data section. Strings are u64 length + bytes, no NUL.
 * Every read is bounds-checked, every size product goes through checked math, and every tensor
 * must lie inside the file, aligned, and not overlap another. The header (metadata + tensor
 * infos) is parsed from a heap copy read with pread, never from the mapping, so a file truncated
 * by another process while we hold it gives TQ_E_IO instead of SIGBUS (io_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "io/io_internal.h"

#define GGUF_MAX_DEPTH 8   /* nesting of arrays of arrays                           */
#define GGUF_MAX_NAME 1024 /* tensor names (ggml itself allows 63 bytes)            */
#define GGUF_MAX_KEY 65535 /* metadata keys                                         */

typedef struct gguf_kv {
    char *key;
    int type;
    int arr_type;       /* element type for arrays, -1 otherwise                      */
    int64_t n;          /* array length (1 for scalars)                               */
    size_t off;         /* file offset of the value (first element for arrays)        */
    uint64_t *str_offs; /* string arrays: file offset of each element's length field  */
    char *str;          /* scalar strings: NUL-terminated copy                         */
    size_t str_len;
    size_t val_start;   /* the serialized value: [val_start, val_end) of the header     */
    size_t val_end;     /* (arrays: from the element type field; strings: length field) */
} gguf_kv;

typedef struct gguf_tensor {
    char *name;
    int type;
    int n_dims;
    int64_t ne[4];
    int64_t n_elem;
    uint64_t offset;
    size_t nbytes;
} gguf_tensor;

struct tq_gguf {
    tq_map map;
    const uint8_t *base; /* the header bytes [0, hdr_len): a heap copy, or the memory image */
    size_t hdr_len;
    uint8_t *hdr;        /* owned heap copy (files) */
    int more;            /* parse ran past hdr_len while the file is longer: read more, retry */
    size_t size;         /* file size */
    char *path;
    uint32_t version;
    size_t alignment;
    size_t data_off;
    int64_t n_kv;
    gguf_kv *kv;
    int64_t n_tensors;
    gguf_tensor *tensors;
};

/* ---- bounded cursor ---------------------------------------------------------------------- */
typedef struct cursor {
    const uint8_t *p;
    size_t size; /* bytes at p (the header read so far) */
    size_t pos;
    const char *name;
    tq_gguf *g; /* g->more is set when a bound fails only because less than the file was read */
} cursor;

/* A bound failed at the end of the buffer: `n` more bytes were needed from c->pos (SIZE_MAX:
 * more than can be counted). If the file itself has them, read more of it and parse again; if
 * not, the failure stands. */
static void short_buf(cursor *c, size_t n)
{
    if (c->g && c->size < c->g->size && c->pos <= c->g->size && n <= c->g->size - c->pos)
        c->g->more = 1;
}

/* The file's size, for messages (the cursor may span only the part read so far). */
static size_t file_size(const cursor *c)
{
    return c->g ? c->g->size : c->size;
}

static tq_status need(cursor *c, size_t n, const char *what)
{
    if (n > c->size - c->pos) {
        short_buf(c, n);
        return TQ_FAIL(TQ_E_FORMAT, "%s: truncated: %s at offset %zu needs %zu bytes, file has %zu",
                       c->name, what, c->pos, n, file_size(c));
    }
    return TQ_OK;
}

static tq_status rd_u32(cursor *c, uint32_t *v, const char *what)
{
    tq_status st = need(c, 4, what);
    if (st)
        return st;
    *v = tq_rd32(c->p + c->pos);
    c->pos += 4;
    return TQ_OK;
}

static tq_status rd_u64(cursor *c, uint64_t *v, const char *what)
{
    tq_status st = need(c, 8, what);
    if (st)
        return st;
    *v = tq_rd64(c->p + c->pos);
    c->pos += 8;
    return TQ_OK;
}

/* A string: sets *s to its bytes inside the buffer and *len to its length. */
static tq_status rd_str(cursor *c, const uint8_t **s, uint64_t *len, const char *what)
{
    tq_status st = rd_u64(c, len, what);
    if (st)
        return st;
    if (*len > c->size - c->pos) {
        short_buf(c, *len > SIZE_MAX ? SIZE_MAX : (size_t)*len);
        return TQ_FAIL(TQ_E_FORMAT,
                       "%s: %s at offset %zu: string length %llu runs past the end "
                       "of the file (%zu bytes)",
                       c->name, what, c->pos - 8, (unsigned long long)*len, file_size(c));
    }
    *s = c->p + c->pos;
    c->pos += (size_t)*len;
    return TQ_OK;
}

static char *dup_n(const uint8_t *s, size_t n)
{
    char *r = tq_malloc(n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = 0;
    }
    return r;
}

static size_t scalar_size(int t)
{
    switch (t) {
    case TQ_GGUF_U8:
    case TQ_GGUF_I8:
    case TQ_GGUF_BOOL:
        return 1;
    case TQ_GGUF_U16:
    case TQ_GGUF_I16:
        return 2;
    case TQ_GGUF_U32:
    case TQ_GGUF_I32:
    case TQ_GGUF_F32:
        return 4;
    case TQ_GGUF_U64:
    case TQ_GGUF_I64:
    case TQ_GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

static const char *vtype_name(int t)
{
    static const char *names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    return t >= 0 && t < TQ_GGUF_VTYPE_COUNT ? names[t] : "?";
}

/* Skip one value of type t (validating it); depth counts array nesting. */
static tq_status skip_value(cursor *c, int t, int depth, const char *key)
{
    tq_status st;
    size_t sz = scalar_size(t);
    if (sz) {
        if ((st = need(c, sz, key)))
            return st;
        if (t == TQ_GGUF_BOOL && c->p[c->pos] > 1)
            return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s': bool value %u is not 0 or 1", c->name, key,
                           c->p[c->pos]);
        c->pos += sz;
        return TQ_OK;
    }
    if (t == TQ_GGUF_STRING) {
        const uint8_t *s;
        uint64_t len;
        return rd_str(c, &s, &len, key);
    }
    if (t == TQ_GGUF_ARRAY) {
        uint32_t at;
        uint64_t n;
        if (depth >= GGUF_MAX_DEPTH)
            return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s': arrays nested deeper than %d", c->name, key,
                           GGUF_MAX_DEPTH);
        if ((st = rd_u32(c, &at, key)) || (st = rd_u64(c, &n, key)))
            return st;
        if (at >= TQ_GGUF_VTYPE_COUNT)
            return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s': unknown array element type %u (valid 0..12)",
                           c->name, key, at);
        const size_t esz = scalar_size((int)at);
        const size_t min = esz ? esz : (at == TQ_GGUF_STRING ? 8 : 12);
        if (n > (c->size - c->pos) / min) {
            short_buf(c, n > SIZE_MAX / min ? SIZE_MAX : (size_t)n * min);
            return TQ_FAIL(TQ_E_FORMAT,
                           "%s: key '%s': array of %llu %s elements runs past the end "
                           "of the file",
                           c->name, key, (unsigned long long)n, vtype_name((int)at));
        }
        if (esz && at != TQ_GGUF_BOOL) {
            c->pos += (size_t)n * esz;
            return TQ_OK;
        }
        for (uint64_t i = 0; i < n; i++)
            if ((st = skip_value(c, (int)at, depth + 1, key)))
                return st;
        return TQ_OK;
    }
    return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s': unknown value type %d (valid 0..12)", c->name, key,
                   t);
}

static tq_status parse_kv_value(tq_gguf *g, cursor *c, gguf_kv *kv);

static tq_status parse_kv(tq_gguf *g, cursor *c, gguf_kv *kv)
{
    const tq_status st = parse_kv_value(g, c, kv);
    if (st == TQ_OK)
        kv->val_end = c->pos;
    return st;
}

static tq_status parse_kv_value(tq_gguf *g, cursor *c, gguf_kv *kv)
{
    const uint8_t *s;
    uint64_t len;
    uint32_t t;
    tq_status st;

    if ((st = rd_str(c, &s, &len, "metadata key")))
        return st;
    if (len == 0 || len > GGUF_MAX_KEY)
        return TQ_FAIL(TQ_E_FORMAT, "%s: metadata key at offset %zu has length %llu (valid 1..%d)",
                       g->path, c->pos - (size_t)len - 8, (unsigned long long)len, GGUF_MAX_KEY);
    if (memchr(s, 0, (size_t)len))
        return TQ_FAIL(TQ_E_FORMAT, "%s: metadata key at offset %zu contains a NUL byte", g->path,
                       c->pos - (size_t)len);
    if (!(kv->key = dup_n(s, (size_t)len)))
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", g->path);
    if ((st = rd_u32(c, &t, kv->key)))
        return st;
    if (t >= TQ_GGUF_VTYPE_COUNT)
        return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s': unknown value type %u (valid 0..12)", g->path,
                       kv->key, t);
    kv->type = (int)t;
    kv->arr_type = -1;
    kv->n = 1;
    kv->off = c->pos;
    kv->val_start = c->pos;
    if (t == TQ_GGUF_STRING) {
        if ((st = rd_str(c, &s, &len, kv->key)))
            return st;
        kv->str_len = (size_t)len;
        if (!(kv->str = dup_n(s, (size_t)len)))
            return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", g->path);
        return TQ_OK;
    }
    if (t == TQ_GGUF_ARRAY) {
        const size_t start = c->pos;
        uint32_t at;
        uint64_t n;
        if ((st = skip_value(c, TQ_GGUF_ARRAY, 0, kv->key)))
            return st;
        at = tq_rd32(g->base + start);
        n = tq_rd64(g->base + start + 4);
        kv->arr_type = (int)at;
        kv->n = (int64_t)n; /* n <= file size, so it fits */
        kv->off = start + 12;
        if (at == TQ_GGUF_STRING) {
            cursor e = {g->base, g->hdr_len, kv->off, g->path, g};
            if (!(kv->str_offs = tq_malloc((size_t)(n ? n : 1) * sizeof(uint64_t))))
                return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", g->path);
            for (uint64_t i = 0; i < n; i++) {
                kv->str_offs[i] = e.pos;
                if ((st = rd_str(&e, &s, &len, kv->key))) /* already validated */
                    return st;
            }
        }
        return TQ_OK;
    }
    return skip_value(c, (int)t, 0, kv->key);
}

static tq_status parse_tensor(tq_gguf *g, cursor *c, gguf_tensor *ti, int64_t idx)
{
    const uint8_t *s;
    uint64_t len;
    uint32_t nd;
    uint32_t type;
    tq_status st;

    if ((st = rd_str(c, &s, &len, "tensor name")))
        return st;
    if (len == 0 || len > GGUF_MAX_NAME || memchr(s, 0, (size_t)len))
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor %lld: bad name (length %llu, valid 1..%d, no NUL)",
                       g->path, (long long)idx, (unsigned long long)len, GGUF_MAX_NAME);
    if (!(ti->name = dup_n(s, (size_t)len)))
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", g->path);
    if ((st = rd_u32(c, &nd, ti->name)))
        return st;
    if (nd < 1 || nd > 4)
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s': %u dimensions (valid 1..4)", g->path,
                       ti->name, nd);
    ti->n_dims = (int)nd;
    ti->n_elem = 1;
    for (int d = 0; d < 4; d++)
        ti->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t v;
        int64_t prod;
        if ((st = rd_u64(c, &v, ti->name)))
            return st;
        if (v > (uint64_t)INT64_MAX || __builtin_mul_overflow(ti->n_elem, (int64_t)v, &prod))
            return TQ_FAIL(TQ_E_FORMAT,
                           "%s: tensor '%s': dimension %u = %llu overflows the "
                           "element count",
                           g->path, ti->name, d, (unsigned long long)v);
        ti->ne[d] = (int64_t)v;
        ti->n_elem = prod;
    }
    if ((st = rd_u32(c, &type, ti->name)) || (st = rd_u64(c, &ti->offset, ti->name)))
        return st;
    if (tq_ggml_type_size((int)type) == 0)
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s': unknown ggml type %u", g->path, ti->name,
                       type);
    ti->type = (int)type;
    if (ti->ne[0] % tq_ggml_block_size(ti->type))
        return TQ_FAIL(TQ_E_FORMAT,
                       "%s: tensor '%s': row length %lld is not a multiple of the %s "
                       "block size %lld",
                       g->path, ti->name, (long long)ti->ne[0], tq_ggml_type_name(ti->type),
                       (long long)tq_ggml_block_size(ti->type));
    if (tq_ggml_nbytes(ti->type, ti->n_elem, &ti->nbytes))
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s': byte size of %lld %s elements overflows",
                       g->path, ti->name, (long long)ti->n_elem, tq_ggml_type_name(ti->type));
    return TQ_OK;
}

static int cmp_offset(const void *a, const void *b)
{
    const gguf_tensor *x = *(const gguf_tensor *const *)a;
    const gguf_tensor *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first name that occurs twice among n names (NULL if none); O(n log n). */
static tq_status find_duplicate(char **names, int64_t n, const char **dup)
{
    const char **v;
    *dup = NULL;
    if (n < 2)
        return TQ_OK;
    if (!(v = tq_malloc((size_t)n * sizeof(*v))))
        return TQ_E_NOMEM;
    memcpy(v, names, (size_t)n * sizeof(*v));
    qsort(v, (size_t)n, sizeof(*v), cmp_str);
    for (int64_t i = 1; i < n && !*dup; i++)
        if (!strcmp(v[i - 1], v[i]))
            *dup = v[i];
    tq_free(v);
    return TQ_OK;
}

static tq_status check_names(tq_gguf *g)
{
    const int64_t n = g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors;
    char **names = tq_malloc((size_t)(n ? n : 1) * sizeof(char *));
    const char *dup = NULL;
    tq_status st = TQ_OK;
    if (!names)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", g->path);
    for (int64_t i = 0; i < g->n_kv; i++)
        names[i] = g->kv[i].key;
    if (find_duplicate(names, g->n_kv, &dup))
        st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", g->path);
    else if (dup)
        st = TQ_FAIL(TQ_E_FORMAT, "%s: duplicate metadata key '%s'", g->path, dup);
    for (int64_t i = 0; !st && i < g->n_tensors; i++)
        names[i] = g->tensors[i].name;
    if (!st && find_duplicate(names, g->n_tensors, &dup))
        st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", g->path);
    else if (!st && dup)
        st = TQ_FAIL(TQ_E_FORMAT, "%s: duplicate tensor name '%s'", g->path, dup);
    tq_free(names);
    return st;
}

static tq_status check_layout(tq_gguf *g)
{
    const size_t avail = g->size - g->data_off;
    gguf_tensor **order;
    tq_status st = TQ_OK;

    for (int64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return TQ_FAIL(TQ_E_FORMAT,
                           "%s: tensor '%s': data offset %llu is not a multiple of "
                           "the alignment %zu",
                           g->path, t->name, (unsigned long long)t->offset, g->alignment);
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return TQ_FAIL(TQ_E_FORMAT,
                           "%s: tensor '%s': data [%llu, +%zu) lies past the end of "
                           "the file (data section has %zu bytes)",
                           g->path, t->name, (unsigned long long)t->offset, t->nbytes, avail);
    }
    if (g->n_tensors < 2)
        return TQ_OK;
    if (!(order = tq_malloc((size_t)g->n_tensors * sizeof(*order))))
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", g->path);
    for (int64_t i = 0; i < g->n_tensors; i++)
        order[i] = &g->tensors[i];
    qsort(order, (size_t)g->n_tensors, sizeof(*order), cmp_offset);
    for (int64_t i = 1; i < g->n_tensors; i++)
        if (order[i - 1]->offset + order[i - 1]->nbytes > order[i]->offset) {
            st = TQ_FAIL(TQ_E_FORMAT, "%s: tensors '%s' and '%s' overlap", g->path,
                         order[i - 1]->name, order[i]->name);
            break;
        }
    tq_free(order);
    return st;
}

static tq_status parse(tq_gguf *g)
{
    cursor c = {g->base, g->hdr_len, 0, g->path, g};
    uint32_t version;
    uint64_t n_tensors;
    uint64_t n_kv;
    tq_status st;

    if (g->hdr_len < 4 || memcmp(g->base, "GGUF", 4))
        return TQ_FAIL(TQ_E_FORMAT, "%s: bad magic (not a GGUF file: expected \"GGUF\")", g->path);
    c.pos = 4;
    if ((st = rd_u32(&c, &version, "version")))
        return st;
    if (version == 0x03000000u || version == 0x02000000u)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: big-endian GGUF is not supported", g->path);
    if (version != 2 && version != 3)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: GGUF version %u is not supported (valid 2, 3)",
                       g->path, version);
    g->version = version;
    if ((st = rd_u64(&c, &n_tensors, "tensor count")) || (st = rd_u64(&c, &n_kv, "kv count")))
        return st;
    if (n_kv > (g->size - c.pos) / 13)
        return TQ_FAIL(TQ_E_FORMAT, "%s: metadata count %llu cannot fit in a %zu-byte file",
                       g->path, (unsigned long long)n_kv, g->size);
    if (n_tensors > (g->size - c.pos) / 32)
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor count %llu cannot fit in a %zu-byte file", g->path,
                       (unsigned long long)n_tensors, g->size);
    g->kv = tq_calloc((size_t)(n_kv ? n_kv : 1), sizeof(*g->kv));
    g->tensors = tq_calloc((size_t)(n_tensors ? n_tensors : 1), sizeof(*g->tensors));
    if (!g->kv || !g->tensors)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", g->path);

    g->alignment = 32;
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        g->n_kv = (int64_t)i + 1; /* so that free() sees the partial entry */
        if ((st = parse_kv(g, &c, kv)))
            return st;
        if (!strcmp(kv->key, "general.alignment")) {
            uint32_t a;
            if (kv->type != TQ_GGUF_U32)
                return TQ_FAIL(TQ_E_FORMAT, "%s: general.alignment has type %s (expected u32)",
                               g->path, vtype_name(kv->type));
            a = tq_rd32(g->base + kv->off);
            if (a == 0 || (a & (a - 1)))
                return TQ_FAIL(TQ_E_FORMAT, "%s: general.alignment = %u is not a power of two",
                               g->path, a);
            g->alignment = a;
        }
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        g->n_tensors = (int64_t)i + 1;
        if ((st = parse_tensor(g, &c, &g->tensors[i], (int64_t)i)))
            return st;
    }
    g->data_off = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (n_tensors && g->data_off > g->size)
        return TQ_FAIL(TQ_E_FORMAT, "%s: truncated: data section starts at %zu, file has %zu bytes",
                       g->path, g->data_off, g->size);
    if (g->data_off > g->size)
        g->data_off = g->size;
    if ((st = check_names(g)))
        return st;
    return check_layout(g);
}

/* Free what parse() built, so that it can run again over a longer header. */
static void clear_parsed(tq_gguf *g)
{
    for (int64_t i = 0; i < g->n_kv; i++) {
        tq_free(g->kv[i].key);
        tq_free(g->kv[i].str);
        tq_free(g->kv[i].str_offs);
    }
    for (int64_t i = 0; i < g->n_tensors; i++)
        tq_free(g->tensors[i].name);
    tq_free(g->kv);
    tq_free(g->tensors);
    g->kv = NULL;
    g->tensors = NULL;
    g->n_kv = g->n_tensors = 0;
}

#define GGUF_HDR_FIRST ((size_t)4 << 20) /* first header read; x4 while the parse needs more */
#define GGUF_HDR_MAX ((size_t)1 << 30)  /* metadata + tensor infos beyond this are refused */

static tq_status open_common(tq_gguf *g, const char *name, tq_gguf **out)
{
    tq_status st;
    if (!(g->path = tq_strdup(name ? name : "(memory)"))) {
        tq_gguf_free(g);
        return TQ_FAIL(TQ_E_NOMEM, "gguf: out of memory");
    }
    if (g->map.fd < 0) { /* a memory image: parse it in place */
        g->base = g->map.data;
        g->hdr_len = g->size;
        st = parse(g);
    } else { /* a file: parse a heap copy of its start, longer until the header fits */
        size_t want = g->size < GGUF_HDR_FIRST ? g->size : GGUF_HDR_FIRST;
        for (;;) {
            clear_parsed(g);
            tq_free(g->hdr);
            g->base = g->hdr = tq_malloc(want ? want : 1);
            g->hdr_len = want;
            g->more = 0;
            if (!g->hdr) {
                st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory for a %zu-byte header", g->path,
                             want);
                break;
            }
            if ((st = tq_map_read(&g->map, 0, g->hdr, want)) || (st = tq_map_check(&g->map)))
                break;
            st = parse(g);
            if (!st || !g->more || want == g->size)
                break;
            if (want >= GGUF_HDR_MAX) {
                st = TQ_FAIL(TQ_E_UNSUPPORTED,
                             "%s: the metadata and tensor infos take more than %zu MiB (a GGUF "
                             "header is normally a few MiB); not read",
                             g->path, GGUF_HDR_MAX >> 20);
                break;
            }
            want = want > g->size / 4 ? g->size : want * 4;
            if (want > GGUF_HDR_MAX)
                want = GGUF_HDR_MAX;
        }
    }
    if (st) {
        tq_gguf_free(g);
        return st;
    }
    *out = g;
    return TQ_OK;
}

tq_status tq_gguf_open(const char *path, tq_gguf **out)
{
    tq_gguf *g;
    tq_status st;
    if (!out || !path)
        return TQ_FAIL(TQ_E_ARG, "tq_gguf_open: NULL argument");
    *out = NULL;
    if (!(g = tq_calloc(1, sizeof(*g))))
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    if ((st = tq_map_file(path, &g->map))) {
        tq_free(g);
        return st;
    }
    g->size = g->map.size;
    return open_common(g, path, out);
}

tq_status tq_gguf_open_memory(const void *data, size_t size, const char *name, tq_gguf **out)
{
    tq_gguf *g;
    if (!out || (!data && size))
        return TQ_FAIL(TQ_E_ARG, "tq_gguf_open_memory: NULL argument");
    *out = NULL;
    if (!(g = tq_calloc(1, sizeof(*g))))
        return TQ_FAIL(TQ_E_NOMEM, "gguf: out of memory");
    tq_map_memory(&g->map, data, size);
    g->size = size;
    return open_common(g, name, out);
}

void tq_gguf_free(tq_gguf *g)
{
    if (!g)
        return;
    clear_parsed(g);
    tq_free(g->hdr);
    tq_free(g->path);
    tq_unmap_file(&g->map);
    tq_free(g);
}

uint32_t tq_gguf_version(const tq_gguf *g)
{
    return g->version;
}
size_t tq_gguf_alignment(const tq_gguf *g)
{
    return g->alignment;
}
size_t tq_gguf_data_offset(const tq_gguf *g)
{
    return g->data_off;
}
const char *tq_gguf_path(const tq_gguf *g)
{
    return g->path;
}
int64_t tq_gguf_n_kv(const tq_gguf *g)
{
    return g ? g->n_kv : 0;
}

const char *tq_gguf_kv_key(const tq_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

int64_t tq_gguf_find_key(const tq_gguf *g, const char *key)
{
    if (!g || !key)
        return -1;
    for (int64_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key))
            return i;
    return -1;
}

int tq_gguf_kv_type(const tq_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_kv ? g->kv[i].type : -1;
}

int tq_gguf_kv_arr_type(const tq_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_kv ? g->kv[i].arr_type : -1;
}

int64_t tq_gguf_kv_arr_len(const tq_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_kv && g->kv[i].type == TQ_GGUF_ARRAY ? g->kv[i].n : 0;
}

/* ---- typed getters ------------------------------------------------------------------------ */
static tq_status find(const tq_gguf *g, const char *key, const gguf_kv **out)
{
    const int64_t i = tq_gguf_find_key(g, key);
    if (i < 0)
        return TQ_FAIL(TQ_E_ARG, "%s: metadata key '%s' not found", g ? g->path : "gguf",
                       key ? key : "(null)");
    *out = &g->kv[i];
    return TQ_OK;
}

/* Integer element of type t at p; *is_neg set for negative signed values. 0 = not an integer. */
static int load_int(int t, const uint8_t *p, int64_t *s, uint64_t *u)
{
    switch (t) {
    case TQ_GGUF_U8:
    case TQ_GGUF_BOOL:
        *u = p[0];
        *s = (int64_t)*u;
        return 1;
    case TQ_GGUF_I8:
        *s = (int8_t)p[0];
        break;
    case TQ_GGUF_U16:
        *u = tq_rd16(p);
        *s = (int64_t)*u;
        return 1;
    case TQ_GGUF_I16:
        *s = (int16_t)tq_rd16(p);
        break;
    case TQ_GGUF_U32:
        *u = tq_rd32(p);
        *s = (int64_t)*u;
        return 1;
    case TQ_GGUF_I32:
        *s = (int32_t)tq_rd32(p);
        break;
    case TQ_GGUF_U64:
        *u = tq_rd64(p);
        *s = (int64_t)*u;
        return 2; /* 2: unsigned 64-bit */
    case TQ_GGUF_I64:
        *s = (int64_t)tq_rd64(p);
        break;
    default:
        return 0;
    }
    *u = (uint64_t)*s;
    return *s < 0 ? 3 : 1; /* 3: negative */
}

static int load_float(int t, const uint8_t *p, double *v)
{
    int64_t s;
    uint64_t u;
    int k;
    if (t == TQ_GGUF_F32) {
        *v = tq_bits_f32(tq_rd32(p));
        return 1;
    }
    if (t == TQ_GGUF_F64) {
        uint64_t b = tq_rd64(p);
        memcpy(v, &b, 8);
        return 1;
    }
    if (!(k = load_int(t, p, &s, &u)))
        return 0;
    *v = k == 2 ? (double)u : (double)s;
    return 1;
}

tq_status tq_gguf_get_i64(const tq_gguf *g, const char *key, int64_t *out)
{
    const gguf_kv *kv;
    tq_status st = find(g, key, &kv);
    int64_t s;
    uint64_t u;
    int k;
    if (st)
        return st;
    k = load_int(kv->type, g->base + kv->off, &s, &u);
    if (!k || (k == 2 && u > (uint64_t)INT64_MAX))
        return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s' has type %s, expected an integer", g->path, key,
                       vtype_name(kv->type));
    *out = s;
    return TQ_OK;
}

tq_status tq_gguf_get_u32(const tq_gguf *g, const char *key, uint32_t *out)
{
    int64_t v = 0;
    tq_status st = tq_gguf_get_i64(g, key, &v);
    if (st)
        return st;
    if (v < 0 || v > (int64_t)UINT32_MAX)
        return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s' = %lld does not fit in u32", g->path, key,
                       (long long)v);
    *out = (uint32_t)v;
    return TQ_OK;
}

tq_status tq_gguf_get_f32(const tq_gguf *g, const char *key, float *out)
{
    const gguf_kv *kv;
    tq_status st = find(g, key, &kv);
    double v;
    if (st)
        return st;
    if (!load_float(kv->type, g->base + kv->off, &v))
        return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s' has type %s, expected a number", g->path, key,
                       vtype_name(kv->type));
    *out = (float)v;
    return TQ_OK;
}

tq_status tq_gguf_get_bool(const tq_gguf *g, const char *key, int *out)
{
    const gguf_kv *kv;
    tq_status st = find(g, key, &kv);
    if (st)
        return st;
    if (kv->type != TQ_GGUF_BOOL)
        return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s' has type %s, expected bool", g->path, key,
                       vtype_name(kv->type));
    *out = g->base[kv->off] != 0;
    return TQ_OK;
}

tq_status tq_gguf_get_str(const tq_gguf *g, const char *key, const char **out, size_t *len)
{
    const gguf_kv *kv;
    tq_status st = find(g, key, &kv);
    if (st)
        return st;
    if (kv->type != TQ_GGUF_STRING)
        return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s' has type %s, expected string", g->path, key,
                       vtype_name(kv->type));
    *out = kv->str;
    if (len)
        *len = kv->str_len;
    return TQ_OK;
}

static tq_status find_arr(const tq_gguf *g, const char *key, const gguf_kv **out)
{
    tq_status st = find(g, key, out);
    if (st)
        return st;
    if ((*out)->type != TQ_GGUF_ARRAY)
        return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s' has type %s, expected an array", g->path, key,
                       vtype_name((*out)->type));
    return TQ_OK;
}

tq_status tq_gguf_get_arr(const tq_gguf *g, const char *key, int *elem_type, int64_t *n)
{
    const gguf_kv *kv;
    tq_status st = find_arr(g, key, &kv);
    if (st)
        return st;
    if (elem_type)
        *elem_type = kv->arr_type;
    if (n)
        *n = kv->n;
    return TQ_OK;
}

tq_status tq_gguf_get_arr_str(const tq_gguf *g, const char *key, int64_t i, const char **s,
                              size_t *len)
{
    const gguf_kv *kv;
    tq_status st = find_arr(g, key, &kv);
    if (st)
        return st;
    if (kv->arr_type != TQ_GGUF_STRING)
        return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s' is an array of %s, expected strings", g->path,
                       key, vtype_name(kv->arr_type));
    if (i < 0 || i >= kv->n)
        return TQ_FAIL(TQ_E_ARG, "%s: key '%s': index %lld out of range [0, %lld)", g->path, key,
                       (long long)i, (long long)kv->n);
    *len = (size_t)tq_rd64(g->base + kv->str_offs[i]);
    *s = (const char *)g->base + kv->str_offs[i] + 8;
    return TQ_OK;
}

tq_status tq_gguf_get_arr_data(const tq_gguf *g, const char *key, int *elem_type, const void **data,
                               int64_t *n)
{
    const gguf_kv *kv;
    tq_status st = find_arr(g, key, &kv);
    if (st)
        return st;
    if (!scalar_size(kv->arr_type))
        return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s' is an array of %s, expected numbers", g->path,
                       key, vtype_name(kv->arr_type));
    *elem_type = kv->arr_type;
    *data = g->base + kv->off;
    *n = kv->n;
    return TQ_OK;
}

tq_status tq_gguf_get_arr_f32(const tq_gguf *g, const char *key, float *dst, int64_t cap)
{
    const void *data;
    int t;
    int64_t n;
    tq_status st = tq_gguf_get_arr_data(g, key, &t, &data, &n);
    if (st)
        return st;
    if (n > cap)
        return TQ_FAIL(TQ_E_OVERFLOW, "%s: key '%s' has %lld elements, buffer holds %lld", g->path,
                       key, (long long)n, (long long)cap);
    for (int64_t i = 0; i < n; i++) {
        double v = 0;
        load_float(t, (const uint8_t *)data + (size_t)i * scalar_size(t), &v);
        dst[i] = (float)v;
    }
    return TQ_OK;
}

tq_status tq_gguf_get_arr_i32(const tq_gguf *g, const char *key, int32_t *dst, int64_t cap)
{
    const void *data;
    int t;
    int64_t n;
    tq_status st = tq_gguf_get_arr_data(g, key, &t, &data, &n);
    if (st)
        return st;
    if (n > cap)
        return TQ_FAIL(TQ_E_OVERFLOW, "%s: key '%s' has %lld elements, buffer holds %lld", g->path,
                       key, (long long)n, (long long)cap);
    for (int64_t i = 0; i < n; i++) {
        int64_t s;
        uint64_t u;
        const int k = load_int(t, (const uint8_t *)data + (size_t)i * scalar_size(t), &s, &u);
        if (!k || (k == 2 && u > INT32_MAX) || s < INT32_MIN || s > INT32_MAX)
            return TQ_FAIL(TQ_E_FORMAT, "%s: key '%s': element %lld is not an int32", g->path, key,
                           (long long)i);
        dst[i] = (int32_t)s;
    }
    return TQ_OK;
}

/* ---- tensors ------------------------------------------------------------------------------ */
int64_t tq_gguf_n_tensors(const tq_gguf *g)
{
    return g ? g->n_tensors : 0;
}

int64_t tq_gguf_find_tensor(const tq_gguf *g, const char *name)
{
    if (!g || !name)
        return -1;
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name))
            return i;
    return -1;
}

tq_status tq_gguf_tensor(const tq_gguf *g, int64_t i, tq_gguf_tensor_info *out)
{
    const gguf_tensor *t;
    if (!g || !out || i < 0 || i >= g->n_tensors)
        return TQ_FAIL(TQ_E_ARG, "gguf: tensor index %lld out of range", (long long)i);
    t = &g->tensors[i];
    memset(out, 0, sizeof(*out));
    out->name = t->name;
    out->type = t->type;
    out->n_dims = t->n_dims;
    for (int d = 0; d < 4; d++)
        out->ne[d] = t->ne[d];
    for (int d = 0; d < t->n_dims; d++)
        out->shape[d] = t->ne[t->n_dims - 1 - d];
    out->n_elem = t->n_elem;
    out->offset = t->offset;
    out->nbytes = t->nbytes;
    out->data = g->map.data ? g->map.data + g->data_off + t->offset : NULL;
    return TQ_OK;
}

tq_status tq_gguf_read_tensor(const tq_gguf *g, int64_t i, size_t off, void *dst, size_t n)
{
    const gguf_tensor *t = &g->tensors[i];
    if (off > t->nbytes || n > t->nbytes - off)
        return TQ_FAIL(TQ_E_ARG, "%s: tensor '%s': read [%zu, +%zu) past its %zu bytes", g->path,
                       t->name, off, n, t->nbytes);
    return tq_map_read(&g->map, g->data_off + (size_t)t->offset + off, dst, n);
}

tq_status tq_gguf_kv_raw(const tq_gguf *g, int64_t i, const uint8_t **p, size_t *len)
{
    if (!g || i < 0 || i >= g->n_kv)
        return TQ_FAIL(TQ_E_ARG, "tq_gguf_kv_raw: index %lld out of range", (long long)i);
    *p = g->base + g->kv[i].val_start;
    *len = g->kv[i].val_end - g->kv[i].val_start;
    return TQ_OK;
}

tq_status tq_gguf_check(const tq_gguf *g)
{
    return tq_map_check(&g->map);
}
