"""A client that goes away mid-stream: its request is aborted and its KV comes back."""

from __future__ import annotations

import json
import socket
import time

from conftest import metrics


def wait_for(cond, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_disconnect_mid_stream_aborts_and_frees_kv(server, client):
    base = metrics(server.url)
    assert base["deepinfer:kv_cache_blocks_in_use"] == 0
    stream = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Tell me everything."}],
        max_tokens=1500, temperature=0.8, stream=True, extra_body={"ignore_eos": True})
    got = 0
    for chunk in stream:
        got += 1
        if got == 5:
            break
    m = metrics(server.url)
    assert m["deepinfer:num_requests_running"] == 1
    assert m["deepinfer:kv_cache_blocks_in_use"] > 0
    stream.response.close()  # the client goes away
    assert wait_for(lambda: metrics(server.url)["deepinfer:num_requests_running"] == 0)
    m = metrics(server.url)
    assert m["deepinfer:kv_cache_blocks_in_use"] == 0
    assert m["deepinfer:num_requests_aborted_total"] == base["deepinfer:num_requests_aborted_total"] + 1
    # Far fewer than 1500 tokens were generated for it.
    assert m["deepinfer:generation_tokens_total"] - base["deepinfer:generation_tokens_total"] < 1000


def test_disconnect_while_waiting_for_a_non_streaming_answer(server):
    base = metrics(server.url)
    body = json.dumps({"prompt": "In the beginning", "max_tokens": 1500, "ignore_eos": True})
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    assert wait_for(lambda: metrics(server.url)["deepinfer:num_requests_running"] == 1)
    s.close()
    assert wait_for(lambda: metrics(server.url)["deepinfer:num_requests_running"] == 0)
    m = metrics(server.url)
    assert m["deepinfer:kv_cache_blocks_in_use"] == 0
    assert m["deepinfer:num_requests_aborted_total"] == base["deepinfer:num_requests_aborted_total"] + 1
