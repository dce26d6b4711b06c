#!/usr/bin/env python3
"""make_ref.py -- reference token ids for the tokenizer parity tests (tests/test_tok_parity.c).

Writes into tests/data/tokenizer/:
  <name>.wiki.tqid   ids of the WHOLE WikiText-2 raw test file, fed as ONE string (no chunking),
                     without BOS / special tokens added ("add_special_tokens=False" / add_bos=False).
                     Format: b"TQID", u32 LE count, then zlib(count * u32 LE ids).
  <name>.edge.txt    edge cases, one per line: hex(input UTF-8 bytes) TAB space-separated ids
                     (added/special tokens in the text ARE parsed, as HF tokenizers always does).
References:
  qwen3, llama3  Hugging Face `tokenizers` (PyPI) on ../shared/assets/tokenizers/<name>/tokenizer.json
  smollm2        llama.cpp's tokenizer via `llama_cpp` (PyPI llama-cpp-python) on
                 models/SmolLM2-135M-Instruct.Q4_1.gguf, vocab_only=True, special=False, add_bos=False
                 (edge cases with special=True).
  gemma3         the same for models/gemma-3-270m-q4_k_m.gguf (SentencePiece-style vocabulary).
Usage: python3 scripts/tok_ref/make_ref.py [--shared DIR] [--models DIR] [--only NAME]
"""
import argparse
import hashlib
import os
import struct
import sys
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

EDGE = [
    "",
    " ",
    "   ",
    "\n",
    "\n\n\n",
    "Hello world",
    "Hello, world! How's it going? I'm fine, they'll see.",
    "  leading and trailing spaces  ",
    "tabs\tand\r\nCRLF\r\n",
    "numbers 1 12 123 1234 12345 3.14159 -42",
    "emoji: \U0001F600\U0001F44D\U0001F3FD family \U0001F468\u200D\U0001F469\u200D\U0001F467",
    "CJK: 杜甫 詩集 日本語のテキスト 한국어",
    "accents: café naïve Ōsaka İstanbul ß ſ",
    "Greek αβγ Cyrillic Привет Arabic مرحبا",
    "mixed\u00a0nbsp and \u2003 em space",
    "'S 'T 'RE 'Ve 'll 'D CAPS'LL",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "text<|endoftext|>more",
    "<think>\nreasoning\n</think>\n\nanswer",
    "<unk> @-@ <unk> , = = Heading = =",
    "a" * 3000,
    "x" + "-" * 2000 + "y",
    "supercalifragilisticexpialidocious" * 50,
    "1" * 500,
    " " * 700 + "end",
    "\u0301combining at start, e\u0301 decomposed",
]


def write_ids(path, ids):
    raw = b"".join(struct.pack("<I", i) for i in ids)
    with open(path, "wb") as f:
        f.write(b"TQID" + struct.pack("<I", len(ids)) + zlib.compress(raw, 9))


def write_edge(path, cases):
    with open(path, "w") as f:
        for text, ids in cases:
            f.write(text.encode("utf-8").hex() + "\t" + " ".join(str(i) for i in ids) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    out = os.path.join(ROOT, "tests", "data", "tokenizer")
    os.makedirs(out, exist_ok=True)
    wiki_path = os.path.join(a.shared, "assets", "corpora", "wikitext-2-raw-test.txt")
    wiki_bytes = open(wiki_path, "rb").read()
    wiki = wiki_bytes.decode("utf-8")
    print("wikitext: %d bytes sha256 %s" % (len(wiki_bytes), hashlib.sha256(wiki_bytes).hexdigest()))

    for name in ("qwen3", "llama3"):
        if a.only and a.only != name:
            continue
        from tokenizers import Tokenizer
        import tokenizers
        tk = Tokenizer.from_file(os.path.join(a.shared, "assets", "tokenizers", name, "tokenizer.json"))
        ids = tk.encode(wiki, add_special_tokens=False).ids
        assert tk.decode(ids, skip_special_tokens=False) == wiki
        write_ids(os.path.join(out, name + ".wiki.tqid"), ids)
        edge = [(t, tk.encode(t, add_special_tokens=False).ids) for t in EDGE]
        write_edge(os.path.join(out, name + ".edge.txt"), edge)
        print("%s: %d ids (tokenizers %s)" % (name, len(ids), tokenizers.__version__))

    for name, fname in (("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
                        ("gemma3", "gemma-3-270m-q4_k_m.gguf")):
        if a.only and a.only != name:
            continue
        import llama_cpp
        llm = llama_cpp.Llama(model_path=os.path.join(a.models, fname), vocab_only=True,
                              verbose=False)
        ids = llm.tokenize(wiki_bytes, add_bos=False, special=False)
        assert llm.detokenize(ids) == wiki_bytes
        write_ids(os.path.join(out, name + ".wiki.tqid"), ids)
        edge = [(t, llm.tokenize(t.encode("utf-8"), add_bos=False, special=True)) for t in EDGE]
        write_edge(os.path.join(out, name + ".edge.txt"), edge)
        print("%s: %d ids (llama_cpp %s)" % (name, len(ids), llama_cpp.__version__))


if __name__ == "__main__":
    sys.exit(main())
