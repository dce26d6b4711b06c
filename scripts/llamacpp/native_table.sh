#!/usr/bin/env bash
# native_table.sh -- the issue-14 table in one command: tq --weights native (the block formats
# run as they are) vs llama.cpp on the same GGUF files, plus the quality and memory checks.
#
#   bash scripts/llamacpp/native_table.sh            # from the repository root, quiet machine
#   TQ=build/release/tq RUNS=5 THREADS=1,2 bash scripts/llamacpp/native_table.sh
#
# 1. speed (scripts/llamacpp/bench.py, tq and llama.cpp repetitions interleaved): prefill 512
#    and decode at depths 0 and 512, threads 1 and 2, on SmolLM2's own Q4_1 file, Gemma 3 270M
#    Q4_K_M, and a Q4_0 and a Q8_0 file written by `tq quantize` from the Q4_1 file (so their
#    weights are a requantization: the speed comparison is what they are for);
#    peak RSS of a 64-token `tq generate` with native and bf16 weights next to the file size;
# 2. quality: KL(f32 weights dequantized at load || native kernels with q8 activations) and
#    || native-f32 (f32 activations), KV cache f32 on both sides, 8 windows of 512 tokens of
#    wikitext-2 (tq teacher + tq kl --teacher-dump).
# Needs: a release build (cmake --preset release && cmake --build --preset release -j 2),
# llama-cpp-python (bench.py), the models in models/, ../shared/assets/corpora next to the repo.
set -euo pipefail
TQ=${TQ:-build/release/tq}
RUNS=${RUNS:-3}
THREADS=${THREADS:-1,2}
DEPTHS=${DEPTHS:-0,512}
OUT=${OUT:-build/native_table}
TEXT=${TEXT:-../shared/assets/corpora/wikitext-2-raw-test.txt}
Q41=models/SmolLM2-135M-Instruct.Q4_1.gguf
GEMMA=models/gemma-3-270m-q4_k_m.gguf
mkdir -p "$OUT"
for t in Q4_0 Q8_0; do
    f="$OUT/SmolLM2-135M-Instruct.tq-$t.gguf"
    [ -f "$f" ] || "$TQ" quantize -m "$Q41" -o "$f" --format gguf --type "$t" -q
done
MODELS="$Q41,$GEMMA,$OUT/SmolLM2-135M-Instruct.tq-Q4_0.gguf,$OUT/SmolLM2-135M-Instruct.tq-Q8_0.gguf"
echo "== speed and memory: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, tq isa $("$TQ" --version 2>/dev/null | head -1)"
grep -o -w 'avx512_vnni\|avx512f\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
python3 scripts/llamacpp/bench.py --tq "$TQ" --threads "$THREADS" --depths "$DEPTHS" \
    --runs "$RUNS" --rss --models "$MODELS" --text "$TEXT"
echo "== quality: KL(f32 weights || native), KV f32, 8 windows x 512 tokens"
for m in $(echo "$MODELS" | tr ',' ' '); do
    d="$OUT/$(basename "$m" .gguf).teacher"
    "$TQ" teacher -m "$m" -f "$TEXT" -o "$d" --weights f32 --kv f32 --chunks 8 --ctx 512 >/dev/null
    for w in native native-f32; do
        printf '%-40s --weights %-10s ' "$(basename "$m")" "$w"
        "$TQ" kl --teacher-dump "$d" -m "$m" -f "$TEXT" --weights "$w" --kv f32 --json - |
            python3 -c 'import json,sys
r=json.load(sys.stdin)["schemes"][0]
print(" ".join(f"{k} {r[k]:.6g}" for k in ("kl_mean","kl_p99","kl_max","top1","ppl")))'
    done
done
