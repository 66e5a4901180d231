#!/usr/bin/env python3
"""Regenerates tests/data/chat/v4_goldens.json with DeepSeek's official DeepSeek-V4 renderer.

The authoritative renderer is `encoding/encoding_dsv4.py` shipped in the DeepSeek-V4 model
repositories (deepseek-ai/DeepSeek-V4-Flash for the "preview" effort profile,
deepseek-ai/DeepSeek-V4-Flash-0731 for the "0731" one). It is not part of this repository: download
it next to the checkpoint and pass its path.

    python tests/reference/chat/gen_chat_goldens.py \
        --encoder /path/to/DeepSeek-V4-Flash/encoding/encoding_dsv4.py \
        [--encoder-0731 /path/to/DeepSeek-V4-Flash-0731/encoding/encoding_dsv4.py] \
        --out tests/data/chat/v4_goldens.json

Every prompt and parse result in the output comes from the official `encode_messages` and
`parse_message_from_completion_text`; this script only chooses the inputs. Request-level `tools`
are attached the way DeepInfer (and vLLM) attach them: to a leading system/developer message, or to
a new empty system message put first. Cases needing the 0731 encoder are skipped without it.

The committed 0731 cases were produced with the preview file whose effort table was changed to the
0731 one (REASONING_EFFORT_PROMPTS low/high/max, DEFAULT_REASONING_EFFORT "low"): per DeepSeek's
0731 release that table is the only difference between the two encoders.
"""

import argparse
import copy
import importlib.util
import json
import sys

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Search the web; returns the top results — titles and snippets",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "max_results": {"type": "integer", "minimum": 1, "default": 5},
                "fresh": {"type": "boolean"},
            },
            "required": ["query"],
        },
        "strict": True,
    },
}

SYSTEM = {"role": "system", "content": "You are a concise assistant."}


def call(id_, name, args):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


# Each case: messages, request-level tools, thinking, reasoning_effort, profile, drop_thinking,
# and `rule`: the official function(s) whose behaviour the case pins down.
CASES = [
    dict(name="chat_single_user", rule="render_message: user + <｜Assistant｜></think> (chat)",
         messages=[{"role": "user", "content": "Hello, who are you?"}]),
    dict(name="thinking_single_user", rule="render_message: user + <｜Assistant｜><think> (thinking)",
         thinking=True, messages=[{"role": "user", "content": "Hello, who are you?"}]),
    dict(name="system_prompt_chat", rule="system_msg_template: system text right after BOS",
         messages=[SYSTEM, {"role": "user", "content": "Name a prime number."}]),
    dict(name="multi_turn_thinking_drops_reasoning",
         rule="_drop_thinking_messages + render_message: earlier turns as chat (</think>), "
              "their reasoning dropped; the last user turn opens <think>",
         thinking=True,
         messages=[SYSTEM,
                   {"role": "user", "content": "What is 2+2?"},
                   {"role": "assistant", "reasoning_content": "Simple addition.", "content": "4."},
                   {"role": "user", "content": "And 3+3?"}]),
    dict(name="multi_turn_chat", rule="chat mode: reasoning never rendered; assistant turns end with EOS",
         messages=[SYSTEM,
                   {"role": "user", "content": "What is 2+2?"},
                   {"role": "assistant", "reasoning_content": "Simple addition.", "content": "4."},
                   {"role": "user", "content": "And 3+3?"}]),
    dict(name="multi_turn_thinking_keep_reasoning_option", rule="encode_messages(drop_thinking=False)",
         thinking=True, drop_thinking=False,
         messages=[{"role": "user", "content": "What is 2+2?"},
                   {"role": "assistant", "reasoning_content": "Simple addition.", "content": "4."},
                   {"role": "user", "content": "And 3+3?"}]),
    dict(name="tools_thinking_keeps_reasoning",
         rule="encode_messages: tools disable drop_thinking; merge_tool_messages; "
              "sort_tool_results_by_call_order; encode_arguments_to_dsml",
         thinking=True, tools=[WEATHER_TOOL, SEARCH_TOOL],
         messages=[SYSTEM,
                   {"role": "user", "content": "Weather in Paris and Oslo?"},
                   {"role": "assistant", "reasoning_content": "Two cities, two calls.", "content": "",
                    "tool_calls": [call("call_a", "get_weather", {"city": "Paris"}),
                                   call("call_b", "get_weather", {"city": "Oslo", "unit": "celsius"})]},
                   {"role": "tool", "tool_call_id": "call_b", "content": "{\"temp\": -3}"},
                   {"role": "tool", "tool_call_id": "call_a", "content": "{\"temp\": 12}"},
                   {"role": "assistant", "reasoning_content": "Have both.", "content": "Paris 12°C, Oslo -3°C."},
                   {"role": "user", "content": "Thanks! Anything else?"}]),
    dict(name="tool_definitions_without_system", rule="render_tools / TOOLS_TEMPLATE on an empty system message",
         tools=[WEATHER_TOOL],
         messages=[{"role": "user", "content": "Is it raining in Lima?"}]),
    dict(name="tool_call_argument_types",
         rule="encode_arguments_to_dsml: strings raw with string=\"true\", others json.dumps with string=\"false\"",
         tools=[SEARCH_TOOL],
         messages=[{"role": "user", "content": "Search."},
                   {"role": "assistant", "content": "Searching now.",
                    "tool_calls": [call("c1", "web_search", {
                        "query": "line1\n\"quoted\" <tag> café 東京",
                        "max_results": 3, "fresh": True, "ratio": 0.25, "big": 1e16, "small": 1e-05,
                        "none": None, "list": [1, "two", {"three": 3.0}], "obj": {"k": "v", "n": -1}})]},
                   {"role": "tool", "tool_call_id": "c1", "content": "no results"}]),
    dict(name="zero_argument_tool_call", rule="tool_call_template with empty arguments",
         tools=[SEARCH_TOOL],
         messages=[{"role": "user", "content": "Go."},
                   {"role": "assistant", "content": "", "tool_calls": [call("c1", "web_search", {})]}]),
    dict(name="max_effort_preamble_preview", rule="render_message: REASONING_EFFORT_MAX before message 0 (thinking, max)",
         thinking=True, reasoning_effort="max",
         messages=[SYSTEM, {"role": "user", "content": "Prove that sqrt(2) is irrational."}]),
    dict(name="max_effort_chat_mode_no_preamble", rule="effort preamble only in thinking mode",
         reasoning_effort="max",
         messages=[SYSTEM, {"role": "user", "content": "Prove that sqrt(2) is irrational."}]),
    dict(name="high_effort_preview_no_preamble", rule="preview: reasoning_effort high adds nothing",
         thinking=True, reasoning_effort="high",
         messages=[{"role": "user", "content": "Prove that sqrt(2) is irrational."}]),
    dict(name="high_effort_0731", profile="0731", rule="0731 REASONING_EFFORT_PROMPTS['high']",
         thinking=True, reasoning_effort="high",
         messages=[{"role": "user", "content": "Prove that sqrt(2) is irrational."}]),
    dict(name="max_effort_0731", profile="0731", rule="0731 REASONING_EFFORT_PROMPTS['max']",
         thinking=True, reasoning_effort="max",
         messages=[SYSTEM, {"role": "user", "content": "Prove that sqrt(2) is irrational."}]),
    dict(name="low_effort_0731", profile="0731", rule="0731 REASONING_EFFORT_PROMPTS['low'] is empty",
         thinking=True, reasoning_effort="low",
         messages=[{"role": "user", "content": "Prove that sqrt(2) is irrational."}]),
    dict(name="developer_latest_reminder_tools",
         rule="developer role (<｜User｜> + tools), latest_reminder, tool result merged into a user turn",
         thinking=True,
         messages=[{"role": "system", "content": "You are DeepSeek."},
                   {"role": "latest_reminder", "content": "2026-11-30, Monday, Berlin"},
                   {"role": "developer", "content": "Find today's top headline.", "tools": [SEARCH_TOOL]},
                   {"role": "assistant", "reasoning_content": "Search first.", "content": "",
                    "tool_calls": [call("s1", "web_search", {"query": "top headline today"})]},
                   {"role": "tool", "tool_call_id": "s1", "content": [{"type": "text", "text": "Headline A"},
                                                                     {"type": "image_url", "image_url": {"url": "x"}}]},
                   {"role": "assistant", "reasoning_content": "Done.", "content": "Headline A."}]),
    dict(name="task_action_chat", rule="render_message: task 'action' -> <｜Assistant｜></think><｜action｜>",
         messages=[SYSTEM,
                   {"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "Hello!"},
                   {"role": "user", "content": "Latest news on fusion power?", "task": "action"}]),
    dict(name="consecutive_user_messages_merge", rule="merge_tool_messages joins user turns with \\n\\n",
         messages=[{"role": "user", "content": "First part."}, {"role": "user", "content": "Second part."}]),
    dict(name="ends_with_assistant", rule="assistant_msg_template ends with EOS; no generation prompt",
         thinking=True,
         messages=[{"role": "user", "content": "Say hi."},
                   {"role": "assistant", "reasoning_content": "Easy.", "content": "Hi!"}]),
    dict(name="prefill_wo_eos_chat", rule="assistant_msg_wo_eos_template (wo_eos): continuation prefix",
         messages=[{"role": "user", "content": "Write a haiku."},
                   {"role": "assistant", "content": "Autumn moonlight", "wo_eos": True}]),
    dict(name="prefill_wo_eos_thinking", rule="wo_eos in thinking mode: reasoning closed with </think>",
         thinking=True,
         messages=[{"role": "user", "content": "Write a haiku."},
                   {"role": "assistant", "reasoning_content": "Five-seven-five.", "content": "Autumn", "wo_eos": True}]),
    dict(name="response_format_on_system", rule="response_format_template on a system message",
         messages=[{"role": "system", "content": "Reply in JSON.",
                    "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}},
                   {"role": "user", "content": "Give me an object."}]),
    dict(name="user_then_latest_reminder", rule="render_message transition also before latest_reminder",
         thinking=True,
         messages=[{"role": "user", "content": "Hi"},
                   {"role": "latest_reminder", "content": "2026-11-30"},
                   {"role": "user", "content": "What day is it?"}]),
]

DSML = "｜DSML｜"
EOS = "<｜end▁of▁sentence｜>"

PARSE_CASES = [
    dict(name="thinking_plain", thinking=True, text="Simple arithmetic.</think>2 + 2 = 4." + EOS),
    dict(name="chat_plain", thinking=False, text="Hello there! How can I help?" + EOS),
    dict(name="chat_multiline_unicode", thinking=False,
         text="Line one\n\nLine two — café 東京 🚀\n" + EOS),
    dict(name="thinking_tool_calls", thinking=True,
         text="Need the weather for both.</think>\n\n<" + DSML + "tool_calls>\n"
              "<" + DSML + "invoke name=\"get_weather\">\n"
              "<" + DSML + "parameter name=\"city\" string=\"true\">Paris</" + DSML + "parameter>\n"
              "<" + DSML + "parameter name=\"days\" string=\"false\">3</" + DSML + "parameter>\n"
              "</" + DSML + "invoke>\n"
              "<" + DSML + "invoke name=\"web_search\">\n"
              "<" + DSML + "parameter name=\"query\" string=\"true\">a \"quoted\"\nvalue</" + DSML + "parameter>\n"
              "<" + DSML + "parameter name=\"filters\" string=\"false\">{\"lang\": [\"en\", \"fr\"], \"n\": 2.5}</" + DSML + "parameter>\n"
              "</" + DSML + "invoke>\n"
              "</" + DSML + "tool_calls>" + EOS),
    dict(name="chat_content_then_tool_call", thinking=False,
         text="Let me check.\n\n<" + DSML + "tool_calls>\n"
              "<" + DSML + "invoke name=\"get_weather\">\n"
              "<" + DSML + "parameter name=\"city\" string=\"true\">Oslo</" + DSML + "parameter>\n"
              "</" + DSML + "invoke>\n"
              "</" + DSML + "tool_calls>" + EOS),
    dict(name="chat_zero_argument_call", thinking=False,
         text="\n\n<" + DSML + "tool_calls>\n<" + DSML + "invoke name=\"now\">\n\n</" + DSML + "invoke>\n</"
              + DSML + "tool_calls>" + EOS),
    dict(name="thinking_empty_reasoning", thinking=True, text="</think>Direct answer." + EOS),
]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def attach_tools(messages, tools):
    messages = copy.deepcopy(messages)
    if tools:
        if messages and messages[0].get("role") in ("system", "developer"):
            messages[0]["tools"] = tools
        else:
            messages.insert(0, {"role": "system", "tools": tools})
    return messages


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encoder", required=True, help="official preview encoding_dsv4.py")
    ap.add_argument("--encoder-0731", help="official DeepSeek-V4-Flash-0731 encoding_dsv4.py")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    encoders = {"preview": load(args.encoder, "enc_preview")}
    if args.encoder_0731:
        encoders["0731"] = load(args.encoder_0731, "enc_0731")

    render = []
    for case in CASES:
        profile = case.get("profile", "preview")
        if profile not in encoders:
            print(f"skipping {case['name']}: no {profile} encoder given", file=sys.stderr)
            continue
        enc = encoders[profile]
        thinking = case.get("thinking", False)
        prompt = enc.encode_messages(
            attach_tools(case["messages"], case.get("tools")),
            thinking_mode="thinking" if thinking else "chat",
            drop_thinking=case.get("drop_thinking", True),
            reasoning_effort=case.get("reasoning_effort"),
        )
        render.append({
            "name": case["name"], "rule": case["rule"], "messages": case["messages"],
            "tools": case.get("tools"), "thinking": thinking,
            "reasoning_effort": case.get("reasoning_effort"), "effort_profile": profile,
            "drop_thinking": case.get("drop_thinking", True), "prompt": prompt,
        })

    parse = []
    enc = encoders["preview"]
    for case in PARSE_CASES:
        mode = "thinking" if case["thinking"] else "chat"
        out = enc.parse_message_from_completion_text(case["text"], thinking_mode=mode)
        parse.append({
            "name": case["name"], "thinking": case["thinking"], "text": case["text"],
            "reasoning_content": out["reasoning_content"], "content": out["content"],
            "tool_calls": [{"name": tc["function"]["name"], "arguments": tc["function"]["arguments"]}
                           for tc in out["tool_calls"]],
        })

    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"generator": "tests/reference/chat/gen_chat_goldens.py",
                   "source": "official encoding_dsv4.py (encode_messages, parse_message_from_completion_text)",
                   "render": render, "parse": parse}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(render)} render and {len(parse)} parse cases to {args.out}")


if __name__ == "__main__":
    main()
