#!/usr/bin/env bash
# kv_vs_llamacpp.sh -- KV-cache KL of tq's schemes and llama.cpp's cache types, each against its
# own f32-KV teacher, on the same BF16 weights, the same token windows (ctx 512, the first
# CHUNKS windows, the second half of each scored) and the same texts; one merged table.
#
#   scripts/quality/kv_vs_llamacpp.sh [-c CHUNKS] [-s TQ_SCHEMES] [-l LLAMA_TYPES] [-o OUTDIR]
#                                     [-m "MODEL..."] [-f "TEXT..."] [-t THREADS] [--no-tq]
#                                     [--no-llama]
# Defaults: 12 windows; tq schemes: kv8,turbo,turbo:k8v4,turbo:k5v5,kv4,turbo:k4v3+rk and
# llama.cpp's types via tq's rot:* (see `tq kl --help` for the list); llama.cpp types: those of
# llamacpp_kl.py; models: SmolLM2-135M-Instruct and Gemma 3 270M BF16 GGUFs (made by
# scripts/llamacpp/make_f16_gguf.py); texts: WikiText-2 test and the GPL-3 text of
# /usr/share/common-licenses (35,149 bytes). Needs build/peer/tq (TQ=...) and llama-cpp-python.
set -euo pipefail
cd "$(dirname "$0")/../.."
CHUNKS=12 THREADS=2 OUT=out/kv_vs_llamacpp TQ=${TQ:-build/peer/tq} RUN_TQ=1 RUN_LLAMA=1
SCHEMES="kv8,turbo,turbo:k8v4,turbo:k5v5,kv4,turbo:k4v3+rk,rot:q8_0,rot:q8_0/q5_0,rot:q8_0/q4_0,rot:q5_0,rot:iq4_nl,rot:q4_0"
TYPES=""
MODELS="models/SmolLM2-135M-Instruct.BF16.gguf models/gemma-3-270m.BF16.gguf"
TEXTS="../shared/assets/corpora/wikitext-2-raw-test.txt /usr/share/common-licenses/GPL-3"
while [ $# -gt 0 ]; do
    case "$1" in
    -c) CHUNKS=$2; shift ;;
    -s) SCHEMES=$2; shift ;;
    -l) TYPES=$2; shift ;;
    -o) OUT=$2; shift ;;
    -m) MODELS=$2; shift ;;
    -f) TEXTS=$2; shift ;;
    -t) THREADS=$2; shift ;;
    --no-tq) RUN_TQ=0 ;;
    --no-llama) RUN_LLAMA=0 ;;
    *) echo "kv_vs_llamacpp.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$OUT"
for m in $MODELS; do
    [ -f "$m" ] || { echo "kv_vs_llamacpp.sh: $m missing: python3 scripts/llamacpp/make_f16_gguf.py" \
        "--type bf16 --src <the quantized GGUF> --out $m" >&2; exit 1; }
    for f in $TEXTS; do
        tag="$(basename "$m" .gguf)_$(basename "$f" .txt)"
        if [ "$RUN_LLAMA" = 1 ]; then
            python3 scripts/quality/llamacpp_kl.py -m "$m" -f "$f" --ctx 512 --chunks "$CHUNKS" \
                -t "$THREADS" --tq "$TQ" ${TYPES:+--types "$TYPES"} --json "$OUT/llama_$tag.json" \
                --md "$OUT/llama_$tag.md"
        fi
        if [ "$RUN_TQ" = 1 ]; then
            "$TQ" kl -m "$m" -f "$f" --ctx 512 --chunks "$CHUNKS" -t "$THREADS" --kv "$SCHEMES" \
                --json "$OUT/tq_$tag.json" | tee "$OUT/tq_$tag.txt"
        fi
    done
done
python3 scripts/quality/kv_vs_llamacpp.py "$OUT"/*.json | tee "$OUT/merged.md"
