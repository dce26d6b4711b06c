/* test_kv_rot_cache.c -- rot: schemes in the engine's generic window cache (src/model/kvcache.c
 * routes TQ_KV_ROT to the decode-window path): the cache accepts them, stores the row codec's
 * bytes, reports their bytes per token, and attends like float64 attention over the decoded rows.
 * Model-free. */
#include "kv/kv_internal.h"
#include "model/kvcache.h"
#include "t.h"

static uint64_t rs = 1;
static double ur(void)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return ((rs >> 11) + 0.5) / 9007199254740992.0;
}
static double gs(void)
{
    return sqrt(-2.0 * log(ur())) * cos(6.283185307179586 * ur());
}

enum { NH = 4, NKV = 2, HD = 64, NT = 40 };

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_kv_rot_cache");
    rs = t_seed;
    const char *schemes[] = {"rot:q8_0/q4_0", "rot:l32g64/l11g64", "rot:iq4_nl"};
    static float k[NT * NKV * HD], v[NT * NKV * HD], q[NT * NH * HD], out[NT * NH * HD];
    for (int i = 0; i < NT * NKV * HD; i++) {
        k[i] = (float)(gs() * 2.0);
        v[i] = (float)gs();
    }
    for (int i = 0; i < NT * NH * HD; i++)
        q[i] = (float)gs();
    for (size_t si = 0; si < sizeof(schemes) / sizeof(schemes[0]); si++) {
        tq_kv_scheme s;
        tq_kvcache *c = NULL;
        CHECK(tq_kv_scheme_parse(schemes[si], &s) == TQ_OK, "parse %s", schemes[si]);
        tq_status st = tq_kvcache_create(s, 1, NH, NKV, HD, NT, 0.125f, 1, &c);
        CHECK(st == TQ_OK && c, "%s: cache create: %s", schemes[si], tq_last_error());
        if (!c)
            continue;
        const size_t kb = tq_kv_row_bytes1(s, 0, HD), vb = tq_kv_row_bytes1(s, 1, HD);
        CHECK(tq_kvcache_token_bytes(c) == (kb + vb) * NKV, "%s: %zu bytes per token", schemes[si],
              tq_kvcache_token_bytes(c));
        CHECK(c->ops->append(c, 0, 0, k, v, NT) == TQ_OK, "%s append", schemes[si]);
        c->ops->attend(c, 0, q, NT, 0, out, NULL);
        /* oracle: decode every row with the codec, attention in double */
        static float kd[NT * NKV * HD], vd[NT * NKV * HD];
        uint8_t row[128];
        for (int t = 0; t < NT; t++)
            for (int g = 0; g < NKV; g++) {
                const int o = (t * NKV + g) * HD;
                tq_kv_encode_row_ref(s, 0, k + o, HD, row);
                tq_kv_decode_row_ref(s, 0, row, HD, kd + o);
                tq_kv_encode_row_ref(s, 1, v + o, HD, row);
                tq_kv_decode_row_ref(s, 1, row, HD, vd + o);
            }
        double worst = 0;
        for (int i = 0; i < NT; i++)
            for (int h = 0; h < NH; h++) {
                const int g = h / (NH / NKV);
                double sc[NT], mx = -1e300, sum = 0, o[HD] = {0};
                for (int t = 0; t <= i; t++) {
                    double d = 0;
                    for (int j = 0; j < HD; j++)
                        d += (double)q[(i * NH + h) * HD + j] * kd[(t * NKV + g) * HD + j];
                    sc[t] = 0.125 * d;
                    mx = sc[t] > mx ? sc[t] : mx;
                }
                for (int t = 0; t <= i; t++) {
                    sc[t] = exp(sc[t] - mx);
                    sum += sc[t];
                }
                for (int t = 0; t <= i; t++)
                    for (int j = 0; j < HD; j++)
                        o[j] += sc[t] / sum * vd[(t * NKV + g) * HD + j];
                for (int j = 0; j < HD; j++) {
                    const double e = fabs(o[j] - out[(i * NH + h) * HD + j]);
                    worst = e > worst ? e : worst;
                }
            }
        CHECK(worst < 2e-5, "%s: attention off the float64 oracle by %g", schemes[si], worst);
        tq_kvcache_free(c);
    }
    return t_done();
}
