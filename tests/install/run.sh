#!/usr/bin/env bash
# run.sh BUILD_DIR CC SANITIZE SHARED -- the install test (tests/install.cmake): cmake --install
# BUILD_DIR into a temporary prefix, check the layout and the soname, then build consumer.c
# against the installed copy with pkg-config (shared, and static from the archive) and with
# CMake's find_package(turboquant) (turboquant::turboquant, turboquant::turboquant_static) and
# run each program; the shared ones must load libturboquant from the prefix.
set -euo pipefail
build=$1 cc=$2 san=$3 shared=$4
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "$san" ]; then
    echo "SKIP: sanitizer build ($san): consumers built without -fsanitize cannot use it"
    exit 77
fi
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== $*"; }
expect="turboquant 0.1.0: turbo:k8v3, head_dim 128: 144 + 56 bytes"
run_ok() { # run_ok PROGRAM SHOULD_USE_SO
    out=$("$1") || fail "$1 exited $?"
    [ "$out" = "${expect/0.1.0/$ver}" ] || fail "$1 printed '$out'"
    deps=$(ldd "$1") # not piped into grep -q: with pipefail, ldd's SIGPIPE would fail it
    if [ "$2" = 1 ]; then
        [[ "$deps" == *"libturboquant.so.$sov => $libdir/"* ]] || fail "$1: $deps"
    elif [[ "$deps" == *libturboquant* ]]; then
        fail "$1 should be static: $deps"
    fi
    echo "   $1: $out"
}

# ctest does not build: like every test this one uses what `cmake --build` made.
for f in libturboquant.a $([ "$shared" = ON ] && echo libturboquant.so); do
    if [ ! -e "$build/$f" ]; then
        echo "SKIP: $build/$f not built (cmake --build $build --target turboquant_shared)"
        exit 77
    fi
done
step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(find "$prefix" -name turboquant.pc)
[ -n "$pc" ] || fail "no turboquant.pc under $prefix"
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(cd "$(pkg-config --variable=libdir turboquant)" && pwd)
incdir=$(cd "$(pkg-config --variable=includedir turboquant)" && pwd)
ver=$(pkg-config --modversion turboquant)
sov=${ver%.*}
for f in "$incdir/turboquant.h" "$incdir/turboquant/kv.h" "$libdir/libturboquant.a" \
    "$libdir/cmake/turboquant/turboquantConfig.cmake" \
    "$libdir/cmake/turboquant/turboquantConfigVersion.cmake"; do
    [ -f "$f" ] || fail "not installed: $f"
done
(cd "$prefix" && find . -type f -o -type l | sort | sed 's/^/   /')
if [ "$shared" = ON ]; then
    [ -L "$libdir/libturboquant.so" ] && [ -f "$libdir/libturboquant.so.$ver" ] ||
        fail "no libturboquant.so -> .so.$ver"
    soname=$(readelf -d "$libdir/libturboquant.so.$ver" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
    [ "$soname" = "libturboquant.so.$sov" ] || fail "soname '$soname', want libturboquant.so.$sov"
    leaked=$(nm -D --defined-only "$libdir/libturboquant.so.$ver" | awk '$3 !~ /^tq_/')
    [ -z "$leaked" ] || fail "exported non-tq symbols: $leaked"
    nsym=$(nm -D --defined-only "$libdir/libturboquant.so.$ver" | wc -l)
    echo "   soname $soname, $nsym exported symbols, all tq_*"
fi

cflags=(-std=c11 -Wall -Wextra -Werror)
if [ "$shared" = ON ]; then
    step "pkg-config, shared"
    # shellcheck disable=SC2046
    "$cc" "${cflags[@]}" "$here/consumer.c" $(pkg-config --cflags --libs turboquant) \
        -Wl,-rpath,"$libdir" -o "$tmp/pc_shared"
    run_ok "$tmp/pc_shared" 1
fi
step "pkg-config --static, the archive"
libs=$(pkg-config --static --libs turboquant | sed "s|-lturboquant |$libdir/libturboquant.a |")
# shellcheck disable=SC2046,SC2086
"$cc" "${cflags[@]}" "$here/consumer.c" $(pkg-config --cflags turboquant) $libs -o "$tmp/pc_static"
run_ok "$tmp/pc_static" 0

step "CMake find_package(turboquant)"
cmake -S "$here" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="-Wall -Werror" >"$tmp/cm.log" 2>&1 ||
    { cat "$tmp/cm.log"; fail "consumer configure"; }
cmake --build "$tmp/cm" >>"$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; fail "consumer build"; }
run_ok "$tmp/cm/consumer_static" 0
if [ "$shared" = ON ]; then
    [ -x "$tmp/cm/consumer_shared" ] || fail "turboquant::turboquant missing from the package"
    run_ok "$tmp/cm/consumer_shared" 1
fi
echo "install test: all passed"
