#!/usr/bin/env python3
"""make_table.py -- markdown tables for docs/results.md "CUDA (H200)" from the raw CSVs of one GPU
visit (bench/results/cuda_h200_kv_bench_d*.csv + cuda_h200_sdpa_*.csv). Helper script only.

usage: python3 bench/cuda/make_table.py [bench/results] [host|cold] > table.md
Rows are taken for one timing mode (default host; CSVs without a timing column are host-timed).
"""
import csv
import glob
import os
import sys

d = sys.argv[1] if len(sys.argv) > 1 else "bench/results"
timing = sys.argv[2] if len(sys.argv) > 2 else "host"
ours, sdpa, copy = {}, {}, None
for f in sorted(glob.glob(os.path.join(d, "cuda_h200_kv_bench_d*.csv"))):
    for r in csv.DictReader(open(f)):
        if r.get("timing", "host") != timing:
            continue
        ours[(r["scheme"], int(r["head_dim"]), int(r["batch"]), int(r["ctx"]))] = r
        copy = float(r["copy_gbps"])
for f in sorted(glob.glob(os.path.join(d, "cuda_h200_sdpa_*.csv"))):
    for r in csv.DictReader(open(f)):
        if r.get("timing", "host") != timing:
            continue
        sdpa[(int(r["head_dim"]), int(r["batch"]), int(r["ctx"]))] = r

schemes = ["bf16", "kv8", "turbo:k8v3", "turbo:k4v3"]
for hd in (128, 64, 256):
    print(f"\n**head_dim {hd}** (32 query heads / 8 kv heads, 1 query token; time per call in us, median; "
          f"GB/s on the bytes the call must read; % of the {copy:.0f} GB/s copy rate; x = SDPA time / our time)\n")
    print("| batch | ctx | SDPA flash bf16 | ours bf16 | ours kv8 | ours turbo k8v3 | ours turbo k4v3 | k8v3 vs SDPA |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in (1, 8):
        for n in (1024, 4096, 16384, 32768, 65536, 131072):
            s = sdpa.get((hd, b, n))
            if not s:
                continue
            row = [str(b), f"{n // 1024}k", f"{float(s['us_median']):.1f} us ({float(s['gbps']):.0f} GB/s)"]
            for sc in schemes:
                o = ours.get((sc, hd, b, n))
                row.append(f"{float(o['us_median']):.1f} us ({float(o['gbps']):.0f} GB/s, {float(o['pct_copy']):.0f}%)"
                           if o else "-")
            o = ours.get(("turbo:k8v3", hd, b, n))
            row.append(f"{float(s['us_median']) / float(o['us_median']):.2f}x" if o else "-")
            print("| " + " | ".join(row) + " |")
