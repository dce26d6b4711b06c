#!/usr/bin/env python3
"""stats_summary.py -- summarize `tq quantize --stats` lines per tensor kind: median over layers
of max|w| and excess kurtosis before and after the fold, and the worst (max) of each.

    tq quantize ... --rotate --stats -q > stats.txt; python3 scripts/quant/stats_summary.py stats.txt
"""
import re
import sys
from statistics import median

KINDS = ["token_embd", "attn_output", "output.weight", "attn_q.", "attn_k.", "attn_v.", "ffn_gate",
         "ffn_up", "ffn_down", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
         "down_proj", "embed_tokens", "lm_head"]


def main(path):
    rows = {}
    pat = re.compile(r"^stat (\S+) .* maxabs (\S+) -> (\S+)\s+kurt (\S+) -> (\S+)")
    for line in open(path):
        m = pat.match(line)
        if not m:
            continue
        name = m.group(1)
        kind = next((k for k in KINDS if k in name), None)
        if kind is None:
            continue
        rows.setdefault(kind, []).append([float(m.group(i)) for i in range(2, 6)])
    print("| tensor | n | max\\|w\\| before (median / max) | after | excess kurtosis before (median / max) | after |")
    print("|---|---|---|---|---|---|")
    for k, v in rows.items():
        col = list(zip(*v))
        print(f"| {k.rstrip('.')} | {len(v)} | {median(col[0]):.3g} / {max(col[0]):.3g} | "
              f"{median(col[1]):.3g} / {max(col[1]):.3g} | {median(col[2]):.2f} / {max(col[2]):.2f} | "
              f"{median(col[3]):.2f} / {max(col[3]):.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
