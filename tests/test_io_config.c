/* test_io_config.c -- Hugging Face config.json into tq_model_config for llama, mistral, qwen2,
 * qwen3, gemma3 (text-only and multimodal), with expected values typed from the public configs
 * (tests/data/io/configs); head_dim is taken when given (qwen3: 16 heads x 128 != 1024) and
 * derived only when absent; broken configs are refused with the file named. Label: fast. */
#include "t.h"
#include "turboquant.h"

#define CFG(name) "tests/data/io/configs/" name

static int load(const char *path, tq_model_config *c)
{
    tq_status st = tq_model_config_from_json(path, c);
    CHECK(st == TQ_OK, "%s: %s", path, tq_last_error());
    return st == TQ_OK;
}

int main(int argc, char **argv)
{
    tq_model_config c;
    t_init(argc, argv, "test_io_config");

    if (load(CFG("llama-3.2-1b.json"), &c)) {
        CHECK(c.arch == TQ_ARCH_LLAMA && c.n_layers == 16 && c.hidden == 2048 && c.n_heads == 32 &&
                  c.n_kv_heads == 8 && c.head_dim == 64 && c.ffn_hidden == 8192 &&
                  c.vocab == 128256 && c.max_ctx == 131072,
              "llama3.2 sizes");
        CHECK(c.rope_theta == 500000.0f && c.rope_scaling == TQ_ROPE_SCALING_LLAMA3 &&
                  c.rope_factor == 32.0f && c.rope_low_freq_factor == 1.0f &&
                  c.rope_high_freq_factor == 4.0f && c.rope_orig_max_pos == 8192,
              "llama3 rope");
        CHECK(c.rms_eps == 1e-5f && c.tied_embeddings == 1 && c.qkv_bias == 0 && c.qk_norm == 0 &&
                  c.bos_id == 128000 && c.eos_id == 128001 && c.sliding_window == 0 &&
                  c.rope_order == TQ_ROPE_NEOX && c.rope_dim == 64 && c.embed_scale == 1.0f &&
                  c.norm_plus_one == 0 && c.act_gelu == 0,
              "llama3.2 flags");
    }
    if (load(CFG("smollm2-135m-instruct.json"), &c))
        CHECK(c.arch == TQ_ARCH_LLAMA && c.head_dim == 64 && c.n_kv_heads == 3 &&
                  c.rope_theta == 100000.0f && c.rope_scaling == TQ_ROPE_SCALING_NONE &&
                  c.tied_embeddings == 1 && c.max_ctx == 8192,
              "smollm2 (head_dim derived 576/9)");
    if (load(CFG("mistral-7b-v0.1.json"), &c)) {
        CHECK(c.arch == TQ_ARCH_MISTRAL && c.hidden == 4096 && c.n_kv_heads == 8 &&
                  c.head_dim == 128 && c.ffn_hidden == 14336 && c.tied_embeddings == 0 &&
                  c.sliding_window == 4096 && c.sliding_window_pattern == 0,
              "mistral");
        CHECK(tq_model_config_layer_is_sliding(&c, 0) && tq_model_config_layer_is_sliding(&c, 31),
              "mistral: every layer slides");
    }
    if (load(CFG("qwen2.5-0.5b-instruct.json"), &c))
        CHECK(c.arch == TQ_ARCH_QWEN2 && c.hidden == 896 && c.n_heads == 14 && c.n_kv_heads == 2 &&
                  c.head_dim == 64 && c.qkv_bias == 1 && c.qk_norm == 0 && c.sliding_window == 0 &&
                  c.tied_embeddings == 1 && c.rope_theta == 1000000.0f && c.rms_eps == 1e-6f &&
                  c.vocab == 151936 && c.eos_id == 151645,
              "qwen2.5 (bias implied, window unused)");
    if (load(CFG("qwen3-0.6b.json"), &c))
        CHECK(c.arch == TQ_ARCH_QWEN3 && c.hidden == 1024 && c.n_heads == 16 && c.n_kv_heads == 8 &&
                  c.head_dim == 128 && c.qk_norm == 1 && c.qkv_bias == 0 && c.n_layers == 28 &&
                  c.max_ctx == 40960 && c.sliding_window == 0,
              "qwen3 (head_dim 128 given, not 64)");
    if (load(CFG("gemma-3-270m.json"), &c)) {
        CHECK(c.arch == TQ_ARCH_GEMMA3 && !strcmp(c.arch_name, "gemma3") && c.hidden == 640 &&
                  c.n_heads == 4 && c.n_kv_heads == 1 && c.head_dim == 256 &&
                  c.ffn_hidden == 2048 && c.n_layers == 18 && c.vocab == 262144,
              "gemma3 sizes");
        CHECK(c.rope_theta == 1000000.0f && c.rope_theta_local == 10000.0f &&
                  c.sliding_window == 512 && c.sliding_window_pattern == 6 &&
                  c.query_pre_attn_scalar == 256.0f && c.final_logit_softcap == 0 &&
                  c.attn_logit_softcap == 0 && c.norm_plus_one == 1 && c.qk_norm == 1 &&
                  c.act_gelu == 1 && c.tied_embeddings == 1 && c.bos_id == 2 && c.eos_id == 1,
              "gemma3 extras");
        CHECK_NEAR(c.embed_scale, 25.298221281347036, 1e-5, "gemma embed scale sqrt(640)");
        for (int il = 0; il < 18; il++)
            CHECK(tq_model_config_layer_is_sliding(&c, il) == ((il + 1) % 6 != 0), "layer %d", il);
    }
    if (load(CFG("gemma-3-4b-it-multimodal.json"), &c))
        CHECK(c.arch == TQ_ARCH_GEMMA3 && c.hidden == 2560 && c.n_layers == 34 && c.n_heads == 8 &&
                  c.n_kv_heads == 4 && c.head_dim == 256 &&
                  c.rope_scaling == TQ_ROPE_SCALING_LINEAR && c.rope_factor == 8.0f &&
                  c.sliding_window == 1024 && c.eos_id == 1 && c.tied_embeddings == 1 &&
                  c.vocab == 262208,
              "gemma3 multimodal text_config");

    static const struct {
        const char *file;
        tq_status st;
        const char *msg;
    } bad[] = {
        {CFG("bad_json.json"), TQ_E_FORMAT, "bad JSON"},
        {CFG("bad_arch.json"), TQ_E_UNSUPPORTED, "gpt_neox"},
        {CFG("bad_missing_hidden.json"), TQ_E_FORMAT, "hidden"},
        {CFG("bad_gqa.json"), TQ_E_FORMAT, "kv heads"},
        {CFG("bad_rope.json"), TQ_E_UNSUPPORTED, "dynamic"},
        {CFG("no_such_file.json"), TQ_E_IO, "cannot open"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tq_status st = tq_model_config_from_json(bad[i].file, &c);
        CHECK(st == bad[i].st, "%s: %s, expected %s", bad[i].file, tq_status_str(st),
              tq_status_str(bad[i].st));
        CHECK(strstr(tq_last_error(), bad[i].file) && strstr(tq_last_error(), bad[i].msg),
              "%s: message '%s' should name the file and '%s'", bad[i].file, tq_last_error(),
              bad[i].msg);
    }
    return t_done();
}
