"""Dequantises the shipped FP8/FP4 default model into an FP32 official-name checkpoint.

The training run kept only the quantised export (its FP32 checkpoint.pt was not saved), so the
"before quantisation" measurement uses the same weights without the official quantisation-aware
inference points: every FP8 E4M3 (128x128 E8M0 scales) and FP4 E2M1 (1x32 E8M0 scales) weight is
expanded to FP32, BF16 tensors are widened to FP32, and `quantization_config` is dropped, so
DeepInfer runs the checkpoint in HF (FP32 between ops, no activation/KV/indexer fake-quant)
semantics. Weight rounding from QAT is still in the values; the run's own FP32-vs-fake-quant
figures are in ../training/summary.json.

    .venv/bin/python models/v4-small/dequantize_checkpoint.py models/v4-small /tmp/v4small_fp32
    build/<dir>/tools/cli/deepinfer perplexity --model /tmp/default_fp32 --tokens ...

Needs numpy only; reuses the dequantisers of tests/reference/make_tiny_checkpoint.py (the
ones the committed test checkpoints were made with).
"""

from __future__ import annotations

import json
import pathlib
import shutil
import struct
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "reference"))
import make_tiny_checkpoint as mtc  # noqa: E402

NP = {"F32": np.float32, "I64": np.int64, "I32": np.int32, "U8": np.uint8, "I8": np.uint8,
      "F8_E4M3": np.uint8, "F8_E8M0": np.uint8}


def read_all(folder: pathlib.Path) -> dict[str, tuple[str, np.ndarray]]:
    out = {}
    for path in sorted(folder.glob("*.safetensors")):
        raw = path.read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + n])
        header.pop("__metadata__", None)
        for name, h in header.items():
            a, b = h["data_offsets"]
            buf = raw[8 + n + a:8 + n + b]
            if h["dtype"] == "BF16":
                arr = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                arr = np.frombuffer(buf, NP[h["dtype"]])
            out[name] = (h["dtype"], arr.reshape(h["shape"]))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    src, dst = pathlib.Path(argv[0]), pathlib.Path(argv[1])
    cfg = json.loads((src / "config.json").read_text())
    qc = cfg.get("quantization_config") or {}
    block = qc.get("weight_block_size", [128, 128])[0]
    fp4_block = qc.get("expert_block_size", [1, 32])[1]
    tensors = read_all(src)
    result = []
    for name, (dtype, arr) in tensors.items():
        if name.endswith(".scale"):
            continue
        scale = tensors.get(name[: -len(".weight")] + ".scale") if name.endswith(".weight") else None
        if scale is not None and dtype == "F8_E4M3":
            arr = mtc.dequantize_fp8(arr, scale[1], block)
        elif scale is not None and dtype == "I8":
            arr = mtc.dequantize_fp4(arr, scale[1], fp4_block)
        elif scale is not None:
            raise SystemExit(f"{name}: scaled tensor of dtype {dtype}, expected F8_E4M3 or I8 (FP4)")
        if arr.dtype.kind == "f":
            result.append((name, "F32", arr.shape, np.ascontiguousarray(arr, np.float32).tobytes()))
        else:
            result.append((name, dtype, arr.shape, np.ascontiguousarray(arr).tobytes()))
    dst.mkdir(parents=True, exist_ok=True)
    mtc.write_safetensors(str(dst / "model.safetensors"), result)
    cfg.pop("quantization_config", None)
    cfg.update({"dtype": "fp32", "expert_dtype": None, "scale_fmt": None})
    (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    for extra in ("tokenizer.json", "tokenizer_config.json"):
        if (src / extra).exists():
            shutil.copy(src / extra, dst / extra)
    print(f"{dst}: {len(result)} tensors, FP32, no quantization_config")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
