#!/usr/bin/env python3
"""kv_vs_llamacpp.py -- merge `tq kl --json` and scripts/quality/llamacpp_kl.py --json results
into one markdown table: one row per (engine, KV scheme), sorted by bits per KV element, one
KL-mean column per (model, text), plus top-1 agreement columns.

    python3 scripts/quality/kv_vs_llamacpp.py OUTDIR/*.json > OUTDIR/merged.md

tq's bits per element: 32 * bytes_per_token / (the f32 teacher's bytes_per_token) (the teacher
stores every K/V element as f32), so on Gemma 3 it includes the sliding-window layers at
whatever tq stores them in. llama.cpp's: the K and V type's bits (q8_0 8.5, q5_0 5.5, q4_0 and
iq4_nl 4.5, f16 16), mean of K and V. Every file must have the same ctx; windows may differ
(the header lists them).
"""
import json
import os
import sys


def short_model(p):
    b = os.path.basename(p).lower()
    return "SmolLM2-135M" if "smollm2" in b else "Gemma3-270M" if "gemma" in b else b


def short_text(p):
    b = os.path.basename(p)
    return "wikitext-2" if "wikitext" in b else b


def main():
    files = sys.argv[1:]
    if not files:
        sys.exit("usage: kv_vs_llamacpp.py RESULT.json...")
    rows = {}   # (engine, scheme) -> {"bits": {col: b}, col: (kl, top1)}
    cols, info = [], {}
    for fn in files:
        r = json.load(open(fn))
        col = (short_model(r["model"]), short_text(r["text"]))
        if col not in cols:
            cols.append(col)
        if "schemes" in r:      # tq kl
            eng = "tq"
            f32 = r["teacher"]["bytes_per_token"] if r["teacher"]["kv"] == "f32" else None
            for s in r["schemes"]:
                bits = 32.0 * s["bytes_per_token"] / f32 if f32 else float("nan")
                rows.setdefault((eng, s["kv"]), {}).setdefault("bits", {})[col] = bits
                rows[(eng, s["kv"])][col] = (s["kl_mean"], s["top1"])
            info.setdefault(col, []).append(f"tq {r['windows']}x{r['ctx']}")
        else:                   # llamacpp_kl.py
            eng = "llama.cpp"
            for t in r["types"]:
                name = t["kv"] + (" (rot)" if t["rotated"] else "")
                rows.setdefault((eng, name), {}).setdefault("bits", {})[col] = t["bits_per_elem"]
                rows[(eng, name)][col] = (t["kl_mean"], t["top1"])
            info.setdefault(col, []).append(f"llama.cpp {r['windows']}x{r['ctx']}")

    def bits_of(k):
        b = list(rows[k]["bits"].values())
        return sum(b) / len(b)

    hdr = "| bits/elem | engine | KV scheme | " + " | ".join(f"{m} {t} KL" for m, t in cols) + \
        " | " + " | ".join(f"{m} {t} top-1" for m, t in cols) + " |"
    print("windows: " + "; ".join(f"{m} {t}: {', '.join(info[(m, t)])}" for m, t in cols))
    print()
    print(hdr)
    print("|---:|---|---|" + "---:|" * (2 * len(cols)))
    for k in sorted(rows, key=lambda k: (-bits_of(k), k[0], k[1])):
        bs = sorted({round(v, 2) for v in rows[k]["bits"].values()})
        btxt = "/".join(f"{b:g}" for b in bs)
        kl = " | ".join(f"{rows[k][c][0]:.5f}" if c in rows[k] else "" for c in cols)
        t1 = " | ".join(f"{rows[k][c][1]:.4f}" if c in rows[k] else "" for c in cols)
        print(f"| {btxt} | {k[0]} | {k[1]} | {kl} | {t1} |")


if __name__ == "__main__":
    main()
