#!/usr/bin/env bash
# quant_prep.sh -- on the dev machine: stage the quality table's GPU visit (bench/cuda/quant_visit.sh)
# in the checkout the device tool sends (DST, required; its .git/info/exclude must ignore /.gpu*/): DST/.gpu-q = src.tgz (git archive HEAD of this tree), .deps (as prep_visit.sh), texts/
# (WikiText-2 raw test, GPL-3), lq/ (llama-quantize of LLAMA_BIN with its shared libraries); and
# DST/.gpu-qp<i> = one ~50 MB part of a model each (SmolLM2: 2 parts, Gemma 3 270M: 5 parts),
# named <model>.part<k>. Each device call carries one of them (64 MiB a call).
set -euo pipefail
cd "$(dirname "$0")/../.."
DST=${DST:?set DST=<the checkout the device tool sends>}
LLAMA_BIN=${LLAMA_BIN:?set LLAMA_BIN=<a llama.cpp build bin/ with llama-quantize (AVX2 build: for the GPU host CPU)>}
WIKI=${WIKI:-../shared/assets/corpora/wikitext-2-raw-test.txt}
s=$DST/.gpu-q
rm -rf "$s" "$DST"/.gpu-qp*
mkdir -p "$s/.deps/include" "$s/.deps/lib" "$s/texts" "$s/lq"
git archive --format=tar.gz -o "$s/src.tgz" HEAD
git rev-parse --short HEAD > "$s/.commit"
cp -r /usr/include/json-c /usr/include/pcre2.h /usr/include/zlib.h /usr/include/zconf.h \
    /usr/include/xxhash.h "$s/.deps/include/"
cp /usr/lib/x86_64-linux-gnu/lib{json-c,pcre2-8,z}.a "$s/.deps/lib/"
cp "$WIKI" "$s/texts/wiki.txt"
cp /usr/share/common-licenses/GPL-3 "$s/texts/gpl3.txt"
cp "$LLAMA_BIN/llama-quantize" "$s/lq/"
for l in libllama-quantize-impl.so libllama-common.so.0 libllama.so.0 libggml-base.so.0 libggml.so.0 \
    libggml-cpu.so.0; do cp -L "$LLAMA_BIN/$l" "$s/lq/"; done
i=0
for m in SmolLM2-135M-Instruct.Q4_1.gguf:2 gemma-3-270m-q4_k_m.gguf:5; do
    name=${m%%:*}; n=${m##*:}
    t=$(mktemp -d)
    split -n $n -d -a 1 "models/$name" "$t/$name.part"
    for f in "$t"/*; do mkdir -p "$DST/.gpu-qp$i"; mv "$f" "$DST/.gpu-qp$i/"; i=$((i + 1)); done
    rmdir "$t"
done
sha256sum models/SmolLM2-135M-Instruct.Q4_1.gguf models/gemma-3-270m-q4_k_m.gguf
du -sh "$s" "$DST"/.gpu-qp*
