#!/usr/bin/env python3
"""Fails when a source file includes a header its module may not use (the build runs it).

Modules are the folders of src/ (plus include/deepinfer, the public API, and the front ends:
tools/, python/bindings). Each may include its own headers and those of the modules listed in
ALLOWED (../shared/design/ARCHITECTURE.md "Allowed dependencies", written out in full here,
with the additions the code needs and why). The public API includes only itself (and the
standard library); front ends may include the public API only.

KNOWN lists exceptions, file by file, each with its reason; today there are none. The list may
only shrink: an include not in it fails, and so does an entry that no longer occurs (remove it).

    python3 tools/check_layering.py [--root DIR]
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

SRC_MODULES = ("base", "tensor", "sample", "backend", "kernels", "io", "tokenizer", "structured",
               "kv", "sched", "model", "parallel", "runtime")

ALLOWED = {
    "base": set(),
    "tensor": {"base"},
    # The dummy-weight fill rule (tensor/random_fill.h) is one header-only function that the
    # host loop and the device kernel both run, so the two agree bit for bit.
    "kernels": {"tensor"},
    "sample": {"base", "tensor"},
    # The backend's Ops::sample runs the host sampler's processors (its default), so the
    # contract names sample's types.
    "backend": {"base", "tensor", "sample", "kernels"},
    "io": {"base", "tensor"},
    "tokenizer": {"base"},
    "structured": {"base", "tokenizer"},
    "kv": {"base", "io"},
    "sched": {"base", "io", "kv"},
    # The model reads its config and weights (io), draws on the backend (sample for the GPU's
    # draws), and V4.1's Engram map comes from the checkpoint's tokenizer.json (tokenizer).
    # Expert parallelism inside the MoE layer (model/expert_parallel.h) exchanges rows through
    # parallel's Communicator and EpDispatcher; parallel knows nothing of the model, so the
    # dependency points one way (parallel needs only base, tensor and its kernels).
    "model": {"base", "tensor", "backend", "io", "sample", "tokenizer", "parallel"},
    # Ranks exchange plain buffers (tensor's DType); the NCCL communicator's rank-order sum is a
    # kernel of its own (kernels/cuda/parallel).
    "parallel": {"base", "tensor", "kernels"},
    "runtime": set(SRC_MODULES),
    "public": set(),
    "front": set(),
}
# The public API (include/deepinfer) includes nothing but itself, so every module may include
# it: the modules implement it (tokenizer/chat: chat.h, tokenizer.h; io: inspect.h; runtime:
# engine.h, model_session.h) or build on its types (base implements status.h, options.h and
# input_limits.h; the sampler reads sampling_params.h's SamplingParams itself).
for _deps in ALLOWED.values():
    _deps.add("public")

KNOWN: dict[str, set[str]] = {}

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)
SUFFIXES = (".h", ".cc", ".cu", ".cuh")


def module_of(rel: str) -> str | None:
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) > 2 and parts[1] in SRC_MODULES:
        return parts[1]
    if rel.startswith("include/deepinfer/"):
        return "public"
    if parts[0] == "tools" or rel.startswith("python/bindings/"):
        return "front"
    return None


def target_of(header: str) -> str | None:
    top = header.split("/")[0]
    if top in SRC_MODULES:
        return top
    if top == "deepinfer":
        return "public"
    return None  # a local or third-party header


def check(root: pathlib.Path) -> list[str]:
    errors, seen = [], set()
    files = [p for d in ("src", "include", "tools", "python/bindings") if (root / d).is_dir()
             for p in sorted((root / d).rglob("*")) if p.suffix in SUFFIXES and p.is_file()]
    for path in files:
        rel = path.relative_to(root).as_posix()
        mod = module_of(rel)
        if mod is None:
            continue
        text = path.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            header = m.group(1)
            target = target_of(header)
            if target is None or target == mod or target in ALLOWED[mod]:
                continue
            if header in KNOWN.get(rel, ()):
                seen.add((rel, header))
                continue
            line = text.count("\n", 0, m.start()) + 1
            who = {"public": "the public API (include/deepinfer)", "front": "a front end"}.get(
                mod, f"module '{mod}'")
            errors.append(f"{rel}:{line}: {who} may not include \"{header}\" (module '{target}'); "
                          f"allowed: {', '.join(sorted(ALLOWED[mod])) or 'nothing'} "
                          "(tools/check_layering.py says why)")
    if (root / "src").is_dir() and (root / "tools").is_dir():
        for rel, headers in KNOWN.items():
            for h in sorted(headers):
                if (rel, h) not in seen and (root / rel).is_file():
                    errors.append(f"{rel}: no longer includes \"{h}\": remove it from KNOWN in "
                                  "tools/check_layering.py")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[1]))
    errors = check(pathlib.Path(ap.parse_args().root))
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
