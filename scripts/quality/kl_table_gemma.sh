#!/bin/sh
# kl_table_gemma.sh -- the Gemma 3 270M column of docs/results.md ("TurboQuant KV cache in the
# engine"): teacher-forced KL (teacher f32) of the KV schemes on gemma-3-270m Q4_K_M (head_dim
# 256; 15 of its 18 layers are sliding-window layers, which every turbo scheme keeps in bf16)
# x WikiText-2 raw test, 32 windows of 512 tokens, one process.
# usage: scripts/quality/kl_table_gemma.sh [TQ_BINARY] [OUTDIR]
set -e
TQ=${1:-build/release/tq}
OUT=${2:-scripts/quality/results}
M=${MODEL:-models/gemma-3-270m-q4_k_m.gguf}
F=${TEXT:-../shared/assets/corpora/wikitext-2-raw-test.txt}
mkdir -p "$OUT"
"$TQ" kl -m "$M" -f "$F" --ctx 512 --chunks 32 -t "${THREADS:-2}" --json "$OUT/kl_gemma3.json" \
    --kv f16,kv8,kv4,turbo:k8v8,turbo:k8v4,turbo:k8v3,turbo:k8v2,turbo:k4v3,turbo:k4v2,turbo:k4v3+rk \
    > "$OUT/kl_gemma3.txt" 2> "$OUT/kl_gemma3.log"
cat "$OUT/kl_gemma3.txt"
