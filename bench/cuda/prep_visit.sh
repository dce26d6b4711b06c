#!/usr/bin/env bash
# prep_visit.sh [REV] -- on the dev machine: stage REV (default HEAD) of this repository for a GPU
# visit in $GPU_STAGE (= <the checkout the device tool sends>/.gpu; git-excluded there and named in
# the tool's carry list), with .deps/ = json-c, pcre2, zlib (tests) and xxhash (header-only; the image has an older one) headers and static libraries for
# the CMake build on the GPU image (which has no -dev packages; CMakeLists.txt finds them through
# CMAKE_PREFIX_PATH). MODEL_PART=aa|ab also copies that half of the SmolLM2 model (split -b 47M:
# models/ does not fit the 64 MiB a call may carry), for the two-call `fwd` visits.
# Then: run(command="cd .gpu && tar xzf src.tgz && bash bench/cuda/gpu_visit.sh build test ...",
# carry=[".gpu"]).
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=${1:-HEAD}
dst=${GPU_STAGE:?set GPU_STAGE=<the checkout the device tool sends>/.gpu}
rm -rf "$dst"
mkdir -p "$dst/.deps/include" "$dst/.deps/lib"
# the tree as a compressed archive (the device tool carries at most 64 MiB together with the sent
# checkout's own tree; with a model half that matters): the command on the GPU starts with `tar xzf src.tgz`
git archive --format=tar.gz -o "$dst/src.tgz" "$rev"
git rev-parse --short "$rev" > "$dst/.commit"
cp -r /usr/include/json-c /usr/include/pcre2.h /usr/include/zlib.h /usr/include/zconf.h \
    /usr/include/xxhash.h "$dst/.deps/include/"
cp /usr/lib/x86_64-linux-gnu/lib{json-c,pcre2-8,z}.a "$dst/.deps/lib/"
if [ -n "${MODEL_PART:-}" ]; then
    mkdir -p "$dst/models"
    m=models/SmolLM2-135M-Instruct.Q4_1.gguf
    split -b 47M -d -a 1 "$m" /tmp/tq_model_part_ # parts 0, 1
    case "$MODEL_PART" in aa) cp /tmp/tq_model_part_0 "$dst/models/part0" ;; ab) cp /tmp/tq_model_part_1 "$dst/models/part1" ;; esac
    rm -f /tmp/tq_model_part_*
fi
# LLAMA=1: a trimmed copy of the llama.cpp source the llama-cpp-python sdist vendors (ggml with the
# CPU and CUDA backends only, src, include, common, vendor, tools/llama-bench) for gpu_visit.sh llama_build
if [ -n "${LLAMA:-}" ]; then
    v=${LLAMA_SRC:?set LLAMA_SRC=<the llama-cpp-python sdist>/vendor/llama.cpp}
    t=$(mktemp -d); D=$t/llama.cpp
    mkdir -p $D/ggml/src $D/tools
    cp -r $v/CMakeLists.txt $v/cmake $v/src $v/include $v/common $v/vendor $D/
    cp -r $v/ggml/CMakeLists.txt $v/ggml/cmake $v/ggml/include $D/ggml/
    for f in $v/ggml/src/*; do
        case $(basename $f) in ggml-cann|ggml-et|ggml-hexagon|ggml-hip|ggml-metal|ggml-musa|ggml-opencl|ggml-openvino|\
            ggml-rpc|ggml-sycl|ggml-virtgpu|ggml-vulkan|ggml-webgpu|ggml-zdnn|ggml-zendnn|ggml-blas) ;;
        *) cp -r $f $D/ggml/src/ ;; esac
    done
    cp -r $v/tools/llama-bench $D/tools/
    echo 'add_subdirectory(llama-bench)' > $D/tools/CMakeLists.txt
    tar czf "$dst/llama_src.tgz" -C $t llama.cpp
    rm -rf $t
fi
du -sh "$dst"
