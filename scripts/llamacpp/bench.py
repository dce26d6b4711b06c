#!/usr/bin/env python3
"""bench.py -- llama.cpp prefill and decode speed measured by llama.cpp's own `llama-bench`, and,
with --tq, tq's `tq bench` on the same files in the same minutes, as ratios.

    python3 scripts/llamacpp/bench.py                                   # llama.cpp only
    python3 scripts/llamacpp/bench.py --tq build/release/tq --runs 5    # both, interleaved
    LLAMA_BIN=../llama-build/bin python3 scripts/llamacpp/bench.py ...  # another llama.cpp build

What is measured (same thread count for both engines, default: every core):
  prefill : one forward pass over --prefill (512) tokens from an empty cache, tok/s
            (llama-bench `-p 512 -n 0`, tq bench prefill);
  decode  : tokens/s of --decode (32) single-token steps, each with the output layer, after a
            prompt of `depth` tokens, for each depth in --depths (default 0,128,512,1024)
            (llama-bench `-p 0 -n 32 -d DEPTHS`, tq bench --depths; the depth prompt is untimed).
Tokens: both engines feed pseudo-random ids (llama-bench: BOS then std::rand() % n_vocab; tq bench:
a fixed LCG sequence): neither engine's speed depends on the ids, and no text tokenizer is involved.
Each number is the median of --runs repetitions; every repetition is fresh processes (tq bench one,
llama-bench one for prefill and one for decode; each warms itself up: llama-bench one untimed
prefill or one token per test, tq bench 8 tokens), tq and llama.cpp alternate (their order flips
every repetition), so machine noise hits both. --cell-runs: each engine's repetitions in one process
per model and thread count (llama-bench -r RUNS, tq bench --runs RUNS), the engines alternating
per cell -- ~40% less time against a slow peer build (its untimed warm-up prefill and depth
prompts are paid once instead of RUNS times), interleaved more coarsely.
--threads takes a list (1,2): every model is measured at each count.

The peer (--llama-bin DIR or LLAMA_BIN=DIR, the folder holding llama-bench): by default
../llama-build-amx-clang/bin next to the repository when this CPU has AMX and that build exists
(llama.cpp at its best on an AMX machine: clang, GGML_NATIVE, AMX on), else ../llama-build/bin.
The output names the binary, its build (compiler and GGML options from the CMakeCache.txt above
the folder) and, per model, the weight buffers llama.cpp loads (e.g. "AMX 95.3 MiB": its AMX path
repacks those tensors at load; `llama-bench -v`). llama-bench settings: flash attention --llama-fa
best (default: on and off both measured, each cell's ratio taken against the faster: on this CPU
FA on, the CLI default, is faster at depth 0 but decodes at depth 512 ~40% slower than FA off),
on or off; KV cache f16 (its default), -b = -ub = 512, mmap, its extra (repacked/AMX) weight
buffers on (its default; --llama-extra "--repack 0" turns them off).

Before 2026-12-03 20:00 UTC this script drove llama.cpp through llama-cpp-python, one
`llm.eval([t])` call per decode token: that Python loop made llama.cpp's decode look 1.3-1.7x
slower than llama-bench on the same build (docs/results.md "llama.cpp at its best on this
machine"), so every earlier decode ratio flattered tq.

tq's --weights (--tq-weights auto): f16 for an F16 file, native for a block-quantized GGUF (its
blocks run as they are, as llama.cpp does); --kv bf16 (--tq-kv) against llama.cpp's f16 cache.
--rss also prints the peak RSS of a 64-token `tq generate` on each model with --weights native and
bf16 (the dequantize-at-load path), next to the file size.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys

# The llama.cpp builds sit next to the repository (../llama-build* from its root), wherever it is.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu_has(flag):
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return flag in line.split()
    except OSError:
        pass
    return False


def default_llama_bin():
    """LLAMA_BIN, else the clang+AMX build on an AMX CPU when it exists, else the gcc build."""
    if os.environ.get("LLAMA_BIN"):
        return os.environ["LLAMA_BIN"]
    amx = os.path.join(ROOT, "..", "llama-build-amx-clang", "bin")
    if cpu_has("amx_int8") and os.access(os.path.join(amx, "llama-bench"), os.X_OK):
        return amx
    return os.path.join(ROOT, "..", "llama-build", "bin")


def build_info(bindir):
    """Compiler and GGML options of a llama.cpp build, from the CMake files above its bin/."""
    top = os.path.dirname(os.path.abspath(bindir))
    cache = os.path.join(top, "CMakeCache.txt")
    if not os.path.isfile(cache):
        return "build settings unknown (no CMakeCache.txt above the folder)"
    opts, cflags = [], ""
    for line in open(cache, encoding="utf-8", errors="replace"):
        m = re.match(r"(GGML_[A-Z0-9_]+|BUILD_SHARED_LIBS):BOOL=(ON|TRUE|1)\s*$", line)
        if m and re.match(r"GGML_(NATIVE|AVX|AMX|F16C|FMA|BMI2|CPU_REPACK)", m.group(1)):
            opts.append(m.group(1))
        m = re.match(r"CMAKE_C_FLAGS:STRING=(.*)$", line)
        if m:
            cflags = m.group(1).strip()
    comp = "compiler ?"
    files = os.path.join(top, "CMakeFiles")
    if os.path.isdir(files):
        for d in sorted(os.listdir(files)):
            f = os.path.join(files, d, "CMakeCCompiler.cmake")
            if os.path.isfile(f):
                t = open(f, encoding="utf-8", errors="replace").read()
                i = re.search(r'CMAKE_C_COMPILER_ID "([^"]*)"', t)
                v = re.search(r'CMAKE_C_COMPILER_VERSION "([^"]*)"', t)
                if i and v:
                    comp = f"{i.group(1)} {v.group(1)}"
    s = f"{comp}, {' '.join(opts) or 'no GGML ISA options ON'}"
    if cflags:
        s += f", CFLAGS {cflags}"
    return s


def llama_bench(lb, model, threads, args, extra):
    """One llama-bench process; returns its JSON list of tests."""
    cmd = [lb, "-m", model, "-t", str(threads), "-b", "512", "-ub", "512", "-o", "json"] + args + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench.py: {' '.join(cmd)} failed (rc {r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout)


def llama_buffers(lb, model, extra):
    """The weight buffers llama.cpp loads for this file ('AMX 95.3 MiB, CPU_Mapped 92.1 MiB')."""
    cmd = [lb, "-v", "-m", model, "-t", "1", "-p", "8", "-n", "0", "-r", "1", "--no-warmup",
           "-o", "json"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    bufs = re.findall(r"load_tensors:\s+(\S+) model buffer size =\s+([0-9.]+) MiB", r.stderr)
    return ", ".join(f"{n} {s} MiB" for n, s in bufs) or "?"


def llama_once(lb, model, threads, prefill, decode, depths, fas, extra, reps):
    """`reps` repetitions: a prefill process and a decode process (each test warmed up by
    llama-bench); both flash-attention settings of `fas` in the same process.
    Returns {fa: {metric: [tok/s of each repetition]}}."""
    out = {fa: {} for fa in fas}
    fa_name = {1: "on", 0: "off", True: "on", False: "off"}
    j = llama_bench(lb, model, threads, ["-p", str(prefill), "-n", "0", "-d", "0", "-r", str(reps),
                                         "-fa", ",".join(fas)], extra)
    for t in j:
        out[fa_name[t["flash_attn"]]]["prefill"] = list(t["samples_ts"])
    j = llama_bench(lb, model, threads, ["-p", "0", "-n", str(decode), "-d",
                                         ",".join(str(d) for d in depths), "-r", str(reps),
                                         "-fa", ",".join(fas)], extra)
    for t in j:
        out[fa_name[t["flash_attn"]]][f"decode@{t['n_depth']}"] = list(t["samples_ts"])
    return out


def tq_once(tq, model, threads, prefill, decode, depths, weights, kv, runs):
    """One tq bench process of `runs` repetitions (its medians)."""
    cmd = [tq, "bench", "-m", model, "-t", str(threads), "--weights", weights, "--kv", kv, "--json",
           "--prefill", str(prefill), "--decode", str(decode),
           "--depths", ",".join(str(d) for d in depths), "--runs", str(runs)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench.py: {' '.join(cmd)} failed:\n{r.stderr}")
    j = json.loads(r.stdout.strip().splitlines()[-1])
    out = {"prefill": j["prefill_tok_s"]}
    for d in depths:
        out[f"decode@{d}"] = j["decode_tok_s"][str(d)]
    out["_peak_rss_mb"] = j.get("peak_rss_mb")
    out["_kernel"] = j.get("kernel")
    return out


def page_in(path):
    """Read the file once so the first repetition does not pay for the disk."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--threads", default=str(os.cpu_count()),
                    help="thread counts, comma-separated (default: every core)")
    ap.add_argument("--rss", action="store_true",
                    help="also the peak RSS of `tq generate -n 64` with native and bf16 weights")
    ap.add_argument("--depths", default="0,128,512,1024")
    ap.add_argument("--prefill", type=int, default=512, help="prefill tokens (default 512)")
    ap.add_argument("--decode", type=int, default=32, help="decode steps per depth (default 32)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cell-runs", action="store_true",
                    help="all --runs repetitions of an engine in one process per model and thread "
                         "count (llama-bench -r RUNS: one warm-up and one depth prompt instead of "
                         "RUNS; tq bench --runs RUNS, its median), the engines alternating per cell "
                         "instead of per repetition: ~40%% less time with a slow peer build")
    ap.add_argument("--tq", help="path of the tq binary: also run `tq bench` and print ratios")
    ap.add_argument("--tq-kv", default="bf16",
                    help="tq's KV cache (default bf16, like for like with llama.cpp's default f16 "
                         "cache; tq's own CLI default is a quantized rot: cache)")
    ap.add_argument("--tq-weights", default="auto",
                    help="tq --weights: auto = f16 for an F16 file, native otherwise")
    ap.add_argument("--llama-bin", default=default_llama_bin(),
                    help="folder with llama.cpp's llama-bench (default: LLAMA_BIN, else "
                         "../llama-build-amx-clang/bin on an AMX CPU when present, else "
                         "../llama-build/bin, next to the repository)")
    ap.add_argument("--llama-fa", choices=["best", "on", "off"], default="best",
                    help="llama.cpp flash attention: on (what llama-cli, llama-server and "
                         "llama-bench run on CPU with their default 'auto'), off, or best "
                         "(default: both measured, each cell's ratio against the faster one; "
                         "on this CPU FA on is faster at depth 0 and much slower at depth 512)")
    ap.add_argument("--llama-extra", default="",
                    help="more llama-bench arguments, one string (e.g. \"--repack 0\": no AMX / "
                         "repacked weight buffers)")
    a = ap.parse_args()
    depths = [int(x) for x in a.depths.split(",")]
    extra = shlex.split(a.llama_extra)
    lb = os.path.join(a.llama_bin, "llama-bench")
    if not os.access(lb, os.X_OK):
        sys.exit(f"bench.py: no llama-bench in {os.path.normpath(a.llama_bin)} (--llama-bin DIR or "
                 "LLAMA_BIN=DIR; build: cmake --build <llama.cpp build> --target llama-bench)")
    models = a.models.split(",")
    fas = ["on", "off"] if a.llama_fa == "best" else [a.llama_fa]
    for m in models:
        if not os.path.isfile(m):
            sys.exit(f"bench.py: no model file {m}")

    ver = subprocess.run([lb, "--version"], capture_output=True, text=True)
    ver = " ".join(l.strip() for l in (ver.stdout + ver.stderr).splitlines() if l.strip())
    print(f"peer: llama.cpp llama-bench {os.path.normpath(lb)} ({ver or 'version ?'}; "
          f"{build_info(a.llama_bin)}), flash attention {a.llama_fa}"
          f"{' (on and off measured, each ratio against the faster)' if len(fas) > 1 else ''}, KV f16, -b/-ub 512"
          f"{', extra ' + a.llama_extra if a.llama_extra else ''}")
    print(f"runs {a.runs} (median; {'engines alternating per model and threads' if a.cell_runs else 'fresh processes per engine and run, interleaved'}), threads {a.threads}, "
          f"prefill {a.prefill} tokens, decode {a.decode} steps at depths {depths}; "
          f"{'repetitions per cell in one process per engine; ' if a.cell_runs else ''}random token ids "
          f"on both sides" + (f"; tq KV {a.tq_kv}" if a.tq else ""))
    rows = []
    for model in models:
        page_in(model)
        print(f"llama.cpp weight buffers for {os.path.basename(model)}: "
              f"{llama_buffers(lb, model, extra)}")
        sys.stdout.flush()
        for threads in [int(t) for t in a.threads.split(",")]:
            w = a.tq_weights
            if w == "auto":
                w = "f16" if ".F16." in model else "native"
            keys = ["prefill"] + [f"decode@{d}" for d in depths]
            runs_l = {fa: {k: [] for k in keys} for fa in fas}
            runs_t = []
            # per repetition (default): fresh processes each time, the engines' order flipping;
            # --cell-runs: one llama-bench pair with -r RUNS and one tq bench --runs RUNS per cell
            reps, per = (a.runs, 1) if a.cell_runs else (1, a.runs)
            for r in range(per):
                order = ["l", "t"] if r % 2 == 0 else ["t", "l"]
                for e in order:
                    if e == "l":
                        res = llama_once(lb, model, threads, a.prefill, a.decode, depths, fas,
                                         extra, reps)
                        for fa in fas:
                            for k in keys:
                                runs_l[fa][k] += res[fa][k]
                    elif a.tq:
                        runs_t.append(tq_once(a.tq, model, threads, a.prefill, a.decode, depths, w,
                                              a.tq_kv, reps))
            for k in keys:
                by_fa = {fa: statistics.median(runs_l[fa][k]) for fa in fas}
                fa_best = max(fas, key=lambda fa: by_fa[fa])
                lm = by_fa[fa_best]
                row = {"model": os.path.basename(model), "threads": threads, "metric": k,
                       "llama_tok_s": lm, "llama_fa": fa_best,
                       "llama_runs": {fa: runs_l[fa][k] for fa in fas},
                       "peer": os.path.normpath(lb)}
                if runs_t:
                    tm = statistics.median(r[k] for r in runs_t)
                    row.update(tq_tok_s=tm, ratio=tm / lm, tq_weights=w,
                               tq_kernel=runs_t[0]["_kernel"], tq_runs=[r[k] for r in runs_t])
                rows.append(row)
                s = f"{row['model']:36s} t{threads} {k:12s} llama.cpp {lm:9.1f} tok/s (fa {fa_best:3s})"
                if len(fas) > 1:
                    s += " " + " ".join(f"[fa {fa} {by_fa[fa]:7.1f}]" for fa in fas)
                if runs_t:
                    s += f"   tq ({w}) {tm:9.1f} tok/s   tq/llama.cpp {tm / lm:.2f}"
                print(s)
                sys.stdout.flush()
    if a.rss and a.tq:
        for model in models:
            size = os.path.getsize(model) / 2**20
            for w in ("native", "bf16"):
                cmd = ["/usr/bin/time", "-f", "MAXRSS %M", a.tq, "generate", "-m", model, "-p",
                       "Once upon a time", "-n", "64", "--temp", "0", "-t", "2", "--weights", w]
                r = subprocess.run(cmd, capture_output=True, text=True)
                kb = [l for l in r.stderr.splitlines() if l.startswith("MAXRSS ")]
                mb = int(kb[-1].split()[1]) / 1024 if kb else float("nan")
                rows.append({"model": os.path.basename(model), "metric": f"rss_{w}",
                             "peak_rss_mb": mb, "file_mb": size})
                print(f"{os.path.basename(model):36s} tq generate -n 64 --weights {w:6s} peak RSS "
                      f"{mb:7.1f} MB = {mb / size:.2f}x the file ({size:.1f} MB)")
    print("JSON " + json.dumps(rows))


if __name__ == "__main__":
    main()
