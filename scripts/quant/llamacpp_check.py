#!/usr/bin/env python3
"""llamacpp_check.py -- stock llama.cpp loads a GGUF written by `tq quantize` (rotated and
quantized) and its logits match tq's engine on the same file.

    python3 scripts/quant/llamacpp_check.py --model /tmp/smol_rot_q4k.gguf [--prompts 8]
        [--tq-test build/release/tests/test_llamacpp] [--weights f32]

Steps: (1) scripts/llamacpp/ref_logits.py runs llama.cpp (PyPI llama-cpp-python, built from
source) on the first N prompts of tests/data/llamacpp/prompts.json: token ids, final-position
top-512 logits + logsumexp, 48-token greedy continuation (F32 KV cache, n_ctx 2048); (2) the
test_llamacpp binary runs tq's engine on the same file and token ids and prints, per prompt,
KL(llama.cpp || tq) (top-512 + tail bucket, a lower bound of the full KL), top-1 agreement and
the length of the common greedy prefix. The summary line is printed at the end; the exit code
is test_llamacpp's (its thresholds: top-1 same on every prompt, mean KL < 1e-3, greedy >= 32
tokens on >= 3/4 of the prompts).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tq-test", default="build/release/tests/test_llamacpp")
    ap.add_argument("--weights", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--keep", default=None, help="keep llama.cpp's reference here")
    a = ap.parse_args()
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("SKIP: llama_cpp (llama-cpp-python) is not installed")
        return 77
    prompts = json.load(open("tests/data/llamacpp/prompts.json"))[: a.prompts]
    with tempfile.TemporaryDirectory() as d:
        pj = os.path.join(d, "prompts.json")
        json.dump(prompts, open(pj, "w"))
        ref = a.keep or os.path.join(d, "ref.bin")
        subprocess.run([sys.executable, "scripts/llamacpp/ref_logits.py", "--model", a.model,
                        "--prompts", pj, "--out", ref], check=True)
        r = subprocess.run([a.tq_test, "--model", a.model, "--data", ref, "--weights",
                            a.weights], capture_output=True, text=True)
        print(r.stdout + r.stderr)
        return r.returncode


if __name__ == "__main__":
    sys.exit(main())
