#!/usr/bin/env python3
"""ref_logits.py -- llama.cpp reference for tq's engine: final-position logits and greedy
continuations of the fixed prompts in tests/data/llamacpp/prompts.json, through llama.cpp (the
PyPI package llama-cpp-python, built from source).

    python3 scripts/llamacpp/make_f16_gguf.py          # once: models/SmolLM2-135M-Instruct.F16.gguf
    python3 scripts/llamacpp/ref_logits.py             # -> tests/data/llamacpp/smollm2_f16.bin
    python3 scripts/llamacpp/ref_logits.py --model models/SmolLM2-135M-Instruct.BF16.gguf \
        --out tests/data/llamacpp/smollm2_bf16.bin

Tokens: each prompt is tokenized by llama.cpp (no BOS: SmolLM2's GGUF sets add_bos_token=false;
special tokens such as <|im_start|> parsed), and the ids are stored, so tq is compared on exactly
the same token ids (the tokenizer is tested on its own).
llama.cpp runs with an F32 KV cache (type_k = type_v = F32) and n_ctx 2048, so the only rounding
it adds over the weights file is its own matmul arithmetic.

Stored per prompt (the whole vocabulary would be 24 x 49152 x 4 bytes; this is ~100 KB):
  - the token ids;
  - logsumexp of the full final-position logits (float64) and the top-K (K=512) ids + logits (f32);
  - the greedy continuation: N_CONT (48) tokens, argmax each step, ties to the lower id.
KL(llama.cpp || tq) from this: with p = llama.cpp's softmax (exact on the top-K from the stored
logits and logsumexp) and q = tq's full softmax,
  KL = sum_{i in top-K} p_i log(p_i / q_i) + p_tail log(p_tail / q_tail),
the tail (every other token) taken as one bucket. By the log-sum inequality this is <= the
full-vocabulary KL, short of it only by the KL inside the tail, which is bounded by p_tail times
the tail's own divergence; the script prints the largest p_tail so the bound can be judged.

Binary layout (little-endian):
  magic "TQLC", u32 version 1, u32 n_prompts, u32 n_vocab, u32 top_k, u32 n_cont
  per prompt: u32 n_tokens, i32 tokens[n_tokens], f64 logsumexp, i32 top_ids[top_k],
              f32 top_logits[top_k], i32 cont[n_cont]
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

TOP_K = 512
N_CONT = 48


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.F16.gguf")
    ap.add_argument("--prompts", default="tests/data/llamacpp/prompts.json")
    ap.add_argument("--out", default="tests/data/llamacpp/smollm2_f16.bin")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    if not os.path.exists(a.model):
        sys.exit(f"ref_logits: {a.model} not found (run scripts/llamacpp/make_f16_gguf.py)")
    import llama_cpp
    from llama_cpp import Llama

    llm = Llama(model_path=a.model, n_ctx=2048, n_batch=512, n_ubatch=512, n_threads=a.threads,
                n_threads_batch=a.threads, logits_all=False, verbose=False,
                type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    n_vocab = llm.n_vocab()
    prompts = json.load(open(a.prompts, encoding="utf-8"))
    out = bytearray()
    out += b"TQLC" + struct.pack("<5I", 1, len(prompts), n_vocab, TOP_K, N_CONT)
    worst_tail = 0.0
    t0 = time.time()
    for pr in prompts:
        toks = llm.tokenize(pr["text"].encode("utf-8"), add_bos=False, special=True)
        if len(toks) + N_CONT > 2048:
            sys.exit(f"ref_logits: prompt {pr['name']} has {len(toks)} tokens; too long for n_ctx 2048")
        llm.reset()
        llm.eval(toks)
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,)).astype(np.float64)
        m = logits.max()
        lse = m + np.log(np.exp(logits - m).sum())
        order = np.lexsort((np.arange(n_vocab), -logits))[:TOP_K]  # logit desc, then id asc
        p_top = np.exp(logits[order] - lse)
        worst_tail = max(worst_tail, 1.0 - p_top.sum())
        cont = []
        cur = logits
        for _ in range(N_CONT):
            t = int(np.argmax(cur))  # first maximum = lowest id on ties
            cont.append(t)
            llm.eval([t])
            cur = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))
        out += struct.pack("<I", len(toks)) + np.asarray(toks, "<i4").tobytes()
        out += struct.pack("<d", lse) + order.astype("<i4").tobytes()
        out += logits[order].astype("<f4").tobytes() + np.asarray(cont, "<i4").tobytes()
        text = llm.detokenize(cont).decode("utf-8", "replace").replace("\n", "\\n")
        print(f"{pr['name']:14s} {len(toks):5d} tokens  top1 {order[0]:6d}  -> {text[:60]!r}")
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, a.out)
    print(f"{a.out}: {len(prompts)} prompts, {len(out)} bytes, {time.time() - t0:.1f} s; largest "
          f"probability outside the top-{TOP_K}: {worst_tail:.3g}; llama-cpp-python "
          f"{llama_cpp.__version__}")


if __name__ == "__main__":
    main()
