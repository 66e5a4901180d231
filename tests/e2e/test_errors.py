"""Bad input gets OpenAI-shaped errors with the right status; the server keeps serving."""

from __future__ import annotations

import concurrent.futures as cf
import json

import httpx
import openai
import pytest

from conftest import Server, metrics

MODEL = "default"
USER = [{"role": "user", "content": "Hello"}]


def post(url, path, body, headers=None):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(url + path, content=data, timeout=60,
                      headers={"content-type": "application/json", **(headers or {})})


def check_error(r, status, param=None, code=None):
    assert r.status_code == status, r.text
    e = r.json()["error"]
    assert set(e) == {"message", "type", "param", "code"} and e["message"]
    if param is not None:
        assert e["param"] == param, e
    if code is not None:
        assert e["code"] == code, e
    return e


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b""])
def test_malformed_json(server, body):
    check_error(post(server.url, "/v1/chat/completions", body), 400)


@pytest.mark.parametrize("field,value", [
    ("temperature", "hot"), ("max_tokens", "ten"), ("n", 1.5), ("stream", "yes"),
    ("messages", "hello"), ("stop", 5), ("top_logprobs", "3"), ("seed", "x"),
])
def test_wrong_types(server, field, value):
    body = {"model": MODEL, "messages": USER, field: value}
    if field == "top_logprobs":
        body["logprobs"] = True
    check_error(post(server.url, "/v1/chat/completions", body), 400, param=field)


@pytest.mark.parametrize("field,value", [
    ("temperature", 5.0), ("top_p", 0.0), ("top_p", 1.5), ("min_p", -0.1),
    ("presence_penalty", 3.0), ("frequency_penalty", -2.5), ("repetition_penalty", 0.0),
    ("max_tokens", 0), ("n", 0), ("top_k", -5), ("top_logprobs", 21),
])
def test_invalid_sampling_values(server, field, value):
    body = {"model": MODEL, "messages": USER, field: value}
    if field == "top_logprobs":
        body["logprobs"] = True
    e = check_error(post(server.url, "/v1/chat/completions", body), 400, param=field)
    assert field in e["message"]


def test_bad_schemas(server, client):
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}}
    e = check_error(post(server.url, "/v1/chat/completions",
                         {"messages": USER, "response_format": bad}), 400)
    assert "schema" in e["message"]
    # Streaming too: the error comes before any event, as a plain 400.
    r = post(server.url, "/v1/chat/completions",
             {"messages": USER, "response_format": bad, "stream": True})
    check_error(r, 400)
    check_error(post(server.url, "/v1/chat/completions",
                     {"messages": USER, "response_format": {"type": "json_schema"}}), 400,
                param="response_format")
    check_error(post(server.url, "/v1/chat/completions",
                     {"messages": USER, "so_args": {"schema_type": "regex", "schema": "(unclosed"}}),
                400)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=USER, response_format=bad)


def test_prompt_too_long(server, client):
    long = "light " * 3000  # the test server's max_model_len is 2048
    e = check_error(post(server.url, "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": long}]}), 400,
                    param="messages", code="context_length_exceeded")
    assert "2048" in e["message"]
    check_error(post(server.url, "/v1/completions", {"prompt": long, "max_tokens": 4}), 400,
                param="prompt", code="context_length_exceeded")
    check_error(post(server.url, "/v1/completions", {"prompt": "hi", "max_tokens": 5000}), 400,
                code="context_length_exceeded")
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL, prompt=long, max_tokens=4)


def test_unknown_model_and_route(server, client):
    check_error(post(server.url, "/v1/chat/completions", {"model": "gpt-9", "messages": USER}),
                404, param="model", code="model_not_found")
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-9", messages=USER)
    check_error(httpx.get(server.url + "/v1/nothing"), 404)
    check_error(httpx.get(server.url + "/v1/chat/completions"), 405)
    r = post(server.url, "/v1/messages", {"model": "claude-x", "max_tokens": 4, "messages": USER})
    assert r.status_code == 404 and r.json()["type"] == "error"


def test_structural_errors(server):
    check_error(post(server.url, "/v1/chat/completions", {"messages": []}), 400, param="messages")
    check_error(post(server.url, "/v1/chat/completions",
                     {"messages": [{"role": "tool", "content": "x", "tool_call_id": "nope"}]}), 400,
                param="messages")
    check_error(post(server.url, "/v1/completions", {"prompt": [[1, 99999999]]}), 400)
    for bad_bias in ({"5": 150}, {"5": -100.5}, {"five": 1}, {"-3": 1}, {"5": "10"}, [5, 10],
                     {str(i): 1 for i in range(4097)}):
        check_error(post(server.url, "/v1/chat/completions",
                         {"messages": USER, "logit_bias": bad_bias}), 400, param="logit_bias")
    for bad_ids in ([-1], ["5"], 5, [1.5]):
        check_error(post(server.url, "/v1/completions",
                         {"prompt": "x", "allowed_token_ids": bad_ids}), 400,
                    param="allowed_token_ids")
    # A token id past the model's vocabulary: refused when the engine takes the request.
    check_error(post(server.url, "/v1/completions",
                     {"prompt": "x", "logit_bias": {"99999999": 1}}), 400)
    check_error(post(server.url, "/v1/chat/completions",
                     {"messages": USER, "tool_choice": "required"}), 400, param="tool_choice")
    r = post(server.url, "/v1/messages", {"messages": USER})  # max_tokens is required
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_body_limit(server):
    r = post(server.url, "/v1/completions", b'{"prompt": "' + b"a" * (33 << 20) + b'"}')
    assert r.status_code == 413


def test_api_key():
    s = Server("--max-model-len", "512", env={"DEEPINFER_API_KEY": "sekret-key"})
    try:
        body = {"messages": USER, "max_tokens": 2}
        e = check_error(post(s.url, "/v1/chat/completions", body), 401, code="invalid_api_key")
        assert "missing" in e["message"]
        check_error(post(s.url, "/v1/chat/completions", body,
                         headers={"authorization": "Bearer wrong"}), 401)
        check_error(httpx.get(s.url + "/v1/models", headers={"authorization": "Bearer sekret-ke"}),
                    401)
        from openai import OpenAI
        with pytest.raises(openai.AuthenticationError):
            OpenAI(base_url=s.url + "/v1", api_key="wrong", max_retries=0).models.list()
        ok = OpenAI(base_url=s.url + "/v1", api_key="sekret-key", max_retries=0)
        assert ok.chat.completions.create(model=MODEL, messages=USER, max_tokens=2).choices
        r = post(s.url, "/v1/messages", {"max_tokens": 2, "messages": USER},
                 headers={"x-api-key": "sekret-key"})
        assert r.status_code == 200, r.text
        assert httpx.get(s.url + "/health").status_code == 200  # no key needed
    finally:
        assert s.stop() == 0


def test_overload_gets_503_with_retry_after():
    s = Server("--max-num-seqs", "1", "--max-waiting", "2", "--max-model-len", "512")
    try:
        body = {"prompt": "In the beginning", "max_tokens": 200, "ignore_eos": True}
        with cf.ThreadPoolExecutor(12) as pool:
            rs = list(pool.map(lambda _: post(s.url, "/v1/completions", body), range(12)))
        codes = sorted(r.status_code for r in rs)
        # max_waiting counts accepted requests not yet running: 2 at least are taken (a third
        # too when the first started running before it came), the rest are refused.
        assert codes.count(200) >= 2 and 503 in codes, codes
        for r in rs:
            if r.status_code == 503:
                assert r.headers["retry-after"] == "1"
                check_error(r, 503)
        assert metrics(s.url)["deepinfer:num_requests_overloaded_total"] >= 1
    finally:
        assert s.stop() == 0


def test_server_still_serves_after_errors(client):
    assert client.chat.completions.create(model=MODEL, messages=USER, max_tokens=2).choices


def test_expect_100_continue_and_pipelining(server):
    # curl sends "Expect: 100-continue" for bodies over 1 KiB; the server answers it at once.
    import socket
    import time

    body = json.dumps({"prompt": "In the beginning " * 100, "max_tokens": 2}).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Expect: 100-continue\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    t0 = time.time()
    s.settimeout(5)
    assert s.recv(64).startswith(b"HTTP/1.1 100 Continue")
    assert time.time() - t0 < 0.5
    # Then the body, and a second request pipelined right behind it on the same connection.
    second = json.dumps({"prompt": "And God said", "max_tokens": 2}).encode()
    s.sendall(body + b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
              b"application/json\r\nContent-Length: " + str(len(second)).encode() + b"\r\n\r\n"
              + second)
    data = b""
    while data.count(b"HTTP/1.1 200 OK") < 2 or not data.endswith(b"}"):
        chunk = s.recv(65536)
        assert chunk, data
        data += chunk
    assert data.count(b'"object":"text_completion"') == 2
    s.close()
