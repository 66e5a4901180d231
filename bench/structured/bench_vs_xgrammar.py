"""Side-by-side benchmark: deepinfer::structured vs xgrammar (PyPI) on the same machine, the
same five JSON schemas (simple, nested, large enum, recursive, regex-heavy), the real V4
tokenizer, and the same token sequences (structured_bench writes the sequences it sampled;
they are replayed through xgrammar's matcher, timing fill_next_token_bitmask per token).

Both engines use compact JSON (xgrammar: any_whitespace=False, separators=(",", ":")), or with
--any-whitespace both allow flexible whitespace (xgrammar's default any_whitespace=True).
Compile times are the median of 5 fresh compilers on each side (xgrammar: cache disabled),
both with --threads compile threads (default 8, xgrammar's default); its mask time includes the Python->C++ call (the overhead of a trivial
matcher call is printed for reference).

Run (from the repository root, after building structured_bench):
  .venv/bin/pip install xgrammar
  .venv/bin/python bench/structured/bench_vs_xgrammar.py \
      --bench build/structured/bench/structured/structured_bench --csv /tmp/structured_vs_xgr.csv
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import tempfile
import time


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))] if v else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="path to the structured_bench binary")
    ap.add_argument("--tokenizer", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                                        "tokenizers", "deepseek_v4", "tokenizer.json"))
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=8, help="compile threads, both engines")
    ap.add_argument("--csv", default="structured_vs_xgrammar.csv")
    ap.add_argument("--any-whitespace", action="store_true", help="flexible whitespace in both engines")
    args = ap.parse_args()
    tok_path = os.path.abspath(args.tokenizer)

    tmp = tempfile.mkdtemp()
    ours_csv, tokens_json = os.path.join(tmp, "ours.csv"), os.path.join(tmp, "tokens.json")
    subprocess.run([args.bench, "--tokenizer", tok_path, "--docs", str(args.docs), "--csv", ours_csv,
                    "--tokens", tokens_json, "--threads", str(args.threads)] +
                   (["--any-whitespace"] if args.any_whitespace else []), check=True)
    schemas = json.loads(subprocess.run([args.bench, "--dump-schemas"], check=True, capture_output=True,
                                        text=True).stdout)
    ours = {row["schema"]: row for row in csv.DictReader(open(ours_csv))}
    sequences = json.load(open(tokens_json))

    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_file=tok_path)
    eos = hf.convert_tokens_to_ids("<｜end▁of▁sentence｜>")
    vocab = 129280
    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=vocab, stop_token_ids=[eos])
    rows = []
    print(f"{'schema':12} {'ours_compile_ms':>15} {'xgr_compile_ms':>14} {'ratio':>6} | {'ours_med_us':>11} "
          f"{'xgr_med_us':>10} {'ratio':>6} | {'ours_p99_us':>11} {'xgr_p99_us':>10} {'ratio':>6} | replay_ok")
    for name, schema in schemas.items():
        compile_times = []
        for _ in range(5):  # median of 5 fresh compilers, like structured_bench
            compiler = xgr.GrammarCompiler(info, max_threads=args.threads, cache_enabled=False)
            t0 = time.perf_counter()
            if args.any_whitespace:
                cg = compiler.compile_json_schema(schema, any_whitespace=True)
            else:
                cg = compiler.compile_json_schema(schema, any_whitespace=False, separators=(",", ":"))
            compile_times.append((time.perf_counter() - t0) * 1e3)
        xgr_compile_ms = statistics.median(compile_times)
        bitmask = xgr.allocate_token_bitmask(1, vocab)
        times, ok, total = [], 0, 0
        for seq in sequences[name]:
            m = xgr.GrammarMatcher(cg)
            total += 1
            good = True
            for tid in seq:
                t0 = time.perf_counter_ns()
                m.fill_next_token_bitmask(bitmask)
                times.append((time.perf_counter_ns() - t0) / 1e3)
                if not m.accept_token(tid):
                    good = False
                    break
            ok += good
        # Python call overhead, for reference.
        m = xgr.GrammarMatcher(cg)
        ov = []
        for _ in range(2000):
            t0 = time.perf_counter_ns()
            m.is_terminated()
            ov.append((time.perf_counter_ns() - t0) / 1e3)
        o = ours[name]
        row = {
            "schema": name,
            "ours_compile_ms": float(o["compile_ms"]), "xgr_compile_ms": xgr_compile_ms,
            "ours_mask_median_us": float(o["mask_median_us"]), "xgr_mask_median_us": statistics.median(times),
            "ours_mask_p99_us": float(o["mask_p99_us"]), "xgr_mask_p99_us": pct(times, 0.99),
            "xgr_call_overhead_us": statistics.median(ov), "replayed_ok": f"{ok}/{total}",
        }
        row["compile_ratio"] = row["ours_compile_ms"] / row["xgr_compile_ms"]
        row["mask_median_ratio"] = row["ours_mask_median_us"] / row["xgr_mask_median_us"]
        row["mask_p99_ratio"] = row["ours_mask_p99_us"] / row["xgr_mask_p99_us"]
        rows.append(row)
        print(f"{name:12} {row['ours_compile_ms']:15.1f} {row['xgr_compile_ms']:14.1f} {row['compile_ratio']:6.2f} | "
              f"{row['ours_mask_median_us']:11.1f} {row['xgr_mask_median_us']:10.1f} {row['mask_median_ratio']:6.2f} | "
              f"{row['ours_mask_p99_us']:11.1f} {row['xgr_mask_p99_us']:10.1f} {row['mask_p99_ratio']:6.2f} | "
              f"{row['replayed_ok']} (xgr call overhead {row['xgr_call_overhead_us']:.2f} us)")
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print("ratios are ours / xgrammar (< 1 means we are faster); CSV:", args.csv)


if __name__ == "__main__":
    main()
