"""deepinfer.chat: DeepSeek-V4 prompt rendering and output parsing, from Python and the CLI.

Expected prompts come from tests/data/chat/v4_goldens.json, produced by DeepSeek's official
encoding_dsv4.py (tests/reference/chat/gen_chat_goldens.py).
"""

import json
import random

import pytest

from deepinfer.chat import StreamingOutputParser, parse_assistant_output, render_chat

EOS = "<｜end▁of▁sentence｜>"


@pytest.fixture(scope="module")
def goldens(repo_dir):
    with open(repo_dir / "tests" / "data" / "chat" / "v4_goldens.json", encoding="utf-8") as f:
        return json.load(f)


def test_render_matches_official_goldens(goldens):
    assert len(goldens["render"]) >= 20
    for case in goldens["render"]:
        prompt = render_chat(
            case["messages"], thinking=case["thinking"], tools=case["tools"],
            reasoning_effort=case["reasoning_effort"], effort_profile=case["effort_profile"],
            drop_thinking=case["drop_thinking"])
        assert prompt == case["prompt"], case["name"]


def test_render_options():
    msgs = [{"role": "user", "content": "Hi"}]
    assert render_chat(msgs) == "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>"
    assert render_chat(msgs, thinking=True).endswith("<｜Assistant｜><think>")
    assert render_chat(msgs, add_generation_prompt=False, add_bos=False) == "<｜User｜>Hi"
    cont = msgs + [{"role": "assistant", "content": "Hel"}]
    assert render_chat(cont, continue_final_message=True).endswith("</think>Hel")
    assert render_chat(cont).endswith("</think>Hel" + EOS)


@pytest.mark.parametrize("messages,kwargs,needle", [
    ([{"role": "robot", "content": "x"}], {}, "messages[0].role: unknown role 'robot'"),
    ([{"role": "user"}], {}, "messages[0].content: missing"),
    ([{"role": "user", "content": "a"}, {"role": "tool", "content": "r"}], {},
     "messages[1]: tool message without a preceding assistant message"),
    ([{"role": "user", "content": "a"},
      {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}], {},
     "messages[1].tool_calls[0].function.arguments: malformed JSON"),
    ([{"role": "user", "content": "a"}], {"reasoning_effort": "extreme"}, "reasoning_effort"),
    ([{"role": "user", "content": "a"}], {"reasoning_effort": "low"}, "'low' is not defined"),
    ([{"role": "user", "content": object()}], {}, "not JSON-serialisable"),
])
def test_render_errors_are_value_errors(messages, kwargs, needle):
    with pytest.raises(ValueError) as e:
        render_chat(messages, **kwargs)
    assert needle in str(e.value)


def test_parse_matches_official_goldens(goldens):
    for case in goldens["parse"]:
        out = parse_assistant_output(case["text"], thinking=case["thinking"])
        assert out["reasoning_content"] == case["reasoning_content"], case["name"]
        assert out["content"] == case["content"], case["name"]
        assert [(t["function"]["name"], t["function"]["arguments"]) for t in out["tool_calls"]] == \
            [(t["name"], t["arguments"]) for t in case["tool_calls"]], case["name"]
        assert out["ended"] is True


def collect(events):
    reasoning = "".join(e["text"] for e in events if e["type"] == "reasoning")
    content = "".join(e["text"] for e in events if e["type"] == "content")
    calls = [(e["name"], e["arguments"]) for e in events if e["type"] == "tool_call"]
    return reasoning, content, calls


def test_streaming_equals_one_shot_under_any_chunking(goldens):
    rng = random.Random(5)
    for case in goldens["parse"]:
        text, thinking = case["text"], case["thinking"]
        one = parse_assistant_output(text, thinking=thinking)
        expected = (one["reasoning_content"], one["content"],
                    [(t["function"]["name"], t["function"]["arguments"]) for t in one["tool_calls"]])
        for trial in range(12):
            parser = StreamingOutputParser(thinking=thinking)
            events, i = [], 0
            while i < len(text):
                n = 1 if trial == 0 else rng.randint(1, 10)
                events += parser.feed(text[i:i + n])
                i += n
            events += parser.finish()
            assert collect(events) == expected, (case["name"], trial)
            assert parser.ended


def test_streaming_events_and_errors():
    p = StreamingOutputParser(thinking=True)
    events = p.feed("Think</th") + p.feed("ink>Ans") + p.feed("wer" + EOS) + p.finish()
    assert collect(events) == ("Think", "Answer", [])
    assert [e["type"] for e in events][0] == "reasoning"
    bad = StreamingOutputParser()
    with pytest.raises(ValueError, match="malformed DSML tool call"):
        bad.feed("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke nam=\"f\">\n</｜DSML｜invoke>")
    with pytest.raises(ValueError, match="ended inside"):
        parse_assistant_output("x\n\n<｜DSML｜tool_calls>\n")


def test_cli_renders_stdin_and_files(cli, tmp_path, goldens):
    case = next(c for c in goldens["render"] if c["name"] == "tool_definitions_without_system")
    r = cli("chat-template", input=json.dumps(case["messages"]))
    assert r.returncode == 0, r.stderr
    assert r.stdout == render_chat(case["messages"])
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps(case["messages"]), encoding="utf-8")
    tools = tmp_path / "t.json"
    tools.write_text(json.dumps(case["tools"]), encoding="utf-8")
    r = cli("chat-template", "--messages", msgs, "--tools", tools)
    assert r.returncode == 0, r.stderr
    assert r.stdout == case["prompt"]
    r = cli("chat-template", "--messages", msgs, "--thinking", "--reasoning-effort", "max")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("<｜begin▁of▁sentence｜>Reasoning Effort: Absolute maximum")
    assert r.stdout.endswith("<｜Assistant｜><think>")


def test_cli_errors(cli, tmp_path):
    r = cli("chat-template", input="[{\"role\": \"user\"")
    assert r.returncode == 1
    assert "deepinfer chat-template: error:" in r.stderr and "malformed JSON" in r.stderr
    r = cli("chat-template", input=json.dumps([{"role": "user", "content": "a"}, {"role": "tool", "content": "r"}]))
    assert r.returncode == 1
    assert "messages[1]: tool message without a preceding assistant message" in r.stderr
    r = cli("chat-template", "--messages", tmp_path / "missing.json")
    assert r.returncode == 1 and "cannot open" in r.stderr
    r = cli("chat-template", "--reasoning-effort", "extreme", input="[]")
    assert r.returncode == 2


def test_special_token_strings_are_the_tokenizers_added_tokens(goldens, v4_tokenizer_path):
    # The prompt carries special tokens as text; the real V4 tokenizer must map each to its id.
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(v4_tokenizer_path))
    case = next(c for c in goldens["render"] if c["name"] == "developer_latest_reminder_tools")
    ids = tok.encode(render_chat(case["messages"], thinking=True), add_special_tokens=False).ids
    assert ids[0] == 0  # BOS
    for token_id in (1, 128803, 128804, 128821, 128822, 128825, 128828):
        assert token_id in ids, token_id
    ids = tok.encode(render_chat([{"role": "user", "content": "Hi"}]), add_special_tokens=False).ids
    assert ids[0] == 0 and ids[-2:] == [128804, 128822]
