"""Fixture variants stored as a recipe instead of weights (tests/support/derived_checkpoint.h is the C++ side,
which the tests use): a folder with config.json and derive.json whose model.safetensors is a pure function of
another committed checkpoint (a BF16 save of FP32 weights; the same weights under other names).

    python tests/reference/derive_checkpoint.py VARIANT_DIR SOURCE_DIR
        checks that VARIANT_DIR/model.safetensors is exactly SOURCE_DIR's tensors cast per tensor (BF16 by
        round-to-nearest-even, as torch casts), writes VARIANT_DIR/derive.json and removes the weights file.
        (replace_by_spec's source_name argument covers variants whose tensor names differ from the source's.)

    python tests/reference/derive_checkpoint.py --materialize VARIANT_DIR OUT_DIR
        writes the weights VARIANT_DIR/derive.json describes (and the variant's other files) into OUT_DIR.

Needs numpy only (no torch), so tests/python can rebuild a variant too (materialized_checkpoint).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import numpy as np

# numpy has no bfloat16: BF16 travels as uint16 bit patterns.
_NP = {"F32": np.float32, "I64": np.int64, "I32": np.int32, "I8": np.int8, "U8": np.uint8,
       "BF16": np.uint16, "F8_E4M3": np.uint8, "F8_E8M0": np.uint8}


def _raw(path: pathlib.Path) -> tuple[dict, dict, dict]:
    """(name -> dtype string, name -> array of raw elements, metadata) of a safetensors file."""
    blob = path.read_bytes()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    dt, arr = {}, {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        dt[name] = info["dtype"]
        arr[name] = np.frombuffer(blob[base + a:base + b], dtype=_NP[info["dtype"]]).reshape(info["shape"])
    return dt, arr, meta


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    out = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    out[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def _cast(a: np.ndarray, src: str, dst: str) -> np.ndarray:
    if src == dst:
        return a
    f = (a.astype(np.uint32) << 16).view(np.float32) if src == "BF16" else a.astype(np.float32)
    if src not in ("F32", "BF16") or dst not in ("F32", "BF16"):
        raise ValueError(f"cannot cast {src} to {dst}")
    return f if dst == "F32" else f32_to_bf16_bits(f)


def materialize(variant: pathlib.Path) -> tuple[dict, dict, dict]:
    """(name -> dtype, name -> raw array, metadata) that variant/derive.json describes."""
    spec = json.loads((variant / "derive.json").read_text())
    sdt, sarr, _ = _raw(variant / spec["from"] / "model.safetensors")
    dt, arr = {}, {}
    for t in spec["tensors"]:
        name, d = t["name"], t["dtype"]
        if "fill" in t:
            f = np.full(t["shape"], t["fill"], dtype=np.float32)
            arr[name] = f if d == "F32" else f32_to_bf16_bits(f)
        else:
            src = t.get("source", name)
            arr[name] = _cast(sarr[src], sdt[src], d)
        dt[name] = d
    return dt, arr, spec.get("metadata", {})


def write_spec(variant: pathlib.Path, source_rel: str, tensors: list, metadata: dict | None = None,
               copy: list | None = None) -> None:
    spec = {"about": "weights derived at test time from another committed checkpoint: "
                     "tests/reference/derive_checkpoint.py, tests/support/derived_checkpoint.h",
            "from": source_rel, "tensors": tensors}
    if metadata:
        spec["metadata"] = metadata
    if copy:
        spec["copy"] = copy
    text = json.dumps(spec, indent=1)
    rows = ",\n  ".join(json.dumps(t) for t in tensors)  # one tensor per line
    text = text[:text.index('"tensors": [')] + '"tensors": [\n  ' + rows + "\n ]" + text[text.index("\n ]") + 3:]
    json.loads(text)
    (variant / "derive.json").write_text(text + "\n")


def replace_by_spec(variant: pathlib.Path, source: pathlib.Path, source_name=None) -> None:
    """Writes derive.json for a saved variant that is a per-tensor cast of `source` (tensor `source_name(name)`
    of it when given, else the same name), proves the recipe reproduces every tensor bit for bit, then removes
    the weights file."""
    vdt, varr, meta = _raw(variant / "model.safetensors")
    tensors = []
    for k in sorted(vdt):
        src = source_name(k) if source_name else k
        tensors.append({"name": k, "dtype": vdt[k]} if src == k else {"name": k, "source": src, "dtype": vdt[k]})
    write_spec(variant, os.path.relpath(source, variant), tensors, metadata=meta)
    mdt, marr, mmeta = materialize(variant)
    assert mdt == vdt, "derived dtypes differ from the saved ones"
    assert mmeta == meta, "derived metadata differs from the saved one"
    for k in vdt:
        assert marr[k].shape == varr[k].shape and np.array_equal(marr[k].view(np.uint8), varr[k].view(np.uint8)), \
            f"{variant}: {k} is not the cast of {source}'s tensor"
    (variant / "model.safetensors").unlink()
    print(f"{variant}: {len(vdt)} tensors reproduced bit for bit; weights replaced by derive.json")


def save_materialized(variant: pathlib.Path, out: pathlib.Path) -> None:
    """Writes the derived weights (and the variant's other files) into `out` (for torch-side scripts)."""
    import shutil
    out.mkdir(parents=True, exist_ok=True)
    dt, arr, meta = materialize(variant)
    for f in variant.iterdir():
        if f.is_file() and f.name != "derive.json":
            shutil.copy(f, out / f.name)
    spec = json.loads((variant / "derive.json").read_text())
    for f in spec.get("copy", []):
        shutil.copy(variant / spec["from"] / f, out / f)
    # safetensors.numpy cannot write BF16 from uint16; write the file by hand.
    header, offset, blobs = {}, 0, []
    for k in sorted(arr, key=lambda k: -arr[k].itemsize):
        b = np.ascontiguousarray(arr[k]).tobytes()
        header[k] = {"dtype": dt[k], "shape": list(arr[k].shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    (out / "model.safetensors").write_bytes(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def materialized_checkpoint(folder: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """The folder to load for committed fixture folder `folder`: itself when it holds weights (or has no
    derive.json), else `out` with the weights built from its derive.json (as tests/support/derived_checkpoint.h's
    checkpoint_dir does for the C++ tests)."""
    if (folder / "model.safetensors").exists() or (folder / "model.safetensors.index.json").exists() or \
            not (folder / "derive.json").exists():
        return folder
    save_materialized(folder, out)
    return out


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--materialize":
        save_materialized(pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]))
    elif len(sys.argv) == 3:
        replace_by_spec(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
    else:
        sys.exit(__doc__)
