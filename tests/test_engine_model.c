/* test_engine_model.c -- smoke tests on real models (label model); Gemma 3 270M at the end.
 * SmolLM2-135M-Instruct Q4_1
 * GGUF, dequantized to bf16 and to f32 weights. The prompt "The capital of France is" (token
 * ids as llama.cpp tokenizes it, llama-cpp-python 0.3.36) must give finite logits whose top
 * token is " Paris" (7042) and llama.cpp's top 3 on the same file are in our top 5; the greedy
 * continuation starts " Paris." (7042, 30) like llama.cpp's. Prints load time, prefill and
 * decode speed. Skips (77) when the model file is absent. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "turboquant.h"
#include "t.h"

#define MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

static void run(tq_dtype wt, const char *scheme)
{
    static const int32_t prompt[] = {504, 3575, 282, 4649, 314};
    /* llama.cpp top-5 after the prompt, with its logits: Paris 17.34, the 14.80, London 13.21,
     * New 13.15, La 13.12 */
    static const int32_t top5[] = {7042, 260, 4528, 1315, 5145};
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = wt;
    tq_model *m = NULL;
    uint64_t t0 = tq_now_ns();
    tq_status st = tq_model_load(MODEL, &mo, &m);
    const double load_s = (double)(tq_now_ns() - t0) * 1e-9;
    CHECK(st == TQ_OK, "load %s: %s", tq_dtype_name(wt), tq_last_error());
    if (st)
        return;
    tq_model_info in;
    tq_model_get_info(m, &in);
    CHECK(in.arch == TQ_ARCH_LLAMA && in.n_layers == 30 && in.dim == 576 && in.head_dim == 64 &&
              in.n_kv_heads == 3 && in.vocab_size == 49152, "SmolLM2 shape");
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse(scheme, &so.kv);
    so.n_ctx = 512;
    tq_session *s = NULL;
    CHECK(tq_session_create(m, &so, &s) == TQ_OK, "session: %s", tq_last_error());
    if (!s) {
        tq_model_free(m);
        return;
    }
    float *lg = malloc(sizeof(float) * (size_t)in.vocab_size);
    t0 = tq_now_ns();
    st = tq_session_eval(s, prompt, 5, lg);
    CHECK(st == TQ_OK, "eval: %s", tq_last_error());
    int finite = 1;
    for (int i = 0; i < in.vocab_size; i++)
        finite &= isfinite(lg[i]);
    CHECK(finite, "non-finite logits");
    const int top = argmax(lg, in.vocab_size);
    CHECK(top == 7042, "%s/%s: top token %d, expected 7042 (' Paris')", tq_dtype_name(wt),
          scheme, top);
    /* llama.cpp's top 3 are in our top 5 (its 4th and 5th differ by 0.03 only) */
    int rank_ok = 1;
    for (int i = 0; i < 3; i++) {
        int higher = 0;
        for (int v = 0; v < in.vocab_size; v++)
            higher += lg[v] > lg[top5[i]];
        rank_ok &= higher < 5;
    }
    CHECK(rank_ok, "%s: llama.cpp top-3 not in our top 5", tq_dtype_name(wt));
    printf("%s/%s: logit(Paris) %.3f (llama.cpp 17.344), logit(the) %.3f (14.804)\n",
           tq_dtype_name(wt), scheme, lg[7042], lg[260]);
    int32_t next = top;
    int32_t out[32];
    const int n_dec = 32;
    const uint64_t t1 = tq_now_ns();
    for (int i = 0; i < n_dec && st == TQ_OK; i++) {
        out[i] = next;
        st = tq_session_eval(s, &next, 1, lg);
        next = argmax(lg, in.vocab_size);
    }
    const double dec_s = (double)(tq_now_ns() - t1) * 1e-9;
    CHECK(st == TQ_OK && out[0] == 7042 && out[1] == 30, "greedy starts ' Paris.' (%d %d)",
          out[0], out[1]);
    /* prefill speed: 128 tokens */
    int32_t pre[128];
    for (int i = 0; i < 128; i++)
        pre[i] = prompt[i % 5];
    tq_session_reset(s);
    const uint64_t t2 = tq_now_ns();
    st = tq_session_eval(s, pre, 128, lg);
    const double pre_s = (double)(tq_now_ns() - t2) * 1e-9;
    CHECK(st == TQ_OK, "prefill 128");
    printf("%s weights, %s cache, %d threads, kernel %s: load %.2f s, prefill 128 tok %.1f tok/s, "
           "decode %.1f tok/s\n", tq_dtype_name(wt), scheme, in.n_threads, in.kernel, load_s,
           128 / pre_s, n_dec / dec_s);
    free(lg);
    tq_session_free(s);
    tq_model_free(m);
}

/* Prefill of 300 tokens in chunks of 128 (transposed-K attention) against the same tokens one
 * decode step at a time (row attention): the two sum attention scores in different orders, so
 * they agree to rounding, not bit for bit (measured: bf16 cache worst NMSE 9.6e-6, top-1
 * 299/300; kv8 3.1e-4, 294/300). */
static void consistency(const char *scheme)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    tq_model *m = NULL;
    if (tq_model_load(MODEL, &mo, &m) != TQ_OK) {
        CHECK(0, "load: %s", tq_last_error());
        return;
    }
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse(scheme, &so.kv);
    so.n_ctx = 320;
    so.n_batch = 128;
    tq_session *a = NULL, *b = NULL;
    CHECK(tq_session_create(m, &so, &a) == TQ_OK && tq_session_create(m, &so, &b) == TQ_OK,
          "sessions: %s", tq_last_error());
    enum { N = 300, V = 49152 };
    int32_t *t = malloc(sizeof(int32_t) * N);
    float *la = malloc(sizeof(float) * (size_t)N * V), *lb = malloc(sizeof(float) * V);
    for (int i = 0; i < N; i++)
        t[i] = (int32_t)((i * 7919u + 13u) % V);
    tq_status st = a && b ? tq_session_eval_all(a, t, N, la, (int64_t)N * V) : TQ_E_ARG;
    double worst = 0;
    int agree = 0;
    for (int i = 0; i < N && st == TQ_OK; i++) {
        st = tq_session_eval(b, &t[i], 1, lb);
        const float *x = la + (size_t)i * V;
        double num = 0, den = 0;
        int ba = 0, bb = 0;
        for (int v = 0; v < V; v++) {
            num += ((double)x[v] - lb[v]) * ((double)x[v] - lb[v]);
            den += (double)x[v] * x[v];
            ba = x[v] > x[ba] ? v : ba;
            bb = lb[v] > lb[bb] ? v : bb;
        }
        worst = num / den > worst ? num / den : worst;
        agree += ba == bb;
    }
    printf("%s cache: prefill vs token by token over %d tokens: worst NMSE %.3g, top-1 %d/%d\n",
           scheme, N, worst, agree, N);
    /* kv8 re-rounds K/V to 8-bit codes, so rounding differences upstream can flip a code */
    const int quant = strcmp(scheme, "kv8") == 0;
    CHECK(st == TQ_OK && worst <= (quant ? 1e-3 : 1e-4) && agree >= N - (quant ? 10 : 3),
          "%s: prefill and decode disagree", scheme);
    free(t);
    free(la);
    free(lb);
    tq_session_free(a);
    tq_session_free(b);
    tq_model_free(m);
}

#define GEMMA "models/gemma-3-270m-q4_k_m.gguf"

/* Gemma 3 270M (Q4_K_M): 18 layers, 5 of 6 sliding (window 512), head_dim 256. After
 * "<bos>The capital of France is" llama.cpp (llama-cpp-python 0.3.36) ranks " the" 19.00, " a"
 * 18.49, " Paris" 18.32, " one" 18.10, " known" 17.70: our #1 must be its #1 and its top 3
 * must be in our top 5 (as the SmolLM2 check above). Not the exact order of #2..#4: at this
 * 6-token prompt the f32 logits move by up to 0.4 when the GELU's last bit changes (measured
 * 2026-12-03: reordering x*x*x inside libm's formula moved logit(Paris) 18.604 -> 18.433;
 * cpu/act.h's polynomial, max |diff| 1e-6 on every gate value, 18.604 -> 18.216), while KL to
 * the old GELU over 1020 WikiText positions is < 5e-6 (tq kl, f32 weights and cache). */
static void run_gemma(tq_dtype wt, const char *scheme)
{
    static const int32_t prompt[] = {2, 818, 5279, 529, 7001, 563};
    static const int32_t top3[] = {506, 496, 9079};
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = wt;
    tq_model *m = NULL;
    tq_status st = tq_model_load(GEMMA, &mo, &m);
    CHECK(st == TQ_OK, "gemma load %s: %s", tq_dtype_name(wt), tq_last_error());
    if (st)
        return;
    tq_model_info in;
    tq_model_get_info(m, &in);
    CHECK(in.arch == TQ_ARCH_GEMMA3 && in.n_layers == 18 && in.head_dim == 256 &&
              in.vocab_size == 262144, "gemma3 shape");
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse(scheme, &so.kv);
    so.n_ctx = 256;
    tq_session *s = NULL;
    CHECK(tq_session_create(m, &so, &s) == TQ_OK, "session: %s", tq_last_error());
    float *lg = malloc(sizeof(float) * (size_t)in.vocab_size);
    st = s ? tq_session_eval(s, prompt, 6, lg) : TQ_E_ARG;
    CHECK(st == TQ_OK, "eval: %s", tq_last_error());
    int finite = 1;
    for (int i = 0; i < in.vocab_size && st == TQ_OK; i++)
        finite &= isfinite(lg[i]);
    CHECK(st == TQ_OK && finite, "gemma: non-finite logits");
    for (int i = 0; i < 3 && st == TQ_OK; i++) {
        int higher = 0;
        for (int v = 0; v < in.vocab_size; v++)
            higher += lg[v] > lg[top3[i]];
        CHECK(i == 0 ? higher == 0 : higher < 5, "gemma %s/%s: llama.cpp's #%d (%d) is our #%d",
              tq_dtype_name(wt), scheme, i + 1, top3[i], higher + 1);
    }
    if (st == TQ_OK)
        printf("gemma3 %s/%s: logit(the) %.3f (llama.cpp 18.999), logit(Paris) %.3f (18.324)\n",
               tq_dtype_name(wt), scheme, lg[506], lg[9079]);
    free(lg);
    tq_session_free(s);
    tq_model_free(m);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_engine_model");
    if (access(MODEL, R_OK) && access(GEMMA, R_OK))
        return t_skip(MODEL " and " GEMMA " not present");
    if (!access(MODEL, R_OK)) {
        run(TQ_DTYPE_BF16, "bf16");
        run(TQ_DTYPE_F32, "f32");
        run(TQ_DTYPE_BF16, "kv8");
        consistency("bf16");
        consistency("kv8");
    }
    if (!access(GEMMA, R_OK)) {
        run_gemma(TQ_DTYPE_BF16, "bf16");
        run_gemma(TQ_DTYPE_F32, "f32");
    }
    return t_done();
}
