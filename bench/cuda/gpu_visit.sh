#!/usr/bin/env bash
# gpu_visit.sh STEP... -- one visit to the GPU machine (device tool `run`), built with the project's
# CMake like CI (one build path; the image has no json-c/pcre2 -dev packages, so the prefix .deps/
# that bench/cuda/prep_visit.sh makes on the dev machine is found through CMAKE_PREFIX_PATH).
# Steps, in the order given:
#   build     configure + build tq and the CUDA tests in build/gpu (Release, TQ_CUDA_ARCH=90a)
#   test      test_cuda_kv (both split-merge paths), test_cuda_api, test_cuda_fwd (skips without
#             models/), ctest -L cuda
#   sanitize  compute-sanitizer memcheck (both merge paths) + racecheck on test_cuda_kv --quick
#   sweep     split planning: kv-bench --splits 0,1,2,...,64 at 1k..128k, batch 1 and 8
#   ab        same-run A/Bs of the merge paths (--merge) and of VARIANTS (name|CUDA flags;...),
#             variant builds in build/v-NAME (bench-only kernel table), two interleaved rounds
#   tables    the docs/results.md tables: ours (--timing both) and SDPA, head_dim 128, 64, 256
#   ncu       ncu of the attend kernel at the fixed-cost and target points (sections + stalls)
#   qgemv     quantized GEMV (src/cuda/qgemv.cu): test_cuda_qgemv, its memcheck, qgemv_bench at
#             batch 1 and 8 (4096x14336 and 14336x4096, cold)
#   llama_build  llama.cpp's CUDA backend (issue 16 item 7) from the trimmed vendored source that
#             prep_visit.sh LLAMA=1 carries (llama_src.tgz), llama-bench only, 90a, -j 16, in
#             /tmp/llb (resumes there on a second call to a warm machine); prints the build time
#   llama_bench  llama-bench -ngl 99 -fa 1, KV f16 / q8_0 / q4_0, depths 1k/8k/32k (needs the model)
#   stash / join  the SmolLM2 model over two calls (prep_visit.sh MODEL_PART=aa, then ab)
#   fwd       the GPU forward's decode bench at 1k/8k/32k (needs the model)
#   fwdab     A/B of that bench against OLD_TQ (another commit's tq), two interleaved rounds
#   tiny      test_cuda_fwd on the tiny models only (run where models/ is absent) + its memcheck and
#             racecheck, test_cuda_api
#   native    test_cuda_fwd with the model (native Q4_1 weights on the GPU vs the CPU's native path)
#   weights   the decode bench with --weights native and --weights bf16 (every cache), two interleaved
#             rounds (needs the model)
#   wide      test_cuda_qgemv (+ memcheck) and qgemv_bench --staged 1,4,3 (the wide kernel), two rounds
#   widencu   ncu of the wide kernel (NCU_FMTS, default Q4_0 Q4_K; 4096 x 14336)
#   prefill   tq bench --cuda native prefill: dequantize + cuBLAS vs --prefill-qgemv vs bf16 weights
#   graphab   the decode bench with the step as one CUDA graph (default) vs --no-graph (or the
#             GA_VARIANTS given), two interleaved rounds (needs the model)
#   gen       test_cuda_gen (device greedy sampler, GPU generator, long prefill chunks) + its
#             memcheck and racecheck (no model needed)
#   genbench  (needs the model) test_cuda_fwd with it; tq bench --cuda A/Bs: --device-sampler vs
#             host argmax, prefill chunk 256 vs 21 (--prefill-chunk), bf16 and native weights;
#             tq generate --cuda (device sampler / --host-sampler) vs the CPU engine, greedy,
#             with and without the repetition penalty: texts and tok/s
#   fwdncu    (needs the model) ncu kernel durations of the first decode steps (no graph, depth
#             0), bf16 vs native weights (and native with --no-wide-head): time per kernel name
#             summed, the step's total
#   randmodel a random-weight GGUF of SmolLM2's shape (Q8_0, 30 layers: tests/rand_gguf.h) in
#             /tmp/r30.gguf, the model of the later steps (no model to carry)
#   exact     issue 16 item 6: test_cuda_gen (parts 6-7: exact K/V inputs, drift per input rule,
#             the native wide head) + memcheck (EXACT_SAN: the tools) of test_cuda_gen --quick;
#             test_cuda_qgemv --quick + memcheck (the wide kernel on 16-byte padded rows)
#   pvx       diagnostic build with the turbo P.V in ~fp32 (TQC_PV_EXACT=1): test_cuda_gen's
#             drift per input rule, test_cuda_kv --quick turbo k8v3 errors vs this build's
#   stepab    (needs the model) decode tok/s A/B in one visit, two rounds in alternating order:
#             bf16 weights default / --enc-two (K and V encoded in two launches, before 4df7c24) /
#             --inputs bf16 / --inputs f32; native weights default (wide head) / --no-wide-head /
#             --enc-two; caches bf16 and turbo k8v3 at 1k / 8k / 32k, --device-sampler
# Logs and CSVs go to $OUT (default out/gpu): visit.log and bundle.tgz (the tool returns <= 8 files).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out/gpu}
mkdir -p "$out"
w=/tmp/vw
mkdir -p $w
exec > >(tee -a "$out/visit.log") 2>&1
pack() { tar czf "$out/bundle.tgz" -C $w . ; }
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
echo "== $(date -u) steps: $* host=$(hostname) commit=$(cat .commit 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | head -3
nvcc --version | tail -1
B=${BUILD:-build/gpu} # BUILD=/tmp/...: outside .gpu, which each call replaces (two calls to a warm machine)
TQ=$B/tq
deps=()
[ -d .deps ] && deps=(-DCMAKE_PREFIX_PATH="$PWD/.deps")
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf} # or the `randmodel` step's file
# cfg DIR [CUDA flags]: the CI CMake, Release, no shared library (the carried static json-c is not PIC)
cfg() {
    cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTQ_CUDA=ON -DTQ_CUDA_ARCH=90a -DTQ_SHARED=OFF \
        "${deps[@]}" ${2:+-DCMAKE_CUDA_FLAGS="$2"} > "$w/cfg_$(basename "$1").log" 2>&1 ||
        { echo "configure $1 FAILED"; tail -30 "$w/cfg_$(basename "$1").log"; return 1; }
}
pts="--ctx 1024,32768,131072 --batch 1,8 --reps 20"
for step in "$@"; do
    el "step $step"
    case "$step" in
    build)
        cfg $B && cmake --build $B -j 16 --target tq test_cuda_kv test_cuda_api test_cuda_fwd test_cuda_qgemv qgemv_bench test_cuda_gen test_cuda_eval rand_gguf > $w/build.log 2>&1
        rc=$?; el "build rc=$rc"; [ $rc = 0 ] || { tail -40 $w/build.log; pack; exit 1; }
        grep -c "warning" $w/build.log | sed 's/^/build warnings: /'
        ;;
    test)
        timeout 300 $B/tests/test_cuda_kv > $w/test_cuda_kv.log 2>&1; echo "test_cuda_kv rc=$?"; tail -1 $w/test_cuda_kv.log
        echo "worst rel err: $(grep 'max rel' $w/test_cuda_kv.log | awk '{print $NF}' | sort -g | tail -1)"
        timeout 200 $B/tests/test_cuda_kv --merge kernel --quick > $w/test_cuda_kv_kernel.log 2>&1
        echo "test_cuda_kv --merge kernel --quick rc=$?"; tail -1 $w/test_cuda_kv_kernel.log
        timeout 60 $B/tests/test_cuda_api; echo "test_cuda_api rc=$?"
        timeout 300 $B/tests/test_cuda_fwd > $w/test_cuda_fwd.log 2>&1; echo "test_cuda_fwd rc=$? (77 = skipped)"
        tail -12 $w/test_cuda_fwd.log
        (cd $B && timeout 100 ctest -L cuda -E test_cuda_kv --output-on-failure | tail -4)
        pack
        ;;
    sanitize)
        timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/test_cuda_kv --quick \
            > $w/memcheck.log 2>&1; echo "memcheck (every merge path) rc=$?"; tail -2 $w/memcheck.log
        for m in ${RACE_MERGES:-cluster fused}; do
            timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/test_cuda_kv --quick --merge $m \
                > $w/racecheck_$m.log 2>&1; echo "racecheck --merge $m rc=$?"; tail -2 $w/racecheck_$m.log
        done
        pack
        ;;
    sweep)
        for m in ${SWEEP_MERGES:-fused cluster}; do
            timeout 200 $TQ kv-bench --cuda --merge $m --schemes ${SWEEP_SCHEMES:-bf16,turbo:k8v3,turbo:k4v3} \
                --head-dim ${SWEEP_DIMS:-128} --ctx ${SWEEP_CTX:-1024,4096,32768,131072} --batch 1,8 \
                --splits ${SWEEP_SPLITS:-0,1,2,4,8,12,16,32,64} --reps 20 --csv $w/sweep_$m.csv > $w/sweep_$m.log 2>&1
            echo "sweep --merge $m rc=$?"
        done
        python3 - $w/sweep_*.csv <<'PY'
import csv, sys, collections
best = collections.OrderedDict()
for f in sys.argv[1:]:
    m = f.split("sweep_")[-1].split(".")[0]
    for r in csv.DictReader(open(f)):
        k = (r["scheme"], r["head_dim"], r["batch"], r["ctx"])
        best.setdefault(k, {})[m[:2] + r["splits"]] = float(r["us_median"])
print("split sweep (cold us): scheme batch ctx | auto | best splits")
for k, v in best.items():
    b = min(v, key=v.get)
    print(f"  {k[0]:11s} d{k[1]:>3s} {k[2]:>2s} {k[3]:>7s} | best {b:>6s} {v[b]:8.1f}  " +
          " ".join(f"{s}:{t:.1f}" for s, t in v.items()))
PY
        pack
        ;;
    ab)
        pids=()
        IFS=';' read -ra vs <<< "${VARIANTS:-}"
        for v in "${vs[@]}"; do
            IFS='|' read -r vn vf <<< "$v"
            (cfg build/v-$vn "-DTQC_BENCH_ONLY $vf" && cmake --build build/v-$vn -j 8 --target tq > $w/build_$vn.log 2>&1 ||
                { echo "variant $vn build failed"; tail -20 $w/build_$vn.log; }) &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait $p; done; el "variant builds done"
        for round in 1 2; do
            for m in ${MERGES:-auto kernel}; do
                echo "-- A/B round $round: this commit, --merge $m"
                timeout 100 $TQ kv-bench --cuda --merge $m --schemes bf16,turbo:k8v3,turbo:k4v3 $pts \
                    --csv $w/ab_merge-${m}_r$round.csv | grep "^turbo\|^bf16"
            done
            for v in "${vs[@]}"; do
                IFS='|' read -r vn vf <<< "$v"
                [ -x build/v-$vn/tq ] || continue
                echo "-- A/B round $round: $vn ($vf)"
                timeout 100 build/v-$vn/tq kv-bench --cuda --schemes bf16,turbo:k8v3,turbo:k4v3 $pts \
                    --csv $w/ab_${vn}_r$round.csv | grep "^turbo\|^bf16"
            done
        done
        pack
        ;;
    tables)
        timeout 250 $TQ kv-bench --cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim 128 \
            --ctx 1024,4096,16384,32768,65536,131072 --batch 1,8 --reps 20 --timing both --csv $w/kv_bench_d128.csv \
            > $w/kv_bench_d128.log; echo "bench d128 rc=$?"
        timeout 150 python3 bench/cuda/sdpa_bench.py --head-dim 128 --ctx 1024,4096,16384,32768,65536,131072 \
            --batch 1,8 --reps 20 --timing both --csv $w/sdpa_d128.csv > $w/sdpa_d128.log 2>&1; echo "sdpa d128 rc=$?"
        pack
        timeout 250 $TQ kv-bench --cuda --schemes bf16,kv8,turbo:k8v3,turbo:k4v3 --head-dim 64,256 \
            --ctx 1024,4096,16384,32768,65536,131072 --batch 1,8 --reps 10 --timing both --csv $w/kv_bench_d64_d256.csv \
            > $w/kv_bench_d64_d256.log; echo "bench d64,256 rc=$?"
        timeout 150 python3 bench/cuda/sdpa_bench.py --head-dim 64,256 --ctx 1024,4096,16384,32768,65536,131072 \
            --batch 1,8 --reps 10 --timing both --csv $w/sdpa_d64_d256.csv > $w/sdpa_d64_d256.log 2>&1
        echo "sdpa d64,256 rc=$?"
        python3 bench/cuda/make_table.py $w/kv_bench_d128.csv,$w/kv_bench_d64_d256.csv \
            $w/sdpa_d128.csv,$w/sdpa_d64_d256.csv > $w/tables.md && head -20 $w/tables.md
        pack
        ;;
    ncu)
        secs="--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis"
        for p in ${NCU_POINTS:-turbo:k8v3,1,1024,auto turbo:k8v3,1,1024,kernel bf16,1,1024,auto turbo:k8v3,1,131072,auto}; do
            IFS=',' read -r sc bb cc mm <<< "$p"
            echo "== ncu $sc batch $bb ctx $cc merge $mm" >> $w/ncu.txt
            timeout 100 ncu --clock-control none $secs --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active" \
                -k regex:"attend|reduce" --launch-skip 3 --launch-count 2 $TQ kv-bench --cuda --merge $mm \
                --schemes $sc --ctx $cc --batch $bb --reps 1 >> $w/ncu.txt 2>&1
            echo "ncu $p rc=$?"
        done
        timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:"attend|reduce" $TQ kv-bench \
            --cuda --schemes bf16,turbo:k8v3,turbo:k4v3 --ctx 1024,4096 --batch 1,8 --reps 3 > $w/ncu_durations.csv 2> $w/ncu.err
        echo "ncu durations rc=$?"
        pack
        ;;
    qgemv)
        { [ -f $B/build.ninja ] || cfg $B; } && cmake --build $B -j 16 --target tq test_cuda_qgemv qgemv_bench > $w/build_qgemv.log 2>&1
        rc=$?; el "qgemv build rc=$rc"; [ $rc = 0 ] || { tail -40 $w/build_qgemv.log; pack; continue; }
        timeout 300 $B/tests/test_cuda_qgemv > $w/test_cuda_qgemv.log 2>&1; echo "test_cuda_qgemv rc=$?"
        grep -m 12 "FAIL\|done\|passed" $w/test_cuda_qgemv.log
        timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/test_cuda_qgemv --quick \
            > $w/qgemv_memcheck.log 2>&1; echo "memcheck test_cuda_qgemv --quick rc=$?"; tail -2 $w/qgemv_memcheck.log
        timeout 200 $B/tests/qgemv_bench --split ${QG_SPLITS:-0} --staged ${QG_STAGED:-3} --csv $w/qgemv_n1.csv > $w/qgemv_n1.md 2>&1; echo "qgemv_bench n1 rc=$?"
        cat $w/qgemv_n1.md
        timeout 200 $B/tests/qgemv_bench --n 8 --reps 20 --csv $w/qgemv_n8.csv > $w/qgemv_n8.md 2>&1
        echo "qgemv_bench n8 rc=$?"; cat $w/qgemv_n8.md
        pack
        ;;
    llama_build)
        [ -f llama_src.tgz ] || { echo "no llama_src.tgz (prep_visit.sh LLAMA=1)"; continue; }
        [ -d /tmp/ll/llama.cpp ] || { mkdir -p /tmp/ll && tar xzf llama_src.tgz -C /tmp/ll; }
        lt0=$(date +%s)
        [ -f /tmp/llb/build.ninja ] || cmake -S /tmp/ll/llama.cpp -B /tmp/llb -G Ninja -DCMAKE_BUILD_TYPE=Release \
            -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF \
            -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF \
            -DLLAMA_OPENSSL=OFF > $w/llama_cfg.log 2>&1 || { echo "llama.cpp configure failed"; tail -20 $w/llama_cfg.log; }
        timeout ${LLAMA_BUILD_S:-400} cmake --build /tmp/llb -j 16 --target llama-bench >> $w/llama_build.log 2>&1
        echo "llama.cpp build rc=$? in $(( $(date +%s) - lt0 )) s this call (124 = not finished: call again)"
        tail -3 $w/llama_build.log
        pack
        ;;
    llama_bench)
        LB=/tmp/llb/bin/llama-bench
        [ -x $LB ] && [ -f "$model" ] || { echo "no llama-bench or no model"; continue; }
        for kv in f16 q8_0 q4_0; do
            timeout 150 $LB -m "$model" -ngl 99 -fa 1 -ctk $kv -ctv $kv -d 1024,8192,32768 -p 0 -n 64 -r 3 \
                -o csv > $w/llama_bench_$kv.csv 2> $w/llama_bench_$kv.err
            echo "llama-bench kv $kv rc=$?"; cut -d, -f1-3,30- $w/llama_bench_$kv.csv | tail -4
        done
        pack
        ;;
    stash)
        # first of two calls to a warm machine (< 30 s apart): keep the model's first half
        cp models/part0 /tmp/tq_model_part0 && ls -la /tmp/tq_model_part0
        ;;
    join)
        # second call: the first half from the stash + the carried second half
        [ -f /tmp/tq_model_part0 ] && [ -f models/part1 ] && cat /tmp/tq_model_part0 models/part1 > "$model"
        [ -f "$model" ] && sha256sum "$model" || echo "no model (the machine went back between the calls?)"
        ;;
    fwd)
        [ -f "$model" ] || { echo "no model $model"; continue; }
        timeout 200 $TQ bench --cuda -m "$model" --kv bf16,kv8,turbo:k8v3,turbo:k4v3 --depths 1024,8192,32768 \
            --decode 64 --check 2 --csv $w/fwd_bench.csv > $w/fwd_bench.log 2>&1; echo "fwd bench rc=$?"
        tail -12 $w/fwd_bench.log
        pack
        ;;
    fwdab)
        # same-visit A/B of the GPU forward's decode: OLD_TQ (another commit's tq, built with
        # BUILD=... gpu_visit.sh build from its tree) against this build, order alternating per round
        [ -f "$model" ] || { echo "no model $model"; continue; }
        for r in 1 2; do
            order="new old"; [ $r = 2 ] && order="old new"
            kvs=bf16,kv8,turbo:k8v3,turbo:k4v3; [ $r = 2 ] && kvs=bf16,turbo:k8v3
            for tag in $order; do
                bin=$TQ; [ $tag = old ] && bin=${OLD_TQ:?set OLD_TQ}
                timeout 150 $bin bench --cuda -m "$model" --kv $kvs --depths 1024,8192,32768 --decode 64 \
                    --check 2 --csv $w/fwdab_${tag}_r$r.csv > $w/fwdab_${tag}_r$r.log 2>&1
                echo "fwdab $tag round $r rc=$?"; grep -i "tok/s\|decode\|check\|KL" $w/fwdab_${tag}_r$r.log | tail -12
            done
        done
        pack
        ;;
    tiny)
        timeout 120 $B/tests/test_cuda_fwd > $w/tiny_fwd.log 2>&1; echo "test_cuda_fwd (tiny models) rc=$?"
        grep "tiny\|FAIL\|passed" $w/tiny_fwd.log | head -20
        timeout 60 $B/tests/test_cuda_api > $w/test_cuda_api.log 2>&1; echo "test_cuda_api rc=$?"; tail -1 $w/test_cuda_api.log
        for tool in memcheck racecheck; do
            timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/test_cuda_fwd > $w/tiny_$tool.log 2>&1
            echo "compute-sanitizer $tool test_cuda_fwd (tiny) rc=$?"; tail -2 $w/tiny_$tool.log
        done
        pack
        ;;
    native)
        timeout 300 $B/tests/test_cuda_fwd > $w/test_cuda_fwd.log 2>&1; echo "test_cuda_fwd rc=$? (77 = skipped)"
        grep "native\|Q4_1\|kernels\|FAIL\|passed" $w/test_cuda_fwd.log | head -30
        pack
        ;;
    weights)
        [ -f "$model" ] || { echo "no model $model"; continue; }
        for r in 1 2; do
            order="native bf16"; [ $r = 2 ] && order="bf16 native"
            for wt in $order; do
                ck=""; [ $r = 1 ] && ck="--check 2"
                timeout 240 $TQ bench --cuda -m "$model" --weights $wt --kv bf16,kv8,turbo:k8v3,turbo:k4v3 \
                    --depths 1024,8192,32768 --decode 64 $ck --csv $w/weights_${wt}_r$r.csv > $w/weights_${wt}_r$r.log 2>&1
                echo "weights $wt round $r rc=$?"; grep "^kv\|^check\|^-- kv" $w/weights_${wt}_r$r.log
            done
        done
        pack
        ;;
    graphab)
        # GA_VARIANTS="name|flags;..." (default: graph = the default step, nograph = --no-graph),
        # round 1 in that order with every cache and --check 2 on the first, round 2 reversed
        [ -f "$model" ] || { echo "no model $model"; continue; }
        IFS=';' read -ra gv <<< "${GA_VARIANTS:-graph|;nograph|--no-graph}"
        for r in 1 2; do
            order=("${gv[@]}"); [ $r = 2 ] && { order=(); for ((i=${#gv[@]}-1; i>=0; i--)); do order+=("${gv[$i]}"); done; }
            kvs=bf16,kv8,turbo:k8v3,turbo:k4v3; [ $r = 2 ] && kvs=bf16,turbo:k8v3
            for v in "${order[@]}"; do
                IFS='|' read -r tag fl <<< "$v"
                ck=""; [ $r = 1 ] && [ "$v" = "${gv[0]}" ] && ck="--check 2"
                timeout 200 $TQ bench --cuda -m "$model" --kv $kvs --depths 1024,8192,32768 --decode 64 $ck $fl \
                    --csv $w/graphab_${tag}_r$r.csv > $w/graphab_${tag}_r$r.log 2>&1
                echo "graphab $tag ($fl) round $r rc=$?"; grep "^kv\|^check" $w/graphab_${tag}_r$r.log
            done
        done
        pack
        ;;
    wide)
        # qgemv batch 1: the wide kernel (staged 3) vs the staged / direct default (1), two rounds
        # in alternating order; test_cuda_qgemv (every path + the bf16 dequantizer) and its memcheck
        timeout 300 $B/tests/test_cuda_qgemv > $w/test_cuda_qgemv.log 2>&1; echo "test_cuda_qgemv rc=$?"
        grep "FAIL\|done\|passed\|dequant" $w/test_cuda_qgemv.log | head -30
        timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/test_cuda_qgemv --quick \
            > $w/qgemv_memcheck.log 2>&1; echo "memcheck test_cuda_qgemv --quick rc=$?"; tail -2 $w/qgemv_memcheck.log
        for r in 1 2; do
            st=${WIDE_STAGED:-1,4,3}; [ $r = 2 ] && st=$(echo $st | tr ',' '\n' | tac | paste -sd,)
            timeout 200 $B/tests/qgemv_bench --staged $st --csv $w/wide_n1_r$r.csv > $w/wide_n1_r$r.md 2>&1
            echo "qgemv_bench --staged $st round $r rc=$?"; cat $w/wide_n1_r$r.md
        done
        pack
        ;;
    widencu)
        # ncu of the wide kernel (Q4_0 and Q4_K, 4096 x 14336, cold)
        for f in ${NCU_FMTS:-Q4_0 Q4_K}; do
            timeout 120 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
                --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis \
                -k regex:wide --launch-skip 4 --launch-count 1 $B/tests/qgemv_bench --fmt $f --shape 4096x14336 \
                --reps 2 > $w/ncu_wide_$f.txt 2>&1
            echo "ncu wide $f rc=$?"; grep -E "DRAM Throughput|Memory Throughput|Duration|Issue Slots Busy|Achieved Occupancy|No Eligible|Registers Per|Stall|L1/TEX Hit|Compute \(SM\)" $w/ncu_wide_$f.txt | head -16
        done
        pack
        ;;
    prefill)
        # native prefill: dequantize-to-bf16 + cuBLAS (default) vs the quantized GEMV (--prefill-qgemv),
        # and bf16 weights; two rounds, order alternating (needs the model)
        [ -f "$model" ] || { echo "no model $model"; continue; }
        for r in 1 2; do
            order="dq qg bf"; [ $r = 2 ] && order="bf qg dq"
            for v in $order; do
                fl="--weights native"; [ $v = qg ] && fl="--weights native --prefill-qgemv"; [ $v = bf ] && fl="--weights bf16"
                ck=""; [ $r = 1 ] && ck="--check 2"
                timeout 200 $TQ bench --cuda -m "$model" $fl --kv bf16,turbo:k8v3 --depths 1024,8192,32768 --decode 32 $ck \
                    --csv $w/prefill_${v}_r$r.csv > $w/prefill_${v}_r$r.log 2>&1
                echo "prefill $v ($fl) round $r rc=$?"; grep "^kv\|^check\|^native" $w/prefill_${v}_r$r.log
            done
        done
        pack
        ;;
    gen)
        timeout 120 $B/tests/test_cuda_gen > $w/test_cuda_gen.log 2>&1; echo "test_cuda_gen rc=$?"
        grep -v "^ok" $w/test_cuda_gen.log | tail -12
        for tool in memcheck racecheck; do
            timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/test_cuda_gen > $w/gen_$tool.log 2>&1
            echo "compute-sanitizer $tool test_cuda_gen rc=$?"; tail -2 $w/gen_$tool.log
        done
        pack
        ;;
    genbench)
        [ -f "$model" ] || { echo "no model $model"; continue; }
        timeout 240 $B/tests/test_cuda_fwd > $w/test_cuda_fwd_model.log 2>&1; echo "test_cuda_fwd (model) rc=$?"
        grep "SmolLM2\|FAIL\|passed\|native\|prefill" $w/test_cuda_fwd_model.log | head -24
        pack
        gb() { # tag, flags
            timeout 120 $TQ bench --cuda -m "$model" --kv bf16,turbo:k8v3 --depths 1024,8192 --decode 64 $2 \
                --csv $w/gb_$1.csv > $w/gb_$1.log 2>&1
            echo "bench $1 ($2) rc=$?"; grep "^kv.*depth" $w/gb_$1.log
        }
        gb host1 ""; gb dev1 "--device-sampler"; gb pc21 "--prefill-chunk 21"
        gb nat "--weights native"; gb natpc21 "--weights native --prefill-chunk 21"
        gb natdev "--weights native --device-sampler"; gb dev2 "--device-sampler"; gb host2 ""
        pack
        p="The capital of France is Paris. The capital of Germany is"
        for pen in 1 1.1; do
            timeout 60 $TQ generate --cuda -m "$model" -p "$p" -n 128 --greedy --repeat-penalty $pen --ignore-eos \
                > $w/gen_gpu_$pen.txt 2> $w/gen_gpu_$pen.err; echo "generate --cuda pen $pen rc=$?"; tail -1 $w/gen_gpu_$pen.err
            timeout 60 $TQ generate --cuda --host-sampler -m "$model" -p "$p" -n 128 --greedy --repeat-penalty $pen \
                --ignore-eos > $w/gen_host_$pen.txt 2> $w/gen_host_$pen.err; echo "generate --cuda --host-sampler pen $pen rc=$?"
            tail -1 $w/gen_host_$pen.err
            timeout 120 $TQ generate -m "$model" --kv bf16 -p "$p" -n 128 --greedy --repeat-penalty $pen --ignore-eos \
                > $w/gen_cpu_$pen.txt 2> $w/gen_cpu_$pen.err; echo "generate CPU (native weights, bf16 cache) pen $pen rc=$?"
            tail -1 $w/gen_cpu_$pen.err
            cmp -s $w/gen_gpu_$pen.txt $w/gen_host_$pen.txt && echo "pen $pen: device sampler text == host sampler text" ||
                echo "pen $pen: device sampler text DIFFERS from host sampler text"
            cmp -s $w/gen_gpu_$pen.txt $w/gen_cpu_$pen.txt && echo "pen $pen: GPU text == CPU text" || {
                echo "pen $pen: GPU text differs from the CPU's; common prefix $(cmp $w/gen_gpu_$pen.txt $w/gen_cpu_$pen.txt | awk '{print $5}') bytes"; }
            head -c 300 $w/gen_gpu_$pen.txt; echo
        done
        pack
        ;;
    randmodel)
        $B/tests/rand_gguf /tmp/r30.gguf q8_0 30 1 && model=/tmp/r30.gguf
        ;;
    exact)
        timeout 300 $B/tests/test_cuda_gen > $w/exact_gen.log 2>&1; echo "test_cuda_gen rc=$?"
        grep -v "^ok" $w/exact_gen.log | tail -16
        pack
        for tool in ${EXACT_SAN:-memcheck}; do
            timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/test_cuda_gen --quick > $w/exact_$tool.log 2>&1
            echo "compute-sanitizer $tool test_cuda_gen --quick rc=$?"; tail -2 $w/exact_$tool.log
        done
        timeout 200 $B/tests/test_cuda_qgemv --quick > $w/exact_qgemv.log 2>&1; echo "test_cuda_qgemv --quick rc=$?"
        grep "FAIL\|done\|passed" $w/exact_qgemv.log | tail -6
        timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/test_cuda_qgemv --quick \
            > $w/exact_qgemv_memcheck.log 2>&1; echo "memcheck test_cuda_qgemv --quick rc=$?"; tail -2 $w/exact_qgemv_memcheck.log
        pack
        ;;
    pvx)
        # issue 16 item 6, what remains: the turbo attention's P.V in ~fp32 (TQC_PV_EXACT=1, a
        # diagnostic build) -- test_cuda_gen's drift per input rule and test_cuda_kv's errors
        cfg build/v-pvx "-DTQC_PV_EXACT=1" && cmake --build build/v-pvx -j 16 --target test_cuda_gen test_cuda_kv \
            > $w/build_pvx.log 2>&1 || { echo "pvx build failed"; tail -20 $w/build_pvx.log; continue; }
        el "pvx build done"
        timeout 200 build/v-pvx/tests/test_cuda_gen > $w/pvx_gen.log 2>&1; echo "test_cuda_gen (TQC_PV_EXACT=1) rc=$?"
        grep "drift\|exact K/V\|passed\|FAIL" $w/pvx_gen.log
        for v in "default|$B" "pvx|build/v-pvx"; do
            IFS='|' read -r tag bd <<< "$v"
            timeout 200 $bd/tests/test_cuda_kv --quick > $w/pvx_kv_$tag.log 2>&1; echo "test_cuda_kv --quick ($tag) rc=$?"
            grep "^attend turbo:k8v3" $w/pvx_kv_$tag.log | awk '{print $NF}' | sort -g | awk '{a[NR]=$1} END {print "  turbo:k8v3 attend rel err: n " NR ", median " a[int((NR+1)/2)] ", max " a[NR]}'
        done
        pack
        ;;
    stepab)
        [ -f "$model" ] || { echo "no model $model"; continue; }
        vs=("def|" "enc2|--enc-two" "inbf16|--inputs bf16" "inf32|--inputs f32" "nat|--weights native"
            "natjob|--weights native --no-wide-head" "natenc2|--weights native --enc-two")
        for r in 1 2; do
            order=("${vs[@]}"); [ $r = 2 ] && { order=(); for ((i=${#vs[@]}-1; i>=0; i--)); do order+=("${vs[$i]}"); done; }
            for v in "${order[@]}"; do
                IFS='|' read -r tag fl <<< "$v"
                ck=""; [ $r = 1 ] && [ $tag = def ] && ck="--check 2"
                timeout 150 $TQ bench --cuda -m "$model" --kv bf16,turbo:k8v3 --depths 1024,8192,32768 --decode 64 \
                    --device-sampler $ck $fl --csv $w/stepab_${tag}_r$r.csv > $w/stepab_${tag}_r$r.log 2>&1
                echo "stepab $tag ($fl) round $r rc=$?"; grep "^kv\|^check\|KL" $w/stepab_${tag}_r$r.log | head -8
            done
        done
        pack
        ;;
    fwdncu)
        [ -f "$model" ] || { echo "no model $model"; continue; }
        for wv in ${NCU_VARIANTS:-"bf16|" "native|" "native|--no-wide-head"}; do
            IFS='|' read -r wt fl <<< "$wv"
            timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --launch-count ${NCU_N:-250} \
                $TQ bench --cuda -m "$model" --weights $wt --kv bf16 --depths 0 --decode 1 --no-graph $fl \
                > $w/fwdncu_$wt$fl.csv 2> $w/fwdncu_$wt$fl.err; echo "ncu forward decode ($wt $fl) rc=$?"
            python3 - $w/fwdncu_$wt$fl.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit("no ncu rows")
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
t = collections.OrderedDict(); n = collections.Counter(); tot = 0.0
for r in rows[1:]:
    try:
        v = float(r[vi].replace(",", ""))
    except ValueError:
        continue
    v = v / 1000.0 if r[ui] in ("ns", "nsecond") else v if r[ui] in ("us", "usecond") else v * 1000.0
    k = r[ki].split("(")[0][:60]; t[k] = t.get(k, 0.0) + v; n[k] += 1; tot += v
print(f"  {sum(n.values())} kernels, {tot:.1f} us of GPU time")
for k, v in sorted(t.items(), key=lambda kv: -kv[1])[:12]:
    print(f"  {v:9.1f} us  {n[k]:4d}x  {v / n[k]:7.2f} us  {k}")
PY
        done
        pack
        ;;
    *) echo "unknown step $step" ;;
    esac
done
el "done $(date -u)"
pack
