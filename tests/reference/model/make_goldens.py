"""Builds the tiny random DeepSeek-V4 test checkpoints and their golden logits under tests/data/model/.

Regenerate (from the repository root; takes ~1-2 minutes on 2 cores):

    python3 -m venv /work/refenv
    /work/refenv/bin/pip install torch==2.11.0 transformers==5.17.0 safetensors numpy
    /work/refenv/bin/python tests/reference/model/make_goldens.py

Versions used for the committed files: torch 2.11.0 (PyPI wheel, run on CPU), transformers 5.17.0,
safetensors 0.8.0, numpy 2.4.6. Everything is seeded and single-threaded; re-running rewrites the same
files (bit-identical on the same torch build; other builds may differ in the last ulp of the logits).

Per config <name> it writes tests/data/model/<name>/:
  hf_fp32/        save_pretrained output (HF names, spec §4.x), FP32, stored as config.json + derive.json: the
                  same weights as official_fp32 under the HF names (official_name() is the rename; no mtp.*),
                  checked bit for bit against the save_pretrained file before it is removed
  hf_bf16/        the same weights as from_pretrained(dtype=bf16).save_pretrained writes them (HF keeps
                  mHC / norms / sinks / ape / gate bias / compressor projections in FP32), stored as config.json +
                  derive.json (renames + per-tensor casts of official_fp32, checked bit for bit)
  official_fp32/  the same FP32 weights under the official names (spec §4) + official-style config.json
                  (spec §1.1 keys); with MTP the random `mtp.0.*` block is added here
  (the tests rebuild the weights of a derive.json folder: tests/support/derived_checkpoint.h in C++,
  tests/reference/derive_checkpoint.py in Python)
  official_quant/ (configs with quant=True) FP8 E4M3 dense weights with E8M0 32x32 block scales, FP4 E2M1
                  routed experts (I8 packed, low nibble = even column) with 1x32 E8M0 scales, BF16/F32 rest
  goldens.safetensors  float32 logits, see README.md for every key
  goldens.json         prompts, greedy continuations, margins, observed tolerances

See tests/reference/model/README.md for what each golden means.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys

import numpy as np
import torch
from safetensors.torch import load_file, save_file

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
OUT = REPO / "tests" / "data" / "model"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import official_ref as ref  # noqa: E402
from derive_checkpoint import replace_by_spec  # noqa: E402

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

PROMPT_LENGTHS = [1, 7, 40, 300]
GEN_TOKENS = 16
TAIL = 32  # secondary goldens keep only the last TAIL positions of the 300-token prompt

YARN = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536,
        "beta_fast": 32.0, "beta_slow": 1.0}

CONFIGS = {
    # SWA + hash MoE, CSA (ratio 4, indexer top-4 of up to 75 rows), HCA ratio 8, window 8, MTP, quantized copy.
    "v4_tiny_a": dict(
        seed=1234, mtp=True, quant=True,
        hf=dict(vocab_size=256, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=4,
                num_attention_heads=4, head_dim=80, partial_rotary_factor=0.2, q_lora_rank=32,
                o_groups=2, o_lora_rank=32, n_routed_experts=4, num_experts_per_tok=2,
                layer_types=["sliding_attention", "compressed_sparse_attention",
                             "heavily_compressed_attention", "compressed_sparse_attention"],
                mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
                compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                sliding_window=8, index_n_heads=8, index_head_dim=32, index_topk=4,
                rope_parameters=dict(YARN), max_position_embeddings=1048576, num_nextn_predict_layers=1),
    ),
    # HCA ratio 16 first, two hash layers, window 16, 2 heads in one-head groups, 6 experts top-3.
    "v4_tiny_b": dict(
        seed=4321, mtp=False, quant=True,
        hf=dict(vocab_size=320, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=4,
                num_attention_heads=2, head_dim=80, partial_rotary_factor=0.2, q_lora_rank=32,
                o_groups=2, o_lora_rank=32, n_routed_experts=6, num_experts_per_tok=3,
                layer_types=["heavily_compressed_attention", "sliding_attention",
                             "compressed_sparse_attention", "heavily_compressed_attention"],
                mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe"],
                compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
                sliding_window=16, index_n_heads=8, index_head_dim=32, index_topk=6,
                rope_parameters=dict(YARN), max_position_embeddings=1048576, num_nextn_predict_layers=0),
    ),
}

RATIO_OF = {"sliding_attention": 0}


# ----------------------------------------------------------------------------------------------------------
# Weights

def reinit(sd: dict, cfg, gen: torch.Generator) -> dict:
    """Reasonably scaled random values so activations are O(1) and every parameter matters."""
    D = cfg.hidden_size

    def randn(shape, std):
        return torch.randn(shape, generator=gen) * std

    out = {}
    for name, t in sd.items():
        shp = tuple(t.shape)
        if name.endswith("tid2eid"):
            k, E = cfg.num_experts_per_tok, cfg.n_routed_experts
            out[name] = torch.stack([torch.randperm(E, generator=gen)[:k] for _ in range(shp[0])]).to(torch.int64)
        elif "embed" in name:
            out[name] = randn(shp, 1.0)
        elif name.endswith("head.weight"):
            out[name] = randn(shp, 2.0 / D ** 0.5)
        # Both naming families: HF module names (reinit of the HF model) and official names (the MTP block).
        elif name.endswith(("_fn", ".fn")):
            out[name] = randn(shp, 0.08)
        elif name.endswith(("_base", ".base")):
            out[name] = randn(shp, 0.5)
        elif name.endswith(("_scale", ".scale")):
            out[name] = 0.5 + torch.rand(shp, generator=gen)
        elif name.endswith(("attn_sink", ".sinks")):
            out[name] = randn(shp, 1.0)
        elif name.endswith(("ape", "position_bias")):
            out[name] = randn(shp, 0.5)
        elif name.endswith(("gate.bias", "e_score_correction_bias")):
            out[name] = randn(shp, 0.5)
        elif len(shp) == 1:  # RMSNorm weights
            out[name] = 1.0 + randn(shp, 0.1)
        else:  # projections: unit-gain for RMS-normalised inputs
            out[name] = randn(shp, 1.0 / shp[-1] ** 0.5)
    return out


def official_name(hf_saved: str) -> str:
    n = hf_saved
    if n.startswith("model."):
        n = n[len("model."):]
    n = {"embed_tokens.weight": "embed.weight", "hc_head.hc_fn": "hc_head_fn",
         "hc_head.hc_base": "hc_head_base", "hc_head.hc_scale": "hc_head_scale"}.get(n, n)
    return n.replace(".attn.norm.weight", ".attn.kv_norm.weight")


def official_config(hf_cfg, n_mtp: int, quant: bool) -> dict:
    rp = hf_cfg.rope_parameters["compress"]
    ratios = [0 if t == "sliding_attention" else hf_cfg.compress_rates[t] for t in hf_cfg.layer_types]
    n_hash = sum(1 for t in hf_cfg.mlp_layer_types if t == "hash_moe")
    assert hf_cfg.mlp_layer_types[:n_hash] == ["hash_moe"] * n_hash, "official code needs hash layers first"
    c = {
        "vocab_size": hf_cfg.vocab_size, "dim": hf_cfg.hidden_size, "n_layers": hf_cfg.num_hidden_layers,
        "n_heads": hf_cfg.num_attention_heads, "head_dim": hf_cfg.head_dim,
        "rope_head_dim": hf_cfg.qk_rope_head_dim, "q_lora_rank": hf_cfg.q_lora_rank,
        "o_groups": hf_cfg.o_groups, "o_lora_rank": hf_cfg.o_lora_rank,
        "moe_inter_dim": hf_cfg.moe_intermediate_size, "n_routed_experts": hf_cfg.n_routed_experts,
        "n_shared_experts": hf_cfg.n_shared_experts, "n_activated_experts": hf_cfg.num_experts_per_tok,
        "n_hash_layers": n_hash, "score_func": hf_cfg.scoring_func, "route_scale": hf_cfg.routed_scaling_factor,
        "swiglu_limit": hf_cfg.swiglu_limit, "window_size": hf_cfg.sliding_window,
        "rope_theta": hf_cfg.rope_theta, "compress_rope_theta": hf_cfg.compress_rope_theta,
        "original_seq_len": rp["original_max_position_embeddings"], "rope_factor": rp["factor"],
        "beta_fast": rp["beta_fast"], "beta_slow": rp["beta_slow"],
        "index_n_heads": hf_cfg.index_n_heads, "index_head_dim": hf_cfg.index_head_dim,
        "index_topk": hf_cfg.index_topk, "hc_mult": hf_cfg.hc_mult,
        "hc_sinkhorn_iters": hf_cfg.hc_sinkhorn_iters, "hc_eps": hf_cfg.hc_eps, "norm_eps": hf_cfg.rms_norm_eps,
        "n_mtp_layers": n_mtp, "compress_ratios": ratios + [0] * n_mtp,
        "dtype": "fp8" if quant else "fp32", "scale_fmt": "ue8m0" if quant else None,
        "expert_dtype": "fp4" if quant else None,
    }
    if quant:
        c["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                    "weight_block_size": [32, 32], "expert_fmt": "e2m1",
                                    "expert_block_size": [1, 32]}
    return c


def add_mtp(ow: dict, hf_cfg, gen: torch.Generator) -> None:
    """Random `mtp.0.*` block: every tensor of an SWA score-routed layer + e_proj/h_proj/norms/hc_head."""
    src = None
    for i, t in enumerate(hf_cfg.layer_types):
        if t == "sliding_attention" and hf_cfg.mlp_layer_types[i] == "moe":
            src = i
    if src is None:  # borrow shapes from layer 0 (SWA) but use a score gate
        src = 0
    D = hf_cfg.hidden_size
    tmpl = {k[len(f"layers.{src}."):]: v for k, v in ow.items() if k.startswith(f"layers.{src}.")}
    if "ffn.gate.tid2eid" in tmpl:
        del tmpl["ffn.gate.tid2eid"]
        tmpl["ffn.gate.bias"] = torch.zeros(hf_cfg.n_routed_experts)
    tmpl = {k: v for k, v in tmpl.items() if ".compressor." not in k and ".indexer." not in k}
    tmpl.update({"e_proj.weight": torch.zeros(D, D), "h_proj.weight": torch.zeros(D, D),
                 "enorm.weight": torch.zeros(D), "hnorm.weight": torch.zeros(D), "norm.weight": torch.zeros(D),
                 "hc_head_fn": torch.zeros(hf_cfg.hc_mult, hf_cfg.hc_mult * D),
                 "hc_head_base": torch.zeros(hf_cfg.hc_mult), "hc_head_scale": torch.zeros(1)})
    for k, v in reinit(tmpl, hf_cfg, gen).items():
        ow["mtp.0." + k] = v.contiguous()


FP8_SUFFIXES = ("attn.wq_a.weight", "attn.wq_b.weight", "attn.wkv.weight", "attn.wo_a.weight",
                "attn.wo_b.weight", "indexer.wq_b.weight", "shared_experts.w1.weight",
                "shared_experts.w2.weight", "shared_experts.w3.weight", "e_proj.weight", "h_proj.weight")
F32_MARKERS = ("hc_", "attn_sink", ".ape", "gate.bias")


def e8m0(scale: torch.Tensor) -> torch.Tensor:
    _, e = torch.frexp(scale)
    return (e - 1 + 127).to(torch.uint8).view(torch.float8_e8m0fnu)


def quant_fp8(w: torch.Tensor, blk: int):
    o, i = w.shape
    po, pi = -(-o // blk) * blk, -(-i // blk) * blk
    wp = torch.zeros(po, pi)
    wp[:o, :i] = w
    tiles = wp.reshape(po // blk, blk, pi // blk, blk)
    amax = tiles.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-4)
    s = ref.pow2_scale(amax, 448.0)
    q = (tiles / s).clamp(-448, 448).to(torch.float8_e4m3fn).reshape(po, pi)[:o, :i].contiguous()
    return q, e8m0(s.reshape(po // blk, pi // blk)).contiguous()


def quant_fp4(w: torch.Tensor):
    o, i = w.shape
    b = w.reshape(o, i // 32, 32)
    s = ref.pow2_scale(b.abs().amax(-1, keepdim=True).clamp(min=6 * 2.0 ** -126), 6.0)
    v = ref.e2m1_round((b / s).clamp(-6, 6)).reshape(o, i)
    code = (v.abs().unsqueeze(-1) == ref.E2M1_GRID).to(torch.int64).argmax(-1) + (v < 0).to(torch.int64) * 8
    packed = (code[:, 0::2] | (code[:, 1::2] << 4)).to(torch.uint8).view(torch.int8).contiguous()
    return packed, e8m0(s.reshape(o, i // 32)).contiguous()


def quantize_official(ow: dict, blk: int) -> dict:
    out = {}
    for name, t in ow.items():
        if name.endswith("tid2eid"):
            out[name] = t
        elif ".experts." in name and name.endswith(("w1.weight", "w2.weight", "w3.weight")) \
                and "shared_experts" not in name:
            out[name], out[name[:-len("weight")] + "scale"] = quant_fp4(t)
        elif name.endswith(FP8_SUFFIXES):
            out[name], out[name[:-len("weight")] + "scale"] = quant_fp8(t, blk)
        elif any(m in name for m in F32_MARKERS):
            out[name] = t.to(torch.float32)
        else:
            out[name] = t.to(torch.bfloat16)
    return out


# ----------------------------------------------------------------------------------------------------------
# Goldens

def hf_logits(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids]), use_cache=False).logits[0].float()


def margin(row: torch.Tensor) -> float:
    top = torch.topk(row, 2).values
    return float(top[0] - top[1])


def greedy(step_fn, ids, n):
    """Greedy continuation by full recomputation at every step (spec §7.7: not HF's cache)."""
    ids, toks, margins = list(ids), [], []
    for _ in range(n):
        row = step_fn(ids)[-1]
        t = int(torch.argmax(row))
        toks.append(t)
        margins.append(margin(row))
        ids.append(t)
    return toks, margins


def row_diffs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a - b).abs().amax(-1)


def summarize(rows: list) -> dict:
    """max and median over positions of the per-position max |delta logit|."""
    r = torch.cat(rows)
    return {"max": float(r.max()), "median": float(r.median())}


def note_stats(meta: dict, kind: str, L: int) -> None:
    """Selection fragility of the main-model forward just run (see official_ref.STATS / FRAGILE)."""
    st = ref.STATS
    meta.setdefault("min_selection_gap", {}).setdefault(kind, {})[f"len{L}"] = \
        {k: st[k] for k in ("moe", "indexer") if k in st}
    meta.setdefault("fragile_positions", {}).setdefault(kind, {})[f"len{L}"] = sorted(st.get("fragile", ()))


def write_dir(d: pathlib.Path, tensors: dict, config: dict):
    d.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in sorted(tensors.items())}, str(d / "model.safetensors"),
              metadata={"format": "pt"})
    (d / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def build(name: str, spec: dict) -> dict:
    from transformers.models.deepseek_v4 import DeepseekV4Config, DeepseekV4ForCausalLM

    root = OUT / name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    torch.manual_seed(spec["seed"])
    gen = torch.Generator().manual_seed(spec["seed"])
    hf_cfg = DeepseekV4Config(**spec["hf"])
    model = DeepseekV4ForCausalLM(hf_cfg).float().eval()
    sd = model.state_dict()
    sd_new = reinit({k: v for k, v in sd.items()}, hf_cfg, gen)
    unhandled = [k for k in sd if k.endswith(("fn", "base", "scale", "sinks", "bias")) and sd[k].numel() > 1 and
                 torch.equal(sd_new[k], sd_new[k].flatten()[0].expand_as(sd_new[k]))]
    assert not unhandled, unhandled
    model.load_state_dict(sd_new, strict=True)
    model.save_pretrained(str(root / "hf_fp32"))
    (root / "hf_fp32" / "generation_config.json").unlink(missing_ok=True)
    bf = DeepseekV4ForCausalLM.from_pretrained(str(root / "hf_fp32"), dtype=torch.bfloat16)
    bf.save_pretrained(str(root / "hf_bf16"))
    (root / "hf_bf16" / "generation_config.json").unlink(missing_ok=True)
    del bf

    # Official-name copies.
    saved = load_file(str(root / "hf_fp32" / "model.safetensors"))
    ow = {official_name(k): v for k, v in saved.items()}
    n_mtp = 1 if spec["mtp"] else 0
    if spec["mtp"]:
        add_mtp(ow, hf_cfg, gen)
    write_dir(root / "official_fp32", ow, official_config(hf_cfg, n_mtp, False))
    if spec["quant"]:
        ocq = official_config(hf_cfg, n_mtp, True)
        write_dir(root / "official_quant", quantize_official(ow, ocq["quantization_config"]["weight_block_size"][0]),
                  ocq)

    # Prompts: the first seed (seed+1, seed+2, ...) whose FP32 forward has no near-tie selection (MoE/indexer
    # top-k gap < official_ref.FRAGILE["fp32"]), so an FP32 engine cannot flip a discrete choice by rounding.
    w32, c32 = ref.load_checkpoint(root / "official_fp32")
    for attempt in range(1, 50):
        pg = torch.Generator().manual_seed(spec["seed"] + attempt)
        prompts = {L: torch.randint(2, hf_cfg.vocab_size, (L,), generator=pg).tolist() for L in PROMPT_LENGTHS}
        ref.reset_stats()
        for ids in prompts.values():
            ref.forward(w32, c32, ids, "fp32")
        if not ref.STATS.get("fragile"):
            break
    else:
        raise RuntimeError(f"{name}: no prompt seed without near-tie selections")

    gold, meta = {}, {"config": name, "vocab_size": hf_cfg.vocab_size, "prompts": {}, "continuations": {},
                      "tolerances": {}, "notes": {}}
    for L, ids in prompts.items():
        meta["prompts"][f"len{L}"] = ids

    meta["prompt_seed"] = spec["seed"] + attempt
    # HF FP32 (the primary golden) and the official_ref FP32 cross-check.
    d_ref = []
    for L, ids in prompts.items():
        hl = hf_logits(model, ids)
        gold[f"hf_fp32.len{L}"] = hl
        ref.reset_stats()
        rl = ref.forward(w32, c32, ids, "fp32")[0]
        note_stats(meta, "fp32", L)
        d_ref.append(row_diffs(rl, hl))
        if spec["mtp"] and L > 1:
            ml = ref.forward(w32, c32, ids, "fp32", mtp=True)[1]
            gold[f"mtp_fp32.len{L}" if L != 300 else "mtp_fp32.len300_tail"] = ml if L != 300 else ml[-TAIL:]
    meta["tolerances"]["official_ref_fp32_vs_hf_fp32"] = summarize(d_ref)
    worst_ref = meta["tolerances"]["official_ref_fp32_vs_hf_fp32"]["max"]
    meta["tolerances"]["hf_fp32_logit_abs_max"] = max(float(gold[f"hf_fp32.len{L}"].abs().max())
                                                       for L in PROMPT_LENGTHS)
    print(f"[{name}] official_ref fp32 vs HF fp32: max abs diff {worst_ref:.3e}")
    assert worst_ref < 1e-4, "official_ref (fp32) does not reproduce HF"

    for L, ids in prompts.items():
        toks, margins = greedy(lambda s: hf_logits(model, s), ids, GEN_TOKENS)
        ref.reset_stats()  # causal model: one forward over prompt+continuation sees every step's choices
        ref.forward(w32, c32, ids + toks, "fp32")
        meta["continuations"][f"hf_fp32.len{L}"] = {"tokens": toks, "top1_top2_margin": margins,
                                                   "fragile_positions": sorted(ref.STATS.get("fragile", ()))}

    # HF on the BF16 checkpoint, computed in FP32 (weights upcast).
    d_bf = []
    m16 = DeepseekV4ForCausalLM.from_pretrained(str(root / "hf_bf16"), dtype=torch.float32).eval()
    for L, ids in prompts.items():
        hl = hf_logits(m16, ids)
        gold[f"hf_bf16w_fp32.len{L}" if L != 300 else "hf_bf16w_fp32.len300_tail"] = hl if L != 300 else hl[-TAIL:]
        d_bf.append(row_diffs(hl, gold[f"hf_fp32.len{L}"]))
    meta["tolerances"]["hf_bf16_weights_vs_hf_fp32"] = summarize(d_bf)
    del m16
    # Both HF saves are official_fp32's tensors renamed (and, for the BF16 save, cast per tensor): keep the
    # recipes (each checked bit for bit against the file save_pretrained wrote), not the bytes.
    replace_by_spec(root / "hf_bf16", root / "official_fp32", source_name=official_name)
    replace_by_spec(root / "hf_fp32", root / "official_fp32", source_name=official_name)

    # Official quantisation-aware semantics on the quantized checkpoint.
    if spec["quant"]:
        wq, cq = ref.load_checkpoint(root / "official_quant")
        d_q, d_round, d_wq = [], [], []
        for L, ids in prompts.items():
            ref.reset_stats()
            ql = ref.forward(wq, cq, ids, "official")[0]
            note_stats(meta, "official_quant", L)
            gold[f"official_quant.len{L}"] = ql
            d_q.append(row_diffs(ql, gold[f"hf_fp32.len{L}"]))
            if spec["mtp"] and L > 1:
                qm = ref.forward(wq, cq, ids, "official", mtp=True)[1]
                gold[f"mtp_official_quant.len{L}" if L != 300 else "mtp_official_quant.len300_tail"] = \
                    qm if L != 300 else qm[-TAIL:]
        for L, ids in prompts.items():  # decomposition: rounding points alone, weight quantisation alone
            hl = gold[f"hf_fp32.len{L}"]
            d_round.append(row_diffs(ref.forward(w32, c32, ids, "official")[0], hl))
            d_wq.append(row_diffs(ref.forward(wq, cq, ids, "fp32")[0], hl))
        meta["tolerances"]["official_quant_vs_hf_fp32"] = summarize(d_q)
        meta["tolerances"]["official_rounding_on_fp32_weights_vs_hf_fp32"] = summarize(d_round)
        meta["tolerances"]["fp32_compute_on_quant_weights_vs_hf_fp32"] = summarize(d_wq)
        print(f"[{name}] official quantized vs HF fp32: {meta['tolerances']['official_quant_vs_hf_fp32']}")
        toks, margins = greedy(lambda s: ref.forward(wq, cq, s, "official")[0], prompts[40], GEN_TOKENS)
        ref.reset_stats()
        ref.forward(wq, cq, prompts[40] + toks, "official")
        meta["continuations"]["official_quant.len40"] = {"tokens": toks, "top1_top2_margin": margins,
                                                        "fragile_positions": sorted(ref.STATS.get("fragile", ()))}

    save_file({k: v.float().contiguous() for k, v in sorted(gold.items())}, str(root / "goldens.safetensors"),
              metadata={"format": "np"})
    meta["notes"]["len300_tail"] = f"last {TAIL} positions of the 300-token prompt (rows {300 - TAIL}..299)"
    meta["notes"]["mtp"] = "row t: main stream state of token t + embedding of token t+1 -> predicts t+2"
    (root / "goldens.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def main():
    import transformers
    print("torch", torch.__version__, "transformers", transformers.__version__, "numpy", np.__version__)
    names = sys.argv[1:] or list(CONFIGS)
    for n in names:
        build(n, CONFIGS[n])
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"tests/data/model total {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
