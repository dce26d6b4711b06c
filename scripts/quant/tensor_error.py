#!/usr/bin/env python3
"""tensor_error.py -- per-tensor quantization error of GGUF files against their f32 source.

    python3 scripts/quant/tensor_error.py REF.gguf A.gguf [B.gguf ...] [--by-tensor]

REF: the unquantized (F32) GGUF the candidates were made from (e.g. `tq quantize --type F32
--dequantize-source`); A, B: GGUF files of the same tensors (tq quantize, llama-quantize), each
dequantized by the `gguf` package (not by tq). Prints, per tensor role (attn_q, ffn_down, ...),
the types each file uses and the relative RMS error sqrt(sum (deq - ref)^2 / sum ref^2) summed
over the role's tensors; --by-tensor prints every tensor. Same tensor type in two files = a
like-for-like comparison of the quantizers."""
import re
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def tensors(path):
    r = GGUFReader(path)
    return {t.name: t for t in r.tensors}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    by_tensor = "--by-tensor" in sys.argv
    if len(args) < 2:
        print(__doc__)
        return 2
    ref = tensors(args[0])
    cands = [(p, tensors(p)) for p in args[1:]]
    roles = {}
    for name, t in ref.items():
        if len(t.shape) < 2:
            continue
        x = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(-1)
        role = re.sub(r"^blk\.\d+\.", "", name).replace(".weight", "")
        row = []
        for p, c in cands:
            if name not in c:
                row.append(None)
                continue
            ct = c[name]
            y = np.asarray(dequantize(ct.data, ct.tensor_type), dtype=np.float64).reshape(-1)
            row.append((ct.tensor_type.name, float(((y - x) ** 2).sum())))
        x2 = float((x ** 2).sum())
        if by_tensor:
            print(f"{name:32s} " + "  ".join(
                f"{v[0]:>5s} {np.sqrt(v[1] / x2):.5f}" if v else "    -        -" for v in row))
        r = roles.setdefault(role, [0.0, [[set(), 0.0] for _ in cands]])
        r[0] += x2
        for i, v in enumerate(row):
            if v:
                r[1][i][0].add(v[0])
                r[1][i][1] += v[1]
    print("| tensor | " + " | ".join(f"{p.split('/')[-1]} types | rel RMSE" for p, _ in cands) + " |")
    print("|---|" + "---|---|" * len(cands))
    tot = [0.0, [0.0] * len(cands)]
    for role, (x2, cs) in sorted(roles.items()):
        tot[0] += x2
        cells = []
        for i, (ty, e) in enumerate(cs):
            tot[1][i] += e
            cells += ["/".join(sorted(ty)) or "-", f"{np.sqrt(e / x2):.5f}" if ty else "-"]
        print(f"| {role} | " + " | ".join(cells) + " |")
    print("| all matrices | " + " | ".join(f"| {np.sqrt(e / tot[0]):.5f}" for e in tot[1]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
