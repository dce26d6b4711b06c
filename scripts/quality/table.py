#!/usr/bin/env python3
"""table.py -- merge the JSON outputs of scripts/quality/kl_table.sh into the markdown table of
docs/results.md. usage: python3 scripts/quality/table.py scripts/quality/results/kl_*.json"""
import json
import sys

rows, teacher, meta = [], None, None
for path in sys.argv[1:]:
    j = json.load(open(path))
    meta = meta or j
    teacher = teacher or j["teacher"]
    rows += j["schemes"]
f32 = teacher["bytes_per_token"]
print(f"{meta['windows']} windows x {meta['ctx']} tokens, {meta['positions']} scored positions "
      f"per scheme; teacher {teacher['kv']} (ppl {teacher['ppl']:.4f} on these positions)\n")
print("| scheme | bytes/token | vs f32 | KL mean | median | p95 | p99 | max | top-1 | ppl |")
print("|---|---|---|---|---|---|---|---|---|---|")
print(f"| {teacher['kv']} (teacher) | {f32} | 1.00x | 0 | 0 | 0 | 0 | 0 | 1 | {teacher['ppl']:.4f} |")
for r in rows:
    print(f"| {r['kv']} | {r['bytes_per_token']} | {f32 / r['bytes_per_token']:.2f}x | "
          f"{r['kl_mean']:.5f} | {r['kl_median']:.5f} | {r['kl_p95']:.5f} | {r['kl_p99']:.5f} | "
          f"{r['kl_max']:.4f} | {r['top1']:.4f} | {r['ppl']:.4f} |")
