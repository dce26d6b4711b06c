/* test_cuda_eval.c -- the evaluators on the GPU (tq ppl / kl / teacher --cuda; labels cuda +
 * model; exits 77 without CUDA or a device): f32 weights (cuBLAS fp32 pedantic, no TF32) and the
 * f32 device cache against the CPU engine's f32 forward with an f32 cache on the same model.
 *  - tiny llama / qwen3 / gemma3 (tests/data/tiny, f32 weights): the logits of every position of
 *    a prompt (GPU: tq_cuda_session_eval_rows in one or two calls, first row > 0 included) vs the
 *    CPU's eval_all: max |gpu - cpu| <= 1e-4 * (1 + max |cpu|) and max KL(cpu || gpu) < 1e-6;
 *    the device row statistics vs the same numbers from the GPU's own logits on the host:
 *    argmax equal, lse within 1e-9 relative, picked logits bit-identical.
 *  - SmolLM2 (models/SmolLM2-135M-Instruct.Q4_1.gguf dequantized to f32; skipped without it), on
 *    3 windows of 512 seeded random token ids: tq_eval_ppl_dev CPU vs GPU: ppl relative
 *    difference < 1e-4; 3 GPU sessions on 3 threads (cuda = 3) give 1 session's nll bit for bit; a CPU teacher dump (tq_teacher_write) scored by the GPU
 *    (tq_eval_kl_teacher_dev cuda 1): mean KL < 1e-5, top-1 >= 0.99; the same dump written on the
 *    GPU and scored on the CPU: the same bounds. The numbers are printed (the bounds were set
 *    from the first H200 run; see docs/results.md "Quality table on the GPU").
 * Usage: test_cuda_eval [-s SEED] [MODEL]. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "t.h"
#include "turboquant.h"

static double lse_of(const float *x, int n, int *am)
{
    float mx = x[0];
    int a = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > mx) {
            mx = x[i];
            a = i;
        }
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += exp((double)x[i] - mx);
    *am = a;
    return (double)mx + log(s);
}

static double kl_rows(const float *p, const float *q, int n)
{
    int a;
    const double lp = lse_of(p, n, &a), lq = lse_of(q, n, &a);
    double k = 0.0;
    for (int i = 0; i < n; i++) {
        const double x = (double)p[i] - lp;
        k += exp(x) * (x - ((double)q[i] - lq));
    }
    return k < 0.0 ? 0.0 : k;
}

static void run_tiny(const char *arch)
{
    char dir[128];
    snprintf(dir, sizeof(dir), "tests/data/tiny/%s", arch);
    tq_model *m = NULL;
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_F32;
    mo.weight_store = TQ_STORE_DEQUANT;
    if (tq_model_load(dir, &mo, &m) != TQ_OK) {
        CHECK(0, "%s: load: %s", dir, tq_last_error());
        return;
    }
    tq_model_info mi;
    tq_model_get_info(m, &mi);
    const int V = mi.vocab_size;
    const int gemma = !strcmp(arch, "gemma3");
    const int n = gemma ? 8 : 40, first = gemma ? 3 : 11; /* gemma3's tiny window is 8 */
    int32_t tok[64];
    srand(t_seed);
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)(rand() % V);
    tq_kv_scheme f32;
    tq_kv_scheme_parse("f32", &f32);
    tq_session *cs = NULL;
    tq_cuda_session *gs = NULL;
    tq_session_opts so;
    tq_session_opts_default(&so);
    so.kv = f32;
    so.n_ctx = n;
    CHECK(tq_session_create(m, &so, &cs) == TQ_OK, "%s: CPU session: %s", arch, tq_last_error());
    CHECK(tq_cuda_session_create(m, f32, n, &gs) == TQ_OK, "%s: GPU session (f32 weights, f32 "
          "cache): %s", arch, tq_last_error());
    float *lc = malloc((size_t)n * V * 4), *lg = malloc((size_t)n * V * 4),
          *pk = malloc((size_t)n * 3 * 4);
    double *lse = malloc((size_t)n * 8);
    int32_t *am = malloc((size_t)n * 4), *ids = malloc((size_t)n * 3 * 4);
    if (cs && gs && lc && lg && pk && lse && am && ids) {
        CHECK(tq_session_eval_all(cs, tok, n, lc, (int64_t)n * V) == TQ_OK, "%s: CPU eval: %s",
              arch, tq_last_error());
        /* rows 0 .. first-1 in a first call (all rows), the rest with statistics */
        CHECK(tq_cuda_session_eval_rows(gs, tok, first, 0, lg, NULL, 0, NULL, NULL, NULL) == TQ_OK,
              "%s: GPU rows 0..%d: %s", arch, first - 1, tq_last_error());
        for (int r = 0; r < n - first; r++)
            for (int j = 0; j < 3; j++)
                ids[r * 3 + j] = j == 2 ? -1 : (int32_t)((r * 7 + j * 13) % V);
        const int half = (n - first) / 2;
        /* the second call's own first row: `half` rows without logits */
        CHECK(tq_cuda_session_eval_rows(gs, tok + first, n - first, half,
                                        lg + (size_t)(first + half) * V, ids + half * 3, 3,
                                        pk + half * 3, lse + half, am + half) == TQ_OK,
              "%s: GPU rows %d..%d: %s", arch, first + half, n - 1, tq_last_error());
        double worst = 0.0, dmax = 0.0, amax = 0.0, lse_rel = 0.0;
        int am_bad = 0, pk_bad = 0;
        for (int t = 0; t < n; t++) {
            if (t >= first && t < first + half)
                continue;
            const float *c = lc + (size_t)t * V, *g = lg + (size_t)t * V;
            for (int i = 0; i < V; i++) {
                const double d = fabs((double)c[i] - g[i]);
                dmax = d > dmax ? d : dmax;
                amax = fabs(c[i]) > amax ? fabs(c[i]) : amax;
            }
            const double k = kl_rows(c, g, V);
            worst = k > worst ? k : worst;
            if (t >= first + half) {
                const int r = t - first;
                int a;
                const double l = lse_of(g, V, &a);
                am_bad += a != am[r];
                const double rel = fabs(l - lse[r]) / fabs(l);
                lse_rel = rel > lse_rel ? rel : lse_rel;
                for (int j = 0; j < 3; j++) {
                    const int32_t id = ids[r * 3 + j];
                    const float want = id >= 0 ? g[id] : 0.0f;
                    pk_bad += memcmp(&want, &pk[r * 3 + j], 4) != 0;
                }
            }
        }
        printf("tiny %-7s GPU f32/f32 vs CPU f32/f32: %d positions, max |dlogit| %.2e (max |logit| "
               "%.2f), max KL %.2e; row stats: argmax %d bad, lse rel %.1e, picks %d bad\n", arch,
               n - half, dmax, amax, worst, am_bad, lse_rel, pk_bad);
        CHECK(dmax <= 1e-4 * (1.0 + amax), "%s: max |dlogit| %.3e > 1e-4 (1 + %.2f)", arch, dmax,
              amax);
        CHECK(worst < 1e-6, "%s: max KL %.3e >= 1e-6", arch, worst);
        CHECK(!am_bad && !pk_bad && lse_rel < 1e-9, "%s: row statistics: argmax %d, picks %d "
              "wrong, lse rel %.2e", arch, am_bad, pk_bad, lse_rel);
        /* refusals: first >= n, past n_ctx */
        tq_cuda_session_reset(gs);
        CHECK(tq_cuda_session_eval_rows(gs, tok, 4, 4, lg, NULL, 0, NULL, NULL, NULL) == TQ_E_ARG,
              "%s: first == n must be TQ_E_ARG", arch);
        CHECK(tq_cuda_session_eval_rows(gs, tok, n + 1 > 64 ? 64 : n + 1, 0, lg, NULL, 0, NULL,
                                        NULL, NULL) == TQ_E_OVERFLOW,
              "%s: n_ctx + 1 tokens must be TQ_E_OVERFLOW", arch);
    }
    free(lc);
    free(lg);
    free(pk);
    free(lse);
    free(am);
    free(ids);
    tq_session_free(cs);
    tq_cuda_session_free(gs);
    tq_model_free(m);
}

static void run_smol(const char *path)
{
    tq_model *m = NULL;
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_F32;
    mo.weight_store = TQ_STORE_DEQUANT;
    if (tq_model_load(path, &mo, &m) != TQ_OK) {
        CHECK(0, "load %s: %s", path, tq_last_error());
        return;
    }
    tq_model_info mi;
    tq_model_get_info(m, &mi);
    const int V = mi.vocab_size, ctx = 512, nw = 3;
    int32_t *tok = malloc((size_t)ctx * nw * 4);
    srand(t_seed + 1);
    for (int i = 0; i < ctx * nw; i++) /* a text-like skew: mostly the first 2000 ids */
        tok[i] = (int32_t)(rand() % 4 ? rand() % 2000 : rand() % V);
    tq_kv_scheme f32;
    tq_kv_scheme_parse("f32", &f32);
    tq_ppl_result pc, pg;
    CHECK(tq_eval_ppl_dev(m, tok, (int64_t)ctx * nw, 1, f32, ctx, 0, 0, NULL, NULL, &pc) == TQ_OK,
          "CPU ppl: %s", tq_last_error());
    CHECK(tq_eval_ppl_dev(m, tok, (int64_t)ctx * nw, 1, f32, ctx, 0, 1, NULL, NULL, &pg) == TQ_OK,
          "GPU ppl: %s", tq_last_error());
    tq_ppl_result p3;
    CHECK(tq_eval_ppl_dev(m, tok, (int64_t)ctx * nw, 1, f32, ctx, 0, 3, NULL, NULL, &p3) == TQ_OK,
          "GPU ppl, 3 sessions: %s", tq_last_error());
    printf("SmolLM2 f32: GPU ppl with 3 sessions on 3 threads %.6f (nll %s 1 session's), %.2f s\n",
           p3.ppl, memcmp(&p3.nll, &pg.nll, 8) ? "DIFFERS from" : "bit-identical to", p3.seconds);
    CHECK(!memcmp(&p3.nll, &pg.nll, 8) && p3.n_scored == pg.n_scored,
          "3 GPU sessions: nll %.17g vs 1 session %.17g", p3.nll, pg.nll);
    const double rel = fabs(pg.ppl - pc.ppl) / pc.ppl;
    printf("SmolLM2 f32: ppl CPU %.6f GPU %.6f (rel %.2e) over %lld positions; CPU %.1f s, GPU "
           "%.2f s (%.1f ms per window)\n", pc.ppl, pg.ppl, rel, (long long)pg.n_scored,
           pc.seconds, pg.seconds, 1e3 * pg.seconds / nw);
    CHECK(pc.n_scored == pg.n_scored && rel < 1e-4, "ppl CPU %.6f GPU %.6f: rel %.2e >= 1e-4",
          pc.ppl, pg.ppl, rel);
    char pcpu[64], pgpu[64];
    snprintf(pcpu, sizeof(pcpu), "/tmp/tq_cuda_eval_%d_cpu.dump", (int)getpid());
    snprintf(pgpu, sizeof(pgpu), "/tmp/tq_cuda_eval_%d_gpu.dump", (int)getpid());
    for (int dir = 0; dir < 2; dir++) { /* 0: CPU dump, GPU scores; 1: GPU dump, CPU scores */
        tq_teacher_opts o;
        tq_teacher_opts_default(&o);
        o.max_windows = nw;
        o.cuda = dir;
        const char *p = dir ? pgpu : pcpu;
        CHECK(tq_teacher_write(m, tok, (int64_t)ctx * nw, 1, &o, p, NULL, NULL, NULL) == TQ_OK,
              "teacher dump (%s): %s", dir ? "GPU" : "CPU", tq_last_error());
        tq_kl_stats r;
        CHECK(tq_eval_kl_teacher_dev(m, p, 0, 0, &f32, 1, !dir, NULL, NULL, &r, NULL) == TQ_OK,
              "score (%s): %s", dir ? "CPU" : "GPU", tq_last_error());
        printf("SmolLM2 f32: %s teacher dump scored on the %s: KL mean %.2e p99 %.2e max %.2e, "
               "top-1 %.4f, ppl %.6f\n", dir ? "GPU" : "CPU", dir ? "CPU" : "GPU", r.mean, r.p99,
               r.max, r.top1, r.ppl);
        CHECK(r.mean < 1e-5 && r.top1 >= 0.99, "%s dump vs %s: KL %.3e top-1 %.4f", dir ? "GPU" :
              "CPU", dir ? "CPU" : "GPU", r.mean, r.top1);
        unlink(p);
    }
    free(tok);
    tq_model_free(m);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_cuda_eval");
    const char *path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-' && (i == 1 || strcmp(argv[i - 1], "-s")))
            path = argv[i];
    if (!tq_cuda_compiled())
        return t_skip("built without CUDA");
    if (tq_cuda_available() < 1)
        return t_skip("no CUDA device");
    static const char *archs[] = {"llama", "qwen3", "gemma3"};
    for (int i = 0; i < 3; i++)
        run_tiny(archs[i]);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("SmolLM2 part skipped: %s not found (models/ is not committed)\n", path);
        return t_done();
    }
    fclose(f);
    run_smol(path);
    return t_done();
}
