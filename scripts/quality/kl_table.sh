#!/bin/sh
# kl_table.sh -- the KV quality table of docs/results.md ("TurboQuant KV cache in the engine"):
# teacher-forced KL (teacher f32) of every scheme on SmolLM2-135M-Instruct x WikiText-2 raw test,
# 32 windows of 512 tokens, in two processes (each runs its own teacher pass).
# (turbo:k8v3+e8 was in the first run, commit 3a75e45 and before; it did not earn its place and
# is no longer offered.)
# usage: scripts/quality/kl_table.sh [TQ_BINARY] [OUTDIR]
set -e
TQ=${1:-build/release/tq}
OUT=${2:-scripts/quality/results}
M=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
F=${TEXT:-../shared/assets/corpora/wikitext-2-raw-test.txt}
mkdir -p "$OUT"
"$TQ" kl -m "$M" -f "$F" --ctx 512 --chunks 32 -t 2 --json "$OUT/kl_a.json" \
    --kv f16,kv8,kv4,turbo:k8v8,turbo:k8v4,turbo:k8v3 > "$OUT/kl_a.txt" 2> "$OUT/kl_a.log" &
"$TQ" kl -m "$M" -f "$F" --ctx 512 --chunks 32 -t 2 --json "$OUT/kl_b.json" \
    --kv turbo:k8v2,turbo:k4v3,turbo:k4v2,turbo:k4v3+rk,turbo:k4v2+rk \
    > "$OUT/kl_b.txt" 2> "$OUT/kl_b.log" &
wait
cat "$OUT/kl_a.txt" "$OUT/kl_b.txt"
