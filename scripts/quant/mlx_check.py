#!/usr/bin/env python3
"""mlx_check.py -- `tq quantize --format mlx` writes what MLX itself would: for each tiny model
of tests/data/tiny (or --src DIR), with and without --rotate,
  1. every quantized matrix's uint32 codes equal mx.quantize() of the same (folded) f32 weight
     bit for bit, and its scales/biases equal MLX's rounded to bf16;
  2. stock mlx-lm (mlx_lm.utils.load_model) loads the directory and its logits on the model's
     prompt agree with mlx-lm on the unquantized folded f32 weights (top-1 agreement, mean KL:
     the quantization loss, printed).

    pip install "mlx[cpu]" mlx-lm
    python3 scripts/quant/mlx_check.py [--tq build/release/tq] [--bits 4] [--group 32]
Exit 0 when every check holds, 77 when mlx/mlx-lm are not installed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def st_load(path):
    import struct
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    dt = {"F32": np.float32, "U32": np.uint32, "BF16": np.uint16, "F16": np.float16}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = (v["dtype"], np.frombuffer(b[8 + n + s:8 + n + e], dtype=dt[v["dtype"]]).reshape(v["shape"]))
    return out


def bf16_round(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tq", default="build/release/tq")
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group", type=int, default=32)
    ap.add_argument("--src", action="append")
    a = ap.parse_args()
    try:
        import mlx.core as mx
        from mlx_lm.utils import load_model
    except ImportError as e:
        print(f"SKIP: mlx / mlx-lm not installed ({e})")
        return 77
    srcs = a.src or [f"tests/data/tiny/{n}" for n in ("llama", "qwen2", "qwen3", "gemma3")]
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for src in srcs:
            tok = [int(t) for t in open(os.path.join(src, "ref.txt")).read().split("greedy")[0].split()[2:]]
            for rot in ([], ["--rotate"]):
                tag = os.path.basename(src) + ("_rot" if rot else "")
                f32, mlxd = os.path.join(d, tag + "_f32"), os.path.join(d, tag + "_mlx")
                base = [a.tq, "quantize", "-m", src, "-q"] + rot
                subprocess.run(base + ["-o", f32, "--format", "safetensors", "--type", "F32"], check=True)
                subprocess.run(base + ["-o", mlxd, "--format", "mlx", "--bits", str(a.bits),
                                       "--group", str(a.group)], check=True)
                ref = st_load(os.path.join(f32, "model.safetensors"))
                got = st_load(os.path.join(mlxd, "model.safetensors"))
                n_q = n_code_bad = n_sb_bad = 0
                for k, (dt, v) in got.items():
                    if dt != "U32":
                        continue
                    n_q += 1
                    m = k[:-len(".weight")]
                    w = mx.array(ref[k][1])
                    wq, sc, bi = mx.quantize(w, group_size=a.group, bits=a.bits)
                    n_code_bad += int(not np.array_equal(np.array(wq), v))
                    n_sb_bad += int(not (np.array_equal(bf16_round(np.array(sc)), got[m + ".scales"][1]) and
                                         np.array_equal(bf16_round(np.array(bi)), got[m + ".biases"][1])))
                # mlx-lm loads both directories; logits on the prompt
                x = mx.array([tok])
                try:
                    lf = load_model(__import__("pathlib").Path(f32))[0]
                    pf = np.array(lf(x)[0].astype(mx.float32))
                except Exception as e:  # the model itself (not our quantization) is not loadable
                    print(f"{tag:12s} {n_q} quantized matrices: codes differ from mx.quantize in "
                          f"{n_code_bad}, scales/biases in {n_sb_bad}; mlx-lm cannot run even the "
                          f"unquantized f32 copy of this tiny model: {type(e).__name__} {str(e)[:100]}")
                    bad += n_code_bad + n_sb_bad > 0 or n_q == 0
                    continue
                lq = load_model(__import__("pathlib").Path(mlxd))[0]
                pq = np.array(lq(x)[0].astype(mx.float32))
                def lsm(z):
                    z = z - z.max(-1, keepdims=True)
                    return z - np.log(np.exp(z).sum(-1, keepdims=True))
                kl = (np.exp(lsm(pf)) * (lsm(pf) - lsm(pq))).sum(-1)
                top1 = (pq.argmax(-1) == pf.argmax(-1)).mean()
                ok = n_code_bad == 0 and n_sb_bad == 0 and n_q > 0
                bad += not ok
                print(f"{tag:12s} {n_q} quantized matrices: codes differ from mx.quantize in {n_code_bad}, "
                      f"scales/biases in {n_sb_bad}; mlx-lm loads it: top-1 vs f32 {top1:.2f}, "
                      f"mean KL {kl.mean():.4g} over {len(tok)} positions  {'OK' if ok else 'FAIL'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
