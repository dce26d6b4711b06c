#!/usr/bin/env python3
"""kv_proof_table.py -- issue 11's proof table: per (model, text) and KV budget (4.5, 5.5, 6.5 bits
per element), tq's best scheme of that size or fewer bits against llama.cpp's best rotated type of
that size, mean KL each against its own f32 teacher, and the ratio (target <= 0.7).

    python3 scripts/quality/kv_proof_table.py RESULT.json... [--md OUT.md]

Inputs: `tq kl --json` files (tq's side; rot:q*/iq4_nl rows are tq's re-implementation of
llama.cpp's types and are listed, not used as the peer) and scripts/quality/llamacpp_kl.py --json
files (llama.cpp's side, rotated types only). Bits per element: tq 32 * bytes_per_token / the f32
teacher's; llama.cpp the mean of the K and V type's bits (q8_0 8.5, q5_0 5.5, q4_0/iq4_nl 4.5).
Several files of one side for the same (model, text) are merged (a scheme measured twice keeps
the run with more windows). The windows column says how many 512-token windows each side ran.
"""
import argparse
import json
import os

BUDGETS = (4.5, 5.5, 6.5)


def short_model(p):
    b = os.path.basename(p).lower()
    return "SmolLM2-135M" if "smol" in b else "Gemma 3 270M" if "gemma" in b else b


def short_text(p):
    b = os.path.basename(p)
    return "WikiText-2" if "wikitext" in b else b


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--md")
    a = ap.parse_args()
    tq, ll, win = {}, {}, {}
    for fn in a.files:
        r = json.load(open(fn))
        if "schemes" not in r and "types" not in r:
            continue  # not a KL result (e.g. llamacpp_eval_speed.py's JSON)
        col = (short_model(r["model"]), short_text(r["text"]))
        if "schemes" in r:
            f32 = r["teacher"]["bytes_per_token"]
            for s in r["schemes"]:
                if s["kv"].startswith("rot:") and not s["kv"].startswith("rot:l"):
                    continue  # tq's reproduction of a llama.cpp type, not a candidate
                bits = 32.0 * s["bytes_per_token"] / f32
                old = tq.setdefault(col, {}).get(s["kv"])
                if not old or old[2] < r["windows"]:
                    tq[col][s["kv"]] = (bits, s["kl_mean"], r["windows"])
            win.setdefault(col, {}).setdefault("tq", set()).add(r["windows"])
        else:
            for t in r["types"]:
                if not t["rotated"]:
                    continue
                old = ll.setdefault(col, {}).get(t["kv"])
                if not old or old[2] < r["windows"]:
                    ll[col][t["kv"]] = (t["bits_per_elem"], t["kl_mean"], r["windows"])
            win.setdefault(col, {}).setdefault("llama", set()).add(r["windows"])
    cols = sorted(set(tq) | set(ll), key=lambda c: (c[0] != "SmolLM2-135M", c[1] != "WikiText-2"))
    out = ["| model | text | windows tq / llama.cpp | bits | llama.cpp best rotated | KL | tq best "
           "(bits) | KL | ratio |", "|---|---|---|---:|---|---:|---|---:|---:|"]
    for c in cols:
        w = win.get(c, {})
        wt = "/".join(str(x) for x in sorted(w.get("tq", []))) or "-"
        wl = "/".join(str(x) for x in sorted(w.get("llama", []))) or "-"
        for b in BUDGETS:
            lb = [(v[1], k) for k, v in ll.get(c, {}).items() if abs(v[0] - b) < 1e-6]
            tb = [(v[1], k, v[0]) for k, v in tq.get(c, {}).items() if v[0] <= b + 1e-6]
            lbest = min(lb) if lb else None
            tbest = min(tb) if tb else None
            ratio = f"**{tbest[0] / lbest[0]:.2f}**" if lbest and tbest else ""
            out.append(f"| {c[0]} | {c[1]} | {wt} / {wl} | {b:g} | "
                       f"{lbest[1] if lbest else '-'} | {lbest[0]:.5f} | " if lbest else
                       f"| {c[0]} | {c[1]} | {wt} / {wl} | {b:g} | - | | ")
            out[-1] += (f"`{tbest[1]}` ({tbest[2]:.2f}) | {tbest[0]:.5f} | {ratio} |" if tbest
                        else "- | | |")
    md = "\n".join(out) + "\n"
    print(md)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)


if __name__ == "__main__":
    main()
