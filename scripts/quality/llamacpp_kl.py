#!/usr/bin/env python3
"""llamacpp_kl.py -- llama.cpp's KL of each KV-cache type against its own f32-KV teacher, on
exactly the windows and scored positions `tq kl` uses (src/model/eval.c), through llama-cpp-python
built from source (see docs/results.md, "KV quality vs llama.cpp (rotated)", for the recipe).

    python3 scripts/quality/llamacpp_kl.py -m models/SmolLM2-135M-Instruct.BF16.gguf \\
        -f ../shared/assets/corpora/wikitext-2-raw-test.txt --ctx 512 --chunks 12 \\
        --json out/kl_llama.json --md out/kl_llama.md

Windows (as tq_eval_kl): the whole text is tokenized once, without BOS and without parsing
special tokens; window w is tokens[w*ctx, (w+1)*ctx) with its first token replaced by BOS when
the model asks for BOS (Gemma 3 does, SmolLM2 does not); the first `chunks` windows are used.
Scored: positions i = ctx/2 .. ctx-2 of each window (ctx/2 - 1 per window), the logits at i
against the teacher's logits at i, full vocabulary, KL(teacher || type) in float64.
Tokens: by default the ids come from `tq tokenize --ids` (the same tokenizer `tq kl` uses) and
llama.cpp's own tokenization of the text must give the same ids on every token the windows use,
else the script stops and names the first difference (--tokens llama skips tq).

Each type gets its own llama.cpp context (n_ctx = ctx, flash attention on for every context,
teacher included: a quantized V cache needs it). The first ctx/2 tokens of a window are decoded
in one batch without logits, the rest in batches of --out-batch with logits (only the output
buffer size depends on it). llama.cpp rotates Q/K/V with a Hadamard transform whenever a cache
type is quantized (head dim a multiple of 64); a type written with the suffix "-norot" is run
with LLAMA_ATTN_ROT_DISABLE=1 set while its context is made (the unrotated control).
Bits per KV element: f32 32, f16 16, q8_0 8.5, q5_0 5.5, q4_0 4.5, iq4_nl 4.5 (mean of K and V).
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

import numpy as np

BITS = {"f32": 32.0, "f16": 16.0, "bf16": 16.0, "q8_0": 8.5, "q5_0": 5.5, "q5_1": 6.0,
        "q4_0": 4.5, "q4_1": 5.0, "iq4_nl": 4.5}
DEFAULT_TYPES = ("q8_0/q8_0,q8_0/q5_0,q8_0/q4_0,q5_0/q5_0,iq4_nl/iq4_nl,q4_0/q4_0,f16,"
                 "q8_0/q4_0-norot,q4_0/q4_0-norot")


def parse_type(spec):
    """'q8_0/q4_0' | 'q4_0' | 'q8_0/q4_0-norot' -> (name, k, v, rot_disabled)"""
    norot = spec.endswith("-norot")
    body = spec[:-len("-norot")] if norot else spec
    k, _, v = body.partition("/")
    v = v or k
    for t in (k, v):
        if t not in BITS:
            sys.exit(f"llamacpp_kl: unknown cache type '{t}' in '{spec}' (valid: {', '.join(BITS)})")
    name = (k if k == v else f"{k}/{v}") + (" norot" if norot else "")
    return name, k, v, norot


def tq_tokens(tq, model, text):
    r = subprocess.run([tq, "tokenize", "-t", model, "-f", text, "--ids"], capture_output=True,
                       text=True)
    if r.returncode:
        sys.exit(f"llamacpp_kl: '{tq} tokenize' failed: {r.stderr.strip()}")
    return [int(x) for x in r.stdout.split()]


class Engine:
    def __init__(self, path, threads):
        import llama_cpp as L
        self.L = L
        L.llama_backend_init()
        # llama.cpp's log: warnings and errors only (the rotation switch is a warning)
        self._log = L.llama_log_callback(
            lambda level, text, user: sys.stderr.write(text.decode("utf-8", "replace"))
            if level in (3, 4) else None)
        L.llama_log_set(self._log, ctypes.c_void_p(0))
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = L.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            sys.exit(f"llamacpp_kl: llama.cpp cannot load '{path}'")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.add_bos = bool(L.llama_vocab_get_add_bos(self.vocab))
        self.bos = L.llama_vocab_bos(self.vocab)
        self.threads = threads

    def tokenize(self, text):
        L = self.L
        b = text.encode("utf-8")
        cap = len(b) + 16
        buf = (L.llama_token * cap)()
        n = L.llama_tokenize(self.vocab, b, len(b), buf, cap, False, False)
        if n < 0:
            sys.exit("llamacpp_kl: llama_tokenize buffer too small")
        return list(buf[:n])

    def context(self, k, v, norot, ctx, ubatch):
        L = self.L
        cp = L.llama_context_default_params()
        cp.n_ctx = ctx
        cp.n_batch = ctx
        cp.n_ubatch = ubatch
        cp.n_seq_max = 1
        cp.n_threads = cp.n_threads_batch = self.threads
        cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_ENABLED
        cp.type_k = getattr(L, "GGML_TYPE_" + k.upper())
        cp.type_v = getattr(L, "GGML_TYPE_" + v.upper())
        cp.no_perf = True
        old = os.environ.pop("LLAMA_ATTN_ROT_DISABLE", None)
        if norot:
            os.environ["LLAMA_ATTN_ROT_DISABLE"] = "1"
        c = L.llama_init_from_model(self.model, cp)
        os.environ.pop("LLAMA_ATTN_ROT_DISABLE", None)
        if old is not None:
            os.environ["LLAMA_ATTN_ROT_DISABLE"] = old
        if not c:
            sys.exit(f"llamacpp_kl: llama.cpp cannot make a context with K {k}, V {v}")
        return c

    def window(self, c, toks, first, out_batch):
        """decode toks (one fresh sequence); return logits of positions first.. as float32 rows"""
        L = self.L
        L.llama_memory_clear(L.llama_get_memory(c), True)
        n = len(toks)
        batch = L.llama_batch_init(n, 0, 1)
        rows = []
        try:
            spans = [(0, first, False)] + [(s, min(s + out_batch, n), True)
                                          for s in range(first, n, out_batch)]
            for s, e, want in spans:
                if e <= s:
                    continue
                batch.n_tokens = e - s
                for j in range(e - s):
                    batch.token[j] = toks[s + j]
                    batch.pos[j] = s + j
                    batch.n_seq_id[j] = 1
                    batch.seq_id[j][0] = 0
                    batch.logits[j] = 1 if want else 0
                rc = L.llama_decode(c, batch)
                if rc:
                    sys.exit(f"llamacpp_kl: llama_decode returned {rc}")
                if want:
                    p = L.llama_get_logits(c)
                    a = np.ctypeslib.as_array(p, shape=((e - s) * self.n_vocab,))
                    rows.append(a.reshape(e - s, self.n_vocab).copy())
        finally:
            L.llama_batch_free(batch)
        return np.concatenate(rows, axis=0)


def log_softmax64(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))


def pct(a, p):
    return float(np.percentile(a, 100.0 * p)) if len(a) else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True, help="GGUF (the same file tq reads)")
    ap.add_argument("-f", "--text", required=True)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=12, help="windows (0 = all)")
    ap.add_argument("--types", default=DEFAULT_TYPES, help="comma list; K/V or one type for both; "
                    "suffix -norot = LLAMA_ATTN_ROT_DISABLE=1 (default: %(default)s)")
    ap.add_argument("--teacher", default="f32")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--tq", default="build/peer/tq", help="tq binary for the token ids")
    ap.add_argument("--tokens", choices=["tq", "llama"], default="tq",
                    help="whose ids to use (tq: also assert llama.cpp's are identical)")
    ap.add_argument("--out-batch", type=int, default=64)
    ap.add_argument("--first", type=int, default=0, help="evaluate windows first .. chunks-1 only "
                    "(split a run over processes; --merge joins the parts)")
    ap.add_argument("--merge", nargs="+", metavar="PART.json",
                    help="join --json files of the same run made with --first (no evaluation)")
    ap.add_argument("--json")
    ap.add_argument("--md")
    a = ap.parse_args()
    if a.merge:
        return merge(a)
    if a.ctx < 4 or a.ctx % 2:
        sys.exit("llamacpp_kl: --ctx must be even and >= 4")
    types = [parse_type(s) for s in a.types.split(",") if s]
    teacher = parse_type(a.teacher)
    eng = Engine(a.model, a.threads)
    text = open(a.text, encoding="utf-8").read()
    ids_l = eng.tokenize(text)
    if a.tokens == "tq":
        ids = tq_tokens(a.tq, a.model, a.text)
    else:
        ids = ids_l
    avail = len(ids) // a.ctx
    nw = min(a.chunks, avail) if a.chunks > 0 else avail
    if nw < 1:
        sys.exit(f"llamacpp_kl: {len(ids)} tokens are fewer than one window of {a.ctx}")
    used = nw * a.ctx
    same = ids_l[:used] == ids[:used]
    if a.tokens == "tq" and not same:
        d = next(i for i in range(used) if i >= len(ids_l) or ids_l[i] != ids[i])
        sys.exit(f"llamacpp_kl: token ids differ at index {d}: tq {ids[d:d + 8]} vs llama.cpp "
                 f"{ids_l[d:d + 8]} (use --tokens llama to run on llama.cpp's ids anyway)")
    print(f"llamacpp_kl: {a.text}: {len(ids)} tokens (llama.cpp: {len(ids_l)}; the {used} used "
          f"are {'identical' if same else 'NOT identical'}), {nw} windows of {a.ctx}, "
          f"bos {'%d' % eng.bos if eng.add_bos else 'none'}", file=sys.stderr, flush=True)
    half = a.ctx // 2
    ns = half - 1
    ub = min(a.ctx, 256)
    tctx = eng.context(teacher[1], teacher[2], teacher[3], a.ctx, ub)
    ctxs = [eng.context(k, v, nr, a.ctx, ub) for _, k, v, nr in types]
    kls = [[] for _ in types]
    agree = [0] * len(types)
    nll = [0.0] * (len(types) + 1)
    t0 = time.time()
    secs = [0.0] * (len(types) + 1)
    for w in range(a.first, nw):
        toks = list(ids[w * a.ctx:(w + 1) * a.ctx])
        if eng.add_bos:
            toks[0] = eng.bos
        nxt = np.asarray(ids[w * a.ctx + half + 1:(w + 1) * a.ctx], dtype=np.int64)
        ts = time.time()
        tl = eng.window(tctx, toks, half, a.out_batch)[:ns]
        secs[-1] += time.time() - ts
        # teacher log-probs, kept in float32 (a window of Gemma's 262k vocabulary is 267 MB)
        tlp32 = np.empty(tl.shape, dtype=np.float32)
        tam = tl.argmax(axis=1)
        for r in range(0, ns, 32):
            lp = log_softmax64(tl[r:r + 32])
            tlp32[r:r + 32] = lp
            nll[-1] -= float(lp[np.arange(lp.shape[0]), nxt[r:r + 32]].sum())
        del tl
        for k, c in enumerate(ctxs):
            ts = time.time()
            sl = eng.window(c, toks, half, a.out_batch)[:ns]
            secs[k] += time.time() - ts
            agree[k] += int((sl.argmax(axis=1) == tam).sum())
            for r in range(0, ns, 32):
                lq = log_softmax64(sl[r:r + 32])
                lpt = tlp32[r:r + 32].astype(np.float64)
                kl = (np.exp(lpt) * (lpt - lq)).sum(axis=1)
                kls[k].extend(np.maximum(kl, 0.0).tolist())
                nll[k] -= float(lq[np.arange(lq.shape[0]), nxt[r:r + 32]].sum())
        el = time.time() - t0
        print(f"\rllamacpp_kl: window {w + 1}/{nw}, {el:.0f} s elapsed, ~"
              f"{el / (w + 1 - a.first) * (nw - w - 1):.0f} s left  ", end="", file=sys.stderr,
              flush=True)
    print("", file=sys.stderr)
    n = (nw - a.first) * ns
    import llama_cpp
    res = {"engine": "llama.cpp via llama-cpp-python " + llama_cpp.__version__,
           "model": a.model, "text": a.text, "text_bytes": os.path.getsize(a.text), "ctx": a.ctx,
           "windows": nw - a.first, "first_window": a.first, "positions": n, "threads": a.threads, "tokens": a.tokens,
           "tokens_identical": same, "flash_attn": True,
           "teacher": {"kv": teacher[0], "ppl": float(np.exp(nll[-1] / n)), "seconds": secs[-1]},
           "seconds": time.time() - t0, "types": []}
    for k, (name, kt, vt, nr) in enumerate(types):
        x = np.asarray(kls[k])
        res["types"].append({"kv": name, "k": kt, "v": vt, "rotated": (not nr) and (
            kt in ("q8_0", "q5_0", "q5_1", "q4_0", "q4_1", "iq4_nl") or
            vt in ("q8_0", "q5_0", "q5_1", "q4_0", "q4_1", "iq4_nl")),
            "bits_per_elem": (BITS[kt] + BITS[vt]) / 2, "kl_mean": float(x.mean()),
            "kl_median": pct(x, 0.5), "kl_p95": pct(x, 0.95), "kl_p99": pct(x, 0.99),
            "kl_max": float(x.max()), "top1": agree[k] / n, "ppl": float(np.exp(nll[k] / n)),
            "seconds": secs[k], "kl_all": [float(v) for v in x],
            "agree": agree[k], "nll_sum": nll[k]})
    res["teacher"]["nll_sum"] = nll[-1]
    write(a, res)
    for c in ctxs + [tctx]:
        eng.L.llama_free(c)


def stats(res):
    """fill the summary fields from kl_all / agree / nll_sum"""
    n = res["positions"]
    res["teacher"]["ppl"] = float(np.exp(res["teacher"]["nll_sum"] / n))
    for t in res["types"]:
        x = np.asarray(t["kl_all"])
        t.update({"kl_mean": float(x.mean()), "kl_median": pct(x, 0.5), "kl_p95": pct(x, 0.95),
                  "kl_p99": pct(x, 0.99), "kl_max": float(x.max()), "top1": t["agree"] / n,
                  "ppl": float(np.exp(t["nll_sum"] / n))})


def merge(a):
    parts = sorted((json.load(open(f)) for f in a.merge), key=lambda r: r["first_window"])
    res = parts[0]
    for p in parts[1:]:
        if p["first_window"] != res["first_window"] + res["windows"] or p["model"] != res["model"] \
                or p["text"] != res["text"] or [t["kv"] for t in p["types"]] != [t["kv"] for t in res["types"]]:
            sys.exit("llamacpp_kl: --merge parts are not consecutive windows of one run")
        res["windows"] += p["windows"]
        res["positions"] += p["positions"]
        res["seconds"] += p["seconds"]
        res["teacher"]["nll_sum"] += p["teacher"]["nll_sum"]
        res["teacher"]["seconds"] += p["teacher"]["seconds"]
        for t, u in zip(res["types"], p["types"]):
            t["kl_all"] += u["kl_all"]
            t["agree"] += u["agree"]
            t["nll_sum"] += u["nll_sum"]
            t["seconds"] += u["seconds"]
    stats(res)
    write(a, res)


def write(a, res):
    n, nw = res["positions"], res["windows"]
    lines = [f"llama.cpp ({res['engine']}), {os.path.basename(res['model'])}, "
             f"{os.path.basename(res['text'])}, {nw} windows x {res['ctx']} from window "
             f"{res['first_window']} ({n} positions), teacher {res['teacher']['kv']} KV (ppl "
             f"{res['teacher']['ppl']:.4f}), flash attention on, {res['threads']} threads", "",
             "| type (K/V) | rotated | bits/elem | KL mean | median | p95 | top-1 | ppl |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for t in res["types"]:
        lines.append(f"| {t['kv']} | {'yes' if t['rotated'] else 'no'} | {t['bits_per_elem']:g} | "
                     f"{t['kl_mean']:.5f} | {t['kl_median']:.5f} | {t['kl_p95']:.5f} | "
                     f"{t['top1']:.4f} | {t['ppl']:.4f} |")
    md = "\n".join(lines) + "\n"
    print(md)
    if a.json:
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(res, f, indent=1)
        os.replace(tmp, a.json)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)


if __name__ == "__main__":
    main()
