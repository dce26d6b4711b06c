#!/usr/bin/env bash
# build.sh OUTDIR -- build the CUDA KV test and bench without CMake (the GPU machine's image may
# lack json-c/pcre2 dev packages): core + kv + cpu/kv_* + cuda sources, gcc for C, nvcc for CUDA.
# Produces OUTDIR/test_cuda_kv and OUTDIR/kv_bench_cuda. Arch: TQ_CUDA_ARCH (default 90a).
# TQ_FULL=1: the whole library (io, model, cpu: the CPU engine too) and OUTDIR/bench_cuda
# (`tq bench --cuda`) + OUTDIR/test_cuda_fwd; json-c / pcre2 headers and static libraries are taken
# from build/h9-deps/ when the system has none. Make it on a dev machine (Debian 12 here) and name it
# in the device tool's carry list:
#   mkdir -p build/h9-deps/include build/h9-deps/lib && cp -r /usr/include/json-c /usr/include/pcre2.h \
#     build/h9-deps/include/ && cp /usr/lib/x86_64-linux-gnu/lib{json-c,pcre2-8}.a build/h9-deps/lib/
# Variants (same-run A/Bs): EXTRA_NVFLAGS (tuning macros of kv_attend.cu), ATTEND_SRC (another
# kv_attend.cu, e.g. the previous commit's, as the baseline), TOOLS_DIR (a snapshot of tools/cli.c,
# cli.h and cmd_kv_bench_cuda.c, so that another agent's edit in progress cannot break the visit),
# ONLY_BENCH=1 (kv_bench_cuda only).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/cuda-direct}
attend_src=${ATTEND_SRC:-src/cuda/kv_attend.cu}
tools=${TOOLS_DIR:-tools}
arch=${TQ_CUDA_ARCH:-90a}
jobs=${JOBS:-$(nproc)}
mkdir -p "$out/obj"
cflags="-std=c11 -O2 -g -D_GNU_SOURCE -DTQ_BUILDING -DTQ_HAVE_CUDA -Iinclude -Isrc -ffp-contract=off -fvisibility=hidden -Wall -Wno-unused-parameter"
nvflags="${EXTRA_NVFLAGS:-} -std=c++17 -O3 -lineinfo -gencode=arch=compute_${arch},code=sm_${arch} -DTQ_BUILDING -DTQ_HAVE_CUDA -Iinclude -Isrc"
objs=()
cmds=()
srcs="src/core/*.c src/kv/*.c src/cpu/kv_*.c src/cuda/*.c"
full=${TQ_FULL:-0}
deps=build/h9-deps
xlibs=""
if [ "$full" = 1 ]; then
    srcs="src/core/*.c src/kv/*.c src/cpu/*.c src/io/*.c src/model/*.c src/cuda/*.c"
    if [ ! -f /usr/include/json-c/json.h ] || [ ! -f /usr/include/pcre2.h ]; then
        cflags="$cflags -I$deps/include"
        xlibs="$deps/lib/libjson-c.a $deps/lib/libpcre2-8.a"
    else
        xlibs="-ljson-c -lpcre2-8"
    fi
fi
for f in $srcs; do
    case "$f" in *cuda/fwd*) [ "$full" = 1 ] || continue ;; esac
    o="$out/obj/$(echo "$f" | tr / _).o"
    extra=""
    case "$f" in
        *_avx512bf16.c) extra="-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16" ;;
        *_avx512.c) extra="-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl" ;;
        *_avx2.c) extra="-mavx2 -mfma -mf16c" ;;
    esac
    cmds+=("gcc $cflags $extra -c $f -o $o")
    objs+=("$o")
done
for f in src/cuda/*.cu; do
    case "$f" in *cuda/fwd*) [ "$full" = 1 ] || continue ;; esac
    o="$out/obj/$(echo "$f" | tr / _).o"
    extra=""
    case "$f" in *kv_encode.cu) extra="--fmad=false" ;; esac
    src=$f
    case "$f" in *cuda/kv_attend.cu) src=$attend_src ;; esac
    cmds+=("nvcc $nvflags $extra -c $src -o $o")
    objs+=("$o")
done
printf '%s\n' "${cmds[@]}" | xargs -P "$jobs" -I{} sh -c '{}'
libs="-lcudart_static -lpthread -lm -ldl -lrt -lstdc++"
cudalib="$(dirname "$(command -v nvcc)")/../lib64"
[ -d "$cudalib" ] || cudalib="$(dirname "$(command -v nvcc)")/../targets/x86_64-linux/lib"
[ "$full" = 1 ] && libs="$xlibs -lcublas -Wl,-rpath,$cudalib -lcudart_static -lpthread -lm -ldl -lrt -lstdc++"
[ "${ONLY_BENCH:-0}" = 1 ] ||
    gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -Itests tests/test_cuda_kv.c "${objs[@]}" -L"$cudalib" $libs -o "$out/test_cuda_kv"
cli_srcs="$tools/cli.c"
[ -f "$tools/cli_args.c" ] && cli_srcs="$cli_srcs $tools/cli_args.c"
gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -I"$tools" bench/cuda/kv_bench_main.c $cli_srcs "$tools/cmd_kv_bench_cuda.c" \
    "${objs[@]}" -L"$cudalib" $libs -o "$out/kv_bench_cuda"
if [ "$full" = 1 ]; then
    gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -Itests tests/test_cuda_fwd.c "${objs[@]}" -L"$cudalib" $libs -o "$out/test_cuda_fwd"
    gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Itools bench/cuda/bench_main.c tools/cli.c tools/cmd_bench_cuda.c "${objs[@]}" -L"$cudalib" $libs -o "$out/bench_cuda"
    echo "built $out/test_cuda_fwd $out/bench_cuda"
fi
echo "built $out/test_cuda_kv $out/kv_bench_cuda"
