"""A first tour of DeepInfer through its Python API (run by scripts/quickstart.sh).

1. Render a conversation in the DeepSeek-V4 chat format (official renderer rules).
2. Tokenize it with the real DeepSeek-V4 tokenizer bundled with the package, and stream the ids
   back to text with the incremental detokenizer.
3. Inspect a DeepSeek-V4 checkpoint directory: layer kinds, parameters per dtype, KV bytes/token.

Usage: python examples/quickstart.py [MODEL_DIR]
MODEL_DIR defaults to DEEPINFER_HF_MODEL_DIR, else the small test checkpoint in this repository.
"""

import os
import pathlib
import sys
import time

import deepinfer
from deepinfer.chat import parse_assistant_output, render_chat
from deepinfer.checkpoint import inspect_model
from deepinfer.tokenizer import IncrementalDetokenizer, Tokenizer

REPO = pathlib.Path(__file__).resolve().parents[1]


def main() -> int:
    messages = [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Japan? 日本の首都は？"},
    ]
    prompt = render_chat(messages, thinking=True)
    print("== DeepSeek-V4 prompt (thinking mode) ==")
    print(prompt)

    t0 = time.perf_counter()
    tok = Tokenizer.from_file(deepinfer.V4_TOKENIZER_DIR)
    load_s = time.perf_counter() - t0
    ids = tok.encode(prompt)
    print(f"\n== {len(ids)} token ids (vocab {tok.vocab_size}, loaded in {load_s:.2f} s) ==")
    print(ids)
    detok = IncrementalDetokenizer(tok)
    streamed = "".join(detok.add(i) for i in ids) + detok.flush()
    assert streamed == prompt, "streaming detokenization must reproduce the prompt"
    print("streamed detokenization reproduces the prompt: yes")

    reply = "The user asks for Japan's capital.</think>Tokyo (東京)."
    print("\n== parsing a model reply ==")
    print(parse_assistant_output(reply, thinking=True))

    model_dir = (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DEEPINFER_HF_MODEL_DIR")
                 or REPO / "tests" / "data" / "model" / "v4_tiny_a" / "official_quant")
    print(f"\n== checkpoint {model_dir} ==")
    report = inspect_model(model_dir)
    kinds, params, kv = report["layer_kinds"], report["parameters"], report["kv_cache"]
    print(f"names: {report['name_family']}, attention: {kinds['attention']}, MoE: {kinds['moe']}")
    print(f"parameters: {params['total']:,} stored in {params['bytes']:,} bytes")
    print(f"KV cache: {kv['elements_per_token']} elements per token of context")
    return 0


if __name__ == "__main__":
    sys.exit(main())
