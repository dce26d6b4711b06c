#!/usr/bin/env python3
"""openai_client.py TQ MODEL -- the `openai` Python package against `tq serve` (a `model` test,
tests/serve.cmake): /health while loading, models, chat, streaming chat, completions, the prompt
cache count, stop, max_completion_tokens, seed, top_k/top_p, logprobs (chat, streamed chat,
completions), presence/frequency penalties, errors, cancellation by a client that goes away.
Exits 77 (skip) when the package or the model is missing. Loopback only; the server is started
and stopped here."""
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

try:
    import openai
except ImportError:
    print("SKIP: the openai package is not installed (pip install openai)")
    sys.exit(77)

tq, model = sys.argv[1], sys.argv[2]
if not os.path.exists(model):
    print("SKIP: %s is missing (scripts/get-model.sh smollm2)" % model)
    sys.exit(77)
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
# --kv bf16: the greedy answers checked below (a reply that repeats itself, so penalties must
# change it) were picked with the unquantized cache; the default cache answers that prompt
# without repeating ('Yes, I am yes.')
proc = subprocess.Popen([tq, "serve", "-m", model, "--port", str(port), "-t", "2", "--parallel",
                         "2", "--ctx", "1024", "--api-key", "k3y", "--alias", "smol",
                         "--kv", "bf16"])
fails = 0


def check(cond, what):
    global fails
    print("%s: %s" % ("ok" if cond else "FAIL", what))
    fails += 0 if cond else 1


def metrics():
    rq = urllib.request.Request("http://127.0.0.1:%d/metrics" % port,
                                headers={"Authorization": "Bearer k3y"})
    body = urllib.request.urlopen(rq, timeout=10).read()
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


try:
    # /health answers 503 {"status":"loading model"} until the model is loaded, then 200; whether
    # a 503 is seen depends on how fast the model loads (reported), anything else fails
    n503, other = 0, []
    for _ in range(3000):
        try:
            if urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2).status == 200:
                break
        except urllib.error.HTTPError as e:
            body = e.read()
            if e.code == 503 and b"loading" in body:
                n503 += 1
            else:
                other.append((e.code, body[:80]))
        except OSError:
            pass
        time.sleep(0.02)
    check(not other, "/health while loading: %d x 503 'loading model', other answers %s" %
          (n503, other))
    c = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="k3y", timeout=120)
    ids = [m.id for m in c.models.list().data]
    check(ids == ["smol"], "models.list -> %s" % ids)
    msgs = [{"role": "user", "content": "What is the capital of France? One word."}]
    r = c.chat.completions.create(model="smol", messages=msgs, max_tokens=16, temperature=0)
    text = r.choices[0].message.content
    check("Paris" in text and r.choices[0].finish_reason in ("stop", "length"),
          "chat: %r (%s)" % (text, r.choices[0].finish_reason))
    check(r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0, "usage %s" % r.usage)
    parts = []
    fin = None
    for ch in c.chat.completions.create(model="smol", messages=msgs, max_tokens=16, temperature=0,
                                        stream=True):
        if ch.choices and ch.choices[0].delta.content:
            parts.append(ch.choices[0].delta.content)
        if ch.choices and ch.choices[0].finish_reason:
            fin = ch.choices[0].finish_reason
    check("".join(parts) == text and fin, "streamed chat equals the plain one: %r" % "".join(parts))
    r = c.completions.create(model="smol", prompt="The capital of France is", max_tokens=8,
                             temperature=0)
    check(r.choices[0].text != "" and r.usage.completion_tokens > 0,
          "completions: %r" % r.choices[0].text)
    # the prompt is a prefix of the last one: its cached tokens are counted
    r2 = c.completions.create(model="smol", prompt="The capital of France is", max_tokens=8,
                              temperature=0)
    check(r2.choices[0].text == r.choices[0].text and
          r2.usage.prompt_tokens_details.cached_tokens > 0,
          "prompt cache: cached_tokens %s" % r2.usage.prompt_tokens_details)
    # sampling fields through the client: stop, max_completion_tokens, seed, top_k/top_p
    # (top_k 1 and top_p 0.01 keep only the most likely token: the greedy answer at any
    # temperature)
    r3 = c.completions.create(model="smol", prompt="The capital of France is", max_tokens=8,
                              temperature=0, stop=["\n"])
    want = r.choices[0].text.split("\n")[0]
    check(r3.choices[0].text == want and r3.choices[0].finish_reason == "stop",
          "stop ['\\n']: %r (%s), want %r" % (r3.choices[0].text, r3.choices[0].finish_reason,
                                             want))
    r3 = c.chat.completions.create(model="smol", messages=msgs, max_completion_tokens=3,
                                   temperature=0)
    check(r3.usage.completion_tokens == 3 and r3.choices[0].finish_reason == "length",
          "max_completion_tokens 3: %d tokens (%s)" % (r3.usage.completion_tokens,
                                                     r3.choices[0].finish_reason))
    sa = [c.chat.completions.create(model="smol", messages=msgs, max_tokens=12, temperature=1.0,
                                    seed=7).choices[0].message.content for _ in range(2)]
    check(sa[0] == sa[1], "seed 7 at temperature 1, twice: %r / %r" % tuple(sa))
    for extra in ({"top_k": 1}, {"top_p": 0.01}):
        kw = {"extra_body": extra} if "top_k" in extra else extra
        r3 = c.chat.completions.create(model="smol", messages=msgs, max_tokens=16,
                                       temperature=1.5, seed=3, **kw)
        check(r3.choices[0].message.content == text,
              "%s at temperature 1.5 = greedy: %r" % (extra, r3.choices[0].message.content))
    # logprobs: chat (content[] with top_logprobs), streamed, and completions
    import math
    r = c.chat.completions.create(model="smol", messages=msgs, max_tokens=8, temperature=0,
                                  logprobs=True, top_logprobs=3)
    lc = r.choices[0].logprobs.content if r.choices[0].logprobs else None
    check(lc is not None and len(lc) == r.usage.completion_tokens and
          all(len(e.top_logprobs) == 3 and e.logprob <= 0 and e.bytes is not None and
              e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob
              for e in lc), "chat logprobs: %d entries with 3 top each" % (len(lc) if lc else -1))
    # greedy: each chosen token is the top-1 of the raw distribution, and its text adds up
    check(lc and all(abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6 for e in lc) and
          "".join(e.token for e in lc) == r.choices[0].message.content,
          "greedy chat: chosen = top-1, tokens join to the content %r" %
          r.choices[0].message.content)
    streamed = []
    for ch in c.chat.completions.create(model="smol", messages=msgs, max_tokens=8, temperature=0,
                                        logprobs=True, top_logprobs=3, stream=True):
        if ch.choices and ch.choices[0].logprobs and ch.choices[0].logprobs.content:
            streamed += ch.choices[0].logprobs.content
    check([(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in lc],
          "streamed chat logprobs equal the plain ones (%d entries)" % len(streamed))
    r = c.completions.create(model="smol", prompt="The capital of France is", max_tokens=6,
                             temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    check(lp is not None and len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) ==
          len(lp.text_offset) == r.usage.completion_tokens and "".join(lp.tokens) ==
          r.choices[0].text and all(len(d) <= 2 for d in lp.top_logprobs) and
          math.fsum(math.exp(v) for v in lp.top_logprobs[0].values()) <= 1 + 1e-6,
          "completions logprobs: %s" % (lp.tokens if lp else None))
    # penalties: a strong frequency penalty changes a greedy answer that repeats itself
    rep = [{"role": "user", "content": "Say 'yes' ten times, separated by spaces."}]
    a = c.chat.completions.create(model="smol", messages=rep, max_tokens=24, temperature=0)
    b = c.chat.completions.create(model="smol", messages=rep, max_tokens=24, temperature=0,
                                  frequency_penalty=2, presence_penalty=1)
    check(a.choices[0].message.content != b.choices[0].message.content,
          "penalties change the answer: %r -> %r" % (a.choices[0].message.content,
                                                      b.choices[0].message.content))
    try:
        c.chat.completions.create(model="smol", messages=msgs, presence_penalty=3)
        check(False, "presence_penalty 3 refused")
    except openai.BadRequestError as e:
        check("presence_penalty" in str(e), "presence_penalty 3 refused: %s" % e)
    try:
        c.chat.completions.create(model="smol", messages=msgs, n=2)
        check(False, "n=2 refused")
    except openai.BadRequestError as e:
        check("n = 1" in str(e), "n=2 refused: %s" % e)
    # a client that disconnects cancels its sequence: a streamed and a plain request of 400
    # tokens, each dropped after its first bytes / a moment; the slots are free again long
    # before 400 tokens could have been generated, and both are counted as cancelled
    import http.client
    import json
    m0 = metrics()
    body = {"model": "smol", "messages": msgs, "max_tokens": 400, "temperature": 0,
            "ignore_eos": True}
    for stream in (True, False):
        body["stream"] = stream
        hc = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        hc.request("POST", "/v1/chat/completions", json.dumps(body),
                   {"Content-Type": "application/json", "Authorization": "Bearer k3y"})
        t0 = time.time()
        if stream:
            resp = hc.getresponse()
            first = resp.fp.readline()
        else:
            time.sleep(0.3)
            first = b"(plain: no answer read)"
        hc.sock.shutdown(socket.SHUT_RDWR)
        hc.close()
        m = metrics()
        while time.time() - t0 < 30 and (m["tq_slots_busy"] > 0 or
                                          m["tq_requests_cancelled_total"] <
                                          m0["tq_requests_cancelled_total"] + 1):
            time.sleep(0.05)
            m = metrics()
        gen = m["tq_tokens_generated_total"] - m0["tq_tokens_generated_total"]
        check(m["tq_slots_busy"] == 0 and m["tq_requests_cancelled_total"] ==
              m0["tq_requests_cancelled_total"] + 1 and gen < 400,
              "%s request dropped by its client (first bytes %r): cancelled after %.2f s, %d "
              "tokens generated, slots busy %d" % ("streamed" if stream else "plain", first[:30],
                                                   time.time() - t0, gen, m["tq_slots_busy"]))
        m0 = m
    bad = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="wrong")
    try:
        bad.models.list()
        check(False, "wrong key refused")
    except openai.AuthenticationError:
        check(True, "wrong key refused with 401")
finally:
    proc.terminate()
    proc.wait(timeout=30)
check(proc.returncode == 0, "tq serve exit status %s" % proc.returncode)
print("%d failed" % fails)
sys.exit(1 if fails else 0)
