#!/usr/bin/env python3
"""llamacpp_eval_speed.py -- wall time of `tq kl` (teacher f32 + one scheme) against llama.cpp's
own evaluation of the same windows (llama-cpp-python, logits_all, the f32 KV teacher + the
matching cache type), same BF16 GGUF, same threads, alternated in one run (issue 11, item 6).

    python3 scripts/quality/llamacpp_eval_speed.py -m models/SmolLM2-135M-Instruct.BF16.gguf \\
        -f /usr/share/common-licenses/GPL-3 --chunks 4 --rounds 3 -t 2 --json out/speed.json

Per round, in this order: tq kl (its own timer: model loaded, tokenized; the windows'
evaluation and KL math only), then llama.cpp: for each of the two cache types a context
(n_ctx = ctx, n_batch = ctx, flash attention on) is made once, and the timed part is, per
window and type, kv clear + Llama.eval(window) with logits_all=True (every position's logits
copied out, as Llama.eval does), i.e. the same 2 x chunks window passes tq makes. tq computes
logits for the second half only (that is what it scores); llama.cpp's logits_all computes them
for every position; the script also times llama.cpp with logits only for the second half
("half"), the closest match to tq's work. Ratio = llama.cpp seconds / tq seconds (> 1: tq is
faster). Medians over rounds. Also CPU seconds: the whole tq process (model load and
tokenizing included, so an upper bound) and llama.cpp's timed part (this process's CPU time).
Then `tq ppl --kv SCHEME` (one pass per window; its JSON "seconds") against llama.cpp's
logits_all pass through the matching type alone ("ratio_ppl", and the CPU-time ratio).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np


def tq_run(a):
    import resource
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [a.tq, "kl", "-m", a.model, "-f", a.text, "--ctx", str(a.ctx), "--chunks",
           str(a.chunks), "-t", str(a.threads), "--kv", a.scheme]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"llamacpp_eval_speed: {' '.join(cmd)} failed: {r.stderr[-500:]}")
    m = re.search(r"windows x \d+/2 - 1\), (\d+(?:\.\d+)?) s", r.stdout)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)  # whole process, load included
    return float(m.group(1)), cpu, r.stdout


def tq_ppl_run(a):
    import resource
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [a.tq, "ppl", "-m", a.model, "-f", a.text, "--ctx", str(a.ctx), "--chunks",
           str(a.chunks), "-t", str(a.threads), "--kv", a.scheme, "--json", "-"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"llamacpp_eval_speed: {' '.join(cmd)} failed: {r.stderr[-500:]}")
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    j = json.JSONDecoder().raw_decode(r.stdout[r.stdout.index("{"):])[0]
    return float(j["seconds"]), cpu, r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-f", "--text", required=True)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--scheme", default="rot:q8_0/q4_0", help="tq scheme (besides the teacher)")
    ap.add_argument("--type", default="q8_0/q4_0", help="llama.cpp K/V type (besides f32)")
    ap.add_argument("--tq", default="build/peer/tq")
    ap.add_argument("--json")
    a = ap.parse_args()
    import llama_cpp as L
    k, _, v = a.type.partition("/")
    v = v or k
    text = open(a.text, encoding="utf-8").read()
    mk = lambda tk, tv, la: L.Llama(model_path=a.model, n_ctx=a.ctx, n_batch=a.ctx,
                                    n_ubatch=min(a.ctx, 256), n_threads=a.threads,
                                    n_threads_batch=a.threads, logits_all=la, flash_attn=True,
                                    type_k=tk, type_v=tv, verbose=False)
    llms = [mk(L.GGML_TYPE_F32, L.GGML_TYPE_F32, True),
            mk(getattr(L, "GGML_TYPE_" + k.upper()), getattr(L, "GGML_TYPE_" + v.upper()), True)]
    toks = llms[0].tokenize(text.encode(), add_bos=False, special=False)
    add_bos = llms[0]._model.add_bos_token() if hasattr(llms[0]._model, "add_bos_token") else \
        bool(L.llama_vocab_get_add_bos(llms[0]._model.vocab))
    bos = llms[0].token_bos()
    nw = min(a.chunks, len(toks) // a.ctx)
    wins = []
    for w in range(nw):
        t = list(toks[w * a.ctx:(w + 1) * a.ctx])
        if add_bos:
            t[0] = bos
        wins.append(t)
    half = a.ctx // 2

    def llama_all(which=(0, 1)):
        c0 = time.process_time()
        t0 = time.time()
        for t in wins:
            for i in which:
                llm = llms[i]
                llm.reset()
                llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
                llm.eval(t)
        return time.time() - t0, time.process_time() - c0

    def llama_half():
        # logits for positions >= ctx/2 only: low-level batch, as llamacpp_kl.py does
        c0 = time.process_time()
        t0 = time.time()
        nv = llms[0].n_vocab()
        for t in wins:
            for llm in llms:
                c = llm._ctx.ctx
                L.llama_memory_clear(L.llama_get_memory(c), True)
                b = L.llama_batch_init(a.ctx, 0, 1)
                for s, e, want in ((0, half, 0), (half, a.ctx, 1)):
                    b.n_tokens = e - s
                    for j in range(e - s):
                        b.token[j] = t[s + j]
                        b.pos[j] = s + j
                        b.n_seq_id[j] = 1
                        b.seq_id[j][0] = 0
                        b.logits[j] = want
                    if L.llama_decode(c, b):
                        sys.exit("llamacpp_eval_speed: llama_decode failed")
                np.ctypeslib.as_array(L.llama_get_logits(c), shape=(half * nv,)).copy()
                L.llama_batch_free(b)
        return time.time() - t0, time.process_time() - c0

    rows = []
    for r in range(a.rounds):
        tq_s, tq_cpu, out = tq_run(a)
        la, la_cpu = llama_all()
        lh, lh_cpu = llama_half()
        # tq ppl (one pass per window through the scheme's cache) vs llama.cpp's logits_all
        # pass through the matching type only
        tp_s, tp_cpu, _ = tq_ppl_run(a)
        l1, l1_cpu = llama_all((1,))
        row = {"round": r, "tq_s": tq_s, "llama_logits_all_s": la, "llama_half_s": lh,
               "tq_process_cpu_s": tq_cpu, "llama_logits_all_cpu_s": la_cpu,
               "llama_half_cpu_s": lh_cpu, "tq_ppl_s": tp_s, "tq_ppl_process_cpu_s": tp_cpu,
               "llama_one_type_s": l1, "llama_one_type_cpu_s": l1_cpu}
        print(json.dumps(row), flush=True)
        rows.append(row)
    med = {key: statistics.median(x[key] for x in rows) for key in rows[0] if key != "round"}
    res = {"model": a.model, "text": a.text, "ctx": a.ctx, "windows": nw, "threads": a.threads,
           "tq_scheme": a.scheme, "llama_type": a.type, "passes_per_window": 2,
           "llama_cpp_python": L.__version__, "rounds": rows, "median": med,
           "ratio_logits_all": med["llama_logits_all_s"] / med["tq_s"],
           "ratio_half": med["llama_half_s"] / med["tq_s"],
           "cpu_ratio_logits_all": med["llama_logits_all_cpu_s"] / med["tq_process_cpu_s"],
           "ratio_ppl": med["llama_one_type_s"] / med["tq_ppl_s"],
           "cpu_ratio_ppl": med["llama_one_type_cpu_s"] / med["tq_ppl_process_cpu_s"],
           "tq_last_stdout": out}
    print(f"median: tq kl {med['tq_s']:.1f} s, llama.cpp logits_all {med['llama_logits_all_s']:.1f} s "
          f"(ratio {res['ratio_logits_all']:.2f}), llama.cpp second-half logits "
          f"{med['llama_half_s']:.1f} s (ratio {res['ratio_half']:.2f}); CPU time: tq process "
          f"{med['tq_process_cpu_s']:.1f} s, llama.cpp logits_all {med['llama_logits_all_cpu_s']:.1f} s; "
          f"{nw} windows x 2 passes, {a.threads} threads")
    print(f"median: tq ppl {med['tq_ppl_s']:.1f} s (process CPU {med['tq_ppl_process_cpu_s']:.1f} s), "
          f"llama.cpp logits_all one type {med['llama_one_type_s']:.1f} s (CPU "
          f"{med['llama_one_type_cpu_s']:.1f} s): ratio {res['ratio_ppl']:.2f} wall, "
          f"{res['cpu_ratio_ppl']:.2f} CPU; {nw} windows x 1 pass")
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
