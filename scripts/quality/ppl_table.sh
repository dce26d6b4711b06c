#!/bin/sh
# ppl_table.sh -- whole-file perplexity column of docs/results.md ("TurboQuant KV cache in the
# engine"): `tq ppl` of every scheme on SmolLM2-135M-Instruct x WikiText-2 raw test, all 589
# non-overlapping windows of 512 tokens (loss on the second half of each), one scheme after the
# other (about 8 min each with 2 threads on the 2-vCPU dev box), one JSON + log per scheme.
# usage: scripts/quality/ppl_table.sh [TQ_BINARY] [OUTDIR] [SCHEME...]
set -e
TQ=${1:-build/release/tq}
OUT=${2:-scripts/quality/results}
[ $# -ge 2 ] && shift 2 || shift $#
M=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
F=${TEXT:-../shared/assets/corpora/wikitext-2-raw-test.txt}
T=${THREADS:-2}
SCHEMES=${*:-"f32 turbo:k8v3 kv4 kv8 turbo:k4v3 turbo:k4v3+rk turbo:k8v4 turbo:k8v8 f16 turbo:k8v2 turbo:k4v2 turbo:k4v2+rk"}
mkdir -p "$OUT"
for s in $SCHEMES; do
    tag=$(echo "$s" | tr ':+' '__')
    echo "ppl_table: $s ($(date -u +%H:%M:%S))"
    "$TQ" ppl -m "$M" -f "$F" --ctx 512 -t "$T" --kv "$s" --json "$OUT/ppl_$tag.json" \
        > "$OUT/ppl_$tag.txt" 2> "$OUT/ppl_$tag.log"
    cat "$OUT/ppl_$tag.txt"
done
