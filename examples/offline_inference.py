"""Offline inference with DeepInfer, as in the original release:

    python examples/offline_inference.py
    DEEPINFER_HF_MODEL_DIR=/path/to/model python examples/offline_inference.py

The model is DEEPINFER_HF_MODEL_DIR, else the Hugging Face cache copy of
deepseek-ai/DeepSeek-V4.1-Flash-1017, else the small embedded default model (a trained
DeepSeek-V4.1 with its DSpark drafter; a notice says so).

The prompts run twice: plain decoding, then with the checkpoint's own drafter (DSpark on V4.1,
MTP on V4) and confidence-scheduled (varlen) verification, the original engine's scheme. The
sampled text is the same both times (verification is the target's own seeded draw); the
acceptance length and the throughput of both runs are printed side by side.
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


def run(llm: LLM, show: bool):
    start = time.perf_counter()
    outputs = llm.generate(prompts, sampling_params, use_tqdm=False)
    elapsed = time.perf_counter() - start
    generated = sum(len(o.outputs[0].token_ids) for o in outputs)
    if show:
        for output in outputs:
            completion = output.outputs[0]
            print(f"Prompt: {output.prompt!r}\nGenerated: {completion.text!r}"
                  f" ({completion.finish_reason})\n")
    return outputs, generated / elapsed, generated, elapsed


def main() -> None:
    plain_llm = LLM()
    plain, plain_tps, generated, elapsed = run(plain_llm, show=True)
    print(f"{len(prompts)} prompts, {generated} tokens in {elapsed:.2f} s: "
          f"{plain_tps:.1f} output tokens/s (no speculation)")
    spec_llm = LLM(speculative_config={"method": "auto", "num_speculative_tokens": 5},
                   speculative_varlen=True)
    spec, spec_tps, _, _ = run(spec_llm, show=False)
    s = spec_llm.stats()
    steps = max(s.get("spec_verify_steps", 0), 1)
    accept = 1 + s.get("spec_accepted_tokens", 0) / steps
    same = [o.outputs[0].token_ids for o in plain] == [o.outputs[0].token_ids for o in spec]
    print(f"speculative decoding (the checkpoint's drafter, varlen): {spec_tps:.1f} output tokens/s "
          f"({spec_tps / plain_tps:.2f}x), acceptance length {accept:.2f} tokens per verify step, "
          f"same tokens as without: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
