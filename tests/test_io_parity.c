/* test_io_parity.c -- every tensor of SmolLM2-135M (Q4_1/Q8_0/F32) and Gemma 3 270M
 * (Q4_K/Q5_0/Q6_K/Q8_0/F32), dequantized by our scalar and vector code, hashes to the same
 * SHA-256 as the `gguf` Python package's dequantization (tests/data/io/gguf_ref_*.txt, written by
 * scripts/io_ref/gguf_ref.py): max abs difference 0. Llama q/k weights read through tq_weights
 * also match the independently un-permuted reference (HF layout). Label: model. */
#include <stdlib.h>
#include <time.h>

#include "t.h"
#include "io_sha256.h"
#include "turboquant.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void hash_f32(const float *x, int64_t n, char out[65])
{
    sha256 s;
    sha256_init(&s);
    sha256_update(&s, x, (size_t)n * 4); /* little-endian host (x86-64) */
    sha256_hex(&s, out);
}

static void run_model(const char *model, const char *ref)
{
    FILE *f = fopen(ref, "r");
    tq_gguf *g = NULL;
    tq_weights *w = NULL;
    char line[512];
    int n_lines = 0;
    int n_perm = 0;
    uint64_t ns[2] = {0, 0};

    CHECK(f != NULL, "cannot open %s", ref);
    CHECK(tq_gguf_open(model, &g) == TQ_OK, "%s: %s", model, tq_last_error());
    CHECK(tq_weights_open(model, &w) == TQ_OK, "%s: %s", model, tq_last_error());
    if (!f || !g || !w)
        goto out;
    while (fgets(line, sizeof(line), f)) {
        char name[256], type[16], want[80], want_hf[80] = "", got[65];
        long long n;
        int k;
        if (line[0] == '#')
            continue;
        k = sscanf(line, "%255s %15s %lld %79s %79s", name, type, &n, want, want_hf);
        CHECK(k >= 4, "bad line in %s: %s", ref, line);
        if (k < 4)
            continue;
        n_lines++;
        const int64_t ti = tq_gguf_find_tensor(g, name);
        tq_gguf_tensor_info info;
        CHECK(ti >= 0, "%s: tensor %s missing", model, name);
        if (ti < 0)
            continue;
        tq_gguf_tensor(g, ti, &info);
        CHECK(!strcmp(tq_ggml_type_name(info.type), type) && info.n_elem == n, "%s: %s %s %lld",
              name, tq_ggml_type_name(info.type), type, n);
        float *x = malloc((size_t)n * 4);
        for (int isa = 0; isa <= TQ_ISA_AVX2; isa++) {
            const uint64_t t0 = now_ns();
            CHECK(tq_ggml_dequant_isa((tq_isa)isa, info.type, info.data, info.nbytes, x, n) ==
                      TQ_OK,
                  "%s", tq_last_error());
            ns[isa] += now_ns() - t0;
            hash_f32(x, n, got);
            CHECK(!strcmp(got, want), "%s (%s, isa %s): sha256 %s, gguf-py %s", name, type,
                  tq_isa_name((tq_isa)isa), got, want);
        }
        if (want_hf[0]) {
            /* find the HF tensor whose source name is this GGUF tensor */
            for (int64_t i = 0; i < tq_weights_count(w); i++) {
                tq_weights_tensor wt;
                tq_weights_tensor_at(w, i, &wt);
                if (strcmp(wt.src_name, name))
                    continue;
                CHECK(tq_weights_read(w, wt.name, TQ_DTYPE_F32, x, (size_t)n * 4) == TQ_OK, "%s",
                      tq_last_error());
                hash_f32(x, n, got);
                CHECK(!strcmp(got, want_hf), "%s -> %s: HF-layout sha256 %s, reference %s", name,
                      wt.name, got, want_hf);
                /* the same values one row at a time */
                const int64_t rl = n / wt.shape[0];
                float *r = malloc((size_t)rl * 4);
                int bad = 0;
                for (int64_t row = 0; row < wt.shape[0]; row++) {
                    CHECK(tq_weights_read_rows(w, wt.name, row, 1, TQ_DTYPE_F32, r,
                                               (size_t)rl * 4) == TQ_OK,
                          "%s", tq_last_error());
                    bad += memcmp(r, x + row * rl, (size_t)rl * 4) != 0;
                }
                CHECK(bad == 0, "%s: %d rows differ from the whole-tensor read", wt.name, bad);
                free(r);
                n_perm++;
            }
        }
        free(x);
    }
    CHECK(n_lines == tq_gguf_n_tensors(g), "%s: %d reference lines, %lld tensors", model, n_lines,
          (long long)tq_gguf_n_tensors(g));
    printf("%s: %d tensors compared (scalar + avx2), %d un-permuted q/k\n", model, n_lines, n_perm);
    printf("%s: dequantize all tensors to f32: scalar %.3f s, avx2 %.3f s (one thread)\n", model,
           ns[0] * 1e-9, ns[1] * 1e-9);
out:
    if (f)
        fclose(f);
    tq_gguf_free(g);
    tq_weights_free(w);
}

/* Hyper-parameters from GGUF metadata (expected values as the gguf package prints them). */
static void check_configs(void)
{
    tq_weights *w = NULL;
    if (tq_weights_open("models/SmolLM2-135M-Instruct.Q4_1.gguf", &w) == TQ_OK) {
        const tq_model_config *c = tq_weights_config(w);
        CHECK(c->arch == TQ_ARCH_LLAMA && c->n_layers == 30 && c->hidden == 576 &&
                  c->n_heads == 9 && c->n_kv_heads == 3 && c->head_dim == 64 &&
                  c->ffn_hidden == 1536 && c->vocab == 49152 && c->max_ctx == 8192 &&
                  c->rope_theta == 100000.0f && c->rms_eps == 1e-5f && c->bos_id == 1 &&
                  c->eos_id == 2 && c->tied_embeddings == 1 && c->qk_norm == 0 &&
                  c->qkv_bias == 0 && c->sliding_window == 0,
              "smollm2 config");
    }
    tq_weights_free(w);
    w = NULL;
    if (tq_weights_open("models/gemma-3-270m-q4_k_m.gguf", &w) == TQ_OK) {
        const tq_model_config *c = tq_weights_config(w);
        CHECK(c->arch == TQ_ARCH_GEMMA3 && c->n_layers == 18 && c->hidden == 640 &&
                  c->n_heads == 4 && c->n_kv_heads == 1 && c->head_dim == 256 &&
                  c->ffn_hidden == 2048 && c->vocab == 262144 && c->max_ctx == 32768 &&
                  c->rope_theta == 1000000.0f && c->rope_theta_local == 10000.0f &&
                  c->rms_eps == 1e-6f && c->sliding_window == 512 &&
                  c->sliding_window_pattern == 6 && c->bos_id == 2 && c->eos_id == 1 &&
                  c->tied_embeddings == 1 && c->qk_norm == 1 && c->norm_plus_one == 0 &&
                  c->query_pre_attn_scalar == 256.0f && c->act_gelu == 1,
              "gemma3 config");
        CHECK(tq_weights_find(w, "model.layers.17.post_feedforward_layernorm.weight") >= 0 &&
                  tq_weights_find(w, "model.layers.0.pre_feedforward_layernorm.weight") >= 0 &&
                  tq_weights_find(w, "lm_head.weight") < 0,
              "gemma3 HF names");
    }
    tq_weights_free(w);
}

int main(int argc, char **argv)
{
    FILE *a, *b;
    t_init(argc, argv, "test_io_parity");
    a = fopen("models/SmolLM2-135M-Instruct.Q4_1.gguf", "rb");
    b = fopen("models/gemma-3-270m-q4_k_m.gguf", "rb");
    if (!a || !b) {
        if (a)
            fclose(a);
        if (b)
            fclose(b);
        return t_skip("models/ lacks the GGUF files; run scripts/get-model.sh");
    }
    fclose(a);
    fclose(b);
    check_configs();
    run_model("models/SmolLM2-135M-Instruct.Q4_1.gguf", "tests/data/io/gguf_ref_smollm2.txt");
    run_model("models/gemma-3-270m-q4_k_m.gguf", "tests/data/io/gguf_ref_gemma3.txt");
    return t_done();
}
