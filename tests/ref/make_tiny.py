#!/usr/bin/env python3
"""make_tiny.py -- tiny random Llama / Qwen2 / Qwen3 models and Hugging Face transformers
reference outputs for tests/test_engine_tiny.c.

For each architecture it writes tests/data/tiny/<arch>/:
  config.json         the transformers config (save_pretrained)
  model.safetensors   weights stored as bf16 (halves the size; the reference runs in f32 on the
                      same bf16-rounded values, so an f32 engine sees identical weights)
  ref.txt             "tokens N id..." (prompt), "greedy M id..." (greedy continuation of the
                      prompt by transformers generate(), do_sample=False)
  logits.bin          f32 little-endian, shape (N, vocab): logits of every prompt position

Shapes: 2 layers, hidden 32, 4 query heads, 2 kv heads (GQA), head_dim 64 (so kv8/kv4 caches,
which need head_dim % 64 == 0, can run too), intermediate 64, vocab 256.
  llama: untied lm_head, Llama 3 RoPE frequency scaling (factor 8, original context 32)
  qwen2: q/k/v biases, tied embeddings
  qwen3: per-head q/k RMSNorm, tied embeddings
  gemma3: sliding window 8 on layer 0 (the 24-token prompt exceeds it), global layer 1, local
          RoPE base 10000, (1 + w) RMSNorm, sandwich norms, GELU-tanh MLP, embedding scale,
          query_pre_attn_scalar 48 (not head_dim, so the scale is really read), tied
Weights are drawn with a fixed seed at a scale that gives well-separated logits (std
1/sqrt(fan_in) for matrices, 0.1 for embeddings, 1 + 0.1 N(0,1) for norms), not the tiny HF default init.

Run: python3 tests/ref/make_tiny.py   (needs torch + transformers; CPU only; ~10 s)
"""
import json
import os
import sys

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

SEED = 20261129
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tiny")
N_PROMPT = 24
N_GREEDY = 16

COMMON = dict(
    vocab_size=256,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    max_position_embeddings=256,
    rms_norm_eps=1e-5,
    bos_token_id=1,
    eos_token_id=2,
    torch_dtype="float32",
)


def configs():
    llama = transformers.LlamaConfig(
        **COMMON,
        rope_theta=10000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
    )
    qwen2 = transformers.Qwen2Config(**COMMON, rope_theta=1000000.0, tie_word_embeddings=True,
                                     use_sliding_window=False)
    qwen3 = transformers.Qwen3Config(**COMMON, rope_theta=1000000.0, tie_word_embeddings=True,
                                     attention_bias=False, use_sliding_window=False)
    g = dict(COMMON)
    g["rms_norm_eps"] = 1e-6
    gemma3 = transformers.Gemma3TextConfig(
        **g, sliding_window=8, layer_types=["sliding_attention", "full_attention"],
        query_pre_attn_scalar=48, tie_word_embeddings=True, pad_token_id=0,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}})
    return {"llama": (llama, transformers.LlamaForCausalLM),
            "qwen2": (qwen2, transformers.Qwen2ForCausalLM),
            "qwen3": (qwen3, transformers.Qwen3ForCausalLM),
            "gemma3": (gemma3, transformers.Gemma3ForCausalLM)}


def add_v4_rope_keys(path):
    """transformers 5 writes RoPE settings only as "rope_parameters"; checkpoints on the Hub
    (and readers written against them) use the 4.x keys "rope_theta" and "rope_scaling". Write
    both, with the same values, so the file reads the same either way."""
    with open(path) as f:
        c = json.load(f)
    rp = c.get("rope_parameters") or {}
    if "full_attention" in rp:  # gemma3: one entry per layer type
        c["rope_local_base_freq"] = rp["sliding_attention"]["rope_theta"]
        rp = rp["full_attention"]
    if "rope_theta" in rp:
        c["rope_theta"] = rp["rope_theta"]
    if rp.get("rope_type", "default") != "default":
        c["rope_scaling"] = {k: v for k, v in rp.items() if k != "rope_theta"}
    with open(path, "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
            elif name.endswith(".bias"):
                v = 0.1 * torch.randn(p.shape, generator=gen)
            elif "embed_tokens" in name:
                v = 0.1 * torch.randn(p.shape, generator=gen)
            else:
                v = torch.randn(p.shape, generator=gen) / np.sqrt(p.shape[-1])
            # round to bf16 so the stored file holds exactly what the reference computes with
            p.copy_(v.to(torch.bfloat16).to(torch.float32))


def main():
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    total = 0
    for arch, (cfg, cls) in configs().items():
        cfg._attn_implementation = "eager"
        model = cls(cfg).eval()
        randomize(model, gen)
        d = os.path.join(OUT, arch)
        os.makedirs(d, exist_ok=True)
        cfg.save_pretrained(d)
        add_v4_rope_keys(os.path.join(d, "config.json"))
        sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
        if cfg.tie_word_embeddings:
            sd.pop("lm_head.weight", None)
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        tokens = torch.randint(3, cfg.vocab_size, (1, N_PROMPT), generator=gen)
        with torch.no_grad():
            logits = model(tokens).logits[0].to(torch.float32).numpy()
            out = model.generate(tokens, max_new_tokens=N_GREEDY, do_sample=False,
                                 eos_token_id=None, pad_token_id=0, min_new_tokens=N_GREEDY)
        greedy = out[0, N_PROMPT:].tolist()
        logits.astype("<f4").tofile(os.path.join(d, "logits.bin"))
        with open(os.path.join(d, "ref.txt"), "w") as f:
            f.write("tokens %d %s\n" % (N_PROMPT, " ".join(str(t) for t in tokens[0].tolist())))
            f.write("greedy %d %s\n" % (len(greedy), " ".join(str(t) for t in greedy)))
        size = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d))
        total += size
        print("%s: %d bytes, greedy %s" % (arch, size, greedy))
    print("total %d bytes (torch %s, transformers %s)" % (total, torch.__version__,
                                                          transformers.__version__))


if __name__ == "__main__":
    sys.exit(main())
