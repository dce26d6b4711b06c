#!/usr/bin/env python3
"""mlx_lm_logits.py -- the peer runner of tests/test_mlx_lm.c: stock mlx-lm loads an MLX affine
directory (mlx_lm.utils.load_model: config.json + model.safetensors) and writes its logits.

    python3 scripts/quant/mlx_lm_logits.py DIR TOKENS OUT [--dtype f32|as-loaded]

TOKENS: one prompt per line, token ids separated by spaces. OUT: for each prompt in order, the
logits of every position as float32 little-endian [n_tokens, vocab]. --dtype f32 (default) casts
the model's floating parameters (norms, bf16 scales/biases: exact) to float32 before running, so
the comparison measures the format and not bf16 arithmetic; as-loaded runs mlx-lm as it loads
the files (bf16 compute). Exit 77 when mlx / mlx-lm are not installed
(pip install "mlx[cpu]" mlx-lm).
"""
import argparse
import sys
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("tokens")
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=["f32", "as-loaded"], default="f32")
    a = ap.parse_args()
    try:
        import mlx.core as mx
        import numpy as np
        from mlx_lm.utils import load_model
    except ImportError as e:
        print(f"SKIP: mlx / mlx-lm not installed ({e})")
        return 77
    model, _ = load_model(Path(a.dir))
    if a.dtype == "f32":
        model.set_dtype(mx.float32)
    n = 0
    with open(a.out, "wb") as f:
        for line in open(a.tokens):
            ids = [int(t) for t in line.split()]
            if not ids:
                continue
            lg = model(mx.array([ids]))[0].astype(mx.float32)
            f.write(np.asarray(lg, dtype="<f4").tobytes())
            n += 1
    print(f"mlx-lm {a.dtype}: {n} prompts -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
