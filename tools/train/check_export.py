"""Checks an exported default-model directory against its own config.json: every tensor that spec §4
requires for this config is present with the right shape and safetensors dtype, there are no extras,
the index covers exactly the shards, and the shards respect the size limit. Pure Python (reads the
safetensors JSON headers), so it runs anywhere:

    python3 tools/train/check_export.py models/default [--shard-mb 10]

Exit status 0 when the directory is consistent; otherwise every problem is listed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import struct
import sys


def header(path: pathlib.Path) -> dict:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h


def expected(c: dict) -> dict:
    """{name: (dtype, shape)} for an official FP8/FP4 checkpoint with this config (spec §4)."""
    D, V, H, hd = c["dim"], c["vocab_size"], c["n_heads"], c["head_dim"]
    ql, g, r, I, E = c["q_lora_rank"], c["o_groups"], c["o_lora_rank"], c["moe_inter_dim"], c["n_routed_experts"]
    n, k, Hi, di = c["hc_mult"], c["n_activated_experts"], c["index_n_heads"], c["index_head_dim"]
    b0, b1 = c["quantization_config"]["weight_block_size"]
    fb = c["quantization_config"].get("expert_block_size", [1, 32])[1]
    mix = (2 + n) * n
    e = {}

    def fp8(name, o, i):
        e[name + ".weight"] = ("F8_E4M3", [o, i])
        e[name + ".scale"] = ("F8_E8M0", [-(-o // b0), -(-i // b1)])

    def fp4(name, o, i):
        e[name + ".weight"] = ("I8", [o, i // 2])
        e[name + ".scale"] = ("F8_E8M0", [o, i // fb])

    def put(name, dtype, shape):
        e[name] = (dtype, list(shape))

    def hc_head(p):
        put(p + "hc_head_fn", "F32", [n, n * D])
        put(p + "hc_head_base", "F32", [n])
        put(p + "hc_head_scale", "F32", [1])

    def block(p, ratio, is_hash):
        for s in ("attn_norm", "ffn_norm"):
            put(p + s + ".weight", "BF16", [D])
        for s in ("attn", "ffn"):
            put(p + f"hc_{s}_fn", "F32", [mix, n * D])
            put(p + f"hc_{s}_base", "F32", [mix])
            put(p + f"hc_{s}_scale", "F32", [3])
        fp8(p + "attn.wq_a", ql, D)
        put(p + "attn.q_norm.weight", "BF16", [ql])
        fp8(p + "attn.wq_b", H * hd, ql)
        fp8(p + "attn.wkv", hd, D)
        put(p + "attn.kv_norm.weight", "BF16", [hd])
        fp8(p + "attn.wo_a", g * r, H * hd // g)
        fp8(p + "attn.wo_b", D, g * r)
        put(p + "attn.attn_sink", "F32", [H])
        if ratio:
            cc = 2 if ratio == 4 else 1
            for s in ("wkv", "wgate"):
                put(p + f"attn.compressor.{s}.weight", "BF16", [cc * hd, D])
            put(p + "attn.compressor.ape", "F32", [ratio, cc * hd])
            put(p + "attn.compressor.norm.weight", "BF16", [hd])
        if ratio == 4:
            fp8(p + "attn.indexer.wq_b", Hi * di, ql)
            put(p + "attn.indexer.weights_proj.weight", "BF16", [Hi, D])
            for s in ("wkv", "wgate"):
                put(p + f"attn.indexer.compressor.{s}.weight", "BF16", [2 * di, D])
            put(p + "attn.indexer.compressor.ape", "F32", [4, 2 * di])
            put(p + "attn.indexer.compressor.norm.weight", "BF16", [di])
        put(p + "ffn.gate.weight", "BF16", [E, D])
        if is_hash:
            put(p + "ffn.gate.tid2eid", "I64", [V, k])
        else:
            put(p + "ffn.gate.bias", "F32", [E])
        for x in range(E):
            fp4(p + f"ffn.experts.{x}.w1", I, D)
            fp4(p + f"ffn.experts.{x}.w3", I, D)
            fp4(p + f"ffn.experts.{x}.w2", D, I)
        fp8(p + "ffn.shared_experts.w1", I, D)
        fp8(p + "ffn.shared_experts.w3", I, D)
        fp8(p + "ffn.shared_experts.w2", D, I)

    put("embed.weight", "BF16", [V, D])
    put("head.weight", "BF16", [V, D])
    put("norm.weight", "BF16", [D])
    hc_head("")
    L = c["n_layers"]
    for i in range(L):
        block(f"layers.{i}.", c["compress_ratios"][i], i < c["n_hash_layers"])
    for j in range(c.get("n_mtp_layers", 0)):
        p = f"mtp.{j}."
        block(p, c["compress_ratios"][L + j], False)
        fp8(p + "e_proj", D, D)
        fp8(p + "h_proj", D, D)
        for s in ("enorm", "hnorm", "norm"):
            put(p + s + ".weight", "BF16", [D])
        hc_head(p)
    return e


def check(d: pathlib.Path, shard_mb: float | None = None) -> list[str]:
    errs = []
    c = json.loads((d / "config.json").read_text())
    idx = json.loads((d / "model.safetensors.index.json").read_text())
    wmap = idx["weight_map"]
    got = {}
    shards = sorted(d.glob("*.safetensors"))
    for f in shards:
        if shard_mb and f.stat().st_size > shard_mb * 1e6 * 1.05:
            errs.append(f"{f.name}: {f.stat().st_size / 1e6:.1f} MB exceeds {shard_mb} MB")
        for name, info in header(f).items():
            if name in got:
                errs.append(f"{name}: in two shards")
            got[name] = (info["dtype"], info["shape"], f.name)
    if set(wmap.values()) != {f.name for f in shards}:
        errs.append(f"index names shards {sorted(set(wmap.values()))}, directory has {[f.name for f in shards]}")
    for name, (dt, shp, fn) in got.items():
        if wmap.get(name) != fn:
            errs.append(f"{name}: index says {wmap.get(name)}, found in {fn}")
    exp = expected(c)
    for name, (dt, shp) in exp.items():
        if name not in got:
            errs.append(f"missing {name} ({dt} {shp})")
        elif (got[name][0], got[name][1]) != (dt, shp):
            errs.append(f"{name}: {got[name][0]} {got[name][1]}, expected {dt} {shp}")
    for name in sorted(set(got) - set(exp)):
        errs.append(f"unexpected tensor {name}")
    total = sum(f.stat().st_size for f in shards)
    if not errs:
        print(f"{d}: {len(got)} tensors in {len(shards)} shards ({total / 1e6:.2f} MB) match config.json")
    return errs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--shard-mb", type=float, default=None)
    a = ap.parse_args(argv)
    errs = check(pathlib.Path(a.dir), a.shard_mb)
    for e in errs:
        print("error:", e, file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
