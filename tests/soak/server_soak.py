"""Soak test of `deepinfer serve`: rounds of many concurrent, seeded-random requests against one
server on the embedded default model, then checks that nothing was lost or kept.

    .venv/bin/python tests/soak/server_soak.py --requests 2000 --rounds 2 --concurrency 64
    (--prefix-caching off: the KV bytes must also be back at exactly 0; --bin PATH: a
    `deepinfer` executable other than the installed one)

The mix: chat and completions, streaming and not, prompts of 1..300 words (half behind one of a
few shared system prompts, so the prefix cache hits), random sampling settings (temperature,
top-k/p, min-p, penalties, seeds, stop strings, n up to 3, logprobs), structured outputs
(response_format json_schema / json_object, guided_regex, guided_grammar) and invalid ones,
invalid requests of several kinds, and clients that go away at random points: right after the
headers, after a few stream events, while a non-streaming answer is generated, or halfway
through sending their body. The server runs with a KV pool small enough to preempt.

Checks: every request that was not abandoned got a complete, well-formed answer (status 200,
`n` choices each with finish_reason stop or length, streams ending with [DONE], structured
text matching its schema) or an OpenAI-shaped error (`{"error": {"message", "type"}}`, 4xx);
nothing hung; after each round /metrics shows no request running or waiting, no KV block in
use (with prefix caching off: no KV byte either), and at most the one connection we poll with;
preemptions happened; the server's resident memory after the last round is within the
tolerance of its level after the first (the first round fills pools, prefix snapshots up to
--prefix-cache-bytes and allocator arenas).

tests/e2e/test_soak.py runs a short version under pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
from conftest import Server, metrics  # noqa: E402  (the e2e tests' server starter)

WORDS = ("light darkness heaven earth water firmament seed fruit night day the and of in was "
         "God said let there be good evening morning first tree grass herb sea land stars sun "
         "moon").split()
SYSTEM = [f"System {k}: " + " ".join(random.Random(100 + k).choice(WORDS) for _ in range(40 + 15 * k))
          for k in range(4)]

JSON_OK_N = {"type": "object",
             "properties": {"ok": {"type": "boolean"},
                            "n": {"type": "integer", "minimum": 0, "maximum": 99}},
             "required": ["ok", "n"]}
REGEX = "[A-Z][a-z]{2,8} [0-9]{1,3}"
GRAMMAR = 'root ::= ("yes" | "no") " " [0-9]'


@dataclass
class Req:
    i: int
    path: str
    body: bytes
    stream: bool
    n: int = 1
    expect_error: bool = False  # must be answered with a 4xx OpenAI error
    leave: str = ""  # "", "headers", "events", "waiting", "body": how the client goes away
    leave_after: float = 0.0  # events (stream) or seconds (waiting)
    check: str = ""  # "json_ok_n", "json", "regex", "grammar": how to check stopped text
    what: str = ""


def make_request(rng: random.Random, i: int, model: str) -> Req:
    tail = " ".join(rng.choice(WORDS) for _ in range(rng.choice([1, 4, 10, 30, 60, 120, 200])))
    system = rng.choice(SYSTEM) if rng.random() < 0.5 else ""
    chat = rng.random() < 0.5
    path = "/v1/chat/completions" if chat else "/v1/completions"
    stream = rng.random() < 0.6
    body: dict = {"model": model, "stream": stream, "max_tokens": rng.randint(1, 24)}
    if chat:
        body["messages"] = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": tail}]
    else:
        body["prompt"] = (system + " " + tail).strip()
    body["temperature"] = rng.choice([0, 0.3, 0.8, 1.0, 1.5])
    if rng.random() < 0.4:
        body["top_p"] = rng.choice([0.5, 0.9, 0.99])
    if rng.random() < 0.3:
        body["top_k"] = rng.choice([1, 5, 50, -1])
    if rng.random() < 0.2:
        body["min_p"] = rng.choice([0.02, 0.1])
    if rng.random() < 0.15:
        body["presence_penalty"] = rng.choice([-1.0, 0.5, 2.0])
    if rng.random() < 0.15:
        body["frequency_penalty"] = rng.choice([-0.5, 1.5])
    if rng.random() < 0.1:
        body["repetition_penalty"] = rng.choice([0.8, 1.3])
    if rng.random() < 0.6:
        body["seed"] = rng.randrange(1 << 31)
    if rng.random() < 0.2:
        body["stop"] = rng.choice([["the"], ["e", "a"], [" and", "God"]])
    if rng.random() < 0.1:
        body["ignore_eos"] = True
    if rng.random() < 0.15:
        if chat:
            body["logprobs"] = True
            body["top_logprobs"] = rng.randint(0, 3)
        else:
            body["logprobs"] = rng.randint(0, 3)
    n = 1
    if body["temperature"] > 0 and rng.random() < 0.15:
        n = rng.randint(2, 3)
        body["n"] = n
    if stream and rng.random() < 0.3:
        body["stream_options"] = {"include_usage": True}
    r = Req(i, path, b"", stream, n, what=("chat" if chat else "completion") +
            (" stream" if stream else ""))

    kind = rng.random()
    if kind < 0.12:  # structured outputs, valid
        body["max_tokens"] = 48
        body.pop("stop", None)
        body.pop("ignore_eos", None)
        pick = rng.randrange(4)
        if pick == 0 and chat:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "x", "schema": JSON_OK_N}}
            r.check = "json_ok_n"
        elif pick == 1 and chat:
            body["response_format"] = {"type": "json_object"}
            r.check = "json"
        elif pick == 2:
            body["guided_regex"] = REGEX
            r.check = "regex"
        else:
            body["guided_grammar"] = GRAMMAR
            r.check = "grammar"
        r.what += " structured " + r.check
    elif kind < 0.15:  # structured outputs that do not compile: 400
        r.expect_error = True
        key, value = rng.choice([("guided_regex", "([a-z"),
                                 ("guided_grammar", "root ::= undefined_rule"),
                                 ("guided_json", {"type": "object", "properties": 5})])
        body[key] = value
        r.what += " invalid structured"
    elif kind < 0.24:  # invalid requests
        r.expect_error = True
        bad = rng.randrange(9)
        if bad == 0:
            r.body = b'{"model": "' + model.encode() + b'", "prompt": "x", oops'
            r.what += " malformed JSON"
            r.stream = False
            return r
        fields = [("temperature", 9), ("n", 0), ("max_tokens", -1), ("top_p", 0),
                  ("model", "no-such-model"), ("logprobs", 50), ("top_k", -7),
                  ("messages" if chat else "prompt", [] if chat else 12.5)]
        key, value = fields[bad - 1]
        body[key] = value
        r.what += f" invalid {key}={value!r}"
    r.body = json.dumps(body).encode()
    if not r.expect_error and rng.random() < 0.18:
        if stream:
            r.leave = rng.choice(["headers", "events", "events", "body"])
            r.leave_after = rng.randint(1, 6)
        else:
            r.leave = rng.choice(["waiting", "body"])
            r.leave_after = rng.uniform(0.0, 0.3)
        if r.leave in ("events", "waiting"):
            body["max_tokens"] = 200  # long enough to be mid-generation when the client leaves
            body["ignore_eos"] = True
            body.pop("stop", None)
            r.body = json.dumps(body).encode()
    return r


def text_ok(check: str, text: str) -> bool:
    if check in ("json_ok_n", "json"):
        try:
            v = json.loads(text)
        except ValueError:
            return False
        if check == "json":
            return isinstance(v, dict)
        return (isinstance(v, dict) and isinstance(v.get("ok"), bool)
                and isinstance(v.get("n"), int) and 0 <= v["n"] <= 99)
    if check == "regex":
        return re.fullmatch(REGEX, text) is not None
    if check == "grammar":
        return re.fullmatch(r"(yes|no) [0-9]", text) is not None
    return True


class Failure(AssertionError):
    pass


def expect(cond: bool, req: Req, why: str) -> None:
    if not cond:
        raise Failure(f"request {req.i} ({req.what}): {why}")


def check_error(req: Req, status: int, text: str) -> None:
    expect(400 <= status < 500, req, f"status {status} for an invalid request: {text[:200]}")
    try:
        err = json.loads(text)["error"]
    except (ValueError, KeyError, TypeError):
        raise Failure(f"request {req.i} ({req.what}): not an OpenAI error: {text[:200]}")
    expect(isinstance(err.get("message"), str) and err["message"], req, "error without message")
    expect(isinstance(err.get("type"), str), req, "error without type")


def context_too_long(req: Req, status: int, text: str) -> bool:
    """A prompt (after the chat template) plus max_tokens over --max-model-len: a correct 400
    with code context_length_exceeded, checked for its shape."""
    if status != 400 or "context_length_exceeded" not in text:
        return False
    check_error(req, status, text)
    expect(json.loads(text)["error"].get("code") == "context_length_exceeded", req, text[:200])
    return True


def choice_text(req: Req, c: dict) -> str:
    if req.path.endswith("chat/completions"):
        return c["message"].get("content") or ""
    return c["text"]


def check_whole(req: Req, status: int, text: str) -> None:
    expect(status == 200, req, f"status {status}: {text[:300]}")
    body = json.loads(text)
    choices = body["choices"]
    expect(sorted(c["index"] for c in choices) == list(range(req.n)), req,
           f"choices {[c['index'] for c in choices]} for n = {req.n}")
    for c in choices:
        expect(c["finish_reason"] in ("stop", "length"), req, f"finish {c['finish_reason']}")
        if req.check and c["finish_reason"] == "stop":
            t = choice_text(req, c)
            expect(text_ok(req.check, t), req, f"structured text does not match: {t!r}")
    u = body["usage"]
    expect(u["prompt_tokens"] > 0 and u["total_tokens"] == u["prompt_tokens"] + u[
        "completion_tokens"], req, f"usage {u}")


def check_stream(req: Req, lines: list[str]) -> None:
    expect(lines and lines[-1] == "data: [DONE]", req, f"stream did not end with [DONE]: {lines[-3:]}")
    finish: dict[int, str] = {}
    texts: dict[int, str] = {}
    for line in lines[:-1]:
        ev = json.loads(line[6:])
        expect("error" not in ev, req, f"error event {ev}")
        for c in ev.get("choices", []):
            k = c["index"]
            expect(k not in finish, req, f"choice {k} continued after its finish")
            if req.path.endswith("chat/completions"):
                texts[k] = texts.get(k, "") + (c.get("delta", {}).get("content") or "")
            else:
                texts[k] = texts.get(k, "") + (c.get("text") or "")
            if c.get("finish_reason"):
                finish[k] = c["finish_reason"]
    expect(sorted(finish) == list(range(req.n)), req, f"finished choices {sorted(finish)}")
    for k, f in finish.items():
        expect(f in ("stop", "length"), req, f"finish {f}")
        if req.check and f == "stop":
            expect(text_ok(req.check, texts.get(k, "")), req,
                   f"structured text does not match: {texts.get(k)!r}")


async def raw_leave(port: int, req: Req) -> str:
    """Sends the request over a raw socket and goes away: halfway through the body, or after
    `leave_after` seconds of waiting for a whole answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (f"POST {req.path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(req.body)}\r\n\r\n").encode()
    if req.leave == "body":
        writer.write(head + req.body[: len(req.body) // 2])
    else:
        writer.write(head + req.body)
    await writer.drain()
    await asyncio.sleep(req.leave_after)
    writer.transport.abort()  # a reset, as a killed client leaves
    return "left"


async def run_one(http: httpx.AsyncClient, url: str, port: int, req: Req) -> str:
    if req.leave in ("waiting", "body"):
        return await raw_leave(port, req)
    headers = {"content-type": "application/json"}
    if not req.stream:
        r = await http.post(url + req.path, content=req.body, headers=headers)
        if req.expect_error:
            check_error(req, r.status_code, r.text)
            return "error"
        if context_too_long(req, r.status_code, r.text):
            return "too_long"
        check_whole(req, r.status_code, r.text)
        return "ok"
    async with http.stream("POST", url + req.path, content=req.body, headers=headers) as r:
        if req.expect_error:
            await r.aread()
            check_error(req, r.status_code, r.text)
            return "error"
        if r.status_code != 200:
            await r.aread()
            if context_too_long(req, r.status_code, r.text):
                return "too_long"
            expect(False, req, f"status {r.status_code}: {r.text[:300]}")
        if req.leave == "headers":
            return "left"  # leaving the block closes the connection
        lines: list[str] = []
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            lines.append(line)
            if req.leave == "events" and len(lines) >= req.leave_after:
                return "left"
            if line == "data: [DONE]":
                break
        check_stream(req, lines)
        return "ok"


async def drive(server: Server, reqs: list[Req], concurrency: int, timeout: float) -> dict:
    counts: dict[str, int] = {}
    queue: asyncio.Queue = asyncio.Queue()
    for r in reqs:
        queue.put_nowait(r)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(timeout)) as http:
        async def worker():
            while True:
                try:
                    r = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                out = await run_one(http, server.url, server.port, r)
                counts[out] = counts.get(out, 0) + 1

        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), timeout)
    return counts


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def wait_idle(url: str, timeout: float = 60) -> dict:
    end = time.time() + timeout
    m: dict = {}
    while time.time() < end:
        m = metrics(url)
        if (m["deepinfer:num_requests_running"] == 0 and m["deepinfer:num_requests_waiting"] == 0
                and m["deepinfer:kv_cache_blocks_in_use"] == 0
                and m["deepinfer:http_open_connections"] <= 1):
            return m
        time.sleep(0.1)
    raise AssertionError(f"the server did not become idle: {m}")


def soak(requests: int, rounds: int, concurrency: int, seed: int, prefix_caching: bool,
         rss_tolerance_mib: float = 24.0, timeout: float = 900, binary: str | None = None,
         log=print) -> dict:
    args = ["--max-num-seqs", "32", "--num-kv-blocks", "160", "--kv-block-size", "16",
            "--max-model-len", "512", "--max-num-batched-tokens", "128",
            "--max-waiting", "100000"]
    args += ["--prefix-cache-bytes", str(16 << 20)] if prefix_caching else [
        "--no-enable-prefix-caching"]
    if binary:
        os.environ["DEEPINFER_SERVE_BIN"] = binary  # conftest's Server starts this one
    s = Server(*args)
    summary: dict = {"rounds": []}
    try:
        rss = [rss_mib(s.pid)]
        log(f"server soak: {requests} requests x {rounds} rounds, concurrency {concurrency}, "
            f"seed {seed}, prefix caching {'on' if prefix_caching else 'off'}; "
            f"RSS at start {rss[0]:.1f} MiB")
        for rnd in range(rounds):
            rng = random.Random(seed)  # every round the same requests
            reqs = [make_request(rng, i, "default") for i in range(requests)]
            before = metrics(s.url)
            t0 = time.time()
            counts = asyncio.run(drive(s, reqs, concurrency, timeout))
            elapsed = time.time() - t0
            assert sum(counts.values()) == requests, counts
            assert counts.get("error", 0) == sum(r.expect_error for r in reqs), counts
            assert counts.get("too_long", 0) <= requests // 20, counts  # rare by construction
            assert counts.get("left", 0) == sum(bool(r.leave) for r in reqs), counts
            m = wait_idle(s.url)
            if not prefix_caching:
                assert m["deepinfer:kv_cache_bytes_in_use"] == 0, m["deepinfer:kv_cache_bytes_in_use"]
                assert m["deepinfer:prefix_cache_snapshots"] == 0
            else:
                assert m["deepinfer:prefix_cache_snapshot_bytes"] <= 16 << 20
            pre = m["deepinfer:num_preemptions_total"] - before["deepinfer:num_preemptions_total"]
            aborted = (m["deepinfer:num_requests_aborted_total"]
                       - before["deepinfer:num_requests_aborted_total"])
            time.sleep(0.5)
            rss.append(rss_mib(s.pid))
            info = {"seconds": round(elapsed, 1), "counts": counts, "preemptions": pre,
                    "aborted_in_engine": aborted, "rss_mib": round(rss[-1], 1),
                    "kv_bytes_in_use": m["deepinfer:kv_cache_bytes_in_use"],
                    "kv_bytes_reserved": m["deepinfer:kv_cache_bytes_reserved"],
                    "snapshots": m["deepinfer:prefix_cache_snapshots"]}
            summary["rounds"].append(info)
            log(f"round {rnd + 1}: {requests} requests in {elapsed:.1f} s "
                f"({requests / elapsed:.1f}/s): {counts}; preemptions {pre:.0f}, aborted in the "
                f"engine {aborted:.0f}; idle: KV {m['deepinfer:kv_cache_bytes_in_use'] / 2**20:.1f} "
                f"MiB in use / {m['deepinfer:kv_cache_bytes_reserved'] / 2**20:.1f} MiB reserved, "
                f"{m['deepinfer:prefix_cache_snapshots']:.0f} snapshots; "
                f"RSS {rss[-1]:.1f} MiB")
            assert pre > 0, "no preemption: the KV pool is not small enough"
        summary["rss_mib"] = rss
        if rounds >= 2:
            growth = rss[-1] - rss[1]
            log(f"RSS: start {rss[0]:.1f}, after round 1 {rss[1]:.1f}, after round {rounds} "
                f"{rss[-1]:.1f} MiB (growth {growth:+.1f}, tolerance {rss_tolerance_mib:.1f})")
            assert growth <= rss_tolerance_mib, f"the server grew by {growth:.1f} MiB"
    finally:
        code = s.stop()
        assert code == 0, s.log()
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prefix-caching", choices=["on", "off"], default="on")
    ap.add_argument("--rss-tolerance-mib", type=float, default=24.0)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--bin", default=None, help="deepinfer executable (default: installed)")
    a = ap.parse_args()
    soak(a.requests, a.rounds, a.concurrency, a.seed, a.prefix_caching == "on",
         a.rss_tolerance_mib, a.timeout, a.bin)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
