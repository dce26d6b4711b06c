#!/usr/bin/env python3
"""bench.py -- tokenizer encode speed on the whole WikiText-2 raw test file: `tq tokenize --count`
(C, load time excluded) against Hugging Face tokenizers / llama.cpp (llama_cpp) on the same text,
interleaved per repetition; prints the median of --reps runs and the ratio.
Usage: python3 scripts/tok_ref/bench.py --tq build/release/tq [--reps 5]"""
import argparse
import os
import re
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tq", default=os.path.join(ROOT, "build", "release", "tq"))
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    shared = os.path.join(ROOT, "..", "shared", "assets")
    wiki = os.path.join(shared, "corpora", "wikitext-2-raw-test.txt")
    text = open(wiki, encoding="utf-8").read()
    data = open(wiki, "rb").read()
    cases = []
    from tokenizers import Tokenizer
    for name in ("qwen3", "llama3"):
        path = os.path.join(shared, "tokenizers", name, "tokenizer.json")
        tk = Tokenizer.from_file(path)
        cases.append((name, path, "HF tokenizers",
                      lambda tk=tk: tk.encode(text, add_special_tokens=False)))
    try:
        import llama_cpp
        for name, f in (("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
                        ("gemma3", "gemma-3-270m-q4_k_m.gguf")):
            path = os.path.join(ROOT, "models", f)
            if os.path.exists(path):
                llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
                cases.append((name, path, "llama.cpp",
                              lambda llm=llm: llm.tokenize(data, add_bos=False, special=False)))
    except ImportError:
        pass
    for name, path, ref, fn in cases:
        ours, theirs = [], []
        for _ in range(a.reps):
            out = subprocess.run([a.tq, "tokenize", "-t", path, "-f", wiki, "--count"],
                                 capture_output=True, text=True, check=True).stdout
            ours.append(float(re.search(r"([0-9.]+) ms", out).group(1)))
            t0 = time.perf_counter()
            fn()
            theirs.append(1e3 * (time.perf_counter() - t0))
        mo, mt = statistics.median(ours), statistics.median(theirs)
        print("%-8s tq %7.1f ms   %-14s %7.1f ms   ratio %.2fx  (%.1f MB/s)"
              % (name, mo, ref, mt, mt / mo, len(data) / mo / 1e3))


if __name__ == "__main__":
    main()
