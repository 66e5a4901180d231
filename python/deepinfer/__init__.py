"""DeepInfer: an inference engine for the DeepSeek-V4 model family.

The native core (`deepinfer._core`) is C++; this package is the thin Python face over it:

    from deepinfer.tokenizer import Tokenizer        # byte-level BPE, same ids as HF tokenizers
    from deepinfer.chat import render_chat           # the official DeepSeek-V4 prompt format
    from deepinfer.checkpoint import inspect_model   # validated checkpoint loading
    from deepinfer import LLM, SamplingParams          # offline inference (vLLM-shaped)

`V4_TOKENIZER_DIR` is the bundled DeepSeek-V4 tokenizer (`tokenizer.json`, MIT licence).
"""

from pathlib import Path

__version__ = "0.1.0"

V4_TOKENIZER_DIR = Path(__file__).resolve().parent / "data" / "deepseek_v4"

from deepinfer.llm import LLM  # noqa: E402
from deepinfer.sampling_params import SamplingParams  # noqa: E402

__all__ = ["__version__", "V4_TOKENIZER_DIR", "LLM", "SamplingParams"]
