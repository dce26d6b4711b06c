#!/usr/bin/env python3
"""make_f16_gguf.py -- write an F16 (or BF16) GGUF holding the dequantized weights of a quantized
GGUF, with every metadata key copied, so that llama.cpp and tq compute with the same weights.

    python3 scripts/llamacpp/make_f16_gguf.py                       # Q4_1 SmolLM2 -> F16 + BF16
    python3 scripts/llamacpp/make_f16_gguf.py --src X.gguf --type bf16 --out Y.gguf

Weights: every quantized tensor is dequantized with the `gguf` package (ggml's reference formula,
Q4_1: d*q + m with fp16 d, m; Q8_0: d*q) in float32, then rounded to the target type (RNE).
F32 tensors (norms) stay F32. The rounding is NOT exact in general: d*q needs up to 11+4 (Q4_1)
or 11+8 (Q8_0) significant bits and adding m can need more; f16 keeps 11, bf16 8. The script
prints, per target type, the fraction of weights that changed in the rounding and the largest
relative change, so the report can say how far the F16/BF16 file is from the Q4_1 one. Both
engines then read the *same* F16/BF16 file, which is what the comparison needs.
"""
import argparse
import os
import sys

import numpy as np
import gguf

FTYPE = {"f16": 1, "bf16": 32}  # llama_ftype: MOSTLY_F16, MOSTLY_BF16


def to_bf16_bits(x):
    """float32 -> bf16 bit patterns, round to nearest even (NaN kept quiet)."""
    u = x.astype(np.float32).view(np.uint32)
    r = ((u >> 16) & 1) + 0x7FFF
    out = ((u + r) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def bf16_bits_to_f32(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def copy_fields(reader, writer, ftype):
    for name, f in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # written by GGUFWriter itself
        if name == "general.file_type":
            writer.add_uint32(name, ftype)
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            sub = f.types[-1]
            val = f.contents()
            writer.add_key_value(name, val, vt, sub_type=sub)
        else:
            writer.add_key_value(name, f.contents(), vt)


def convert(src, dst, kind, shown):
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch)
    copy_fields(reader, writer, FTYPE[kind])
    n_total = n_changed = 0
    max_rel = 0.0
    for t in reader.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]  # numpy order: outermost first
        if t.tensor_type == gguf.GGMLQuantizationType.F32:
            arr = np.asarray(t.data, dtype=np.float32).reshape(shape)
            writer.add_tensor(t.name, arr)
            continue
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if kind == "f16":
            h = w.astype(np.float16)
            back = h.astype(np.float32)
            writer.add_tensor(t.name, h)
        else:
            b = to_bf16_bits(w)
            back = bf16_bits_to_f32(b)
            writer.add_tensor(t.name, b, raw_shape=shape, raw_dtype=gguf.GGMLQuantizationType.BF16)
        diff = back != w
        n_total += w.size
        n_changed += int(diff.sum())
        nz = w != 0
        if nz.any():
            max_rel = max(max_rel, float(np.max(np.abs(back[nz] - w[nz]) / np.abs(w[nz]))))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"{shown}: {kind}, {len(reader.tensors)} tensors; rounding the dequantized weights to "
          f"{kind} changed {n_changed}/{n_total} values ({100.0 * n_changed / max(n_total, 1):.2f}%), "
          f"max relative change {max_rel:.3g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--type", choices=["f16", "bf16", "both"], default="both")
    ap.add_argument("--out", help="output path (only with --type f16 or bf16)")
    a = ap.parse_args()
    if not os.path.exists(a.src):
        sys.exit(f"make_f16_gguf: {a.src} not found (run scripts/get-model.sh smollm2)")
    kinds = ["f16", "bf16"] if a.type == "both" else [a.type]
    if a.out and len(kinds) > 1:
        sys.exit("make_f16_gguf: --out needs --type f16 or --type bf16")
    stem = a.src[:-5] if a.src.endswith(".gguf") else a.src
    stem = stem.rsplit(".", 1)[0] if stem.rsplit(".", 1)[-1].upper().startswith("Q") else stem
    for k in kinds:
        dst = a.out or f"{stem}.{k.upper()}.gguf"
        tmp = dst + ".tmp"
        convert(a.src, tmp, k, dst)
        os.replace(tmp, dst)


if __name__ == "__main__":
    main()
