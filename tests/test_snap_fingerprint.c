/* test_snap_fingerprint.c -- a prompt cache (KV snapshot) remembers the weights it was made with
 * (issue 10 item 4). A copy of the tiny llama model with ONE weight byte changed (in a temp
 * directory; several tensors, one at a time) has the same shapes but other weights: a snapshot
 * saved with the original is refused by the altered model ("weights differ", naming the snapshot
 * and the model), and the other way round; the same model, loaded again, accepts it. Plus the
 * header messages: a corrupted header-size field says the header is corrupt, and a version-1
 * file says which version this build reads and that the cache must be re-made. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/engine.h"
#include "t.h"

#define SRC "tests/data/tiny/llama"

static long slurp(const char *path, unsigned char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n + 1);
    if (fread(*out, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(*out);
        return -1;
    }
    fclose(f);
    return n;
}

static int spit(const char *path, const unsigned char *b, long n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    const int ok = fwrite(b, 1, (size_t)n, f) == (size_t)n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* byte offset in the file of the middle of tensor `name`'s data (safetensors: u64 header length,
 * JSON header, data; "data_offsets":[a,b] relative to the data), or -1 */
static long tensor_mid(const unsigned char *b, long n, const char *name)
{
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++)
        hl |= (uint64_t)b[i] << (8 * i);
    if (n < 8 || hl > (uint64_t)n - 8)
        return -1;
    char *hdr = malloc(hl + 1);
    memcpy(hdr, b + 8, hl);
    hdr[hl] = '\0';
    char key[160];
    snprintf(key, sizeof key, "\"%s\"", name);
    const char *p = strstr(hdr, key);
    const char *d = p ? strstr(p, "\"data_offsets\"") : NULL;
    long a = -1, e = -1;
    if (!d || sscanf(strchr(d, '[') + 1, "%ld , %ld", &a, &e) != 2)
        a = -1;
    free(hdr);
    return a < 0 ? -1 : 8 + (long)hl + a + ((e - a) / 2 & ~1L);
}

static tq_model *load(const char *path)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = 1;
    mo.weight_type = TQ_DTYPE_F32;
    tq_model *m = NULL;
    if (tq_model_load(path, &mo, &m))
        printf("load %s: %s\n", path, tq_last_error());
    return m;
}

static tq_session *mk(tq_model *m)
{
    tq_session_opts o;
    tq_session_opts_default(&o);
    o.n_ctx = 64;
    tq_session *s = NULL;
    if (tq_session_create(m, &o, &s))
        printf("session: %s\n", tq_last_error());
    return s;
}

/* save a snapshot of 9 tokens evaluated on model m to path */
static int save_with(tq_model *m, const char *path)
{
    int32_t ids[9];
    for (int i = 0; i < 9; i++)
        ids[i] = 3 + 17 * i;
    tq_session *s = mk(m);
    int ok = s && !tq_session_eval(s, ids, 9, NULL) && !tq_session_save(s, ids, 9, path);
    if (!ok)
        printf("save %s: %s\n", path, tq_last_error());
    tq_session_free(s);
    return ok;
}

static tq_status load_into(tq_model *m, const char *path)
{
    tq_session *s = mk(m);
    tq_status st = s ? tq_session_load(s, path, NULL, 0, NULL) : TQ_E_NOMEM;
    if (!st)
        CHECK(tq_session_n_past(s) == 9, "loaded 9 tokens");
    tq_session_free(s);
    return st;
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_snap_fingerprint");
    unsigned char *cfg = NULL, *st = NULL;
    const long ncfg = slurp(SRC "/config.json", &cfg), nst = slurp(SRC "/model.safetensors", &st);
    if (ncfg < 0 || nst < 0)
        return t_skip(SRC " missing (run from the repository root)");
    char dir[] = "/tmp/tq_fpXXXXXX";
    if (!mkdtemp(dir))
        return t_skip("cannot make a temp directory");
    char p_cfg[96], p_st[96], snap[96], snap2[96], bad[96];
    snprintf(p_cfg, sizeof p_cfg, "%s/config.json", dir);
    snprintf(p_st, sizeof p_st, "%s/model.safetensors", dir);
    snprintf(snap, sizeof snap, "%s/orig.kv", dir);
    snprintf(snap2, sizeof snap2, "%s/altered.kv", dir);
    snprintf(bad, sizeof bad, "%s/bad.kv", dir);
    CHECK(spit(p_cfg, cfg, ncfg) == 0, "write %s", p_cfg);

    tq_model *orig = load(SRC), *again = load(SRC);
    CHECK(orig && again, "load the original twice");
    if (!orig || !again)
        return t_done();
    CHECK(save_with(orig, snap), "save with the original");
    CHECK(load_into(orig, snap) == TQ_OK, "same model accepts: %s", tq_last_error());
    CHECK(load_into(again, snap) == TQ_OK, "same model, loaded again, accepts: %s",
          tq_last_error());
    CHECK(tq_model_fingerprint(orig) == tq_model_fingerprint(again), "fingerprint is stable");

    /* one byte of one tensor changed, for tensors the old sampled fingerprint did not cover */
    static const char *tensors[] = {"model.layers.0.self_attn.k_proj.weight",
                                    "model.layers.1.mlp.down_proj.weight", "lm_head.weight",
                                    "model.layers.1.post_attention_layernorm.weight"};
    for (size_t i = 0; i < sizeof(tensors) / sizeof(tensors[0]); i++) {
        const long off = tensor_mid(st, nst, tensors[i]);
        CHECK(off > 0 && off < nst, "%s found in the safetensors header", tensors[i]);
        if (off <= 0 || off >= nst)
            continue;
        st[off] ^= 0x01; /* lowest mantissa bit of one bf16 value */
        CHECK(spit(p_st, st, nst) == 0, "write %s", p_st);
        st[off] ^= 0x01;
        tq_model *alt = load(dir);
        CHECK(alt != NULL, "load the altered copy (%s)", tensors[i]);
        if (!alt)
            continue;
        CHECK(tq_model_fingerprint(alt) != tq_model_fingerprint(orig), "%s: fingerprint differs",
              tensors[i]);
        tq_status s1 = load_into(alt, snap);
        const char *e = tq_last_error();
        CHECK(s1 == TQ_E_UNSUPPORTED && strstr(e, "weights differ") && strstr(e, snap) &&
                  strstr(e, dir), "%s: original's snapshot into the altered model refused, naming "
              "both: %s %s", tensors[i], tq_status_str(s1), e);
        CHECK(save_with(alt, snap2), "save with the altered model");
        tq_status s2 = load_into(orig, snap2);
        CHECK(s2 == TQ_E_UNSUPPORTED && strstr(tq_last_error(), "weights differ"),
              "%s: altered model's snapshot into the original refused: %s", tensors[i],
              tq_last_error());
        CHECK(load_into(alt, snap2) == TQ_OK, "altered model accepts its own: %s",
              tq_last_error());
        tq_model_free(alt);
    }

    /* header messages */
    unsigned char *sb = NULL;
    const long ns = slurp(snap, &sb);
    CHECK(ns > 128, "snapshot read back");
    if (ns > 128) {
        unsigned char save12 = sb[12];
        sb[12] = 64; /* header-size field 64 (the version still right) */
        spit(bad, sb, ns);
        sb[12] = save12;
        tq_status s = load_into(orig, bad);
        CHECK(s == TQ_E_FORMAT && strstr(tq_last_error(), "header is corrupt"),
              "corrupt header size: %s", tq_last_error());
        unsigned char save8 = sb[8];
        sb[8] = 1; /* an old (version 1) file */
        spit(bad, sb, ns);
        sb[8] = save8;
        s = load_into(orig, bad);
        const char *e = tq_last_error();
        CHECK(s == TQ_E_FORMAT && strstr(e, "version 1") && strstr(e, "reads versions 2") &&
                  strstr(e, "re-make"), "version 1: %s", e);
        free(sb);
    }
    tq_model_free(orig);
    tq_model_free(again);
    unlink(p_cfg);
    unlink(p_st);
    unlink(snap);
    unlink(snap2);
    unlink(bad);
    rmdir(dir);
    free(cfg);
    free(st);
    return t_done();
}
