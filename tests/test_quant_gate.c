/* test_quant_gate.c -- the fold gate on a real model (ctest label `model`): the original model
 * (teacher) and a candidate written by `tq quantize` (folded, and/or quantized) are run on the
 * same WikiText-2 windows (llama.cpp's perplexity windows: ctx tokens, BOS first when the
 * tokenizer adds one, the second half scored); at every scored position the full-vocabulary
 * KL(teacher || candidate) and top-1 agreement; prints mean / median / p95 / max KL, top-1 and
 * both perplexities. Also the greedy 32-token continuation of a few prompts, equal or not.
 *
 *   test_quant_gate --teacher A.gguf --candidate B.gguf [--text wiki.txt] [--ctx 512]
 *                   [--chunks 16] [--weights f32|bf16] [--store dequant|native]
 *                   [--max-kl X] [-t N]
 * Both models are dequantized to --weights at load by default (TQ_STORE_DEQUANT: a quantized
 * source is then the exact f32 teacher); --store native keeps GGUF blocks (native kernels).
 * Without --max-kl it only reports; with it, fails when mean KL > X. Skips (77) when a model
 * or the text is missing. */
#include <unistd.h>

#include "t.h"
#include "turboquant.h"

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int g_store = TQ_STORE_DEQUANT;

static tq_model *load(const char *p, tq_dtype wt, int threads)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = wt;
    mo.weight_store = g_store; /* default: every matrix dequantized to wt (the f32 teacher) */
    mo.n_threads = threads;
    tq_model *m = NULL;
    if (tq_model_load(p, &mo, &m) != TQ_OK)
        printf("load %s: %s\n", p, tq_last_error());
    return m;
}

static void log_softmax(const float *x, int n, double *out)
{
    double mx = x[0], s = 0;
    for (int i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++)
        s += exp((double)x[i] - mx);
    const double l = mx + log(s);
    for (int i = 0; i < n; i++)
        out[i] = (double)x[i] - l;
}

int main(int argc, char **argv)
{
    const char *ta = NULL, *cb = NULL, *text = "../shared/assets/corpora/wikitext-2-raw-test.txt";
    int ctx = 512, chunks = 16, threads = 0;
    double max_kl = -1;
    tq_dtype wt = TQ_DTYPE_F32;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--teacher"))
            ta = argv[++i];
        else if (!strcmp(argv[i], "--candidate"))
            cb = argv[++i];
        else if (!strcmp(argv[i], "--text"))
            text = argv[++i];
        else if (!strcmp(argv[i], "--ctx"))
            ctx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chunks"))
            chunks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t"))
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-kl"))
            max_kl = atof(argv[++i]);
        else if (!strcmp(argv[i], "--store"))
            g_store = !strcmp(argv[++i], "native") ? TQ_STORE_AUTO : TQ_STORE_DEQUANT;
        else if (!strcmp(argv[i], "--weights"))
            wt = !strcmp(argv[++i], "bf16") ? TQ_DTYPE_BF16 : TQ_DTYPE_F32;
    }
    t_init(argc, argv, "test_quant_gate");
    if (!ta || !cb || access(ta, R_OK) || access(cb, R_OK) || access(text, R_OK))
        return t_skip("needs --teacher and --candidate models and the text (WikiText-2)");
    tq_model *A = load(ta, wt, threads), *B = load(cb, wt, threads);
    tq_tokenizer *tok = NULL;
    CHECK(A && B && tq_tokenizer_load(ta, &tok) == TQ_OK, "load: %s", tq_last_error());
    if (!A || !B || !tok)
        return t_done();
    FILE *f = fopen(text, "rb");
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len);
    CHECK(fread(buf, 1, (size_t)len, f) == (size_t)len, "read text");
    fclose(f);
    const int64_t cap = (int64_t)ctx * chunks + 16;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    int64_t n = 0;
    /* only the head of the file is needed: encode a prefix generous enough for the windows */
    size_t take = (size_t)cap * 8 < (size_t)len ? (size_t)cap * 8 : (size_t)len;
    tq_status st = tq_tokenizer_encode(tok, buf, take, 0, ids, cap, &n);
    CHECK(st == TQ_OK || st == TQ_E_OVERFLOW, "encode: %s", tq_last_error());
    n = n < cap ? n : cap;
    const int bos = tq_tokenizer_add_bos(tok) ? tq_tokenizer_bos(tok) : -1;
    tq_model_info info;
    tq_model_get_info(A, &info);
    const int V = info.vocab_size;
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("f32", &so.kv);
    so.n_ctx = ctx;
    tq_session *sa = NULL, *sb = NULL;
    CHECK(tq_session_create(A, &so, &sa) == TQ_OK && tq_session_create(B, &so, &sb) == TQ_OK,
          "sessions: %s", tq_last_error());
    float *la = malloc(sizeof(float) * (size_t)ctx * V), *lb = malloc(sizeof(float) * (size_t)ctx * V);
    double *pa = malloc(sizeof(double) * V), *pb = malloc(sizeof(double) * V);
    const int nw = (int)(n / ctx) < chunks ? (int)(n / ctx) : chunks;
    double *kls = malloc(sizeof(double) * (size_t)nw * ctx);
    int64_t nk = 0, agree = 0;
    double nll_a = 0, nll_b = 0;
    for (int w = 0; w < nw && sa && sb; w++) {
        int32_t *x = ids + (int64_t)w * ctx;
        int32_t first = x[0];
        if (bos >= 0)
            x[0] = bos;
        tq_session_reset(sa);
        tq_session_reset(sb);
        st = tq_session_eval_all(sa, x, ctx, la, (int64_t)ctx * V);
        if (!st)
            st = tq_session_eval_all(sb, x, ctx, lb, (int64_t)ctx * V);
        x[0] = first;
        CHECK(st == TQ_OK, "eval: %s", tq_last_error());
        if (st)
            break;
        for (int i = ctx / 2; i < ctx - 1; i++) {
            log_softmax(la + (size_t)i * V, V, pa);
            log_softmax(lb + (size_t)i * V, V, pb);
            double kl = 0;
            int ia = 0, ib = 0;
            for (int v = 0; v < V; v++) {
                kl += exp(pa[v]) * (pa[v] - pb[v]);
                ia = pa[v] > pa[ia] ? v : ia;
                ib = pb[v] > pb[ib] ? v : ib;
            }
            kls[nk++] = kl > 0 ? kl : 0;
            agree += ia == ib;
            nll_a -= pa[x[i + 1]];
            nll_b -= pb[x[i + 1]];
        }
        fprintf(stderr, "\rwindow %d/%d", w + 1, nw);
    }
    fprintf(stderr, "\n");
    double mean = 0;
    for (int64_t i = 0; i < nk; i++)
        mean += kls[i];
    mean /= nk ? (double)nk : 1;
    qsort(kls, (size_t)nk, sizeof(double), cmp_d);
    printf("teacher %s\ncandidate %s\n%d windows x %d tokens (%lld scored), weights %s (%s), "
           "f32 KV\n", ta, cb, nw, ctx, (long long)nk, tq_dtype_name(wt),
           g_store == TQ_STORE_DEQUANT ? "dequantized at load" : "native blocks");
    printf("KL mean %.3g median %.3g p95 %.3g p99 %.3g max %.3g; top-1 agreement %.4f; ppl "
           "teacher %.4f candidate %.4f\n",
           mean, nk ? kls[nk / 2] : 0, nk ? kls[(int64_t)(nk * 0.95)] : 0,
           nk ? kls[(int64_t)(nk * 0.99)] : 0, nk ? kls[nk - 1] : 0,
           nk ? (double)agree / (double)nk : 0, exp(nll_a / (nk ? nk : 1)),
           exp(nll_b / (nk ? nk : 1)));
    CHECK(nk > 0, "no scored positions");
    if (max_kl >= 0)
        CHECK(mean <= max_kl, "mean KL %.6f > %.6f", mean, max_kl);
    /* greedy continuations of a few prompts */
    static const char *const prompts[] = {"The capital of France is", "Once upon a time",
                                          "def fibonacci(n):", "The three primary colors are"};
    int same_n = 0;
    for (size_t p = 0; p < 4 && sa && sb; p++) {
        int32_t pi[64], ga[32], gb[32];
        int64_t np = 0;
        tq_tokenizer_encode(tok, prompts[p], strlen(prompts[p]), 0, pi, 60, &np);
        tq_session_reset(sa);
        tq_session_reset(sb);
        tq_session_eval_all(sa, pi, np, la, (int64_t)np * V);
        tq_session_eval_all(sb, pi, np, lb, (int64_t)np * V);
        const float *ra = la + (size_t)(np - 1) * V, *rb = lb + (size_t)(np - 1) * V;
        int same = 1;
        for (int k = 0; k < 32; k++) {
            int ia = 0, ib = 0;
            for (int v = 1; v < V; v++) {
                ia = ra[v] > ra[ia] ? v : ia;
                ib = rb[v] > rb[ib] ? v : ib;
            }
            ga[k] = ia;
            gb[k] = ib;
            same &= ia == ib;
            tq_session_eval(sa, &ga[k], 1, la);
            tq_session_eval(sb, &gb[k], 1, lb);
            ra = la;
            rb = lb;
        }
        same_n += same;
    }
    printf("greedy 32 tokens identical on %d/4 prompts\n", same_n);
    tq_session_free(sa);
    tq_session_free(sb);
    tq_tokenizer_free(tok);
    tq_model_free(A);
    tq_model_free(B);
    free(buf);
    free(ids);
    free(la);
    free(lb);
    free(pa);
    free(pb);
    free(kls);
    return t_done();
}
