"""Checkpoint inspection and config parsing (the C++ loader in src/io, seen from Python).

    from deepinfer.checkpoint import inspect_model, load_config
    report = inspect_model("/models/DeepSeek-V4-Flash")   # same content as `deepinfer inspect --json`
    config = load_config("/models/DeepSeek-V4-Flash")     # the parsed config.json (either naming)

Errors are raised with the loader's message: FileNotFoundError for a missing directory, file or
shard; ValueError for anything malformed (bad config field, corrupt safetensors, missing or
mis-shaped tensor, unsupported model_type).
"""

from __future__ import annotations

import json
import os
from typing import Any

from deepinfer import _core

__all__ = ["inspect_model", "load_config"]


def inspect_model(model_dir: str | os.PathLike, config_only: bool = False) -> dict[str, Any]:
    """Opens and validates a DeepSeek-V4 model directory and describes it: config summary, layer
    kinds, parameters and bytes per dtype and group, quantization, KV cache per token, MTP
    availability, warnings. With config_only, reads config.json alone (no tensors)."""
    return json.loads(_core.inspect_model_json(os.fspath(model_dir), config_only))


def load_config(path: str | os.PathLike) -> dict[str, Any]:
    """Parses config.json (a file, or a model directory holding one) in either the Hugging Face or
    the official inference naming into the typed config DeepInfer runs with."""
    return json.loads(_core.load_config_json(os.fspath(path)))
