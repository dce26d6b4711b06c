/* test_qdot_amx.c -- the AMX int8 tiles (src/cpu/qdot_amx.h) on random blocks (seed printed):
 *  1. every format's AMX matvec equals this file's own scalar reading of qdot.h's per-block q8
 *     spec bit for bit, and equals the library's scalar reference (tq_qdot_scalar() /
 *     tq_iq4nl_scalar()), for n = 1..20, 23, 33 tokens (8- and 16-column tiles, padded token
 *     groups, several groups), k = 32 .. 2048 and one k above TQ_AMX_MAXK (the fallback), rows
 *     [r0, r1) with odd counts and a tail group; nothing written outside those rows and tokens;
 *     gemm_q8 and mv_q8 over 600 rows x 37, 8 and 5 tokens too (several row chunks and token
 *     groups; a group of <= 8 tokens runs as row pairs: 32 rows per tile product);
 *     the r16 tile (tq_qdot_amx_r16: Q4_0, Q4_1, Q8_0 groups read in place) for 1..9 tokens;
 *  2. the format table: with tq_cpu_amx(), the 32-formats' q8 kernel is named "amx-int8".
 * SKIPS (exit 77) with the reason when the library was built without AMX or this CPU/OS does not
 * grant it (CI machines need not have AMX). */
#include <math.h>

#include "core/half.h"
#include "core/rng.h"
#include "cpu/formats_cpu.h"
#include "cpu/qdot.h"
#include "cpu/qdot_amx.h"
#include "cpu/qdot_iq4nl.h"
#include "cpu/qdot_r16.h"
#include "t.h"
#include "turboquant.h"

static tq_rng rng;

typedef struct fmt {
    int id;
    const char *name;
    int bytes;
} fmt;

static const fmt fmts[] = {
    {TQ_GGML_Q8_0, "Q8_0", 34}, {TQ_GGML_Q4_0, "Q4_0", 18}, {TQ_GGML_Q4_1, "Q4_1", 20},
    {TQ_GGML_Q5_0, "Q5_0", 22}, {TQ_GGML_Q5_1, "Q5_1", 24}, {TQ_FMT_IQ4_NL, "IQ4_NL", 18},
};

/* the weight integers of one block, d and m (0 for the signed formats) */
static void unpack(int id, const uint8_t *b, int *wq, float *d, float *m)
{
    *d = tq_f16_to_f32(tq_rd16(b));
    *m = 0.0f;
    if (id == TQ_GGML_Q8_0) {
        for (int j = 0; j < 32; j++)
            wq[j] = (int8_t)b[2 + j];
        return;
    }
    const int off = id == TQ_GGML_Q4_1 ? 4 : id == TQ_GGML_Q5_0 ? 6 : id == TQ_GGML_Q5_1 ? 8 : 2;
    for (int j = 0; j < 16; j++) {
        wq[j] = b[off + j] & 15;
        wq[j + 16] = b[off + j] >> 4;
    }
    if (id == TQ_GGML_Q5_0 || id == TQ_GGML_Q5_1) {
        const uint32_t qh = tq_rd32(b + (id == TQ_GGML_Q5_0 ? 2 : 4));
        for (int j = 0; j < 32; j++)
            wq[j] += (int)((qh >> j) & 1) << 4;
    }
    for (int j = 0; j < 32; j++) {
        if (id == TQ_GGML_Q4_0)
            wq[j] -= 8;
        else if (id == TQ_GGML_Q5_0)
            wq[j] -= 16;
        else if (id == TQ_FMT_IQ4_NL)
            wq[j] = tq_iq4nl_values[wq[j]];
    }
    if (id == TQ_GGML_Q4_1 || id == TQ_GGML_Q5_1)
        *m = tq_f16_to_f32(tq_rd16(b + 2));
}

/* qdot.h's per-block q8 spec, read independently of the library */
static float ref_dot(int id, int bytes, const uint8_t *w, const tq_q8a *a, int64_t nb)
{
    float acc = 0.0f, accm = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int wq[32];
        float d, m;
        unpack(id, w + b * bytes, wq, &d, &m);
        int32_t P = 0;
        for (int j = 0; j < 32; j++)
            P += wq[j] * a[b].qs[j];
        const float dd = d * a[b].d;
        acc = fmaf((float)P, dd, acc);
        const float ms = m * a[b].s;
        accm = accm + ms;
    }
    const float r = acc + accm;
    return r;
}

static void rand_blocks(int id, int bytes, uint8_t *w, int64_t nblk)
{
    for (int64_t i = 0; i < nblk; i++) {
        uint8_t *b = w + bytes * i;
        for (int j = 0; j < bytes; j++)
            b[j] = (uint8_t)tq_rng_u64(&rng);
        float d = 0.001f + 0.05f * tq_rng_uniform(&rng);
        if (tq_rng_u64(&rng) & 1)
            d = -d;
        tq_wr16(b, tq_f32_to_f16(d));
        if (id == TQ_GGML_Q4_1 || id == TQ_GGML_Q5_1)
            tq_wr16(b + 2, tq_f32_to_f16(-0.1f * tq_rng_uniform(&rng)));
    }
}

static tq_qmv_q8_fn scalar_mv(int id)
{
    return id == TQ_FMT_IQ4_NL ? tq_iq4nl_scalar()->mv_q8 : tq_qdot_scalar()->mv_q8[id];
}

static void check_format(const fmt *f)
{
    enum { MAXR = 37, MAXN = 33 };
    static const int kbs[] = {1, 2, 3, 5, 8, 9, 18, 48, 64, 65};
    static const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                             20, 23, 33};
    const tq_qmv_q8_fn amx_mv = tq_qdot_amx_mv(f->id), sc = scalar_mv(f->id);
    const tq_qmv_q8_fn amx_gemm = tq_qdot_amx_gemm(f->id);
    CHECK(amx_mv && amx_gemm && sc, "%s: AMX and scalar kernels exist", f->name);
    if (!amx_mv || !amx_gemm || !sc)
        return;
    int bad_ref = 0, bad_lib = 0, bad_out = 0, checked = 0;
    for (size_t ki = 0; ki < sizeof(kbs) / sizeof(kbs[0]); ki++) {
        const int64_t nb = kbs[ki], k = 32 * nb;
        const size_t rb = (size_t)nb * (size_t)f->bytes;
        uint8_t *w = malloc(MAXR * rb);
        float *x = malloc(sizeof(float) * MAXN * (size_t)k);
        tq_q8a *a = malloc(sizeof(tq_q8a) * MAXN * (size_t)nb);
        float *y0 = malloc(sizeof(float) * MAXN * MAXR), *y1 = malloc(sizeof(float) * MAXN * MAXR);
        if (!w || !x || !a || !y0 || !y1) {
            CHECK(0, "out of memory");
            return;
        }
        rand_blocks(f->id, f->bytes, w, (int64_t)MAXR * nb);
        for (int64_t i = 0; i < MAXN * k; i++)
            x[i] = (float)tq_rng_normal(&rng) * (tq_rng_u64(&rng) % 16 ? 1.0f : 8.0f);
        for (int t = 0; t < MAXN; t++)
            tq_qdot_scalar()->quant_q8a(x + t * k, a + t * nb, k);
        tq_q8p *pk = aligned_alloc(64, sizeof(tq_q8p) * (size_t)tq_q8p_count(k, MAXN));
        for (size_t ni = 0; ni < 2 * sizeof(ns) / sizeof(ns[0]); ni++) {
            const int n = ns[ni / 2], gemm = ni & 1; /* mv_q8 over tq_q8a, gemm_q8 over tq_q8p */
            const int64_t r0 = (int64_t)(tq_rng_u64(&rng) % 5);
            const int64_t r1 = MAXR - (int64_t)(tq_rng_u64(&rng) % 7);
            for (int i = 0; i < MAXN * MAXR; i++)
                y0[i] = y1[i] = -7.0f;
            sc(w, rb, k, a, n, y0, MAXR, r0, r1);
            if (gemm) {
                memset(pk, 0, sizeof(tq_q8p) * (size_t)tq_q8p_count(k, n));
                for (int t = 0; t < n; t++)
                    tq_q8p_pack(a + t * nb, nb, pk + (t / TQ_Q8P_T) * nb, t % TQ_Q8P_T);
                amx_gemm(w, rb, k, pk, n, y1, MAXR, r0, r1);
            } else {
                amx_mv(w, rb, k, a, n, y1, MAXR, r0, r1);
            }
            for (int t = 0; t < MAXN; t++)
                for (int r = 0; r < MAXR; r++) {
                    const float v0 = y0[t * MAXR + r], v1 = y1[t * MAXR + r];
                    if (t >= n || r < r0 || r >= r1) {
                        bad_out += v1 != -7.0f;
                        continue;
                    }
                    const float e = ref_dot(f->id, f->bytes, w + r * rb, a + t * nb, nb);
                    if (memcmp(&e, &v1, 4) && bad_ref++ < 3)
                        fprintf(stderr, "%s %s k %lld n %d row %d token %d: amx %.9g, spec %.9g\n",
                                f->name, gemm ? "gemm" : "mv", (long long)k, n, r, t, v1, e);
                    if (memcmp(&v0, &v1, 4) && bad_lib++ < 3)
                        fprintf(stderr, "%s %s k %lld n %d row %d token %d: amx %.9g, scalar "
                                "%.9g\n", f->name, gemm ? "gemm" : "mv", (long long)k, n, r, t, v1,
                                v0);
                    checked++;
                }
        }
        free(w), free(x), free(a), free(y0), free(y1), free(pk);
    }
    CHECK(bad_ref == 0, "%s: %d of %d AMX results differ from the test's spec", f->name, bad_ref,
          checked);
    CHECK(bad_lib == 0, "%s: %d of %d AMX results differ from the library's scalar", f->name,
          bad_lib, checked);
    CHECK(bad_out == 0, "%s: %d values written outside the rows/tokens asked for", f->name,
          bad_out);
    printf("%s: %d results, AMX == spec: %s, == scalar: %s\n", f->name, checked,
           bad_ref ? "NO" : "yes", bad_lib ? "NO" : "yes");
}

/* gemm_q8 and mv_q8 over more rows than one chunk of the packed path (256 rows), N tokens (37:
 * several token groups, the last one of 5 tokens as row pairs; 8 and 5: one group as row pairs) */
static void check_chunks(const fmt *f, int N)
{
    enum { R = 600, NB = 3 };
    const int64_t k = 32 * NB;
    const size_t rb = (size_t)NB * (size_t)f->bytes;
    uint8_t *w = malloc(R * rb);
    float *x = malloc(sizeof(float) * N * k), *y0 = malloc(sizeof(float) * N * R);
    float *y1 = malloc(sizeof(float) * N * R);
    tq_q8a *a = malloc(sizeof(tq_q8a) * N * NB);
    tq_q8p *pk = aligned_alloc(64, sizeof(tq_q8p) * (size_t)tq_q8p_count(k, N));
    if (!w || !x || !y0 || !y1 || !a || !pk) {
        CHECK(0, "out of memory");
        return;
    }
    rand_blocks(f->id, f->bytes, w, (int64_t)R * NB);
    for (int64_t i = 0; i < N * k; i++)
        x[i] = (float)tq_rng_normal(&rng);
    memset(pk, 0, sizeof(tq_q8p) * (size_t)tq_q8p_count(k, N));
    for (int t = 0; t < N; t++) {
        tq_qdot_scalar()->quant_q8a(x + t * k, a + t * NB, k);
        tq_q8p_pack(a + t * NB, NB, pk + (t / TQ_Q8P_T) * NB, t % TQ_Q8P_T);
    }
    for (int i = 0; i < N * R; i++)
        y0[i] = y1[i] = -7.0f;
    scalar_mv(f->id)(w, rb, k, a, N, y0, R, 5, R - 3);
    tq_qdot_amx_gemm(f->id)(w, rb, k, pk, N, y1, R, 5, R - 3);
    CHECK_MEMEQ(y0, y1, sizeof(float) * N * R, "%s: gemm_q8 over %d rows x %d tokens", f->name, R,
                N);
    for (int i = 0; i < N * R; i++)
        y1[i] = -7.0f;
    tq_qdot_amx_mv(f->id)(w, rb, k, a, N, y1, R, 5, R - 3);
    CHECK_MEMEQ(y0, y1, sizeof(float) * N * R, "%s: mv_q8 over %d rows x %d tokens", f->name, R,
                N);
    free(w), free(x), free(y0), free(y1), free(a), free(pk);
}

/* the tile over r16 weights (Q4_0, Q4_1, Q8_0): 3 groups of 16 rows, n = 1..9 tokens, group
 * ranges [r0, r1), k = 32 .. 2048 and one above TQ_AMX_MAXK (the r16 VNNI fallback); == the
 * library scalar over the file rows, bit for bit */
static void check_r16(const fmt *f)
{
    enum { R = 48, MAXN = 9 };
    static const int kbs[] = {1, 2, 3, 5, 18, 48, 64, 65};
    const tq_qmv_q8_fn amx = tq_qdot_amx_r16(f->id), sc = scalar_mv(f->id);
    CHECK(amx != NULL, "%s: the r16 AMX kernel exists", f->name);
    if (!amx)
        return;
    int bad = 0, checked = 0;
    for (size_t ki = 0; ki < sizeof(kbs) / sizeof(kbs[0]); ki++) {
        const int64_t nb = kbs[ki], k = 32 * nb;
        const size_t rb = (size_t)nb * (size_t)f->bytes;
        uint8_t *w = malloc(R * rb), *wp = malloc(R * rb);
        float *x = malloc(sizeof(float) * MAXN * (size_t)k);
        tq_q8a *a = malloc(sizeof(tq_q8a) * MAXN * (size_t)nb);
        float *y0 = malloc(sizeof(float) * MAXN * R), *y1 = malloc(sizeof(float) * MAXN * R);
        if (!w || !wp || !x || !a || !y0 || !y1) {
            CHECK(0, "out of memory");
            return;
        }
        rand_blocks(f->id, f->bytes, w, (int64_t)R * nb);
        for (int g = 0; g < R / 16; g++)
            tq_r16_pack(f->id, w + (size_t)g * 16 * rb, nb, wp + (size_t)g * 16 * rb);
        for (int64_t i = 0; i < MAXN * k; i++)
            x[i] = (float)tq_rng_normal(&rng) * (tq_rng_u64(&rng) % 16 ? 1.0f : 8.0f);
        for (int t = 0; t < MAXN; t++)
            tq_qdot_scalar()->quant_q8a(x + t * k, a + t * nb, k);
        for (int n = 1; n <= MAXN; n++) {
            const int64_t r0 = 16 * (int64_t)(tq_rng_u64(&rng) % 2);
            const int64_t r1 = r0 + 16 * (1 + (int64_t)(tq_rng_u64(&rng) % (uint64_t)((R - r0) / 16)));
            for (int i = 0; i < MAXN * R; i++)
                y0[i] = y1[i] = -7.0f;
            sc(w, rb, k, a, n, y0, R, r0, r1);
            amx(wp, rb, k, a, n, y1, R, r0, r1);
            for (int i = 0; i < MAXN * R; i++) {
                if (memcmp(&y0[i], &y1[i], 4) && bad++ < 3)
                    fprintf(stderr, "%s r16 k %lld n %d [%lld, %lld) index %d: amx %.9g, scalar %.9g\n",
                            f->name, (long long)k, n, (long long)r0, (long long)r1, i, y1[i], y0[i]);
                checked++;
            }
        }
        free(w), free(wp), free(x), free(a), free(y0), free(y1);
    }
    CHECK(bad == 0, "%s: %d of %d r16 AMX values differ from the scalar over the file rows",
          f->name, bad, checked);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_qdot_amx");
    tq_rng_seed(&rng, t_seed);
    if (!tq_qdot_amx_built())
        return t_skip("the library was built without AMX (compiler without -mamx-int8)");
    if (!tq_cpu_amx())
        return t_skip("this CPU/OS does not run AMX int8 (CPUID, XCR0 or the Linux permission; "
                      "TQ_LOG=info says which)");
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
        check_format(&fmts[i]);
        check_chunks(&fmts[i], 37);
        check_chunks(&fmts[i], 8);
        check_chunks(&fmts[i], 5);
        if (tq_r16_format(fmts[i].id) && tq_r16_mv(fmts[i].id))
            check_r16(&fmts[i]);
    }
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
        const tq_format *f = tq_cpu_format(fmts[i].id);
        CHECK(f && f->k.isa_q8 && !strcmp(f->k.isa_q8, "amx-int8"),
              "%s: the format table's q8 kernel is %s", fmts[i].name,
              f && f->k.isa_q8 ? f->k.isa_q8 : "(none)");
    }
    return t_done();
}
