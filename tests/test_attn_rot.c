/* test_attn_rot.c -- the fused attention of the rot: KV schemes (src/cpu/attn_rot*.c,
 * src/model/kvcache_rot.c), model-free:
 *   1. dec(): every ISA's decoded rows equal the codec's rotated-domain decode
 *      (tq_kv_rot_decode_rotated_row_ref) bit for bit, for every code, on encoded Gaussian rows
 *      and on random bytes (invalid pair codes included), with and without the LM pair table;
 *   2. block(): AVX2 and AVX-512 against the scalar spec on random data (q, K, V ~ N(0,1),
 *      scale 1/8): the state [m, l, acc] within a relative 1e-6 + 5e-8 * head_dim of the
 *      scalar's (float rounding of the d-term dot products moves the scores by ~1e-5 at d = 512,
 *      the weights by as much relative; the polynomial exp adds < 3e-7);
 *   3. the driver with each ISA's kernels against float64 attention over the decoded rows
 *      (|err| < 2e-5 on N(0,1) values), and batch invariance: the same bits for prefill in one
 *      call, one token at a time, chunks of 7, 1 or 2 threads, with and without a window;
 *   4. the fused cache (tq_kvcache_create) against the dequantize-window cache
 *      (tq_kvcache_window_create) on the same appended rows: |diff| < 2e-5. */
#include "cpu/attn_rot.h"
#include "kv/kv_internal.h"
#include "model/kvcache.h"
#include "t.h"

void tq_attn_rot_dec_block_scalar(const tq_rot_code *c, const uint8_t *b, float *y);

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

/* the descriptor of a codec code id (what kvcache_rot.c builds) */
static float iq4f[16];
static tq_rot_code code_of(int code)
{
    tq_rot_code o = {0};
    if (code >= TQ_KV_CODE_LM) {
        const tq_kv_lm_code *c = &tq_kv_lm_codes[code - TQ_KV_CODE_LM];
        int pb = 0;
        while ((1 << pb) < c->levels * c->levels)
            pb++;
        o = (tq_rot_code){TQ_ROTC_LM, c->group, (int)tq_kv_lm_block_bytes(c), c->levels, pb,
                          c->grid, NULL};
        /* the pair table, as kvcache_rot.c builds it (one slot per LM code) */
        static float pairs[16][2 << 15];
        const int slot = code - TQ_KV_CODE_LM;
        if (slot < 16 && tq_rot_code_pairs_floats(&o) <= sizeof(pairs[0]) / sizeof(float)) {
            tq_rot_code_fill_pairs(&o, pairs[slot]);
            o.pairs = pairs[slot];
        }
        return o;
    }
    o.group = 32;
    o.block_bytes = (int)tq_kv_rot_row_bytes(code, 64) / 2;
    o.kind = code == TQ_KV_CODE_Q8_0   ? TQ_ROTC_Q8_0
             : code == TQ_KV_CODE_Q5_0 ? TQ_ROTC_Q5_0
             : code == TQ_KV_CODE_Q4_0 ? TQ_ROTC_Q4_0
                                       : TQ_ROTC_IQ4_NL;
    for (int i = 0; i < 16; i++)
        iq4f[i] = (float)tq_kv_iq4nl_values()[i];
    o.grid = iq4f;
    return o;
}

static const tq_attn_rot_kernels *kerns[3];
static int n_kerns;

static int same_float(float a, float b)
{
    return (a != a && b != b) || memcmp(&a, &b, 4) == 0;
}

static void test_dec(void)
{
    enum { NR = 5 };
    int codes[64], nc = 0;
    for (int c = 1; c < TQ_KV_CODE_COUNT; c++)
        codes[nc++] = c;
    for (int i = 0; i < tq_kv_lm_n_codes; i++)
        codes[nc++] = TQ_KV_CODE_LM + i;
    const int dims[] = {64, 128, 256};
    static uint8_t rows[NR * 1024];
    static float want[NR * 512], got[NR * 512];
    for (int ci = 0; ci < nc; ci++)
        for (int di = 0; di < 3; di++) {
            const int d = dims[di], code = codes[ci];
            const tq_rot_code rc = code_of(code);
            const size_t rb = tq_kv_rot_row_bytes(code, d);
            CHECK(tq_rot_code_row_ok(&rc, d), "%s d %d row_ok", tq_kv_code_name(code), d);
            for (int mode = 0; mode < 2; mode++) {
                float x[512];
                for (int r = 0; r < NR; r++) {
                    if (mode == 0) {
                        for (int j = 0; j < d; j++)
                            x[j] = (float)(gs() * (r + 1));
                        tq_kv_rot_encode_row_ref(code, r & 1, x, d, rows + r * rb);
                    } else { /* any bytes; scales kept finite */
                        for (size_t b = 0; b < rb; b++)
                            rows[r * rb + b] = (uint8_t)(ur() * 256);
                        for (int o = 0; o < d; o += rc.group)
                            rows[r * rb + (size_t)(o / rc.group) * rc.block_bytes + 1] &= 0x3b;
                    }
                    tq_kv_rot_decode_rotated_row_ref(code, rows + r * rb, d, want + r * d);
                }
                for (int k = 0; k < n_kerns; k++)
                    for (int pt = 0; pt < (rc.pairs ? 2 : 1); pt++) { /* with / without pairs */
                        tq_rot_code c2 = rc;
                        if (pt)
                            c2.pairs = NULL;
                        kerns[k]->dec(&c2, rows, rb, NR, d, got);
                        int bad = -1;
                        for (int i = 0; i < NR * d && bad < 0; i++)
                            if (!same_float(want[i], got[i]))
                                bad = i;
                        CHECK(bad < 0, "%s dec %s d %d %s%s: element %d %g != codec %g",
                              kerns[k]->name, tq_kv_code_name(code), d,
                              mode ? "random bytes" : "encoded", c2.pairs ? " (pair table)" : "",
                              bad, bad >= 0 ? got[bad] : 0.0, bad >= 0 ? want[bad] : 0.0);
                    }
            }
        }
}

static void test_block(void)
{
    const int dims[] = {64, 128, 256, 512};
    for (int it = 0; it < 200; it++) {
        const int d = dims[it % 4], nv = 1 + (int)(ur() * TQ_ROT_KB);
        static float q[512], K[32 * 512], V[32 * 512], S0[514], S1[514], sc[32];
        for (int j = 0; j < d; j++)
            q[j] = (float)gs();
        for (int i = 0; i < nv * d; i++) {
            K[i] = (float)gs();
            V[i] = (float)gs();
        }
        /* a state from an earlier block: empty, or with a max above / below this block's */
        const int kind = it % 3;
        S0[0] = kind == 0 ? -INFINITY : (float)(gs() * 2.0);
        S0[1] = kind == 0 ? 0.0f : (float)(1.0 + 10.0 * ur());
        for (int j = 0; j < d; j++)
            S0[2 + j] = kind == 0 ? 0.0f : (float)gs();
        float Sr[514];
        memcpy(Sr, S0, sizeof(float) * (size_t)(d + 2));
        tq_attn_rot_scalar.block(q, K, V, nv, d, 0.125f, Sr, sc);
        for (int k = 1; k < n_kerns; k++) {
            memcpy(S1, S0, sizeof(float) * (size_t)(d + 2));
            kerns[k]->block(q, K, V, nv, d, 0.125f, S1, sc);
            /* the max is a score: its error relative to max(1, |m|) (scores near 0) */
            double worst = fabs((double)S1[0] - Sr[0]) / (fabs(Sr[0]) > 1.0 ? fabs(Sr[0]) : 1.0);
            const double rl = fabs((double)S1[1] - Sr[1]) / Sr[1];
            worst = rl > worst ? rl : worst;
            double amax = 0.0;
            for (int j = 0; j < d; j++)
                amax = fabs(Sr[2 + j]) > amax ? fabs(Sr[2 + j]) : amax;
            for (int j = 0; j < d; j++) {
                const double e = fabs((double)S1[2 + j] - Sr[2 + j]) / amax;
                worst = e > worst ? e : worst;
            }
            CHECK(worst < 1e-6 + 5e-8 * d, "%s block d %d nv %d state kind %d: off the scalar by %g (rel)",
                  kerns[k]->name, d, nv, kind, worst);
        }
    }
}

/* a layer of packed rows + the driver over it */
enum { NH = 6, NKV = 2, NT = 600 };

static void run_attn(const tq_attn_rot_kernels *kk, const tq_rot_code *kc, const tq_rot_code *vc,
                     const uint8_t *K, const uint8_t *V, size_t krb, size_t vrb, int d,
                     int64_t window, const float *q, int64_t n_q, int64_t pos0, float *out,
                     tq_pool *pool, int nth)
{
    static unsigned char scratch[2 * 600000];
    static float part[400000];
    const int group = NH / NKV;
    if (tq_attn_rot_scratch_bytes(d, group) * (size_t)nth > sizeof(scratch) ||
        tq_attn_rot_part_floats(NKV, group, d, NT) > sizeof(part) / sizeof(float)) {
        CHECK(0, "test scratch too small");
        return;
    }
    const tq_attn_rot_job j = {.kern = kk, .kc = kc, .vc = vc, .k = K, .v = V, .k_rb = krb,
                               .v_rb = vrb, .k_head_stride = NT * krb, .v_head_stride = NT * vrb,
                               .slots = NT, .n_heads = NH, .n_kv_heads = NKV, .hd = d,
                               .scale = 0.125f, .window = window, .q = q, .n_q = n_q,
                               .pos0 = pos0, .out = out, .scratch = scratch, .part = part};
    tq_attn_rot_run(&j, pool);
}

static void test_driver(tq_pool *pool)
{
    const int d = 128;
    const char *schemes[] = {"rot:q8_0/q4_0", "rot:l32g64/l11g64", "rot:l181g64/l32g64",
                             "rot:l64g64/l22g64", "rot:q8_0"};
    static float k[NT * NKV * 128], v[NT * NKV * 128], q[NT * NH * 128];
    static float kd[NT * NKV * 128], vd[NT * NKV * 128];
    static float o1[NT * NH * 128], o2[NT * NH * 128];
    static uint8_t K[NKV * NT * 256], V[NKV * NT * 256];
    for (int i = 0; i < NT * NKV * d; i++) {
        k[i] = (float)(gs() * 1.5 + (i % d == 3 ? 4.0 : 0.0)); /* an outlier channel */
        v[i] = (float)gs();
    }
    for (int i = 0; i < NT * NH * d; i++)
        q[i] = (float)gs();
    for (size_t si = 0; si < sizeof(schemes) / sizeof(schemes[0]); si++) {
        tq_kv_scheme s;
        CHECK(tq_kv_scheme_parse(schemes[si], &s) == TQ_OK, "parse %s", schemes[si]);
        const tq_rot_code kc = code_of(s.k_bits), vc = code_of(s.v_bits);
        const size_t krb = tq_kv_rot_row_bytes(s.k_bits, d), vrb = tq_kv_rot_row_bytes(s.v_bits, d);
        /* rotated-domain rows: K and V stored head-major; the decoded copy is the oracle's */
        for (int t = 0; t < NT; t++)
            for (int g = 0; g < NKV; g++) {
                const int o = (t * NKV + g) * d;
                uint8_t *kr = K + ((size_t)g * NT + t) * krb, *vr = V + ((size_t)g * NT + t) * vrb;
                tq_kv_rot_encode_row_ref(s.k_bits, 0, k + o, d, kr);
                tq_kv_rot_encode_row_ref(s.v_bits, 1, v + o, d, vr);
                tq_kv_rot_decode_rotated_row_ref(s.k_bits, kr, d, kd + o);
                tq_kv_rot_decode_rotated_row_ref(s.v_bits, vr, d, vd + o);
            }
        for (int wi = 0; wi < 2; wi++) {
            const int64_t W = wi ? 300 : 0; /* a window that is not a multiple of the blocks */
            for (int kk = 0; kk < n_kerns; kk++) {
                const tq_attn_rot_kernels *kn = kerns[kk];
                /* prefill of all NT queries at once (q taken as already rotated) */
                run_attn(kn, &kc, &vc, K, V, krb, vrb, d, W, q, NT, 0, o1, NULL, 1);
                /* oracle: float64 attention over the decoded rows, sampled rows */
                double worst = 0.0;
                for (int i = 0; i < NT; i += 37)
                    for (int h = 0; h < NH; h++) {
                        const int g = h / (NH / NKV);
                        const int lo = W && i + 1 > W ? i + 1 - (int)W : 0;
                        double sc[NT], mx = -1e300, sum = 0.0, oo[128] = {0};
                        for (int t = lo; t <= i; t++) {
                            double dd = 0.0;
                            for (int e = 0; e < d; e++)
                                dd += (double)q[(i * NH + h) * d + e] * kd[(t * NKV + g) * d + e];
                            sc[t] = 0.125 * dd;
                            mx = sc[t] > mx ? sc[t] : mx;
                        }
                        for (int t = lo; t <= i; t++) {
                            sc[t] = exp(sc[t] - mx);
                            sum += sc[t];
                        }
                        for (int t = lo; t <= i; t++)
                            for (int e = 0; e < d; e++)
                                oo[e] += sc[t] / sum * vd[(t * NKV + g) * d + e];
                        for (int e = 0; e < d; e++) {
                            const double er = fabs(oo[e] - o1[(i * NH + h) * d + e]);
                            worst = er > worst ? er : worst;
                        }
                    }
                CHECK(worst < 2e-5, "%s %s window %lld: off float64 attention by %g", kn->name,
                      schemes[si], (long long)W, worst);
                /* batch invariance: one token at a time (decode form, 2 threads) */
                for (int i = 0; i < NT; i++)
                    run_attn(kn, &kc, &vc, K, V, krb, vrb, d, W, q + (size_t)i * NH * d, 1, i,
                             o2 + (size_t)i * NH * d, pool, 2);
                CHECK(!memcmp(o1, o2, sizeof(float) * NT * NH * d),
                      "%s %s window %lld: decode one by one != prefill", kn->name, schemes[si],
                      (long long)W);
                /* chunks of 7 (prefill form past 4 queries, decode form below), 2 threads */
                memset(o2, 0, sizeof(float) * NT * NH * d);
                for (int i = 0; i < NT; i += 7) {
                    const int n = NT - i < 7 ? NT - i : 7;
                    run_attn(kn, &kc, &vc, K, V, krb, vrb, d, W, q + (size_t)i * NH * d, n, i,
                             o2 + (size_t)i * NH * d, pool, 2);
                }
                CHECK(!memcmp(o1, o2, sizeof(float) * NT * NH * d),
                      "%s %s window %lld: chunks of 7 != prefill", kn->name, schemes[si],
                      (long long)W);
            }
        }
    }
}

static void test_cache(void)
{
    enum { CH = 4, CKV = 2, CD = 64, CT = 300 };
    const char *schemes[] = {"rot:q8_0/q4_0", "rot:l32g64/l11g64", "rot:l64g64/l22g64",
                             "rot:l181g64/l32g64", "rot:iq4_nl", "rot:q5_0"};
    static float k[CT * CKV * CD], v[CT * CKV * CD], q[CT * CH * CD], o1[CT * CH * CD],
        o2[CT * CH * CD];
    for (int i = 0; i < CT * CKV * CD; i++) {
        k[i] = (float)(gs() * 2.0);
        v[i] = (float)gs();
    }
    for (int i = 0; i < CT * CH * CD; i++)
        q[i] = (float)gs();
    for (size_t si = 0; si < sizeof(schemes) / sizeof(schemes[0]); si++) {
        tq_kv_scheme s;
        tq_kvcache *a = NULL, *b = NULL;
        CHECK(tq_kv_scheme_parse(schemes[si], &s) == TQ_OK, "parse %s", schemes[si]);
        CHECK(tq_kvcache_create(s, 1, CH, CKV, CD, CT, 0.125f, 1, &a) == TQ_OK && a,
              "%s fused create: %s", schemes[si], tq_last_error());
        CHECK(tq_kvcache_window_create(s, 1, CH, CKV, CD, CT, 0.125f, 1, &b) == TQ_OK && b,
              "%s window create: %s", schemes[si], tq_last_error());
        if (!a || !b) {
            tq_kvcache_free(a);
            tq_kvcache_free(b);
            continue;
        }
        CHECK(!strcmp(a->ops->name, "rot-fused"), "%s: cache is %s", schemes[si], a->ops->name);
        CHECK(tq_kvcache_token_bytes(a) == tq_kvcache_token_bytes(b), "%s bytes per token",
              schemes[si]);
        CHECK(a->ops->append(a, 0, 0, k, v, CT) == TQ_OK, "append");
        CHECK(b->ops->append(b, 0, 0, k, v, CT) == TQ_OK, "append");
        CHECK(!memcmp(a->k[0], b->k[0], (size_t)CKV * CT * a->k_row_bytes) &&
                  !memcmp(a->v[0], b->v[0], (size_t)CKV * CT * a->v_row_bytes),
              "%s: fused and window caches store different bytes", schemes[si]);
        a->ops->attend(a, 0, q, CT, 0, o1, NULL);
        b->ops->attend(b, 0, q, CT, 0, o2, NULL);
        double worst = 0.0;
        for (int i = 0; i < CT * CH * CD; i++) {
            const double e = fabs((double)o1[i] - o2[i]);
            worst = e > worst ? e : worst;
        }
        CHECK(worst < 2e-5, "%s: fused vs dequantize-window attention differ by %g", schemes[si],
              worst);
        tq_kvcache_free(a);
        tq_kvcache_free(b);
    }
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_attn_rot");
    rs = t_seed;
    kerns[n_kerns++] = &tq_attn_rot_scalar;
#if defined(__x86_64__)
    if (tq_cpu_supports(TQ_ISA_AVX2))
        kerns[n_kerns++] = &tq_attn_rot_avx2;
    else
        printf("note: AVX2 kernels not tested (this CPU has no AVX2)\n");
    if (tq_cpu_supports(TQ_ISA_AVX512))
        kerns[n_kerns++] = &tq_attn_rot_avx512;
    else
        printf("note: AVX-512 kernels not tested (this CPU has no AVX-512)\n");
#endif
    tq_pool *pool = NULL;
    CHECK(tq_pool_create(2, &pool) == TQ_OK, "pool");
    test_dec();
    test_block();
    test_driver(pool);
    test_cache();
    tq_pool_free(pool);
    return t_done();
}
