#!/bin/bash
# ab_bench.sh -- same-run A/B of two tq binaries: interleaved rounds (order alternating) of
#   tq bench  (prefill + decode, --weights bf16 --kv bf16 (both sides on the same cache, whatever the
#   CLI default), 1 and 2 threads)  and  tq kv-bench --quick,
# then the median of each number per binary and the ratio NEW/OLD (> 1 = NEW faster).
# Usage: scripts/ab_bench.sh OLD_TQ NEW_TQ [ROUNDS=3] [MODEL]
# Runs from the source tree (models/ there). Prints the table and the machine/load lines.
set -euo pipefail
old=$1 new=$2 rounds=${3:-3} model=${4:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
out=$(mktemp -d /tmp/ab_bench.XXXXXX)
echo "ab_bench: OLD=$old NEW=$new rounds=$rounds model=$model out=$out"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs; load at start:$(uptime | sed 's/.*load average://')"
run_one() { # tag binary round
    local tag=$1 bin=$2 r=$3
    for t in 1 2; do
        "$bin" bench -m "$model" -t $t --weights bf16 --kv bf16 --prefill 256 --batch 256 --decode 16 \
            --depths 128 --runs 3 --json 2>/dev/null >"$out/bench.$tag.t$t.r$r.json"
    done
    "$bin" kv-bench --quick --no-quality 2>/dev/null >"$out/kv.$tag.r$r.txt"
}
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then run_one old "$old" $r; run_one new "$new" $r
    else run_one new "$new" $r; run_one old "$old" $r; fi
    echo "round $r done (load$(uptime | sed 's/.*load average://'))"
done
python3 - "$out" <<'PY'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
def med(xs): return statistics.median(xs) if xs else float('nan')
rows = []
for t in (1, 2):
    for key in ("prefill", "decode"):
        v = {}
        for tag in ("old", "new"):
            xs = []
            for f in glob.glob(f"{out}/bench.{tag}.t{t}.r*.json"):
                j = json.loads(open(f).read().strip().splitlines()[-1])
                xs.append(j["prefill_tok_s"] if key == "prefill" else list(j["decode_tok_s"].values())[0])
            v[tag] = med(xs)
        rows.append((f"bench {key} tok/s, {t} thread{'s' if t > 1 else ''}", v["old"], v["new"]))
kv = {}
for tag in ("old", "new"):
    for f in glob.glob(f"{out}/kv.{tag}.r*.txt"):
        for line in open(f):
            m = re.match(r"(\S+)\s+(\d+)\s+(\w+)\s+(\d+)\s+\|\s+(\S+)\s+\S+\s+\S+\s+\|\s+(\S+)", line)
            if m and m.group(3) != "isa":
                k = (m.group(1), m.group(3), m.group(4))
                kv.setdefault(k, {}).setdefault(tag, []).append((float(m.group(5)), float(m.group(6))))
for k in sorted(kv):
    o, n = kv[k].get("old", []), kv[k].get("new", [])
    for i, what in ((0, "enc"), (1, "dec")):
        rows.append((f"kv-bench {k[0]} {k[1]} t{k[2]} {what} row/s", med([x[i] for x in o]), med([x[i] for x in n])))
print(f"{'measurement (median of rounds)':44s} {'OLD':>11s} {'NEW':>11s} {'NEW/OLD':>8s}")
for name, o, n in rows:
    print(f"{name:44s} {o:11.4g} {n:11.4g} {n / o if o else float('nan'):8.3f}")
PY
echo "load at end:$(uptime | sed 's/.*load average://')"
