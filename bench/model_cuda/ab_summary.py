#!/usr/bin/env python3
"""The A/B table of one switch (tools/gpu/run_model_cuda.sh, stage `ab`).

Reads the JSON that decode_bench and draft_bench write with --out, named
ab_{decode,draft}_{a,b}_{round}.json (a: the default, b: with AB_FLAG / AB_ENV), and prints per
bench, batch and metric the median of each side over the rounds, B/A, and every round's value, so
a difference can be read against the spread of the rounds (a side's min-max). --csv writes the
same rows.

Metrics: decode_bench's step_ms (logits copied to pageable host memory: its speed varies by
process, so compare GPU-sampled steps where the switch does not touch the copy),
gpu_sampled_step_ms, eager_step_ms and kernel_launches_per_step, and as batch 0 the process's
device-to-host rate d2h_gbps (and into pinned memory, d2h_pinned_gbps); draft_bench's draft_ms,
decode_ms, verify_ms and their launch counts.

  python3 bench/model_cuda/ab_summary.py OUT_DIR [--csv ab.csv]
"""
import argparse
import json
import re
import statistics
import sys
from pathlib import Path

DECODE = ("step_ms", "gpu_sampled_step_ms", "eager_step_ms", "kernel_launches_per_step")
DRAFT = ("draft_ms", "decode_ms", "verify_ms", "draft_launches", "decode_launches",
         "verify_launches")
NAME = re.compile(r"^ab_(decode|draft)_([ab])_(\d+)\.json$")


def batches_of(bench: str, doc: dict) -> list[dict]:
    return doc.get("decode", []) if bench == "decode" else doc.get("batches", [])


def collect(out_dir: Path) -> dict:
    """{(bench, batch, metric): {"a": [...], "b": [...]}} in round order."""
    values: dict = {}
    files = []
    for p in out_dir.iterdir():
        m = NAME.match(p.name)
        if m:
            files.append((int(m.group(3)), m.group(1), m.group(2), p))
    for _, bench, side, p in sorted(files):
        try:
            doc = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as e:
            print(f"ab_summary: skipping {p.name}: {e}", file=sys.stderr)
            continue
        # The logits' copy speed of the process (decode_bench's step_ms depends on it) and the
        # pinned-memory rate beside it: batch 0.
        for rate in ("d2h_gbps", "d2h_pinned_gbps"):
            if bench == "decode" and isinstance(doc.get(rate), (int, float)):
                values.setdefault((bench, 0, rate), {"a": [], "b": []})[side].append(
                    float(doc[rate]))
        # With AB_PREFILL / AB_LONG_CONTEXT (run_model_cuda.sh's ab stage): the prefill's seconds
        # (batch 0) and the long-context decode steps (metric long_step_ms at their batch).
        prefill = doc.get("prefill") if bench == "decode" else None
        if isinstance(prefill, dict) and isinstance(prefill.get("seconds"), (int, float)):
            values.setdefault((bench, 0, "prefill_s"), {"a": [], "b": []})[side].append(
                float(prefill["seconds"]))
        long_ctx = doc.get("long_context") if bench == "decode" else None
        for row in long_ctx.get("batches", []) if isinstance(long_ctx, dict) else []:
            if isinstance(row.get("step_ms"), (int, float)):
                values.setdefault((bench, int(row["batch"]), "long_step_ms"),
                                  {"a": [], "b": []})[side].append(float(row["step_ms"]))
        for row in batches_of(bench, doc):
            for metric in DECODE if bench == "decode" else DRAFT:
                if isinstance(row.get(metric), (int, float)):
                    key = (bench, int(row["batch"]), metric)
                    values.setdefault(key, {"a": [], "b": []})[side].append(float(row[metric]))
    return values


def rows_of(values: dict) -> list[list[str]]:
    rows = []
    for (bench, batch, metric), sides in sorted(values.items()):
        a, b = sides["a"], sides["b"]
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        ratio = f"{mb / ma:.3f}" if ma else "-"
        rows.append([bench, str(batch), metric, f"{ma:.4g}", f"{mb:.4g}", ratio,
                     " ".join(f"{v:.4g}" for v in a), " ".join(f"{v:.4g}" for v in b)])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--csv", type=Path)
    args = ap.parse_args()
    rows = rows_of(collect(args.out_dir))
    if not rows:
        print("ab_summary: no pair of A and B results found", file=sys.stderr)
        return 1
    head = ["bench", "batch", "metric", "A median", "B median", "B/A", "A rounds", "B rounds"]
    print("{:<7}{:>6}  {:<26}{:>10}{:>10}{:>7}  {:<24}{}".format(*head))
    for r in rows:
        print("{:<7}{:>6}  {:<26}{:>10}{:>10}{:>7}  {:<24}{}".format(*r))
    if args.csv:
        args.csv.write_text("\n".join(",".join(r) for r in [head] + rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
