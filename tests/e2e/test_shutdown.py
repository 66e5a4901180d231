"""Signals: SIGTERM drains (running requests finish, then exit 0); a second SIGINT exits at
once. And `deepinfer serve` with no --model serves the embedded default model."""

from __future__ import annotations

import json
import signal
import threading
import time

import httpx
import pytest

from conftest import Server


def stream_lines(url: str, body: dict, out: list, started: threading.Event):
    try:
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=120) as r:
            out.append(r.status_code)
            for line in r.iter_lines():
                if line.startswith("data: "):
                    out.append(line[6:])
                    started.set()
    except httpx.HTTPError as e:
        out.append(e)
    started.set()


def test_sigterm_drains_running_requests():
    s = Server("--max-model-len", "1024")
    body = {"prompt": "In the beginning", "max_tokens": 300, "ignore_eos": True, "stream": True}
    out: list = []
    started = threading.Event()
    t = threading.Thread(target=stream_lines, args=(s.url, body, out, started))
    t.start()
    assert started.wait(60)
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    # Draining: no new connections are accepted (or they are refused with 503).
    try:
        r = httpx.post(s.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2}, timeout=5)
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
    except httpx.HTTPError:
        pass
    t.join(120)
    assert out[0] == 200 and out[-1] == "[DONE]", out[-3:]
    finish = [json.loads(x)["choices"][0]["finish_reason"] for x in out[1:-1]
              if json.loads(x)["choices"]]
    assert finish[-1] == "length"  # the request ran to its end
    assert s.proc.wait(60) == 0, s.log()
    assert "draining" in s.log()


def test_second_sigint_exits_at_once():
    s = Server("--max-model-len", "4096")
    body = {"prompt": "In the beginning", "max_tokens": 4000, "ignore_eos": True, "stream": True}
    out: list = []
    started = threading.Event()
    t = threading.Thread(target=stream_lines, args=(s.url, body, out, started))
    t.start()
    assert started.wait(60)
    s.proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    assert s.proc.poll() is None  # still draining the long request
    t0 = time.time()
    s.proc.send_signal(signal.SIGINT)
    assert s.proc.wait(30) == 130, s.log()
    assert time.time() - t0 < 10
    t.join(30)


def test_serve_without_model_uses_the_embedded_default():
    s = Server("--max-model-len", "512", model=False)
    try:
        models = httpx.get(s.url + "/v1/models").json()
        assert models["data"][0]["id"] == "default"
        assert "default" in s.log()  # the model it found is named at start
        r = httpx.post(s.url + "/v1/chat/completions", timeout=60,
                       json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
        assert r.status_code == 200, r.text
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("_", [0])
def test_health_and_metrics_need_no_key(_):
    s = Server("--max-model-len", "512", "--api-key", "k")
    try:
        assert httpx.get(s.url + "/health").status_code == 200
        text = httpx.get(s.url + "/metrics").text
        assert "# TYPE deepinfer:time_to_first_token_seconds histogram" in text
        assert 'deepinfer:num_requests_running{model_name="default"} 0' in text
    finally:
        assert s.stop() == 0
