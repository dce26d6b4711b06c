#!/usr/bin/env bash
# native_table.sh -- the issue-14 table in one command: tq --weights native (the block formats
# run as they are) vs llama.cpp on the same GGUF files, plus the quality and memory checks.
#
#   bash scripts/llamacpp/native_table.sh            # from the repository root, quiet machine
#   TQ=build/release/tq RUNS=5 THREADS=1,2 bash scripts/llamacpp/native_table.sh
#
# Parts (PARTS, default "speed rss quality"; each prints its own wall time at the end):
#  speed   scripts/llamacpp/bench.py, tq and llama.cpp repetitions interleaved (tq with --kv bf16 vs
#          llama.cpp's default f16 cache; TQ_KV=S for another tq cache): prefill 512 and
#          decode at DEPTHS (0,512), THREADS (1,2), RUNS (3) medians, on SmolLM2's own Q4_1 file,
#          Gemma 3 270M Q4_K_M, and a Q4_0 and a Q8_0 file written by `tq quantize` from the Q4_1
#          file (their weights are a requantization: the speed comparison is what they are for).
#          Needs llama-cpp-python; LLAMA_LIB=DIR points it at another libllama (a folder, as
#          LLAMA_CPP_LIB_PATH) -- e.g. a build without AMX where ggml's AMX path crashes.
#  rss     peak RSS of a 64-token `tq generate` (-t 2) with native and bf16 weights vs file size
#          (/usr/bin/time; no llama.cpp needed).
#  quality KL(f32 weights dequantized at load || native, q8 activations) and (|| native-f32),
#          KV cache f32 on both sides, CHUNKS (8) windows of 512 tokens of wikitext-2
#          (tq teacher + tq kl --teacher-dump); deterministic.
# LLAMA_FA=on|off: llama.cpp's flash attention (default on, its CLI default on CPU).
# MODELS (comma list) replaces the four files. ISA=avx2: tq runs its AVX2 kernels (TQ_CPU=avx2)
# against an AVX2-only llama.cpp, whose libllama folder LLAMA_LIB must name (e.g. a build with
# GGML_NATIVE=OFF GGML_AVX2=ON and no AVX-512); the machine line then says "isa avx2 (forced)".
# ISA=avx512vnni: tq's AVX-512 kernels without the AMX int8 tiles (TQ_CPU=avx512vnni; the default
# uses AMX where the CPU has it, `tq version` says), against the same llama.cpp. Duration on the 2-vCPU dev box: speed about
# 40-50 s per model x thread count at RUNS=3 (~7 min for the default 4 x 2, estimated), rss
# 45 s, quality 14 min at CHUNKS=8 on a loaded box (2026-12-03; the f32 teacher and the slow
# native-f32 path dominate; ~4 min per model): the quiet phase wants PARTS="speed rss".
# Needs: a release build (cmake --preset release && cmake --build --preset release -j 2), the
# models in models/, ../shared/assets/corpora next to the repository (or TEXT=FILE).
set -euo pipefail
TQ=${TQ:-build/release/tq}
RUNS=${RUNS:-3}
THREADS=${THREADS:-1,2}
DEPTHS=${DEPTHS:-0,512}
CHUNKS=${CHUNKS:-8}
PARTS=${PARTS:-speed rss quality}
OUT=${OUT:-build/native_table}
TEXT=${TEXT:-../shared/assets/corpora/wikitext-2-raw-test.txt}
Q41=models/SmolLM2-135M-Instruct.Q4_1.gguf
GEMMA=models/gemma-3-270m-q4_k_m.gguf
case "${ISA:-}" in
    "") ;;
    avx2)
        [ -n "${LLAMA_LIB:-}" ] || { echo "native_table.sh: ISA=avx2 needs LLAMA_LIB=DIR (an AVX2-only libllama build)"; exit 2; }
        export TQ_CPU=avx2 ;;
    avx512vnni) export TQ_CPU=avx512vnni ;; # tq without its AMX tiles (same results), same llama.cpp
    *) echo "native_table.sh: ISA=$ISA: avx2 or avx512vnni (or unset: the best this CPU has)"; exit 2 ;;
esac
[ -x "$TQ" ] || { echo "native_table.sh: no tq binary at $TQ (build it, or TQ=PATH)"; exit 2; }
[ -f "$TEXT" ] || { echo "native_table.sh: no text $TEXT (TEXT=FILE)"; exit 2; }
mkdir -p "$OUT"
T0=$(date +%s)
for t in Q4_0 Q8_0; do
    f="$OUT/SmolLM2-135M-Instruct.tq-$t.gguf"
    [ -f "$f" ] || "$TQ" quantize -m "$Q41" -o "$f" --format gguf --type "$t" -q
done
MODELS=${MODELS:-$Q41,$GEMMA,$OUT/SmolLM2-135M-Instruct.tq-Q4_0.gguf,$OUT/SmolLM2-135M-Instruct.tq-Q8_0.gguf}
echo "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
    "load $(cut -d' ' -f1-3 /proc/loadavg); $(grep -o -w 'avx512_vnni\|avx512f\|avx2\|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "== tq: $TQ ($(git rev-parse --short HEAD 2>/dev/null || echo '?')), parts: $PARTS, isa ${ISA:-best}${ISA:+ (forced${LLAMA_LIB:+; llama.cpp from $LLAMA_LIB})}; $("$TQ" version | grep '^cpu kernels' | cut -d'(' -f1)"
TIMES=""
case " $PARTS " in *" speed "*)
    t=$(date +%s)
    echo "== speed: tq --weights native vs llama.cpp, threads $THREADS, depths $DEPTHS, runs $RUNS"
    if [ -n "${LLAMA_LIB:-}" ]; then export LLAMA_CPP_LIB_PATH="$LLAMA_LIB"; fi
    python3 scripts/llamacpp/bench.py --tq "$TQ" --threads "$THREADS" --depths "$DEPTHS" \
        --runs "$RUNS" --models "$MODELS" --text "$TEXT" --tq-kv "${TQ_KV:-bf16}" --llama-fa "${LLAMA_FA:-on}" | grep -v '^JSON'
    TIMES="$TIMES speed $(($(date +%s) - t)) s;"
esac
case " $PARTS " in *" rss "*)
    t=$(date +%s)
    echo "== memory: peak RSS of tq generate -n 64 -t 2 (/usr/bin/time %M)"
    for m in $(echo "$MODELS" | tr ',' ' '); do
        size=$(stat -c %s "$m")
        for w in native bf16; do
            kb=$(/usr/bin/time -f 'MAXRSS %M' "$TQ" generate -m "$m" -p "Once upon a time" -n 64 \
                --temp 0 -t 2 --weights "$w" 2>&1 >/dev/null | awk '/^MAXRSS/{print $2}' | tail -1)
            awk -v n="$(basename "$m")" -v w="$w" -v kb="$kb" -v s="$size" 'BEGIN{
                printf "%-40s --weights %-7s peak RSS %7.1f MiB = %.2fx the file (%.1f MiB)\n",
                n, w, kb / 1024, kb * 1024 / s, s / 1048576 }'
        done
    done
    TIMES="$TIMES rss $(($(date +%s) - t)) s;"
esac
case " $PARTS " in *" quality "*)
    t=$(date +%s)
    echo "== quality: KL(f32 weights || native), KV f32, $CHUNKS windows x 512 tokens"
    for m in $(echo "$MODELS" | tr ',' ' '); do
        d="$OUT/$(basename "$m" .gguf).teacher"
        "$TQ" teacher -m "$m" -f "$TEXT" -o "$d" --weights f32 --kv f32 --chunks "$CHUNKS" \
            --ctx 512 >/dev/null 2>&1
        for w in native native-f32; do
            printf '%-40s --weights %-10s ' "$(basename "$m")" "$w"
            "$TQ" kl --teacher-dump "$d" -m "$m" -f "$TEXT" --weights "$w" --kv f32 \
                --json "$d.$w.json" >/dev/null 2>&1
            python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["schemes"][0]
print(" ".join(f"{k} {r[k]:.6g}" for k in ("kl_mean","kl_p99","kl_max","top1","ppl")))' "$d.$w.json"
        done
    done
    TIMES="$TIMES quality $(($(date +%s) - t)) s;"
esac
echo "== done in $(($(date +%s) - T0)) s:$TIMES"
