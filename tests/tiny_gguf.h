/* tiny_gguf.h -- tests/data/tiny/llama written as a llama GGUF (the converter's names, the q/k
 * row permutation that the reader undoes), or tests/data/tiny/gemma3 as a gemma3 GGUF (the
 * converter's names, every norm stored as 1 + w, no q/k permutation, tied embedding, the
 * sliding window and its pattern as keys; GGUF has no query_pre_attn_scalar key, so the GGUF
 * scales attention by 1/sqrt(head_dim) where the tiny config says 48): 2-D tensors in ggml type
 * `type` (quantized with tq_ggml_quantize; TQ_GGML_F32 = the f32 values as they are), 1-D ones
 * f32. bad_type != 0 gives blk.1.ffn_up that type with arbitrary bytes (a type the engine must
 * refuse). */
#ifndef TQ_TINY_GGUF_H
#define TQ_TINY_GGUF_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turboquant.h"

static tq_status tiny_gguf_write(const char *path, const char *arch, int type, int bad_type)
{
    const int gemma = !strcmp(arch, "gemma3");
    char dir[64], key[96];
    snprintf(dir, sizeof(dir), "tests/data/tiny/%s", gemma ? "gemma3" : "llama");
    tq_weights *w = NULL;
    tq_status st = tq_weights_open(dir, &w);
    if (st)
        return st;
    const tq_model_config *c = tq_weights_config(w);
    tq_gguf_writer *gw = NULL;
    if ((st = tq_gguf_writer_create(path, &gw)))
        goto out;
    const float theta = c->rope_theta, eps = c->rms_eps;
    st = tq_gguf_writer_set_str(gw, "general.architecture", arch);
    const struct { const char *k; uint32_t v; } u[] = {
        {"block_count", (uint32_t)c->n_layers},
        {"embedding_length", (uint32_t)c->hidden},
        {"feed_forward_length", (uint32_t)c->ffn_hidden},
        {"attention.head_count", (uint32_t)c->n_heads},
        {"attention.head_count_kv", (uint32_t)c->n_kv_heads},
        {"attention.key_length", (uint32_t)c->head_dim},
        {"attention.value_length", (uint32_t)c->head_dim},
        {"rope.dimension_count", (uint32_t)c->head_dim},
        {"context_length", 256},
        {"vocab_size", (uint32_t)c->vocab},
        {"attention.sliding_window", (uint32_t)c->sliding_window},
        {"attention.sliding_window_pattern", (uint32_t)c->sliding_window_pattern},
    };
    for (size_t i = 0; !st && i < sizeof(u) / sizeof(u[0]) - (gemma ? 0 : 2); i++) {
        snprintf(key, sizeof(key), "%s.%s", arch, u[i].k);
        st = tq_gguf_writer_set_u32(gw, key, u[i].v);
    }
    snprintf(key, sizeof(key), "%s.rope.freq_base", arch);
    if (!st)
        st = tq_gguf_writer_set_raw(gw, key, TQ_GGUF_F32, &theta, 4);
    snprintf(key, sizeof(key), "%s.attention.layer_norm_rms_epsilon", arch);
    if (!st)
        st = tq_gguf_writer_set_raw(gw, key, TQ_GGUF_F32, &eps, 4);
    static const char *const map_llama[][2] = {
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
    static const char *const map_gemma[][2] = { /* tied: no lm_head */
        {"model.embed_tokens.weight", "token_embd.weight"},
        {"model.norm.weight", "output_norm.weight"},
        {"input_layernorm.weight", "attn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"post_attention_layernorm.weight", "post_attention_norm.weight"},
        {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    };
    const char *const(*map)[2] = gemma ? map_gemma : map_llama;
    const size_t n_map = gemma ? sizeof(map_gemma) / sizeof(map_gemma[0])
                               : sizeof(map_llama) / sizeof(map_llama[0]);
    const size_t n_global = gemma ? 2 : 3;
    char names[64][2][96];
    int nn = 0;
    for (int l = -1; l < c->n_layers; l++)
        for (size_t i = 0; i < n_map; i++) {
            const int global = i < n_global;
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
            types[i] = bad_type; /* bytes of a type we do not run (Q8_1: 32-blocks) */
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
        const int q = !gemma && strstr(names[i][1], "attn_q.") != NULL;
        const int k = !gemma && strstr(names[i][1], "attn_k.") != NULL;
        if (gemma && strstr(names[i][1], "norm.")) /* the converter stores 1 + w */
            for (int64_t j = 0; j < ti.n_elem; j++)
                y[j] += 1.0f;
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

static tq_status tiny_llama_gguf_write(const char *path, int type, int bad_type)
{
    return tiny_gguf_write(path, "llama", type, bad_type);
}

#endif
