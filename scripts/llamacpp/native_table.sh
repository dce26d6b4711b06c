#!/usr/bin/env bash
# native_table.sh -- the issue-14 table in one command: tq --weights native (the block formats
# run as they are) vs llama.cpp on the same GGUF files, plus the quality and memory checks.
#
#   bash scripts/llamacpp/native_table.sh            # from the repository root, quiet machine
#   TQ=build/release/tq RUNS=5 THREADS=1,2 bash scripts/llamacpp/native_table.sh
#
# Parts (PARTS, default "speed rss quality"; each prints its own wall time at the end):
#  speed   scripts/llamacpp/bench.py: `tq bench` against llama.cpp's own `llama-bench` binary,
#          one process per engine and repetition, interleaved (tq with --kv bf16 vs llama.cpp's
#          default f16 cache; TQ_KV=S for another tq cache): prefill 512 and decode (32 steps)
#          at DEPTHS (0,512), THREADS (1,2), RUNS (3) medians, random token ids on both sides,
#          on SmolLM2's own Q4_1 file, Gemma 3 270M Q4_K_M, and a Q4_0, a Q8_0 and an IQ4_NL
#          (--mix llama) file written by `tq quantize` from the Q4_1 file (their weights are a
#          requantization: the speed comparison is what they are for).
#          The peer: LLAMA_BIN=DIR (the folder with llama-bench). Default: ../llama-build-amx-clang/bin
#          (clang, GGML_NATIVE, AMX on: llama.cpp at its best on an AMX CPU) when the CPU has AMX
#          and it exists, else ../llama-build/bin (gcc, AVX-512, AMX off); ISA=avx512vnni defaults
#          to ../llama-build/bin, ISA=avx2 to ../llama-build-avx2/bin. The output's "peer:" line
#          names the binary and its build, and per file the weight buffers llama.cpp loads (AMX,
#          CPU_REPACK, CPU_Mapped). LLAMA_EXTRA="ARGS": more llama-bench arguments ("--repack 0").
#          CELL_RUNS=1: each engine's RUNS repetitions in one process per model and thread count
#          (bench.py --cell-runs), the engines alternating per cell: ~40% less time against the
#          slower gcc/AVX2 peers, whose untimed warm-up prefill is paid once instead of RUNS times.
#          Until 2026-12-03 20:00 UTC this part drove llama.cpp through llama-cpp-python, one
#          Python call per decode token, which understated llama.cpp's decode 1.3-1.7x.
#  rss     peak RSS of a 64-token `tq generate` (-t 2) with native and bf16 weights vs file size
#          (/usr/bin/time; no llama.cpp needed).
#  quality KL(f32 weights dequantized at load || native, q8 activations) and (|| native-f32),
#          KV cache f32 on both sides, CHUNKS (8) windows of 512 tokens of wikitext-2
#          (tq teacher + tq kl --teacher-dump); deterministic.
# LLAMA_FA=best|on|off: llama.cpp's flash attention; best (default) measures on and off and takes
# each cell's ratio against the faster (FA on, the CLI default, is faster at depth 0 here and ~40%
# slower at depth 512). MODELS (comma list) replaces the five files. ISA=avx2: tq runs its AVX2
# kernels (TQ_CPU=avx2) against an AVX2-only llama.cpp (a build with GGML_NATIVE=OFF GGML_AVX2=ON
# and no AVX-512); the machine line then says "isa avx2 (forced)". ISA=avx512vnni: tq's AVX-512
# kernels without the AMX int8 tiles (TQ_CPU=avx512vnni; the default uses AMX where the CPU has
# it, `tq version` says), against llama.cpp without AMX. LLAMA_LIB=DIR (the old name) still
# works as LLAMA_BIN. Duration on the 2-vCPU box (quiet): speed about 25 s per model x thread
# count at RUNS=3 with LLAMA_FA=best (Gemma ~2x), ~5 min for the five files x 2; rss 45 s;
# quality 14 min at CHUNKS=8 on a loaded box (2026-12-03; the f32 teacher and the slow native-f32
# path dominate; ~4 min per model): the quiet phase wants PARTS="speed rss".
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
LLAMA_BIN=${LLAMA_BIN:-${LLAMA_LIB:-}}
case "${ISA:-}" in
    "") ;;
    avx2) export TQ_CPU=avx2; LLAMA_BIN=${LLAMA_BIN:-../llama-build-avx2/bin} ;;
    avx512vnni) export TQ_CPU=avx512vnni; LLAMA_BIN=${LLAMA_BIN:-../llama-build/bin} ;; # tq without its AMX tiles (same results)
    *) echo "native_table.sh: ISA=$ISA: avx2 or avx512vnni (or unset: the best this CPU has)"; exit 2 ;;
esac
[ -z "$LLAMA_BIN" ] || export LLAMA_BIN # else bench.py picks (AMX clang build on an AMX CPU)
[ -x "$TQ" ] || { echo "native_table.sh: no tq binary at $TQ (build it, or TQ=PATH)"; exit 2; }
case " $PARTS " in *" quality "*)
    [ -f "$TEXT" ] || { echo "native_table.sh: no text $TEXT (TEXT=FILE)"; exit 2; }
esac
mkdir -p "$OUT"
T0=$(date +%s)
for t in Q4_0 Q8_0 IQ4_NL; do
    f="$OUT/SmolLM2-135M-Instruct.tq-$t.gguf"
    mix=""; [ "$t" != IQ4_NL ] || mix="--mix llama"
    [ -f "$f" ] || "$TQ" quantize -m "$Q41" -o "$f" --format gguf --type "$t" $mix -q
done
MODELS=${MODELS:-$Q41,$GEMMA,$OUT/SmolLM2-135M-Instruct.tq-Q4_0.gguf,$OUT/SmolLM2-135M-Instruct.tq-Q8_0.gguf,$OUT/SmolLM2-135M-Instruct.tq-IQ4_NL.gguf}
echo "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
    "load $(cut -d' ' -f1-3 /proc/loadavg); $(grep -o -w 'avx512_vnni\|avx512f\|avx2\|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "== tq: $TQ ($(git rev-parse --short HEAD 2>/dev/null || echo '?')), parts: $PARTS, isa ${ISA:-best}${ISA:+ (forced)}; $("$TQ" version | grep '^cpu kernels' | cut -d'(' -f1)"
TIMES=""
case " $PARTS " in *" speed "*)
    t=$(date +%s)
    echo "== speed: tq --weights native vs llama.cpp (llama-bench), threads $THREADS, depths $DEPTHS, runs $RUNS"
    python3 scripts/llamacpp/bench.py --tq "$TQ" --threads "$THREADS" --depths "$DEPTHS" \
        --runs "$RUNS" --models "$MODELS" --tq-kv "${TQ_KV:-bf16}" --llama-fa "${LLAMA_FA:-best}" \
        --llama-extra="${LLAMA_EXTRA:-}" ${CELL_RUNS:+--cell-runs} | grep -v '^JSON'
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
