#!/usr/bin/env python3
"""kv_speed.py -- decode tok/s at 1k/4k/8k context, 2 threads, SmolLM2-135M-Instruct Q4_1: tq's
kept rot: KV schemes, turbo k8v3 and bf16 (tests/test_rot_bench) against llama.cpp's f16 cache
and its rotated q8_0/q4_0 cache with flash attention (scripts/quality/llamacpp_depth.py), in ONE
run: the two engines alternate round by round (each round = every scheme and depth of one
engine), so load drifts hit both alike; medians over the rounds; ratios tq / llama.cpp per depth.
Prints a markdown table (wall tok/s and process CPU ms per token) and writes --json.
usage: python3 scripts/quality/kv_speed.py [--rounds 3] [--steps 8] [--isa avx512|avx2]
       [--isas avx512,avx2] [--llama-lib-avx2 DIR]
       [--bench build/release/tests/test_rot_bench] [--json OUT] [--text FILE]
       [--schemes bf16,turbo,rot:l181g64/l32g64] [--llama-configs f16,q8_0/q4_0+fa]
       [--llama-once]
--isas runs every ISA of the list in each round (tq forced to it; llama.cpp through the default
libllama for avx512 and through an AVX2-only build for avx2, LLAMA_CPP_LIB_PATH=DIR, default
../llama-build-avx2/bin next to the repository: cmake -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
-DGGML_F16C=ON -DGGML_AVX512=OFF -DBUILD_SHARED_LIBS=ON -DLLAMA_CURL=OFF, target llama) and
prints one table per ISA.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--steps", type=int, default=8)
ap.add_argument("--isa", default="", help="force tq's kernels (avx2 = the AVX2 proxy)")
ap.add_argument("--isas", default="", help="comma list: run each ISA per round (both engines)")
ap.add_argument("--llama-lib-avx2", default=os.environ.get(
    "LLAMA_AVX2_LIB", os.path.join(ROOT, "..", "llama-build-avx2", "bin")))
ap.add_argument("--bench", default=os.path.join(ROOT, "build/release/tests/test_rot_bench"))
ap.add_argument("--llama-configs", default="f16,q8_0/q4_0+fa")
ap.add_argument("--schemes", default="",
                help="tq schemes, comma list (default: test_rot_bench's own six)")
ap.add_argument("--depths", default="", help="llama.cpp depths (default its 1024,4096,8192)")
ap.add_argument("--no-llama", action="store_true")
ap.add_argument("--llama-once", action="store_true",
                help="llama.cpp only in the first round, with --rounds rounds inside one process "
                     "(one prefill per configuration and ISA instead of one per round: the "
                     "shorter run for a quiet machine, where load drift does not need the "
                     "alternation)")
ap.add_argument("--text", default=os.path.join(ROOT, "..", "shared", "assets", "corpora",
                                               "wikitext-2-raw-test.txt"),
                help="llama.cpp's prefill text (default: ../shared next to the repository)")
ap.add_argument("--json")
a = ap.parse_args()
if not os.path.isfile(a.bench):
    sys.exit(f"kv_speed.py: {a.bench} missing: build it (cmake --build --preset release "
             "--target test_rot_bench)")

rows = []  # every measurement of every round
import time  # noqa: E402
T0 = time.time()


def run(cmd, env=None):
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"kv_speed.py: {' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]


isas = [i for i in a.isas.split(",") if i] or [a.isa]
if "avx2" in isas and a.isas and not a.no_llama and \
        not os.path.isfile(os.path.join(a.llama_lib_avx2, "libllama.so")):
    sys.exit(f"kv_speed.py: {a.llama_lib_avx2}/libllama.so missing: build llama.cpp for AVX2 "
             "(see the usage above) or pass --llama-lib-avx2")
for r in range(a.rounds):
    for isa in isas:
        cmd = [a.bench, str(a.steps), "1", isa or "native"] + ([a.schemes] if a.schemes else [])
        for row in run(cmd):
            row["round"], row["isa"] = r, isa or "native"
            rows.append(row)
        if not a.no_llama and not (a.llama_once and r > 0):
            env = dict(os.environ)
            if isa == "avx2" and a.isas:
                env["LLAMA_CPP_LIB_PATH"] = a.llama_lib_avx2
            for row in run([sys.executable, "scripts/quality/llamacpp_depth.py", "--steps",
                            str(a.steps), "--rounds", str(a.rounds if a.llama_once else 1),
                            "--configs", a.llama_configs,
                            "--text", a.text] + (["--depths", a.depths] if a.depths else []),
                           env):
                row["round"], row["isa"] = r, isa or "native"
                rows.append(row)
    print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)

def print_table(rows):
    med = {}
    for row in rows:
        key = (row["engine"], row["kv"], row["depth"])
        med.setdefault(key, []).append(row)
    table = {k: (statistics.median(x["tok_s"] for x in v),
                 statistics.median(x["cpu_ms"] for x in v)) for k, v in med.items()}
    depths = sorted({k[2] for k in table})
    names = []
    for k in table:
        if (k[0], k[1]) not in names:
            names.append((k[0], k[1]))
    ref = [n for n in names if n[0] == "llama.cpp"]
    hdr = "| engine | KV | " + " | ".join(f"{d} tok/s | CPU ms" for d in depths)
    hdr += "".join(f" | vs llama {r[1]} {d}" for r in ref for d in depths) + " |"
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for n in names:
        cells = []
        for d in depths:
            t, c = table.get((n[0], n[1], d), (float("nan"), float("nan")))
            cells.append(f"{t:.2f} | {c:.1f}")
        for r in ref:
            for d in depths:
                t = table.get((n[0], n[1], d), (float("nan"),))[0]
                tr = table.get((r[0], r[1], d), (float("nan"),))[0]
                cells.append(f"{t / tr:.2f}x")
        print(f"| {n[0]} | {n[1]} | " + " | ".join(cells) + " |")


for isa in isas:
    if len(isas) > 1:
        print(f"\nISA {isa or 'native'} (tq forced to it; llama.cpp "
              f"{'AVX2-only build' if isa == 'avx2' else 'default build'})\n")
    print_table([x for x in rows if x["isa"] == (isa or "native")])
if a.json:
    json.dump(rows, open(a.json, "w"), indent=1)
print(f"kv_speed.py: {time.time() - T0:.0f} s", file=sys.stderr)
