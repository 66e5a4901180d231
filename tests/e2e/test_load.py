"""Bounded load: 256 concurrent clients, two rounds of 1,000 mixed requests (streaming and not,
chat and completions, short and long prompts, some abandoned mid-stream, some malformed). Every
request gets a complete answer or its error, nothing hangs, the engine ends idle with its KV
free, and the server's memory after the second round is back at its idle level after the first
(the first round fills what is kept by design: KV page pools, prefix-cache snapshots up to
their byte bound, allocator arenas)."""

from __future__ import annotations

import asyncio
import json
import random
import time

import httpx

from conftest import Server, metrics

CONCURRENCY = 256
REQUESTS = 1000
WORDS = "light darkness heaven earth water firmament seed fruit night day".split()


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def make_request(rng: random.Random, i: int) -> dict:
    kind = rng.random()
    prompt = " ".join(rng.choice(WORDS) for _ in range(rng.choice([3, 10, 40, 150])))
    r = {"stream": rng.random() < 0.85, "abort": False, "bad": False}
    if kind < 0.05:
        r["bad"] = True
        r["path"] = "/v1/chat/completions"
        r["body"] = rng.choice([b"{oops", json.dumps({"messages": [], "max_tokens": 3}).encode(),
                                json.dumps({"messages": [{"role": "user", "content": "x"}],
                                            "temperature": 9}).encode()])
        return r
    body = {"max_tokens": rng.randint(1, 12), "temperature": rng.choice([0, 0.8]),
            "seed": i, "stream": r["stream"]}
    if rng.random() < 0.5:
        r["path"] = "/v1/chat/completions"
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        r["path"] = "/v1/completions"
        body["prompt"] = prompt
    if r["stream"] and rng.random() < 0.12:
        r["abort"] = True
        body["max_tokens"] = 200
        body["ignore_eos"] = True
    r["body"] = json.dumps(body).encode()
    return r


async def run_one(http: httpx.AsyncClient, url: str, req: dict) -> str:
    headers = {"content-type": "application/json"}
    if not req["stream"] or req["bad"]:
        r = await http.post(url + req["path"], content=req["body"], headers=headers)
        if req["bad"]:
            assert r.status_code == 400, r.text
            assert r.json()["error"]["message"]
            return "error"
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["finish_reason"] in ("stop", "length")
        return "ok"
    async with http.stream("POST", url + req["path"], content=req["body"],
                           headers=headers) as r:
        assert r.status_code == 200
        finish, done, events = None, False, 0
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            events += 1
            if req["abort"] and events >= 2:
                return "aborted"  # leaving the block closes the connection mid-stream
            ch = json.loads(line[6:])
            for c in ch.get("choices", []):
                finish = c.get("finish_reason") or finish
        assert done and finish in ("stop", "length"), (finish, done)
        return "ok"


async def drive(url: str, reqs: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    queue: asyncio.Queue = asyncio.Queue()
    for r in reqs:
        queue.put_nowait(r)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(180.0)) as http:
        async def worker():
            while True:
                try:
                    r = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                out = await run_one(http, url, r)
                counts[out] = counts.get(out, 0) + 1

        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(CONCURRENCY))), 600)
    return counts


def wait_idle(url: str, timeout: float = 60) -> dict:
    end = time.time() + timeout
    while time.time() < end:
        m = metrics(url)
        if m["deepinfer:num_requests_running"] == 0 and m["deepinfer:num_requests_waiting"] == 0:
            return m
        time.sleep(0.1)
    raise AssertionError("the engine did not become idle")


def test_bounded_load():
    s = Server("--max-num-seqs", "256", "--max-waiting", "100000", "--max-model-len", "1024")
    try:
        rng = random.Random(17)
        start_rss = rss_bytes(s.pid)
        asyncio.run(drive(s.url, [make_request(rng, i) for i in range(REQUESTS)]))
        wait_idle(s.url)
        time.sleep(0.5)
        idle_rss = rss_bytes(s.pid)
        reqs = [make_request(rng, REQUESTS + i) for i in range(REQUESTS)]
        t0 = time.time()
        counts = asyncio.run(drive(s.url, reqs))
        elapsed = time.time() - t0
        assert sum(counts.values()) == REQUESTS
        assert counts.get("error", 0) == sum(r["bad"] for r in reqs)
        assert counts.get("aborted", 0) == sum(r["abort"] for r in reqs)
        m = wait_idle(s.url)
        assert m["deepinfer:kv_cache_blocks_in_use"] == 0
        assert m["deepinfer:http_open_connections"] <= 1
        time.sleep(0.5)
        after_rss = rss_bytes(s.pid)
        print(f"load: {REQUESTS} requests in {elapsed:.1f} s ({REQUESTS / elapsed:.1f} req/s), "
              f"{counts}; RSS at start {start_rss / 2**20:.1f} MiB, idle after round 1 "
              f"{idle_rss / 2**20:.1f} MiB, idle after round 2 {after_rss / 2**20:.1f} MiB")
        assert after_rss <= idle_rss * 1.05 + (16 << 20), (idle_rss, after_rss)
    finally:
        assert s.stop() == 0, s.log()
