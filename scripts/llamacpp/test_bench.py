#!/usr/bin/env python3
"""test_bench.py -- bench.py's arithmetic against fake engines (fast test, no model, no llama.cpp):
a fake `llama-bench` (JSON as llama-bench -o json prints it, tok/s by flash attention and depth,
three repetitions scaled 1.0 / 1.2 / 0.9 in turn) and a fake `tq bench --json`. Checks the
arguments bench.py passes, the medians, that each cell's ratio is taken against the faster flash
attention setting (--llama-fa best), the single-setting mode, the peer line and the weight-buffer
line; and that the shell scripts that call it parse (bash -n). Exit 0 = pass.

    python3 scripts/llamacpp/test_bench.py
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

FAKE_LLAMA = r'''#!/usr/bin/env python3
import json, os, sys
a = sys.argv[1:]
log = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")
with open(log, "a") as f:
    f.write(" ".join(a) + "\n")
if "--version" in a:
    print("version: 9.9.9 (build 1, commit fake123)")
    sys.exit(0)
def arg(flag, default):
    return a[a.index(flag) + 1] if flag in a else default
if "-v" in a:
    sys.stderr.write("load_tensors:          AMX model buffer size =    95.34 MiB\n"
                     "load_tensors:   CPU_Mapped model buffer size =    92.10 MiB\n")
assert arg("-o", "") == "json" and arg("-b", "") == "512" and arg("-ub", "") == "512", a
p, n, fas = int(arg("-p", "512")), int(arg("-n", "128")), arg("-fa", "auto").split(",")
depths = [int(x) for x in arg("-d", "0").split(",")]
cnt = os.path.join(os.path.dirname(log), "count")
k = int(open(cnt).read()) if os.path.exists(cnt) else 0
open(cnt, "w").write(str(k + 1))
reps = int(arg("-r", "5"))
scales = [[1.0, 1.2, 0.9][(k + i) % 3] for i in range(reps)]
TS = {("pp", "on"): 900.0, ("pp", "off"): 600.0, ("tg0", "on"): 130.0, ("tg0", "off"): 110.0,
      ("tg512", "on"): 50.0, ("tg512", "off"): 80.0}
out = []
for fa in fas:
    for d in depths:
        if p:
            out.append({"build_commit": "fake123", "n_prompt": p, "n_gen": 0, "n_depth": d,
                        "flash_attn": int(fa == "on"), "samples_ts": [TS[("pp", fa)] * x for x in scales]})
        if n:
            out.append({"build_commit": "fake123", "n_prompt": 0, "n_gen": n, "n_depth": d,
                        "flash_attn": int(fa == "on"), "samples_ts": [TS[("tg%d" % d, fa)] * x for x in scales]})
print(json.dumps(out))
'''

FAKE_TQ = r'''#!/usr/bin/env python3
import json, os, sys
RUNS = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tq_runs")).read()
a = sys.argv[1:]
assert a[0] == "bench" and "--json" in a and a[a.index("--runs") + 1] == RUNS, a
assert a[a.index("--kv") + 1] == "bf16" and a[a.index("--weights") + 1] == "native", a
print("engine chatter")
print(json.dumps({"prefill_tok_s": 1000.0, "decode_tok_s": {"0": 120.0, "512": 100.0},
                  "kernel": "Q4_1 fake", "peak_rss_mb": 1.0}))
'''


def write_exe(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


def run(tmp, *extra, tq_runs="1"):
    with open(os.path.join(tmp, "tq_runs"), "w") as f:
        f.write(tq_runs)
    for f in ("count", "calls.log"):
        p = os.path.join(tmp, f)
        if os.path.exists(p):
            os.remove(p)
    cmd = [sys.executable, os.path.join(HERE, "bench.py"), "--llama-bin", tmp, "--tq",
           os.path.join(tmp, "tq"), "--models", os.path.join(tmp, "m.Q4_1.gguf"), "--threads", "1",
           "--depths", "0,512", "--runs", "3"] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    rows = json.loads([l for l in r.stdout.splitlines() if l.startswith("JSON ")][-1][5:])
    return r.stdout, {row["metric"]: row for row in rows}


def near(x, y):
    return abs(x - y) < 1e-6 * max(1.0, abs(y))


def main():
    fails = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            fails.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        write_exe(os.path.join(tmp, "llama-bench"), FAKE_LLAMA)
        write_exe(os.path.join(tmp, "tq"), FAKE_TQ)
        with open(os.path.join(tmp, "m.Q4_1.gguf"), "wb") as f:
            f.write(b"GGUF" + bytes(64))
        out, rows = run(tmp)
        # medians of 1.0/1.2/0.9 x the base = the base; FA best picks on for pp and depth 0, off at 512
        check(near(rows["prefill"]["llama_tok_s"], 900.0) and rows["prefill"]["llama_fa"] == "on",
              "prefill: median 900 tok/s with fa on (off: 600)")
        check(near(rows["decode@0"]["llama_tok_s"], 130.0) and rows["decode@0"]["llama_fa"] == "on",
              "decode@0: median 130 tok/s with fa on (off: 110)")
        check(near(rows["decode@512"]["llama_tok_s"], 80.0) and rows["decode@512"]["llama_fa"] == "off",
              "decode@512: median 80 tok/s with fa off (on: 50)")
        check(near(rows["prefill"]["ratio"], 1000.0 / 900.0) and near(rows["decode@0"]["ratio"], 120.0 / 130.0)
              and near(rows["decode@512"]["ratio"], 100.0 / 80.0), "ratios against the faster setting")
        check(sorted(rows["decode@0"]["llama_runs"]["off"]) == sorted([110.0, 132.0, 99.0]),
              "every repetition kept (fa off decode@0: 110, 132, 99)")
        check(rows["decode@0"]["llama_runs"]["on"] != rows["decode@0"]["llama_runs"]["off"],
              "fa on and off runs kept apart")
        check("fake123" in out and "peer: llama.cpp llama-bench" in out, "peer line names the binary and build")
        check("AMX 95.34 MiB, CPU_Mapped 92.10 MiB" in out, "weight buffers line from llama-bench -v")
        calls = open(os.path.join(tmp, "calls.log")).read().splitlines()
        timed = [c for c in calls if "-v" not in c.split() and "--version" not in c]
        check(len(timed) == 3 * 2, "3 runs x (prefill, decode) llama-bench processes")
        check(all("-r 1" in c and "-fa on,off" in c for c in timed)
              and any("-p 0 -n 32 -d 0,512" in c for c in timed)
              and any("-p 512 -n 0 -d 0" in c for c in timed), "llama-bench arguments")
        out, rows = run(tmp, "--llama-fa", "on")
        check(near(rows["decode@512"]["llama_tok_s"], 50.0) and rows["decode@512"]["llama_fa"] == "on",
              "--llama-fa on: decode@512 against fa on (50 tok/s)")
        out, rows = run(tmp, "--cell-runs", tq_runs="3")
        calls = [c for c in open(os.path.join(tmp, "calls.log")).read().splitlines()
                 if "-v" not in c.split() and "--version" not in c]
        check(len(calls) == 2 and all("-r 3" in c for c in calls)
              and near(rows["decode@512"]["llama_tok_s"], 80.0)
              and sorted(rows["prefill"]["llama_runs"]["on"]) == sorted([900.0, 1080.0, 810.0]),
              "--cell-runs: one llama-bench pair with -r 3, tq bench --runs 3, same medians")
    root = os.path.dirname(os.path.dirname(HERE))
    for sh in ("scripts/llamacpp/native_table.sh", "scripts/llamacpp/llama_bench_crosscheck.sh",
               "scripts/serve/proof.sh"):
        r = subprocess.run(["bash", "-n", os.path.join(root, sh)], capture_output=True, text=True)
        check(r.returncode == 0, f"bash -n {sh} {r.stderr.strip()}")
    if fails:
        sys.exit(f"test_bench.py: {len(fails)} check(s) failed")
    print("test_bench.py: all checks passed")


if __name__ == "__main__":
    main()
