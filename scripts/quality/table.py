#!/usr/bin/env python3
"""table.py -- merge the JSON outputs of scripts/quality/kl_table.sh (and, after --ppl, those of
scripts/quality/ppl_table.sh) into the markdown table of docs/results.md.
usage: python3 scripts/quality/table.py RESULTS/kl_*.json [--ppl RESULTS/ppl_*.json]"""
import json
import sys

args = sys.argv[1:]
kl_files = args[:args.index("--ppl")] if "--ppl" in args else args
ppl_files = args[args.index("--ppl") + 1:] if "--ppl" in args else []
rows, teacher, meta = [], None, None
for path in kl_files:
    j = json.load(open(path))
    meta = meta or j
    teacher = teacher or j["teacher"]
    rows += j["schemes"]
whole = {}
for path in ppl_files:
    j = json.load(open(path))
    whole[j["kv"]] = j
f32 = teacher["bytes_per_token"]
print(f"{meta['windows']} windows x {meta['ctx']} tokens, {meta['positions']} scored positions "
      f"per scheme; teacher {teacher['kv']} (ppl {teacher['ppl']:.4f} on these positions)", end="")
if whole:
    w = next(iter(whole.values()))
    print(f"; ppl (file): the whole text, {w['windows']} windows x {w['ctx']}, {w['scored']} scored "
          f"tokens (scripts/quality/ppl_table.sh)", end="")
print("\n")
extra = " ppl (file) |" if whole else ""
print("| scheme | bytes/token | vs f32 | KL mean | median | p95 | p99 | max | top-1 | ppl |" + extra)
print("|---|---|---|---|---|---|---|---|---|---|" + ("---|" if whole else ""))


def pf(kv):
    if not whole:
        return ""
    return f" {whole[kv]['ppl']:.4f} |" if kv in whole else " - |"


print(f"| {teacher['kv']} (teacher) | {f32} | 1.00x | 0 | 0 | 0 | 0 | 0 | 1 | {teacher['ppl']:.4f} |"
      + pf(teacher["kv"]))
for r in rows:
    print(f"| {r['kv']} | {r['bytes_per_token']} | {f32 / r['bytes_per_token']:.2f}x | "
          f"{r['kl_mean']:.5f} | {r['kl_median']:.5f} | {r['kl_p95']:.5f} | {r['kl_p99']:.5f} | "
          f"{r['kl_max']:.4f} | {r['top1']:.4f} | {r['ppl']:.4f} |" + pf(r["kv"]))
