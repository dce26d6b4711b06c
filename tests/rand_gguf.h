/* rand_gguf.h -- a llama GGUF of SmolLM2-135M's shape (576 wide, 9 / 3 heads of 64, FFN 1536,
 * vocab 49152, RoPE base 1e5; an untied head) with seeded random weights, for GPU tests and
 * benchmarks that need a real-sized model without carrying one: 2-D tensors in ggml type `type`
 * (quantized with tq_ggml_quantize: Q8_0 = the layout of SmolLM2's Q8_0 head), 1-D norms f32 (1 +
 * a little noise). Values: embedding uniform in [-1, 1] (a residual stream well above the
 * sublayers' outputs: the RMSNorms do not amplify small differences), head uniform in [-0.15,
 * 0.15] (logits of standard deviation ~2 after the final norm), every other matrix uniform with standard deviation gain / sqrt(cols),
 * gain 1 (the residual writers o / down: 0.5, so 30 layers stay far from chaotic: a forward in
 * another f32 summation order moves the logits by ~1e-6, not 1e0). layers <= 0: 30. */
#ifndef TQ_RAND_GGUF_H
#define TQ_RAND_GGUF_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turboquant.h"

static uint64_t rand_gguf_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-a, a) */
static void rand_gguf_fill(float *x, int64_t n, float a, uint64_t *s)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = a * ((float)(rand_gguf_next(s) >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

/* keep (may be NULL): called with every tensor's f32 values before they are quantized */
typedef void (*rand_gguf_keep)(void *ctx, const char *name, const float *x, int64_t n);

static tq_status rand_gguf_write_ex(const char *path, int type, int layers, uint64_t seed, rand_gguf_keep keep,
                                    void *keep_ctx)
{
    const int L = layers > 0 ? layers : 30, dim = 576, nh = 9, nkv = 3, hd = 64, ffn = 1536, vocab = 49152;
    const float theta = 100000.0f, eps = 1e-5f;
    tq_gguf_writer *gw = NULL;
    tq_status st = tq_gguf_writer_create(path, &gw);
    if (st)
        return st;
    st = tq_gguf_writer_set_str(gw, "general.architecture", "llama");
    const struct { const char *k; uint32_t v; } u[] = {
        {"llama.block_count", (uint32_t)L},         {"llama.embedding_length", (uint32_t)dim},
        {"llama.feed_forward_length", (uint32_t)ffn}, {"llama.attention.head_count", (uint32_t)nh},
        {"llama.attention.head_count_kv", (uint32_t)nkv}, {"llama.attention.key_length", (uint32_t)hd},
        {"llama.attention.value_length", (uint32_t)hd}, {"llama.rope.dimension_count", (uint32_t)hd},
        {"llama.context_length", 8192u},            {"llama.vocab_size", (uint32_t)vocab},
    };
    for (size_t i = 0; !st && i < sizeof(u) / sizeof(u[0]); i++)
        st = tq_gguf_writer_set_u32(gw, u[i].k, u[i].v);
    if (!st)
        st = tq_gguf_writer_set_raw(gw, "llama.rope.freq_base", TQ_GGUF_F32, &theta, 4);
    if (!st)
        st = tq_gguf_writer_set_raw(gw, "llama.attention.layer_norm_rms_epsilon", TQ_GGUF_F32, &eps, 4);
    /* name, rows, cols (rows 0: a 1-D norm of cols), gain */
    typedef struct { char name[48]; int64_t rows, cols; float gain; } tdef;
    const int nt = 3 + 9 * L;
    tdef *t = calloc((size_t)nt, sizeof(tdef));
    if (!t) {
        tq_gguf_writer_free(gw);
        return TQ_E_NOMEM;
    }
    int k = 0;
    t[k++] = (tdef){"token_embd.weight", vocab, dim, 0.0f};
    t[k++] = (tdef){"output_norm.weight", 0, dim, 0.0f};
    t[k++] = (tdef){"output.weight", vocab, dim, -1.0f}; /* the head: uniform in [-0.15, 0.15] */
    for (int l = 0; l < L; l++) {
        static const struct { const char *n; int r, c; float g; } B[] = {
            {"attn_norm", 0, 0, 0}, {"attn_q", 1, 0, 1}, {"attn_k", 2, 0, 1}, {"attn_v", 2, 0, 0.5f},
            {"attn_output", 0, 1, 0.25f}, {"ffn_norm", 0, 0, 0}, {"ffn_gate", 3, 0, 0.5f}, {"ffn_up", 3, 0, 0.5f},
            {"ffn_down", 0, 3, 0.25f}};
        for (int j = 0; j < 9; j++) {
            const int64_t rdim[4] = {dim, nh * hd, nkv * hd, ffn};
            tdef *d = &t[k++];
            snprintf(d->name, sizeof(d->name), "blk.%d.%s.weight", l, B[j].n);
            d->rows = B[j].g > 0 ? rdim[B[j].r] : 0;
            d->cols = B[j].g > 0 ? (B[j].c == 1 ? nh * hd : B[j].c == 3 ? ffn : dim) : dim;
            d->gain = B[j].g;
        }
    }
    for (int i = 0; !st && i < nt; i++) {
        const int two = t[i].rows > 0;
        const int64_t ne[2] = {t[i].cols, two ? t[i].rows : 1};
        st = tq_gguf_writer_add_tensor(gw, t[i].name, two ? type : TQ_GGML_F32, two ? 2 : 1, ne);
    }
    if (!st)
        st = tq_gguf_writer_begin(gw);
    uint64_t s = seed;
    for (int i = 0; !st && i < nt; i++) {
        const int two = t[i].rows > 0;
        const int64_t n = two ? t[i].rows * t[i].cols : t[i].cols;
        float *x = malloc((size_t)n * sizeof(float));
        size_t nb = 0;
        st = x ? tq_ggml_nbytes(two ? type : TQ_GGML_F32, n, &nb) : TQ_E_NOMEM;
        uint8_t *b = st ? NULL : malloc(nb);
        if (!st && !b)
            st = TQ_E_NOMEM;
        if (!st) {
            if (!two) {
                rand_gguf_fill(x, n, 0.1f, &s);
                for (int64_t j = 0; j < n; j++)
                    x[j] += 1.0f;
            } else if (i == 0) {
                rand_gguf_fill(x, n, 1.0f, &s);
            } else if (t[i].gain < 0) {
                rand_gguf_fill(x, n, 0.15f, &s);
            } else {
                rand_gguf_fill(x, n, t[i].gain * sqrtf(3.0f / (float)t[i].cols), &s);
            }
            if (keep)
                keep(keep_ctx, t[i].name, x, n);
            if (two && type != TQ_GGML_F32)
                st = tq_ggml_quantize(type, x, n, b, nb);
            else
                memcpy(b, x, nb);
        }
        if (!st)
            st = tq_gguf_writer_write(gw, b, nb);
        free(b);
        free(x);
    }
    if (!st)
        st = tq_gguf_writer_finish(gw);
    tq_gguf_writer_free(gw);
    free(t);
    return st;
}

static tq_status rand_gguf_write(const char *path, int type, int layers, uint64_t seed)
{
    return rand_gguf_write_ex(path, type, layers, seed, NULL, NULL);
}

#endif
