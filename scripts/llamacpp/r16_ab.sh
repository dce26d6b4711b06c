#!/usr/bin/env bash
# r16_ab.sh -- issue 14's decode cells: tq with the file's rows (TQ_R16=0), tq with the r16 layout
# (default on AVX512-VNNI, docs/FORMAT.md "The r16 layout") and llama.cpp's best build here
# (llama-bench of the clang+AMX build), interleaved per round in one run: decode 64 tokens at depth
# 0, `tq bench --kv bf16 --prefill 16 --decode 64 --depths 0 --runs 3` vs `llama-bench -p 0 -n 64
# -fa 1 -r 3`. Prints one row per file x threads x round and the median ratio per cell.
# About 4 min with the defaults (3 files x 2 thread counts x ROUNDS=2 x ~20 s), run from the repo root.
#   TQ       tq binary (build/release/tq)
#   LLAMA    llama-bench (../llama-build-amx-clang/bin/llama-bench)
#   MODELS   comma-separated files (SmolLM2 Q4_1 and the tq-written Q4_0 / Q8_0 of native_table.sh)
set -uo pipefail
cd "$(dirname "$0")/../.."
TQ=${TQ:-build/release/tq}
LLAMA=${LLAMA:-../llama-build-amx-clang/bin/llama-bench}
MODELS=${MODELS:-build/native_table/SmolLM2-135M-Instruct.tq-Q4_0.gguf,build/native_table/SmolLM2-135M-Instruct.tq-Q8_0.gguf,models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-1,2}
ROUNDS=${ROUNDS:-2}
[ -x "$TQ" ] || { echo "r16_ab: no $TQ (cmake --preset release && cmake --build --preset release)"; exit 2; }
have_llama=1
[ -x "$LLAMA" ] || { echo "r16_ab: no $LLAMA: tq rows only"; have_llama=0; }
tqdec() { # env, model, threads -> tok/s
    env "$1" "$TQ" bench -m "$2" -t "$3" --prefill 16 --decode 64 --depths 0 --kv bf16 --runs 3 2>/dev/null |
        awk '/^decode/ {print $(NF-3)}'
}
lldec() {
    [ "$have_llama" = 1 ] || { echo -; return; }
    "$LLAMA" -m "$1" -t "$2" -p 0 -n 64 -fa 1 -r 3 -o csv 2>/dev/null | tail -1 |
        awk -F, '{gsub(/"/, ""); print $(NF-1)}' # avg_ts
}
echo "$(date -u +%FT%TZ) $(uname -n) load $(cut -d' ' -f1-3 /proc/loadavg) tq $("$TQ" version 2>/dev/null | head -1)"
printf '%-44s %3s %5s %10s %10s %10s %8s %8s\n' file thr round "tq file" "tq r16" llama r16/file r16/llama
tmp=$(mktemp)
IFS=, read -ra ML <<<"$MODELS"
IFS=, read -ra TL <<<"$THREADS"
for r in $(seq 1 "$ROUNDS"); do
    for m in "${ML[@]}"; do
        for t in "${TL[@]}"; do
            a=$(tqdec TQ_R16=0 "$m" "$t")
            b=$(tqdec TQ_R16=1 "$m" "$t")
            l=$(lldec "$m" "$t")
            ra=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", (a > 0) ? b / a : 0}')
            rl=$(awk -v l="$l" -v b="$b" 'BEGIN {printf "%.3f", (l + 0 > 0) ? b / l : 0}')
            printf '%-44s %3s %5s %10s %10s %10s %8s %8s\n' "$(basename "$m")" "$t" "$r" "$a" "$b" "$l" "$ra" "$rl"
            echo "$(basename "$m") $t $ra $rl" >>"$tmp"
        done
    done
done
echo "median per cell (r16/file, r16/llama):"
python3 - "$tmp" <<'PY'
import statistics, sys
cells = {}
for line in open(sys.argv[1]):
    f, t, a, b = line.split()
    cells.setdefault((f, int(t)), []).append((float(a), float(b)))
for (f, t), v in sorted(cells.items()):
    print(f"  {f:44s} t{t}  {statistics.median(x for x, _ in v):.3f}  {statistics.median(y for _, y in v):.3f}")
PY
rm -f "$tmp"
