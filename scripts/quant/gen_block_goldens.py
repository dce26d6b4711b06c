#!/usr/bin/env python3
"""gen_block_goldens.py -- golden data for tests/test_quant_blocks.c from the `gguf` PyPI package
(the llama.cpp project's own Python reader/writer; version printed into the files' README).

For each GGUF block type writes tests/data/quant/<TYPE>.bin (little-endian):
    "TQQB" u32 ggml_type u32 n_blocks u32 block_values u32 block_bytes
    section A: raw random blocks (n_blocks * block_bytes bytes; every f16 scale field finite)
               then gguf's dequantize() of them as f32 (n_blocks * block_values)
    section B: u32 has_quant; if 1: f32 inputs (n_blocks * block_values) then gguf's
               quantize() of them (n_blocks * block_bytes) -- types with a reference quantizer
               in the package (Q8_0 Q4_0 Q4_1 Q5_0 Q5_1; not the K types, not IQ4_NL)
Deterministic: numpy default_rng(20261202 + type). Run: python3 scripts/quant/gen_block_goldens.py
"""
import importlib.metadata
import os
import struct
import sys

import numpy as np
import gguf
from gguf import quants, GGMLQuantizationType as T

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "quant")
TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL"]
# byte offsets of f16 scale fields inside a block (kept finite and moderate)
F16_FIELDS = {"Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2],
              "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208], "IQ4_NL": [0]}
N_BLOCKS = 64


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in TYPES:
        qt = getattr(T, name)
        bv, bb = gguf.GGML_QUANT_SIZES[qt]
        rng = np.random.default_rng(20261202 + int(qt))
        raw = rng.integers(0, 256, size=(N_BLOCKS, bb), dtype=np.uint8)
        for off in F16_FIELDS[name]:
            d = (rng.standard_normal(N_BLOCKS) * 0.05).astype(np.float16)
            if name in ("Q4_K", "Q5_K") and off == 2:
                d = np.abs(d)
            raw[:, off:off + 2] = d.view(np.uint8).reshape(N_BLOCKS, 2)
        deq = quants.dequantize(raw.reshape(-1), qt).astype(np.float32).reshape(-1)
        assert deq.size == N_BLOCKS * bv and np.all(np.isfinite(deq))
        parts = [b"TQQB", struct.pack("<IIII", int(qt), N_BLOCKS, bv, bb), raw.tobytes(),
                 deq.tobytes()]
        if name in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"):
            x = rng.standard_normal(N_BLOCKS * bv).astype(np.float32)
            x *= np.float32(0.02)
            x[rng.integers(0, x.size, 16)] *= np.float32(20.0)  # outliers
            x[:bv] = 0.0                                        # an all-zero block
            x[bv:2 * bv] = np.float32(0.5)                      # a constant block
            q = quants.quantize(x.reshape(N_BLOCKS, bv), qt).reshape(-1)
            assert q.size == N_BLOCKS * bb
            parts += [struct.pack("<I", 1), x.tobytes(), q.tobytes()]
        else:
            parts += [struct.pack("<I", 0)]
        with open(os.path.join(OUT, f"{name}.bin"), "wb") as f:
            f.write(b"".join(parts))
    with open(os.path.join(OUT, "README.md"), "w") as f:
        f.write("# tests/data/quant -- GGUF block goldens\n\n"
                "Made by `python3 scripts/quant/gen_block_goldens.py` with the `gguf` package "
                f"{importlib.metadata.version('gguf')} "
                f"(numpy {np.__version__}); layout in the script's docstring. Checked by "
                "`tests/test_quant_blocks.c`: our dequantization of the random blocks equals the "
                "package's (every type, IQ4_NL included), our Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 quantizers "
                "give the package's bytes (the package has no quantizer for the K types and IQ4_NL).\n")
    print("wrote", OUT)


if __name__ == "__main__":
    sys.exit(main())
