#!/usr/bin/env bash
# llama_bench_crosscheck.sh -- tq against both llama.cpp builds of this machine, each timed by its own
# llama-bench: a thin wrapper over scripts/llamacpp/bench.py (which times llama.cpp with llama-bench
# since 2026-12-03 20:00 UTC). Prefill 512 and decode 64 at depth 0, flash attention LLAMA_FA (on),
# 1 and 2 threads, 3 interleaved runs, the five issue-14 files; tq bench --kv bf16. Two tables, one
# per build (tq is measured again next to each); about 2 min each on the 2-vCPU box.
#   GCC_BIN  llama.cpp built with gcc, AMX off (gcc 12's build of ggml's AMX kernels faults here)
#   AMX_BIN  llama.cpp built with clang, GGML_NATIVE=ON and CFLAGS/CXXFLAGS -D__AMX_INT8__=1 -D__AMX_TILE__=1
#            (clang 14 spells the macros __AMXINT8__ / __AMXTILE__, ggml tests gcc's spelling: without
#            them a clang build has no AMX path at all); skipped when absent
set -uo pipefail
cd "$(dirname "$0")/../.."
GCC_BIN=${GCC_BIN:-../llama-build/bin}
AMX_BIN=${AMX_BIN:-../llama-build-amx-clang/bin}
TQ=${TQ:-build/release/tq}
MODELS=${MODELS:-models/SmolLM2-135M-Instruct.Q4_1.gguf,models/gemma-3-270m-q4_k_m.gguf,build/native_table/SmolLM2-135M-Instruct.tq-Q4_0.gguf,build/native_table/SmolLM2-135M-Instruct.tq-Q8_0.gguf,build/native_table/SmolLM2-135M-Instruct.tq-IQ4_NL.gguf}
rc=0
for bin in "$GCC_BIN" "$AMX_BIN"; do
    if [ ! -x "$bin/llama-bench" ]; then
        echo "== skipped: no $bin/llama-bench"
        continue
    fi
    echo "== llama.cpp from $bin"
    python3 scripts/llamacpp/bench.py --llama-bin "$bin" --tq "$TQ" --models "$MODELS" \
        --threads "${THREADS:-1,2}" --depths 0 --prefill 512 --decode 64 --runs "${RUNS:-3}" \
        --llama-fa "${LLAMA_FA:-on}" | grep -v '^JSON' || rc=1
done
exit $rc
