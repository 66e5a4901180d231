"""The official `anthropic` client against `deepinfer serve`'s /v1/messages."""

from __future__ import annotations

MODEL = "default"


def test_messages(aclient):
    r = aclient.messages.create(model=MODEL, max_tokens=10, extra_body={"temperature": 0},
                                system="You are terse.",
                                messages=[{"role": "user", "content": "Who made the earth?"}])
    assert r.role == "assistant" and r.type == "message"
    assert r.content[0].type == "text" and r.content[0].text
    assert r.stop_reason in ("end_turn", "max_tokens")
    assert r.usage.input_tokens > 0 and 0 < r.usage.output_tokens <= 10


def test_messages_streaming(aclient):
    kw = dict(model=MODEL, max_tokens=12, extra_body={"temperature": 0},
              messages=[{"role": "user", "content": "Who made the earth?"}])
    whole = aclient.messages.create(**kw)
    with aclient.messages.stream(**kw) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == whole.content[0].text
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_messages_tool_use_round_trip(aclient):
    tools = [{"name": "lookup", "description": "Look a word up",
              "input_schema": {"type": "object", "properties": {"word": {"type": "string"}},
                               "required": ["word"]}}]
    r = aclient.messages.create(model=MODEL, max_tokens=300, extra_body={"temperature": 0}, tools=tools,
                                tool_choice={"type": "any"},
                                messages=[{"role": "user", "content": "Define 'light'."}])
    assert r.stop_reason == "tool_use"
    use = [b for b in r.content if b.type == "tool_use"][0]
    assert use.name == "lookup" and isinstance(use.input["word"], str)
    with aclient.messages.stream(model=MODEL, max_tokens=300, extra_body={"temperature": 0}, tools=tools,
                                 tool_choice={"type": "tool", "name": "lookup"},
                                 messages=[{"role": "user", "content": "Define 'light'."}]) as s:
        final = s.get_final_message()
    streamed = [b for b in final.content if b.type == "tool_use"][0]
    assert streamed.input == use.input
    follow = aclient.messages.create(
        model=MODEL, max_tokens=8, extra_body={"temperature": 0}, tools=tools,
        messages=[{"role": "user", "content": "Define 'light'."},
                  {"role": "assistant", "content": [b.model_dump() for b in r.content]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                "content": "the opposite of darkness"}]}])
    assert follow.usage.input_tokens > r.usage.input_tokens


def test_messages_thinking(aclient):
    r = aclient.messages.create(model=MODEL, max_tokens=10, extra_body={"temperature": 0},
                                thinking={"type": "enabled", "budget_tokens": 1024},
                                messages=[{"role": "user", "content": "Who made the earth?"}])
    assert r.content[0].type == "thinking" and r.content[0].thinking
