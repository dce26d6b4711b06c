#!/usr/bin/env python3
"""gguf_variants.py -- extra parity checks of the GGUF tokenizer paths against llama.cpp, on GGUF
vocabularies built here (not committed; written to a temporary directory):
  qwen3-gguf   the Qwen3 tokenizer.json as GGUF metadata, tokenizer.ggml.pre = "qwen2"
  llama3-gguf  the Llama 3 tokenizer.json as GGUF metadata, tokenizer.ggml.pre = "llama-bpe"
  gemma3-sp    Gemma 3's SentencePiece vocabulary with add_space_prefix = true (Llama 2 style)
Each is tokenized by llama.cpp (llama_cpp, vocab_only, add_bos=False, special=False) and by
`tq tokenize --ids` on the whole WikiText-2 raw test file and on make_ref.py's edge strings.
Usage: python3 scripts/tok_ref/gguf_variants.py --tq build/release/tq"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader, GGUFWriter, GGUFValueType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_ref import EDGE  # noqa: E402


def base_writer(path, arch="llama"):
    w = GGUFWriter(path, arch)
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    return w


def from_json(name, pre, path):
    j = json.load(open(os.path.join(ROOT, "..", "shared", "assets", "tokenizers", name,
                                    "tokenizer.json")))
    vocab = j["model"]["vocab"]
    n = max(max(vocab.values()), max(a["id"] for a in j["added_tokens"])) + 1
    toks = ["[PAD%d]" % i for i in range(n)]
    types = [5] * n
    for t, i in vocab.items():
        toks[i] = t
        types[i] = 1
    for a in j["added_tokens"]:
        toks[a["id"]] = a["content"]
        types[a["id"]] = 3 if a["special"] else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    w = base_writer(path)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gemma_sp(path):
    r = GGUFReader(os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
    f = r.fields
    toks = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8", "surrogateescape")
            for i in f["tokenizer.ggml.tokens"].data]
    scores = [float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0])
             for i in f["tokenizer.ggml.token_type"].data]
    w = base_writer(path)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_add_bos_token(False)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tq_ids(tq, gguf, data, special):
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        cmd = [tq, "tokenize", "-t", gguf, "-f", f.name, "--ids"] + (["--special"] if special else [])
        out = subprocess.run(cmd, capture_output=True, check=True).stdout.decode()
    return [int(x) for x in out.split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tq", default=os.path.join(ROOT, "build", "release", "tq"))
    a = ap.parse_args()
    import llama_cpp
    wiki = open(os.path.join(ROOT, "..", "shared", "assets", "corpora",
                             "wikitext-2-raw-test.txt"), "rb").read()
    with tempfile.TemporaryDirectory() as d:
        variants = [("qwen3-gguf", lambda p: from_json("qwen3", "qwen2", p)),
                    ("llama3-gguf", lambda p: from_json("llama3", "llama-bpe", p))]
        if os.path.exists(os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")):
            variants.append(("gemma3-sp", gemma_sp))
        for name, make in variants:
            path = os.path.join(d, name + ".gguf")
            make(path)
            llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
            want = llm.tokenize(wiki, add_bos=False, special=False)
            got = tq_ids(a.tq, path, wiki, False)
            first = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), None)
            ok_wiki = got == want
            n_edge = 0
            bad = []
            for t in EDGE:
                if not t:
                    continue
                b = t.encode()
                w2 = llm.tokenize(b, add_bos=False, special=True)
                g2 = tq_ids(a.tq, path, b, True)
                n_edge += 1
                if g2 != w2:
                    bad.append((t[:30], g2[:12], w2[:12]))
            print("%-12s wikitext %d tokens (llama.cpp %d): %s; edge %d/%d identical"
                  % (name, len(got), len(want), "identical" if ok_wiki else
                     "FIRST MISMATCH at %s" % first, n_edge - len(bad), n_edge))
            for x in bad:
                print("   differs:", x)


if __name__ == "__main__":
    main()
