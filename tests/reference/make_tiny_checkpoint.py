#!/usr/bin/env python3
"""Writes a tiny random DeepSeek-V4-shaped checkpoint (config.json + safetensors), numpy only.

The model is small enough for fast tests but has every layer kind of DeepSeek-V4-Flash:

    hidden 64, 5 layers: 0 SWA, 1 CSA(4), 2 HCA(8), 3 CSA(4), 4 HCA(8)   (+ 1 MTP layer, SWA)
    MoE: layers 0-1 hash-routed (tid2eid), 2-4 score-routed (sqrtsoftplus + bias)
    4 heads x head_dim 64 (last 16 channels rope), q_lora 32, 2 output groups x 32
    8 routed experts (top-2) + 1 shared, width 32; indexer 4 heads x 32, top-4
    sliding window 8, vocab 512, mHC 4 streams, YaRN on the compressed layers

so prompts of a few dozen tokens cross the window, emit CSA and HCA rows and make the indexer's
top-k choose. Options pick the tensor-name family (official names as DeepSeek ships them, or the
names Hugging Face save_pretrained writes), plain floats vs quantized (FP8 E4M3 dense weights
with 128x128 E8M0 scales, FP4 E2M1 experts with 1x32 E8M0 scales, plus a quantization_config),
the config spelling (HF DeepseekV4Config keys or the official inference/config.json keys), and
one file vs shards with model.safetensors.index.json.

safetensors is written by hand (8-byte little-endian header length, JSON header padded to 8
bytes, raw little-endian data) since numpy has no bf16/fp8 types.

    python tests/reference/make_tiny_checkpoint.py OUT_DIR [--names official|hf]
        [--quant none|fp8] [--fp8-experts] [--config-naming hf|official] [--shards N]
        [--no-index] [--mtp|--no-mtp] [--float-dtype bf16|f32] [--seed S]

Importable: write_checkpoint(out_dir, **options), tiny_config(naming, quantized),
expected_tensors(), decode helpers for tests.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct

import numpy as np

# ---- the tiny model --------------------------------------------------------------------------

VOCAB = 512
HIDDEN = 64
LAYERS = 5
HEADS = 4
HEAD_DIM = 64
ROPE_DIM = 16
Q_LORA = 32
O_GROUPS = 2
O_LORA = 32
MOE_INTER = 32
EXPERTS = 8
TOP_K = 2
SHARED = 1
INDEX_HEADS = 4
INDEX_DIM = 32
INDEX_TOPK = 4
WINDOW = 8
HC_MULT = 4
CSA_RATIO = 4
HCA_RATIO = 8
N_HASH = 2
N_MTP = 1
RATIOS = [0, CSA_RATIO, HCA_RATIO, CSA_RATIO, HCA_RATIO]  # per main layer; MTP layer: 0
BLOCK = 128  # FP8 scale tile
FP4_BLOCK = 32


def tiny_config(naming: str = "hf", quantized: bool = False) -> dict:
    """config.json contents in HF DeepseekV4Config naming or the official inference naming."""
    if naming == "official":
        cfg = {
            "vocab_size": VOCAB, "dim": HIDDEN, "moe_inter_dim": MOE_INTER, "n_layers": LAYERS,
            "n_hash_layers": N_HASH, "n_mtp_layers": N_MTP, "n_heads": HEADS, "norm_eps": 1e-6,
            "n_routed_experts": EXPERTS, "n_shared_experts": SHARED, "n_activated_experts": TOP_K,
            "score_func": "sqrtsoftplus", "route_scale": 1.5, "swiglu_limit": 10.0,
            "q_lora_rank": Q_LORA, "head_dim": HEAD_DIM, "rope_head_dim": ROPE_DIM,
            "o_groups": O_GROUPS, "o_lora_rank": O_LORA, "window_size": WINDOW,
            "compress_ratios": RATIOS + [0] * N_MTP, "compress_rope_theta": 160000.0,
            "original_seq_len": 65536, "rope_theta": 10000.0, "rope_factor": 16,
            "beta_fast": 32, "beta_slow": 1, "index_n_heads": INDEX_HEADS,
            "index_head_dim": INDEX_DIM, "index_topk": INDEX_TOPK, "hc_mult": HC_MULT,
            "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "dtype": "fp8" if quantized else "bf16",
        }
        if quantized:
            cfg.update({"scale_fmt": "ue8m0", "expert_dtype": "fp4"})
        return cfg
    kinds = {0: "sliding_attention", CSA_RATIO: "compressed_sparse_attention",
             HCA_RATIO: "heavily_compressed_attention"}
    factor = ROPE_DIM / HEAD_DIM
    cfg = {
        "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": 1, "head_dim": HEAD_DIM,
        "partial_rotary_factor": factor, "q_lora_rank": Q_LORA, "o_groups": O_GROUPS,
        "o_lora_rank": O_LORA, "moe_intermediate_size": MOE_INTER, "n_routed_experts": EXPERTS,
        "n_shared_experts": SHARED, "num_experts_per_tok": TOP_K, "scoring_func": "sqrtsoftplus",
        "norm_topk_prob": True, "routed_scaling_factor": 1.5, "swiglu_limit": 10.0,
        "sliding_window": WINDOW, "layer_types": [kinds[r] for r in RATIOS],
        "compress_rates": {"compressed_sparse_attention": CSA_RATIO,
                           "heavily_compressed_attention": HCA_RATIO},
        "mlp_layer_types": ["hash_moe"] * N_HASH + ["moe"] * (LAYERS - N_HASH),
        "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
        "rope_parameters": {
            "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": factor},
            "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 16.0,
                         "original_max_position_embeddings": 65536, "beta_fast": 32.0,
                         "beta_slow": 1.0, "attention_factor": 1.0, "partial_rotary_factor": factor},
        },
        "index_n_heads": INDEX_HEADS, "index_head_dim": INDEX_DIM, "index_topk": INDEX_TOPK,
        "hc_mult": HC_MULT, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6,
        "max_position_embeddings": 1048576, "num_nextn_predict_layers": N_MTP,
        "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    if quantized:
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                      "weight_block_size": [BLOCK, BLOCK]}
        cfg["expert_dtype"] = "fp4"
    return cfg


# ---- the tensor table (spec §4), written independently of the C++ one ------------------------

LINEAR, EXPERT, FLOAT, TABLE = "linear", "expert", "float", "table"


def _block(prefix: str, ratio: int, hash_moe: bool) -> list[tuple[str, tuple, str]]:
    d, D, n = HEAD_DIM, HIDDEN, HC_MULT
    mix = (2 + n) * n
    t = [
        ("attn_norm.weight", (D,), FLOAT), ("ffn_norm.weight", (D,), FLOAT),
        ("hc_attn_fn", (mix, n * D), FLOAT), ("hc_attn_base", (mix,), FLOAT), ("hc_attn_scale", (3,), FLOAT),
        ("hc_ffn_fn", (mix, n * D), FLOAT), ("hc_ffn_base", (mix,), FLOAT), ("hc_ffn_scale", (3,), FLOAT),
        ("attn.wq_a.weight", (Q_LORA, D), LINEAR), ("attn.q_norm.weight", (Q_LORA,), FLOAT),
        ("attn.wq_b.weight", (HEADS * d, Q_LORA), LINEAR), ("attn.wkv.weight", (d, D), LINEAR),
        ("attn.kv_norm.weight", (d,), FLOAT),
        ("attn.wo_a.weight", (O_GROUPS * O_LORA, HEADS * d // O_GROUPS), LINEAR),
        ("attn.wo_b.weight", (D, O_GROUPS * O_LORA), LINEAR), ("attn.attn_sink", (HEADS,), FLOAT),
    ]
    if ratio:
        coff = 2 if ratio == CSA_RATIO else 1  # CSA windows overlap: two halves per token
        t += [
            ("attn.compressor.wkv.weight", (coff * d, D), FLOAT),
            ("attn.compressor.wgate.weight", (coff * d, D), FLOAT),
            ("attn.compressor.ape", (ratio, coff * d), FLOAT),
            ("attn.compressor.norm.weight", (d,), FLOAT),
        ]
        if ratio == CSA_RATIO:
            t += [
                ("attn.indexer.wq_b.weight", (INDEX_HEADS * INDEX_DIM, Q_LORA), LINEAR),
                ("attn.indexer.weights_proj.weight", (INDEX_HEADS, D), FLOAT),
                ("attn.indexer.compressor.wkv.weight", (2 * INDEX_DIM, D), FLOAT),
                ("attn.indexer.compressor.wgate.weight", (2 * INDEX_DIM, D), FLOAT),
                ("attn.indexer.compressor.ape", (ratio, 2 * INDEX_DIM), FLOAT),
                ("attn.indexer.compressor.norm.weight", (INDEX_DIM,), FLOAT),
            ]
    t.append(("ffn.gate.weight", (EXPERTS, D), FLOAT))
    t.append(("ffn.gate.tid2eid", (VOCAB, TOP_K), TABLE) if hash_moe else ("ffn.gate.bias", (EXPERTS,), FLOAT))
    for e in range(EXPERTS):
        t += [(f"ffn.experts.{e}.w1.weight", (MOE_INTER, D), EXPERT),
              (f"ffn.experts.{e}.w2.weight", (D, MOE_INTER), EXPERT),
              (f"ffn.experts.{e}.w3.weight", (MOE_INTER, D), EXPERT)]
    S = MOE_INTER * SHARED
    t += [("ffn.shared_experts.w1.weight", (S, D), LINEAR),
          ("ffn.shared_experts.w2.weight", (D, S), LINEAR),
          ("ffn.shared_experts.w3.weight", (S, D), LINEAR)]
    return [(prefix + name, shape, role) for name, shape, role in t]


def expected_tensors(mtp: bool = True) -> list[tuple[str, tuple, str]]:
    """(canonical name, logical shape, role) for every tensor of the tiny model."""
    D, n = HIDDEN, HC_MULT
    out = [("embed.weight", (VOCAB, D), FLOAT), ("head.weight", (VOCAB, D), FLOAT),
           ("norm.weight", (D,), FLOAT), ("hc_head_fn", (n, n * D), FLOAT),
           ("hc_head_base", (n,), FLOAT), ("hc_head_scale", (1,), FLOAT)]
    for i, r in enumerate(RATIOS):
        out += _block(f"layers.{i}.", r, i < N_HASH)
    if mtp:
        for i in range(N_MTP):
            p = f"mtp.{i}."
            out += _block(p, 0, False)
            out += [(p + "e_proj.weight", (D, D), LINEAR), (p + "h_proj.weight", (D, D), LINEAR),
                    (p + "enorm.weight", (D,), FLOAT), (p + "hnorm.weight", (D,), FLOAT),
                    (p + "norm.weight", (D,), FLOAT), (p + "hc_head_fn", (n, n * D), FLOAT),
                    (p + "hc_head_base", (n,), FLOAT), (p + "hc_head_scale", (1,), FLOAT)]
    return out


def save_pretrained_name(canonical: str) -> str:
    """Official name -> the name HF save_pretrained writes (spec §4.x)."""
    top = {"embed.weight": "model.embed_tokens.weight", "head.weight": "head.weight",
           "hc_head_fn": "model.hc_head.hc_fn", "hc_head_base": "model.hc_head.hc_base",
           "hc_head_scale": "model.hc_head.hc_scale"}
    if canonical in top:
        return top[canonical]
    parts = canonical.split(".")
    if parts[0] in ("layers", "mtp") and parts[2:] == ["attn", "kv_norm", "weight"]:
        canonical = ".".join(parts[:2] + ["attn", "norm", "weight"])
    return "model." + canonical


# ---- number formats ----------------------------------------------------------------------------

def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns, round to nearest even (no NaNs here)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return bits.astype(np.uint16)


def bf16_bits_to_float(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


def _e4m3_table() -> np.ndarray:
    v = np.zeros(256, dtype=np.float64)
    for code in range(256):
        e, m = (code >> 3) & 0xF, code & 7
        mag = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        v[code] = -mag if code & 0x80 else mag
    v[0x7F] = v[0xFF] = np.nan
    return v


E4M3 = _e4m3_table()
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float64)


def _nearest_code(mag: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Index of the nearest value in an increasing table, ties to the even index."""
    hi = np.clip(np.searchsorted(table, mag), 1, len(table) - 1)
    lo = hi - 1
    dlo, dhi = mag - table[lo], table[hi] - mag
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))
    return np.where(pick_hi, hi, lo)


def quantize_fp8(w: np.ndarray, block: int = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """[out, in] float -> (E4M3 codes uint8 [out, in], E8M0 scale bytes [ceil(out/b), ceil(in/b)]),
    power-of-two scales s = 2^ceil(log2(amax / 448)) per block."""
    out_dim, in_dim = w.shape
    so, si = -(-out_dim // block), -(-in_dim // block)
    codes = np.zeros(w.shape, dtype=np.uint8)
    scales = np.zeros((so, si), dtype=np.uint8)
    pos = E4M3[:0x7F]  # codes 0..126 are increasing
    for i in range(so):
        for j in range(si):
            tile = w[i * block:(i + 1) * block, j * block:(j + 1) * block].astype(np.float64)
            amax = max(float(np.abs(tile).max()), 1e-4)
            exp = math.ceil(math.log2(amax / 448.0))
            scales[i, j] = exp + 127
            x = tile / 2.0 ** exp
            c = _nearest_code(np.minimum(np.abs(x), 448.0), pos).astype(np.uint8)
            codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = c | np.where(x < 0, 0x80, 0).astype(np.uint8)
    return codes, scales


def quantize_fp4(w: np.ndarray, block: int = FP4_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """[out, in] float -> (packed bytes uint8 [out, in/2] with the low nibble = even column,
    E8M0 scale bytes [out, in/block]), s = 2^ceil(log2(amax / 6)) per 1 x block."""
    out_dim, in_dim = w.shape
    blocks = w.astype(np.float64).reshape(out_dim, in_dim // block, block)
    amax = np.maximum(np.abs(blocks).max(axis=2), 1e-4)
    exp = np.ceil(np.log2(amax / 6.0))
    x = blocks / (2.0 ** exp)[:, :, None]
    c = _nearest_code(np.minimum(np.abs(x), 6.0), E2M1[:8]) | np.where(x < 0, 8, 0)
    c = c.reshape(out_dim, in_dim).astype(np.uint8)
    packed = (c[:, 0::2] | (c[:, 1::2] << 4)).astype(np.uint8)
    return packed, (exp + 127).astype(np.uint8)


def dequantize_fp8(codes: np.ndarray, scales: np.ndarray, block: int = BLOCK) -> np.ndarray:
    s = 2.0 ** (scales.astype(np.float64) - 127)
    s = np.repeat(np.repeat(s, block, axis=0), block, axis=1)[: codes.shape[0], : codes.shape[1]]
    return E4M3[codes] * s


def dequantize_fp4(packed: np.ndarray, scales: np.ndarray, block: int = FP4_BLOCK) -> np.ndarray:
    codes = np.empty((packed.shape[0], packed.shape[1] * 2), dtype=np.uint8)
    codes[:, 0::2] = packed & 0xF
    codes[:, 1::2] = packed >> 4
    s = np.repeat(2.0 ** (scales.astype(np.float64) - 127), block, axis=1)
    return E2M1[codes] * s


# ---- safetensors ---------------------------------------------------------------------------

DTYPE_SIZE = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "BF16": 2, "F16": 2, "I16": 2,
              "F8_E4M3": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1}


def write_safetensors(path: str, tensors: list[tuple[str, str, tuple, bytes]]) -> None:
    """tensors: (name, safetensors dtype, shape, raw little-endian bytes). Like the safetensors
    library, larger element types come first, so every tensor is aligned to its element size and
    the data section has no gaps."""
    tensors = sorted(tensors, key=lambda t: -DTYPE_SIZE[t[1]])
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, data in tensors:
            f.write(data)


def read_safetensors_header(path: str) -> dict:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


# ---- weights ---------------------------------------------------------------------------------

def _values(rng: np.random.Generator, name: str, shape: tuple, role: str) -> np.ndarray:
    """Random weights with sensible scales (activations stay O(1) through the layers)."""
    if role in (LINEAR, EXPERT) or name.endswith(("wkv.weight", "wgate.weight", "weights_proj.weight",
                                                  "gate.weight", "head.weight")):
        return rng.normal(0.0, 1.0 / math.sqrt(shape[-1]), shape)
    if name.endswith("norm.weight"):
        return 1.0 + 0.1 * rng.normal(size=shape)
    if name.endswith("_fn"):
        return rng.normal(0.0, 0.02, shape)
    if name.endswith("_scale"):
        return 1.0 + 0.1 * rng.normal(size=shape)
    if name.endswith(("_base", "attn_sink", "ape", "gate.bias")):
        return rng.normal(0.0, 0.5 if name.endswith("attn_sink") else 0.1, shape)
    return rng.normal(0.0, 1.0, shape)  # embeddings


def make_tensors(quant: str = "none", fp8_experts: bool = False, mtp: bool = True,
                 float_dtype: str = "bf16", seed: int = 0) -> list[tuple[str, str, tuple, bytes]]:
    """(canonical name, dtype, stored shape, bytes) for every tensor, plus `.scale` companions."""
    rng = np.random.default_rng(seed)
    out = []
    for name, shape, role in expected_tensors(mtp):
        if role == TABLE:
            ids = np.argsort(rng.random((shape[0], EXPERTS)), axis=1)[:, : shape[1]].astype("<i8")
            out.append((name, "I64", shape, ids.tobytes()))
            continue
        w = _values(rng, name, shape, role)
        scale_name = name[: -len(".weight")] + ".scale"
        if quant == "fp8" and role == EXPERT and not fp8_experts:
            packed, scales = quantize_fp4(w)
            out.append((name, "I8", packed.shape, packed.tobytes()))
            out.append((scale_name, "F8_E8M0", scales.shape, scales.tobytes()))
        elif quant == "fp8" and role in (LINEAR, EXPERT):
            codes, scales = quantize_fp8(w)
            out.append((name, "F8_E4M3", codes.shape, codes.tobytes()))
            out.append((scale_name, "F8_E8M0", scales.shape, scales.tobytes()))
        elif float_dtype == "f32" or not name.endswith(".weight"):
            # The official checkpoint keeps mHC parameters, sinks, ape and biases in F32.
            out.append((name, "F32", shape, w.astype("<f4").tobytes()))
        else:
            out.append((name, "BF16", shape, to_bf16_bits(w).astype("<u2").tobytes()))
    return out


def write_checkpoint(out_dir: str, names: str = "official", quant: str = "none", fp8_experts: bool = False,
                     config_naming: str = "hf", shards: int = 1, index: bool = True, mtp: bool | None = None,
                     float_dtype: str = "bf16", seed: int = 0) -> dict:
    """Writes config.json and the tensors into out_dir; returns the config dict."""
    if names not in ("official", "hf"):
        raise ValueError(f"names must be official or hf, not {names!r}")
    if mtp is None:
        mtp = names == "official"  # HF saves carry no mtp.* tensors
    os.makedirs(out_dir, exist_ok=True)
    cfg = tiny_config(config_naming, quant == "fp8")
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tensors = make_tensors(quant, fp8_experts, mtp, float_dtype, seed)
    if names == "hf":
        tensors = [(save_pretrained_name(n), d, s, b) for n, d, s, b in tensors]
    if shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
        return cfg
    weight_map, per_shard = {}, -(-len(tensors) // shards)
    for k in range(shards):
        part = tensors[k * per_shard:(k + 1) * per_shard]
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(out_dir, fname), part)
        weight_map.update({n: fname for n, _, _, _ in part})
    if index:
        total = sum(len(b) for _, _, _, b in tensors)
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return cfg


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--names", choices=["official", "hf"], default="official",
                   help="tensor names: official (DeepSeek release) or hf (save_pretrained)")
    p.add_argument("--quant", choices=["none", "fp8"], default="none",
                   help="fp8: FP8 E4M3 dense weights (128x128 E8M0 scales) + FP4 experts (1x32)")
    p.add_argument("--fp8-experts", action="store_true", help="with --quant fp8: FP8 experts (V4-Base)")
    p.add_argument("--config-naming", choices=["hf", "official"], default="hf")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--no-index", action="store_true", help="shards without model.safetensors.index.json")
    p.add_argument("--mtp", dest="mtp", action="store_true", default=None)
    p.add_argument("--no-mtp", dest="mtp", action="store_false")
    p.add_argument("--float-dtype", choices=["bf16", "f32"], default="bf16")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    write_checkpoint(a.out_dir, a.names, a.quant, a.fp8_experts, a.config_naming, a.shards,
                     not a.no_index, a.mtp, a.float_dtype, a.seed)
    print(a.out_dir)


if __name__ == "__main__":
    main()
