/* tiny_gguf.h -- tests/data/tiny/llama written as a llama GGUF (the converter's names, the q/k
 * row permutation that the reader undoes): 2-D tensors in ggml type `type` (quantized with
 * tq_ggml_quantize; TQ_GGML_F32 = the f32 values as they are), 1-D ones f32. bad_type != 0 gives
 * blk.1.ffn_up that type with arbitrary bytes (a type the engine must refuse). */
#ifndef TQ_TINY_GGUF_H
#define TQ_TINY_GGUF_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turboquant.h"

static tq_status tiny_llama_gguf_write(const char *path, int type, int bad_type)
{
    tq_weights *w = NULL;
    tq_status st = tq_weights_open("tests/data/tiny/llama", &w);
    if (st)
        return st;
    const tq_model_config *c = tq_weights_config(w);
    tq_gguf_writer *gw = NULL;
    if ((st = tq_gguf_writer_create(path, &gw)))
        goto out;
    const float theta = 10000.0f, eps = 1e-5f;
    st = tq_gguf_writer_set_str(gw, "general.architecture", "llama");
    const struct { const char *k; uint32_t v; } u[] = {
        {"llama.block_count", (uint32_t)c->n_layers},
        {"llama.embedding_length", (uint32_t)c->hidden},
        {"llama.feed_forward_length", (uint32_t)c->ffn_hidden},
        {"llama.attention.head_count", (uint32_t)c->n_heads},
        {"llama.attention.head_count_kv", (uint32_t)c->n_kv_heads},
        {"llama.attention.key_length", (uint32_t)c->head_dim},
        {"llama.attention.value_length", (uint32_t)c->head_dim},
        {"llama.rope.dimension_count", (uint32_t)c->head_dim},
        {"llama.context_length", 256},
        {"llama.vocab_size", (uint32_t)c->vocab},
    };
    for (size_t i = 0; !st && i < sizeof(u) / sizeof(u[0]); i++)
        st = tq_gguf_writer_set_u32(gw, u[i].k, u[i].v);
    if (!st)
        st = tq_gguf_writer_set_raw(gw, "llama.rope.freq_base", TQ_GGUF_F32, &theta, 4);
    if (!st)
        st = tq_gguf_writer_set_raw(gw, "llama.attention.layer_norm_rms_epsilon", TQ_GGUF_F32,
                                    &eps, 4);
    static const char *const map[][2] = {
        {"model.embed_tokens.weight", "token_embd.weight"},
        {"lm_head.weight", "output.weight"},
        {"model.norm.weight", "output_norm.weight"},
        {"input_layernorm.weight", "attn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    };
    char names[64][2][96];
    int nn = 0;
    for (int l = -1; l < c->n_layers; l++)
        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
            const int global = i < 3;
            if ((l < 0) != global)
                continue;
            if (global) {
                snprintf(names[nn][0], 96, "%s", map[i][0]);
                snprintf(names[nn][1], 96, "%s", map[i][1]);
            } else {
                snprintf(names[nn][0], 96, "model.layers.%d.%s", l, map[i][0]);
                snprintf(names[nn][1], 96, "blk.%d.%s", l, map[i][1]);
            }
            nn++;
        }
    int types[64];
    for (int i = 0; !st && i < nn; i++) {
        tq_weights_tensor ti;
        if ((st = tq_weights_get(w, names[i][0], &ti)))
            break;
        types[i] = ti.n_dims == 2 ? type : TQ_GGML_F32;
        if (bad_type && strstr(names[i][1], "blk.1.ffn_up"))
            types[i] = bad_type; /* bytes of a type we do not run (IQ4_NL: 32-blocks) */
        int64_t ne[2] = {ti.shape[ti.n_dims - 1], ti.n_dims > 1 ? ti.shape[0] : 1};
        st = tq_gguf_writer_add_tensor(gw, names[i][1], types[i], ti.n_dims, ne);
    }
    if (!st)
        st = tq_gguf_writer_begin(gw);
    for (int i = 0; !st && i < nn; i++) {
        tq_weights_tensor ti;
        tq_weights_get(w, names[i][0], &ti);
        float *x = malloc(sizeof(float) * ti.n_elem), *y = malloc(sizeof(float) * ti.n_elem);
        st = tq_weights_read(w, names[i][0], TQ_DTYPE_F32, x, sizeof(float) * ti.n_elem);
        memcpy(y, x, sizeof(float) * ti.n_elem);
        const int q = strstr(names[i][1], "attn_q.") != NULL;
        const int k = strstr(names[i][1], "attn_k.") != NULL;
        if (q || k) { /* the converter's permutation, undone by the reader */
            const int heads = q ? c->n_heads : c->n_kv_heads, hd = c->head_dim;
            const int64_t cols = ti.shape[1];
            for (int h = 0; h < heads; h++)
                for (int ii = 0; ii < hd / 2; ii++)
                    for (int j = 0; j < 2; j++)
                        memcpy(y + ((int64_t)h * hd + ii * 2 + j) * cols,
                               x + ((int64_t)h * hd + j * (hd / 2) + ii) * cols,
                               sizeof(float) * cols);
        }
        size_t nb = 0;
        if (!st)
            st = tq_ggml_nbytes(types[i], ti.n_elem, &nb);
        uint8_t *b = calloc(1, nb + 1);
        if (!st && bad_type && types[i] == bad_type)
            for (size_t j = 0; j < nb; j++)
                b[j] = (uint8_t)(j * 37);
        else if (!st && types[i] == TQ_GGML_F32)
            memcpy(b, y, nb);
        else if (!st)
            st = tq_ggml_quantize(types[i], y, ti.n_elem, b, nb);
        if (!st)
            st = tq_gguf_writer_write(gw, b, nb);
        free(b);
        free(x);
        free(y);
    }
    if (!st)
        st = tq_gguf_writer_finish(gw);
out:
    tq_gguf_writer_free(gw);
    tq_weights_free(w);
    return st;
}

#endif
