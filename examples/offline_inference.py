"""Offline inference with DeepInfer, as in the original release:

    python examples/offline_inference.py
    DEEPINFER_HF_MODEL_DIR=/path/to/model python examples/offline_inference.py

The model is DEEPINFER_HF_MODEL_DIR, else the Hugging Face cache copy of
deepseek-ai/DeepSeek-V4.1-Flash-1017, else the small embedded default model (a notice says so).
"""

import time

from deepinfer import LLM, SamplingParams

prompts = [
    "In the beginning God created",
    "The meaning of the word light is",
    "And the LORD said unto Moses,",
    "A river is",
]
sampling_params = SamplingParams(temperature=0.7, top_p=0.95, max_tokens=48, seq_seed=42)


def main() -> None:
    llm = LLM()
    start = time.perf_counter()
    outputs = llm.generate(prompts, sampling_params)
    elapsed = time.perf_counter() - start
    generated = 0
    for output in outputs:
        completion = output.outputs[0]
        generated += len(completion.token_ids)
        print(f"Prompt: {output.prompt!r}\nGenerated: {completion.text!r}"
              f" ({completion.finish_reason})\n")
    print(f"{len(prompts)} prompts, {generated} tokens in {elapsed:.2f} s: "
          f"{generated / elapsed:.1f} output tokens/s")


if __name__ == "__main__":
    main()
