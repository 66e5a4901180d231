"""Prefix caching through the engine: requests sharing a long system prompt (and multi-turn
follow-ups extending earlier prompts), with prefix caching on vs off, on the embedded default
model. The peer is the same engine with caching off in the same run; figures: wall time,
prompt tokens computed, hit tokens, and the speed-up. Also checks results: every request's
tokens and logprobs must be identical with and without caching.

    python bench/engine/bench_prefix.py [--model DIR] [--system-len 1024] [--users 16]
        [--turns 2] [--block 64] [--max-tokens 16] [--json out.json]

Requests run with max_num_seqs = --concurrency (default 4): the first wave computes the system
prompt, later ones hit it. A turn-2 request is turn 1's prompt + its output + a new user
message, so it also reuses the turn-1 blocks.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from deepinfer import LLM, SamplingParams


def run(model: str, cached: bool, args, prompts_t1, vocab):
    llm = LLM(model, max_num_seqs=args.concurrency, kv_block_size=args.block,
              max_model_len=args.system_len + 512, enable_prefix_caching=cached)
    params = [SamplingParams(temperature=0.8, max_tokens=args.max_tokens, ignore_eos=True,
                             seq_seed=100 + i, logprobs=1) for i in range(len(prompts_t1))]
    t0 = time.perf_counter()
    outs = llm.generate(prompts_t1, params, use_tqdm=False)
    tokens = [o.outputs[0].token_ids for o in outs]
    logprobs = [[lp for lp in o.outputs[0].logprobs] for o in outs]
    rng = random.Random(1)
    for _ in range(args.turns - 1):  # the next turn extends each conversation
        prompts = [p + t + [rng.randrange(3, vocab) for _ in range(8)]
                   for p, t in zip(prompts_t1, tokens)]
        outs = llm.generate(prompts, params, use_tqdm=False)
        tokens += [o.outputs[0].token_ids for o in outs]
        logprobs += [[lp for lp in o.outputs[0].logprobs] for o in outs]
    seconds = time.perf_counter() - t0
    return seconds, tokens, logprobs, llm.stats()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(Path(__file__).resolve().parents[2] / "models" /
                                           "default"))
    ap.add_argument("--system-len", type=int, default=1024)
    ap.add_argument("--users", type=int, default=16)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    probe = LLM(args.model, max_model_len=64)
    vocab = probe.vocab_size
    del probe
    rng = random.Random(0)
    system = [rng.randrange(3, vocab) for _ in range(args.system_len)]
    prompts = [system + [rng.randrange(3, vocab) for _ in range(12)] for _ in range(args.users)]
    off = run(args.model, False, args, prompts, vocab)
    on = run(args.model, True, args, prompts, vocab)
    same = off[1] == on[1] and off[2] == on[2]
    res = {
        "system_len": args.system_len, "users": args.users, "turns": args.turns,
        "block": args.block, "identical_outputs": same,
        "off": {"seconds": off[0], "prompt_tokens": off[3]["prompt_tokens"]},
        "on": {"seconds": on[0], "prompt_tokens": on[3]["prompt_tokens"],
               "prefix_hit_tokens": on[3]["prefix_hit_tokens"],
               "prefix_restores": on[3]["prefix_restores"],
               "prefix_recomputes": on[3]["prefix_recomputes"]},
        "speedup": off[0] / on[0],
    }
    print(f"{'':12} {'seconds':>9} {'prompt tokens computed':>24} {'hit tokens':>11}")
    print(f"{'cache off':12} {off[0]:9.2f} {off[3]['prompt_tokens']:24d} {0:11d}")
    print(f"{'cache on':12} {on[0]:9.2f} {on[3]['prompt_tokens']:24d} "
          f"{on[3]['prefix_hit_tokens']:11d}")
    print(f"speed-up (off / on): {res['speedup']:.2f}x; outputs identical: {same}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
