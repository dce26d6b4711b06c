/* test_quant_fold.c -- the rotation fold of `tq quantize` is exact up to rounding: the tiny random
 * llama / qwen2 / qwen3 / gemma3 models of tests/data/tiny (made by transformers), folded and
 * written as f32 safetensors, give the same logits through the engine as the unfolded model
 * (NMSE per position <= 1e-9, same argmax), for the whole fold and for each part alone; the fold
 * really changes the weights; the GGUF path (a GGUF written here from the tiny llama, q/k rows
 * permuted like llama.cpp's converter) folds and quantizes exactly too, a tiny gemma3 GGUF
 * converts to Hugging Face / MLX exactly; every refusal of
 * issue 13's "Bad input" is checked, and a run that fails midway leaves nothing at OUT. */
#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quant/quant_internal.h"
#include "t.h"
#include "tiny_gguf.h"
#include "turboquant.h"

static char base[256];

static int logits_of(const char *dir, const int32_t *tok, int n, float *out, int *vocab)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_F32;
    mo.weight_store = TQ_STORE_DEQUANT; /* dequantized f32: the quantization error alone */
    mo.n_threads = 1;
    tq_model *m = NULL;
    tq_status st = tq_model_load(dir, &mo, &m);
    if (st) {
        printf("load %s: %s\n", dir, tq_last_error());
        return -1;
    }
    tq_model_info info;
    tq_model_get_info(m, &info);
    *vocab = info.vocab_size;
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("f32", &so.kv);
    so.n_ctx = 64;
    tq_session *s = NULL;
    st = tq_session_create(m, &so, &s);
    if (!st)
        st = tq_session_eval_all(s, tok, n, out, (int64_t)n * info.vocab_size);
    if (st)
        printf("eval %s: %s\n", dir, tq_last_error());
    tq_session_free(s);
    tq_model_free(m);
    return st ? -1 : 0;
}

static double worst_nmse(const float *a, const float *b, int n_tok, int V, int *argmax_same)
{
    double w = 0;
    *argmax_same = 1;
    for (int t = 0; t < n_tok; t++) {
        double num = 0, den = 0;
        int ia = 0, ib = 0;
        for (int i = 0; i < V; i++) {
            const double d = (double)a[t * V + i] - b[t * V + i];
            num += d * d;
            den += (double)a[t * V + i] * a[t * V + i];
            ia = a[t * V + i] > a[t * V + ia] ? i : ia;
            ib = b[t * V + i] > b[t * V + ib] ? i : ib;
        }
        w = num / den > w ? num / den : w;
        *argmax_same &= ia == ib;
    }
    return w;
}

static const int32_t prompt[] = {1, 17, 200, 3, 99, 45, 45, 128, 7, 250, 11, 64, 33, 2, 180, 90};
#define NTOK ((int)(sizeof(prompt) / sizeof(prompt[0])))

static tq_status quantize(const char *src, const char *out, int format, int type, int rotate,
                          unsigned fold, int force)
{
    tq_quantize_opts o;
    tq_quantize_opts_default(&o);
    o.src = src;
    o.out = out;
    o.format = format;
    o.type = type;
    o.rotate = rotate;
    o.fold = fold;
    o.force = force;
    o.command_line = "test_quant_fold";
    tq_quantize_result r;
    return tq_quantize(&o, &r);
}

static double max_diff(const char *a, const char *b, const char *name)
{
    tq_weights *wa = NULL, *wb = NULL;
    double m = -1;
    tq_weights_tensor ti;
    if (tq_weights_open(a, &wa) || tq_weights_open(b, &wb) || tq_weights_get(wa, name, &ti))
        goto out;
    float *x = malloc(sizeof(float) * ti.n_elem), *y = malloc(sizeof(float) * ti.n_elem);
    if (!tq_weights_read(wa, name, TQ_DTYPE_F32, x, sizeof(float) * ti.n_elem) &&
        !tq_weights_read(wb, name, TQ_DTYPE_F32, y, sizeof(float) * ti.n_elem)) {
        m = 0;
        for (int64_t i = 0; i < ti.n_elem; i++)
            m = fabs((double)x[i] - y[i]) > m ? fabs((double)x[i] - y[i]) : m;
    }
    free(x);
    free(y);
out:
    tq_weights_free(wa);
    tq_weights_free(wb);
    return m;
}

static void check_arch(const char *arch)
{
    char src[256], out[512];
    snprintf(src, sizeof(src), "tests/data/tiny/%s", arch);
    float *a = malloc(sizeof(float) * NTOK * 256), *b = malloc(sizeof(float) * NTOK * 256);
    int V = 0, V2 = 0;
    CHECK(logits_of(src, prompt, NTOK, a, &V) == 0 && V == 256, "%s: reference logits", arch);
    static const struct {
        unsigned fold;
        const char *name;
    } arms[] = {{0, "all"}, {TQ_FOLD_GAMMA, "gamma"}, {TQ_FOLD_R1, "R1"}, {TQ_FOLD_R2, "R2"}}; /* R1 implies gamma */
    const int gemma = !strcmp(arch, "gemma3");
    for (size_t k = 0; k < sizeof(arms) / sizeof(arms[0]); k++) {
        snprintf(out, sizeof(out), "%s/%s_%s", base, arch, arms[k].name);
        tq_status st = quantize(src, out, TQ_QFORMAT_SAFETENSORS, TQ_GGML_F32, 1, arms[k].fold, 0);
        if (gemma && arms[k].fold == TQ_FOLD_R1) {
            CHECK(st == TQ_E_UNSUPPORTED && strstr(tq_last_error(), "R1") &&
                      strstr(tq_last_error(), "post"),
                  "gemma3: R1 refused by name: %s", tq_last_error());
            struct stat sb;
            CHECK(stat(out, &sb) != 0, "refused run left %s", out);
            continue;
        }
        CHECK(st == TQ_OK, "%s %s: quantize: %s", arch, arms[k].name, tq_last_error());
        if (st)
            continue;
        int same = 0;
        CHECK(logits_of(out, prompt, NTOK, b, &V2) == 0 && V2 == V, "%s %s: folded logits", arch,
              arms[k].name);
        const double e = worst_nmse(a, b, NTOK, V, &same);
        printf("%-6s fold %-5s worst NMSE %.3g argmax same %d\n", arch, arms[k].name, e, same);
        CHECK(e <= 1e-9 && same, "%s %s: NMSE %.3g (<= 1e-9), argmax same %d", arch,
              arms[k].name, e, same);
        /* the fold changed the weights (not a no-op): q_proj is touched by gamma and R1,
         * v_proj by every part */
        const double dq = max_diff(src, out, "model.layers.1.self_attn.v_proj.weight");
        CHECK(dq > 1e-3, "%s %s: v_proj unchanged by the fold (max diff %g)", arch,
              arms[k].name, dq);
    }
    free(a);
    free(b);
}

static int count_entries(const char *dir, const char *sub)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, sub) != NULL;
    if (d)
        closedir(d);
    return n;
}


/* --mix llama: llama-quantize's per-tensor types (llama.cpp's llama_tensor_get_type for Q4_K_M /
 * Q4_K_S, no imatrix), on the tiny llama (hidden 32, heads*hd 256, ffn 64, 2 layers, untied):
 * the rule first, then llama.cpp's fallback for rows that are not a block multiple. */
static int type_of(const tq_gguf *g, const char *name)
{
    tq_gguf_tensor_info ti;
    const int64_t i = tq_gguf_find_tensor(g, name);
    return i >= 0 && tq_gguf_tensor(g, i, &ti) == TQ_OK ? ti.type : -1;
}

static void check_mix(void)
{
    char src[512], out[512];
    snprintf(src, sizeof(src), "%s/llama.gguf", base);
    static const struct {
        int mix;
        uint32_t ftype;
        const char *name;
        int want;
    } cases[] = {
        /* Q4_K_M: layer 1 is in the last eighth -> attn_v / ffn_down Q6_K (rows 32 / 64:
         * Q8_0); layer 0 stays Q4_K (Q5_0); attn_output rows 256: Q4_K; output Q6_K (Q8_0) */
        {TQ_QMIX_LLAMA, 15, "blk.0.attn_v.weight", TQ_GGML_Q5_0},
        {TQ_QMIX_LLAMA, 15, "blk.1.attn_v.weight", TQ_GGML_Q8_0},
        {TQ_QMIX_LLAMA, 15, "blk.0.ffn_down.weight", TQ_GGML_Q5_0},
        {TQ_QMIX_LLAMA, 15, "blk.1.ffn_down.weight", TQ_GGML_Q8_0},
        {TQ_QMIX_LLAMA, 15, "blk.1.attn_output.weight", TQ_GGML_Q4_K},
        {TQ_QMIX_LLAMA, 15, "output.weight", TQ_GGML_Q8_0},
        {TQ_QMIX_LLAMA, 15, "token_embd.weight", TQ_GGML_Q5_0},
        {TQ_QMIX_LLAMA, 15, "blk.1.ffn_norm.weight", TQ_GGML_F32},
        /* Q4_K_S: attn_v of layers 0-3 Q5_K (rows 32: Q5_1); ffn_down keeps Q4_K (Q5_0) */
        {TQ_QMIX_LLAMA_S, 14, "blk.0.attn_v.weight", TQ_GGML_Q5_1},
        {TQ_QMIX_LLAMA_S, 14, "blk.1.attn_v.weight", TQ_GGML_Q5_1},
        {TQ_QMIX_LLAMA_S, 14, "blk.1.ffn_down.weight", TQ_GGML_Q5_0},
        {TQ_QMIX_LLAMA_S, 14, "blk.0.attn_output.weight", TQ_GGML_Q4_K},
        /* pure: every matrix in the type, fallbacks only */
        {TQ_QMIX_PURE, 15, "blk.1.attn_v.weight", TQ_GGML_Q5_0},
        {TQ_QMIX_PURE, 15, "output.weight", TQ_GGML_Q5_0},
    };
    int last = -1;
    tq_gguf *g = NULL;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (cases[i].mix != last) {
            tq_gguf_free(g);
            g = NULL;
            snprintf(out, sizeof(out), "%s/mix_%d.gguf", base, cases[i].mix);
            tq_quantize_opts o;
            tq_quantize_opts_default(&o);
            o.src = src;
            o.out = out;
            o.type = TQ_GGML_Q4_K;
            o.mix = cases[i].mix;
            o.force = 1;
            tq_quantize_result r;
            CHECK(tq_quantize(&o, &r) == TQ_OK, "mix %d: %s", cases[i].mix, tq_last_error());
            CHECK(tq_gguf_open(out, &g) == TQ_OK, "open mix output");
            uint32_t ft = 0;
            CHECK(g && tq_gguf_get_u32(g, "general.file_type", &ft) == TQ_OK &&
                      ft == cases[i].ftype, "mix %d: general.file_type %u", cases[i].mix, ft);
            last = cases[i].mix;
        }
        const int t = g ? type_of(g, cases[i].name) : -1;
        CHECK(t == cases[i].want, "mix %d: %s is %s, want %s", cases[i].mix, cases[i].name,
              t >= 0 ? tq_ggml_type_name(t) : "-", tq_ggml_type_name(cases[i].want));
    }
    tq_gguf_free(g);
    g = NULL;
    { /* IQ4_NL: llama-quantize's file type 25 (2 layers: no ffn_down bump; 4 / 2 heads: none) */
        snprintf(out, sizeof(out), "%s/mix_iq4nl.gguf", base);
        tq_quantize_opts o;
        tq_quantize_opts_default(&o);
        o.src = src;
        o.out = out;
        o.type = TQ_GGML_IQ4_NL;
        o.mix = TQ_QMIX_LLAMA;
        tq_quantize_result r;
        CHECK(tq_quantize(&o, &r) == TQ_OK, "mix IQ4_NL: %s", tq_last_error());
        uint32_t ft = 0;
        CHECK(tq_gguf_open(out, &g) == TQ_OK && tq_gguf_get_u32(g, "general.file_type", &ft) ==
                  TQ_OK && ft == 25, "IQ4_NL file_type %u", ft);
        CHECK(g && type_of(g, "output.weight") == TQ_GGML_Q8_0 &&
                  type_of(g, "blk.0.attn_v.weight") == TQ_GGML_IQ4_NL &&
                  type_of(g, "blk.1.ffn_down.weight") == TQ_GGML_IQ4_NL &&
                  type_of(g, "token_embd.weight") == TQ_GGML_IQ4_NL, "IQ4_NL mix types");
        tq_gguf_free(g);
        /* the same layout in Q4_0 (4.5 bits too) as the yardstick: the same order of error (the
         * tiny random model's worst-position NMSE is noisy; KL on real text: docs/results.md) */
        char q40[512];
        snprintf(q40, sizeof(q40), "%s/mix_q40.gguf", base);
        o.out = q40;
        o.type = TQ_GGML_Q4_0;
        CHECK(tq_quantize(&o, &r) == TQ_OK, "mix Q4_0: %s", tq_last_error());
        float *la = malloc(sizeof(float) * NTOK * 256), *lb = malloc(sizeof(float) * NTOK * 256);
        int Va = 0, Vb = 0, same = 0;
        CHECK(logits_of(src, prompt, NTOK, la, &Va) == 0 && logits_of(out, prompt, NTOK, lb, &Vb)
                  == 0 && Va == Vb, "IQ4_NL logits");
        const double e = worst_nmse(la, lb, NTOK, Va, &same);
        CHECK(logits_of(q40, prompt, NTOK, lb, &Vb) == 0 && Va == Vb, "Q4_0 logits");
        const double e0 = worst_nmse(la, lb, NTOK, Va, &same);
        printf("mix IQ4_NL vs f32: worst NMSE %.3g (Q4_0 in the same layout: %.3g)\n", e, e0);
        CHECK(e < 1.5 * e0, "IQ4_NL file far from its source: NMSE %.3g (Q4_0 %.3g)", e, e0);
        free(la);
        free(lb);
    }
    printf("mix: llama-quantize's Q4_K_M / Q4_K_S / IQ4_NL layouts on the tiny llama\n");
}

static void check_gguf(void)
{
    char src[512], out[512];
    snprintf(src, sizeof(src), "%s/llama.gguf", base);
    tq_status st = tiny_llama_gguf_write(src, TQ_GGML_F32, 0); /* tests/tiny_gguf.h: f32 */
    CHECK(st == TQ_OK, "write tiny llama gguf: %s", tq_last_error());
    if (st)
        return;
    float *a = malloc(sizeof(float) * NTOK * 256), *b = malloc(sizeof(float) * NTOK * 256);
    int V = 0, V2 = 0, same = 0;
    CHECK(logits_of(src, prompt, NTOK, a, &V) == 0 && V == 256, "gguf reference logits");
    /* folded, F32 and Q8_0 */
    static const int types[] = {TQ_GGML_F32, TQ_GGML_Q8_0};
    for (int k = 0; k < 2; k++) {
        snprintf(out, sizeof(out), "%s/llama_rot_%s.gguf", base, tq_ggml_type_name(types[k]));
        st = quantize(src, out, TQ_QFORMAT_GGUF, types[k], 1, 0, 0);
        CHECK(st == TQ_OK, "gguf rotate %s: %s", tq_ggml_type_name(types[k]), tq_last_error());
        CHECK(logits_of(out, prompt, NTOK, b, &V2) == 0 && V2 == V, "folded gguf logits");
        const double e = worst_nmse(a, b, NTOK, V, &same);
        printf("gguf   fold all %-5s worst NMSE %.3g argmax same %d\n",
               tq_ggml_type_name(types[k]), e, same);
        if (types[k] == TQ_GGML_F32)
            CHECK(e <= 1e-9 && same, "gguf fold NMSE %.3g, argmax same %d", e, same);
        else
            CHECK(e <= 1e-3, "gguf fold + Q8_0 NMSE %.3g", e);
    }
    /* streaming in chunks of rows gives the same bytes (chunks of ~100 values: 1-3 rows) */
    for (int k = 0; k < 2; k++) {
        char o1[512], o2[512];
        snprintf(o1, sizeof(o1), "%s/chunk_a_%d.gguf", base, k);
        snprintf(o2, sizeof(o2), "%s/chunk_b_%d.gguf", base, k);
        tq_quantize_opts o;
        tq_quantize_opts_default(&o);
        o.src = src;
        o.type = k ? TQ_GGML_Q4_0 : TQ_GGML_F32;
        o.rotate = 1;
        o.command_line = "same";
        tq_quantize_result r;
        o.out = o1;
        CHECK(tq_quantize(&o, &r) == TQ_OK, "whole: %s", tq_last_error());
        o.out = o2;
        o.chunk_elems = 100;
        CHECK(tq_quantize(&o, &r) == TQ_OK, "chunked: %s", tq_last_error());
        size_t n1 = 0, n2 = 0;
        FILE *f1 = fopen(o1, "rb"), *f2 = fopen(o2, "rb");
        char *b1 = malloc(1 << 20), *b2 = malloc(1 << 20);
        if (f1 && f2) {
            n1 = fread(b1, 1, 1 << 20, f1);
            n2 = fread(b2, 1, 1 << 20, f2);
        }
        CHECK(n1 > 0 && n1 == n2 && !memcmp(b1, b2, n1), "chunked output differs (%zu vs %zu "
              "bytes)", n1, n2);
        if (f1)
            fclose(f1);
        if (f2)
            fclose(f2);
        free(b1);
        free(b2);
    }
    /* provenance in the metadata */
    tq_gguf *g = NULL;
    snprintf(out, sizeof(out), "%s/llama_rot_F32.gguf", base);
    CHECK(tq_gguf_open(out, &g) == TQ_OK, "open folded gguf");
    const char *s = NULL;
    CHECK(g && tq_gguf_get_str(g, "turboquant.transform", &s, NULL) == TQ_OK &&
              strstr(s, "R1") && strstr(s, "seed 42"), "transform key: %s", s ? s : "-");
    CHECK(g && tq_gguf_get_str(g, "turboquant.command", &s, NULL) == TQ_OK &&
              !strcmp(s, "test_quant_fold"), "command key");
    CHECK(g && tq_gguf_get_str(g, "turboquant.source_fingerprint", &s, NULL) == TQ_OK &&
              strlen(s) == 16, "fingerprint key");
    tq_gguf_free(g);

    /* refusals: an existing output without --force (and it is left alone) */
    struct stat s0, s1;
    stat(out, &s0);
    st = quantize(src, out, TQ_QFORMAT_GGUF, TQ_GGML_F32, 1, 0, 0);
    CHECK(st == TQ_E_ARG && strstr(tq_last_error(), "--force"), "existing output refused: %s",
          tq_last_error());
    stat(out, &s1);
    CHECK(s0.st_size == s1.st_size && s0.st_mtime == s1.st_mtime, "existing output untouched");
    CHECK(quantize(src, out, TQ_QFORMAT_GGUF, TQ_GGML_F32, 1, 0, 1) == TQ_OK, "--force replaces");
    /* a source quantized below 8 bits with --rotate */
    char q4[512];
    snprintf(q4, sizeof(q4), "%s/llama_q4.gguf", base);
    CHECK(quantize(src, q4, TQ_QFORMAT_GGUF, TQ_GGML_Q4_0, 0, 0, 0) == TQ_OK, "Q4_0 copy: %s",
          tq_last_error());
    snprintf(out, sizeof(out), "%s/llama_q4_rot.gguf", base);
    st = quantize(q4, out, TQ_QFORMAT_GGUF, TQ_GGML_F32, 1, 0, 0);
    CHECK(st == TQ_E_UNSUPPORTED && strstr(tq_last_error(), "rotation needs full-precision source "
                                                            "weights") &&
              strstr(tq_last_error(), "Q4_0") && strstr(tq_last_error(), "token_embd.weight"),
          "quantized source refused: %s", tq_last_error());
    {
        tq_quantize_opts o;
        tq_quantize_opts_default(&o);
        o.src = q4;
        o.out = out;
        o.type = TQ_GGML_F32;
        o.rotate = 1;
        o.dequantize_source = 1;
        tq_quantize_result r;
        CHECK(tq_quantize(&o, &r) == TQ_OK, "--dequantize-source accepted: %s", tq_last_error());
    }
    /* format pairs */
    snprintf(out, sizeof(out), "%s/x.gguf", base);
    st = quantize("tests/data/tiny/llama", out, TQ_QFORMAT_GGUF, TQ_GGML_Q8_0, 0, 0, 0);
    CHECK(st == TQ_E_UNSUPPORTED && strstr(tq_last_error(), "GGUF source"), "st -> gguf: %s",
          tq_last_error());
    {
        /* GGUF -> safetensors / MLX: Hugging Face names, q/k rows un-permuted, config.json from
         * the GGUF's config: the f32 copy gives the GGUF's logits (rotated too), the MLX copy
         * of the rotated Q4_0 source (--dequantize-source) runs */
        char hf[512];
        float *la = malloc(sizeof(float) * NTOK * 256), *lb = malloc(sizeof(float) * NTOK * 256);
        int Va = 0, Vb = 0, same = 0;
        CHECK(logits_of(src, prompt, NTOK, la, &Va) == 0, "gguf logits");
        for (int rot = 0; rot < 2; rot++) {
            snprintf(hf, sizeof(hf), "%s/from_gguf_%d", base, rot);
            st = quantize(src, hf, TQ_QFORMAT_SAFETENSORS, TQ_GGML_F32, rot, 0, 0);
            CHECK(st == TQ_OK, "gguf -> safetensors (rotate %d): %s", rot, tq_last_error());
            CHECK(!st && logits_of(hf, prompt, NTOK, lb, &Vb) == 0 && Vb == Va,
                  "gguf -> safetensors loads");
            const double e = worst_nmse(la, lb, NTOK, Va, &same);
            printf("gguf -> safetensors f32%s: worst NMSE %.3g, argmax same %d\n",
                   rot ? " rotated" : "", e, same);
            CHECK(e <= (rot ? 1e-9 : 1e-12) && same, "gguf -> safetensors NMSE %.3g", e);
        }
        snprintf(hf, sizeof(hf), "%s/from_gguf_mlx", base);
        tq_quantize_opts o;
        tq_quantize_opts_default(&o);
        o.src = q4;
        o.out = hf;
        o.format = TQ_QFORMAT_MLX;
        o.bits = 8;
        o.group = 32;
        o.rotate = 1;
        o.dequantize_source = 1;
        tq_quantize_result r;
        CHECK(tq_quantize(&o, &r) == TQ_OK, "gguf -> mlx: %s", tq_last_error());
        CHECK(logits_of(hf, prompt, NTOK, lb, &Vb) == 0 && Vb == Va, "gguf -> mlx loads");
        free(la);
        free(lb);
    }
    /* unknown architecture, by name */
    st = quantize("tests/data/io/other_arch.gguf", out, TQ_QFORMAT_GGUF, TQ_GGML_Q8_0, 0, 0, 0);
    CHECK(st != TQ_OK && strstr(tq_last_error(), "not supported"), "unknown arch: %s",
          tq_last_error());
    printf("unknown arch: %s\n", tq_last_error());
    /* no Hadamard construction for n: 18 = 9 * 2 */
    float m[18 * 2] = {0};
    int8_t sg[18];
    tq_rotation_signs(1, 0, 18, sg);
    st = tq_fold_rows(m, 2, 18, NULL, sg);
    CHECK(st == TQ_E_UNSUPPORTED && strstr(tq_last_error(), "n = 18") &&
              strstr(tq_last_error(), "K in 1 12 20 28 36"), "n = 24 refused: %s",
          tq_last_error());
    /* a run that fails midway (a NaN in the last tensor) leaves no output and no temporary */
    {
        char bad[512];
        snprintf(bad, sizeof(bad), "%s/nan.gguf", base);
        tq_gguf_writer *gw = NULL;
        tq_gguf *sg2 = NULL;
        st = tq_gguf_open(src, &sg2);
        if (!st)
            st = tq_gguf_writer_create(bad, &gw);
        for (int64_t i = 0; !st && i < tq_gguf_n_kv(sg2); i++)
            st = tq_gguf_writer_copy_kv(gw, sg2, i);
        for (int64_t i = 0; !st && i < tq_gguf_n_tensors(sg2); i++) {
            tq_gguf_tensor_info ti;
            tq_gguf_tensor(sg2, i, &ti);
            st = tq_gguf_writer_add_tensor(gw, ti.name, ti.type, ti.n_dims, ti.ne);
        }
        if (!st)
            st = tq_gguf_writer_begin(gw);
        for (int64_t i = 0; !st && i < tq_gguf_n_tensors(sg2); i++) {
            tq_gguf_tensor_info ti;
            tq_gguf_tensor(sg2, i, &ti);
            float *x = malloc(ti.nbytes);
            memcpy(x, ti.data, ti.nbytes);
            if (i == tq_gguf_n_tensors(sg2) - 1)
                x[ti.n_elem - 1] = NAN;
            st = tq_gguf_writer_write(gw, x, ti.nbytes);
            free(x);
        }
        if (!st)
            st = tq_gguf_writer_finish(gw);
        tq_gguf_writer_free(gw);
        tq_gguf_free(sg2);
        CHECK(st == TQ_OK, "nan gguf: %s", tq_last_error());
        snprintf(out, sizeof(out), "%s/nan_out.gguf", base);
        st = quantize(bad, out, TQ_QFORMAT_GGUF, TQ_GGML_Q8_0, 0, 0, 0);
        CHECK(st == TQ_E_FORMAT && strstr(tq_last_error(), "non-finite"), "NaN refused: %s",
              tq_last_error());
        CHECK(access(out, F_OK) != 0 && count_entries(base, "nan_out.gguf.tmp") == 0,
              "failed run left output or temporary");
        snprintf(out, sizeof(out), "%s/st_fail", base);
    }
    free(a);
    free(b);
}

/* Gemma 3 GGUF -> Hugging Face safetensors / MLX (tests/tiny_gguf.h's gemma3 writer: norms as
 * 1 + w, tied embedding, sliding window keys): the tiny GGUF gives the Hugging Face model's
 * logits (with query_pre_attn_scalar = head_dim, the only scale a gemma3 GGUF can say), its f32
 * safetensors copy (norms written back as w, gemma3_text config.json with layer_types) gives the
 * GGUF's logits bit for bit (rotated: up to rounding), the MLX 8-bit copy runs close. */
static void check_gemma_gguf(void)
{
    char src[512], hf[512], p[600];
    snprintf(src, sizeof(src), "%s/gemma3.gguf", base);
    tq_status st = tiny_gguf_write(src, "gemma3", TQ_GGML_F32, 0);
    CHECK(st == TQ_OK, "write tiny gemma3 gguf: %s", tq_last_error());
    if (st)
        return;
    float *a = malloc(sizeof(float) * NTOK * 256), *b = malloc(sizeof(float) * NTOK * 256);
    int V = 0, V2 = 0, same = 0;
    CHECK(logits_of(src, prompt, NTOK, a, &V) == 0 && V == 256, "gemma3 gguf logits");
    { /* the Hugging Face original, query_pre_attn_scalar 48 -> 64 (= head_dim) */
        snprintf(hf, sizeof(hf), "%s/gemma3_hf64", base);
        mkdir(hf, 0755);
        snprintf(p, sizeof(p), "%s/model.safetensors", hf);
        char target[PATH_MAX];
        CHECK(realpath("tests/data/tiny/gemma3/model.safetensors", target) != NULL &&
                  symlink(target, p) == 0, "link tiny gemma3 weights");
        FILE *f = fopen("tests/data/tiny/gemma3/config.json", "r");
        char buf[8192] = {0};
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        char *q = strstr(buf, "\"query_pre_attn_scalar\": 48");
        CHECK(n > 0 && q, "tiny gemma3 config has query_pre_attn_scalar 48");
        if (q)
            memcpy(q + strlen("\"query_pre_attn_scalar\": "), "64", 2);
        snprintf(p, sizeof(p), "%s/config.json", hf);
        f = fopen(p, "w");
        CHECK(f && fwrite(buf, 1, n, f) == n, "write config");
        if (f)
            fclose(f);
        CHECK(logits_of(hf, prompt, NTOK, b, &V2) == 0 && V2 == V, "gemma3 hf64 logits");
        const double e = worst_nmse(b, a, NTOK, V, &same);
        printf("gemma3 tiny gguf vs its Hugging Face source: worst NMSE %.3g, argmax same %d\n",
               e, same);
        CHECK(e <= 1e-12 && same, "gemma3 gguf vs hf NMSE %.3g", e);
    }
    for (int rot = 0; rot < 2; rot++) {
        snprintf(hf, sizeof(hf), "%s/gemma3_from_gguf_%d", base, rot);
        st = quantize(src, hf, TQ_QFORMAT_SAFETENSORS, TQ_GGML_F32, rot, 0, 0);
        CHECK(st == TQ_OK, "gemma3 gguf -> safetensors (rotate %d): %s", rot, tq_last_error());
        CHECK(!st && logits_of(hf, prompt, NTOK, b, &V2) == 0 && V2 == V,
              "gemma3 gguf -> safetensors loads");
        const double e = worst_nmse(a, b, NTOK, V, &same);
        printf("gemma3 gguf -> safetensors f32%s: worst NMSE %.3g, argmax same %d\n",
               rot ? " rotated" : "", e, same);
        CHECK(e <= (rot ? 1e-9 : 0) && same, "gemma3 gguf -> safetensors NMSE %.3g", e);
        snprintf(p, sizeof(p), "%s/config.json", hf);
        FILE *f = fopen(p, "r");
        char buf[4096] = {0};
        if (f) {
            if (fread(buf, 1, sizeof(buf) - 1, f) == 0)
                buf[0] = 0;
            fclose(f);
        }
        CHECK(strstr(buf, "\"gemma3_text\"") &&
                  strstr(buf, "[\"sliding_attention\", \"full_attention\"]") &&
                  strstr(buf, "\"tie_word_embeddings\": true"),
              "gemma3 config.json: model type, layer_types, tied");
    }
    /* MLX 8-bit g32 of the GGUF and of the Hugging Face original: the same codes, the same
     * logits (the tiny random model amplifies 8-bit error: vs f32 only loosely) */
    float *c = malloc(sizeof(float) * NTOK * 256);
    int V3 = 0;
    for (int k = 0; k < 2; k++) {
        snprintf(hf, sizeof(hf), "%s/gemma3_mlx_%d", base, k);
        snprintf(p, sizeof(p), "%s/gemma3_hf64", base);
        tq_quantize_opts o;
        tq_quantize_opts_default(&o);
        o.src = k ? p : src;
        o.out = hf;
        o.format = TQ_QFORMAT_MLX;
        o.bits = 8;
        o.group = 32;
        tq_quantize_result r;
        CHECK(tq_quantize(&o, &r) == TQ_OK, "gemma3 %s -> mlx: %s", k ? "hf" : "gguf",
              tq_last_error());
        CHECK(logits_of(hf, prompt, NTOK, k ? c : b, &V3) == 0 && V3 == V, "gemma3 mlx loads");
    }
    double e = worst_nmse(c, b, NTOK, V, &same);
    printf("gemma3 gguf -> mlx 8-bit g32 vs hf -> mlx: worst NMSE %.3g, argmax same %d\n", e,
           same);
    CHECK(e <= 1e-12 && same, "gemma3 mlx of gguf vs of hf NMSE %.3g", e);
    e = worst_nmse(a, b, NTOK, V, &same);
    printf("gemma3 gguf -> mlx 8-bit g32 vs f32: worst NMSE %.3g\n", e);
    CHECK(e <= 1e-2, "gemma3 gguf -> mlx vs f32 NMSE %.3g", e);
    free(c);
    free(a);
    free(b);
}

/* MLX affine output: layout (uint32 codes, bf16 scales/biases per group), the decoded values near
 * the f32 ones, config.json "quantization"; refusals of bad bits/group and a GGUF source. (Bit
 * equality with mx.quantize and loading by mlx-lm: scripts/quant/mlx_check.py.) */
static void check_mlx(void)
{
    char f32[512], mlx[512], p[600];
    snprintf(f32, sizeof(f32), "%s/mlx_ref_f32", base);
    snprintf(mlx, sizeof(mlx), "%s/mlx_q4", base);
    tq_quantize_opts o;
    tq_quantize_opts_default(&o);
    o.src = "tests/data/tiny/llama";
    o.rotate = 1;
    o.format = TQ_QFORMAT_SAFETENSORS;
    o.type = TQ_GGML_F32;
    o.out = f32;
    tq_quantize_result r;
    CHECK(tq_quantize(&o, &r) == TQ_OK, "mlx: f32 reference: %s", tq_last_error());
    o.format = TQ_QFORMAT_MLX;
    o.bits = 4;
    o.group = 32;
    o.out = mlx;
    CHECK(tq_quantize(&o, &r) == TQ_OK, "mlx: quantize: %s", tq_last_error());
    tq_st *a = NULL, *b = NULL;
    snprintf(p, sizeof(p), "%s/model.safetensors", f32);
    CHECK(tq_st_open(p, &a) == TQ_OK, "open f32");
    snprintf(p, sizeof(p), "%s/model.safetensors", mlx);
    CHECK(tq_st_open(p, &b) == TQ_OK, "open mlx");
    if (a && b) {
        tq_st_tensor_info w, sc, bi, ref;
        const char *m = "model.layers.1.mlp.down_proj";
        snprintf(p, sizeof(p), "%s.weight", m);
        CHECK(tq_st_tensor(b, tq_st_find(b, p), &w) == TQ_OK && w.dtype == TQ_ST_U32 &&
                  w.shape[0] == 32 && w.shape[1] == 64 * 4 / 32, "codes tensor");
        tq_st_tensor(a, tq_st_find(a, p), &ref);
        snprintf(p, sizeof(p), "%s.scales", m);
        CHECK(tq_st_tensor(b, tq_st_find(b, p), &sc) == TQ_OK && sc.dtype == TQ_ST_BF16 &&
                  sc.shape[0] == 32 && sc.shape[1] == 2, "scales tensor");
        snprintf(p, sizeof(p), "%s.biases", m);
        CHECK(tq_st_tensor(b, tq_st_find(b, p), &bi) == TQ_OK && bi.dtype == TQ_ST_BF16,
              "biases tensor");
        float y[32 * 64];
        tq_affine_dequantize(w.data, sc.data, bi.data, 32, 64, 4, 32, y);
        const float *x = ref.data;
        double e = 0, d = 0;
        for (int i = 0; i < 32 * 64; i++) {
            e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
            d += (double)x[i] * x[i];
        }
        printf("mlx 4-bit g32 down_proj: relative RMS error %.4f\n", sqrt(e / d));
        CHECK(sqrt(e / d) < 0.12, "mlx round trip error %.4f", sqrt(e / d));
        CHECK(tq_st_find(b, "model.layers.0.input_layernorm.scales") < 0, "norms not quantized");
    }
    tq_st_free(a);
    tq_st_free(b);
    snprintf(p, sizeof(p), "%s/config.json", mlx);
    FILE *f = fopen(p, "r");
    char buf[4096] = {0};
    if (f) {
        if (fread(buf, 1, sizeof(buf) - 1, f) == 0)
            buf[0] = 0;
        fclose(f);
    }
    CHECK(strstr(buf, "\"quantization\": {\"group_size\": 32, \"bits\": 4, \"mode\": "
                      "\"affine\"}") != NULL, "config.json quantization entry");
    o.bits = 7;
    snprintf(p, sizeof(p), "%s/mlx_bad", base);
    o.out = p;
    CHECK(tq_quantize(&o, &r) == TQ_E_UNSUPPORTED && strstr(tq_last_error(), "bits 2 3 4 5 6 8"),
          "bits 7 refused: %s", tq_last_error());
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_quant_fold");
    snprintf(base, sizeof(base), "/tmp/tq_quant_fold_XXXXXX");
    CHECK(mkdtemp(base) != NULL, "mkdtemp");
    static const char *const arches[] = {"llama", "qwen2", "qwen3", "gemma3"};
    for (size_t i = 0; i < 4; i++)
        check_arch(arches[i]);
    check_gguf();
    check_gemma_gguf();
    check_mix();
    check_mlx();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    if (!getenv("TQ_QUANT_KEEP") && system(cmd) != 0)
        printf("could not remove %s\n", base);
    return t_done();
}
