#!/bin/sh
# kv_proof.sh -- issue 11's proof grid: tq's kept rot: schemes (tq kl) and llama.cpp's own rotated
# KV types (scripts/quality/llamacpp_kl.py through llama-cpp-python) on the SAME BF16 GGUF files,
# the same token windows (ctx 512, the first CHUNKS windows, second half scored; llamacpp_kl.py
# stops unless both tokenizers give identical ids), each engine against its own f32-KV teacher,
# for SmolLM2-135M-Instruct and Gemma 3 270M x WikiText-2 raw test and GPL-3
# (/usr/share/common-licenses/GPL-3, 35,149 bytes); then the ratio table (kv_proof_table.py).
#
#   scripts/quality/kv_proof.sh [OUTDIR]        (default out/kv_proof)
#
# Env: TQ (default build/release/tq), THREADS (2), CHUNKS_WIKI (12), CHUNKS_GPL (12), ONLY
# ("smol-wiki gemma-gpl" ... to run a subset), SIDES ("tq llama"). BF16 files: made by
#   python3 scripts/llamacpp/make_f16_gguf.py --type bf16 --src models/SmolLM2-135M-Instruct.Q4_1.gguf \
#       --out models/SmolLM2-135M-Instruct.BF16.gguf
#   python3 scripts/llamacpp/make_f16_gguf.py --type bf16 --src models/gemma-3-270m-q4_k_m.gguf \
#       --out models/gemma-3-270m.BF16.gguf
# (MODELS=dir to read them elsewhere). llama-cpp-python: installed, or PYTHONPATH=<sdist dir>
# LLAMA_CPP_LIB_PATH=<dir of libllama.so> (what docs/results.md's run used).
set -e
OUT=${1:-out/kv_proof}
TQ=${TQ:-build/release/tq}
T=${THREADS:-2}
M=${MODELS:-models}
WIKI=${WIKI:-../shared/assets/corpora/wikitext-2-raw-test.txt}
GPL=/usr/share/common-licenses/GPL-3
OURS=rot:l32g64/l11g64,rot:l64g64/l22g64,rot:l181g64/l32g64
EXTRA_SMOL=${EXTRA_SMOL:-rot:q8_0/q4_0,turbo,rot:l128g64/l45g64}
TYPES=${TYPES:-q8_0/q4_0,q5_0/q5_0,iq4_nl/iq4_nl,q4_0/q4_0}
ONLY=${ONLY:-smol-wiki smol-gpl gemma-wiki gemma-gpl}
SIDES=${SIDES:-tq llama}
mkdir -p "$OUT"
for job in $ONLY; do
    case $job in
    smol-*) model=$M/SmolLM2-135M-Instruct.BF16.gguf kv=$OURS,$EXTRA_SMOL ;;
    gemma-*) model=$M/gemma-3-270m.BF16.gguf kv=$OURS ;;
    *) echo "kv_proof.sh: unknown job $job" >&2; exit 2 ;;
    esac
    case $job in
    *-wiki) text=$WIKI n=${CHUNKS_WIKI:-12} ;;
    *-gpl) text=$GPL n=${CHUNKS_GPL:-12} ;;
    esac
    for side in $SIDES; do
        if [ "$side" = tq ]; then
            nice "$TQ" kl -m "$model" -f "$text" --ctx 512 --chunks "$n" -t "$T" --kv "$kv" \
                --json "$OUT/tq_$job.json" > "$OUT/tq_$job.txt" 2> "$OUT/tq_$job.log"
            cat "$OUT/tq_$job.txt"
        else
            nice python3 scripts/quality/llamacpp_kl.py -m "$model" -f "$text" --ctx 512 \
                --chunks "$n" -t "$T" --tq "$TQ" --types "$TYPES" --json "$OUT/llama_$job.json" \
                --md "$OUT/llama_$job.md" 2> "$OUT/llama_$job.log"
        fi
    done
done
python3 scripts/quality/kv_proof_table.py "$OUT"/*.json --md "$OUT/proof.md"
