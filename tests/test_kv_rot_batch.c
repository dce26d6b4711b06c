/* test_kv_rot_batch.c -- tq_kvcache_attend_batch() on rot: caches (kvcache_rot.c's batch op: one
 * pool job, one unit per (sequence, kv-head)) against each cache's own append() + attend(), bit
 * for bit: outputs and stored rows, over decode steps of sequences of different lengths (one with
 * a sliding window kept as a ring), items of 1..4 tokens (the shared job) and of more (each alone),
 * a single item, pools of 1 and 2 threads, on every scheme below. Model-free. Seed printed. */
#include <math.h>
#include <string.h>

#include "model/kvcache.h"
#include "t.h"
#include "turboquant.h"

static uint64_t rs = 1;
static double ur(void)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return ((rs >> 11) + 0.5) / 9007199254740992.0;
}
static float gs(void)
{
    return (float)(sqrt(-2.0 * log(ur())) * cos(6.283185307179586 * ur()));
}

enum { NL = 2, NH = 6, NKV = 2, HD = 64, CTX = 700, NSEQ = 5, STEPS = 6, MAXN = 9 };

static void run(const char *scheme, int threads)
{
    tq_kv_scheme sc;
    CHECK(tq_kv_scheme_parse(scheme, &sc) == TQ_OK, "%s parses", scheme);
    tq_pool *pool = NULL;
    CHECK(tq_pool_create(threads, &pool) == TQ_OK, "pool");
    tq_kvcache *a[NSEQ], *b[NSEQ];
    static const int win[NL] = {0, 64}; /* layer 1: a sliding window, kept as a ring in seq 4 */
    for (int s = 0; s < NSEQ; s++) {
        CHECK(tq_kvcache_create(sc, NL, NH, NKV, HD, CTX, 0.125f, threads, &a[s]) == TQ_OK &&
                  tq_kvcache_create(sc, NL, NH, NKV, HD, CTX, 0.125f, threads, &b[s]) == TQ_OK,
              "%s: caches", scheme);
        if (s == NSEQ - 1) {
            CHECK(tq_kvcache_set_window(a[s], win, 16, 0) == TQ_OK &&
                      tq_kvcache_set_window(b[s], win, 16, 0) == TQ_OK, "ring");
        }
    }
    /* prompts of different lengths (one over a key chunk of 256), appended alike */
    static float k[MAXN * 300 * NKV * HD], v[MAXN * 300 * NKV * HD], q[300 * NH * HD];
    static float o1[300 * NH * HD], o2[300 * NH * HD];
    int64_t pos[NSEQ];
    for (int s = 0; s < NSEQ; s++) {
        pos[s] = 5 + 67 * s;
        const int64_t n = pos[s];
        for (int64_t i = 0; i < n * NKV * HD; i++) {
            k[i] = gs() * 2.0f;
            v[i] = gs();
        }
        for (int64_t i = 0; i < n * NH * HD; i++)
            q[i] = gs();
        for (int il = 0; il < NL; il++)
            for (int t0 = 0; t0 < n; t0 += 16) { /* chunks of at most n_batch = 16 */
                const int64_t m = n - t0 < 16 ? n - t0 : 16;
                const float *kk = k + (size_t)t0 * NKV * HD, *vv = v + (size_t)t0 * NKV * HD;
                CHECK(a[s]->ops->append(a[s], il, t0, kk, vv, m) == TQ_OK &&
                          b[s]->ops->append(b[s], il, t0, kk, vv, m) == TQ_OK, "prefill");
            }
    }
    int bad_out = 0, bad_rows = 0, n_items = 0;
    for (int step = 0; step < STEPS; step++) {
        /* step 3: one item alone; step 5: sequence 1 brings 9 tokens (> the decode form) */
        const int nseq = step == 3 ? 1 : NSEQ;
        tq_kvc_item it[NSEQ];
        size_t ko = 0, qo = 0;
        for (int s = 0; s < nseq; s++) {
            const int64_t n = step == 5 && s == 1 ? 9 : 1 + (step + s) % 4;
            for (int64_t i = 0; i < n * NKV * HD; i++) {
                k[ko + i] = gs() * 2.0f;
                v[ko + i] = gs();
            }
            for (int64_t i = 0; i < n * NH * HD; i++)
                q[qo + i] = gs();
            it[s] = (tq_kvc_item){b[s], pos[s], n, k + ko, v + ko, q + qo, o2 + qo};
            ko += (size_t)n * NKV * HD;
            qo += (size_t)n * NH * HD;
        }
        for (int il = 0; il < NL; il++) {
            memset(o2, 0, sizeof(float) * qo);
            /* the reference: each cache alone */
            for (int s = 0; s < nseq; s++) {
                const tq_kvc_item *e = &it[s];
                CHECK(a[s]->ops->append(a[s], il, e->pos, e->k, e->v, e->n) == TQ_OK, "append");
                a[s]->ops->attend(a[s], il, e->q, e->n, e->pos, o1 + (e->out - o2), pool);
            }
            CHECK(tq_kvcache_attend_batch(it, nseq, il, pool) == TQ_OK, "%s: batch", scheme);
            for (int s = 0; s < nseq; s++) {
                const tq_kvc_item *e = &it[s];
                n_items++;
                if (memcmp(o1 + (e->out - o2), e->out, sizeof(float) * (size_t)e->n * NH * HD)) {
                    if (bad_out++ < 4)
                        CHECK(0, "%s threads %d step %d layer %d seq %d (%lld tokens at %lld): "
                                 "batched output differs from alone", scheme, threads, step, il,
                              s, (long long)e->n, (long long)e->pos);
                }
                /* the rows written so far: slots [0, min(pos + n, S)) of each kv-head */
                const int64_t S = tq_kvc_slots(a[s], il);
                const int64_t w = e->pos + e->n < S ? e->pos + e->n : S;
                const size_t kr = a[s]->k_row_bytes, vr = a[s]->v_row_bytes;
                for (int g = 0; g < NKV; g++)
                    if (memcmp(a[s]->k[il] + (size_t)(g * S) * kr, b[s]->k[il] + (size_t)(g * S) * kr,
                               (size_t)w * kr) ||
                        memcmp(a[s]->v[il] + (size_t)(g * S) * vr, b[s]->v[il] + (size_t)(g * S) * vr,
                               (size_t)w * vr))
                        bad_rows++;
            }
        }
        for (int s = 0; s < nseq; s++)
            pos[s] += it[s].n;
    }
    CHECK(bad_out == 0 && bad_rows == 0, "%s threads %d: %d of %d outputs, %d caches differ",
          scheme, threads, bad_out, n_items, bad_rows);
    printf("  %-22s threads %d: %d batched items bit-identical to alone (outputs %d differ, "
           "rows %d differ)\n", scheme, threads, n_items, bad_out, bad_rows);
    for (int s = 0; s < NSEQ; s++) {
        tq_kvcache_free(a[s]);
        tq_kvcache_free(b[s]);
    }
    tq_pool_free(pool);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_kv_rot_batch");
    rs = t_seed;
    const char *schemes[] = {"rot:l181g64/l32g64", "rot:q8_0/q4_0", "rot:iq4_nl"};
    for (int i = 0; i < 3; i++)
        for (int th = 1; th <= 2; th++)
            run(schemes[i], th);
    return t_done();
}
