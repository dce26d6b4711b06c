#!/usr/bin/env python3
"""openai_client.py TQ MODEL -- the `openai` Python package against `tq serve` (a `model` test,
tests/serve.cmake): models, chat, streaming chat, completions, an error. Exits 77 (skip) when the
package or the model is missing. Loopback only; the server is started and stopped here."""
import os
import socket
import subprocess
import sys
import time
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
proc = subprocess.Popen([tq, "serve", "-m", model, "--port", str(port), "-t", "2", "--parallel",
                         "2", "--ctx", "1024", "--api-key", "k3y", "--alias", "smol"])
fails = 0


def check(cond, what):
    global fails
    print("%s: %s" % ("ok" if cond else "FAIL", what))
    fails += 0 if cond else 1


try:
    for _ in range(600):
        try:
            if urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2).status == 200:
                break
        except OSError:
            time.sleep(0.2)
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
    try:
        c.chat.completions.create(model="smol", messages=msgs, n=2)
        check(False, "n=2 refused")
    except openai.BadRequestError as e:
        check("n = 1" in str(e), "n=2 refused: %s" % e)
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
