"""Engine throughput: output tokens/s for 1, 16 and 64 concurrent requests vs the same requests
run one after another, on the embedded default model (models/default), greedy, fixed lengths.

    PYTHONPATH=build/<dir>/python python bench/engine/bench_throughput.py [--model DIR]
        [--prompt-len 32] [--max-tokens 32] [--concurrency 1,16,64] [--csv out.csv]

The ceiling each figure is compared with is the sequential run of the same requests (ratio =
batched / sequential); greedy with ignore_eos so every request produces exactly --max-tokens
tokens. It also checks results: batched and sequential greedy tokens must be identical.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from deepinfer import LLM, SamplingParams


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(Path(__file__).resolve().parents[2] / "models" /
                                           "default"))
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--max-num-batched-tokens", type=int, default=2048)
    ap.add_argument("--csv", default="")
    args = ap.parse_args()

    levels = [int(x) for x in args.concurrency.split(",")]
    llm = LLM(args.model, max_num_seqs=max(levels), max_model_len=args.prompt_len +
              args.max_tokens + 8, max_num_batched_tokens=args.max_num_batched_tokens)
    print(llm.describe(), file=sys.stderr)
    rng = random.Random(0)
    vocab = llm.vocab_size
    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True)
    llm.generate([[rng.randrange(2, vocab) for _ in range(8)]], params, use_tqdm=False)  # warm

    rows = []
    # host ms/step: schedule + prepare + sample + detokenize + update, i.e. the step minus the
    # model forward, averaged over the batched run's steps.
    print(f"{'requests':>8} {'batched tok/s':>14} {'sequential tok/s':>17} {'ratio':>6} "
          f"{'host ms/step':>12}")
    for n in levels:
        prompts = [[rng.randrange(2, vocab) for _ in range(args.prompt_len)] for _ in range(n)]
        before = llm.stats()
        t0 = time.perf_counter()
        batched = llm.generate(prompts, params, use_tqdm=False)
        t_batched = time.perf_counter() - t0
        after = llm.stats()
        steps = max(after["steps"] - before["steps"], 1)
        host_ms = 1e3 * (after["host_seconds"] - before["host_seconds"]) / steps
        t0 = time.perf_counter()
        sequential = [llm.generate([p], params, use_tqdm=False)[0] for p in prompts]
        t_seq = time.perf_counter() - t0
        tokens = sum(len(o.outputs[0].token_ids) for o in batched)
        assert tokens == n * args.max_tokens
        same = all(a.outputs[0].token_ids == b.outputs[0].token_ids
                   for a, b in zip(batched, sequential))
        b_rate, s_rate = tokens / t_batched, tokens / t_seq
        rows.append((n, b_rate, s_rate, b_rate / s_rate, same, host_ms))
        print(f"{n:>8} {b_rate:>14.1f} {s_rate:>17.1f} {b_rate / s_rate:>6.2f} {host_ms:>12.3f}"
              f"{'' if same else '  MISMATCH: batched != sequential greedy tokens'}")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("requests,batched_tok_s,sequential_tok_s,ratio,identical,host_ms_per_step\n")
            for r in rows:
                f.write(f"{r[0]},{r[1]:.2f},{r[2]:.2f},{r[3]:.3f},{int(r[4])},{r[5]:.4f}\n")
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
