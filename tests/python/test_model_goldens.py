"""Integrity of the tiny DeepSeek-V4 checkpoints and golden logits under tests/data/model/ (written by
tests/reference/model/make_goldens.py). Needs numpy + safetensors only, no torch: these files are what the
C++ model tests compare against, so a broken or inconsistent fixture must fail here first."""

import json
import math
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest
from safetensors import safe_open

DATA = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "model"
REPO = DATA.parents[2]
# DeepSeek-V4 configs (made by tests/reference/model); the V4.1 ones (tests/reference/model_v41) have no hf_fp32.
CONFIGS = sorted(p.name for p in DATA.iterdir()
                 if (p / "goldens.json").is_file() and (p / "hf_fp32").is_dir()) if DATA.is_dir() else []
sys.path.insert(0, str(REPO / "tests" / "reference"))
from derive_checkpoint import materialize  # noqa: E402
LENGTHS = [1, 7, 40, 300]
TAIL = 32


def read_raw(path: pathlib.Path) -> dict:
    """Minimal safetensors reader returning numpy arrays of the raw element type (FP8/E8M0 as uint8,
    BF16 widened to float32), so FP8/FP4 payloads can be checked without torch."""
    blob = path.read_bytes()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    kinds = {"F32": np.float32, "I64": np.int64, "I8": np.int8, "BF16": np.uint16,
             "F8_E4M3": np.uint8, "F8_E8M0": np.uint8}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(blob[base + a:base + b], dtype=kinds[info["dtype"]]).reshape(info["shape"])
        if info["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = (info["dtype"], arr)
    return out


def e4m3_to_f32(b: np.ndarray) -> np.ndarray:
    b = b.astype(np.int32)
    s, e, m = (b >> 7) & 1, (b >> 3) & 0xF, b & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * np.exp2(e - 7.0))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return np.where(s == 1, -v, v).astype(np.float32)


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def fp4_to_f32(packed: np.ndarray) -> np.ndarray:
    u = packed.view(np.uint8)
    return np.stack([E2M1[u & 0xF], E2M1[u >> 4]], axis=-1).reshape(u.shape[0], -1)


def load_goldens(name):
    meta = json.loads((DATA / name / "goldens.json").read_text())
    with safe_open(str(DATA / name / "goldens.safetensors"), framework="np") as f:
        gold = {k: f.get_tensor(k) for k in f.keys()}
    return meta, gold


def official_from_hf(name: str) -> str:
    n = name[len("model."):] if name.startswith("model.") else name
    n = {"embed_tokens.weight": "embed.weight", "hc_head.hc_fn": "hc_head_fn",
         "hc_head.hc_base": "hc_head_base", "hc_head.hc_scale": "hc_head_scale"}.get(n, n)
    return n.replace(".attn.norm.weight", ".attn.kv_norm.weight")


def test_fixtures_exist():
    assert len(CONFIGS) >= 2, f"expected tiny model fixtures under {DATA}"
    total = sum(f.stat().st_size for f in DATA.rglob("*") if f.is_file())
    assert total < 15e6, f"tests/data/model grew to {total / 1e6:.1f} MB"


def test_tracked_tree_fits_the_gpu_machine():
    """The GPU machine receives the whole tracked tree (64 MiB at most, build inputs carried beside it): the
    tree stays under 58 MiB. Fixture variants that are functions of others are stored as derive.json."""
    try:
        files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
                               ).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    total = sum((REPO / f).stat().st_size for f in files if f and (REPO / f).is_file())
    assert total < 58 * 2**20, f"tracked tree is {total / 2**20:.2f} MiB (limit 58 MiB)"


@pytest.mark.parametrize("name", CONFIGS)
def test_golden_logits_shapes_and_values(name):
    meta, gold = load_goldens(name)
    hf_cfg = json.loads((DATA / name / "hf_fp32" / "config.json").read_text())
    vocab = hf_cfg["vocab_size"]
    assert meta["vocab_size"] == vocab
    for L in LENGTHS:
        ids = meta["prompts"][f"len{L}"]
        assert len(ids) == L and all(0 <= t < vocab for t in ids)
        for kind in ("hf_fp32", "official_quant"):
            key = f"{kind}.len{L}"
            if kind == "official_quant" and key not in gold:
                continue
            x = gold[key]
            assert x.shape == (L, vocab) and x.dtype == np.float32, key
            assert np.isfinite(x).all(), key
            assert x.std(axis=-1).min() > 1e-3, f"{key}: degenerate (constant) logits"
    for key, x in gold.items():
        assert np.isfinite(x).all(), key
        if key.endswith("len300_tail"):
            assert x.shape == (TAIL, vocab), key
        if key.startswith("mtp_") and not key.endswith("tail"):
            L = int(key.rsplit("len", 1)[1])
            assert x.shape == (L - 1, vocab), key


@pytest.mark.parametrize("name", CONFIGS)
def test_continuations_agree_with_logits(name):
    """The first greedy token must be the argmax of the last prompt row (same forward), with a margin."""
    meta, gold = load_goldens(name)
    vocab = meta["vocab_size"]
    for key, cont in meta["continuations"].items():
        kind, ln = key.rsplit(".", 1)
        toks = cont["tokens"]
        assert len(toks) == 16 and all(0 <= t < vocab for t in toks)
        last = gold[f"{kind}.{ln}"][-1]
        assert int(np.argmax(last)) == toks[0], key
        srt = np.sort(last)
        assert math.isclose(srt[-1] - srt[-2], cont["top1_top2_margin"][0], rel_tol=1e-4, abs_tol=1e-5)
        if kind == "hf_fp32":
            assert cont["fragile_positions"] == [], f"{key}: FP32 golden has a near-tie selection"


@pytest.mark.parametrize("name", CONFIGS)
def test_bf16_weights_golden_is_close_but_different(name):
    _, gold = load_goldens(name)
    for L in (7, 40):
        a, b = gold[f"hf_fp32.len{L}"], gold[f"hf_bf16w_fp32.len{L}"]
        d = np.abs(a - b).max()
        assert 0 < d < 0.25 * np.abs(a).max(), (L, d)
    assert np.array_equal(gold["hf_fp32.len300"][-TAIL:].shape, gold["hf_bf16w_fp32.len300_tail"].shape)


@pytest.mark.parametrize("name", CONFIGS)
def test_checkpoints_parse_and_name_families_agree(name):
    root = DATA / name
    off = read_raw(root / "official_fp32" / "model.safetensors")
    for variant in ("hf_fp32", "hf_bf16"):
        assert not (root / variant / "model.safetensors").exists(), f"{variant} is stored as derive.json"
    hdt, harr, hmeta = materialize(root / "hf_fp32")  # official_fp32's tensors under the HF names
    assert hmeta == {"format": "pt"}
    hf = {k: (hdt[k], harr[k]) for k in hdt}
    bdt, barr, _ = materialize(root / "hf_bf16")
    assert set(barr) == set(hf)
    for k, (dt, arr) in hf.items():  # HF's BF16 save keeps norms / mHC / sinks / ape / gate bias in F32
        keep = dt != "F32" or k.endswith(("norm.weight", "_fn", "_base", "_scale", "attn_sink", "ape", "bias"))
        assert bdt[k] == (dt if keep else "BF16"), (k, bdt[k])
        assert barr[k].shape == arr.shape, k
    hf_cfg = json.loads((root / "hf_fp32" / "config.json").read_text())
    oc = json.loads((root / "official_fp32" / "config.json").read_text())
    assert len(hf_cfg["layer_types"]) == hf_cfg["num_hidden_layers"] == oc["n_layers"]
    assert len(oc["compress_ratios"]) == oc["n_layers"] + oc["n_mtp_layers"]
    mapped = {official_from_hf(k) for k in hf}
    assert mapped == {k for k in off if not k.startswith("mtp.")}
    for k, (dt, arr) in hf.items():
        odt, oarr = off[official_from_hf(k)]
        assert dt == odt and np.array_equal(arr, oarr), k
    D, n = oc["dim"], oc["hc_mult"]
    assert off["embed.weight"][1].shape == (oc["vocab_size"], D)
    assert off["hc_head_fn"][1].shape == (n, n * D)
    for i, r in enumerate(oc["compress_ratios"][:oc["n_layers"]]):
        p = f"layers.{i}."
        assert off[p + "hc_attn_fn"][1].shape == ((2 + n) * n, n * D)
        assert (p + "attn.compressor.ape" in off) == (r > 0)
        assert (p + "attn.indexer.wq_b.weight" in off) == (r == 4)
        if r:
            assert off[p + "attn.compressor.ape"][1].shape == (r, (2 if r == 4 else 1) * oc["head_dim"])
        assert (p + "ffn.gate.tid2eid" in off) == (i < oc["n_hash_layers"])
    if oc["n_mtp_layers"]:
        assert off["mtp.0.e_proj.weight"][1].shape == (D, D)


@pytest.mark.parametrize("name", [c for c in CONFIGS if (DATA / c / "official_quant").is_dir()])
def test_quantized_checkpoint_decodes_to_the_fp32_weights(name):
    root = DATA / name
    q = read_raw(root / "official_quant" / "model.safetensors")
    off = read_raw(root / "official_fp32" / "model.safetensors")
    qc = json.loads((root / "official_quant" / "config.json").read_text())
    bo, bi = qc["quantization_config"]["weight_block_size"]
    n_fp8 = n_fp4 = 0
    for k, (dt, arr) in q.items():
        if k.endswith(".scale"):
            continue
        ref = off[k][1]
        if dt == "F8_E4M3":
            sdt, s = q[k[:-len("weight")] + "scale"]
            assert sdt == "F8_E8M0" and s.shape == (-(-arr.shape[0] // bo), -(-arr.shape[1] // bi)), k
            sc = np.exp2(s.astype(np.float32) - 127)
            w = e4m3_to_f32(arr) * np.repeat(np.repeat(sc, bo, 0), bi, 1)[:arr.shape[0], :arr.shape[1]]
            n_fp8 += 1
            tol = 0.07
        elif dt == "I8":
            sdt, s = q[k[:-len("weight")] + "scale"]
            assert sdt == "F8_E8M0" and s.shape == (arr.shape[0], arr.shape[1] * 2 // 32), k
            w = fp4_to_f32(arr) * np.repeat(np.exp2(s.astype(np.float32) - 127), 32, 1)
            n_fp4 += 1
            tol = 0.2
        else:
            assert dt in ("BF16", "F32", "I64"), (k, dt)
            assert arr.shape == ref.shape, k
            continue
        assert w.shape == ref.shape, k
        rel = np.linalg.norm(w - ref) / np.linalg.norm(ref)
        assert 0 < rel < tol, (k, rel)
    assert n_fp8 > 0 and n_fp4 > 0
