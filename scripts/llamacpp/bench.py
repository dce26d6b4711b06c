#!/usr/bin/env python3
"""bench.py -- llama.cpp prefill and decode speed (through llama-cpp-python, built from source),
and, with --tq, tq's `tq bench` on the same machine in the same run, as ratios.

    python3 scripts/llamacpp/bench.py                                   # llama.cpp only
    python3 scripts/llamacpp/bench.py --tq build/gen/tq --runs 5        # both, interleaved

What is measured (same thread count for both engines, default: every core):
  prefill : one forward pass over N_PREFILL (512) tokens of real text from an empty cache, tok/s;
  decode  : tokens/s of single-token steps (greedy feed-back of fixed ids) after a prompt of
            `depth` tokens, for each depth in --depths (default 0,128,512,1024), 32 steps each.
Each number is the median of --runs repetitions; tq and llama.cpp repetitions alternate, so
machine noise hits both. --threads takes a list (1,2): every model is measured at each count.
tq's --weights (--tq-weights auto): f16 for an F16 file, native for a block-quantized GGUF (its
blocks run as they are, as llama.cpp does). --rss also prints the peak RSS of a 64-token
`tq generate` on each model with --weights native and bf16 (the dequantize-at-load path), next to
the file size. Models: the F16 GGUF (both engines, the same weights) and SmolLM2's
original Q4_1 GGUF (llama.cpp computes on Q4_1 blocks; tq dequantizes them at load to its
--weights type, default bf16, which the output says).
llama.cpp settings: n_ctx 2048, n_batch = n_ubatch = 512, KV cache F16 (its default), flash
attention on (--llama-fa; what llama-cli/llama-server/llama-bench run on CPU by default; tables before
2026-12-03 15:40 UTC ran it off, llama-cpp-python's default, ~20% slower prefill), mmap.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

N_PREFILL = 512
N_DECODE = 32
# The shared folder sits next to the repository (../shared from its root), wherever it is.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEF_TEXT = os.path.join(ROOT, "..", "shared", "assets", "corpora", "wikitext-2-raw-test.txt")


def text_tokens(llm, n, path):
    if not os.path.isfile(path):
        sys.exit(f"bench.py: the prompt text {os.path.normpath(path)} is missing; it comes from "
                 "the shared folder, ../shared next to the repository (give another file with "
                 "--text FILE)")
    txt = open(path, encoding="utf-8").read(200000)
    toks = llm.tokenize(txt.encode(), add_bos=False, special=False)
    return (toks * (n // max(len(toks), 1) + 1))[:n]


def llama_once(llm, toks, depths):
    out = {}
    llm.reset()
    llm._ctx.kv_cache_clear()
    t0 = time.perf_counter()
    llm.eval(toks[:N_PREFILL])
    out["prefill"] = N_PREFILL / (time.perf_counter() - t0)
    for d in depths:
        llm.reset()
        llm._ctx.kv_cache_clear()
        if d:
            llm.eval(toks[:d])
        step = toks[d : d + N_DECODE]
        t0 = time.perf_counter()
        for t in step:
            llm.eval([t])
        out[f"decode@{d}"] = N_DECODE / (time.perf_counter() - t0)
    return out


def tq_once(tq, model, threads, depths, weights, kv):
    cmd = [tq, "bench", "-m", model, "-t", str(threads), "--weights", weights, "--kv", kv, "--json",
           "--prefill", str(N_PREFILL), "--decode", str(N_DECODE),
           "--depths", ",".join(str(d) for d in depths), "--runs", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{r.stderr}")
    j = json.loads(r.stdout.strip().splitlines()[-1])
    out = {"prefill": j["prefill_tok_s"]}
    for d in depths:
        out[f"decode@{d}"] = j["decode_tok_s"][str(d)]
    out["_peak_rss_mb"] = j.get("peak_rss_mb")
    out["_kernel"] = j.get("kernel")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="models/SmolLM2-135M-Instruct.F16.gguf,models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--threads", default=str(os.cpu_count()),
                    help="thread counts, comma-separated (default: every core)")
    ap.add_argument("--rss", action="store_true",
                    help="also the peak RSS of `tq generate -n 64` with native and bf16 weights")
    ap.add_argument("--depths", default="0,128,512,1024")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tq", help="path of the tq binary: also run `tq bench` and print ratios")
    ap.add_argument("--tq-kv", default="bf16",
                    help="tq's KV cache (default bf16, like for like with llama.cpp's default f16 "
                         "cache; tq's own CLI default is a quantized rot: cache)")
    ap.add_argument("--tq-weights", default="auto",
                    help="tq --weights: auto = f16 for an F16 file, native otherwise")
    ap.add_argument("--llama-fa", choices=["on", "off"], default="on",
                    help="llama.cpp flash attention (default on: what llama-cli, llama-server and "
                         "llama-bench run on CPU with their default 'auto'; llama-cpp-python's own "
                         "default is off, which makes llama.cpp's prefill ~20%% slower)")
    ap.add_argument("--text", default=DEF_TEXT,
                    help="text whose tokens feed the runs (default: wikitext-2 test from "
                         "../shared next to the repository)")
    a = ap.parse_args()
    depths = [int(x) for x in a.depths.split(",")]
    import llama_cpp
    from llama_cpp import Llama

    print(f"llama-cpp-python {llama_cpp.__version__}, threads {a.threads}, runs {a.runs} (median), "
          f"prefill {N_PREFILL} tokens, decode {N_DECODE} steps at depths {depths}, "
          f"llama.cpp flash attention {a.llama_fa}")
    rows = []
    for model, threads in [(m, int(t)) for m in a.models.split(",") for t in a.threads.split(",")]:
        llm = Llama(model_path=model, n_ctx=2048, n_batch=512, n_ubatch=512, n_threads=threads,
                    n_threads_batch=threads, flash_attn=(a.llama_fa == "on"), verbose=False)
        toks = text_tokens(llm, 2048, a.text)
        w = a.tq_weights
        if w == "auto":
            w = "f16" if ".F16." in model else "native"
        runs_l, runs_t = [], []
        llama_once(llm, toks, [0])  # warm-up: page in the weights
        for _ in range(a.runs):
            runs_l.append(llama_once(llm, toks, depths))
            if a.tq:
                runs_t.append(tq_once(a.tq, model, threads, depths, w, a.tq_kv))
        del llm
        keys = ["prefill"] + [f"decode@{d}" for d in depths]
        for k in keys:
            lm = statistics.median(r[k] for r in runs_l)
            row = {"model": os.path.basename(model), "threads": threads, "metric": k,
                   "llama_tok_s": lm}
            if runs_t:
                tm = statistics.median(r[k] for r in runs_t)
                row.update(tq_tok_s=tm, ratio=tm / lm, tq_weights=w, tq_kernel=runs_t[0]["_kernel"])
            rows.append(row)
    for r in rows:
        s = (f"{r['model']:36s} t{r['threads']} {r['metric']:12s} llama.cpp "
             f"{r['llama_tok_s']:9.1f} tok/s")
        if "tq_tok_s" in r:
            s += f"   tq ({r['tq_weights']}) {r['tq_tok_s']:9.1f} tok/s   tq/llama.cpp {r['ratio']:.2f}"
        print(s)
    if a.rss and a.tq:
        for model in a.models.split(","):
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
