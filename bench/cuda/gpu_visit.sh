#!/usr/bin/env bash
# gpu_visit.sh MODE -- one visit to the GPU machine: build, correctness, sanitizer, benchmarks.
# MODE: smoke (build + quick test + short bench), main / final (full test, sanitizers, speed
# tables with the SDPA peer, a tuning variant), test, bench. Logs and CSVs go to $OUT (default out/gpu).
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
JOBS=16 bench/cuda/build.sh build/gpu || { echo "BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
B=build/gpu
case "$mode" in
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
