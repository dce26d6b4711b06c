#!/bin/sh
# kv_rot_table.sh -- the table of docs/results.md "Rotated block KV schemes": teacher-forced KL
# (teacher f32, bf16 weights = tq's default in-memory type) of llama.cpp's rotated block types
# re-implemented in tq (rot:q8_0/q4_0, rot:q5_0, rot:q4_0, rot:iq4_nl, ...) and of our
# rot:l<L>g<G> schemes, on SmolLM2-135M-Instruct and Gemma 3 270M x WikiText-2 raw test, the
# first CHUNKS (default 12) windows of 512 tokens -- the windows llama.cpp's runner is fed.
# One process per model (each runs its own f32 teacher), then the 6.5-bit follow-up schemes.
# The committed results (scripts/quality/results/kv_rot/) ran with THREADS=16 on a 16-core
# Xeon (the device machine's CPUs); the follow-up ran on the shared 2-vCPU box.
# usage: scripts/quality/kv_rot_table.sh [TQ_BINARY] [OUTDIR]
set -e
TQ=${1:-build/release/tq}
OUT=${2:-scripts/quality/results/kv_rot}
F=${TEXT:-../shared/assets/corpora/wikitext-2-raw-test.txt}
N=${CHUNKS:-12}
T=${THREADS:-2}
SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
GEMMA=models/gemma-3-270m-q4_k_m.gguf
LLAMA=rot:q8_0/q4_0,rot:q5_0,rot:q4_0,rot:iq4_nl
OURS=rot:l16g32,rot:l32g64/l11g64,rot:l45g64/l32g64,rot:l64g64/l22g64,rot:l90g64/l45g64,rot:l64g64
FOLLOW=rot:l181g64/l32g64,rot:l128g64/l45g64,rot:q8_0/l16g32
mkdir -p "$OUT"
run() { # name model schemes [chunks]
    "$TQ" kl -m "$2" -f "$F" --ctx 512 --chunks "${4:-$N}" -t "$T" --json "$OUT/$1.json" \
        --kv "$3" > "$OUT/$1.txt" 2> "$OUT/$1.log"
    cat "$OUT/$1.txt"
}
run smol12 "$SMOL" "rot:q8_0,$LLAMA,rot:q4_0/q8_0,turbo:k8v4,$OURS"
run gemma12 "$GEMMA" "$LLAMA,$OURS"
run smol_65 "$SMOL" "$FOLLOW"
run gemma_65 "$GEMMA" "rot:q8_0/q4_0,$FOLLOW" "${CHUNKS65:-6}"
