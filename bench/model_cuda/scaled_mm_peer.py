#!/usr/bin/env python3
"""The FP8 linears' peer: torch._scaled_mm at V4-Flash's FP8 linear shapes, same card, same call.

DeepInfer's FP8 linears (ops_cuda_test --perf --filter="linear fp8") from 17 rows run the
block-scaled FP8 GEMM: activations in 1 x 128 blocks, weights in 128 x 128 blocks, FP32 scales.
This times torch._scaled_mm with exactly that scaling (PyTorch's blockwise recipe, the same
cuBLASLt kernels underneath) on pre-quantized inputs, so it is the GEMM alone; DeepInfer's line
also includes the activation quantization launch. Where this PyTorch rejects blockwise scales it
falls back to row-wise scaling (same bytes and FLOPs, a different recipe) and says so per line.
The ceiling beside each line is the dense FP8 rate of an 8192^3 row-wise _scaled_mm measured here.

    python3 bench/model_cuda/scaled_mm_peer.py [--csv OUT.csv]
"""

from __future__ import annotations

import argparse
import csv
import sys

import torch

SHAPES = [("wq_a", 1024, 4096), ("wq_b", 32768, 1024), ("wo_b", 4096, 8192)]
ROWS = [32, 64, 128, 256, 1024, 4096]


def time_ms(fn, reps: int = 20) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def fp8(rows: int, cols: int) -> torch.Tensor:
    return (torch.randn(rows, cols, device="cuda") * 64).clamp(-448, 448).to(torch.float8_e4m3fn)


def gemm(m: int, n: int, k: int, blockwise: bool):
    """A callable running y[m, n] = a[m, k] . b[n, k]^T, or None when this recipe is refused."""
    a, b = fp8(m, k), fp8(n, k)
    if blockwise:
        # 1 x 128 on a: (m, k/128) with m contiguous; 128 x 128 on b^T: (n/128, k/128) row-major.
        sa = torch.rand(k // 128, m, device="cuda").t()
        sb = torch.rand(n // 128, k // 128, device="cuda").t()
    else:
        sa = torch.rand(m, 1, device="cuda")
        sb = torch.rand(1, n, device="cuda")

    def run():
        return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    try:
        run()
        torch.cuda.synchronize()
    except (RuntimeError, ValueError) as e:
        return None, str(e).splitlines()[0][:120]
    return run, ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default="")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("scaled_mm_peer: no CUDA device", file=sys.stderr)
        return 1
    dense, _ = gemm(8192, 8192, 8192, blockwise=False)
    ceiling = 2 * 8192**3 / (time_ms(dense, 10) * 1e-3) / 1e12
    print(f"torch {torch.__version__}: dense FP8 _scaled_mm 8192^3 (row-wise) {ceiling:.0f} TFLOP/s")
    rows = []
    for name, n, k in SHAPES:
        for m in ROWS:
            run, why = gemm(m, n, k, blockwise=True)
            recipe = "blockwise 1x128 / 128x128"
            if run is None:
                run, _ = gemm(m, n, k, blockwise=False)
                recipe = f"row-wise (blockwise refused: {why})"
            ms = time_ms(run, 3 if m == 4096 else 20)
            tf = 2.0 * m * n * k / (ms * 1e-3) / 1e12
            gbs = (n * k + m * k + 2 * m * n) / (ms * 1e-3) / 1e9
            print(f"_scaled_mm {name:5s} {n}x{k} M={m:<5d} {ms:9.4f} ms {gbs:8.1f} GB/s "
                  f"{tf:7.1f} TFLOP/s ({100 * tf / ceiling:5.1f}% of {ceiling:.0f})  {recipe}")
            rows.append({"op": name, "n": n, "k": k, "m": m, "ms": round(ms, 5),
                         "tflops": round(tf, 2), "fp8_ceiling_tflops": round(ceiling, 1),
                         "recipe": recipe, "torch": torch.__version__})
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
