#!/usr/bin/env python3
"""llamacpp_depth.py -- llama.cpp decode tok/s at 1k, 4k and 8k tokens of context with an F16
and a Q8_0 KV cache (llama-cpp-python, built from source), SmolLM2-135M-Instruct Q4_1 GGUF,
2 threads; the peer of tests/test_turbo_bench.c in docs/results.md.

For each KV type: one context of 8192 + 64 tokens; real text is prefilled up to each depth
(1024, then on to 4096, then 8192), and STEPS single-token decode steps are timed there
(median of ROUNDS rounds; the decoded tokens are removed again before the next prefill).
Configurations: f16 without flash attention (llama.cpp's CPU default), f16 with it, q8_0 K+V
with it (llama.cpp needs flash attention for a quantized V cache), q8_0 K + q4_0 V with it
(--configs picks; llama.cpp Hadamard-rotates Q/K/V whenever the cache is quantized).
usage: python3 scripts/quality/llamacpp_depth.py [--depths 1024,4096,8192] [--steps 8]
       [--rounds 3] [--json OUT] [--text FILE] [--configs f16,f16+fa,q8_0+fa,q8_0/q4_0+fa]
"""
import argparse
import json
import os
import statistics
import sys
import time

# The shared folder sits next to the repository (../shared from its root), wherever it is.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEF_TEXT = os.path.join(ROOT, "..", "shared", "assets", "corpora", "wikitext-2-raw-test.txt")

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
ap.add_argument("--steps", type=int, default=8)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--json")
ap.add_argument("--depths", default="1024,4096,8192")
ap.add_argument("--repack", choices=["auto", "0", "1"], default="auto",
                help="ggml's extra weight buffers (AMX/repacked); auto = off when the CPU has AMX")
ap.add_argument("--configs", default="f16,f16+fa,q8_0+fa",
                help="comma list of f16, f16+fa, q8_0+fa, q8_0/q4_0+fa")
ap.add_argument("--text", default=DEF_TEXT,
                help="prefill text (default: wikitext-2 test from ../shared next to the repository)")
a = ap.parse_args()
DEPTHS = [int(x) for x in a.depths.split(",")]
if not os.path.isfile(a.text):
    sys.exit(f"llamacpp_depth.py: the prefill text {os.path.normpath(a.text)} is missing; it "
             "comes from the shared folder, ../shared next to the repository (give another file "
             "with --text FILE)")
txt = open(a.text, encoding="utf-8").read(400000)
import llama_cpp  # noqa: E402 (after the checks, so a missing text is reported first)
import llama_cpp.llama_cpp as llama_lib  # noqa: E402


def cpu_has_amx():
    try:
        return "amx_tile" in open("/proc/cpuinfo").read()
    except OSError:
        return False


# --repack auto: off on CPUs with AMX. A GGML_NATIVE libllama built on a Sapphire Rapids class
# Xeon puts the weights in ggml's AMX buffers, and its AMX matmul segfaults in this VM at the
# first prompt batch (gdb: ggml_backend_amx_mul_mat); without the extra buffer types the same
# library runs the plain AVX-512 kernels (tq uses no AMX either). llama-bench: --repack 0.
REPACK = {"auto": not cpu_has_amx(), "1": True, "0": False}[a.repack]
if not REPACK:
    _default_params = llama_lib.llama_model_default_params

    def _no_extra_bufts():
        p = _default_params()
        p.use_extra_bufts = False
        return p

    llama_lib.llama_model_default_params = _no_extra_bufts

CONFIGS = {  # name: (K type, V type, flash attention); a quantized cache is Hadamard-rotated
    "f16": (llama_cpp.GGML_TYPE_F16, llama_cpp.GGML_TYPE_F16, False),
    "f16+fa": (llama_cpp.GGML_TYPE_F16, llama_cpp.GGML_TYPE_F16, True),
    "q8_0+fa": (llama_cpp.GGML_TYPE_Q8_0, llama_cpp.GGML_TYPE_Q8_0, True),
    "q8_0/q4_0+fa": (llama_cpp.GGML_TYPE_Q8_0, llama_cpp.GGML_TYPE_Q4_0, True),
}
res = []
for name in a.configs.split(","):
    tk, tv, fa = CONFIGS[name]
    llm = llama_cpp.Llama(model_path=a.model, n_ctx=max(DEPTHS) + 64, n_batch=512, n_ubatch=512,
                          n_threads=a.threads, n_threads_batch=a.threads, type_k=tk, type_v=tv,
                          flash_attn=fa, verbose=False)
    toks = llm.tokenize(txt.encode(), add_bos=False, special=False)[:max(DEPTHS)]
    n = 0
    for d in DEPTHS:
        t0 = time.time()
        llm.eval(toks[n:d])
        n = d
        pre = time.time() - t0
        rates, cpu = [], []
        for r in range(a.rounds):
            t0, c0 = time.time(), time.process_time()
            for s in range(a.steps):
                llm.eval([1000 + (s * 7 + r) % 20000])
            rates.append(a.steps / (time.time() - t0))
            cpu.append(1e3 * (time.process_time() - c0) / a.steps)
            llm._ctx.kv_cache_seq_rm(-1, d, -1) if hasattr(llm, "_ctx") else None
            llm.n_tokens = d
        row = {"engine": "llama.cpp", "kv": name, "depth": d, "tok_s": statistics.median(rates),
               "cpu_ms": statistics.median(cpu), "prefill_s": pre, "repack": int(REPACK)}
        print(json.dumps(row), flush=True)
        res.append(row)
    del llm
if a.json:
    json.dump(res, open(a.json, "w"), indent=1)
