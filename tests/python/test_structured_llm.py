"""Structured outputs (`SamplingParams(so_args=...)`) through LLM.generate on models/default.

Random sampling (temperature 1, several seeds) so that the constraint, not the model's
preference, decides the shape: every finished output must parse and validate (JSON Schema),
fully match (regex) or match the grammar's language (EBNF). A schema that does not compile is
a ValueError with the compiler's message; max_tokens still cuts a constrained output
("length", the text then being a prefix of a valid document, not a whole one).
"""

import json
import re

import pytest

from deepinfer import LLM, SamplingParams

SCHEMA = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "enum": ["red", "green", "blue"]},
        "count": {"type": "integer", "minimum": 3, "maximum": 250},
        "ok": {"type": "boolean"},
    },
    "required": ["colour", "count", "ok"],
}
SEEDS = [1, 2, 3, 4]


@pytest.fixture(scope="module")
def llm(repo_dir):
    return LLM(str(repo_dir / "models" / "v4-small"), max_model_len=512)


def sp(so_args, seed, **kw):
    kw.setdefault("max_tokens", 64)
    return SamplingParams(temperature=1.0, seed=seed, so_args=so_args, **kw)


@pytest.mark.parametrize("schema_type", ["json", "json_schema"])
def test_json_schema_outputs_parse_and_validate(llm, schema_type):
    for schema in (SCHEMA, json.dumps(SCHEMA)):  # dict or JSON text
        outs = llm.generate(["Give me a record:"] * len(SEEDS),
                            [sp({"schema_type": schema_type, "schema": schema}, s) for s in SEEDS],
                            use_tqdm=False)
        values = []
        for o in outs:
            c = o.outputs[0]
            assert c.finish_reason == "stop", (c.text, c.error)
            v = json.loads(c.text)
            assert set(v) == {"colour", "count", "ok"}
            assert v["colour"] in ("red", "green", "blue")
            assert isinstance(v["count"], int) and 3 <= v["count"] <= 250
            assert isinstance(v["ok"], bool)
            values.append(v)
        assert len({json.dumps(v) for v in values}) > 1  # the seeds matter
    jsonschema = pytest.importorskip("jsonschema")
    for v in values:
        jsonschema.validate(v, SCHEMA)


def test_regex_outputs_fullmatch_with_n_samples(llm):
    pattern = r"[A-Z][a-z]{2,8} [0-9]{1,3}"
    outs = llm.generate(["Name and age:"] * 3,
                        [sp({"schema_type": "regex", "schema": pattern}, s, n=2)
                         for s in SEEDS[:3]],
                        use_tqdm=False)
    texts = [c.text for o in outs for c in o.outputs]
    assert len(texts) == 6
    for o in outs:
        for c in o.outputs:
            assert c.finish_reason == "stop", (c.text, c.error)
            assert re.fullmatch(pattern, c.text), c.text
    assert len(set(texts)) > 1


def test_ebnf_outputs_match_the_grammar(llm):
    grammar = 'root ::= item ("," item){0,3}\nitem ::= ("cat" | "dog" | "bird") [0-9]'
    outs = llm.generate(["Animals:"] * len(SEEDS),
                        [sp({"schema_type": "ebnf", "schema": grammar}, s) for s in SEEDS],
                        use_tqdm=False)
    for o in outs:
        c = o.outputs[0]
        assert c.finish_reason == "stop", (c.text, c.error)
        assert re.fullmatch(r"(cat|dog|bird)[0-9](,(cat|dog|bird)[0-9]){0,3}", c.text), c.text


def test_constrained_and_free_requests_share_a_batch(llm):
    free = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    alone = llm.generate(["In the beginning"], free, use_tqdm=False)[0].outputs[0]
    outs = llm.generate(["In the beginning", "Pick:"],
                        [free, sp({"schema_type": "regex", "schema": "(left|right)"}, 5)],
                        use_tqdm=False)
    assert outs[0].outputs[0].token_ids == alone.token_ids  # unconstrained request unaffected
    assert outs[1].outputs[0].text in ("left", "right")


@pytest.mark.parametrize("so_args, needle", [
    ({"schema_type": "regex", "schema": "[a-z"}, "unterminated character set"),
    ({"schema_type": "json", "schema": {"type": "object", "not": {}}}, "keyword 'not'"),
    ({"schema_type": "json", "schema": "{not json"}, "not valid JSON"),
    ({"schema_type": "ebnf", "schema": "root ::= missing"}, "undefined rule 'missing'"),
])
def test_invalid_schema_is_value_error_and_engine_keeps_serving(llm, so_args, needle):
    good = sp({"schema_type": "regex", "schema": "[0-9]{2}"}, 1)
    with pytest.raises(ValueError, match=needle):
        llm.generate(["A", "B"], [good, sp(so_args, 1)], use_tqdm=False)
    # The valid request of the failed call was aborted; the engine still serves.
    out = llm.generate(["A"], good, use_tqdm=False)[0].outputs[0]
    assert out.finish_reason == "stop" and re.fullmatch("[0-9]{2}", out.text)


def test_max_tokens_truncates_with_length(llm):
    # A document needs more than 4 tokens: the output is cut, so it is only a prefix.
    outs = llm.generate(["Record:"], sp({"schema_type": "json", "schema": SCHEMA}, 3,
                                        max_tokens=4), use_tqdm=False)
    c = outs[0].outputs[0]
    assert c.finish_reason == "length"
    assert len(c.token_ids) == 4
    head = '{"colour":"'
    assert c.text.startswith(head) or head.startswith(c.text), c.text
    with pytest.raises(json.JSONDecodeError):
        json.loads(c.text)
