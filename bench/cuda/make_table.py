#!/usr/bin/env python3
"""make_table.py -- markdown tables for docs/results.md "CUDA (H200)" from the raw CSVs of one GPU
visit (kv_bench CSVs of `kv_bench_cuda --timing both` and sdpa_bench.py CSVs). Helper script only.

usage: python3 bench/cuda/make_table.py KV_CSV[,KV_CSV...] SDPA_CSV[,SDPA_CSV...] > table.md

Each cell: L2-cold GPU time (`--timing cold`, the primary number) / host-launch timing (`--timing
host`, events around a call issued to an idle GPU), then GB/s and % of the copy rate of the cold
time; the ratio column is SDPA time / ours, cold (host in parentheses). CSVs without a timing
column are host-timed.
"""
import csv
import sys


def load(paths, key):
    out = {}
    for f in paths.split(","):
        for r in csv.DictReader(open(f)):
            out[key(r) + (r.get("timing", "host"),)] = r
    return out


ours = load(sys.argv[1], lambda r: (r["scheme"], int(r["head_dim"]), int(r["batch"]), int(r["ctx"])))
sdpa = load(sys.argv[2], lambda r: (int(r["head_dim"]), int(r["batch"]), int(r["ctx"])))
copy = next(float(r["copy_gbps"]) for r in ours.values())
schemes = ["bf16", "kv8", "turbo:k8v3", "turbo:k4v3"]
dims = sorted({k[1] for k in ours}, key=lambda d: (d != 128, d))
for hd in dims:
    print(f"\n**head_dim {hd}** (32 query heads / 8 kv heads, 1 query token; us per call, median: "
          f"cold / host; GB/s and % of the {copy:.0f} GB/s copy rate on the cold time; "
          f"x = SDPA time / ours, cold (host))\n")
    print("| batch | ctx | SDPA flash bf16 | ours bf16 | ours kv8 | ours turbo k8v3 | ours turbo k4v3 "
          "| k8v3 vs SDPA |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in (1, 8):
        for n in (1024, 4096, 16384, 32768, 65536, 131072):
            sc, sh = sdpa.get((hd, b, n, "cold")), sdpa.get((hd, b, n, "host"))
            if not sc:
                continue
            cell = f"{float(sc['us_median']):.1f}"
            cell += f" / {float(sh['us_median']):.1f}" if sh else ""
            row = [str(b), f"{n // 1024}k", cell + f" us ({float(sc['gbps']):.0f} GB/s)"]
            for s in schemes:
                oc, oh = ours.get((s, hd, b, n, "cold")), ours.get((s, hd, b, n, "host"))
                if not oc:
                    row.append("-")
                    continue
                c = f"{float(oc['us_median']):.1f}" + (f" / {float(oh['us_median']):.1f}" if oh else "")
                row.append(c + f" us ({float(oc['gbps']):.0f} GB/s, {float(oc['pct_copy']):.0f}%)")
            oc, oh = ours.get(("turbo:k8v3", hd, b, n, "cold")), ours.get(("turbo:k8v3", hd, b, n, "host"))
            r = f"{float(sc['us_median']) / float(oc['us_median']):.2f}x" if oc else "-"
            if oh and sh:
                r += f" ({float(sh['us_median']) / float(oh['us_median']):.2f}x)"
            row.append(r)
            print("| " + " | ".join(row) + " |")
