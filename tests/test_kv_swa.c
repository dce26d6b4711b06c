/* test_kv_swa.c -- sliding-window layers kept as ring buffers (issue 11 item 5;
 * tq_kvcache_set_window, src/model/kvcache.c): on the tiny random Gemma 3 model (layer 0
 * sliding, window 8) with n_ctx 1024 and n_batch 16 (a ring of 256 rows), for every cache scheme
 * of the engine (plain, codec, turbo fused and reference, rot: fused):
 *   - the logits of a ring session equal those of a keep-everything session (swa_full) bit for
 *     bit over 640 tokens (the ring wraps twice): a prefill in chunks, then token by token;
 *   - the ring holds less: tq_session_kv_bytes' bytes_used;
 *   - trim: back a little (the keys the next token needs are still held) continues bit-exact;
 *     back below the window's start is refused (TQ_E_UNSUPPORTED naming the layer and the fix)
 *     with the session unchanged;
 *   - snapshots across the wrap: save a ring session, restore into a fresh ring session and
 *     continue: same floats as the original; a keep-everything snapshot restores into a ring
 *     session (the newest rows kept); a ring snapshot into a keep-everything session is refused.
 * Token ids are random (seed printed). */
#include <stdlib.h>
#include <unistd.h>

#include "turboquant.h"
#include "t.h"

#define N_CTX 1024
#define N_BATCH 16
#define T_PRE 300
#define T_ALL 640

static tq_model *g_m;
static int g_vocab;

static tq_session *mk(const char *scheme, int swa_full, tq_turbo_attn ta)
{
    tq_session_opts so;
    tq_session_opts_default(&so);
    if (tq_kv_scheme_parse(scheme, &so.kv) != TQ_OK) {
        printf("scheme %s: %s\n", scheme, tq_last_error());
        return NULL;
    }
    so.n_ctx = N_CTX;
    so.n_batch = N_BATCH;
    so.swa_full = swa_full;
    so.turbo_attn = ta;
    tq_session *s = NULL;
    if (tq_session_create(g_m, &so, &s)) {
        printf("session %s: %s\n", scheme, tq_last_error());
        return NULL;
    }
    return s;
}

/* feed tokens [a, b) one by one, logits of each into lg (rows a..) */
static int step(tq_session *s, const int32_t *tok, int a, int b, float *lg)
{
    for (int i = a; i < b; i++)
        if (tq_session_eval(s, tok + i, 1, lg + (size_t)i * g_vocab))
            return -1;
    return 0;
}

static int same(const float *a, const float *b, int r0, int r1)
{
    return !memcmp(a + (size_t)r0 * g_vocab, b + (size_t)r0 * g_vocab,
                   (size_t)(r1 - r0) * g_vocab * sizeof(float));
}

static void check_scheme(const char *scheme, tq_turbo_attn ta, const int32_t *tok)
{
    char nm[64];
    snprintf(nm, sizeof(nm), "%s%s", scheme, ta == TQ_TURBO_ATTN_REF ? " (ref attention)" : "");
    tq_session *full = mk(scheme, 1, ta), *ring = mk(scheme, 0, ta);
    CHECK(full && ring, "%s: sessions", nm);
    const size_t lgn = (size_t)T_ALL * g_vocab;
    float *lf = calloc(lgn, sizeof(float)), *lr = calloc(lgn, sizeof(float));
    float *lx = calloc(lgn, sizeof(float));
    if (!full || !ring || !lf || !lr || !lx)
        goto out;
    /* 1. prefill (chunks of N_BATCH) then decode past two wraps */
    tq_status a = tq_session_eval_all(full, tok, T_PRE, lf, (int64_t)lgn);
    tq_status b = tq_session_eval_all(ring, tok, T_PRE, lr, (int64_t)lgn);
    CHECK(!a && !b, "%s: prefill: %s", nm, tq_last_error());
    CHECK(!step(full, tok, T_PRE, T_ALL, lf) && !step(ring, tok, T_PRE, T_ALL, lr),
          "%s: decode: %s", nm, tq_last_error());
    CHECK(same(lf, lr, 0, T_ALL), "%s: ring logits == keep-everything logits, bit for bit", nm);
    tq_kv_usage uf, ur;
    tq_session_kv_bytes(full, &uf);
    tq_session_kv_bytes(ring, &ur);
    CHECK(ur.bytes_used < uf.bytes_used && ur.bytes_capacity < uf.bytes_capacity &&
              ur.bytes_per_token == uf.bytes_per_token,
          "%s: ring holds less (used %zu vs %zu, capacity %zu vs %zu)", nm, ur.bytes_used,
          uf.bytes_used, ur.bytes_capacity, uf.bytes_capacity);

    /* 2. trim: 100 back is held (ring of 256, window 8); continue bit-exact */
    CHECK(tq_session_trim(full, 100) == TQ_OK && tq_session_trim(ring, 100) == TQ_OK,
          "%s: trim 100: %s", nm, tq_last_error());
    CHECK(!step(full, tok, T_ALL - 100, T_ALL, lf) && !step(ring, tok, T_ALL - 100, T_ALL, lr),
          "%s: decode after trim: %s", nm, tq_last_error());
    CHECK(same(lf, lr, T_ALL - 100, T_ALL), "%s: after a trim: ring == keep-everything", nm);
    /* 3. trim below the window's start: refused, session unchanged */
    tq_status st = tq_session_trim(ring, 400);
    CHECK(st == TQ_E_UNSUPPORTED && strstr(tq_last_error(), "layer 0") &&
              strstr(tq_last_error(), "sliding window") && strstr(tq_last_error(), "reset"),
          "%s: trim below the window refused: %s %s", nm, tq_status_str(st), tq_last_error());
    CHECK(tq_session_n_past(ring) == T_ALL, "%s: refused trim leaves n_past %lld", nm,
          (long long)tq_session_n_past(ring));
    CHECK(tq_session_trim(full, 400) == TQ_OK, "%s: keep-everything trims anywhere", nm);

    /* 4. snapshots across the wrap: ring at 450 -> fresh ring, continue */
    char snap[64], snapf[64];
    snprintf(snap, sizeof(snap), "/tmp/test_kv_swa_%d.snap", (int)getpid());
    snprintf(snapf, sizeof(snapf), "/tmp/test_kv_swa_%d_full.snap", (int)getpid());
    tq_session *r2 = mk(scheme, 0, ta), *f2 = mk(scheme, 1, ta), *r3 = mk(scheme, 0, ta);
    CHECK(r2 && f2 && r3, "%s: more sessions", nm);
    if (r2 && f2 && r3) {
        tq_session_reset(ring);
        tq_session_reset(full);
        CHECK(!tq_session_eval(ring, tok, 450, NULL) && !tq_session_eval(full, tok, 450, NULL),
              "%s: eval 450: %s", nm, tq_last_error());
        CHECK(tq_session_save(ring, tok, 450, snap) == TQ_OK, "%s: save ring: %s", nm,
              tq_last_error());
        CHECK(tq_session_save(full, tok, 450, snapf) == TQ_OK, "%s: save full: %s", nm,
              tq_last_error());
        int32_t ids[512];
        int64_t n_ids = 0;
        CHECK(tq_session_load(r2, snap, ids, 512, &n_ids) == TQ_OK && n_ids == 450 &&
                  !memcmp(ids, tok, 450 * sizeof(int32_t)),
              "%s: load ring snapshot into a ring session: %s", nm, tq_last_error());
        CHECK(tq_session_load(r3, snapf, ids, 512, &n_ids) == TQ_OK && n_ids == 450,
              "%s: load keep-everything snapshot into a ring session: %s", nm, tq_last_error());
        st = tq_session_load(f2, snap, ids, 512, &n_ids);
        CHECK(st == TQ_E_UNSUPPORTED && strstr(tq_last_error(), "swa_full") &&
                  tq_session_n_past(f2) == 0,
              "%s: ring snapshot into a keep-everything session refused: %s", nm,
              tq_last_error());
        CHECK(!step(ring, tok, 450, 600, lr) && !step(r2, tok, 450, 600, lx),
              "%s: continue after restore: %s", nm, tq_last_error());
        CHECK(same(lr, lx, 450, 600), "%s: restored ring continues with the same floats", nm);
        CHECK(!step(r3, tok, 450, 600, lx), "%s: continue r3", nm);
        CHECK(same(lr, lx, 450, 600), "%s: keep-everything snapshot in a ring: same floats", nm);
        CHECK(!step(full, tok, 450, 600, lf) && same(lf, lx, 450, 600),
              "%s: ... and the keep-everything session's", nm);
        /* the ring snapshot is smaller than the keep-everything one */
        FILE *f = fopen(snap, "rb"), *g = fopen(snapf, "rb");
        long zs = 0, zf = 0;
        if (f && g && !fseek(f, 0, SEEK_END) && !fseek(g, 0, SEEK_END)) {
            zs = ftell(f);
            zf = ftell(g);
        }
        if (f)
            fclose(f);
        if (g)
            fclose(g);
        CHECK(zs > 0 && zs < zf, "%s: ring snapshot %ld bytes < keep-everything %ld", nm, zs, zf);
    }
    unlink(snap);
    unlink(snapf);
    tq_session_free(r2);
    tq_session_free(f2);
    tq_session_free(r3);
out:
    tq_session_free(full);
    tq_session_free(ring);
    free(lf);
    free(lr);
    free(lx);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_kv_swa");
    if (access("tests/data/tiny/gemma3/model.safetensors", R_OK))
        return t_skip("tests/data/tiny/gemma3 missing (run from the repository root)");
    tq_log_set_level(TQ_LOG_ERROR);
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_F32;
    mo.n_threads = 2;
    tq_status st = tq_model_load("tests/data/tiny/gemma3", &mo, &g_m);
    CHECK(st == TQ_OK, "load: %s", tq_last_error());
    if (st)
        return t_done();
    tq_model_info info;
    tq_model_get_info(g_m, &info);
    g_vocab = info.vocab_size;
    int32_t tok[T_ALL];
    srand(t_seed);
    for (int i = 0; i < T_ALL; i++)
        tok[i] = 3 + rand() % (g_vocab - 3);
    static const char *const schemes[] = {"f32", "f16", "bf16", "kv8", "kv4", "turbo",
                                          "turbo:k4v3+rk", "turbo+sq", "rot:q8_0/q4_0", "rot:l64g64/l22g64"};
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
        check_scheme(schemes[i], TQ_TURBO_ATTN_FUSED, tok);
    check_scheme("turbo", TQ_TURBO_ATTN_REF, tok);
    tq_model_free(g_m);
    return t_done();
}
