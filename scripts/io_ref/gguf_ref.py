#!/usr/bin/env python3
"""Reference checksums of every tensor of a GGUF file, dequantized by the `gguf` Python package.

For each tensor: name, ggml type, element count, sha256 of the dequantized float32 values in
file order (little-endian), and for Llama-family attn_q/attn_k weights also the sha256 after
undoing llama.cpp's q/k row permutation (HF layout), computed here independently with numpy.
tests/test_io_parity.c dequantizes with our C code and compares the hashes: equal hashes mean a
max abs difference of exactly 0.

usage: python3 scripts/io_ref/gguf_ref.py models/X.gguf > tests/data/io/gguf_ref_X.txt
"""
import hashlib
import importlib.metadata
import sys

import numpy as np
import gguf
from gguf.quants import dequantize


def unpermute(w, n_head):
    # converter: w.reshape(n_head, 2, hd/2, ...).swapaxes(1, 2).reshape(w.shape); invert it
    rows = w.shape[0]
    hd = rows // n_head
    return w.reshape(n_head, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main(path):
    r = gguf.GGUFReader(path)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    n_head = int(r.fields[f"{arch}.attention.head_count"].parts[-1][0])
    n_kv = int(r.fields[f"{arch}.attention.head_count_kv"].parts[-1][0])
    print(f"# {path.split('/')[-1]} arch={arch} gguf=={importlib.metadata.version('gguf')} numpy=={np.__version__}")
    print("# name type n_elem sha256(f32 file order) [sha256(f32 HF layout)]")
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape))  # outermost first
        x = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False).reshape(shape)
        h = hashlib.sha256(np.ascontiguousarray(x).astype("<f4").tobytes()).hexdigest()
        line = f"{t.name} {t.tensor_type.name} {x.size} {h}"
        if arch in ("llama", "mistral") and (".attn_q." in t.name or ".attn_k." in t.name):
            nh = n_head if ".attn_q." in t.name else n_kv
            u = unpermute(x, nh)
            line += " " + hashlib.sha256(np.ascontiguousarray(u).astype("<f4").tobytes()).hexdigest()
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
