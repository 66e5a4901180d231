#!/usr/bin/env python3
"""Writes a random DeepSeek-V4-Flash-shaped checkpoint in the official layout, for benchmarks.

The real dimensions (tests/data/io/v4_flash_inference_config.json: hidden 4096, 64 heads of 512,
q_lora 1024, 8 output groups, 256 routed experts of width 2048 (top 6) + 1 shared, indexer 64 x
128 top-512, vocab 129280, window 128, mHC 4 streams) with only the first --layers layers of the
real layer pattern (0-1 SWA, then CSA(4) / HCA(128) alternating; the first 3 MoE layers
hash-routed) and no MTP block, so it fits one GPU and a benchmark's time. Stored as DeepSeek
ships it: FP8 E4M3 with 128x128 E8M0 scales for dense linears, FP4 E2M1 (two codes per byte)
with 1x32 E8M0 scales for routed experts, BF16 norms / compressor / router, F32 mHC, sinks, ape
and biases. One shard per layer plus one for the embedding and head, with
model.safetensors.index.json.

Values: random, scaled so activations stay O(1) through the layers (FP8 codes drawn from
exponents near 1, block scales about 1/sqrt(K)). Routed experts reuse windows of one random
byte pool, which keeps generation at disk speed; their bytes still differ from expert to expert,
and speed does not depend on the values. Not a model to read text with: a shape to time.

    python tools/gpu/make_synthetic_v4.py OUT_DIR [--layers 4] [--seed 0] [--config-only]

numpy only (the GPU machines have it); about 3.3 GB per layer plus 2.1 GB.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLOCK, FP4_BLOCK = 128, 32


def base_config() -> dict:
    with open(os.path.join(REPO, "tests/data/io/v4_flash_inference_config.json")) as f:
        return json.load(f)


class Gen:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.pool = self.rng.integers(0, 256, size=1 << 28, dtype=np.uint8)  # 256 MiB

    def pool_bytes(self, n: int) -> np.ndarray:
        off = int(self.rng.integers(0, self.pool.size - n)) if n < self.pool.size else 0
        if n <= self.pool.size:
            return self.pool[off:off + n]
        return np.resize(self.pool, n)

    def fp8(self, n: int, k: int) -> list[tuple[str, str, tuple, np.ndarray]]:
        b = self.pool_bytes(n * k)
        # sign | exponent 6..8 | mantissa: values 2^-1 .. 2^1.9, never NaN (0x7f / 0xff).
        e = 6 + ((b >> 3) & 1) + ((b >> 4) & 1)
        codes = (b & 0x80) | (e.astype(np.uint8) << 3) | (b & 7)
        exp = -round(math.log2(math.sqrt(k)))
        scales = np.full((-(-n // BLOCK), -(-k // BLOCK)), 127 + exp, np.uint8)
        return [("weight", "F8_E4M3", (n, k), codes), ("scale", "F8_E8M0", scales.shape, scales)]

    def fp4(self, n: int, k: int) -> list[tuple[str, str, tuple, np.ndarray]]:
        packed = self.pool_bytes(n * k // 2)
        exp = -round(math.log2(3.0 * math.sqrt(k)))
        scales = np.full((n, k // FP4_BLOCK), 127 + exp, np.uint8)
        return [("weight", "I8", (n, k // 2), packed), ("scale", "F8_E8M0", scales.shape, scales)]

    def bf16(self, shape: tuple, std: float, mean: float = 0.0) -> np.ndarray:
        x = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std) + np.float32(mean)
        return (x.view(np.uint32) >> 16).astype(np.uint16)

    def f32(self, shape: tuple, std: float, mean: float = 0.0) -> np.ndarray:
        return (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
                + np.float32(mean))


def layer_tensors(g: Gen, c: dict, i: int, ratio: int, hash_moe: bool):
    D, H, d, n = c["dim"], c["n_heads"], c["head_dim"], c["hc_mult"]
    ql, G, R, I = c["q_lora_rank"], c["o_groups"], c["o_lora_rank"], c["moe_inter_dim"]
    E, k, V = c["n_routed_experts"], c["n_activated_experts"], c["vocab_size"]
    Hi, di = c["index_n_heads"], c["index_head_dim"]
    mix = (2 + n) * n
    p = f"layers.{i}."

    def lin(name, rows, cols, fmt="fp8"):
        parts = g.fp8(rows, cols) if fmt == "fp8" else g.fp4(rows, cols)
        return [(p + name + "." + suffix, dt, shape, data) for suffix, dt, shape, data in parts]

    t = [(p + "attn_norm.weight", "BF16", (D,), g.bf16((D,), 0.1, 1.0)),
         (p + "ffn_norm.weight", "BF16", (D,), g.bf16((D,), 0.1, 1.0))]
    for site in ("attn", "ffn"):
        t += [(p + f"hc_{site}_fn", "F32", (mix, n * D), g.f32((mix, n * D), 0.02)),
              (p + f"hc_{site}_base", "F32", (mix,), g.f32((mix,), 0.1)),
              (p + f"hc_{site}_scale", "F32", (3,), g.f32((3,), 0.1, 1.0))]
    t += lin("attn.wq_a", ql, D)
    t += [(p + "attn.q_norm.weight", "BF16", (ql,), g.bf16((ql,), 0.1, 1.0))]
    t += lin("attn.wq_b", H * d, ql)
    t += lin("attn.wkv", d, D)
    t += [(p + "attn.kv_norm.weight", "BF16", (d,), g.bf16((d,), 0.1, 1.0))]
    t += lin("attn.wo_a", G * R, H * d // G)
    t += lin("attn.wo_b", D, G * R)
    t += [(p + "attn.attn_sink", "F32", (H,), g.f32((H,), 0.5))]
    if ratio:
        coff = 2 if ratio == 4 else 1
        cp = p + "attn.compressor."
        t += [(cp + "wkv.weight", "BF16", (coff * d, D), g.bf16((coff * d, D), D ** -0.5)),
              (cp + "wgate.weight", "BF16", (coff * d, D), g.bf16((coff * d, D), D ** -0.5)),
              (cp + "ape", "F32", (ratio, coff * d), g.f32((ratio, coff * d), 0.1)),
              (cp + "norm.weight", "BF16", (d,), g.bf16((d,), 0.1, 1.0))]
        if ratio == 4:
            t += lin("attn.indexer.wq_b", Hi * di, ql)
            ip = p + "attn.indexer."
            t += [(ip + "weights_proj.weight", "BF16", (Hi, D), g.bf16((Hi, D), D ** -0.5)),
                  (ip + "compressor.wkv.weight", "BF16", (2 * di, D), g.bf16((2 * di, D), D ** -0.5)),
                  (ip + "compressor.wgate.weight", "BF16", (2 * di, D),
                   g.bf16((2 * di, D), D ** -0.5)),
                  (ip + "compressor.ape", "F32", (ratio, 2 * di), g.f32((ratio, 2 * di), 0.1)),
                  (ip + "compressor.norm.weight", "BF16", (di,), g.bf16((di,), 0.1, 1.0))]
    t += [(p + "ffn.gate.weight", "BF16", (E, D), g.bf16((E, D), D ** -0.5))]
    if hash_moe:
        ids = np.argsort(g.rng.random((V, E), dtype=np.float32), axis=1)[:, :k].astype("<i8")
        t += [(p + "ffn.gate.tid2eid", "I64", (V, k), ids)]
    else:
        t += [(p + "ffn.gate.bias", "F32", (E,), g.f32((E,), 0.1))]
    for e in range(E):
        t += lin(f"ffn.experts.{e}.w1", I, D, "fp4")
        t += lin(f"ffn.experts.{e}.w2", D, I, "fp4")
        t += lin(f"ffn.experts.{e}.w3", I, D, "fp4")
    S = I * c["n_shared_experts"]
    t += lin("ffn.shared_experts.w1", S, D) + lin("ffn.shared_experts.w2", D, S)
    t += lin("ffn.shared_experts.w3", S, D)
    return t


def write_shard(path: str, tensors) -> int:
    """Streams tensors (name, dtype, shape, ndarray) into one safetensors file; returns bytes."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + data.nbytes]}
        offset += data.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, data in tensors:
            f.write(np.ascontiguousarray(data).tobytes())
    return offset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config-only", action="store_true", help="write config.json only")
    a = ap.parse_args()
    c = base_config()
    L = a.layers
    c["n_layers"] = L
    c["n_mtp_layers"] = 0
    c["n_hash_layers"] = min(c["n_hash_layers"], L)
    c["compress_ratios"] = c["compress_ratios"][:L]
    c["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                "weight_block_size": [BLOCK, BLOCK], "expert_fmt": "e2m1",
                                "expert_block_size": [1, FP4_BLOCK]}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    if a.config_only:
        return
    g = Gen(a.seed)
    D, V, n = c["dim"], c["vocab_size"], c["hc_mult"]
    shards = [[("embed.weight", "BF16", (V, D), g.bf16((V, D), 1.0)),
               ("head.weight", "BF16", (V, D), g.bf16((V, D), D ** -0.5)),
               ("norm.weight", "BF16", (D,), g.bf16((D,), 0.1, 1.0)),
               ("hc_head_fn", "F32", (n, n * D), g.f32((n, n * D), 0.02)),
               ("hc_head_base", "F32", (n,), g.f32((n,), 0.1)),
               ("hc_head_scale", "F32", (1,), g.f32((1,), 0.1, 1.0))]]
    weight_map, total = {}, 0
    count = L + 1
    for s in range(count):
        tensors = shards[0] if s == 0 else layer_tensors(
            g, c, s - 1, c["compress_ratios"][s - 1], s - 1 < c["n_hash_layers"])
        fname = f"model-{s + 1:05d}-of-{count:05d}.safetensors"
        total += write_shard(os.path.join(a.out, fname), tensors)
        weight_map.update({t[0]: fname for t in tensors})
        print(f"wrote {fname} ({len(tensors)} tensors)", flush=True)
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    print(f"{a.out}: {L} layers, {total / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
