"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/TARGET/) and dictionaries
(tests/fuzz/dict/TARGET.dict), all from the project's own test files:

  safetensors     small valid images (F32/BF16 with metadata, FP8 with an E8M0 scale and U8, empty)
  model_config    every config.json of the committed checkpoints; dictionary: their keys
  tokenizer_json  the small tokenizer.json files of the tests (not the 7 MB real one) and the
                  tiny one of tests/unit/tokenizer/errors_test.cc; dictionary: their keys and types
  regex           the patterns of tests/data/structured/regex_cases.json and of the structured
                  error tests; dictionary: regex syntax
  json_schema     the schemas of json_schema_cases.json and a spread of suite_cases.json;
                  dictionary: their keys
  gbnf            the grammars of ebnf_cases.json, the structured unit tests and the Python tests;
                  dictionary: GBNF syntax
  chat_messages   the render goldens' requests (tests/data/chat/v4_goldens.json); dictionary:
                  their keys and roles
  dsml            the parse goldens' outputs (a flags byte, then the text; copies cut by 0xFF
                  bytes inside markers); dictionary: the markers
  http_request    request bodies shaped like tests/unit/server's and the Python tests' (a kind
                  byte, then the body), and raw HTTP requests; dictionary: fields and HTTP syntax

Rerunning rewrites the seeds and dictionaries; inputs committed as regression tests (any file
whose name does not start with "seed_" or a test-data path) are left alone.

    python3 tests/fuzz/make_seeds.py
"""
import codecs
import json
import pathlib
import re
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUZZ = ROOT / "tests" / "fuzz"


def image(tensors, meta=None):
    header, data = {}, b""
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + nbytes]}
        data += bytes((i * 37) % 251 for i in range(nbytes))
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def write_dict(name, entries):
    """A libFuzzer dictionary: one quoted entry a line, bytes outside printable ASCII as \\xNN."""
    def quote(b):
        return '"' + "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\x{c:02x}"
                             for c in b) + '"'
    entries = {e.encode() if isinstance(e, str) else e for e in entries}
    d = FUZZ / "dict"
    d.mkdir(exist_ok=True)
    (d / f"{name}.dict").write_text("".join(quote(e) + "\n" for e in sorted(entries)))


def corpus(name):
    c = FUZZ / "corpus" / name
    c.mkdir(parents=True, exist_ok=True)
    return c


def json_keys(v, keys):
    if isinstance(v, dict):
        for k, x in v.items():
            keys.add(k)
            json_keys(x, keys)
    elif isinstance(v, list):
        for x in v:
            json_keys(x, keys)
    return keys


def cpp_strings(path, call):
    """The string-literal arguments of `call("...")` in a C++ test file, unescaped."""
    text = path.read_text()
    return [codecs.decode(m, "unicode_escape") for m in
            re.findall(re.escape(call) + r'\("((?:[^"\\]|\\.)*)"\)', text)]


def tokenizer_seeds():
    c = corpus("tokenizer_json")
    keys = set()
    files = sorted((ROOT / "tests" / "data" / "engram" / "tokenizers").glob("*/tokenizer.json"))
    files.append(ROOT / "tests" / "data" / "model" / "v41_tokenizer" / "tokenizer.json")
    for f in files:
        rel = f.relative_to(ROOT).as_posix().replace("/", "_")
        text = f.read_text()
        (c / rel).write_text(text)
        doc = json.loads(text)
        json_keys({k: v for k, v in doc.items() if k != "model"}, keys)
        keys.update(k for k in doc.get("model", {}) if k not in ("vocab", "merges"))
    errors_test = (ROOT / "tests" / "unit" / "tokenizer" / "errors_test.cc").read_text()
    tiny = re.search(r'kTiny = R"\((.*?)\)";', errors_test, re.S).group(1)
    (c / "seed_errors_test_tiny.json").write_text(tiny)
    words = [f'"{k}"' for k in keys] + [
        '"BPE"', '"ByteLevel"', '"Sequence"', '"Split"', '"Isolated"', '"Regex"', '"WordPiece"',
        '"Metaspace"', '"NFKC"', "\u0120", "null", "true", "false", "{", "}", "[", "]", ":",
        '"a b"', '["a", "b"]', "1073741824", "-1"]
    write_dict("tokenizer_json", words)


def structured_seeds():
    data = ROOT / "tests" / "data" / "structured"
    unit = ROOT / "tests" / "unit" / "structured"
    c = corpus("regex")
    patterns = [e["pattern"] for e in json.loads((data / "regex_cases.json").read_text())]
    patterns += cpp_strings(unit / "errors_test.cc", "grammar_from_regex")
    for i, pat in enumerate(patterns):
        (c / f"seed_{i:02d}.re").write_text(pat)
    write_dict("regex", ["(", ")", "(?:", "(?P<n>", "(?<n>", "(?=", "(?!", "(?i)", "|", "*", "+",
                         "?", "*?", "+?", "{2}", "{2,}", "{,3}", "{1,3}", "{0,512}", "[", "[^",
                         "]", "a-z", "^", "$", ".", "\\d", "\\w", "\\s", "\\D", "\\W", "\\S",
                         "\\b", "\\1", "\\x41", "\\u00e9", "\\U0001F600", "\\n", "\\0",
                         "é", "🚀"])

    c = corpus("json_schema")
    keys = set()
    schemas = [e["schema"] for e in json.loads((data / "json_schema_cases.json").read_text())]
    suite = json.loads((data / "suite_cases.json").read_text())
    schemas += [e["schema"] for e in suite[::6]]
    for i, sch in enumerate(schemas):
        (c / f"seed_{i:02d}.json").write_text(sch)
        json_keys(json.loads(sch), keys)
    for e in suite:
        json_keys(json.loads(e["schema"]), keys)
    types = ['"object"', '"array"', '"string"', '"integer"', '"number"', '"boolean"', '"null"']
    write_dict("json_schema", [f'"{k}"' for k in keys if len(k) < 40] + types +
               ["{", "}", "[", "]", ":", ",", "true", "false", "null", "-1", "1e308", "0.5",
                '"#/$defs/a"', '"date-time"', '"email"', '"uuid"'])

    c = corpus("gbnf")
    grammars = [e["grammar"] for e in json.loads((data / "ebnf_cases.json").read_text())]
    grammars += cpp_strings(unit / "errors_test.cc", "grammar_from_ebnf")
    py = (ROOT / "tests" / "python" / "test_structured_llm.py").read_text()
    grammars += [codecs.decode(g, "unicode_escape")
                 for g in re.findall(r"'(root ::=[^']*)'", py)]
    for i, g in enumerate(grammars):
        (c / f"seed_{i:02d}.gbnf").write_text(g)
    write_dict("gbnf", ["::=", "root ::= ", "\n", "|", "(", ")", "*", "+", "?", "{2}", "{1,3}",
                        "{,4}", "{2,}", "[", "[^", "]", "a-z", ".", '"', "'", "# ", "\\x41",
                        "\\u00e9", "\\U0001F600", "\\n", "\\t", "\\\\", "\\]", "\\[",
                        "ws", "item", "é"])


def chat_seeds():
    goldens = json.loads((ROOT / "tests" / "data" / "chat" / "v4_goldens.json").read_text())
    c = corpus("chat_messages")
    keys, values = set(), set()
    for e in goldens["render"]:
        doc = {"messages": e["messages"]}
        if e["tools"]:
            doc["tools"] = e["tools"]
        (c / f"seed_{e['name']}.json").write_text(json.dumps(doc, ensure_ascii=False))
        json_keys(doc, keys)
        for m in e["messages"]:
            values.update(v for k, v in m.items() if k in ("role", "task") and isinstance(v, str))
    write_dict("chat_messages", [f'"{k}"' for k in keys] + [f'"{v}"' for v in values] +
               ['"function"', "{", "}", "[", "]", ":", ",", "null", "true", "false", '"{}"'])

    c = corpus("dsml")
    markers = ["</think>", "<think>", "<｜end▁of▁sentence｜>", "<｜begin▁of▁sentence｜>",
               "\n\n<｜DSML｜tool_calls>\n", "</｜DSML｜tool_calls>", '<｜DSML｜invoke name="',
               "</｜DSML｜invoke>\n", '<｜DSML｜parameter name="', '" string="true">',
               '" string="false">', "</｜DSML｜parameter>\n", "｜DSML｜"]
    for e in goldens["parse"]:
        flags = bytes([1 if e["thinking"] else 0])
        text = e["text"].encode()
        (c / f"seed_{e['name']}").write_bytes(flags + text)
        # The same, streamed: cut inside every marker (after its first byte) and inside the
        # first multi-byte character, with tool-call streaming on.
        cuts = sorted({m.start() + 1 for mk in markers
                       for m in re.finditer(re.escape(mk.encode()), text)} |
                      {i + 1 for i, b in enumerate(text[:-1]) if b >= 0xc0})[:8]
        pieces, last = [], 0
        for cut in cuts:
            pieces.append(text[last:cut])
            last = cut
        pieces.append(text[last:])
        (c / f"seed_{e['name']}_streamed").write_bytes(bytes([flags[0] | 2]) +
                                                      b"\xff".join(pieces))
    write_dict("dsml", markers + ["\n", '"', "{", "}", "你", b"\xff", b"\xe4", b"\x00", b"\x01",
                                  b"\x02", b"\x03"])


def http_seeds():
    c = corpus("http_request")
    msgs = [{"role": "user", "content": "hi"}]
    tools = [{"type": "function", "function": {
        "name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"},
                                             "days": {"type": "integer"}},
            "required": ["city"]}}}]
    chat = {
        "basic": {"messages": msgs},
        "options": {"messages": msgs, "max_completion_tokens": 7, "seed": 5, "logprobs": True,
                    "top_logprobs": 2, "reasoning_effort": "high", "stop": "x", "stream": True,
                    "stream_options": {"include_usage": True}, "temperature": 0.7,
                    "top_p": 0.9, "top_k": 20, "min_p": 0.05, "n": 2},
        "json_object": {"messages": msgs, "chat_template_kwargs": {"thinking": True},
                        "response_format": {"type": "json_object"}},
        "json_schema": {"messages": msgs, "response_format": {
            "type": "json_schema", "json_schema": {"name": "x", "schema": {
                "type": "object", "properties": {"a": {"type": "integer"}}}}}},
        "guided_regex": {"messages": msgs, "guided_regex": "[a-z]+\\d{2}"},
        "guided_grammar": {"messages": msgs, "guided_grammar": 'root ::= "yes" | "no"'},
        "so_args": {"messages": msgs, "so_args": {"schema_type": "regex", "schema": "a|b"}},
        "tools_required": {"messages": msgs, "tools": tools, "tool_choice": "required"},
        "tools_named": {"messages": msgs, "tools": tools,
                        "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        "tool_turns": {"messages": [
            {"role": "system", "content": "be brief"}, {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "", "reasoning_content": "look it up",
             "tool_calls": [{"id": "c1", "type": "function", "function": {
                 "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
            "tools": tools, "continue_final_message": False},
    }
    completion = {
        "text": {"prompt": "Hello", "max_tokens": 5, "echo": True, "logprobs": 2},
        "ids": {"prompt": [1, 2, 3], "max_tokens": 0, "echo": True, "prompt_logprobs": 1},
        "batch": {"prompt": ["a", [4, 5]], "best_of": 1, "n": 1, "suffix": ""},
    }
    messages = {
        "basic": {"max_tokens": 8, "messages": msgs},
        "blocks": {"max_tokens": 8, "system": [{"type": "text", "text": "sys"}],
                   "thinking": {"type": "enabled", "budget_tokens": 100},
                   "stop_sequences": ["END"], "messages": [
                       {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
                       {"role": "assistant", "content": [
                           {"type": "thinking", "thinking": "hmm"},
                           {"type": "tool_use", "id": "t1", "name": "get_weather",
                            "input": {"city": "Oslo"}}]},
                       {"role": "user", "content": [
                           {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]}],
                   "tools": [{"name": "get_weather", "input_schema": tools[0]["function"]
                              ["parameters"]}], "tool_choice": {"type": "any"}},
    }
    keys = set()
    for kind, docs in ((0, chat), (1, completion), (2, messages)):
        prefix = ["chat", "completions", "messages"][kind]
        for name, doc in docs.items():
            body = json.dumps(doc).encode()
            (c / f"seed_{prefix}_{name}").write_bytes(bytes([kind]) + body)
            json_keys(doc, keys)
    raw = {
        "chat": (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 b"application/json\r\nContent-Length: %d\r\n\r\n%s"),
        "messages_query": (b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Length: %d\r\n\r\n%s"),
    }
    body = json.dumps(chat["options"]).encode()
    (c / "seed_http_chat").write_bytes(b"\x03" + raw["chat"] % (len(body), body))
    body = json.dumps(messages["basic"]).encode()
    (c / "seed_http_messages_query").write_bytes(b"\x03" + raw["messages_query"] %
                                                 (len(body), body))
    body = json.dumps(completion["text"]).encode()
    chunked = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
               b"Expect: 100-continue\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    (c / "seed_http_completions_chunked").write_bytes(b"\x03" + chunked)
    (c / "seed_http_health").write_bytes(b"\x03GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    write_dict("http_request", [f'"{k}"' for k in keys] + [
        "POST ", "GET ", " HTTP/1.1\r\n", " HTTP/1.0\r\n", "\r\n", "\r\n\r\n", "Host: x\r\n",
        "Content-Length: ", "Transfer-Encoding: chunked\r\n", "Expect: 100-continue\r\n",
        "Connection: close\r\n", "/v1/chat/completions", "/v1/completions", "/v1/messages",
        "?a=b", '"user"', '"assistant"', '"system"', '"tool"', '"function"', '"text"',
        '"tool_use"', '"tool_result"', '"thinking"', '"json_schema"', '"json_object"',
        '"required"', '"auto"', '"none"', '"regex"', '"ebnf"', '"json"', "null", "true", "false",
        "-1", "1e400", "2147483648", "{", "}", "[", "]", ":", ","])


def main():
    st = FUZZ / "corpus" / "safetensors"
    st.mkdir(parents=True, exist_ok=True)
    (st / "seed_basic.safetensors").write_bytes(
        image({"a.weight": ("F32", [2, 3], 24), "b": ("BF16", [4], 8)}, {"format": "pt"}))
    (st / "seed_fp8.safetensors").write_bytes(
        image({"w": ("F8_E4M3", [4, 4], 16), "w.scale": ("F8_E8M0", [1, 1], 1),
               "e": ("U8", [3], 3)}))
    (st / "seed_empty.safetensors").write_bytes(image({}))

    mc = FUZZ / "corpus" / "model_config"
    mc.mkdir(parents=True, exist_ok=True)
    keys = set()
    configs = sorted((ROOT / "tests" / "data").rglob("config.json")) + [
        ROOT / "models" / "default" / "config.json"]
    for f in configs:
        rel = f.relative_to(ROOT).as_posix().replace("/", "_")
        (mc / rel).write_bytes(f.read_bytes())

        def walk(v):
            if isinstance(v, dict):
                for k, x in v.items():
                    keys.add(k)
                    walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)
        walk(json.loads(f.read_text()))
    d = FUZZ / "dict"
    d.mkdir(exist_ok=True)
    (d / "model_config.dict").write_text(
        "".join(f'"\\"{k}\\""\n' for k in sorted(keys)) + '"{"\n"}"\n"["\n"]"\n"null"\n"true"\n')

    tokenizer_seeds()
    structured_seeds()
    chat_seeds()
    http_seeds()


if __name__ == "__main__":
    main()
