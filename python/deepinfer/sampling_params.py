"""SamplingParams: vLLM's names and defaults, plus DeepInfer's `seq_seed` and `so_args`.

Validation is the C++ `SamplingParams::validate` (include/deepinfer/sampling_params.h), called
when the object is built, so a bad value raises ValueError here, naming the parameter and its
range.
`seed` is accepted as an alias of `seq_seed` (vLLM's name). `so_args` (structured outputs:
`{"schema_type": "regex" | "json" | "json_schema" | "ebnf", "schema": ...}`, see
docs/structured_outputs.md) is checked for shape here; the schema itself is compiled by the
engine against its tokenizer when the request is submitted, so an invalid schema raises
ValueError from `LLM.generate`, with the compiler's message.
"""

from __future__ import annotations

import json
from typing import Any

from deepinfer import _core

__all__ = ["SamplingParams", "SO_SCHEMA_TYPES"]

SO_SCHEMA_TYPES = ("regex", "json", "json_schema", "ebnf")

# Fields sent to the C++ engine (its names).
_ENGINE_FIELDS = (
    "n", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty",
    "frequency_penalty", "max_tokens", "min_tokens", "stop", "stop_token_ids",
    "include_stop_str_in_output", "ignore_eos", "logprobs", "seq_seed", "prompt_logprobs",
    "skip_special_tokens", "detokenize", "truncate_prompt_tokens", "logit_bias",
    "allowed_token_ids",
)


def _check_so_args(so_args: Any) -> None:
    if so_args is None:
        return
    if not isinstance(so_args, dict):
        raise ValueError("so_args must be a dict {'schema_type': ..., 'schema': ...}, got "
                         f"{type(so_args).__name__}")
    unknown = set(so_args) - {"schema_type", "schema"}
    if unknown:
        raise ValueError(f"so_args: unknown key(s) {sorted(unknown)}; expected 'schema_type' "
                         "and 'schema'")
    kind = so_args.get("schema_type")
    if kind not in SO_SCHEMA_TYPES:
        raise ValueError(f"so_args['schema_type'] = {kind!r}: expected one of {SO_SCHEMA_TYPES}")
    if "schema" not in so_args:
        raise ValueError("so_args: missing 'schema'")
    schema = so_args["schema"]
    if kind in ("regex", "ebnf") and not isinstance(schema, str):
        raise ValueError(f"so_args['schema'] must be a string for schema_type {kind!r}")
    if kind in ("json", "json_schema") and not isinstance(schema, (str, dict, bool)):
        raise ValueError(f"so_args['schema'] must be a JSON Schema (dict or JSON text) for "
                         f"schema_type {kind!r}")


class SamplingParams:
    """How to sample one request. Invalid values raise ValueError at construction."""

    def __init__(
        self,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = -1,
        min_p: float = 0.0,
        repetition_penalty: float = 1.0,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        max_tokens: int | None = 16,
        min_tokens: int = 0,
        stop: str | list[str] | None = None,
        stop_token_ids: list[int] | None = None,
        include_stop_str_in_output: bool = False,
        ignore_eos: bool = False,
        logprobs: int | None = None,
        seq_seed: int | None = None,
        seed: int | None = None,
        so_args: dict | None = None,
        prompt_logprobs: int | None = None,
        skip_special_tokens: bool = True,
        detokenize: bool = True,
        truncate_prompt_tokens: int | None = None,
        logit_bias: dict[int, float] | None = None,
        allowed_token_ids: list[int] | None = None,
        **unknown: Any,
    ):
        if unknown:
            raise ValueError(f"SamplingParams: unknown parameter(s) {sorted(unknown)}")
        if seed is not None and seq_seed is not None and seed != seq_seed:
            raise ValueError(f"SamplingParams: seed={seed} and seq_seed={seq_seed} disagree; "
                             "give one (seed is vLLM's name for seq_seed)")
        self.n = n
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.min_p = min_p
        self.repetition_penalty = repetition_penalty
        self.presence_penalty = presence_penalty
        self.frequency_penalty = frequency_penalty
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.stop = [stop] if isinstance(stop, str) else list(stop or [])
        self.stop_token_ids = list(stop_token_ids or [])
        self.include_stop_str_in_output = include_stop_str_in_output
        self.ignore_eos = ignore_eos
        self.logprobs = logprobs
        self.seq_seed = seq_seed if seq_seed is not None else seed
        self.so_args = so_args
        # vLLM's names: the logprobs of the prompt's tokens (RequestOutput.prompt_logprobs),
        # special tokens in the text or not, no text at all (token ids only), keep only the
        # last k prompt tokens.
        self.prompt_logprobs = prompt_logprobs
        self.skip_special_tokens = skip_special_tokens
        self.detokenize = detokenize
        self.truncate_prompt_tokens = truncate_prompt_tokens
        # Added to those tokens' logits before penalties, temperature and filters (vLLM's
        # order), greedy requests too; each bias in [-100, 100] (OpenAI's range).
        if logit_bias is not None and not isinstance(logit_bias, dict):
            raise ValueError("SamplingParams.logit_bias must be a dict {token_id: bias}, got "
                             f"{type(logit_bias).__name__}")
        self.logit_bias = dict(logit_bias) if logit_bias else None
        # Only these token ids can be drawn (vLLM's name); None or empty: all.
        if allowed_token_ids is not None and not isinstance(allowed_token_ids, (list, tuple)):
            raise ValueError("SamplingParams.allowed_token_ids must be a list of token ids, got "
                             f"{type(allowed_token_ids).__name__}")
        self.allowed_token_ids = list(allowed_token_ids) if allowed_token_ids else None
        _core.validate_sampling_params(self.to_engine_dict())
        _check_so_args(so_args)

    @property
    def seed(self) -> int | None:
        return self.seq_seed

    def to_engine_dict(self) -> dict:
        """The fields the C++ engine takes (so_args excluded)."""
        return {k: getattr(self, k) for k in _ENGINE_FIELDS}

    def structured_engine_dict(self) -> dict | None:
        """so_args as the engine takes it: the schema as text (dict schemas are JSON-encoded)."""
        if self.so_args is None:
            return None
        schema = self.so_args["schema"]
        if not isinstance(schema, str):
            schema = json.dumps(schema)
        return {"schema_type": self.so_args["schema_type"], "schema": schema}

    def clone(self, **changes: Any) -> "SamplingParams":
        d = self.to_engine_dict()
        d["so_args"] = self.so_args
        d.update(changes)
        return SamplingParams(**d)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in _ENGINE_FIELDS)
        return f"SamplingParams({fields}, so_args={self.so_args!r})"
