#!/usr/bin/env bash
# quant_visit.sh STEP... -- the quality table's GPU visit (issue 13 item 7; docs/results.md "Quality
# table on the GPU"): run from the root of the tree that src.tgz unpacks to (/tmp/qsrc), with the
# stage that bench/cuda/quant_prep.sh made at $STAGE (.deps, texts/, lq/ = llama-quantize + libs).
# Steps, in the order given:
#   build        configure + build tq and test_cuda_eval in /tmp/qb (Release, 90a, -j 16)
#   evaltest     tests/test_cuda_eval (tiny models; SmolLM2 when models/ has it)
#   stash P      copy the carried model part $PARTS/P to /tmp/qm (a warm machine keeps it)
#   join NAME N  cat /tmp/qm/NAME.part0..N-1 into /tmp/qm/NAME, sha256, link models/NAME
#   smoke M      tq ppl --cuda on 16 windows of WikiText-2 (time per window; 1 and 4 GPU sessions)
#                and on the CPU (2 windows, -t 16) against the GPU's 2 windows
#   table KEY    quality_table.py --cuda --jobs ${JOBS:-12} --gpu-sessions ${GPU_SESSIONS:-1} --models KEY (32 windows KL + whole-
#                text ppl) in /tmp/qt (resumable); raw JSON + logs to $OUT
set -uo pipefail
out=${OUT:-out/quant}
mkdir -p "$out" /tmp/qm models
exec > >(tee -a "$out/visit.log") 2>&1
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
S=${STAGE:?set STAGE}
B=/tmp/qb
TQ=$B/tq
echo "== $(date -u) steps: $* host=$(hostname) commit=$(cat $S/.commit 2>/dev/null) cores=$(nproc)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
while [ $# -gt 0 ]; do
    step=$1; shift
    el "step $step"
    case "$step" in
    build)
        cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DTQ_CUDA=ON -DTQ_CUDA_ARCH=90a -DTQ_SHARED=OFF \
            -DCMAKE_PREFIX_PATH="$S/.deps" > $out/cfg.log 2>&1 || { echo "configure FAILED"; tail -30 $out/cfg.log; exit 1; }
        cmake --build $B -j 16 --target tq test_cuda_eval > $out/build.log 2>&1
        rc=$?; el "build rc=$rc"; [ $rc = 0 ] || { grep -B2 -A12 "error" $out/build.log | head -60; exit 1; }
        ;;
    evaltest)
        timeout 300 $B/tests/test_cuda_eval > $out/test_cuda_eval.log 2>&1; echo "test_cuda_eval rc=$?"
        cat $out/test_cuda_eval.log | tail -20
        ;;
    stash)
        p=$1; shift
        cp "${PARTS:?}/$p" /tmp/qm/ && ls -la /tmp/qm/$p
        ;;
    join)
        n=$1; k=$2; shift 2
        cat $(for i in $(seq 0 $((k - 1))); do echo /tmp/qm/$n.part$i; done) > /tmp/qm/$n && sha256sum /tmp/qm/$n
        ln -sf /tmp/qm/$n models/$n
        ;;
    smoke)
        m=$1; shift
        for d in cuda; do
            timeout 200 $TQ ppl -m $m -f $S/texts/wiki.txt --weights f32 --kv f32 --chunks 16 --cuda --json $out/smoke_gpu16.json 2>&1 | tail -1
        done
        timeout 200 $TQ ppl -m $m -f $S/texts/wiki.txt --weights f32 --kv f32 --chunks 16 --cuda --gpu-sessions 4 \
            --json $out/smoke_gpu16_s4.json 2>&1 | tail -1
        timeout 200 $TQ ppl -m $m -f $S/texts/wiki.txt --weights f32 --kv f32 --chunks 2 --cuda 2>&1 | tail -1
        timeout 200 $TQ ppl -m $m -f $S/texts/wiki.txt --weights f32 --kv f32 --chunks 2 -t 16 2>&1 | tail -1
        ;;
    table)
        key=$1; shift
        PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$S/lq timeout ${TABLE_S:-560} python3 scripts/quant/quality_table.py --cuda \
            --tq $TQ --llama-quantize $S/lq/llama-quantize --wiki $S/texts/wiki.txt --gpl3 $S/texts/gpl3.txt \
            --models $key --chunks 32 --texts wiki,gpl3 --jobs ${JOBS:-12} --gpu-sessions ${GPU_SESSIONS:-1} \
            --out /tmp/qt --json $out/qt_$key.json \
            > $out/table_$key.md 2> $out/table_$key.log
        echo "table $key rc=$?"; tail -5 $out/table_$key.log
        (cd /tmp/qt && tar czf $out/qt_${key}_json.tgz $(find $key -name "*.json" -o -name "*.log" | grep -v make.log) 2>/dev/null)
        ;;
    *) echo "unknown step $step" ;;
    esac
done
el "done"
