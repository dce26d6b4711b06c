#!/usr/bin/env python3
"""Seed corpus for fuzz/fuzz_tokenizer_json.c: small tokenizer.json documents written by the
`tokenizers` package (a byte-level BPE trained on a few sentences with each pre-tokenizer layout
the loader handles), plus two cut/garbled variants. The GGUF and safetensors seeds are copies of
tests/data/io fixtures (see fuzz/README.md).

usage: python3 scripts/io_ref/make_fuzz_seeds.py   (from the repository root)
"""
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

OUT = "fuzz/corpus/tokenizer_json"
TEXT = ["Hello, world! The quick brown fox jumps over the lazy dog 12345.",
        "été 日本語 naïve café  tabs\tand\nnewlines", "<|im_start|>user hi<|im_end|>"] * 20
SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def train(pre, norm=None, name="x"):
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre
    if norm is not None:
        t.normalizer = norm
    t.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    t.train_from_iterator(TEXT, tr)
    s = t.to_str()
    with open(f"{OUT}/{name}.json", "w") as f:
        f.write(s)
    return s


def main():
    a = train(pre_tokenizers.ByteLevel(add_prefix_space=False), name="bytelevel_bpe")
    train(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
          norm=normalizers.NFC(), name="split_sequence_nfc")
    with open(f"{OUT}/truncated.json", "w") as f:
        f.write(a[: len(a) // 2])
    with open(f"{OUT}/wrong_types.json", "w") as f:
        f.write(a.replace('"merges":[', '"merges":[7,'))


if __name__ == "__main__":
    main()
