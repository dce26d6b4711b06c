/* kvsnap.c -- KV cache snapshots: save a session's cache (+ the prompt tokens that made it) to a
 * file and restore it (turboquant/eval.h; byte format in docs/FORMAT.md "KV cache snapshot").
 *
 * File = 128-byte header + payload, little-endian:
 *   0  magic "TQKVSNAP"          8  u32 version (3)        12 u32 header bytes (128)
 *   16 char scheme key[32]       48 u32 head_dim           52 u32 n_layers
 *   56 u32 n_heads               60 u32 n_kv_heads         64 u64 n_tokens (cached)
 *   72 u64 n_ids (token ids)     80 u64 shape fingerprint  88 u64 payload bytes
 *   96 u64 checksum              104 u8[16] weights hash (XXH3-128)      120..127 zero
 * Version 1 (no weights hash) is refused: the cache must be re-made. Version 2 (no first-row
 * table: every layer holds every token) is read.
 *   payload: n_ids x i32 token ids, then (version 3) n_layers x u64 first[l]: the position of
 *   the first row stored for layer l (0, or for a sliding-window layer kept as a ring the
 *   oldest position it holds), then per layer, per kv-head: n_tokens - first[l] K rows of
 *   positions first[l].., as many V rows, each row in the layer's stored format (kv.h row bytes
 *   of the layer's scheme).
 * checksum = FNV-1a 64 over the header (checksum field zero) then the payload.
 * Written to "<path>.tmp.<pid>", fsync'ed, renamed over path (atomic on POSIX). A load reads
 * and validates the whole file before touching the session. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/half.h"
#include "core/le.h"
#include "model/engine.h"
#include "model/kvcache_turbo.h"

#define SNAP_MAGIC "TQKVSNAP"
#define SNAP_VERSION 3u /* 2: + weights hash at 104; 3: + first-row table (ring layers) */
#define SNAP_HDR 128u

typedef struct fnv {
    uint64_t h;
} fnv;
static void fnv_init(fnv *f) { f->h = 0xcbf29ce484222325ull; }
static void fnv_add(fnv *f, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = f->h;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    f->h = h;
}

/* FNV-1a 64 of the shapes and the weight dtype (header offset 80) */
static uint64_t shape_fingerprint(const tq_model *m)
{
    fnv f;
    fnv_init(&f);
    const tq_model_config *c = &m->cfg;
    const int32_t shape[] = {c->n_layers, c->hidden, c->n_heads, c->n_kv_heads, c->head_dim,
                             c->vocab, c->ffn_hidden, (int32_t)m->wtype};
    uint8_t b[sizeof(shape)];
    for (size_t i = 0; i < sizeof(shape) / sizeof(shape[0]); i++)
        tq_le_wr32(b + 4 * i, (uint32_t)shape[i]);
    fnv_add(&f, b, sizeof(b));
    return f.h;
}

uint64_t tq_model_fingerprint(const tq_model *m)
{
    uint8_t b[24];
    tq_le_wr64(b, shape_fingerprint(m));
    tq_model_weights_hash(m, b + 8);
    fnv f;
    fnv_init(&f);
    fnv_add(&f, b, sizeof(b));
    return f.h;
}

static void hex16(const uint8_t *h, char *out)
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static size_t layer_k_rb(const tq_kvcache *c, int l)
{
    size_t k, v;
    tq_kvcache_layer_rb(c, l, &k, &v);
    return k;
}
static size_t layer_v_rb(const tq_kvcache *c, int l)
{
    size_t k, v;
    tq_kvcache_layer_rb(c, l, &k, &v);
    return v;
}

/* the first position whose rows a save of n tokens stores for layer l (a ring: the oldest held) */
static uint64_t first_held(const tq_kvcache *c, int l, uint64_t n)
{
    if (!tq_kvc_is_ring(c, l))
        return 0;
    const uint64_t lo = c->ring_lo[l] > 0 ? (uint64_t)c->ring_lo[l] : 0;
    return lo < n ? lo : n;
}

/* payload bytes: ids, the first-row table (version 3: first != NULL), then the rows */
static uint64_t payload_bytes(const tq_kvcache *c, uint64_t n_tok, uint64_t n_ids,
                              const uint64_t *first)
{
    uint64_t b = n_ids * 4 + (first ? 8 * (uint64_t)c->n_layers : 0);
    for (int l = 0; l < c->n_layers; l++)
        b += (uint64_t)c->n_kv_heads * (n_tok - (first ? first[l] : 0)) *
             (layer_k_rb(c, l) + layer_v_rb(c, l));
    return b;
}

/* rows of positions [p0, p1) of kv-head g of layer l: at most two runs of consecutive slots;
 * fn(ctx, ptr, bytes) on each in order, K runs then V runs (which: 0 K only, 1 V only, 2 both);
 * stops when fn returns 0 */
typedef int (*rows_fn)(void *ctx, uint8_t *p, size_t bytes);
static int each_run(const tq_kvcache *c, int l, int g, uint64_t p0, uint64_t p1, int which,
                    rows_fn fn, void *ctx)
{
    const uint64_t S = (uint64_t)tq_kvc_slots(c, l);
    const size_t kr = layer_k_rb(c, l), vr = layer_v_rb(c, l);
    for (int kv = which == 1; kv < (which == 0 ? 1 : 2); kv++) {
        const size_t rb = kv ? vr : kr;
        uint8_t *base = (kv ? c->v[l] : c->k[l]) + (size_t)g * (size_t)S * rb;
        for (uint64_t p = p0; p < p1;) {
            const uint64_t sl = p % S, run = S - sl < p1 - p ? S - sl : p1 - p;
            if (!fn(ctx, base + (size_t)sl * rb, (size_t)run * rb))
                return 0;
            p += run;
        }
    }
    return 1;
}

static int run_hash(void *ctx, uint8_t *p, size_t bytes)
{
    fnv_add(ctx, p, bytes);
    return 1;
}
static int run_write(void *ctx, uint8_t *p, size_t bytes)
{
    return fwrite(p, 1, bytes, ctx) == bytes;
}
static int run_read(void *ctx, uint8_t *p, size_t bytes)
{
    const uint8_t **src = ctx;
    memcpy(p, *src, bytes);
    *src += bytes;
    return 1;
}

static void make_header(const tq_session *s, uint64_t n_ids, uint64_t pay, uint8_t *h)
{
    const tq_kvcache *c = s->kv;
    memset(h, 0, SNAP_HDR);
    memcpy(h, SNAP_MAGIC, 8);
    tq_le_wr32(h + 8, SNAP_VERSION);
    tq_le_wr32(h + 12, SNAP_HDR);
    tq_kv_scheme_key(c->scheme, (char *)h + 16, 32);
    tq_le_wr32(h + 48, (uint32_t)c->head_dim);
    tq_le_wr32(h + 52, (uint32_t)c->n_layers);
    tq_le_wr32(h + 56, (uint32_t)c->n_heads);
    tq_le_wr32(h + 60, (uint32_t)c->n_kv_heads);
    tq_le_wr64(h + 64, (uint64_t)s->n_past);
    tq_le_wr64(h + 72, n_ids);
    tq_le_wr64(h + 80, shape_fingerprint(s->m));
    tq_le_wr64(h + 88, pay);
    tq_model_weights_hash(s->m, h + 104);
}

tq_status tq_session_save(const tq_session *s, const int32_t *tokens, int64_t n_tokens,
                          const char *path)
{
    if (!s || !path || n_tokens < 0 || (n_tokens > 0 && !tokens))
        return TQ_FAIL(TQ_E_ARG, "tq_session_save: bad arguments");
    if (n_tokens != 0 && n_tokens != s->n_past)
        return TQ_FAIL(TQ_E_ARG, "tq_session_save: %lld token ids given for %lld cached tokens",
                       (long long)n_tokens, (long long)s->n_past);
    const tq_kvcache *c = s->kv;
    const uint64_t n = (uint64_t)s->n_past;
    uint64_t *first = tq_calloc((size_t)c->n_layers, sizeof(*first));
    if (!first)
        return TQ_FAIL(TQ_E_NOMEM, "tq_session_save: out of memory");
    for (int l = 0; l < c->n_layers; l++)
        first[l] = first_held(c, l, n);
    const uint64_t pay = payload_bytes(c, n, (uint64_t)n_tokens, first);
    uint8_t h[SNAP_HDR];
    make_header(s, (uint64_t)n_tokens, pay, h);
    fnv f;
    fnv_init(&f);
    fnv_add(&f, h, SNAP_HDR);
    for (int64_t i = 0; i < n_tokens; i++) {
        uint8_t b[4];
        tq_le_wr32(b, (uint32_t)tokens[i]);
        fnv_add(&f, b, 4);
    }
    for (int l = 0; l < c->n_layers; l++) {
        uint8_t b[8];
        tq_le_wr64(b, first[l]);
        fnv_add(&f, b, 8);
    }
    for (int l = 0; l < c->n_layers; l++)
        for (int g = 0; g < c->n_kv_heads; g++)
            (void)each_run(c, l, g, first[l], n, 2, run_hash, &f);
    tq_le_wr64(h + 96, f.h);

    tq_atomic_file *af = NULL; /* temp + fsync + rename; FIFOs in place, symlinks resolved */
    tq_status st = tq_atomic_file_open(path, &af);
    if (st) {
        tq_free(first);
        return st;
    }
    FILE *fp = tq_atomic_file_stream(af);
    const char *tmp = tq_atomic_file_tmp_path(af) ? tq_atomic_file_tmp_path(af) : path;
    int ok = fp && fwrite(h, 1, SNAP_HDR, fp) == SNAP_HDR;
    for (int64_t i = 0; ok && i < n_tokens; i++) {
        uint8_t b[4];
        tq_le_wr32(b, (uint32_t)tokens[i]);
        ok = fwrite(b, 1, 4, fp) == 4;
    }
    for (int l = 0; ok && l < c->n_layers; l++) {
        uint8_t b[8];
        tq_le_wr64(b, first[l]);
        ok = fwrite(b, 1, 8, fp) == 8;
    }
    for (int l = 0; ok && l < c->n_layers; l++)
        for (int g = 0; ok && g < c->n_kv_heads; g++)
            ok = each_run(c, l, g, first[l], n, 2, run_write, fp);
    tq_free(first);
    ok = ok && fflush(fp) == 0;
    if (!ok) {
        st = TQ_FAIL(TQ_E_IO, "%s: write failed: %s", tmp, strerror(errno));
        tq_atomic_file_abort(af); /* removes the temporary, keeps any earlier file */
        return st;
    }
    return tq_atomic_file_commit(af);
}

tq_status tq_session_load(tq_session *s, const char *path, int32_t *tokens, int64_t tokens_cap,
                          int64_t *n_tokens)
{
    if (!s || !path)
        return TQ_FAIL(TQ_E_ARG, "tq_session_load: bad arguments");
    tq_kvcache *c = s->kv;
    uint8_t *buf = NULL;
    uint64_t *first = NULL;
    tq_status st = TQ_OK;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return TQ_FAIL(TQ_E_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t h[SNAP_HDR];
    if (fread(h, 1, SNAP_HDR, fp) != SNAP_HDR) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: truncated snapshot header (need %u bytes)", path,
                     SNAP_HDR);
        goto out;
    }
    if (memcmp(h, SNAP_MAGIC, 8)) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: not a KV cache snapshot (bad magic)", path);
        goto out;
    }
    if (tq_le_rd32(h + 12) != SNAP_HDR) { /* every version so far has a 128-byte header */
        st = TQ_FAIL(TQ_E_FORMAT, "%s: the snapshot header is corrupt (its header-size field "
                                  "says %u bytes, a snapshot header is %u); re-make the cache",
                     path, tq_le_rd32(h + 12), SNAP_HDR);
        goto out;
    }
    const uint32_t ver = tq_le_rd32(h + 8);
    if (ver != SNAP_VERSION && ver != 2) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: snapshot version %u; this build reads versions 2 and %u "
                                  "(%s): re-make the prompt cache with this build", path, ver,
                     SNAP_VERSION, ver < 2 ? "older snapshots have no weights fingerprint"
                                           : "the file was written by a newer build");
        goto out;
    }
    char key[33], mine[48];
    memcpy(key, h + 16, 32);
    key[32] = '\0';
    tq_kv_scheme_key(c->scheme, mine, sizeof(mine));
    if (strcmp(key, mine)) {
        st = TQ_FAIL(TQ_E_UNSUPPORTED, "%s: snapshot is %s, this session's cache is %s; restore "
                                       "into a session with --kv of the snapshot", path, key,
                     mine);
        goto out;
    }
    if (tq_le_rd32(h + 48) != (uint32_t)c->head_dim || tq_le_rd32(h + 52) != (uint32_t)c->n_layers ||
        tq_le_rd32(h + 56) != (uint32_t)c->n_heads || tq_le_rd32(h + 60) != (uint32_t)c->n_kv_heads ||
        tq_le_rd64(h + 80) != shape_fingerprint(s->m)) {
        st = TQ_FAIL(TQ_E_UNSUPPORTED, "%s: snapshot was made with another model than %s "
                                       "(head_dim %u, %u layers, %u/%u heads, shape fingerprint "
                                       "%016llx; this model: %d, %d, %d/%d, %016llx)", path,
                     s->m->path, tq_le_rd32(h + 48), tq_le_rd32(h + 52), tq_le_rd32(h + 56), tq_le_rd32(h + 60),
                     (unsigned long long)tq_le_rd64(h + 80), c->head_dim, c->n_layers, c->n_heads,
                     c->n_kv_heads, (unsigned long long)shape_fingerprint(s->m));
        goto out;
    }
    uint8_t wh[16];
    tq_model_weights_hash(s->m, wh);
    if (memcmp(wh, h + 104, 16)) {
        char a[33], b[33];
        hex16(h + 104, a);
        hex16(wh, b);
        st = TQ_FAIL(TQ_E_UNSUPPORTED, "%s: snapshot was made with another model: weights differ "
                                       "from %s (same shapes; weights hash %s in the snapshot, %s "
                                       "for this model); re-make the cache with this model", path,
                     s->m->path, a, b);
        goto out;
    }
    const uint64_t n = tq_le_rd64(h + 64), n_ids = tq_le_rd64(h + 72), pay = tq_le_rd64(h + 88);
    if (n_ids != 0 && n_ids != n) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: token count %llu and id count %llu differ", path,
                     (unsigned long long)n, (unsigned long long)n_ids);
        goto out;
    }
    if (n > (uint64_t)s->n_ctx) {
        st = TQ_FAIL(TQ_E_OVERFLOW, "%s: snapshot holds %llu tokens (%llu ids); this session "
                                    "holds at most %lld", path, (unsigned long long)n,
                     (unsigned long long)n_ids, (long long)s->n_ctx);
        goto out;
    }
    /* at most every row of every layer (first = 0) plus the table; exact once it is read */
    const uint64_t max_pay = payload_bytes(c, n, n_ids, NULL) + (ver >= 3 ? 8u * c->n_layers : 0);
    if (pay > max_pay || pay < n_ids * 4 + (ver >= 3 ? 8u * c->n_layers : 0)) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: payload size %llu does not match %llu tokens of %s", path,
                     (unsigned long long)pay, (unsigned long long)n, key);
        goto out;
    }
    if (n_ids > 0 && tokens && (int64_t)n_ids > tokens_cap) {
        st = TQ_FAIL(TQ_E_OVERFLOW, "%s: %llu token ids do not fit the buffer of %lld", path,
                     (unsigned long long)n_ids, (long long)tokens_cap);
        goto out;
    }
    buf = tq_malloc(pay ? (size_t)pay : 1);
    first = tq_calloc((size_t)c->n_layers, sizeof(*first));
    if (!buf || !first) {
        st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory for %llu bytes", path,
                     (unsigned long long)pay);
        goto out;
    }
    uint8_t extra;
    if (fread(buf, 1, (size_t)pay, fp) != (size_t)pay) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: truncated snapshot (payload shorter than %llu bytes)",
                     path, (unsigned long long)pay);
        goto out;
    }
    if (fread(&extra, 1, 1, fp) != 0) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: trailing bytes after the snapshot payload", path);
        goto out;
    }
    const uint64_t want = tq_le_rd64(h + 96);
    tq_le_wr64(h + 96, 0);
    fnv f;
    fnv_init(&f);
    fnv_add(&f, h, SNAP_HDR);
    fnv_add(&f, buf, (size_t)pay);
    if (f.h != want) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: checksum mismatch (file %016llx, computed %016llx): the "
                                  "snapshot is corrupted", path, (unsigned long long)want,
                     (unsigned long long)f.h);
        goto out;
    }
    /* the first-row table: each layer must hold what this session's layer needs */
    const uint8_t *p = buf + n_ids * 4;
    for (int l = 0; ver >= 3 && l < c->n_layers; l++, p += 8) {
        first[l] = tq_le_rd64(p);
        const int64_t W = c->window && c->window[l] > 0 ? c->window[l] : 0;
        const uint64_t need = W && n + 1 > (uint64_t)W ? n + 1 - (uint64_t)W : 0;
        if (first[l] > n) {
            st = TQ_FAIL(TQ_E_FORMAT, "%s: layer %d's first row %llu is beyond its %llu tokens",
                         path, l, (unsigned long long)first[l], (unsigned long long)n);
            goto out;
        }
        if (first[l] > 0 && !tq_kvc_is_ring(c, l)) {
            st = TQ_FAIL(TQ_E_UNSUPPORTED, "%s: the snapshot keeps only the sliding window of "
                                           "layer %d (positions from %llu); this session keeps "
                                           "every token there (swa_full): restore into a session "
                                           "without swa_full", path, l,
                         (unsigned long long)first[l]);
            goto out;
        }
        if (first[l] > need && n > 0) {
            st = TQ_FAIL(TQ_E_FORMAT, "%s: layer %d holds positions from %llu, the next token "
                                      "needs them from %llu: the snapshot is incomplete", path, l,
                         (unsigned long long)first[l], (unsigned long long)need);
            goto out;
        }
    }
    if (pay != payload_bytes(c, n, n_ids, ver >= 3 ? first : NULL)) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: payload size %llu does not match %llu tokens of %s", path,
                     (unsigned long long)pay, (unsigned long long)n, key);
        goto out;
    }
    /* valid: copy into the cache (a ring layer keeps the newest rows that fit its slots) */
    if (n_tokens)
        *n_tokens = (int64_t)n_ids;
    for (uint64_t i = 0; i < n_ids; i++)
        if (tokens)
            tokens[i] = (int32_t)tq_le_rd32(buf + 4 * i);
    for (int l = 0; l < c->n_layers; l++) {
        const uint64_t S = (uint64_t)tq_kvc_slots(c, l), kr = layer_k_rb(c, l);
        const uint64_t vr = layer_v_rb(c, l), keep0 = n - first[l] > S ? n - S : first[l];
        for (int g = 0; g < c->n_kv_heads; g++) {
            const uint8_t *src = p + (keep0 - first[l]) * kr; /* K rows, then V rows */
            (void)each_run(c, l, g, keep0, n, 0, run_read, &src);
            src = p + (n - first[l]) * kr + (keep0 - first[l]) * vr;
            (void)each_run(c, l, g, keep0, n, 1, run_read, &src);
            p += (n - first[l]) * (kr + vr);
        }
        if (tq_kvc_is_ring(c, l))
            c->ring_lo[l] = (int64_t)keep0;
    }
    s->n_past = (int64_t)n;
    s->n_past = (int64_t)n;
out:
    fclose(fp);
    tq_free(buf);
    tq_free(first);
    return st;
}
