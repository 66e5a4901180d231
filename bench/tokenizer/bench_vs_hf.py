#!/usr/bin/env python3
"""Encode throughput: deepinfer's tokenizer vs Hugging Face `tokenizers`, one thread each.

    python3 bench/tokenizer/bench_vs_hf.py --bench build/tok/bench/tokenizer/tokenizer_bench \
        [--tokenizer PATH] [--corpus tests/data/tokenizer/corpus.bin] [--only prose/,code/,cjk/]
        [--rounds 5] [--out results.json]

--only keeps the documents whose names start with one of the prefixes: the whole corpus has
pathological documents (3000-space runs, 5000-letter words, random code points) on which HF's
backtracking regexes are very slow, so also measure natural text alone.

How: HF runs in this process with RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false, encoding
the documents one at a time with `Tokenizer.encode` (no batching, so no parallelism); ours is
the C++ `tokenizer_bench` binary (one thread, `Tokenizer::encode_into` per document), run as a
subprocess. Both: the same documents (invalid UTF-8 repaired with errors="replace" for HF, as
our encoder does internally), one cold round, then `rounds` timed warm rounds (both keep a word
cache). We use a C++ binary rather than our Python bindings so that the figure is the C++
encoder's, without Python-call or list-conversion overhead; HF's Python call overhead is small
next to its per-document work but does count against it. Prints MB/s, tokens/s and the ratio;
writes JSON (and a CSV beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "reference" / "tokenizer"))
from make_vectors import default_tokenizer, read_corpus  # noqa: E402


def bench_hf(tokenizer_path: str, docs: list[str], rounds: int) -> dict:
    from tokenizers import Tokenizer

    t0 = time.perf_counter()
    tok = Tokenizer.from_file(tokenizer_path)
    load_s = time.perf_counter() - t0
    nbytes = sum(len(d.encode()) for d in docs)

    def one_round():
        n = 0
        for d in docs:
            n += len(tok.encode(d, add_special_tokens=False).ids)
        return n

    t0 = time.perf_counter()
    tokens = one_round()
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(rounds):
        one_round()
    warm = (time.perf_counter() - t0) / rounds
    mb = nbytes / 1e6
    return {"impl": "hf_tokenizers", "load_s": load_s, "docs": len(docs), "bytes": nbytes, "tokens": tokens,
            "cold_mb_s": mb / cold, "cold_tokens_s": tokens / cold, "warm_mb_s": mb / warm,
            "warm_tokens_s": tokens / warm, "rounds": rounds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="path of the tokenizer_bench binary")
    ap.add_argument("--tokenizer", default=default_tokenizer())
    ap.add_argument("--corpus", default=str(REPO / "tests" / "data" / "tokenizer" / "corpus.bin"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated document name prefixes, e.g. prose/,code/,cjk/")
    ap.add_argument("--out", default="tokenizer_bench.json")
    args = ap.parse_args()

    prefixes = tuple(p for p in args.only.split(",") if p)
    raw_docs = [t for name, t in read_corpus(pathlib.Path(args.corpus)) if not prefixes or name.startswith(prefixes)]
    # Both sides encode the same (repaired) text.
    docs = [t.decode("utf-8", errors="replace") for t in raw_docs]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = pathlib.Path(tmp) / "corpus.bin"
        from make_vectors import write_corpus
        write_corpus(corpus, [(f"d{i}", d.encode()) for i, d in enumerate(docs)])
        ours_json = pathlib.Path(tmp) / "ours.json"
        subprocess.run([args.bench, "--tokenizer", args.tokenizer, "--corpus", str(corpus), "--rounds",
                        str(args.rounds), "--json", str(ours_json)], check=True)
        ours = json.loads(ours_json.read_text())
    hf = bench_hf(args.tokenizer, docs, args.rounds)
    if hf["tokens"] != ours["tokens"]:
        print(f"warning: token counts differ: ours {ours['tokens']}, HF {hf['tokens']}", file=sys.stderr)

    print(f"\ncorpus: {args.corpus}{' [' + args.only + ']' if args.only else ''} ({len(docs)} documents, {hf['bytes'] / 1e6:.3f} MB, {hf['tokens']} tokens), one thread")
    print(f"{'':22}{'load s':>8}{'cold MB/s':>11}{'warm MB/s':>11}{'warm Mtok/s':>13}")
    for r in (ours, hf):
        print(f"{r['impl']:22}{r['load_s']:8.3f}{r['cold_mb_s']:11.2f}{r['warm_mb_s']:11.2f}{r['warm_tokens_s'] / 1e6:13.3f}")
    ratio_warm = ours["warm_mb_s"] / hf["warm_mb_s"]
    ratio_cold = ours["cold_mb_s"] / hf["cold_mb_s"]
    print(f"ratio deepinfer / HF: warm {ratio_warm:.2f}x, cold {ratio_cold:.2f}x")

    result = {"corpus": args.corpus, "only": args.only, "results": [ours, hf], "ratio_warm": ratio_warm, "ratio_cold": ratio_cold}
    out = pathlib.Path(args.out)
    out.write_text(json.dumps(result, indent=2) + "\n")
    with open(out.with_suffix(".csv"), "w") as f:
        keys = ["impl", "load_s", "docs", "bytes", "tokens", "cold_mb_s", "cold_tokens_s", "warm_mb_s", "warm_tokens_s", "rounds"]
        f.write(",".join(keys) + "\n")
        for r in (ours, hf):
            f.write(",".join(str(r[k]) for k in keys) + "\n")
    print(f"wrote {out} and {out.with_suffix('.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
