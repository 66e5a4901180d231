#!/usr/bin/env python3
"""FlashMLA's sparse FP8 decode at DeepSeek-V4's shape: the peer of our sparse attention (issue 19).

Two modes:

  flashmla_peer.py run --csv flashmla.csv [--batches 2,64,128,256]
      times flash_mla.flash_mla_with_kvcache (FlashMLA built from source on the device:
      tools/gpu/make_flashmla_carry.sh, run_model_cuda.sh stage `flashmla`) at V4's sparse decode:
      64 query heads, d 512 (448 FP8 + 64 BF16 RoPE values per key row, FlashMLA's "MODEL1"
      layout, 584 bytes a row), 2 queries per sequence, each reading 512 selected rows of the
      compressed cache plus 128 rows of its window (FlashMLA's extra cache), attention sink on;
      CUDA events, the median of --rounds rounds of --reps calls.
  flashmla_peer.py compare flashmla.csv perf.log --csv ratio.csv
      joins those times with our sparse attention's in `ops_cuda_test --perf
      --filter=sparse_attention` (the same 64 heads x 640 keys per query row, M = 2 x batch rows;
      ours reads FP32 rows of 2,048 bytes; every line of that case: our routing by index and by
      address, and each form the case forces beside it) and prints ours / FlashMLA.

Issue 19's goal: <= 1.0x FlashMLA's time at batch 64-256 and <= 1.2x at batch 2. Values of the
cache and queries are random (timing does not depend on them): FP8 codes of magnitude < 2 with
unit UE8M0 scales, RoPE values N(0, 0.1); both caches hold --pool rows (8,192, as our perf
case's: both sides then read keys that mostly stay in L2 -- the measurement of the kernels, not
of a long context's HBM traffic).
"""
import argparse
import csv
import re
import statistics
import sys

HEADS, D, D_NOPE, D_ROPE, TILE = 64, 512, 448, 64, 64
ROW_BYTES = D_NOPE + 2 * D_ROPE + 8  # 448 FP8 + 64 BF16 + 7 UE8M0 scales and a pad byte


def model1_cache(torch, rows: int, block: int, dev):
    """A random FP8 key cache of `rows` rows in FlashMLA's MODEL1 sparse layout: per page block,
    `block` rows of [448 FP8 | 64 BF16] (576 bytes each), then `block` x 8 scale bytes, the block
    padded to a multiple of 576 bytes; returned as the (blocks, block, 1, 584) view its API takes."""
    blocks = (rows + block - 1) // block
    used = block * ROW_BYTES
    padded = (used + 575) // 576 * 576
    store = torch.empty((blocks, padded), dtype=torch.uint8, device=dev)
    main = store[:, : block * (D_NOPE + 2 * D_ROPE)].view(blocks, block, D_NOPE + 2 * D_ROPE)
    # FP8 E4M3 codes with exponent field <= 7 (|v| < 2) and any sign / mantissa: never NaN.
    codes = torch.randint(0, 64, (blocks, block, D_NOPE), dtype=torch.uint8, device=dev)
    main[:, :, :D_NOPE] = codes | (torch.randint(0, 2, codes.shape, dtype=torch.uint8, device=dev) << 7)
    rope = (torch.randn(blocks, block, D_ROPE, device=dev) * 0.1).to(torch.bfloat16)
    main[:, :, D_NOPE:] = rope.view(torch.uint8).view(blocks, block, 2 * D_ROPE)
    scales = store[:, block * (D_NOPE + 2 * D_ROPE) : used].view(blocks, block, 8)
    scales.fill_(127)  # UE8M0 2^0
    cache = store[:, :used].view(torch.float8_e4m3fn).view(blocks, block, 1, ROW_BYTES)
    return cache, blocks * block


def run(args) -> int:
    import torch
    import flash_mla

    dev = torch.device("cuda")
    torch.manual_seed(0)
    name = torch.cuda.get_device_name(dev)
    batches = [int(b) for b in args.batches.split(",")]
    out_rows = []
    # Both caches once for every batch (only the queries and their indices grow with it).
    cache, pool = model1_cache(torch, args.pool, args.block, dev)
    extra, extra_pool = model1_cache(torch, args.pool, args.block, dev)
    for b in batches:
        q = (torch.randn(b, args.s_q, HEADS, D, device=dev) * 0.1).to(torch.bfloat16)
        idx = torch.randint(0, pool, (b, args.s_q, args.topk), dtype=torch.int32, device=dev)
        eidx = torch.randint(0, extra_pool, (b, args.s_q, args.extra), dtype=torch.int32,
                             device=dev)
        sink = torch.randn(HEADS, dtype=torch.float32, device=dev)
        sched, _ = flash_mla.get_mla_metadata()
        scale = D ** -0.5

        def call():
            return flash_mla.flash_mla_with_kvcache(
                q, cache, None, None, D, sched, None, softmax_scale=scale, causal=False,
                is_fp8_kvcache=True, indices=idx, attn_sink=sink, extra_k_cache=extra,
                extra_indices_in_kvcache=eidx)

        for _ in range(3):
            call()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.rounds):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.reps):
                call()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / args.reps)
        ms = statistics.median(times)
        m = b * args.s_q
        keys = args.topk + args.extra
        read = m * keys * ROW_BYTES + 2 * m * HEADS * D * 2  # key rows, q and out in BF16
        print(f"flashmla sparse decode b={b} s_q={args.s_q} M={m} keys={keys}: {ms:.4f} ms "
              f"({read / ms / 1e6:.1f} GB/s of rows, q and out) on {name}")
        out_rows.append({"batch": b, "s_q": args.s_q, "M": m, "keys": keys, "ms": ms,
                         "rounds": " ".join(f"{t:.4f}" for t in times), "device": name})
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out_rows[0].keys()))
        w.writeheader()
        w.writerows(out_rows)
    return 0


# ops_cuda_perf.cc's report(): "<op, 22 wide> <shape, 34 wide> <ms> ms ...": every line of
# the sparse_attention case (our kernel as routed, by address, and each forced form beside it).
PERF_LINE = re.compile(r"^(sparse_attention(?: [^\n]*?)?)\s+H64 d512 L640 M=(\d+)\s+([\d.]+) ms")


def compare(args) -> int:
    ours = {}  # (label, M) -> ms, labels in the log's order
    with open(args.perf_log) as f:
        for line in f:
            m = PERF_LINE.match(line)
            if m:
                ours[(m.group(1).rstrip(), int(m.group(2)))] = float(m.group(3))
    rows = []
    with open(args.flashmla_csv) as f:
        for r in csv.DictReader(f):
            M, fm = int(r["M"]), float(r["ms"])
            for (op, m_rows), ms in ours.items():
                if m_rows == M:
                    rows.append({"batch": int(r["batch"]), "M": M, "ours": op,
                                 "flashmla_ms": fm, "ours_ms": ms, "ours_over_flashmla": ms / fm})
    if not rows:
        print("no matching rows (our perf log lacks M = 2 x batch?)", file=sys.stderr)
        return 1
    print(f"{'batch':>5} {'M':>5}  {'ours':<33} {'FlashMLA ms':>11} {'ours ms':>9} {'ours/FlashMLA':>13}")
    for r in rows:
        print(f"{r['batch']:>5} {r['M']:>5}  {r['ours']:<33} {r['flashmla_ms']:>11.4f} "
              f"{r['ours_ms']:>9.4f} {r['ours_over_flashmla']:>13.2f}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run")
    r.add_argument("--batches", default="2,64,128,256")
    r.add_argument("--s-q", type=int, default=2, help="queries per sequence (V4 decode: 2)")
    r.add_argument("--topk", type=int, default=512, help="selected rows of the compressed cache")
    r.add_argument("--extra", type=int, default=128, help="window rows (FlashMLA's extra cache)")
    r.add_argument("--pool", type=int, default=8192,
                   help="rows in each cache (ops_cuda_perf.cc's sparse_attention draws its 640 "
                        "keys from 8,192 rows)")
    r.add_argument("--block", type=int, default=64, help="page block size of both caches")
    r.add_argument("--reps", type=int, default=20)
    r.add_argument("--rounds", type=int, default=5)
    r.add_argument("--csv", required=True)
    c = sub.add_parser("compare")
    c.add_argument("flashmla_csv")
    c.add_argument("perf_log")
    c.add_argument("--csv")
    args = ap.parse_args()
    return run(args) if args.mode == "run" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
