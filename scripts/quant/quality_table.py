#!/usr/bin/env python3
"""quality_table.py -- issue 13 item 7: the weight-quantization quality table.

For each model (default: SmolLM2-135M-Instruct Q4_1 and Gemma 3 270M Q4_K_M from models/):
  teacher   = the source GGUF dequantized to f32 (tq quantize --type F32 --dequantize-source);
              `tq teacher --weights f32` dumps its logits on each text (ctx 512, CHUNKS windows);
  candidates, all from that F32 GGUF:
    tq MLX affine g64 RTN at 8/6/4/3/2 bits, without and with --rotate (gemma3: norms written as
      w = the GGUF's 1 + w minus 1; --rotate folds R2 only);
    tq GGUF Q8_0/Q6_K/Q5_K/Q4_K/Q4_0 without and with --rotate (pure: every matrix in the type);
    tq GGUF with --mix llama (llama-quantize's per-tensor layout: Q6_K, Q5_K_M, Q4_K_M, Q4_0);
    llama.cpp's llama-quantize (same file types, no imatrix; its "Q4_K"/"Q5_K" are Q4_K_M/Q5_K_M) as the peer;
  each scored by `tq kl --teacher-dump DUMP -m CANDIDATE --weights f32` (MLX directories written
  from a GGUF have no tokenizer files: `--tokenizer` names the teacher GGUF's): the candidate's weights
  as its file defines them, dequantized to f32 at load (no int8-activation error), f32 KV.
Columns: bits per weight (file bytes * 8 / parameters of the F32 model), file size, KL mean /
p99 against the teacher, top-1, perplexity on the scored positions (second half of each window)
per text, and (--full-ppl, the default with --cuda) the perplexity over the WHOLE text (`tq ppl
--chunks 0 --weights f32 --kv f32`: every window of 512, loss on each second half).
--cuda: every evaluation (teacher dumps, tq kl, tq ppl) on the GPU (`--cuda`: f32 weights as
cuBLAS fp32-pedantic GEMMs, no TF32, an f32 device cache: the CPU's numbers up to f32 summation
order, tests/test_cuda_eval.c); the files are still made on the CPU (--jobs N in parallel, and
the GPU shared by the N jobs). Texts: WikiText-2 raw test (../shared/assets/corpora/wikitext-2-raw-test.txt) and the
GPL-3 (/usr/share/common-licenses/GPL-3). Prints markdown; --json keeps the numbers.

    python3 scripts/quant/quality_table.py [--tq build/release/tq] [--chunks 32] [--out out/qt]
        [--models smol,gemma] [--only affine,gguf,mix,llama,iq4] [--threads 2] [--jobs N]
Rows already measured (their JSON under --out) are reused, so an interrupted run resumes.
--jobs N runs N independent rows at once (each its own processes, 1 thread each; the teacher
dumps first, one job per model x text), with a progress line (rows done, elapsed, ETA from the
mean time of the rows measured in this run) on stderr. The table is the same whatever N is
(every number is deterministic and per row).
iq4: tq's IQ4_NL in llama-quantize's IQ4_NL layout (--mix llama), with and without --rotate,
and llama-quantize's IQ4_NL as the peer (the "llama" group also includes it).
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import threading
import time

MODELS = {
    "smol": ("SmolLM2-135M-Instruct", "models/SmolLM2-135M-Instruct.Q4_1.gguf", True),
    "gemma": ("Gemma 3 270M", "models/gemma-3-270m-q4_k_m.gguf", True),
}
TEXTS = {
    "wiki": "../shared/assets/corpora/wikitext-2-raw-test.txt",
    "gpl3": "/usr/share/common-licenses/GPL-3",
}
GGUF_TYPES = ["Q8_0", "Q6_K", "Q5_K", "Q4_K", "Q4_0"]
MIX_TYPES = ["Q6_K", "Q5_K", "Q4_K", "Q4_0"]  # --mix llama (Q8_0's mix is pure Q8_0)
MIX_NAME = {"Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}  # llama-quantize's names of those file types
AFFINE_BITS = [8, 6, 4, 3, 2]
LLAMA_TYPES = GGUF_TYPES + ["IQ4_NL"]  # llama-quantize's file types of the peer rows


def run(cmd, log):
    t0 = time.time()
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode:
        sys.stderr.write(f"FAILED ({r.returncode}): {' '.join(cmd)} (see {log})\n")
        return False
    sys.stderr.write(f"  {time.time() - t0:6.1f} s  {' '.join(cmd)}\n")
    return True


def size_of(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
                   if f.endswith(".safetensors"))
    return os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tq", default="build/release/tq")
    ap.add_argument("--llama-quantize", default=os.environ.get("LLAMA_QUANTIZE", "llama-quantize"),
                    help="llama.cpp's quantizer (env LLAMA_QUANTIZE; default: on PATH)")
    ap.add_argument("--wiki", default=os.environ.get("WIKI", TEXTS["wiki"]),
                    help="WikiText-2 raw test (env WIKI)")
    ap.add_argument("--gpl3", default=os.environ.get("GPL3", TEXTS["gpl3"]), help="the GPL-3 text (env GPL3)")
    ap.add_argument("--chunks", type=int, default=32)
    ap.add_argument("--chunks-gemma", type=int, default=None, help="windows for Gemma (default --chunks)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="out/quality_table")
    ap.add_argument("--models", default="smol,gemma")
    ap.add_argument("--texts", default="wiki,gpl3")
    ap.add_argument("--only", default="affine,gguf,mix,llama,iq4",
                    help="row groups: affine, gguf (tq, pure types), mix (tq --mix llama), llama, "
                         "iq4 (tq IQ4_NL --mix llama +-rot, llama-quantize IQ4_NL)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="rows measured at once (each with 1 thread when > 1)")
    ap.add_argument("--bits", default="8,6,4,3,2", help="affine bits")
    ap.add_argument("--rot", default="0,1", help="without (0) / with (1) --rotate for tq rows")
    ap.add_argument("--json", default=None)
    ap.add_argument("--cuda", action="store_true", help="evaluate on the GPU (tq ... --cuda)")
    ap.add_argument("--gpu-sessions", type=int, default=1,
                    help="with --cuda: tq ppl --gpu-sessions N (N streams per whole-text ppl)")
    ap.add_argument("--full-ppl", type=int, default=None,
                    help="1: a whole-text ppl column per text (default: 1 with --cuda, else 0)")
    a = ap.parse_args()
    full_ppl = a.full_ppl if a.full_ppl is not None else int(a.cuda)
    dev = ["--cuda"] if a.cuda else []
    os.makedirs(a.out, exist_ok=True)
    TEXTS["wiki"] = a.wiki
    TEXTS["gpl3"] = a.gpl3
    lq = shutil.which(a.llama_quantize)
    only = set(a.only.split(","))
    nice = ["nice", "-n", "5"]
    threads = 1 if a.jobs > 1 else a.threads
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs))
    models = []  # (model key, name, d, f32, n_params, dumps, candidates)
    for mk in a.models.split(","):
        name, src, hf_ok = MODELS[mk]
        if not os.path.exists(src):
            sys.stderr.write(f"skip {name}: no {src}\n")
            continue
        chunks = a.chunks_gemma if (mk == "gemma" and a.chunks_gemma) else a.chunks
        d = os.path.join(a.out, mk)
        os.makedirs(d, exist_ok=True)
        f32 = os.path.join(d, "teacher.F32.gguf")
        if not os.path.exists(f32) and not run(nice + [a.tq, "quantize", "-q", "-m", src, "-o", f32, "--format",
                                                        "gguf", "--type", "F32", "--dequantize-source"],
                                                f32 + ".log"):
            return 1
        n_params = (os.path.getsize(f32)) / 4.0  # f32 bytes / 4 (header and metadata: < 0.1 %)
        dumps = {tk: os.path.join(d, f"teacher_{tk}_{chunks}.dump") for tk in a.texts.split(",")}
        models.append((mk, name, d, f32, n_params, dumps, chunks, hf_ok))
    # the teacher dumps: one job per model x text
    futs = []
    for mk, name, d, f32, n_params, dumps, chunks, hf_ok in models:
        for tk, dump in dumps.items():
            if not os.path.exists(dump):
                futs.append(pool.submit(run, nice + [a.tq, "teacher", "-m", f32, "-f", TEXTS[tk], "--ctx", "512",
                                                     "--chunks", str(chunks), "--weights", "f32", "-t",
                                                     str(threads), "-o", dump] + dev, dump + ".log"))
    if not all(f.result() for f in futs):
        return 1
    rows = []  # (model name, label, group, path, make command, dumps, f32, n_params)
    for mk, name, d, f32, n_params, dumps, chunks, hf_ok in models:
        cands = []  # (label, group, path, make-command or None)
        rots = [int(v) for v in a.rot.split(",")]
        if "affine" in only and hf_ok:
            for rot in rots:
                for b in [int(v) for v in a.bits.split(",")]:
                    p = os.path.join(d, f"mlx{b}g64{'_rot' if rot else ''}")
                    cmd = [a.tq, "quantize", "-q", "-m", f32, "-o", p, "--format", "mlx", "--bits", str(b),
                           "--group", "64", "--force"] + (["--rotate"] if rot else [])
                    cands.append((f"tq MLX affine {b}-bit g64{' +rot' if rot else ''}", "affine", p, cmd))
        mix_types = (MIX_TYPES if "mix" in only else []) + (["IQ4_NL"] if "iq4" in only else [])
        for rot in rots:
            for t in mix_types:
                p = os.path.join(d, f"tq_{t}_mix{'_rot' if rot else ''}.gguf")
                cmd = [a.tq, "quantize", "-q", "-m", f32, "-o", p, "--format", "gguf", "--type", t,
                       "--mix", "llama", "--force"] + (["--rotate"] if rot else [])
                cands.append((f"tq GGUF {MIX_NAME.get(t, t)} (llama mix){' +rot' if rot else ''}", "gguf",
                              p, cmd))
        if "gguf" in only:
            for rot in rots:
                for t in GGUF_TYPES:
                    p = os.path.join(d, f"tq_{t}{'_rot' if rot else ''}.gguf")
                    cmd = [a.tq, "quantize", "-q", "-m", f32, "-o", p, "--format", "gguf", "--type", t,
                           "--force"] + (["--rotate"] if rot else [])
                    cands.append((f"tq GGUF {t}{' +rot' if rot else ''}", "gguf", p, cmd))
        llama_types = (GGUF_TYPES if "llama" in only else []) + \
            (["IQ4_NL"] if "iq4" in only or "llama" in only else [])
        if lq:
            for t in [t for t in LLAMA_TYPES if t in llama_types]:
                p = os.path.join(d, f"llama_{t}.gguf")
                cands.append((f"llama-quantize {MIX_NAME.get(t, t)}", "llama", p,
                              [lq, f32, p, t, str(threads)]))
        for label, grp, p, cmd in cands:
            rows.append((name, label, grp, p, cmd, dumps, chunks, f32, n_params))

    def measure(row):
        name, label, grp, p, cmd, dumps, chunks, f32, n_params = row
        if not os.path.exists(p) and (cmd is None or not run(nice + cmd, p + ".make.log")):
            return None
        r_ = {"model": name, "candidate": label, "group": grp, "path": p, "bytes": size_of(p),
              "bpw": size_of(p) * 8.0 / n_params, "texts": {}}
        for tk, dump in dumps.items():
            j = p + f".{tk}_{chunks}.json"
            if not os.path.exists(j) and not run(
                    nice + [a.tq, "kl", "--teacher-dump", dump, "-m", p, "--weights", "f32", "-t",
                            str(threads), "--json", j] + dev
                    + (["--tokenizer", f32] if grp == "affine" else []), j + ".log"):
                continue
            r = json.load(open(j))
            s = r["schemes"][0]
            r_["texts"][tk] = {"kl_mean": s["kl_mean"], "kl_p99": s["kl_p99"], "top1": s["top1"],
                               "ppl": s["ppl"], "teacher_ppl": r["teacher"]["ppl"],
                               "positions": r["positions"], "windows": r["windows"]}
            if full_ppl:
                fj = p + f".{tk}_full_ppl.json"
                if os.path.exists(fj) or run(
                        nice + [a.tq, "ppl", "-m", p, "-f", TEXTS[tk], "--ctx", "512", "--chunks", "0",
                                "--weights", "f32", "--kv", "f32", "-t", str(threads), "--json", fj] + dev
                        + (["--gpu-sessions", str(a.gpu_sessions)] if a.cuda and a.gpu_sessions > 1 else [])
                        + (["--tokenizer", f32] if grp == "affine" else []), fj + ".log"):
                    f_ = json.load(open(fj))
                    r_["texts"][tk].update({"ppl_full": f_["ppl"], "full_windows": f_["windows"],
                                            "full_scored": f_["scored"]})
        return r_

    lock = threading.Lock()
    t0 = time.time()
    state = {"done": 0, "fresh": 0, "fresh_s": 0.0}

    # the teacher's own whole-text ppl (one row per model, measured with the candidates)
    if full_ppl:
        for mk, name, d, f32, n_params, dumps, chunks, hf_ok in models:
            rows.insert(0, (name, "teacher (source dequantized to f32)", "teacher", f32, None, dumps, chunks, f32,
                            n_params))

    def timed(row):
        fresh = not all(os.path.exists(row[3] + f".{tk}_{row[6]}.json") for tk in row[5])
        t1 = time.time()
        r_ = measure(row)
        with lock:
            state["done"] += 1
            if fresh:
                state["fresh"] += 1
                state["fresh_s"] += time.time() - t1
            left = len(rows) - state["done"]
            eta = (state["fresh_s"] / state["fresh"]) * left / max(1, a.jobs) if state["fresh"] else 0.0
            sys.stderr.write(f"[{state['done']}/{len(rows)} rows, {time.time() - t0:.0f} s elapsed, "
                             f"ETA {eta / 60:.1f} min] {row[0]} {row[1]}\n")
            if r_:
                print_table([r_], a.texts.split(","), partial=True)
        return r_

    results = [r_ for r_ in pool.map(timed, rows) if r_]
    pool.shutdown()
    print_table(results, a.texts.split(","))
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)
    return 0


def print_table(results, texts, partial=False):
    out = sys.stderr if partial else sys.stdout
    if partial:
        r = results[-1]
        out.write(f"  -> {r['model']} {r['candidate']}: " + ", ".join(
            f"{tk} KL {v['kl_mean']:.4g} ppl {v['ppl']:.3f}" for tk, v in r["texts"].items()) + "\n")
        return
    model = None
    for r in results:
        if r["model"] != model:
            model = r["model"]
            t0 = next(iter(r["texts"].values()), None)
            out.write(f"\n**{model}** (teacher: source GGUF dequantized to f32; "
                      + ", ".join(f"{tk}: {v['windows']} x 512 windows, {v['positions']} scored positions, "
                                  f"teacher ppl {v['teacher_ppl']:.3f}"
                                  + (f"; whole text {v['full_windows']} windows, {v['full_scored']} positions"
                                     if "full_windows" in v else "") for tk, v in r["texts"].items())
                      + ")\n\n")
            full = any("ppl_full" in v for x in results for v in x["texts"].values())
            nc = 5 if full else 4
            hdr = "| candidate | bpw | MiB |" + "".join(
                f" KL {tk} | p99 {tk} | top-1 {tk} | ppl {tk} |" + (f" ppl {tk} whole |" if full else "")
                for tk in texts)
            out.write(hdr + "\n|" + "---|" * (3 + nc * len(texts)) + "\n")
        cells = [r["candidate"], f"{r['bpw']:.2f}", f"{r['bytes'] / 1048576:.1f}"]
        for tk in texts:
            v = r["texts"].get(tk)
            c = [f"{v['kl_mean']:.4f}", f"{v['kl_p99']:.3f}", f"{v['top1']:.3f}", f"{v['ppl']:.3f}"] if v \
                else ["-"] * 4
            if full:
                c.append(f"{v['ppl_full']:.3f}" if v and "ppl_full" in v else "-")
            cells += c
        out.write("| " + " | ".join(cells) + " |\n")


if __name__ == "__main__":
    sys.exit(main())
