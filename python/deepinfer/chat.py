"""DeepSeek-V4 chat format: prompt rendering and model-output parsing.

`render_chat` produces the exact prompt text of DeepSeek's official renderer
(`encoding/encoding_dsv4.py`), BOS included as text. `parse_assistant_output` and
`StreamingOutputParser` turn model output back into reasoning, content and tool calls.
Errors (bad messages, malformed tool-call DSML) raise ValueError. See docs/chat_format.md.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from deepinfer import _core

__all__ = ["render_chat", "parse_assistant_output", "StreamingOutputParser"]


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: not JSON-serialisable: {e}") from None


def render_chat(
    messages: list[dict],
    *,
    thinking: bool = False,
    tools: Iterable[dict] | None = None,
    reasoning_effort: str | None = None,
    add_generation_prompt: bool = True,
    add_bos: bool = True,
    effort_profile: str = "preview",
    drop_thinking: bool = True,
    continue_final_message: bool = False,
) -> str:
    """Render OpenAI-style chat messages into the DeepSeek-V4 prompt string.

    tools: OpenAI function tools (request level); placed after the leading system message.
    reasoning_effort: None, "high" or "max" ("low" too with effort_profile="0731"); only
    thinking mode adds a preamble. effort_profile: "preview" (DeepSeek-V4-Flash/Pro first release)
    or "0731" (DeepSeek-V4-Flash-0731).
    """
    tools_json = _dumps(list(tools), "tools") if tools else ""
    return _core.chat_render(
        _dumps(messages, "messages"), tools_json, bool(thinking), reasoning_effort or "",
        effort_profile, bool(add_generation_prompt), bool(add_bos), bool(drop_thinking),
        bool(continue_final_message))


def parse_assistant_output(text: str, *, thinking: bool = False) -> dict:
    """Parse a whole model output (the text after the prompt).

    Returns {"role": "assistant", "reasoning_content", "content", "tool_calls": [{"type":
    "function", "function": {"name", "arguments"}}], "ended": whether EOS was seen}.
    """
    return _core.chat_parse_output(text, bool(thinking))


class StreamingOutputParser:
    """Incremental parser: feed text as it is generated, in any chunks.

    Each call returns a list of events: {"type": "reasoning" | "content", "text": delta} and
    {"type": "tool_call", "index", "name", "arguments"} (complete once its block closed).
    """

    def __init__(self, *, thinking: bool = False):
        self._parser = _core.AssistantOutputParser(bool(thinking))

    def feed(self, text: str) -> list[dict]:
        return self._parser.feed(text)

    def finish(self) -> list[dict]:
        return self._parser.finish()

    @property
    def ended(self) -> bool:
        """Whether the model's EOS was seen."""
        return self._parser.ended
