#!/usr/bin/env python3
"""load_test.py -- a bounded load test of OpenAI-compatible servers: `tq serve` and llama.cpp's
llama-server on the same model, threads and slots, in one run.

For each server and each concurrency N in --streams (default 1,2,4,8): N client threads each send
--requests M chat requests (greedy, --max-tokens tokens, ignore_eos where the server takes it),
alternating streaming and plain. Reports: errors, responses that differ from the same prompt's
single-stream answer (lost or mixed-up responses; for tq also any batching effect), p50/p99
latency, p50/p99 time to first token (streaming), aggregate completion tok/s (completion tokens of
all requests / wall time of the level) and its ratio to the single-stream rate. Both servers
run at once and take turns level by level; --rounds R repeats every level R times and reports
medians (interleaved A/B on a shared machine). From tq's /metrics it also prints tq's own
decode-only forward passes by batch size: mean step time and decode tok/s at k sequences, the
batch scaling without HTTP or prefill. Standard library only; loopback only; every loop bounded
in count and time (--timeout per request).

  python3 scripts/serve/load_test.py --tq build/release/tq \\
      --llama-server PATH/llama-server -m models/SmolLM2-135M-Instruct.Q4_1.gguf -t 2 \\
      --max-tokens 32 --requests 2 --streams 1,2,4,8 --rounds 3
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

PROMPTS = [
    "What is the capital of France?", "Name three primary colors.",
    "Write a haiku about the sea.", "What is 12 times 12?",
    "Give one tip for learning to code.", "Why is the sky blue?",
    "List two planets in the solar system.", "What does a compiler do?",
    "Describe a cat in one sentence.", "What is the boiling point of water?",
    "Suggest a name for a small dog.", "What is photosynthesis?",
    "Translate 'good morning' to Spanish.", "What is a prime number?",
    "Tell me a fun fact about owls.", "How many days are in a leap year?",
]


def load_avg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def version_of(path, flag):
    try:
        out = subprocess.run([path, flag], capture_output=True, text=True, timeout=30)
        lines = [x for x in (out.stdout + out.stderr).splitlines() if x.strip()]
        return " | ".join(lines[:2])
    except (OSError, subprocess.TimeoutExpired) as e:
        return repr(e)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_health(port, proc, limit=180):
    t0 = time.time()
    while time.time() - t0 < limit:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %d" % proc.returncode)
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError("server not healthy after %d s" % limit)


def one_request(port, model, prompt, max_tokens, stream, timeout):
    """-> (ok, text, n_tokens, latency_s, ttft_s or None, error)"""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": 0, "stream": stream, "ignore_eos": True}
    if stream:
        body["stream_options"] = {"include_usage": True}
    t0 = time.time()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("POST", "/v1/chat/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return False, "", 0, time.time() - t0, None, "HTTP %d %s" % (r.status, r.read()[:200])
        if not stream:
            o = json.loads(r.read())
            return (True, o["choices"][0]["message"]["content"] or "",
                    o["usage"]["completion_tokens"], time.time() - t0, None, "")
        text, ttft, n_tok, n_chunks, done = [], None, None, 0, False
        buf = b""
        while True:
            line = r.fp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                done = True
                break
            o = json.loads(data)
            if o.get("usage"):
                n_tok = o["usage"]["completion_tokens"]
            for ch in o.get("choices", []):
                d = ch.get("delta", {}).get("content")
                if d:
                    if ttft is None:
                        ttft = time.time() - t0
                    text.append(d)
                    n_chunks += 1
        if not done:
            return False, "", 0, time.time() - t0, None, "stream without [DONE]"
        return True, "".join(text), n_tok if n_tok is not None else n_chunks, \
            time.time() - t0, ttft, ""
    except Exception as e:  # noqa: BLE001 -- every failure is counted and reported
        return False, "", 0, time.time() - t0, None, repr(e)


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def req_timeout(timeout, deadline):
    """the per-request timeout, cut to what is left of the --max-seconds budget (>= 5 s)"""
    return timeout if deadline is None else max(5.0, min(timeout, deadline - time.time()))


def run_level(port, model, n, m, max_tokens, timeout, ref, deadline=None):
    res = []
    lock = threading.Lock()

    def client(ci):
        for k in range(m):
            if deadline is not None and time.time() > deadline:
                return  # out of budget: no new request (the row shows fewer requests)
            pi = (ci * m + k) % len(PROMPTS)
            out = one_request(port, model, PROMPTS[pi], max_tokens, (ci + k) % 2 == 0,
                              req_timeout(timeout, deadline))
            with lock:
                res.append((pi,) + out)

    t0 = time.time()
    th = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.time() - t0
    errors = [r for r in res if not r[1]]
    differ = 0
    for r in res:
        if r[1]:
            if r[0] in ref and ref[r[0]] != r[2]:
                differ += 1
            ref.setdefault(r[0], r[2])
    toks = sum(r[3] for r in res if r[1])
    lat = [r[4] for r in res if r[1]]
    ttft = [r[5] for r in res if r[1] and r[5] is not None]
    return {"streams": n, "requests": len(res), "errors": len(errors),
            "first_error": errors[0][6] if errors else "", "differ": differ,
            "tokens": toks, "wall_s": wall, "tok_s": toks / wall if wall > 0 else 0,
            "p50_s": pct(lat, 50), "p99_s": pct(lat, 99),
            "ttft_p50_s": pct(ttft, 50), "ttft_p99_s": pct(ttft, 99)}


def start_server(name, cmd, port, args):
    print("[%s] %s" % (name, " ".join(cmd)), file=sys.stderr)
    os.makedirs(args.log_dir, exist_ok=True)
    log = open(os.path.join(args.log_dir, "%s.log" % name), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    return {"name": name, "port": port, "proc": proc, "log": log, "ref": {}}


def stop_server(sv):
    sv["proc"].terminate()
    try:
        sv["proc"].wait(timeout=20)
    except subprocess.TimeoutExpired:
        sv["proc"].kill()
    sv["log"].close()


def tq_metrics(port):
    """tq's /metrics -> {(name, seqs label or None): value}"""
    out = {}
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics")
        for line in c.getresponse().read().decode().splitlines():
            if not line or line.startswith("#"):
                continue
            key, val = line.rsplit(" ", 1)
            lab = None
            if "{seqs=" in key:
                key, lab = key.split("{seqs=")
                lab = int(lab.strip('"}'))
            out[(key, lab)] = float(val)
    except OSError:
        pass
    return out


SPLIT = (("decode", "decode-only passes"), ("prompt", "passes with a prompt chunk"),
         ("work", "scheduler work (sampling, detokenizing, publishing)"),
         ("idle", "scheduler idle (no request in a slot)"),
         ("other", "the rest (waiting for the lock, descheduled)"))


def sched_split(m0, m1, wall):
    """where tq's scheduler thread spent one level's wall time, in seconds, from two /metrics
    snapshots (taken just before and after the level, so the idle share includes the clients'
    start and end)"""
    def d(name):
        return m1.get((name, None), 0.0) - m0.get((name, None), 0.0)
    fwd, prompt = d("tq_forward_seconds_total"), d("tq_forward_prompt_seconds_total")
    out = {"decode": fwd - prompt, "prompt": prompt, "work": d("tq_scheduler_work_seconds_total"),
           "idle": d("tq_scheduler_idle_seconds_total")}
    out["other"] = wall - sum(out.values())
    out["prompt_tokens"] = d("tq_prompt_tokens_total")
    out["cached_tokens"] = d("tq_prompt_tokens_cached_total")
    out["passes"] = d("tq_forward_passes_total")
    out["prompt_passes"] = d("tq_forward_prompt_chunks_total")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tq", help="path of the tq binary")
    ap.add_argument("--llama-server", help="path of llama.cpp's llama-server")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=8, help="slots of each server")
    ap.add_argument("--ctx", type=int, default=1024, help="context per slot")
    ap.add_argument("--kv", default="bf16", help="tq's --kv scheme (llama.cpp: f16)")
    ap.add_argument("--weights", help="tq's --weights (default: tq's own, native for block GGUF)")
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--requests", type=int, default=2, help="requests per client per level")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat every level R times, the servers interleaved level by level; "
                         "the table has medians")
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="time budget: no new round starts once the rounds so far, extrapolated "
                         "by one more, would pass it (0 = no budget); the table says how many "
                         "rounds ran")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--llama-extra", default="",
                    help="more llama-server flags, e.g. '--poll 0' on a loaded machine")
    ap.add_argument("--tq-extra", default="",
                    help="more tq serve flags, e.g. '--chunk-decoding 256'")
    ap.add_argument("--log-dir", default="/tmp")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    args.streams = [int(x) for x in args.streams.split(",")]
    t_start = time.time()
    deadline = t_start + args.max_seconds if args.max_seconds else None
    print("# %s  load_test.py %s" % (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                     " ".join(sys.argv[1:])))
    print("# %d CPUs, load average before: %s" % (os.cpu_count() or 0, load_avg()))
    for path, flag in ((args.tq, "version"), (args.llama_server, "--version")):
        if path:
            print("# %s %s: %s" % (path, flag, version_of(path, flag)))
    print()
    servers = []
    try:
        if args.tq:
            p = free_port()
            cmd = [args.tq, "serve", "-m", args.model, "--port", str(p), "-t", str(args.threads),
                   "--parallel", str(args.parallel), "--ctx", str(args.ctx), "--kv", args.kv,
                   "--max-queue", "256", "--alias", "tq-model"]
            if args.weights:
                cmd += ["--weights", args.weights]
            cmd += args.tq_extra.split()
            servers.append(start_server("tq", cmd, p, args))
        if args.llama_server:
            p = free_port()
            servers.append(start_server(
                "llama.cpp", [args.llama_server, "-m", args.model, "--host", "127.0.0.1",
                              "--port", str(p), "-t", str(args.threads), "-tb",
                              str(args.threads), "-np", str(args.parallel), "-c",
                              str(args.ctx * args.parallel), "--alias", "tq-model"] +
                args.llama_extra.split(), p, args))
        for sv in servers:
            wait_health(sv["port"], sv["proc"])
            # warm-up + reference answers: every prompt once, alone
            for pi in range(len(PROMPTS)):
                if deadline is not None and time.time() > deadline:
                    break
                ok, text, *_ = one_request(sv["port"], "tq-model", PROMPTS[pi], args.max_tokens,
                                           False, req_timeout(args.timeout, deadline))
                if ok:
                    sv["ref"][pi] = text
        rows = []
        t_rounds = time.time()
        partial = False
        for rd in range(args.rounds):
            spent = time.time() - t_start
            if rd and args.max_seconds and spent + (time.time() - t_rounds) / rd > args.max_seconds:
                print("[budget] %d of %d rounds run: one more would pass --max-seconds %.0f" %
                      (rd, args.rounds, args.max_seconds), file=sys.stderr)
                print("# --max-seconds %.0f: %d of %d rounds run\n" %
                      (args.max_seconds, rd, args.rounds))
                break
            for n in args.streams:
                for sv in servers:  # interleaved: the servers take turns level by level
                    m0 = tq_metrics(sv["port"]) if sv["name"] == "tq" else None
                    r = run_level(sv["port"], "tq-model", n, args.requests, args.max_tokens,
                                  args.timeout, sv["ref"], deadline)
                    if m0 is not None:
                        r["sched"] = sched_split(m0, tq_metrics(sv["port"]), r["wall_s"])
                    if r["requests"] < n * args.requests:
                        partial = True
                    r["server"], r["round"] = sv["name"], rd
                    rows.append(r)
                    print("[%s] round %d, %d streams: %d req, %d errors, %d differ, %.1f tok/s, "
                          "p50 %.2fs p99 %.2fs, ttft p50 %.2fs p99 %.2fs %s" %
                          (sv["name"], rd, n, r["requests"], r["errors"], r["differ"],
                           r["tok_s"], r["p50_s"], r["p99_s"], r["ttft_p50_s"],
                           r["ttft_p99_s"], r["first_error"]), file=sys.stderr)
        if partial:
            print("# --max-seconds %.0f ran out inside a round: some rows have fewer requests "
                  "(the requests column); compare rows of equal counts\n" % args.max_seconds)
        tqm = tq_metrics(servers[0]["port"]) if args.tq else {}
    finally:
        for sv in servers:
            stop_server(sv)
    med = statistics.median
    print("| server | streams | rounds | requests | errors | differ from 1-stream | tok/s "
          "(median) | x 1-stream (median of rounds) | p50 s | p99 s | TTFT p50 s | TTFT p99 s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    agg = {}
    for sv in servers:
        for n in args.streams:
            rs = [r for r in rows if r["server"] == sv["name"] and r["streams"] == n]
            one = {r["round"]: r["tok_s"] for r in rows
                   if r["server"] == sv["name"] and r["streams"] == args.streams[0]}
            ratio = med([r["tok_s"] / one[r["round"]] for r in rs if one.get(r["round"])] or [0])
            a = {"server": sv["name"], "streams": n, "rounds": len(rs),
                 "requests": sum(r["requests"] for r in rs),
                 "errors": sum(r["errors"] for r in rs), "differ": sum(r["differ"] for r in rs),
                 "tok_s": med([r["tok_s"] for r in rs]), "ratio": ratio,
                 "p50_s": med([r["p50_s"] for r in rs]), "p99_s": med([r["p99_s"] for r in rs]),
                 "ttft_p50_s": med([r["ttft_p50_s"] for r in rs]),
                 "ttft_p99_s": med([r["ttft_p99_s"] for r in rs])}
            agg[(sv["name"], n)] = a
            print("| %s | %d | %d | %d | %d | %d | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f |" %
                  (a["server"], n, a["rounds"], a["requests"], a["errors"], a["differ"],
                   a["tok_s"], a["ratio"], a["p50_s"], a["p99_s"], a["ttft_p50_s"],
                   a["ttft_p99_s"]))
    print()
    top, one = args.streams[-1], args.streams[0]
    for sv in servers:
        a = agg.get((sv["name"], top))
        if a and one == 1:
            print("%s: %d streams give %.2fx its single-stream aggregate tok/s%s" %
                  (sv["name"], top, a["ratio"],
                   " (issue 15's target: >= 3x)" if sv["name"] == "tq" else ""))
    for n in args.streams:
        a, b = agg.get(("tq", n)), agg.get(("llama.cpp", n))
        if a and b and b["tok_s"] > 0:
            print("%d streams: tq/llama.cpp aggregate tok/s %.2f, p99 latency %.2f, TTFT p99 %.2f"
                  % (n, a["tok_s"] / b["tok_s"], a["p99_s"] / b["p99_s"],
                     a["ttft_p99_s"] / b["ttft_p99_s"] if b["ttft_p99_s"] > 0 else float("nan")))
    if any("sched" in r for r in rows):
        print("\ntq: where the scheduler thread's wall time went per level (medians over rounds; "
              "%s):\n" % "; ".join("%s = %s" % kv for kv in SPLIT))
        print("| streams | wall s | " + " | ".join("%s s (%%)" % k for k, _ in SPLIT) +
              " | passes | prompt tokens (cached) |")
        print("|---|---|" + "---|" * len(SPLIT) + "---|---|")
        for n in args.streams:
            rs = [r for r in rows if r["server"] == "tq" and r["streams"] == n and "sched" in r]
            if not rs:
                continue
            w = med([r["wall_s"] for r in rs])
            cells = []
            for k, _ in SPLIT:
                v = med([r["sched"][k] for r in rs])
                cells.append("%.3f (%.0f%%)" % (v, 100 * v / w if w else 0))
            print("| %d | %.2f | %s | %.0f | %.0f (%.0f) |" % (
                n, w, " | ".join(cells), med([r["sched"]["passes"] for r in rs]),
                med([r["sched"]["prompt_tokens"] for r in rs]),
                med([r["sched"]["cached_tokens"] for r in rs])))
    errs = sum(r["errors"] for r in rows)
    print("errors in all: %d; answers that differ from the same prompt answered alone: %s" %
          (errs, ", ".join("%s %d" % (sv["name"], sum(r["differ"] for r in rows
                                                       if r["server"] == sv["name"]))
                           for sv in servers)))
    # tq's own clock of its batched forward passes (decode-only steps, all levels and rounds):
    # the engine's batch scaling without HTTP, clients and prefill in the way
    ks = sorted(k for (name, k) in tqm if name == "tq_decode_steps_total" and k)
    if ks:
        print("\ntq decode-only forward passes (tq serve /metrics):\n")
        print("| sequences per step | steps | mean step ms | decode tok/s | x 1 sequence |")
        print("|---|---|---|---|---|")
        base = None
        for k in ks:
            n_st = tqm[("tq_decode_steps_total", k)]
            secs = tqm.get(("tq_decode_step_seconds_total", k), 0.0)
            if n_st <= 0 or secs <= 0:
                continue
            tps = k * n_st / secs
            base = base or (tps if k == 1 else None)
            print("| %d | %d | %.2f | %.1f | %s |" % (k, n_st, 1e3 * secs / n_st, tps,
                                                   "%.2f" % (tps / base) if base else "-"))
    print("\n# load average after: %s; %.0f s in all" % (load_avg(), time.time() - t_start))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "tq_metrics": {"%s/%s" % k: v for k, v in tqm.items()}},
                      f, indent=1)
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
