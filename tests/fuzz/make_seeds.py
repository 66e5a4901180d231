"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/): small valid safetensors images
(F32/BF16 with metadata, FP8 with an E8M0 scale and U8, an empty one), every config.json of the
committed checkpoints, and the config dictionary (every key those configs use).

    python3 tests/fuzz/make_seeds.py
"""
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUZZ = ROOT / "tests" / "fuzz"


def image(tensors, meta=None):
    header, data = {}, b""
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + nbytes]}
        data += bytes((i * 37) % 251 for i in range(nbytes))
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def main():
    st = FUZZ / "corpus" / "safetensors"
    st.mkdir(parents=True, exist_ok=True)
    (st / "seed_basic.safetensors").write_bytes(
        image({"a.weight": ("F32", [2, 3], 24), "b": ("BF16", [4], 8)}, {"format": "pt"}))
    (st / "seed_fp8.safetensors").write_bytes(
        image({"w": ("F8_E4M3", [4, 4], 16), "w.scale": ("F8_E8M0", [1, 1], 1),
               "e": ("U8", [3], 3)}))
    (st / "seed_empty.safetensors").write_bytes(image({}))

    mc = FUZZ / "corpus" / "model_config"
    mc.mkdir(parents=True, exist_ok=True)
    keys = set()
    configs = sorted((ROOT / "tests" / "data").rglob("config.json")) + [
        ROOT / "models" / "default" / "config.json"]
    for f in configs:
        rel = f.relative_to(ROOT).as_posix().replace("/", "_")
        (mc / rel).write_bytes(f.read_bytes())

        def walk(v):
            if isinstance(v, dict):
                for k, x in v.items():
                    keys.add(k)
                    walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)
        walk(json.loads(f.read_text()))
    d = FUZZ / "dict"
    d.mkdir(exist_ok=True)
    (d / "model_config.dict").write_text(
        "".join(f'"\\"{k}\\""\n' for k in sorted(keys)) + '"{"\n"}"\n"["\n"]"\n"null"\n"true"\n')


if __name__ == "__main__":
    main()
