/* safetensors.c -- safetensors reader over read-only mappings: one file, or the shards listed by
 * a model.safetensors.index.json.
 *
 * File layout (docs/FORMAT.md "safetensors"): u64 little-endian header length N, N bytes of JSON
 * ({"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}}), then the
 * data section; offsets are relative to its start. We accept what the reference Python package
 * accepts: an object header, known dtypes, end - begin == prod(shape) * size, tensors that tile the
 * data section without gaps or overlap. json-c keeps the last of duplicate keys silently, so the
 * top-level keys are also counted in the raw text to reject duplicates. */
#include <dirent.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_internal.h"

#define ST_MAX_HEADER (100u << 20) /* the Python package's limit */

typedef struct st_tensor {
    char *name;
    int dtype;
    int n_dims;
    int64_t shape[TQ_ST_MAX_DIMS];
    int64_t n_elem;
    size_t nbytes;
    size_t begin;
    int shard;
} st_tensor;

typedef struct st_shard {
    char *path;
    tq_map map; /* the header is read from it with pread, never parsed in place (io_internal.h) */
    size_t size;
    size_t data_off;
} st_shard;

struct tq_st {
    int n_shards;
    st_shard *shards;
    int64_t n_tensors;
    int64_t cap_tensors;
    st_tensor *tensors;
    int64_t n_meta;
    char **meta_keys;
    char **meta_vals;
};

static const struct {
    const char *name;
    size_t size;
} dtypes[TQ_ST_DTYPE_COUNT] = {
    [TQ_ST_F32] = {"F32", 4},   [TQ_ST_F16] = {"F16", 2}, [TQ_ST_BF16] = {"BF16", 2},
    [TQ_ST_I8] = {"I8", 1},     [TQ_ST_U8] = {"U8", 1},   [TQ_ST_I32] = {"I32", 4},
    [TQ_ST_U32] = {"U32", 4},   [TQ_ST_I16] = {"I16", 2}, [TQ_ST_U16] = {"U16", 2},
    [TQ_ST_I64] = {"I64", 8},   [TQ_ST_U64] = {"U64", 8}, [TQ_ST_F64] = {"F64", 8},
    [TQ_ST_BOOL] = {"BOOL", 1},
};

const char *tq_st_dtype_name(int d)
{
    return d >= 0 && d < TQ_ST_DTYPE_COUNT ? dtypes[d].name : "?";
}

size_t tq_st_dtype_size(int d)
{
    return d >= 0 && d < TQ_ST_DTYPE_COUNT ? dtypes[d].size : 0;
}

static int dtype_from(const char *s)
{
    for (int d = 0; d < TQ_ST_DTYPE_COUNT; d++)
        if (!strcmp(s, dtypes[d].name))
            return d;
    return -1;
}

/* Number of keys of the top-level object in raw JSON text (-1 if it is not an object). */
static int64_t count_top_keys(const char *s, size_t n)
{
    int depth = 0;
    int64_t keys = 0;
    int expect_key = 0;
    for (size_t i = 0; i < n; i++) {
        const char ch = s[i];
        if (ch == '"') {
            if (depth == 1 && expect_key)
                keys++;
            expect_key = 0;
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\')
                    i++;
        } else if (ch == '{' || ch == '[') {
            depth++;
            if (depth == 1)
                expect_key = ch == '{';
        } else if (ch == '}' || ch == ']') {
            depth--;
        } else if (ch == ',' && depth == 1) {
            expect_key = 1;
        }
    }
    return keys;
}

static int cmp_begin(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a;
    const st_tensor *y = *(const st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static tq_status add_meta(tq_st *st, const char *path, json_object *meta)
{
    const int n = json_object_object_length(meta);
    int64_t k = st->n_meta;
    st->meta_keys = tq_realloc(st->meta_keys, (size_t)(k + n + 1) * sizeof(char *));
    st->meta_vals =
        st->meta_keys ? tq_realloc(st->meta_vals, (size_t)(k + n + 1) * sizeof(char *)) : NULL;
    if (!st->meta_keys || !st->meta_vals)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    json_object_object_foreach(meta, key, val)
    {
        if (!json_object_is_type(val, json_type_string))
            return TQ_FAIL(TQ_E_FORMAT, "%s: __metadata__ value of '%s' is not a string", path,
                           key);
        st->meta_keys[k] = tq_strdup(key);
        st->meta_vals[k] = tq_strdup(json_object_get_string(val));
        st->n_meta = ++k;
        if (!st->meta_keys[k - 1] || !st->meta_vals[k - 1])
            return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    }
    return TQ_OK;
}

static tq_status parse_entry(const char *path, const char *name, json_object *v, st_tensor *t,
                             size_t data_size)
{
    json_object *dt, *shape, *offs;
    int64_t b, e;
    if (!json_object_is_type(v, json_type_object) || !json_object_object_get_ex(v, "dtype", &dt) ||
        !json_object_is_type(dt, json_type_string) ||
        !json_object_object_get_ex(v, "shape", &shape) ||
        !json_object_is_type(shape, json_type_array) ||
        !json_object_object_get_ex(v, "data_offsets", &offs) ||
        !json_object_is_type(offs, json_type_array) || json_object_array_length(offs) != 2)
        return TQ_FAIL(TQ_E_FORMAT,
                       "%s: tensor '%s': entry needs \"dtype\" (string), \"shape\" "
                       "(array) and \"data_offsets\" ([begin, end])",
                       path, name);
    if ((t->dtype = dtype_from(json_object_get_string(dt))) < 0)
        return TQ_FAIL(TQ_E_FORMAT,
                       "%s: tensor '%s': unknown dtype '%s' (valid F32 F16 BF16 F64 "
                       "I8 U8 I16 U16 I32 U32 I64 U64 BOOL)",
                       path, name, json_object_get_string(dt));
    if (json_object_array_length(shape) > TQ_ST_MAX_DIMS)
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s': %zu dimensions (at most %d)", path, name,
                       json_object_array_length(shape), TQ_ST_MAX_DIMS);
    t->n_dims = (int)json_object_array_length(shape);
    t->n_elem = 1;
    for (int d = 0; d < t->n_dims; d++) {
        json_object *x = json_object_array_get_idx(shape, (size_t)d);
        int64_t v2;
        if (!json_object_is_type(x, json_type_int) || (v2 = json_object_get_int64(x)) < 0 ||
            __builtin_mul_overflow(t->n_elem, v2, &t->n_elem))
            return TQ_FAIL(TQ_E_FORMAT,
                           "%s: tensor '%s': dimension %d is not a non-negative "
                           "integer or the element count overflows",
                           path, name, d);
        t->shape[d] = v2;
    }
    if (!tq_mul_ok((size_t)t->n_elem, dtypes[t->dtype].size, &t->nbytes))
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s': byte size overflows", path, name);
    for (int k = 0; k < 2; k++) {
        json_object *x = json_object_array_get_idx(offs, (size_t)k);
        if (!json_object_is_type(x, json_type_int))
            return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s': data_offsets must be integers", path,
                           name);
    }
    b = json_object_get_int64(json_object_array_get_idx(offs, 0));
    e = json_object_get_int64(json_object_array_get_idx(offs, 1));
    if (b < 0 || e < b || (uint64_t)e > data_size)
        return TQ_FAIL(TQ_E_FORMAT,
                       "%s: tensor '%s': data_offsets [%lld, %lld] lie outside the "
                       "data section of %zu bytes",
                       path, name, (long long)b, (long long)e, data_size);
    if ((size_t)(e - b) != t->nbytes)
        return TQ_FAIL(TQ_E_FORMAT,
                       "%s: tensor '%s': data_offsets span %lld bytes, shape and "
                       "dtype need %zu",
                       path, name, (long long)(e - b), t->nbytes);
    t->begin = (size_t)b;
    return TQ_OK;
}

/* Parse one shard image; appends its tensors and (first shard only) its metadata. */
static tq_status parse_shard(tq_st *st, int si)
{
    st_shard *sh = &st->shards[si];
    const char *path = sh->path;
    json_tokener *tok = NULL;
    json_object *root = NULL;
    uint64_t hlen;
    int64_t first = st->n_tensors;
    int64_t n_keys;
    st_tensor **order = NULL;
    tq_status rc = TQ_OK;
    uint8_t len8[8];
    char *hj = NULL; /* the header JSON, NUL-terminated heap copy */

    if (sh->size < 8)
        return TQ_FAIL(TQ_E_FORMAT, "%s: truncated header: %zu bytes, need at least 8", path,
                       sh->size);
    if ((rc = tq_map_read(&sh->map, 0, len8, 8)))
        return rc;
    hlen = tq_rd64(len8);
    if (hlen > sh->size - 8)
        return TQ_FAIL(TQ_E_FORMAT,
                       "%s: header length %llu runs past the end of the file (%zu "
                       "bytes)",
                       path, (unsigned long long)hlen, sh->size);
    if (hlen > ST_MAX_HEADER)
        return TQ_FAIL(TQ_E_FORMAT, "%s: header length %llu exceeds the 100 MiB limit", path,
                       (unsigned long long)hlen);
    if (!(hj = tq_malloc((size_t)hlen + 1)))
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory for a %llu-byte header", path,
                       (unsigned long long)hlen);
    if ((rc = tq_map_read(&sh->map, 8, hj, (size_t)hlen)) || (rc = tq_map_check(&sh->map)))
        goto out;
    hj[hlen] = 0;
    if (hlen < 2 || hj[0] != '{') {
        rc = TQ_FAIL(TQ_E_FORMAT, "%s: bad JSON: header does not start with '{'", path);
        goto out;
    }
    sh->data_off = 8 + (size_t)hlen;
    if (!(tok = json_tokener_new())) {
        rc = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
        goto out;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    root = json_tokener_parse_ex(tok, hj, (int)hlen);
    if (!root && json_tokener_get_error(tok) == json_tokener_continue) {
        rc = TQ_FAIL(TQ_E_FORMAT,
                     "%s: bad JSON: truncated header: the JSON object is still open at byte %llu, "
                     "where the header ends (its length field at byte 0 says %llu bytes; the "
                     "file was cut short or that length is wrong)",
                     path, 8 + (unsigned long long)hlen, (unsigned long long)hlen);
        goto out;
    }
    if (!root || json_tokener_get_error(tok) != json_tokener_success) {
        rc = TQ_FAIL(TQ_E_FORMAT, "%s: bad JSON in header at byte %zu: %s", path,
                     8 + json_tokener_get_parse_end(tok),
                     root ? "incomplete" : json_tokener_error_desc(json_tokener_get_error(tok)));
        goto out;
    }
    for (size_t i = json_tokener_get_parse_end(tok); i < hlen; i++) {
        const uint8_t ch = (uint8_t)hj[i];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') {
            rc = TQ_FAIL(TQ_E_FORMAT,
                         "%s: bad JSON: trailing bytes after the header object at "
                         "offset %zu",
                         path, 8 + i);
            goto out;
        }
    }
    if (!json_object_is_type(root, json_type_object)) {
        rc = TQ_FAIL(TQ_E_FORMAT, "%s: bad JSON: header is not an object", path);
        goto out;
    }
    n_keys = count_top_keys(hj, (size_t)hlen);
    if (n_keys != json_object_object_length(root)) {
        rc = TQ_FAIL(TQ_E_FORMAT, "%s: duplicate names in the header (%lld keys, %d distinct)",
                     path, (long long)n_keys, json_object_object_length(root));
        goto out;
    }
    {
        const size_t data_size = sh->size - sh->data_off;
        const int64_t n = json_object_object_length(root);
        if (st->n_tensors + n > st->cap_tensors) {
            st_tensor *t = tq_realloc(st->tensors, (size_t)(st->n_tensors + n + 1) * sizeof(*t));
            if (!t) {
                rc = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
                goto out;
            }
            st->tensors = t;
            st->cap_tensors = st->n_tensors + n + 1;
        }
        json_object_object_foreach(root, key, val)
        {
            st_tensor *t;
            if (!strcmp(key, "__metadata__")) {
                if (!json_object_is_type(val, json_type_object)) {
                    rc = TQ_FAIL(TQ_E_FORMAT, "%s: __metadata__ is not an object", path);
                    goto out;
                }
                if (si == 0 && (rc = add_meta(st, path, val)))
                    goto out;
                continue;
            }
            t = &st->tensors[st->n_tensors];
            memset(t, 0, sizeof(*t));
            if (!(t->name = tq_strdup(key))) {
                rc = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
                goto out;
            }
            st->n_tensors++;
            t->shard = si;
            if ((rc = parse_entry(path, key, val, t, data_size)))
                goto out;
        }
        /* the tensors must tile [0, data_size) exactly */
        const int64_t cnt = st->n_tensors - first;
        size_t pos = 0;
        if (!(order = tq_malloc((size_t)(cnt ? cnt : 1) * sizeof(*order)))) {
            rc = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
            goto out;
        }
        for (int64_t i = 0; i < cnt; i++)
            order[i] = &st->tensors[first + i];
        qsort(order, (size_t)cnt, sizeof(*order), cmp_begin);
        for (int64_t i = 0; i < cnt; i++) {
            if (order[i]->begin != pos) {
                rc = TQ_FAIL(TQ_E_FORMAT,
                             "%s: tensor '%s' starts at %zu, expected %zu (gap or "
                             "overlap in data_offsets)",
                             path, order[i]->name, order[i]->begin, pos);
                goto out;
            }
            pos += order[i]->nbytes;
        }
        if (pos != data_size) {
            rc = TQ_FAIL(TQ_E_FORMAT, "%s: tensors cover %zu bytes, the data section has %zu", path,
                         pos, data_size);
            goto out;
        }
    }
out:
    tq_free(order);
    tq_free(hj);
    if (root)
        json_object_put(root);
    if (tok)
        json_tokener_free(tok);
    return rc;
}

static tq_status add_shard(tq_st *st, const char *path, const void *mem, size_t size)
{
    st_shard *s = tq_realloc(st->shards, (size_t)(st->n_shards + 1) * sizeof(*s));
    tq_status rc;
    if (!s)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    st->shards = s;
    s = &st->shards[st->n_shards];
    memset(s, 0, sizeof(*s));
    if (!(s->path = tq_strdup(path)))
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    st->n_shards++;
    if (mem) {
        tq_map_memory(&s->map, mem, size);
        s->size = size;
    } else {
        if ((rc = tq_map_file(path, &s->map)))
            return rc;
        s->size = s->map.size;
    }
    return parse_shard(st, st->n_shards - 1);
}

static tq_status check_dupes(tq_st *st, const char *path)
{
    /* names are unique within a shard (checked); across shards compare (n is small: < 10^4) */
    if (st->n_shards < 2)
        return TQ_OK;
    for (int64_t i = 0; i < st->n_tensors; i++)
        for (int64_t j = 0; j < i; j++)
            if (st->tensors[i].shard != st->tensors[j].shard &&
                !strcmp(st->tensors[i].name, st->tensors[j].name))
                return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s' appears in two shards (%s, %s)", path,
                               st->tensors[i].name, st->shards[st->tensors[j].shard].path,
                               st->shards[st->tensors[i].shard].path);
    return TQ_OK;
}

static tq_status open_index(tq_st *st, const char *index_path)
{
    json_object *root = json_object_from_file(index_path);
    json_object *wm = NULL;
    json_object *meta = NULL;
    char *dir = NULL;
    tq_status rc = TQ_OK;

    if (!root)
        return TQ_FAIL(TQ_E_FORMAT, "%s: bad JSON: %s", index_path, json_util_get_last_err());
    if (!json_object_is_type(root, json_type_object) ||
        !json_object_object_get_ex(root, "weight_map", &wm) ||
        !json_object_is_type(wm, json_type_object)) {
        rc = TQ_FAIL(TQ_E_FORMAT, "%s: index needs a \"weight_map\" object", index_path);
        goto out;
    }
    if (!(dir = tq_strdup(index_path))) {
        rc = TQ_FAIL(TQ_E_NOMEM, "out of memory");
        goto out;
    }
    {
        char *slash = strrchr(dir, '/');
        if (slash)
            slash[1] = 0;
        else
            strcpy(dir, "./");
    }
    json_object_object_foreach(wm, name, file)
    {
        const char *fn;
        int known = 0;
        if (!json_object_is_type(file, json_type_string) ||
            strchr(fn = json_object_get_string(file), '/') || !strcmp(fn, "..")) {
            rc = TQ_FAIL(TQ_E_FORMAT, "%s: weight_map entry '%s' must be a plain file name",
                         index_path, name);
            goto out;
        }
        for (int s = 0; s < st->n_shards && !known; s++) {
            const char *p = strrchr(st->shards[s].path, '/');
            known = !strcmp(p ? p + 1 : st->shards[s].path, fn);
        }
        if (!known) {
            char *p = tq_path_join(dir, fn);
            if (!p) {
                rc = TQ_FAIL(TQ_E_NOMEM, "out of memory");
                goto out;
            }
            rc = add_shard(st, p, NULL, 0);
            tq_free(p);
            if (rc)
                goto out;
        }
    }
    json_object_object_foreach(wm, name2, file2)
    {
        const char *fn = json_object_get_string(file2);
        int found = 0;
        for (int64_t i = 0; i < st->n_tensors && !found; i++) {
            const char *p = strrchr(st->shards[st->tensors[i].shard].path, '/');
            found = !strcmp(st->tensors[i].name, name2) &&
                    !strcmp(p ? p + 1 : st->shards[st->tensors[i].shard].path, fn);
        }
        if (!found) {
            rc = TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s' is mapped to %s but that shard lacks it",
                         index_path, name2, fn);
            goto out;
        }
    }
    if (st->n_meta == 0 && json_object_object_get_ex(root, "metadata", &meta) &&
        json_object_is_type(meta, json_type_object)) {
        json_object *clean = json_object_new_object();
        json_object_object_foreach(meta, mk, mv)
        {
            if (json_object_is_type(mv, json_type_string))
                json_object_object_add(clean, mk, json_object_get(mv));
        }
        rc = add_meta(st, index_path, clean);
        json_object_put(clean);
        if (rc)
            goto out;
    }
    rc = check_dupes(st, index_path);
out:
    tq_free(dir);
    json_object_put(root);
    return rc;
}

/* The single *.safetensors file of a directory (TQ_E_ARG naming the choices otherwise). */
static tq_status find_single(const char *dir, char **out)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    *out = NULL;
    if (!d)
        return TQ_FAIL(TQ_E_IO, "%s: cannot open directory", dir);
    while ((e = readdir(d))) {
        if (tq_ends_with(e->d_name, ".safetensors")) {
            n++;
            if (!*out)
                *out = tq_path_join(dir, e->d_name);
        }
    }
    closedir(d);
    if (n != 1) {
        tq_free(*out);
        *out = NULL;
        return TQ_FAIL(TQ_E_ARG,
                       "%s: %s (expected model.safetensors.index.json, "
                       "model.safetensors, or exactly one *.safetensors)",
                       dir, n ? "several .safetensors files and no index" : "no .safetensors file");
    }
    return *out ? TQ_OK : TQ_FAIL(TQ_E_NOMEM, "out of memory");
}

tq_status tq_st_open(const char *path, tq_st **out)
{
    tq_st *st;
    tq_status rc;
    if (!path || !out)
        return TQ_FAIL(TQ_E_ARG, "tq_st_open: NULL argument");
    *out = NULL;
    if (!(st = tq_calloc(1, sizeof(*st))))
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    if (tq_is_dir(path)) {
        char *p = tq_path_join(path, "model.safetensors.index.json");
        FILE *f = p ? fopen(p, "rb") : NULL;
        if (f) {
            fclose(f);
            rc = open_index(st, p);
        } else {
            tq_free(p);
            p = tq_path_join(path, "model.safetensors");
            f = p ? fopen(p, "rb") : NULL;
            if (f) {
                fclose(f);
                rc = add_shard(st, p, NULL, 0);
            } else {
                tq_free(p);
                rc = find_single(path, &p);
                if (!rc)
                    rc = add_shard(st, p, NULL, 0);
            }
        }
        tq_free(p);
    } else if (tq_ends_with(path, ".json")) {
        rc = open_index(st, path);
    } else {
        rc = add_shard(st, path, NULL, 0);
    }
    if (rc) {
        tq_st_free(st);
        return rc;
    }
    *out = st;
    return TQ_OK;
}

tq_status tq_st_open_memory(const void *data, size_t size, const char *name, tq_st **out)
{
    tq_st *st;
    tq_status rc;
    if (!out || (!data && size))
        return TQ_FAIL(TQ_E_ARG, "tq_st_open_memory: NULL argument");
    *out = NULL;
    if (!(st = tq_calloc(1, sizeof(*st))))
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    if ((rc = add_shard(st, name ? name : "(memory)", data ? data : "", size))) {
        tq_st_free(st);
        return rc;
    }
    *out = st;
    return TQ_OK;
}

void tq_st_free(tq_st *st)
{
    if (!st)
        return;
    for (int s = 0; s < st->n_shards; s++) {
        tq_unmap_file(&st->shards[s].map);
        tq_free(st->shards[s].path);
    }
    for (int64_t i = 0; i < st->n_tensors; i++)
        tq_free(st->tensors[i].name);
    for (int64_t i = 0; i < st->n_meta; i++) {
        tq_free(st->meta_keys[i]);
        tq_free(st->meta_vals[i]);
    }
    tq_free(st->meta_keys);
    tq_free(st->meta_vals);
    tq_free(st->shards);
    tq_free(st->tensors);
    tq_free(st);
}

int64_t tq_st_n_tensors(const tq_st *st)
{
    return st ? st->n_tensors : 0;
}

int64_t tq_st_find(const tq_st *st, const char *name)
{
    if (!st || !name)
        return -1;
    for (int64_t i = 0; i < st->n_tensors; i++)
        if (!strcmp(st->tensors[i].name, name))
            return i;
    return -1;
}

tq_status tq_st_tensor(const tq_st *st, int64_t i, tq_st_tensor_info *out)
{
    const st_tensor *t;
    const st_shard *sh;
    if (!st || !out || i < 0 || i >= st->n_tensors)
        return TQ_FAIL(TQ_E_ARG, "safetensors: tensor index %lld out of range", (long long)i);
    t = &st->tensors[i];
    sh = &st->shards[t->shard];
    memset(out, 0, sizeof(*out));
    out->name = t->name;
    out->dtype = t->dtype;
    out->n_dims = t->n_dims;
    memcpy(out->shape, t->shape, sizeof(t->shape));
    out->n_elem = t->n_elem;
    out->nbytes = t->nbytes;
    out->data = sh->map.data ? sh->map.data + sh->data_off + t->begin : NULL;
    out->file = sh->path;
    return TQ_OK;
}

tq_status tq_st_read_tensor(const tq_st *st, int64_t i, size_t off, void *dst, size_t n)
{
    const st_tensor *t = &st->tensors[i];
    const st_shard *sh = &st->shards[t->shard];
    if (off > t->nbytes || n > t->nbytes - off)
        return TQ_FAIL(TQ_E_ARG, "%s: tensor '%s': read [%zu, +%zu) past its %zu bytes", sh->path,
                       t->name, off, n, t->nbytes);
    return tq_map_read(&sh->map, sh->data_off + t->begin + off, dst, n);
}

tq_status tq_st_check_tensor(const tq_st *st, int64_t i)
{
    return tq_map_check(&st->shards[st->tensors[i].shard].map);
}

const char *tq_st_metadata(const tq_st *st, const char *key)
{
    for (int64_t i = 0; st && key && i < st->n_meta; i++)
        if (!strcmp(st->meta_keys[i], key))
            return st->meta_vals[i];
    return NULL;
}

int64_t tq_st_n_metadata(const tq_st *st)
{
    return st ? st->n_meta : 0;
}

tq_status tq_st_metadata_at(const tq_st *st, int64_t i, const char **key, const char **value)
{
    if (!st || i < 0 || i >= st->n_meta)
        return TQ_FAIL(TQ_E_ARG, "safetensors: metadata index %lld out of range", (long long)i);
    *key = st->meta_keys[i];
    *value = st->meta_vals[i];
    return TQ_OK;
}
