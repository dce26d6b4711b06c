#!/usr/bin/env python3
"""Small I/O test fixtures (KB-sized, committed under tests/data/io/; rerun to regenerate):

- tiny.gguf, written by the `gguf` package's GGUFWriter (an independent writer): metadata of
  every value type incl. a nested array and string arrays; one tensor per dequantizable ggml type
  filled with seeded random blocks (f16 scale fields forced finite); Llama q/k F32 weights with
  known values to check the un-permutation.
- tiny_ref.txt: sha256 of each tensor as the `gguf` package dequantizes it (gguf_ref.py format).
- tiny_st/: the same q/k weights as a two-shard safetensors directory written by the
  `safetensors` package, with index and config.json.
- other_arch.gguf: a valid "phi3" GGUF (opens with arch unknown; the engine refuses it).
- bad/*.gguf, bad/*.safetensors: one handcrafted bad file per failure class; bad/MANIFEST lists
  each file with the substring its error message must contain.

usage: python3 scripts/io_ref/make_fixtures.py   (from the repository root)
"""
import hashlib
import json
import os
import struct

import numpy as np
import gguf
from gguf.quants import dequantize
from safetensors.numpy import save_file

OUT = "tests/data/io"
T = gguf.GGMLQuantizationType
rng = np.random.default_rng(20261129)

# (type, block elements, block bytes, byte offsets of f16 fields inside a block)
BLOCKS = [
    (T.Q4_0, 32, 18, [0]), (T.Q4_1, 32, 20, [0, 2]), (T.Q5_0, 32, 22, [0]),
    (T.Q5_1, 32, 24, [0, 2]), (T.Q8_0, 32, 34, [0]), (T.Q4_K, 256, 144, [0, 2]),
    (T.Q5_K, 256, 176, [0, 2]), (T.Q6_K, 256, 210, [208]),
]


def finite_f16(n):
    v = rng.standard_normal(n).astype(np.float16)  # finite, normal-ish magnitudes
    return v.view(np.uint8).reshape(n, 2)


def quant_tensor(qt, blk, size, f16_offs, rows, cols):
    nb = rows * cols // blk
    b = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
    for o in f16_offs:
        b[:, o:o + 2] = finite_f16(nb)
    return b.reshape(rows, cols // blk * size)


def write_tiny():
    path = f"{OUT}/tiny.gguf"
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_context_length(128)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(4)
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 1.5)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "héllo")
    w.add_uint64("test.u64", 2**63 + 5)
    w.add_int64("test.i64", -(2**40))
    w.add_float64("test.f64", 0.1)
    w.add_array("test.arr_i32", [1, -2, 3])
    w.add_array("test.arr_f32", [0.5, -0.25])
    w.add_array("test.nested", [[1, 2], [3, 4, 5]])
    w.add_array("tokenizer.ggml.tokens", ["<s>", "</s>", "a", "bc"])
    w.add_array("tokenizer.ggml.merges", ["a b", "b c"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    tensors = {}
    # q: 2 heads x head_dim 4 = 8 rows of 8; k: 1 head x 4 rows. Value = 100*hf_row + col, then
    # permuted the way llama.cpp's converter does, so HF layout is known exactly.
    def permute(x, n_head):
        return x.reshape(n_head, 2, x.shape[0] // n_head // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)
    q = (100 * np.arange(8)[:, None] + np.arange(8)[None, :]).astype(np.float32)
    k = (100 * np.arange(4)[:, None] + np.arange(8)[None, :] + 0.5).astype(np.float32)
    w.add_tensor("blk.0.attn_q.weight", permute(q, 2))
    w.add_tensor("blk.0.attn_k.weight", permute(k, 1))
    tensors["f32"] = rng.standard_normal((2, 32)).astype(np.float32)
    w.add_tensor("t.f32", tensors["f32"])
    w.add_tensor("t.f16", rng.standard_normal((2, 32)).astype(np.float16))
    bf = finite_f16(64).view(np.uint16)  # arbitrary finite bf16 patterns
    bf = (rng.integers(0, 2**16, size=64, dtype=np.uint16) & np.uint16(0xBFFF))
    w.add_tensor("t.bf16", bf.view(np.uint8).reshape(2, 64), raw_dtype=T.BF16)
    for qt, blk, size, offs in BLOCKS:
        b = quant_tensor(qt, blk, size, offs, 2, blk * 2)
        w.add_tensor(f"t.{qt.name.lower()}", b, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = gguf.GGUFReader(path)
    with open(f"{OUT}/tiny_ref.txt", "w") as f:
        f.write("# tiny.gguf: sha256 of gguf-py dequantization (scripts/io_ref/make_fixtures.py)\n")
        for t in r.tensors:
            x = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
            h = hashlib.sha256(np.ascontiguousarray(x).astype("<f4").tobytes()).hexdigest()
            f.write(f"{t.name} {t.tensor_type.name} {x.size} {h}\n")
    return q, k


def write_tiny_st(q, k):
    d = f"{OUT}/tiny_st"
    os.makedirs(d, exist_ok=True)
    save_file({"model.layers.0.self_attn.q_proj.weight": q}, f"{d}/model-00001-of-00002.safetensors",
              metadata={"format": "pt"})
    kb = k.astype(np.float16)
    save_file({"model.layers.0.self_attn.k_proj.weight": kb}, f"{d}/model-00002-of-00002.safetensors",
              metadata={"format": "pt"})
    idx = {"metadata": {"total_size": q.nbytes + kb.nbytes},
           "weight_map": {"model.layers.0.self_attn.q_proj.weight": "model-00001-of-00002.safetensors",
                          "model.layers.0.self_attn.k_proj.weight": "model-00002-of-00002.safetensors"}}
    with open(f"{d}/model.safetensors.index.json", "w") as f:
        json.dump(idx, f, indent=2)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8,
           "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
           "num_key_value_heads": 1, "head_dim": 4, "max_position_embeddings": 128,
           "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "vocab_size": 4, "bos_token_id": 0,
           "eos_token_id": [1, 3], "tie_word_embeddings": True,
           "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    with open(f"{d}/config.json", "w") as f:
        json.dump(cfg, f, indent=2)


# ---- bad files ------------------------------------------------------------------------------
def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_file(kvs=b"", n_kv=0, infos=b"", n_t=0, data=b"", version=3, align=32, magic=b"GGUF"):
    head = magic + struct.pack("<IQQ", version, n_t, n_kv) + kvs + infos
    pad = (-len(head)) % align
    return head + b"\0" * pad + data


def tinfo(name, dims, typ, off):
    return gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + \
        struct.pack("<IQ", typ, off)


def kv_u32(key, v):
    return gstr(key) + struct.pack("<II", 4, v)


def st_file(header, data=b"", raw=None):
    h = raw if raw is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def write_bad():
    d = f"{OUT}/bad"
    os.makedirs(d, exist_ok=True)
    f32 = T.F32
    ok_t = tinfo("a", [8], f32, 0)
    cases = [
        ("bad_magic.gguf", b"GGUX" + gguf_file()[4:], "bad magic"),
        ("truncated_header.gguf", gguf_file()[:14], "truncated"),
        ("bad_version.gguf", gguf_file(version=7), "version 7"),
        ("data_past_eof.gguf", gguf_file(infos=tinfo("a", [64], f32, 0), n_t=1, data=b"\0" * 32),
         "past the end"),
        ("overflow_dims.gguf", gguf_file(infos=tinfo("a", [2**40, 2**40], f32, 0), n_t=1), "overflow"),
        ("overflow_array.gguf", gguf_file(kvs=gstr("k") + struct.pack("<IIQ", 9, 0, 2**62), n_kv=1),
         "runs past the end"),
        ("overflow_string.gguf", gguf_file(kvs=gstr("k") + struct.pack("<IQ", 8, 2**63), n_kv=1),
         "runs past the end"),
        ("huge_counts.gguf", b"GGUF" + struct.pack("<IQQ", 3, 2**60, 2**60), "cannot fit"),
        ("duplicate_tensor.gguf", gguf_file(infos=ok_t + tinfo("a", [8], f32, 32), n_t=2,
                                            data=b"\0" * 64), "duplicate tensor name"),
        ("duplicate_key.gguf", gguf_file(kvs=kv_u32("x", 1) + kv_u32("x", 2), n_kv=2),
         "duplicate metadata key"),
        ("misaligned_offset.gguf", gguf_file(infos=tinfo("a", [8], f32, 4), n_t=1, data=b"\0" * 64),
         "not a multiple of the alignment"),
        ("bad_alignment.gguf", gguf_file(kvs=kv_u32("general.alignment", 24), n_kv=1),
         "not a power of two"),
        ("unknown_ggml_type.gguf", gguf_file(infos=tinfo("a", [8], 99, 0), n_t=1, data=b"\0" * 32),
         "unknown ggml type"),
        ("unknown_value_type.gguf", gguf_file(kvs=gstr("k") + struct.pack("<II", 42, 0), n_kv=1),
         "unknown value type"),
        ("too_many_dims.gguf", gguf_file(infos=tinfo("a", [1, 1, 1, 1, 8], f32, 0), n_t=1,
                                         data=b"\0" * 32), "dimensions"),
        ("overlap.gguf", gguf_file(infos=tinfo("a", [16], f32, 0) + tinfo("b", [8], f32, 32), n_t=2,
                                   data=b"\0" * 96), "overlap"),
        ("block_mismatch.gguf", gguf_file(infos=tinfo("a", [48], T.Q4_0, 0), n_t=1, data=b"\0" * 64),
         "not a multiple of the Q4_0 block"),
        ("bad_bool.gguf", gguf_file(kvs=gstr("b") + struct.pack("<IB", 7, 5), n_kv=1), "bool"),
        ("deep_nesting.gguf", gguf_file(kvs=gstr("n") + struct.pack("<I", 9) +
                                        struct.pack("<IQ", 9, 1) * 10 + struct.pack("<IQ", 4, 0), n_kv=1),
         "nested deeper"),
    ]
    ent = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    cases += [
        ("truncated_header.safetensors", b"\x05\0\0", "truncated header"),
        ("header_past_eof.safetensors", struct.pack("<Q", 1000) + b"{}", "runs past the end"),
        ("bad_json.safetensors", st_file(None, raw=b'{"a": {"dtype": "F32",'), "bad JSON"),
        ("not_object.safetensors", st_file(None, raw=b"[1, 2]"), "bad JSON"),
        ("data_past_eof.safetensors", st_file(ent, b"\0" * 4), "outside the data section"),
        ("overflow_shape.safetensors",
         st_file({"a": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 8]}}, b"\0" * 8),
         "overflows"),
        ("duplicate_names.safetensors",
         st_file(None, raw=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                           b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', data=b"\0" * 8),
         "duplicate names"),
        ("unknown_dtype.safetensors",
         st_file({"a": {"dtype": "F8_E9", "shape": [2], "data_offsets": [0, 2]}}, b"\0" * 2),
         "unknown dtype"),
        ("gap_offsets.safetensors",
         st_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
         "gap or overlap"),
        ("overlap_offsets.safetensors",
         st_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                  "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
         "gap or overlap"),
        ("size_mismatch.safetensors",
         st_file({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
         "need 12"),
        ("bad_metadata.safetensors",
         st_file({"__metadata__": {"k": 5}, **ent}, b"\0" * 8), "not a string"),
        ("trailing_data.safetensors", st_file(ent, b"\0" * 12), "the data section has 12"),
    ]
    with open(f"{d}/MANIFEST", "w") as m:
        m.write("# file<TAB>substring the error message must contain (make_fixtures.py)\n")
        for name, blob, want in cases:
            with open(f"{d}/{name}", "wb") as f:
                f.write(blob)
            m.write(f"{name}\t{want}\n")


def write_other_arch():
    """A valid GGUF of an architecture the engine does not support: opens, arch unknown."""
    w = gguf.GGUFWriter(f"{OUT}/other_arch.gguf", "phi3")
    w.add_block_count(1)
    w.add_embedding_length(8)
    w.add_head_count(2)
    w.add_tensor("blk.0.attn_qkv.weight", np.arange(24 * 8, dtype=np.float32).reshape(24, 8))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    q, k = write_tiny()
    write_tiny_st(q, k)
    write_bad()
    write_other_arch()
