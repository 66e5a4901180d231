#!/usr/bin/env python3
"""FP32 GEMM rate of torch (oneDNN/MKL) and numpy (OpenBLAS) on the shapes of OpsPerf.PrefillGemm.

y = x @ w.T with x [M, K], w [N, K] FP32, best of the runs (>= 0.2 s per shape), for comparison
with `ops_test --gtest_also_run_disabled_tests --gtest_filter=OpsPerf.DISABLED_PrefillGemm`
run in the same session (the machine is shared: interleave the two).
  /work/refenv/bin/python bench/model_cpu/gemm_vs_torch.py --threads 2
"""
import argparse
import time

import numpy as np
import torch

SHAPES = [(512, 2048, 512), (512, 512, 768), (96, 512, 768), (96, 768, 512), (512, 16384, 768),
          (1, 2048, 512), (1, 16384, 768)]


def best(fn, min_s=0.2):
    fn()
    t_best, total, reps = 1e30, 0.0, 0
    while total < min_s or reps < 2:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        t_best, total, reps = min(t_best, dt), total + dt, reps + 1
        if reps >= 50:
            break
    return t_best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    for m, n, k in SHAPES:
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = rng.standard_normal((n, k), dtype=np.float32)
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        with torch.inference_mode():
            tt = best(lambda: torch.nn.functional.linear(tx, tw))
        tn = best(lambda: x @ w.T)
        macs = m * n * k
        print(f"M={m:<4} N={n:<5} K={k:<4} torch {tt*1e3:8.3f} ms {macs/tt*1e-9:6.2f} GMAC/s   "
              f"numpy {tn*1e3:8.3f} ms {macs/tn*1e-9:6.2f} GMAC/s")


if __name__ == "__main__":
    main()
