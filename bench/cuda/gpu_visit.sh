#!/usr/bin/env bash
# gpu_visit.sh MODE -- one visit to the GPU machine: build, correctness, sanitizer, benchmarks.
# MODE: cold (timing study: L2-cold GPU time vs host-launch timing, ncu kernel durations),
# smoke (build + quick test + short bench), main / final (full test, sanitizers, speed
# tables with the SDPA peer, a tuning variant), test, bench; stash + h9 / h9c / h9d (two calls to
# one warm machine: the model's halves, then h9 = the GPU forward's test and bench + the
# decode-attention test and tables with same-run A/B lines, h9c = diagnostics of the quantized
# caches in the forward, h9d = final forward test + bench). Logs and CSVs go to $OUT (default out/gpu).
set -uo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-smoke}
out=${OUT:-out/gpu}
mkdir -p "$out"
log="$out/visit.log"
exec > >(tee -a "$log") 2>&1
echo "== $(date -u) mode=$mode host=$(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | head -3
nvcc --version | tail -1
t0=$(date +%s)
# The model (models/ is git-ignored, 98 MB > the 64 MiB that travels) comes in two carried halves
# over two calls to a warm machine: mode stash keeps models/gpu_part_aa under build/, mode h9
# joins it with models/gpu_part_ab (split -b 47M of the Q4_1 file).
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ "$mode" = stash ]; then
    mkdir -p build/gpu-model && cp models/gpu_part_aa build/gpu-model/ && ls -la build/gpu-model
    [ "${STASH_BUILD:-0}" = 1 ] || exit 0
fi
if [ -f build/gpu-model/gpu_part_aa ] && [ -f models/gpu_part_ab ] && [ ! -f "$model" ]; then
    cat build/gpu-model/gpu_part_aa models/gpu_part_ab > "$model"
fi
[ -f "$model" ] && sha256sum "$model"
case "$mode" in cold | a1 | a2 | a3 | a4 | a5) ;; *) export TQ_FULL=1 ;; esac
if [ "$mode" = a5 ]; then # the variant compiles beside the main build
    (EXTRA_NVFLAGS="-DTQC_BENCH_ONLY -DTQC_NSTAGE_K4=3" ONLY_BENCH=1 JOBS=8 bench/cuda/build.sh build/v-k4ns3 > /tmp/b5.log 2>&1 || tail -5 /tmp/b5.log) &
    bp=$!
fi
JOBS=16 bench/cuda/build.sh build/gpu || { echo "BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
B=build/gpu
case "$mode" in
stash)
    timeout 60 $B/test_cuda_fwd; echo "test_cuda_fwd rc=$? (77 = skipped: no model yet)"
    ;;
h9)
    # 1) the GPU forward: logits vs the CPU engine, then decode tok/s at depth
    if [ -f "$model" ]; then
        timeout 200 $B/test_cuda_fwd; echo "test_cuda_fwd rc=$?"
        timeout 300 $B/bench_cuda -m "$model" --kv bf16,kv8,turbo:k8v3 --depths 1024,8192,32768 --decode 64 \
            --check 3 --csv "$out/fwd_bench.csv"; echo "bench_cuda rc=$?"
        echo "-- decode through cuBLAS + separate elementwise kernels (TQ_CUDA_GEMV=0), same run"
        TQ_CUDA_GEMV=0 timeout 100 $B/bench_cuda -m "$model" --kv bf16,turbo:k8v3 --depths 1024,32768 --decode 64
        echo "-- split reduce as a second kernel (TQ_CUDA_FUSED_REDUCE=0), same run"
        TQ_CUDA_FUSED_REDUCE=0 timeout 100 $B/bench_cuda -m "$model" --kv turbo:k8v3 --depths 1024,32768 --decode 64
        timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bench_cuda -m "$model" \
            --kv turbo:k8v3 --depths 64 --decode 2 > /tmp/fwd_sanitizer.log 2>&1
        echo "fwd memcheck rc=$?"; tail -2 /tmp/fwd_sanitizer.log
    else
        echo "no model: $model (parts missing)"
    fi
    # 2) decode attention: 16 KB integer stages, split reduce fused into the attend kernel
    timeout 300 $B/test_cuda_kv; echo "test rc=$?"
    TQ_CUDA_FUSED_REDUCE=0 timeout 100 $B/test_cuda_kv --quick | tail -1; echo "test (reduce kernel) rc=$?"
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_kv --quick > /tmp/sanitizer.log 2>&1
    echo "memcheck rc=$?"; tail -2 /tmp/sanitizer.log
    timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_kv --quick > /tmp/racecheck.log 2>&1
    echo "racecheck rc=$?"; tail -2 /tmp/racecheck.log
    timeout 200 $B/kv_bench_cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim 128 \
        --ctx 1024,4096,16384,32768,65536,131072 --batch 1,8 --reps 20 --csv "$out/kv_bench_d128.csv"; echo "bench rc=$?"
    echo "-- same run, split reduce as a second kernel (TQ_CUDA_FUSED_REDUCE=0)"
    TQ_CUDA_FUSED_REDUCE=0 timeout 100 $B/kv_bench_cuda --schemes bf16,turbo:k8v3 --head-dim 128 \
        --ctx 1024,32768,131072 --batch 1,8 --reps 20
    timeout 120 python3 bench/cuda/sdpa_bench.py --head-dim 128 --ctx 1024,4096,16384,32768,65536,131072 \
        --batch 1,8 --reps 20 --csv "$out/sdpa_d128.csv"; echo "sdpa rc=$?"
    for d in 64 256; do
        timeout 100 $B/kv_bench_cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim $d \
            --ctx 1024,4096,16384,32768,65536,131072 --batch 1,8 --reps 10 --csv "$out/kv_bench_d$d.csv"; echo "bench d=$d rc=$?"
    done
    timeout 150 python3 bench/cuda/sdpa_bench.py --head-dim 64,256 --ctx 1024,4096,16384,32768,65536,131072 \
        --batch 1,8 --reps 10 --csv "$out/sdpa_d64_d256.csv"; echo "sdpa d=64,256 rc=$?"
    ;;
h9d)
    # final: the forward's test and decode bench with the final defaults (reduce kernel, split cap)
    timeout 200 $B/test_cuda_fwd; echo "test_cuda_fwd rc=$?"
    timeout 200 $B/bench_cuda -m "$model" --kv bf16,kv8,turbo:k8v3 --depths 1024,8192,32768 --decode 64 \
        --check 2 --csv "$out/fwd_bench.csv"; echo "bench_cuda rc=$?"
    timeout 300 $B/test_cuda_kv | grep -v "^attend.*d=128\|^attend.*d=256"; echo "test_cuda_kv rc=$?"
    timeout 60 $B/kv_bench_cuda --schemes bf16,turbo:k8v3 --head-dim 128 --ctx 32768,131072 --batch 1,8 --reps 20
    ;;
h9c)
    # diagnostics of the quantized caches in the GPU forward: attention on the model's own data,
    # per-prompt KL, the SmolLM2 geometry in test_cuda_kv, and the reduce-kernel path's KL
    timeout 200 $B/test_cuda_fwd; echo "test_cuda_fwd rc=$?"
    timeout 300 $B/test_cuda_kv | grep -v "^attend.*d=128\|^attend.*d=256"; echo "test_cuda_kv rc=$?"
    TQ_CUDA_FUSED_REDUCE=0 timeout 100 $B/bench_cuda -m "$model" --kv kv8,turbo:k8v3 --depths 1024 --decode 8 --check 3
    echo "bench (reduce kernel) rc=$?"
    ;;
smoke)
    timeout 300 $B/test_cuda_kv --quick; echo "test --quick rc=$?"
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_kv --quick > "$out/sanitizer.log" 2>&1
    echo "memcheck rc=$? (log: sanitizer.log)"; tail -5 "$out/sanitizer.log"
    timeout 200 $B/kv_bench_cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --ctx 4096,32768,131072 --batch 1,8 \
        --reps 10 --csv "$out/kv_bench_smoke.csv"; echo "bench rc=$?"
    timeout 120 python3 bench/cuda/sdpa_bench.py --ctx 4096,32768,131072 --batch 1,8 --reps 10 \
        --csv "$out/sdpa_smoke.csv"; echo "sdpa rc=$?"
    ;;
test)
    timeout 400 $B/test_cuda_kv; echo "test rc=$?"
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_kv --quick > "$out/sanitizer.log" 2>&1
    echo "memcheck rc=$?"; tail -3 "$out/sanitizer.log"
    timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_kv --quick > "$out/racecheck.log" 2>&1
    echo "racecheck rc=$?"; tail -3 "$out/racecheck.log"
    ;;
main)
    # variant build in the background: bigger stages, 2 blocks/SM
    (EXTRA_NVFLAGS="-DTQC_STAGE_BYTES=12288 -DTQC_MIN_BLOCKS=2" JOBS=8 bench/cuda/build.sh build/gpu-v2 > /tmp/build_v2.log 2>&1 || tail -20 /tmp/build_v2.log) &
    bgpid=$!
    timeout 300 $B/test_cuda_kv; echo "test rc=$?"
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_kv --quick > "$out/sanitizer.log" 2>&1
    echo "memcheck rc=$?"; tail -2 "$out/sanitizer.log"
    cuobjdump -sass $B/obj/src_cuda_kv_attend.cu.o | awk '/Function : .*attend_kernelILi128ELi5ELi8ELi3E/{p=1} /Function : /{if(!/attend_kernelILi128ELi5ELi8ELi3E/)p=0} p' > "$out/attend_k8v3_d128.sass" 2>&1
    wc -l "$out/attend_k8v3_d128.sass"
    timeout 200 $B/kv_bench_cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim 128 \
        --ctx 1024,4096,16384,32768,65536,131072 --batch 1,8 --reps 20 --csv "$out/kv_bench_d128.csv"; echo "bench rc=$?"
    timeout 120 python3 bench/cuda/sdpa_bench.py --head-dim 128 --ctx 1024,4096,16384,32768,65536,131072 \
        --batch 1,8 --reps 20 --csv "$out/sdpa_d128.csv"; echo "sdpa rc=$?"
    wait $bgpid; echo "variant build rc=$?"
    echo "-- variant STAGE_BYTES=12288 MIN_BLOCKS=2"
    timeout 100 build/gpu-v2/kv_bench_cuda --schemes bf16,turbo:k8v3 --head-dim 128 --ctx 32768,131072 --batch 1,8 --reps 20
    for d in 64 256; do
        timeout 100 $B/kv_bench_cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim $d \
            --ctx 1024,4096,16384,32768,65536,131072 --batch 1,8 --reps 10 --csv "$out/kv_bench_d$d.csv"; echo "bench d=$d rc=$?"
    done
    timeout 150 python3 bench/cuda/sdpa_bench.py --head-dim 64,256 --ctx 1024,4096,16384,32768,65536,131072 \
        --batch 1,8 --reps 10 --csv "$out/sdpa_d64_d256.csv"; echo "sdpa d=64,256 rc=$?"
    ;;
final)
    # variant build in the background: 16 KB stages for integer-coded caches
    (EXTRA_NVFLAGS="-DTQC_STAGE_INT=16384" JOBS=8 bench/cuda/build.sh build/gpu-v2 > /tmp/build_v2.log 2>&1 || tail -20 /tmp/build_v2.log) &
    bgpid=$!
    timeout 300 $B/test_cuda_kv; echo "test rc=$?"
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_kv --quick > "$out/sanitizer.log" 2>&1
    echo "memcheck rc=$?"; tail -2 "$out/sanitizer.log"
    timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_kv --quick > "$out/racecheck.log" 2>&1
    echo "racecheck rc=$?"; tail -2 "$out/racecheck.log"
    timeout 200 $B/kv_bench_cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim 128 \
        --ctx 1024,4096,16384,32768,65536,131072 --batch 1,8 --reps 20 --csv "$out/kv_bench_d128.csv"; echo "bench rc=$?"
    timeout 120 python3 bench/cuda/sdpa_bench.py --head-dim 128 --ctx 1024,4096,16384,32768,65536,131072 \
        --batch 1,8 --reps 20 --csv "$out/sdpa_d128.csv"; echo "sdpa rc=$?"
    echo "-- speculative verification: n_q 4 (16 rows per kv head = 2 row blocks)"
    timeout 60 $B/kv_bench_cuda --schemes bf16,turbo:k8v3 --head-dim 128 --ctx 32768,131072 --batch 1,8 --n-q 4 --reps 10
    wait $bgpid; echo "variant build rc=$?"
    echo "-- variant TQC_STAGE_INT=16384"
    timeout 100 build/gpu-v2/kv_bench_cuda --schemes kv8,turbo:k8v3,turbo:k4v3 --head-dim 128 --ctx 32768,131072 --batch 1,8 --reps 20
    for d in 64 256; do
        timeout 100 $B/kv_bench_cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim $d \
            --ctx 1024,4096,16384,32768,65536,131072 --batch 1,8 --reps 10 --csv "$out/kv_bench_d$d.csv"; echo "bench d=$d rc=$?"
    done
    timeout 150 python3 bench/cuda/sdpa_bench.py --head-dim 64,256 --ctx 1024,4096,16384,32768,65536,131072 \
        --batch 1,8 --reps 10 --csv "$out/sdpa_d64_d256.csv"; echo "sdpa d=64,256 rc=$?"
    ;;
cold)
    # timing study (written 2026-12-01 without a GPU; not run yet): L2-cold GPU time vs the
    # host-launch timing of every earlier table, ours and SDPA, in one run; per-kernel durations
    # from ncu (it flushes caches between replays), attend vs reduce at batch 1 and 8; a variant
    # with 16 split partials in flight per step of the reduce loop (TQC_RED_UNROLL, default 4)
    (EXTRA_NVFLAGS="-DTQC_RED_UNROLL=16" JOBS=6 bench/cuda/build.sh build/gpu-v2 > /tmp/build_v2.log 2>&1 || tail -20 /tmp/build_v2.log) &
    bgpid=$!
    timeout 200 $B/test_cuda_kv --quick | tail -2; echo "test --quick rc=${PIPESTATUS[0]}"
    timeout 250 $B/kv_bench_cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim 128 \
        --ctx 1024,4096,16384,32768,65536,131072 --batch 1,8 --reps 20 --timing both --csv "$out/kv_bench_d128.csv"; echo "bench rc=$?"
    timeout 150 python3 bench/cuda/sdpa_bench.py --head-dim 128 --ctx 1024,4096,16384,32768,65536,131072 \
        --batch 1,8 --reps 20 --timing both --csv "$out/sdpa_d128.csv"; echo "sdpa rc=$?"
    timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv $B/kv_bench_cuda \
        --schemes bf16,turbo:k8v3 --head-dim 128 --ctx 1024,32768,131072 --batch 1,8 --reps 3 --timing cold \
        > "$out/ncu_d128.csv" 2> /tmp/ncu.err; echo "ncu rc=$?"; tail -3 /tmp/ncu.err
    python3 - "$out/ncu_d128.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
print("ncu kernel durations (us), in launch order:")
for r in rows[1:]:
    v = float(r[vi].replace(",", "")) / (1000.0 if r[ui] == "nsecond" else 1.0)
    print(f"  {r[ki].split('(')[0][:50]:50s} {v:9.2f}")
PY
    wait $bgpid; echo "variant build rc=$?"
    timeout 100 build/gpu-v2/test_cuda_kv --quick | tail -1; echo "variant test rc=${PIPESTATUS[0]}"
    for v in build/gpu-v2 $B build/gpu-v2 $B; do
        echo "-- $v (TQC_RED_UNROLL $([ $v = $B ] && echo 4 || echo 16)), cold"
        timeout 60 $v/kv_bench_cuda --schemes bf16,turbo:k8v3 --head-dim 128 --ctx 1024,32768,131072 \
            --batch 1,8 --reps 20 --timing cold
    done
    ;;
a5)
    # last, lean visit (device time nearly spent): 3 stages for turbo k4 at d=128 vs the default 2
    timeout 60 $B/test_cuda_kv --quick | tail -1; echo "test --quick rc=${PIPESTATUS[0]}"
    wait $bp; echo "variant build: $(( $(date +%s) - t0 )) s"
    for r in 1 2; do
        for v in $B build/v-k4ns3; do
            echo "-- round $r $v"
            timeout 40 $v/kv_bench_cuda --schemes turbo:k4v3 --ctx 1024,32768,131072 --batch 1,8 --reps 20 --timing cold \
                --csv $out/a5_$(basename $v)_r$r.csv | grep "^turbo"
        done
    done
    ;;
a1 | a2 | a3 | a4)
    # issue 16 part A visits (written 2026-12-02): L2-cold GPU time (the issue's targets) with host
    # timing as the second column; same-run A/Bs of kernel variants (bench-only builds, compiled in
    # the background while the main build is tested); ncu of the attend kernel at the target points.
    # VARIANTS: "name|EXTRA_NVFLAGS|ATTEND_SRC;..." (base = the landed kernel, build/gpu-snap/).
    # Everything but visit.log goes to $out/bundle.tgz (the device tool returns at most 8 files).
    w=/tmp/vw; rm -rf $w; mkdir -p $w
    pack() { tar czf "$out/bundle.tgz" -C $w . ; }
    # a1 (2026-12-02 02:24 UTC) ran: base, tt32 (-DTQC_STAGE_INT=8192), tt32m4 (+ -DTQC_MINB_INT=4),
    # ns3 (TT 32, 3 stages), bulk (-DTQC_BULK=1, then not default), bulk32m4.
    case "$mode" in
    a2) vdef="base||../base_kv_attend.cu;cpasync|-DTQC_BULK=0|;ns3|-DTQC_STAGE_INT=8192 -DTQC_NSTAGE_INT=3 -DTQC_NSTAGE_HALF=3|;ns4|-DTQC_STAGE_INT=8192 -DTQC_NSTAGE_INT=4 -DTQC_NSTAGE_HALF=3|;red16|-DTQC_RED_UNROLL=16|" ;;
    # a2 (02:33 UTC): bulk copies default; fused merge opt-in. a3: pair-table copies, k8 stages, fused
    # default; prev = a2's defaults (every variant runs the reduce kernel, TQ_CUDA_FUSED_REDUCE=0)
    a3) vdef="base||../base_kv_attend.cu;prev|-DTQC_LUT_REP=1 -DTQC_STAGE_K8=16384 -DTQC_NSTAGE_K8=2 -DTQC_NSTAGE_HALF=2|;norep|-DTQC_LUT_REP=1|;k8s2|-DTQC_STAGE_K8=16384 -DTQC_NSTAGE_K8=2|;half2|-DTQC_NSTAGE_HALF=2|" ;;
    # a3 (02:46 UTC): 16 pair-table copies did not pay (now 1); a4 = the final defaults
    a4) vdef="base||../base_kv_attend.cu;rep16|-DTQC_LUT_REP=16|" ;;
    *) vdef="base||../base_kv_attend.cu" ;;
    esac
    vlist=${VARIANTS:-$vdef}
    pids=()
    IFS=';' read -ra vs <<< "$vlist"
    for v in "${vs[@]}"; do
        IFS='|' read -r vn vf vsrc <<< "$v"
        (EXTRA_NVFLAGS="-DTQC_BENCH_ONLY $vf" ATTEND_SRC="${vsrc:-src/cuda/kv_attend.cu}" ONLY_BENCH=1 JOBS=4 \
            bench/cuda/build.sh build/v-$vn > $w/build_$vn.log 2>&1 || { echo "variant $vn build failed"; tail -20 $w/build_$vn.log; }) &
        pids+=($!)
    done
    timeout 300 $B/test_cuda_kv > $w/test_cuda_kv.log 2>&1; echo "test_cuda_kv rc=$?"; tail -1 $w/test_cuda_kv.log
    echo "worst rel err: $(grep 'max rel' $w/test_cuda_kv.log | awk '{print $NF}' | sort -g | tail -1)"
    # the other reduce path (a1/a2: default = reduce kernel, so this ran the fused merge; a3 on: the
    # fused merge is the default, so this runs the reduce kernel)
    case "$mode" in a1 | a2) alt=1 ;; *) alt=0 ;; esac
    TQ_CUDA_FUSED_REDUCE=$alt timeout 300 $B/test_cuda_kv > $w/test_cuda_kv_fused.log 2>&1; echo "test_cuda_kv (TQ_CUDA_FUSED_REDUCE=$alt) rc=$?"
    tail -1 $w/test_cuda_kv_fused.log
    echo "worst rel err: $(grep 'max rel' $w/test_cuda_kv_fused.log | awk '{print $NF}' | sort -g | tail -1)"
    for v in "${pids[@]}"; do wait $v; done; echo "variant builds done: $(( $(date +%s) - t0 )) s"
    pack
    pts="--ctx 1024,32768,131072 --batch 1,8 --reps 20 --timing cold"
    for round in 1 2; do
        for v in "${vs[@]}"; do
            IFS='|' read -r vn vf vsrc <<< "$v"
            [ -x build/v-$vn/kv_bench_cuda ] || continue
            echo "-- A/B round $round: $vn ($vf ${vsrc:-}), reduce kernel"
            TQ_CUDA_FUSED_REDUCE=0 timeout 100 build/v-$vn/kv_bench_cuda --schemes bf16,turbo:k8v3,turbo:k4v3 $pts --csv $w/ab_${vn}_r$round.csv | grep -v "^device\|^heads"
        done
        echo "-- A/B round $round: new (this commit), fused merge (TQ_CUDA_FUSED_REDUCE=1)"
        TQ_CUDA_FUSED_REDUCE=1 timeout 100 $B/kv_bench_cuda --schemes bf16,turbo:k8v3,turbo:k4v3 $pts --csv $w/ab_fused_r$round.csv | grep -v "^device\|^heads"
        echo "-- A/B round $round: new (this commit), reduce kernel"
        TQ_CUDA_FUSED_REDUCE=0 timeout 100 $B/kv_bench_cuda --schemes bf16,turbo:k8v3,turbo:k4v3 $pts --csv $w/ab_new_r$round.csv | grep -v "^device\|^heads"
    done
    echo "A/B done: $(( $(date +%s) - t0 )) s"; pack
    # full tables (this commit's defaults), both timings
    timeout 250 $B/kv_bench_cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim 128 \
        --ctx 1024,4096,16384,32768,65536,131072 --batch 1,8 --reps 20 --timing both --csv $w/kv_bench_d128.csv > $w/kv_bench_d128.log; echo "bench d128 rc=$?"
    timeout 150 python3 bench/cuda/sdpa_bench.py --head-dim 128 --ctx 1024,4096,16384,32768,65536,131072 \
        --batch 1,8 --reps 20 --timing both --csv $w/sdpa_d128.csv > $w/sdpa_d128.log 2>&1; echo "sdpa d128 rc=$?"
    pack
    echo "tables done: $(( $(date +%s) - t0 )) s"; pack
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_kv --quick > $w/memcheck.log 2>&1
    echo "memcheck rc=$?"; tail -2 $w/memcheck.log
    TQ_CUDA_FUSED_REDUCE=$alt timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_kv --quick > $w/memcheck_fused.log 2>&1
    echo "memcheck (TQ_CUDA_FUSED_REDUCE=$alt) rc=$?"; tail -2 $w/memcheck_fused.log
    timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_kv --quick > $w/racecheck.log 2>&1
    echo "racecheck rc=$?"; tail -2 $w/racecheck.log
    echo "sanitizers done: $(( $(date +%s) - t0 )) s"; pack
    # ncu: what binds (SOL, issue slots, stall reasons, shared-memory bank conflicts)
    ncu_secs="--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
    ncu_met="--metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed.sum,dram__bytes_read.sum"
    for p in ${NCU_POINTS:-turbo:k8v3,1,32768 turbo:k8v3,8,131072 turbo:k4v3,8,131072 bf16,8,131072 turbo:k4v3,1,131072 turbo:k4v3,8,32768,256}; do
        IFS=',' read -r sc bb cc hd <<< "$p"
        echo "== ncu $sc batch $bb ctx $cc head_dim ${hd:-128}" >> $w/ncu.txt
        timeout 120 ncu --clock-control none $ncu_secs $ncu_met -k regex:attend_kernel --launch-skip 3 --launch-count 1 \
            $B/kv_bench_cuda --schemes $sc --ctx $cc --batch $bb --head-dim ${hd:-128} --reps 1 --timing cold >> $w/ncu.txt 2>&1
        echo "ncu $p rc=$?"
    done
    # stall reasons (per issued instruction) at two points, separately (a metric name ncu rejects
    # must not cost the sections above)
    for p in turbo:k8v3,1,32768 turbo:k8v3,8,131072; do
        IFS=',' read -r sc bb cc <<< "$p"
        echo "== ncu stalls $sc batch $bb ctx $cc" >> $w/ncu_stalls.txt
        timeout 100 ncu --clock-control none --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active" \
            -k regex:attend_kernel --launch-skip 3 --launch-count 1 $B/kv_bench_cuda --schemes $sc --ctx $cc --batch $bb \
            --reps 1 --timing cold >> $w/ncu_stalls.txt 2>&1; echo "ncu stalls $p rc=$?"
    done
    timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:"attend|reduce" $B/kv_bench_cuda \
        --schemes bf16,turbo:k8v3 --head-dim 128 --ctx 1024,32768,131072 --batch 1,8 --reps 3 --timing cold \
        > $w/ncu_durations.csv 2> $w/ncu.err; echo "ncu durations rc=$?"
    echo "ncu done: $(( $(date +%s) - t0 )) s"; pack
    timeout 250 $B/kv_bench_cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim 64,256 \
        --ctx 1024,4096,16384,32768,65536,131072 --batch 1,8 --reps 10 --timing both --csv $w/kv_bench_d64_d256.csv > $w/kv_bench_d64_d256.log; echo "bench d64,256 rc=$?"
    timeout 150 python3 bench/cuda/sdpa_bench.py --head-dim 64,256 --ctx 1024,4096,16384,32768,65536,131072 \
        --batch 1,8 --reps 10 --timing both --csv $w/sdpa_d64_d256.csv > $w/sdpa_d64_d256.log 2>&1; echo "sdpa d64,256 rc=$?"
    echo "tables d64/d256 done: $(( $(date +%s) - t0 )) s"
    pack
    ;;
bench)
    for d in 128 64 256; do
        ctx=1024,4096,16384,32768,65536,131072
        timeout 250 $B/kv_bench_cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim $d --ctx $ctx --batch 1,8 \
            --reps 20 --csv "$out/kv_bench_d$d.csv"; echo "bench d=$d rc=$?"
        timeout 150 python3 bench/cuda/sdpa_bench.py --head-dim $d --ctx $ctx --batch 1,8 --reps 20 \
            --csv "$out/sdpa_d$d.csv"; echo "sdpa d=$d rc=$?"
    done
    ;;
esac
echo "== done $(date -u), $(( $(date +%s) - t0 )) s"
