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
# Settings (environment): TQ (default build/release/tq), LLAMA_SERVER (default: llama.cpp at its
# best on this CPU: ../llama-build-amx-clang/bin/llama-server next to the repository when the CPU
# has AMX and that build has llama-server, else ../llama-build/bin/llama-server), MODEL, THREADS
# (2), ROUNDS (5), REQUESTS (4), MAX_TOKENS (64), STREAMS (1,2,4,8), LLAMA_EXTRA (empty, see
# below), OUT (the first argument wins), MAX_SECONDS (540: no round starts that would end past it;
# the output says how many ran). The table also splits tq's scheduler time per level (decode-only
# passes, passes with a prompt chunk, its own work, idle; from /metrics before and after each
# level). The output names the llama-server binary, its build (compiler, GGML options, CFLAGS)
# and, when llama-bench sits beside it and LLAMA_EXTRA is empty, the weight buffers that build
# loads for MODEL ("AMX ... MiB" = its AMX path runs; llama-bench -v).
#
# The AMX build: clang 14 with GGML_NATIVE=ON and -D__AMX_INT8__=1 -D__AMX_TILE__=1 in CFLAGS and
# CXXFLAGS (docs/results.md "llama.cpp at its best on this machine"; `cmake --build
# ../llama-build-amx-clang -j2 --target llama-server`, ~3-5 min). gcc 12's build of ggml's AMX
# kernels faults here (SIGILL at tilezero on the first batch); a gcc build with AMX compiled in
# needs LLAMA_EXTRA=-nr (--no-repack: no AMX or repacked weight buffers). Until 2026-12-03 the
# default peer was the gcc build without AMX (../llama-build, GGML_NATIVE=OFF) with -nr.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
TQ=${TQ:-build/release/tq}
if [ -z "${LLAMA_SERVER:-}" ]; then
    LLAMA_SERVER=$ROOT/../llama-build/bin/llama-server
    AMX_SERVER=$ROOT/../llama-build-amx-clang/bin/llama-server
    if grep -qw amx_int8 /proc/cpuinfo && [ -x "$AMX_SERVER" ]; then LLAMA_SERVER=$AMX_SERVER; fi
fi
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-5}
REQUESTS=${REQUESTS:-4}
MAX_TOKENS=${MAX_TOKENS:-64}
STREAMS=${STREAMS:-1,2,4,8}
LLAMA_EXTRA=${LLAMA_EXTRA-}
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
LBIN=$(dirname "$LLAMA_SERVER")
echo "# peer: $LLAMA_SERVER ($(python3 -c 'import sys; sys.path.insert(0, "scripts/llamacpp"); import bench; print(bench.build_info(sys.argv[1]))' "$LBIN")), extra flags: '${LLAMA_EXTRA}'" | tee -a "$OUT.txt"
if [ -x "$LBIN/llama-bench" ] && [ -z "$LLAMA_EXTRA" ]; then # the same build's model loader: which weight buffers (AMX = its AMX path)
    echo "# peer weight buffers (llama-bench -v of the same build): $(python3 -c 'import sys; sys.path.insert(0, "scripts/llamacpp"); import bench; print(bench.llama_buffers(sys.argv[1], sys.argv[2], []))' "$LBIN/llama-bench" "$MODEL")" | tee -a "$OUT.txt"
fi
python3 scripts/serve/load_test.py --tq "$TQ" --llama-server "$LLAMA_SERVER" \
    --llama-extra="$LLAMA_EXTRA" -m "$MODEL" -t "$THREADS" --parallel 8 --ctx 1024 \
    --streams "$STREAMS" --requests "$REQUESTS" --rounds "$ROUNDS" --max-tokens "$MAX_TOKENS" \
    --max-seconds "${MAX_SECONDS:-540}" --log-dir "$LOGS" --json "$OUT.json" 2>&1 | tee -a "$OUT.txt"
echo "proof.sh: wrote $OUT.txt and $OUT.json"
