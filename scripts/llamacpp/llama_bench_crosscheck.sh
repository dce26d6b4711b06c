#!/usr/bin/env bash
# llama_bench_crosscheck.sh -- llama.cpp measured by its own llama-bench (pp512, tg64, flash attention on)
# in two builds against tq bench (prefill 512, decode 64 at depth 0, --kv bf16), 1 and 2 threads, the
# five issue-14 files, in the same minutes; about 2 min on the 2-vCPU box, one line per file and threads.
#   GCC_BIN  llama.cpp built with gcc, AMX off (gcc 12's build of ggml's AMX kernels faults here)
#   AMX_BIN  llama.cpp built with clang, GGML_NATIVE=ON and CFLAGS/CXXFLAGS -D__AMX_INT8__=1 -D__AMX_TILE__=1
#            (clang 14 spells the macros __AMXINT8__ / __AMXTILE__, ggml tests gcc's spelling: without
#            them a clang build has no AMX path at all)
set -uo pipefail
cd "$(dirname "$0")/../.."
GCC_BIN=${GCC_BIN:-../llama-build/bin}
AMX_BIN=${AMX_BIN:-../llama-build-amx-clang/bin}
TQ=${TQ:-build/release/tq}
MODELS=${MODELS:-models/SmolLM2-135M-Instruct.Q4_1.gguf,models/gemma-3-270m-q4_k_m.gguf,build/native_table/SmolLM2-135M-Instruct.tq-Q4_0.gguf,build/native_table/SmolLM2-135M-Instruct.tq-Q8_0.gguf,build/native_table/SmolLM2-135M-Instruct.tq-IQ4_NL.gguf}
lb() { # llama-bench BIN FILE THREADS -> "pp tg"
    "$1/llama-bench" -m "$2" -t "$3" -p 512 -n 64 -fa 1 -r 3 2>&1 | grep -E "pp512|tg64" |
        awk -F'|' '{gsub(/ /,"",$(NF-1)); split($(NF-1),a,"±"); printf "%s ", a[1]}'
}
for f in ${MODELS//,/ }; do
    for t in 1 2; do
        g=$(lb "$GCC_BIN" "$f" $t)
        a=$(lb "$AMX_BIN" "$f" $t)
        q=$("$TQ" bench -m "$f" -t $t --kv bf16 --prefill 512 --depths 0 --decode 64 --runs 3 2>&1 |
            grep -E "^prefill|^decode" | awk '{for(i=1;i<=NF;i++) if($i=="tok/s") printf "%s ", $(i-1)}')
        echo "$(basename "$f") t$t | llama gcc pp/tg: $g| llama clang+AMX pp/tg: $a| tq pp/tg: $q"
    done
done
