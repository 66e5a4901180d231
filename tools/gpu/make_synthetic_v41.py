#!/usr/bin/env python3
"""Writes a random DeepSeek-V4.1-Flash-shaped checkpoint in the official layout, for benchmarks.

The released dimensions (tests/data/io/v41_flash_config.json: hidden 5120, 64 heads of 512,
q_lora 1280, 8 output groups, 384 routed experts of width 2304 (top 6) + 1 shared, indexer 32 x
128 top-512, Engram 8 heads of 256 over 2- to 4-grams, vocab 129280, window 128, mHC 4 streams)
with only the first --layers layers of the real schedule (default 4: 0 SWA, 1 SWA + Engram,
2 Full ratio-2 KV and index source, 3 Reuse) and no DSpark stages, so it fits one GPU and a
benchmark's time. The Engram tables keep their real width and format (FP8 E4M3 rows, an E8M0 scale per
32 values) but hash into --engram-vocab buckets per n-gram head instead of 16M (the real
tables are ~100 GB each); their row counts follow the hash layout's primes, as the loader checks.

Stored as DeepSeek ships V4.1: FP8 E4M3 with 32x32 E8M0 tiles for dense linears, FP4 E2M1 (two
codes per byte) with 1x32 E8M0 scales for routed experts, BF16 norms / compressor / indexer keys
/ router, F32 mHC, sinks and gate biases. One shard per layer plus one for the embedding and
head, with model.safetensors.index.json; tokenizer.json is the DeepSeek-V4 one (the Engram map
needs the checkpoint's vocabulary: 99,092 compressed ids). Random values scaled to keep
activations O(1) (make_synthetic_v4.py's generator); a shape to time, not a model to read.

    python tools/gpu/make_synthetic_v41.py OUT_DIR [--layers 4] [--engram-vocab 200000]
        [--seed 0] [--shrink]       # --shrink: tiny widths, to check the layout on a CPU
        [--config-only]             # config.json (and tokenizer.json) only: the transformers peer

numpy, and tokenizers for the reference layout script it imports. About 7.4 GB per layer (the experts) plus 2.7 GB, and 1.2 GB per Engram table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_synthetic_v4 import Gen, write_shard  # noqa: E402  (random bytes, shard writer)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLOCK, FP4_BLOCK = 32, 32  # V4.1: 32x32 FP8 tiles


def engram_rows(t: dict) -> list[int]:
    """Rows each Engram layer's table needs: the sum of its (n, head) primes, by the hash layout
    the reference script writes out (tests/reference/engram/make_engram_vectors.py `layout`,
    the rule of model/deepseek_v41/engram_hash.h), which the loader checks again."""
    spec = importlib.util.spec_from_file_location(
        "make_engram_vectors", os.path.join(REPO, "tests/reference/engram/make_engram_vectors.py"))
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    cfg = {"max_ngram_size": t["engram_max_ngram_size"], "n_heads": t["engram_n_heads"],
           "compressed_vocab_size": t["engram_compressed_vocab_size"],
           "vocab_size": t["engram_vocab_size"], "layer_ids": t["engram_layer_ids"],
           "num_embeddings": [ref.INT64_MAX] * len(t["engram_layer_ids"])}
    return ref.layout(cfg)["rows"]


def text_config(layers: int, engram_vocab: int, shrink: bool) -> dict:
    with open(os.path.join(REPO, "tests/data/io/v41_flash_config.json")) as f:
        c = json.load(f)
    t = c["text_config"]
    L = layers
    t["num_hidden_layers"] = L
    t["num_nextn_predict_layers"] = 0
    t["compress_ratios"] = t["compress_ratios"][:L]
    t["kv_source_layer_ids"] = [i for i in t["kv_source_layer_ids"] if i < L]
    t["index_source_layer_ids"] = [i for i in t["index_source_layer_ids"] if i < L]
    if t["candidate_source_layer_id"] >= L:
        t["candidate_source_layer_id"] = -1
    keep = [k for k, i in enumerate(t["engram_layer_ids"]) if i < L]
    t["engram_layer_ids"] = [t["engram_layer_ids"][k] for k in keep]
    t["engram_vocab_size"] = engram_vocab
    t["dspark_target_layer_ids"] = [i for i in t["dspark_target_layer_ids"] if i < L]
    if shrink:  # the same layout at tiny widths (a CPU check of the writer)
        t.update(hidden_size=64, num_attention_heads=2, head_dim=128, qk_rope_head_dim=64,
                 q_lora_rank=64, o_lora_rank=32, o_groups=2, moe_intermediate_size=64,
                 n_routed_experts=8, index_n_heads=2, engram_head_dim=64, engram_n_heads=2)
    t["engram_num_embeddings"] = engram_rows(t)
    c["text_config"] = t
    c["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                "weight_block_size": [BLOCK, BLOCK], "expert_dtype": "fp4",
                                "expert_fmt": "e2m1", "expert_block_size": [1, FP4_BLOCK]}
    return c


def fp8(g: Gen, n: int, k: int, block: int = BLOCK):
    """FP8 E4M3 codes near 1 with E8M0 block scales about 1/sqrt(k) (as make_synthetic_v4.py)."""
    b = g.pool_bytes(n * k)
    e = 6 + ((b >> 3) & 1) + ((b >> 4) & 1)
    codes = (b & 0x80) | (e.astype(np.uint8) << 3) | (b & 7)
    exp = -round(math.log2(math.sqrt(k)))
    scales = np.full((-(-n // block), -(-k // block)), 127 + exp, np.uint8)
    return [("weight", "F8_E4M3", (n, k), codes), ("scale", "F8_E8M0", scales.shape, scales)]


def layer_tensors(g: Gen, t: dict, i: int, rows_of: dict):
    D, H, d, n = t["hidden_size"], t["num_attention_heads"], t["head_dim"], t["hc_mult"]
    Q, G, R, I = t["q_lora_rank"], t["o_groups"], t["o_lora_rank"], t["moe_intermediate_size"]
    E, IH, ID = t["n_routed_experts"], t["index_n_heads"], t["index_head_dim"]
    ratio = t["compress_ratios"][i]
    full = i in t["kv_source_layer_ids"]
    index_layer = i in t["index_source_layer_ids"]
    mix = (2 + n) * n
    p = f"layers.{i}."

    def lin(name, rows, cols):
        return [(p + name + "." + s, dt, sh, data) for s, dt, sh, data in fp8(g, rows, cols)]

    def experts(e):
        out = []
        for w, (r, c) in (("w1", (I, D)), ("w2", (D, I)), ("w3", (I, D))):
            for s, dt, sh, data in g.fp4(r, c):
                out.append((p + f"ffn.experts.{e}.{w}.{s}", dt, sh, data))
        return out

    def bf(name, shape, std, mean=0.0):
        return (p + name, "BF16", shape, g.bf16(shape, std, mean))

    def f32(name, shape, std, mean=0.0):
        return (p + name, "F32", shape, g.f32(shape, std, mean))

    t_ = [bf("attn_norm.weight", (D,), 0.1, 1.0), bf("ffn_norm.weight", (D,), 0.1, 1.0)]
    for site in ("attn", "ffn"):
        t_ += [f32(f"hc_{site}_fn", (mix, n * D), 0.02), f32(f"hc_{site}_base", (mix,), 0.1),
               f32(f"hc_{site}_scale", (3,), 0.1, 1.0)]
    t_ += lin("attn.wq_a", Q, D) + [bf("attn.q_norm.weight", (Q,), 0.1, 1.0)]
    t_ += lin("attn.wq_b", H * d, Q) + lin("attn.wkv", d, D)
    t_ += [bf("attn.kv_norm.weight", (d,), 0.1, 1.0)]
    t_ += lin("attn.wo_a", G * R, H * d // G) + lin("attn.wo_b", D, G * R)
    t_ += [f32("attn.attn_sink", (H,), 0.5)]
    if full:
        t_ += [bf("attn.compressor.wkv.weight", (d, D), D ** -0.5)]
        if ratio > 1:
            t_ += [bf("attn.compressor.wgate.weight", (d, D), D ** -0.5)]
        t_ += [bf("attn.compressor.norm.weight", (d,), 0.1, 1.0),
               bf("attn.indexer.wk.weight", (ID, d), d ** -0.5),
               bf("attn.indexer.k_norm.weight", (ID,), 0.1, 1.0)]
    if index_layer:
        t_ += lin("attn.indexer.wq_b", IH * ID, Q)
        t_ += [bf("attn.indexer.weights_proj.weight", (IH, D), D ** -0.5)]
    t_ += [bf("ffn.gate.weight", (E, D), D ** -0.5), f32("ffn.gate.bias", (E,), 0.1)]
    for e in range(E):
        t_ += experts(e)
    S = I * t["n_shared_experts"]
    t_ += lin("ffn.shared_experts.w1", S, D) + lin("ffn.shared_experts.w2", D, S)
    t_ += lin("ffn.shared_experts.w3", S, D)
    if i in rows_of:  # Engram: the FP8 table with E8M0 scales per 32 values, its projection
        hd, cols = t["engram_head_dim"], (t["engram_max_ngram_size"] - 1) * t["engram_n_heads"]
        rows = rows_of[i]
        codes = fp8(g, rows, hd, block=rows)[0][3]  # values near 1; scales 1 (E8M0 127)
        sc = np.full((rows, hd // 32), 127, np.uint8)  # one E8M0 scale per 32 values of a row
        t_ += [(p + "engram.embed.weight", "F8_E4M3", (rows, hd), codes),
               (p + "engram.embed.scale", "F8_E8M0", sc.shape, sc)]
        t_ += lin("engram.wkv", (n + 1) * D, cols * hd)
        t_ += [bf("engram.q_weight", (n, D), 0.1, 1.0), bf("engram.k_weight", (n, D), 0.1, 1.0)]
    return t_


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--engram-vocab", type=int, default=200000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shrink", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--config-only", action="store_true",
                    help="write config.json and tokenizer.json only (bench/model_cuda/hf_peer_v41.py)")
    a = ap.parse_args()
    c = text_config(a.layers, a.engram_vocab, a.shrink)
    t = c["text_config"]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    shutil.copyfile(os.path.join(REPO, "python/deepinfer/data/deepseek_v4/tokenizer.json"),
                    os.path.join(a.out, "tokenizer.json"))
    if a.config_only:
        print(f"{a.out}: config.json, {a.layers} layers")
        return
    g = Gen(a.seed)
    D, V = t["hidden_size"], t["vocab_size"]
    rows_of = dict(zip(t["engram_layer_ids"], t["engram_num_embeddings"]))
    shards = [[("embed.weight", "BF16", (V, D), g.bf16((V, D), 1.0)),
               ("head.weight", "BF16", (V, D), g.bf16((V, D), D ** -0.5)),
               ("norm.weight", "BF16", (D,), g.bf16((D,), 0.1, 1.0))]]
    weight_map, total = {}, 0
    count = a.layers + 1
    for s in range(count):
        tensors = shards[0] if s == 0 else layer_tensors(g, t, s - 1, rows_of)
        fname = f"model-{s + 1:05d}-of-{count:05d}.safetensors"
        total += write_shard(os.path.join(a.out, fname), tensors)
        weight_map.update({x[0]: fname for x in tensors})
        print(f"wrote {fname} ({len(tensors)} tensors)", flush=True)
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    print(f"{a.out}: {a.layers} layers, Engram rows {t['engram_num_embeddings']}, "
          f"{total / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
