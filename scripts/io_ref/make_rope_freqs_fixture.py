#!/usr/bin/env python3
"""Write tests/data/io/rope_freqs.gguf: the smallest Llama-3-style GGUF that tq_model_load()
accepts with a rope_freqs.weight tensor (1 layer, hidden 8, 2 heads of 4, 1 KV head, FFN 16,
vocab 4, all F32, fixed seed). tests/test_rope_freqs.c truncates it while it loads.
Usage: python3 scripts/io_ref/make_rope_freqs_fixture.py (gguf-py and numpy)."""
import os

import gguf
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "io")


def main():
    rng = np.random.default_rng(20261202)
    w = gguf.GGUFWriter(os.path.join(OUT, "rope_freqs.gguf"), "llama")
    w.add_block_count(1)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_context_length(64)
    w.add_rope_freq_base(500000.0)
    w.add_rope_dimension_count(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(4)

    def t(name, *shape):
        w.add_tensor(name, (0.1 * rng.standard_normal(shape)).astype(np.float32))

    t("token_embd.weight", 4, 8)
    w.add_tensor("output_norm.weight", np.ones(8, np.float32))
    w.add_tensor("rope_freqs.weight", np.array([1.0, 4.0], np.float32))  # rope_dim / 2
    w.add_tensor("blk.0.attn_norm.weight", np.ones(8, np.float32))
    t("blk.0.attn_q.weight", 8, 8)
    t("blk.0.attn_k.weight", 4, 8)
    t("blk.0.attn_v.weight", 4, 8)
    t("blk.0.attn_output.weight", 8, 8)
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(8, np.float32))
    t("blk.0.ffn_gate.weight", 16, 8)
    t("blk.0.ffn_up.weight", 16, 8)
    t("blk.0.ffn_down.weight", 8, 16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
