"""`deepinfer inspect` and deepinfer.checkpoint on tiny checkpoints written by
tests/reference/make_tiny_checkpoint.py (numpy only), in both tensor-name families, plain and
quantized, single file and sharded."""

import json

import numpy as np
import pytest

from conftest import REPO
from repo_scripts import load_script

tiny = load_script("tests/reference/make_tiny_checkpoint.py")

V4_FLASH_CONFIG = REPO / "tests/data/io/v4_flash_inference_config.json"


def _params(mtp: bool) -> int:
    return sum(int(np.prod(shape)) for _, shape, _ in tiny.expected_tensors(mtp))


@pytest.mark.parametrize(
    "names,quant,config_naming,shards",
    [
        ("official", "none", "hf", 1),
        ("official", "fp8", "official", 3),
        ("hf", "none", "hf", 2),
        ("hf", "fp8", "official", 1),
    ],
)
def test_inspect_json(cli, tmp_path, names, quant, config_naming, shards):
    model = tmp_path / "model"
    tiny.write_checkpoint(str(model), names=names, quant=quant, config_naming=config_naming, shards=shards)
    r = cli("inspect", model, "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["name_family"] == ("official" if names == "official" else "save_pretrained")
    assert report["config_naming"] == ("huggingface" if config_naming == "hf" else "official")
    assert report["layout"] == ("single file" if shards == 1 else "sharded (index)")
    assert report["files"] == shards
    assert report["layer_kinds"]["attention"] == "layers 0 SWA, 1,3 CSA(4), 2,4 HCA(8)"
    assert report["layer_kinds"]["moe"] == "layers 0-1 hash, 2-4 score"
    assert report["layer_kinds"]["counts"] == {"SWA": 1, "CSA": 2, "HCA": 2, "hash": 2, "score": 3}
    # CSA: (64 + 32) / 4 per layer, HCA: 64 / 8 per layer.
    assert report["kv_cache"]["elements_per_token"] == 2 * 96 / 4 + 2 * 64 / 8
    assert report["kv_cache"]["window_bytes_per_sequence_bf16"] == 2 * 5 * 8 * 64
    has_mtp = names == "official"
    assert report["mtp"] == {"layers_in_config": 1, "available": has_mtp}
    assert report["parameters"]["total"] == _params(has_mtp)
    assert report["parameters_from_config"]["total"] == _params(True)
    assert report["unknown_tensors"] == []
    assert not any("aligned" in w for w in report["warnings"])
    assert ("MTP speculative decoding is unavailable" in " ".join(report["warnings"])) == (not has_mtp)
    groups = report["parameters"]["by_group"]
    assert groups["experts"]["params"] == 5 * 8 * 3 * 32 * 64
    dtypes = {d["dtype"] for d in report["parameters"]["by_dtype"]}
    if quant == "fp8":
        assert {"F8_E4M3", "FP4_E2M1", "F8_E8M0 (scales)"} <= dtypes
        assert groups["experts"]["bytes"] == 5 * 8 * 3 * (32 * 64 // 2 + 32 * 64 // 32)
        assert report["config"]["quantization"]["expert_format"] == "fp4"
        assert report["quantization_found"]["experts fp4"] == (6 if has_mtp else 5) * 8 * 3
    else:
        assert dtypes == {"BF16", "F32", "I64"}
        assert report["config"]["quantization"] == {"quantized": False}


def test_inspect_text(cli, tmp_path):
    tiny.write_checkpoint(str(tmp_path), names="hf", quant="fp8")
    r = cli("inspect", tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "tensors: save_pretrained names, single file" in out
    assert "attention: layers 0 SWA, 1,3 CSA(4), 2,4 HCA(8)" in out
    assert "MoE:       layers 0-1 hash, 2-4 score" in out
    assert "routed experts fp4 e2m1" in out
    assert "per token of context: 64 elements" in out
    assert "MTP: unavailable" in out
    assert "Warnings" in out


def test_inspect_v4_flash_config_only(cli):
    r = cli("inspect", V4_FLASH_CONFIG, "--config-only", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["kv_cache"]["elements_per_token"] == 3440
    assert report["layer_kinds"]["counts"] == {"SWA": 2, "CSA": 21, "HCA": 20, "hash": 3, "score": 40}
    assert report["layer_kinds"]["attention"] == "layers 0-1 SWA, 2,4,..,42 CSA(4), 3,5,..,41 HCA(128)"
    assert 283e9 < report["parameters_from_config"]["main"] < 285e9  # model card: 284B


def test_inspect_v41_text_and_json(cli):
    model = REPO / "tests/data/model/v41_tiny_a/official_quant"
    r = cli("inspect", model)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("DeepSeek-V4.1 model:")
    assert ("roles:     layers 0-1 SWA, 2,4 Full(2), 3 Reuse(2), 5 Full(1) candidate source, "
            "6 Reindex(1) in candidates window-only, 7 Reuse(1) window-only") in out
    assert "Engram:    layers 1,4, 2 table(s) of 11.99 KiB (host memory, memory-mapped)" in out
    assert "drafter:   dspark: 3 stage(s), block 4, target layers 5-7" in out
    assert "per token of context: 192 elements" in out
    assert "DSpark drafter: available" in out
    report = json.loads(cli("inspect", model, "--json").stdout)
    assert report["family"] == "deepseek_v41"
    assert report["layer_kinds"]["counts"]["CSA2"] == 6
    assert report["engram_tables"] == {"tables": 2, "bytes": 12276}
    assert report["tensors"]["unknown"] == 0


def test_inspect_bad_directory(cli, tmp_path):
    r = cli("inspect", tmp_path / "missing")
    assert r.returncode == 1
    assert "deepinfer inspect: error: model directory not found" in r.stderr
    assert str(tmp_path / "missing") in r.stderr
    r = cli("inspect", tmp_path)  # exists, but no config.json
    assert r.returncode == 1
    assert "config not found" in r.stderr and "config.json" in r.stderr
    r = cli("inspect")
    assert r.returncode == 2


def test_inspect_corrupt_and_incomplete(cli, tmp_path):
    tiny.write_checkpoint(str(tmp_path), shards=2)
    shard = tmp_path / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:1000])
    r = cli("inspect", tmp_path)
    assert r.returncode == 1
    assert str(shard) in r.stderr
    assert "truncated" in r.stderr

    other = tmp_path / "other"
    tiny.write_checkpoint(str(other))
    cfg = json.loads((other / "config.json").read_text())
    cfg["model_type"] = "llama"
    (other / "config.json").write_text(json.dumps(cfg))
    r = cli("inspect", other)
    assert r.returncode == 1
    assert "unsupported model_type 'llama'" in r.stderr and "deepseek_v4" in r.stderr


def test_python_api(tmp_path):
    from deepinfer.checkpoint import inspect_model, load_config

    tiny.write_checkpoint(str(tmp_path / "a"), names="hf", config_naming="hf")
    tiny.write_checkpoint(str(tmp_path / "b"), names="official", config_naming="official")
    report = inspect_model(tmp_path / "a")
    assert report["name_family"] == "save_pretrained"
    assert report["mtp"]["available"] is False
    assert inspect_model(tmp_path / "a", config_only=True)["kv_cache"] == report["kv_cache"]

    a, b = load_config(tmp_path / "a"), load_config(tmp_path / "b" / "config.json")
    assert (a["naming"], b["naming"]) == ("huggingface", "official")
    for c in (a, b):
        del c["naming"], c["source"]
    assert a == b
    assert a["layers"][1] == {"attention": "CSA", "compress_ratio": 4, "moe": "hash"}
    assert a["rope_head_dim"] == 16 and a["compress_rope"]["yarn"] is True and a["main_rope"]["yarn"] is False

    with pytest.raises(FileNotFoundError, match="model directory not found"):
        inspect_model(tmp_path / "nope")
    (tmp_path / "bad.json").write_text('{"model_type": "deepseek_v4", "hidden_size": }')
    with pytest.raises(ValueError, match=r"bad.json is not valid JSON.*line 1"):
        load_config(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text(json.dumps({**tiny.tiny_config("hf"), "hidden_size": "64"}))
    with pytest.raises(ValueError, match="field 'hidden_size' must be an integer"):
        load_config(tmp_path / "bad.json")


def test_fixture_files_are_standard_safetensors(tmp_path):
    """The hand-written files read back with the safetensors package."""
    safetensors = pytest.importorskip("safetensors")
    tiny.write_checkpoint(str(tmp_path), quant="fp8")
    path = str(tmp_path / "model.safetensors")
    header = tiny.read_safetensors_header(path)
    with safetensors.safe_open(path, "np") as f:
        assert set(f.keys()) == set(header) - {"__metadata__"}
        assert f.get_slice("layers.0.ffn.experts.0.w1.weight").get_dtype() == "I8"
        assert f.get_slice("layers.0.ffn.experts.0.w1.weight").get_shape() == [32, 32]
        assert f.get_slice("layers.0.ffn.experts.0.w1.scale").get_shape() == [32, 2]
        assert f.get_slice("layers.0.attn.wq_b.scale").get_shape() == [2, 1]
        assert f.get_tensor("hc_head_fn").shape == (4, 256)
        assert f.get_tensor("layers.0.ffn.gate.tid2eid").max() < 8


def test_fixture_quantizers():
    rng = np.random.default_rng(7)
    w = rng.normal(size=(200, 256))
    codes, scales = tiny.quantize_fp8(w)
    assert scales.shape == (2, 2)
    back = tiny.dequantize_fp8(codes, scales)
    assert np.all(np.abs(back - w) <= np.abs(w) / 16 + 2.0 ** (scales.astype(float).max() - 127 - 9))
    packed, s4 = tiny.quantize_fp4(w)
    assert packed.shape == (200, 128) and s4.shape == (200, 8)
    back4 = tiny.dequantize_fp4(packed, s4)
    step = np.repeat(2.0 ** (s4.astype(float) - 127), 32, axis=1)
    assert np.all(np.abs(back4 - w) <= step)  # at most one FP4 step (1 x scale) off
    # Nibble order: low nibble = even column.
    one_row = np.array([[-6.0, 1.0] + [0.0] * 30])
    p, s = tiny.quantize_fp4(one_row)
    assert s[0, 0] == 127 and p[0, 0] == 0x2F
    assert tiny.bf16_bits_to_float(tiny.to_bf16_bits(np.array([1.0, -2.5], dtype=np.float32))).tolist() == [1.0, -2.5]
