#!/bin/bash
# proof.sh -- issue 15's serving proof in one command, for a QUIET machine (nothing else running):
# scripts/serve/load_test.py against `tq serve` and llama.cpp's llama-server on the same GGUF,
# threads, slots (--parallel 8) and context per slot (1024), both started at once and run
# interleaved level by level: 1/2/4/8 concurrent streams x 4 greedy chat requests of 64 tokens
# each (ignore_eos, streaming and plain alternating), 5 rounds, medians. Prints the table
# (aggregate tok/s, x 1-stream, p50/p99 latency and TTFT, errors, answers that differ from the
# same prompt answered alone), the 8-stream/1-stream ratio (target >= 3x for tq), tq/llama.cpp
# ratios per level and tq's own decode-only step times by batch size (/metrics). About 4-6 min.
#
#   bash scripts/serve/proof.sh [OUT]      # from the repository root; writes OUT.{txt,json}
#                                          # (default bench/results/serve_load_<date>_<HHMM>_quiet,
#                                          # a new name: it never overwrites a file; an existing
#                                          # OUT.txt or OUT.json is refused)
# Settings (environment): TQ (default build/release/tq), LLAMA_SERVER (default
# ../llama-build/bin/llama-server next to the repository), MODEL, THREADS (2), ROUNDS (5),
# REQUESTS (4), MAX_TOKENS (64), STREAMS (1,2,4,8), LLAMA_EXTRA (-nr, see below), OUT (the
# first argument wins), MAX_SECONDS (540: no round starts that would end past it; the output
# says how many ran). The table also splits tq's scheduler time per level (decode-only passes,
# passes with a prompt chunk, its own work, idle; from /metrics before and after each level).
#
# llama-server gets --no-repack (-nr): on this machine's CPU, which reports AMX, a GGML_NATIVE
# build compiles ggml-cpu's AMX kernels and they fault (SIGILL at tilezero) on the first batch;
# -nr turns off ggml-cpu's extra buffer types (AMX and the repacked layouts; in that tree's
# ggml-cpu/repack.cpp neither Q4_1 nor Q8_0 (SmolLM2's two block types) has a repacked layout on
# x86, so the kernels llama.cpp runs are the same). LLAMA_EXTRA= (empty) drops it for a build
# without AMX.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
TQ=${TQ:-build/release/tq}
LLAMA_SERVER=${LLAMA_SERVER:-$ROOT/../llama-build/bin/llama-server}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-5}
REQUESTS=${REQUESTS:-4}
MAX_TOKENS=${MAX_TOKENS:-64}
STREAMS=${STREAMS:-1,2,4,8}
LLAMA_EXTRA=${LLAMA_EXTRA--nr}
OUT=${1:-${OUT:-bench/results/serve_load_$(date -u +%F_%H%M)_quiet}}
for f in "$OUT.txt" "$OUT.json"; do
    [ ! -e "$f" ] || { echo "proof.sh: $f exists; give another OUT (first argument)" >&2; exit 1; }
done
for f in "$TQ" "$LLAMA_SERVER"; do
    [ -x "$f" ] || { echo "proof.sh: $f not found (tq: cmake --preset release && cmake --build --preset release -j2 --target tq)" >&2; exit 1; }
done
[ -f "$MODEL" ] || { echo "proof.sh: $MODEL not found (scripts/get-model.sh smollm2)" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
LOGS=$(mktemp -d /tmp/serve_proof.XXXXXX)
echo "# tq commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); server logs in $LOGS" | tee "$OUT.txt"
python3 scripts/serve/load_test.py --tq "$TQ" --llama-server "$LLAMA_SERVER" \
    --llama-extra="$LLAMA_EXTRA" -m "$MODEL" -t "$THREADS" --parallel 8 --ctx 1024 \
    --streams "$STREAMS" --requests "$REQUESTS" --rounds "$ROUNDS" --max-tokens "$MAX_TOKENS" \
    --max-seconds "${MAX_SECONDS:-540}" --log-dir "$LOGS" --json "$OUT.json" 2>&1 | tee -a "$OUT.txt"
echo "proof.sh: wrote $OUT.txt and $OUT.json"
