/* test_native.c -- native block weights in the engine (issue 14 items 1, 3; src/cpu/qmatmul.c).
 *
 * The tiny llama (tests/data/tiny/llama) written as a GGUF whose matrices (embedding and output
 * too) are in one block type T (quantized by tq_ggml_quantize, q/k rows permuted as llama.cpp's
 * converter does), for T in Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL (its 32-wide rows do not fit the K
 * formats: the model test on SmolLM2 / Gemma 3 covers those):
 *  1. --weights native-f32 vs --weights f32 (dequantized at load): the same weight values and
 *     f32 activations, only the summation order differs: |dlogit| <= 1e-4 * (1 + |logit|), same
 *     argmax at every position;
 *  2. --weights native (q8 activations) vs f32: KL(f32 || native) per position <= 1e-3 mean,
 *     argmax equal at >= 90% of positions (int8 activations cost a little);
 *  3. batch invariance: native logits for n_batch 1, 5, 64 are identical bit for bit;
 *  4. refusals: a matrix of a type with no kernels (Q8_1) names tensor, type and the supported
 *     list; a safetensors model with --weights native is refused; a too-small buffer for
 *     tq_weights_read_raw is refused;
 *  5. the model info names the kernel per type and the weight bytes per token.
 * Usage: test_native [-s SEED] [-m MODEL.gguf: also compare native vs f32 on it, model label] */
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "tiny_gguf.h"
#include "turboquant.h"
#include "logit_kl.h"

#define NTOK 24

static char tmpdir[256];

/* logits of every position of the prompt: mode "f32", "native", "native-f32" */
static int run(const char *path, const char *mode, int n_batch, const int32_t *toks, int n,
               float *logits, int *vocab, tq_model_info *info)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = 2;
    if (!strcmp(mode, "f32")) {
        mo.weight_store = TQ_STORE_DEQUANT;
        mo.weight_type = TQ_DTYPE_F32;
    } else {
        mo.weight_store = TQ_STORE_NATIVE;
        mo.native_f32_act = !strcmp(mode, "native-f32");
    }
    tq_model *m = NULL;
    tq_session *s = NULL;
    tq_status st = tq_model_load(path, &mo, &m);
    CHECK(st == TQ_OK, "load %s %s: %s", path, mode, tq_last_error());
    if (st)
        return -1;
    tq_model_get_info(m, info);
    /* info->native_kernels points into the model, which is freed below: keep a copy */
    static char kernels[512];
    snprintf(kernels, sizeof kernels, "%s", info->native_kernels ? info->native_kernels : "");
    info->native_kernels = kernels;
    *vocab = info->vocab_size;
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("f32", &so.kv);
    so.n_ctx = n + 8;
    so.n_batch = n_batch;
    st = tq_session_create(m, &so, &s);
    if (!st)
        st = tq_session_eval_all(s, toks, n, logits, (int64_t)n * info->vocab_size);
    CHECK(st == TQ_OK, "eval %s: %s", mode, tq_last_error());
    tq_session_free(s);
    tq_model_free(m);
    return st ? -1 : 0;
}

static int argmax(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

/* native vs f32 on one file: returns mean KL (q8) */
static void compare(const char *path, const char *label, const int32_t *toks, int n,
                    int exact_check, double kl_max, double top1_min)
{
    int V = 0;
    tq_model_info info;
    const int cap = n * 262144;
    float *a = malloc(sizeof(float) * (size_t)cap), *b = malloc(sizeof(float) * (size_t)cap);
    float *c = malloc(sizeof(float) * (size_t)cap);
    if (run(path, "f32", 64, toks, n, a, &V, &info) || run(path, "native-f32", 64, toks, n, b, &V,
                                                             &info) ||
        run(path, "native", 64, toks, n, c, &V, &info)) {
        free(a), free(b), free(c);
        return;
    }
    printf("%s: native kernels: %s; %.1f KiB weights, %.1f KiB read per token\n", label,
           info.native_kernels, info.weight_bytes / 1024.0, info.weight_bytes_token / 1024.0);
    CHECK(info.native && strlen(info.native_kernels) > 0, "%s: info names kernels", label);
    double worst = 0, klsum = 0, klmax = 0;
    int same_f = 0, same_q = 0;
    for (int t = 0; t < n; t++) {
        const float *pa = a + (size_t)t * V, *pb = b + (size_t)t * V, *pc = c + (size_t)t * V;
        for (int i = 0; i < V; i++) {
            const double d = fabs((double)pa[i] - pb[i]) / (1.0 + fabs(pa[i]));
            worst = d > worst ? d : worst;
        }
        same_f += argmax(pa, V) == argmax(pb, V);
        same_q += argmax(pa, V) == argmax(pc, V);
        const double k = logit_kl(pa, pc, V);
        klsum += k;
        klmax = k > klmax ? k : klmax;
    }
    printf("%s: native-f32 vs f32: worst rel dlogit %.3g, top-1 %d/%d; native(q8) vs f32: mean "
           "KL %.3g, max KL %.3g, top-1 %d/%d\n", label, worst, same_f, n, klsum / n, klmax,
           same_q, n);
    if (exact_check) {
        CHECK(worst <= 1e-4, "%s: native-f32 vs f32 worst %.3g", label, worst);
        CHECK(same_f == n, "%s: native-f32 top-1 %d/%d", label, same_f, n);
    }
    CHECK(klsum / n <= kl_max, "%s: mean KL %.3g > %.3g", label, klsum / n, kl_max);
    CHECK(same_q >= top1_min * n, "%s: q8 top-1 %d/%d", label, same_q, n);
    /* batch invariance of the native path */
    for (int k = 0; k < 2; k++) {
        const char *mode = k ? "native-f32" : "native";
        float *ref = k ? b : c;
        const int nbs[2] = {1, 5};
        for (int j = 0; j < 2; j++) {
            if (run(path, mode, nbs[j], toks, n, a, &V, &info))
                break;
            CHECK(!memcmp(a, ref, sizeof(float) * (size_t)n * V), "%s %s: n_batch %d differs "
                  "from n_batch 64", label, mode, nbs[j]);
        }
    }
    free(a), free(b), free(c);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_native");
    const char *model = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-m"))
            model = argv[i + 1];
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/tq_test_native.%d", (int)getpid());
    mkdir(tmpdir, 0700);
    int32_t toks[NTOK];
    srand(t_seed);
    for (int i = 0; i < NTOK; i++)
        toks[i] = rand() % 256;
    char path[400];
    if (model) {
        int32_t mt[64];
        for (int i = 0; i < 64; i++)
            mt[i] = 1 + (int32_t)((uint32_t)rand() % 20000u);
        compare(model, model, mt, 64, 0, 0.1, 0.7); /* random tokens: flat, sensitive */
    } else {
        const int types[] = {TQ_GGML_Q8_0, TQ_GGML_Q4_0, TQ_GGML_Q4_1, TQ_GGML_Q5_0,
                             TQ_GGML_Q5_1, TQ_GGML_IQ4_NL};
        for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
            snprintf(path, sizeof(path), "%s/tiny_%s.gguf", tmpdir, tq_ggml_type_name(types[k]));
            tq_status st = tiny_llama_gguf_write(path, types[k], 0);
            CHECK(st == TQ_OK, "write %s: %s", path, tq_last_error());
            if (!st)
                compare(path, tq_ggml_type_name(types[k]), toks, NTOK, 1, 1e-3, 0.9);
            unlink(path);
        }
        /* refusals */
        snprintf(path, sizeof(path), "%s/tiny_bad.gguf", tmpdir);
        tq_status st = tiny_llama_gguf_write(path, TQ_GGML_Q8_0, TQ_GGML_Q8_1);
        CHECK(st == TQ_OK, "write bad: %s", tq_last_error());
        tq_model_opts mo;
        tq_model_opts_default(&mo);
        mo.weight_store = TQ_STORE_NATIVE;
        tq_model *m = NULL;
        st = tq_model_load(path, &mo, &m);
        printf("refusal: %s\n", tq_last_error());
        CHECK(st == TQ_E_UNSUPPORTED && strstr(tq_last_error(), "Q8_1") &&
                  strstr(tq_last_error(), "mlp.up_proj") && strstr(tq_last_error(), "Q4_K"),
              "Q8_1 refused naming tensor, type, list: %s", tq_last_error());
        tq_model_free(m);
        m = NULL;
        mo.weight_store = TQ_STORE_DEQUANT;
        st = tq_model_load(path, &mo, &m);
        CHECK(st == TQ_E_UNSUPPORTED && strstr(tq_last_error(), "Q8_1"),
              "Q8_1 refused with dequant too: %s", tq_last_error());
        tq_model_free(m);
        m = NULL;
        unlink(path);
        mo.weight_store = TQ_STORE_NATIVE;
        st = tq_model_load("tests/data/tiny/llama", &mo, &m);
        CHECK(st == TQ_E_UNSUPPORTED, "native on safetensors refused: %s", tq_last_error());
        printf("refusal: %s\n", tq_last_error());
        tq_model_free(m);
        /* raw read into a short buffer */
        snprintf(path, sizeof(path), "%s/tiny_q8.gguf", tmpdir);
        if (tiny_llama_gguf_write(path, TQ_GGML_Q8_0, 0) == TQ_OK) {
            tq_weights *w = NULL;
            if (tq_weights_open(path, &w) == TQ_OK) {
                uint8_t buf[64];
                int ty;
                size_t rb;
                st = tq_weights_read_raw(w, "model.layers.0.mlp.up_proj.weight", &ty, &rb, buf,
                                         sizeof(buf));
                CHECK(st == TQ_E_ARG, "short raw buffer refused: %s", tq_last_error());
                tq_weights_free(w);
            }
            if (!getenv("TQ_TEST_KEEP"))
                unlink(path);
        }
    }
    if (!getenv("TQ_TEST_KEEP"))
        rmdir(tmpdir);
    return t_done();
}
