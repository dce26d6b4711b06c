#!/usr/bin/env python3
"""make_ref.py -- reference token ids for the tokenizer parity tests (tests/test_tok_parity.c).

Writes into tests/data/tokenizer/:
  <name>.wiki.tqid   ids of the WHOLE WikiText-2 raw test file, fed as ONE string (no chunking),
                     without BOS / special tokens added ("add_special_tokens=False" / add_bos=False).
                     Format: b"TQID", u32 LE count, then zlib(count * u32 LE ids).
  <name>.rand.txt    150 seeded random strings (random_strings(): scripts, whitespace, digits,
                     emoji sequences, combining marks, special-token spellings), same format
  chat.txt           chat templates rendered by Jinja2 (configured as transformers does) from the
                     real templates (qwen3/llama3 tokenizer_config.json, SmolLM2's GGUF), per line:
                     name TAB add_generation_prompt (2 = with enable_thinking=False) TAB n TAB
                     (role TAB hex(content)) x n TAB hex(text)
  <name>.edge.txt    edge cases, one per line: hex(input UTF-8 bytes) TAB space-separated ids TAB
                     hex(the reference's decode of those ids, special tokens rendered)
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
    "<|" * 500,
    "'" * 1001,
    "\r\n" * 600,
    " \t" * 400 + "x",
    "a" + "\u0301\u0323" * 300,
    "\u6f22\u5b57" * 300,
]


def random_strings(n=150, seed=20261129):
    """Seeded random strings mixing scripts, whitespace, digits, punctuation, emoji sequences,
    combining marks and special-token spellings (differential test, <name>.rand.txt)."""
    import random
    rng = random.Random(seed)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "0123456789", "     ", "\n\n\t\r", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
        "\u00e9\u00e8\u00fc\u00f1\u00df\u00c5\u00e6\u00f8\u0153\u0142\u017c\u0107",
        "\u0301\u0308\u0327\u0303\u0323\u030a", "\u03b1\u03b2\u03b3\u03a9\u03c9\u03ac",
        "\u043f\u0440\u0438\u0432\u0435\u0442\u0416\u042f", "\u6f22\u5b57\u65e5\u672c\u8a9e\u4e2d\u6587",
        "\u3042\u3044\u30ab\u30bf\u30ab\u30ca", "\ud55c\uad6d\uc5b4\u1100\u1161\u11a8",
        "\u0645\u0631\u062d\u0628\u0627", "\u0928\u092e\u0938\u094d\u0924\u0947",
        "\u00a0\u2003\u2009\u3000\u200b\u2028", "\uff21\uff22\uff11\uff12\uff01",
        "\u2013\u2014\u2019\u201c\u201d\u2026\u00b0\u20ac\u00a3",
    ]
    seqs = ["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200D\U0001F469\u200D\U0001F467",
            "\u2764\uFE0F", "\U0001F1EB\U0001F1F7", "'s", "'LL", "'ve", " 's", "<|im_start|>",
            "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<|eot_id|>",
            "<|begin_of_text|>", "<start_of_turn>", "<unk>", "@-@", " = = ", "1234567", "    "]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 30)):
            if rng.random() < 0.15:
                parts.append(rng.choice(seqs))
            else:
                pool = rng.choice(pools)
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 6))))
        out.append("".join(parts))
    return out


CHATS = [
    [("user", "Hello!")],
    [("system", "You are terse."), ("user", "What is 2+2?")],
    [("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello. How can I help?"),
     ("user", "Name a prime number.")],
    [("user", "  padded content with spaces \n\n")],
    [("user", "Emoji \U0001F600 and CJK \u6f22\u5b57 and a <tag>")],
    [("user", "first"), ("assistant", "second"), ("user", "third")],
    [("user", "q1"), ("assistant", "<think>\nreason A\n</think>\n\nanswer A"), ("user", "q2")],
    [("user", "q"), ("assistant", "<think>\nR\n\n</think>\n\n\nfinal")],
    [("user", "q"), ("assistant", "plain answer")],
    [("user", "call it"), ("assistant", "calling"), ("tool", "42"), ("tool", "43")],
]


def render_chats(name, template, bos):
    """Rendered chats with Jinja2 set up as transformers does (trim_blocks, lstrip_blocks)."""
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    tmpl = env.from_string(template)
    lines = []
    for chat in CHATS:
        for gen in (1, 0, 2):  # 2: generation prompt with enable_thinking=False
            msgs = [{"role": r, "content": c} for r, c in chat]
            extra = {"enable_thinking": False} if gen == 2 else {}
            text = tmpl.render(messages=msgs, add_generation_prompt=bool(gen), bos_token=bos,
                               eos_token="", tools=None, **extra)
            cols = [name, str(gen), str(len(chat))]
            for r, c in chat:
                cols += [r, c.encode().hex()]
            cols.append(text.encode().hex())
            lines.append("\t".join(cols))
    return lines


def llama_detokenize(llm, ids):
    """llama.cpp's llama_detokenize() with a buffer large enough (Llama.detokenize truncates
    pieces longer than 32 bytes); special tokens rendered, nothing removed."""
    import ctypes
    import llama_cpp
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    cap = 64 * len(ids) + 64
    buf = ctypes.create_string_buffer(cap)
    n = llama_cpp.llama_detokenize(llm._model.vocab, arr, len(ids), buf, cap, False, True)
    assert n >= 0
    return buf.raw[:n]


def write_ids(path, ids):
    raw = b"".join(struct.pack("<I", i) for i in ids)
    with open(path, "wb") as f:
        f.write(b"TQID" + struct.pack("<I", len(ids)) + zlib.compress(raw, 9))


def write_edge(path, cases):
    with open(path, "w") as f:
        for text, ids, back in cases:
            f.write(text.encode("utf-8").hex() + "\t" + " ".join(str(i) for i in ids) + "\t" +
                    back.hex() + "\n")


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
        edge = []
        for t in EDGE:
            e = tk.encode(t, add_special_tokens=False).ids
            edge.append((t, e, tk.decode(e, skip_special_tokens=False).encode("utf-8")))
        write_edge(os.path.join(out, name + ".edge.txt"), edge)
        rand = []
        for t in random_strings():
            e = tk.encode(t, add_special_tokens=False).ids
            rand.append((t, e, tk.decode(e, skip_special_tokens=False).encode("utf-8")))
        write_edge(os.path.join(out, name + ".rand.txt"), rand)
        print("%s: %d ids (tokenizers %s)" % (name, len(ids), tokenizers.__version__))

    for name, fname in (("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
                        ("gemma3", "gemma-3-270m-q4_k_m.gguf")):
        if a.only and a.only != name:
            continue
        import llama_cpp
        llm = llama_cpp.Llama(model_path=os.path.join(a.models, fname), vocab_only=True,
                              verbose=False)
        ids = llm.tokenize(wiki_bytes, add_bos=False, special=False)
        assert llama_detokenize(llm, ids) == wiki_bytes
        write_ids(os.path.join(out, name + ".wiki.tqid"), ids)
        edge = []
        for t in EDGE:
            e = llm.tokenize(t.encode("utf-8"), add_bos=False, special=True)
            edge.append((t, e, llama_detokenize(llm, e)))
        write_edge(os.path.join(out, name + ".edge.txt"), edge)
        rand = []
        for t in random_strings():
            e = llm.tokenize(t.encode("utf-8"), add_bos=False, special=True)
            rand.append((t, e, llama_detokenize(llm, e)))
        write_edge(os.path.join(out, name + ".rand.txt"), rand)
        print("%s: %d ids (llama_cpp %s)" % (name, len(ids), llama_cpp.__version__))

    if a.only in (None, "chat"):
        import json
        from gguf import GGUFReader
        lines = []
        for name in ("qwen3", "llama3"):
            cfg = json.load(open(os.path.join(a.shared, "assets", "tokenizers", name,
                                              "tokenizer_config.json")))
            bos = cfg.get("bos_token") or ""
            lines += render_chats(name, cfg["chat_template"], bos if isinstance(bos, str) else "")
        r = GGUFReader(os.path.join(a.models, "SmolLM2-135M-Instruct.Q4_1.gguf"))
        f = r.fields["tokenizer.chat_template"]
        lines += render_chats("smollm2", bytes(f.parts[f.data[0]]).decode(), "<|im_start|>")
        with open(os.path.join(out, "chat.txt"), "w") as fo:
            fo.write("\n".join(lines) + "\n")
        print("chat: %d rendered conversations" % len(lines))


if __name__ == "__main__":
    sys.exit(main())
