"""The official `openai` client against `deepinfer serve` (embedded default model)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from conftest import metrics

MODEL = "default"
USER = [{"role": "user", "content": "Who made the heavens and the earth?"}]

WEATHER = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                           "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city", "days", "unit"],
        },
    },
}]


def test_models(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]


def test_chat_non_streaming(client):
    r = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=12, temperature=0)
    c = r.choices[0]
    assert c.message.role == "assistant"
    assert isinstance(c.message.content, str) and c.message.content
    assert c.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 0 and 0 < r.usage.completion_tokens <= 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")


def test_stop_strings(client):
    base = client.completions.create(model=MODEL, prompt="In the beginning", max_tokens=12,
                                     temperature=0).choices[0].text
    stop = base[len(base) // 2:len(base) // 2 + 3]
    cut = client.completions.create(model=MODEL, prompt="In the beginning", max_tokens=12,
                                    temperature=0, stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == base[:base.index(stop)]


def test_logit_bias(client):
    from deepinfer.tokenizer import Tokenizer

    from conftest import DEFAULT_MODEL
    the = Tokenizer.from_file(str(DEFAULT_MODEL)).encode(" the")
    assert len(the) == 1
    kw = dict(model=MODEL, prompt="In the beginning", max_tokens=4, temperature=0)
    base = client.completions.create(**kw).choices[0].text
    forced = client.completions.create(**kw, logit_bias={str(the[0]): 100}).choices[0].text
    assert base != " the" * 4 and forced == " the" * 4
    # A bias of 0 changes nothing; streaming chat takes it too.
    assert client.completions.create(**kw, logit_bias={str(the[0]): 0}).choices[0].text == base
    chunks = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=3,
                                            temperature=0, stream=True,
                                            logit_bias={str(the[0]): 100})
    deltas = [ch.choices[0].delta for ch in chunks if ch.choices]
    text = "".join((d.content or "") + (getattr(d, "reasoning_content", None) or "")
                   for d in deltas)
    assert text.strip() == "the the the"
    # vLLM's allowed_token_ids (an extra field of the request): only " the" can come.
    only = client.completions.create(**kw, extra_body={"allowed_token_ids": the}).choices[0].text
    assert only == " the" * 4



def test_chat_streaming_equals_non_streaming(client):
    kw = dict(model=MODEL, messages=USER, max_tokens=16, temperature=0)
    whole = client.chat.completions.create(**kw).choices[0].message.content
    chunks = list(client.chat.completions.create(
        **kw, stream=True, stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == whole
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [ch.choices[0].finish_reason for ch in chunks if ch.choices and
              ch.choices[0].finish_reason]
    assert len(finals) == 1
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage.completion_tokens > 0 and usage.prompt_tokens > 0


def test_seed_determinism_and_n(client):
    kw = dict(model=MODEL, messages=USER, max_tokens=10, temperature=1.0, seed=1234)
    a = client.chat.completions.create(**kw).choices[0].message.content
    b = client.chat.completions.create(**kw).choices[0].message.content
    assert a == b
    r = client.chat.completions.create(**{**kw, "n": 3})
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert r.choices[0].message.content == a  # sample 0 draws the same stream as n=1
    assert len({c.message.content for c in r.choices}) > 1
    assert r.usage.completion_tokens > 10  # three samples counted


def test_logprobs(client):
    r = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=5, temperature=0,
                                       logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for e in content:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert e.top_logprobs[0].logprob >= e.top_logprobs[-1].logprob
        # greedy: the chosen token is the most likely one
        assert abs(e.logprob - e.top_logprobs[0].logprob) < 1e-5
    chunks = list(client.chat.completions.create(model=MODEL, messages=USER, max_tokens=5,
                                                 temperature=0, logprobs=True, top_logprobs=1,
                                                 stream=True))
    streamed = [e for ch in chunks if ch.choices and ch.choices[0].logprobs
                for e in ch.choices[0].logprobs.content]
    assert [e.logprob for e in streamed] == pytest.approx([e.logprob for e in content])


def test_reasoning_content(client):
    r = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=12, temperature=0,
                                       extra_body={"chat_template_kwargs": {"thinking": True}})
    m = r.choices[0].message
    # The prompt ends inside <think>: the tiny model's output is reasoning until a </think>.
    assert m.model_extra.get("reasoning_content")
    assert "<think>" not in (m.content or "") and "</think>" not in (m.content or "")
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=USER, max_tokens=12, temperature=0, stream=True,
        reasoning_effort="high"))
    reasoning = "".join((ch.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                        for ch in chunks if ch.choices)
    assert reasoning


def test_tool_call_round_trip(client):
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Weather in Paris for 3 days?"}],
        tools=WEATHER, tool_choice="required", max_tokens=400, temperature=0)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    call = c.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    args = json.loads(call.function.arguments)
    assert set(args) == {"city", "days", "unit"} and isinstance(args["days"], int)
    assert args["unit"] in ("c", "f")
    assert "DSML" not in (c.message.content or "") and "DSML" not in call.function.arguments
    # Streaming: the arguments arrive in pieces that concatenate to the same JSON object.
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Weather in Paris for 3 days?"}],
        tools=WEATHER, tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=400, temperature=0, stream=True))
    pieces = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
    assert pieces[0].function.name == "get_weather" and pieces[0].id
    assert len(pieces) >= 4  # name, then one fragment per parameter, then the closing brace
    streamed = "".join(p.function.arguments or "" for p in pieces)
    assert json.loads(streamed) == args
    assert all("DSML" not in (ch.choices[0].delta.content or "") for ch in chunks if ch.choices)
    # The tool's result goes back in the conversation.
    follow = client.chat.completions.create(
        model=MODEL, tools=WEATHER, max_tokens=8, temperature=0,
        messages=[{"role": "user", "content": "Weather in Paris for 3 days?"},
                  {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                  {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}])
    assert follow.choices[0].message.role == "assistant"
    assert follow.usage.prompt_tokens > r.usage.prompt_tokens


SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


def test_response_format(client):
    r = client.chat.completions.create(
        model=MODEL, messages=USER, max_tokens=80, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)
    r = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=60, temperature=0,
                                       response_format={"type": "json_object"})
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    r = client.chat.completions.create(
        model=MODEL, messages=USER, max_tokens=20, temperature=0,
        extra_body={"so_args": {"schema_type": "regex", "schema": "(yes|no), [0-9]{2}"}})
    import re
    assert re.fullmatch("(yes|no), [0-9]{2}", r.choices[0].message.content)


def test_multi_turn_hits_the_prefix_cache(client, server):
    system = {"role": "system", "content": "You are a careful scholar. " * 30}
    turn1 = [system, {"role": "user", "content": "Who made the heavens?"}]
    r1 = client.chat.completions.create(model=MODEL, messages=turn1, max_tokens=8, temperature=0)
    turn2 = turn1 + [{"role": "assistant", "content": r1.choices[0].message.content},
                     {"role": "user", "content": "And the earth?"}]
    before = metrics(server.url)
    r2 = client.chat.completions.create(model=MODEL, messages=turn2, max_tokens=8, temperature=0)
    cached = r2.usage.prompt_tokens_details.cached_tokens
    assert cached >= 128 and cached < r2.usage.prompt_tokens
    after = metrics(server.url)
    assert after["deepinfer:prefix_cache_hits_total"] - before[
        "deepinfer:prefix_cache_hits_total"] >= cached


def test_completions(client):
    r = client.completions.create(model=MODEL, prompt="In the beginning", max_tokens=8,
                                  temperature=0)
    assert r.object == "text_completion" and r.choices[0].text
    s = list(client.completions.create(model=MODEL, prompt="In the beginning", max_tokens=8,
                                       temperature=0, stream=True))
    assert "".join(ch.choices[0].text for ch in s if ch.choices) == r.choices[0].text
    many = client.completions.create(model=MODEL, prompt=["In the beginning", [19, 20, 21]],
                                     max_tokens=4, temperature=1.0, n=2, seed=7)
    assert [c.index for c in many.choices] == [0, 1, 2, 3]
    assert many.choices[0].text == client.completions.create(
        model=MODEL, prompt="In the beginning", max_tokens=4, temperature=1.0, seed=7
    ).choices[0].text


def test_completions_echo_logprobs_score_the_prompt(client):
    # How lm-evaluation-harness scores log-likelihoods: echo the prompt with its logprobs.
    prompt = "In the beginning God created the heaven and the earth."
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=0, echo=True,
                                  logprobs=1, temperature=0)
    c = r.choices[0]
    assert c.text == prompt
    lp = c.logprobs
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert len(lp.tokens) == r.usage.prompt_tokens and r.usage.completion_tokens == 0
    assert all(x <= 0 for x in lp.token_logprobs[1:])
    assert "".join(lp.tokens) == prompt
    assert lp.text_offset == sorted(lp.text_offset)
    # A longer prompt that starts with this one (and hits the prefix cache: the test server's
    # KV blocks are 32 tokens) scores the shared tokens identically: a cached prefix is
    # recomputed for prompt logprobs, never skipped.
    longer = prompt + " And the earth was without form, and void." * 4
    scored = client.completions.create(model=MODEL, prompt=longer, max_tokens=0, echo=True,
                                       logprobs=0, temperature=0)
    again = client.completions.create(model=MODEL, prompt=longer, max_tokens=0, echo=True,
                                      logprobs=0, temperature=0)
    n = len(lp.tokens)
    assert scored.choices[0].logprobs.tokens[:n] == lp.tokens
    assert scored.choices[0].logprobs.token_logprobs[1:n] == pytest.approx(
        lp.token_logprobs[1:], abs=1e-5)
    assert again.choices[0].logprobs.token_logprobs[1:] == pytest.approx(
        scored.choices[0].logprobs.token_logprobs[1:], abs=1e-5)
    assert again.usage.prompt_tokens_details.cached_tokens > 0
