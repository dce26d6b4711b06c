/* test_io_st_write.c -- the streaming safetensors writer: a single file and a sharded directory
 * with every dtype, scalars, zero-size and escaped names/metadata, read back byte for byte by our
 * reader; shard names, index, atomicity (no temporary files left; an unfinished writer leaves
 * nothing), and refused bad calls. With TQ_IO_KEEP=DIR the outputs stay in DIR together with
 * expected.json for scripts/io_ref/check_st_written.py (the `safetensors` package check, ctest
 * test_io_st_python, label slow). Label: fast. */
#include <dirent.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "io_sha256.h"
#include "turboquant.h"
#include "core/rng.h"

typedef struct spec {
    const char *name;
    int dtype;
    int n_dims;
    int64_t shape[3];
} spec;

static const spec specs[] = {
    {"model.embed_tokens.weight", TQ_ST_BF16, 2, {64, 48}},
    {"model.layers.0.self_attn.q_proj.weight", TQ_ST_F32, 2, {32, 48}},
    {"model.layers.0.self_attn.q_proj.bias", TQ_ST_F16, 1, {32}},
    {"q.int8", TQ_ST_I8, 3, {2, 3, 5}},
    {"q.uint8", TQ_ST_U8, 1, {17}},
    {"q.scales \"quoted\"\\path", TQ_ST_I32, 2, {7, 3}},
    {"q.packed", TQ_ST_U32, 2, {16, 40}},
    {"scalar", TQ_ST_F32, 0, {0}},
    {"empty", TQ_ST_F16, 2, {0, 4}},
    {"wide.f64", TQ_ST_F64, 1, {9}},
    {"mask", TQ_ST_BOOL, 1, {11}},
};
#define N_SPECS (int)(sizeof(specs) / sizeof(specs[0]))

static uint8_t *bytes_of(int i, size_t *n)
{
    size_t k = tq_st_dtype_size(specs[i].dtype);
    uint8_t *p;
    tq_rng r;
    for (int d = 0; d < specs[i].n_dims; d++)
        k *= (size_t)specs[i].shape[d];
    *n = k;
    p = malloc(k ? k : 1);
    tq_rng_seed(&r, t_seed + (unsigned)i);
    for (size_t j = 0; j < k; j++)
        p[j] = (uint8_t)(tq_rng_u64(&r) >> 56);
    if (specs[i].dtype == TQ_ST_BOOL)
        for (size_t j = 0; j < k; j++)
            p[j] &= 1;
    return p;
}

static int count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) {
        size_t a = strlen(e->d_name), b = strlen(suffix);
        if (e->d_name[0] != '.' || !strcmp(suffix, ".tq-"))
            if ((!strcmp(suffix, ".tq-") && !strncmp(e->d_name, ".tq-", 4)) ||
                (a >= b && !strcmp(e->d_name + a - b, suffix)))
                n++;
    }
    if (d)
        closedir(d);
    return n;
}

static tq_status write_case(const char *path, uint64_t shard_bytes)
{
    tq_st_writer *w = NULL;
    tq_status st = tq_st_writer_create(path, shard_bytes, &w);
    if (st)
        return st;
    if (!st)
        st = tq_st_writer_set_metadata(w, "format", "pt");
    if (!st)
        st = tq_st_writer_set_metadata(w, "tq.note", "line1\nline2 \"q\" \\ \x01 \xc3\xa9");
    for (int i = 0; i < N_SPECS && !st; i++) {
        size_t n;
        uint8_t *p = bytes_of(i, &n);
        st = tq_st_writer_add(w, specs[i].name, specs[i].dtype, specs[i].n_dims, specs[i].shape, p,
                              n);
        free(p);
    }
    if (!st)
        st = tq_st_writer_finish(w);
    tq_st_writer_free(w);
    return st;
}

static void check_read(const char *path)
{
    tq_st *st = NULL;
    CHECK(tq_st_open(path, &st) == TQ_OK, "%s: %s", path, tq_last_error());
    if (!st)
        return;
    CHECK(tq_st_n_tensors(st) == N_SPECS, "%lld tensors", (long long)tq_st_n_tensors(st));
    CHECK(tq_st_metadata(st, "format") && !strcmp(tq_st_metadata(st, "format"), "pt"), "format");
    CHECK(tq_st_metadata(st, "tq.note") &&
              !strcmp(tq_st_metadata(st, "tq.note"), "line1\nline2 \"q\" \\ \x01 \xc3\xa9"),
          "escaped metadata round trip");
    for (int i = 0; i < N_SPECS; i++) {
        const int64_t k = tq_st_find(st, specs[i].name);
        tq_st_tensor_info ti;
        size_t n;
        uint8_t *p = bytes_of(i, &n);
        CHECK(k >= 0 && tq_st_tensor(st, k, &ti) == TQ_OK, "%s missing", specs[i].name);
        if (k >= 0) {
            CHECK(ti.dtype == specs[i].dtype && ti.n_dims == specs[i].n_dims && ti.nbytes == n,
                  "%s: dtype/dims/bytes", specs[i].name);
            for (int d = 0; d < specs[i].n_dims; d++)
                CHECK(ti.shape[d] == specs[i].shape[d], "%s dim %d", specs[i].name, d);
            CHECK(n == 0 || !memcmp(ti.data, p, n), "%s: bytes differ", specs[i].name);
        }
        free(p);
    }
    tq_st_free(st);
}

static void write_expected(const char *dir)
{
    json_object *root = json_object_new_object();
    json_object *meta = json_object_new_object();
    json_object *arr = json_object_new_array();
    char path[600];
    json_object_object_add(meta, "format", json_object_new_string("pt"));
    json_object_object_add(meta, "tq.note",
                           json_object_new_string("line1\nline2 \"q\" \\ \x01 \xc3\xa9"));
    json_object_object_add(root, "metadata", meta);
    for (int i = 0; i < N_SPECS; i++) {
        json_object *t = json_object_new_object();
        json_object *shape = json_object_new_array();
        size_t n;
        uint8_t *p = bytes_of(i, &n);
        sha256 s;
        char hex[65];
        sha256_init(&s);
        sha256_update(&s, p, n);
        sha256_hex(&s, hex);
        free(p);
        for (int d = 0; d < specs[i].n_dims; d++)
            json_object_array_add(shape, json_object_new_int64(specs[i].shape[d]));
        json_object_object_add(t, "name", json_object_new_string(specs[i].name));
        json_object_object_add(t, "dtype",
                               json_object_new_string(tq_st_dtype_name(specs[i].dtype)));
        json_object_object_add(t, "shape", shape);
        json_object_object_add(t, "sha256", json_object_new_string(hex));
        json_object_array_add(arr, t);
    }
    json_object_object_add(root, "tensors", arr);
    snprintf(path, sizeof(path), "%s/expected.json", dir);
    CHECK(json_object_to_file_ext(path, root, JSON_C_TO_STRING_PRETTY) == 0, "%s", path);
    json_object_put(root);
}

int main(int argc, char **argv)
{
    char tmpl[] = "/tmp/tq_st_write_XXXXXX";
    const char *keep = getenv("TQ_IO_KEEP");
    char base[512], single[600], sharded[600], aborted[600];
    tq_st_writer *w = NULL;
    int64_t shape[2] = {2, 2};
    float x[4] = {1, 2, 3, 4};

    t_init(argc, argv, "test_io_st_write");
    if (keep && *keep) {
        mkdir(keep, 0755);
        snprintf(base, sizeof(base), "%s", keep);
    } else {
        CHECK(mkdtemp(tmpl) != NULL, "mkdtemp");
        snprintf(base, sizeof(base), "%s", tmpl);
    }
    snprintf(single, sizeof(single), "%s/single.safetensors", base);
    snprintf(sharded, sizeof(sharded), "%s/sharded", base);
    snprintf(aborted, sizeof(aborted), "%s/aborted", base);

    CHECK(write_case(single, 0) == TQ_OK, "single: %s", tq_last_error());
    check_read(single);
    CHECK(write_case(sharded, 8000) == TQ_OK, "sharded: %s", tq_last_error());
    check_read(sharded);
    {
        char p[700];
        snprintf(p, sizeof(p), "%s/model-00001-of-00003.safetensors", sharded);
        CHECK(access(p, R_OK) == 0, "%s exists (3 shards expected at 8000 bytes)", p);
        snprintf(p, sizeof(p), "%s/model.safetensors.index.json", sharded);
        CHECK(access(p, R_OK) == 0, "%s exists", p);
        check_read(p);
    }
    CHECK(count_files(sharded, ".safetensors") == 3, "3 shards");
    CHECK(count_files(sharded, ".tmp") == 0 && count_files(sharded, ".tq-") == 0 &&
              count_files(base, ".tmp") == 0 && count_files(base, ".tq-") == 0,
          "no temporary files left");

    /* bad calls, and an unfinished writer leaves nothing behind */
    CHECK(tq_st_writer_create(aborted, 0, &w) == TQ_OK, "create");
    CHECK(tq_st_writer_add(w, "a", TQ_ST_F32, 2, shape, x, sizeof(x)) == TQ_OK, "add");
    CHECK(tq_st_writer_add(w, "a", TQ_ST_F32, 2, shape, x, sizeof(x)) == TQ_E_ARG, "duplicate");
    CHECK(tq_st_writer_add(w, "b", TQ_ST_F32, 2, shape, x, 12) == TQ_E_ARG &&
              strstr(tq_last_error(), "'b'"),
          "size mismatch named: %s", tq_last_error());
    CHECK(tq_st_writer_add(w, "c", 99, 2, shape, x, sizeof(x)) == TQ_E_ARG, "unknown dtype");
    CHECK(tq_st_writer_set_metadata(w, "__x", "y") == TQ_E_ARG, "reserved key");
    CHECK(count_files(aborted, ".tq-") == 1, "staging file exists while writing");
    tq_st_writer_free(w);
    CHECK(count_files(aborted, ".safetensors") == 0 && count_files(aborted, ".tq-") == 0,
          "unfinished writer left files");
    rmdir(aborted);

    /* broken indexes over the good shards: each refused, naming the index and the problem */
    {
        static const struct {
            const char *json;
            tq_status st;
            const char *msg;
        } bad[] = {
            {"{\"weight_map\": {\"a\": \"missing.safetensors\"}}", TQ_E_IO, "missing.safetensors"},
            {"{\"weight_map\": {\"nope\": \"model-00001-of-00003.safetensors\"}}", TQ_E_FORMAT,
             "lacks it"},
            {"{\"weight_map\": {\"a\": \"../single.safetensors\"}}", TQ_E_FORMAT,
             "plain file name"},
            {"{\"weight_map\": [1, 2]}", TQ_E_FORMAT, "weight_map"},
            {"{\"weight_map\": {", TQ_E_FORMAT, "bad JSON"},
        };
        char idx[700];
        snprintf(idx, sizeof(idx), "%s/bad.index.json", sharded);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            FILE *f = fopen(idx, "w");
            tq_st *st = NULL;
            tq_status rc;
            fputs(bad[i].json, f);
            fclose(f);
            rc = tq_st_open(idx, &st);
            CHECK(rc == bad[i].st && st == NULL, "bad index %zu: %s", i, tq_status_str(rc));
            CHECK(strstr(tq_last_error(), bad[i].msg) != NULL, "bad index %zu: message '%s'", i,
                  tq_last_error());
        }
        unlink(idx);
    }

    if (keep && *keep) {
        write_expected(base);
        printf("kept outputs in %s\n", base);
    } else {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
        CHECK(system(cmd) == 0, "cleanup");
    }
    return t_done();
}
