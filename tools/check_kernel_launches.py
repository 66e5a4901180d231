#!/usr/bin/env python3
"""Programmatic dependent launch is only safe for kernels that wait for their predecessor.

With DEEPINFER_CUDA_PDL on, launch_kernel (src/kernels/cuda/common.cuh) lets a kernel start
before the previous kernel of its stream has finished; the kernel must therefore begin with
grid_dependency_sync(), or it may read what that kernel has not yet written. This check keeps
the rule true as kernels are added: in every .cu / .cuh file under src/kernels/cuda but those
listed in PLAIN (which launch with <<<...>>>, plain stream order, and only there), each
__global__ function's first statement is grid_dependency_sync().

Usage: tools/check_kernel_launches.py [repo root]; exits 1 and prints file:line: problem."""

import pathlib
import re
import sys

# Files whose kernels run outside the step's kernel chain and keep plain launches: the
# availability probe, random weight fill at load, and the NCCL ranks' ordered sum.
PLAIN = {
    "src/kernels/cuda/probe.cu",
    "src/kernels/cuda/init/random_fill.cu",
    "src/kernels/cuda/parallel/rank_order_sum.cu",
}

_GLOBAL = re.compile(r"__global__")


def _strip_comments(text: str) -> str:
    # Line comments only (the kernels use no block comments); keeps line numbers.
    return re.sub(r"//[^\n]*", "", text)


def check_file(rel: str, text: str) -> list[str]:
    errors = []
    code = _strip_comments(text)
    if rel in PLAIN:
        launch = re.search(r"launch_kernel(_in_clusters)?\(", code)
        if launch:
            line = code[: launch.start()].count("\n") + 1
            errors.append(f"{rel}:{line}: launch_kernel in a PLAIN file (its kernels do not wait)")
        return errors
    if "<<<" in code:
        line = code[: code.index("<<<")].count("\n") + 1
        errors.append(f"{rel}:{line}: a <<<...>>> launch: use launch_kernel (common.cuh), or add "
                      "the file to PLAIN in tools/check_kernel_launches.py")
    for m in _GLOBAL.finditer(code):
        brace = code.find("{", m.end())
        if brace < 0:
            continue
        body = code[brace + 1:].lstrip()
        if not body.startswith("grid_dependency_sync();"):
            line = code[: m.start()].count("\n") + 1
            errors.append(f"{rel}:{line}: a kernel must begin with "
                          "grid_dependency_sync() (programmatic dependent launch)")
    return errors


def check(root: pathlib.Path) -> list[str]:
    errors = []
    base = root / "src/kernels/cuda"
    for p in sorted(list(base.rglob("*.cu")) + list(base.rglob("*.cuh"))):
        rel = p.relative_to(root).as_posix()
        errors += check_file(rel, p.read_text())
    return errors


if __name__ == "__main__":
    root = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent
    errs = check(root)
    for e in errs:
        print(e)
    sys.exit(1 if errs else 0)
