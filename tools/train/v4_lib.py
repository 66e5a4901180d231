"""Shared pieces of the default-model training and export (issue 7): model configs, the MTP head, the
straight-through fake-quantisers used for quantisation-aware training, and HF <-> official name helpers.

Why this shape: the trunk is Hugging Face's `DeepseekV4ForCausalLM` (transformers 5.17), so the trained
weights are, by construction, the architecture the C++ engine is checked against (tests/reference/model).
HF has no MTP module, so `MTPHead` builds spec §2.8 from HF parts (one `DeepseekV4DecoderLayer` of type
SWA + score-routed MoE, its own `DeepseekV4HyperHead`) and shares `embed` / `head` with the trunk.

The fake-quantisers reproduce the export's quantisers bit for bit (checked in test_train_pipeline.py
against tests/reference/model/make_goldens.py), so what QAT trains against is exactly what
export_checkpoint.py writes: FP8 E4M3 with one power-of-two (E8M0) scale per BxB tile, FP4 E2M1 with one
E8M0 scale per 1x32 block along the input dimension.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

YARN = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536,
        "beta_fast": 32.0, "beta_slow": 1.0}

SWA, CSA, HCA = "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"

# Model sizes. "default" is the shipped model (~36 MB exported); "toy" is for the CPU smoke run.
# Constraints (official quantised semantics, spec §2.0/§2.3): every FP8/FP4 GEMM input dim is a multiple of
# the FP8 block (128) -> hidden, q_lora_rank, o_groups*o_lora_rank, moe_intermediate_size; head_dim minus
# the rope dims is a multiple of 64 (KV FP8 block); index_head_dim a power of two >= 32 (Hadamard, FP4 block);
# head_dim * partial_rotary_factor must be exact in floating point (0.2 * 160 = 32).
SIZES = {
    "default": dict(
        vocab_size=8192, hidden_size=256, moe_intermediate_size=256, num_hidden_layers=8,
        num_attention_heads=4, head_dim=160, partial_rotary_factor=0.2, q_lora_rank=128,
        o_groups=2, o_lora_rank=128, n_routed_experts=16, num_experts_per_tok=2, n_shared_experts=1,
        layer_types=[SWA, SWA, CSA, HCA, CSA, HCA, CSA, HCA],
        mlp_layer_types=["hash_moe", "hash_moe"] + ["moe"] * 6,
        compress_rates={CSA: 4, HCA: 16}, sliding_window=64,
        index_n_heads=8, index_head_dim=64, index_topk=32, block=128, seq_len=512),
    # The V4 model kept beside the V4.1 default (issue 20): every V4 part (SWA, CSA, HCA, hash routing, MTP) at the
    # smallest widths the official quantised layout allows (~5 MB exported).
    "small": dict(
        vocab_size=8192, hidden_size=128, moe_intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=2, head_dim=80, partial_rotary_factor=0.2, q_lora_rank=128,
        o_groups=2, o_lora_rank=64, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
        layer_types=[SWA, CSA, HCA, CSA], mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
        compress_rates={CSA: 4, HCA: 16}, sliding_window=64,
        index_n_heads=4, index_head_dim=32, index_topk=16, block=128, seq_len=512),
    "toy": dict(
        vocab_size=8192, hidden_size=128, moe_intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=2, head_dim=80, partial_rotary_factor=0.2, q_lora_rank=128,
        o_groups=2, o_lora_rank=64, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
        layer_types=[SWA, CSA, HCA, CSA], mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
        compress_rates={CSA: 4, HCA: 8}, sliding_window=16,
        index_n_heads=4, index_head_dim=32, index_topk=4, block=128, seq_len=64),
}


def hf_config(size: str | dict, vocab_size: int | None = None):
    """DeepseekV4Config for a named size (plus our training extras `block` and `seq_len` returned apart)."""
    from transformers.models.deepseek_v4 import DeepseekV4Config
    s = dict(SIZES[size]) if isinstance(size, str) else dict(size)
    extras = {k: s.pop(k) for k in ("block", "seq_len")}
    if vocab_size is not None:
        s["vocab_size"] = vocab_size
    cfg = DeepseekV4Config(**s, rope_parameters=dict(YARN), max_position_embeddings=1048576,
                           num_nextn_predict_layers=1, bos_token_id=0, eos_token_id=1, pad_token_id=2,
                           tie_word_embeddings=False, hc_mult=4, hc_sinkhorn_iters=20)
    assert cfg.qk_rope_head_dim * 2 <= cfg.head_dim and (cfg.head_dim - cfg.qk_rope_head_dim) % 64 == 0, \
        f"head_dim {cfg.head_dim} - rope {cfg.qk_rope_head_dim} must be a multiple of 64 (KV FP8 block)"
    return cfg, extras


def mtp_config(cfg):
    """Config of the MTP block's decoder layer: one SWA layer with score routing (spec §2.8)."""
    c = copy.deepcopy(cfg)
    c.num_hidden_layers = 1
    c.layer_types = [SWA]
    c.mlp_layer_types = ["moe"]
    return c


# ---------------------------------------------------------------------------------------------------------
# MTP

class MTPHead(nn.Module):
    """spec §2.8: row t combines the trunk's streams at token t (before hc_head) with the embedding of token
    t+1 and predicts token t+2. The block runs at the main token's positions 0..T-1 (spec §8.4: assumption
    shared with tests/reference/model/official_ref.py)."""

    def __init__(self, cfg):
        super().__init__()
        from transformers.models.deepseek_v4.modeling_deepseek_v4 import (
            DeepseekV4DecoderLayer, DeepseekV4HyperHead, DeepseekV4RMSNorm)
        D = cfg.hidden_size
        self.mcfg = mtp_config(cfg)
        self.enorm = DeepseekV4RMSNorm(D, eps=cfg.rms_norm_eps)
        self.hnorm = DeepseekV4RMSNorm(D, eps=cfg.rms_norm_eps)
        self.norm = DeepseekV4RMSNorm(D, eps=cfg.rms_norm_eps)
        self.e_proj = nn.Linear(D, D, bias=False)
        self.h_proj = nn.Linear(D, D, bias=False)
        self.layer = DeepseekV4DecoderLayer(self.mcfg, 0)
        self.hc_head = DeepseekV4HyperHead(cfg)

    def forward(self, trunk, x_main: torch.Tensor, next_ids: torch.Tensor) -> torch.Tensor:
        """x_main [B, T, n, D] trunk streams; next_ids [B, T] = token t+1 for row t. Returns logits [B, T, V]."""
        from transformers.masking_utils import create_sliding_window_causal_mask
        m = trunk.model
        e = self.enorm(m.embed_tokens(next_ids))
        x = self.e_proj(e).unsqueeze(2) + self.h_proj(self.hnorm(x_main))
        B, T = next_ids.shape
        pos = torch.arange(T, device=next_ids.device).unsqueeze(0)
        pe = {"main": m.rotary_emb(e, position_ids=pos, layer_type="main"),
              "compress": m.rotary_emb(e, position_ids=pos, layer_type="compress")}
        mask = create_sliding_window_causal_mask(config=self.mcfg, inputs_embeds=e, attention_mask=None,
                                                 past_key_values=None, position_ids=pos)
        x = self.layer(x, position_embeddings=pe, position_ids=pos, attention_mask=mask, input_ids=next_ids,
                       past_key_values=None)
        return trunk.lm_head(self.norm(self.hc_head(x)))


class DefaultModel(nn.Module):
    """Trunk + MTP, one forward for both losses."""

    def __init__(self, cfg):
        super().__init__()
        from transformers.models.deepseek_v4 import DeepseekV4ForCausalLM
        self.cfg = cfg
        self.trunk = DeepseekV4ForCausalLM(cfg)
        self.mtp = MTPHead(cfg)
        self._streams = None
        self.trunk.model.hc_head.register_forward_pre_hook(self._grab)

    def _grab(self, module, args):
        self._streams = args[0]

    def forward(self, ids: torch.Tensor, mtp: bool = True):
        """ids [B, T+1]: logits for positions 0..T-1 of ids[:, :T]; MTP rows 0..T-1 use ids[:, 1:T+1]."""
        T = ids.shape[1] - 1
        out = self.trunk(input_ids=ids[:, :T], use_cache=False)
        mtp_logits = self.mtp(self.trunk, self._streams, ids[:, 1:T + 1]) if mtp else None
        self._streams = None
        return out.logits, mtp_logits


def init_weights(model: DefaultModel, seed: int) -> None:
    """HF's initialisation plus what it leaves degenerate: a random hash table (distinct experts per token),
    and the MTP block (HF's post_init never sees it)."""
    cfg = model.cfg
    g = torch.Generator().manual_seed(seed + 7)
    k, E = cfg.num_experts_per_tok, cfg.n_routed_experts
    for layer in model.trunk.model.layers:
        gate = layer.mlp.gate
        if hasattr(gate, "tid2eid"):
            gate.tid2eid.copy_(torch.rand(cfg.vocab_size, E, generator=g).argsort(-1)[:, :k])
    for mod in model.mtp.modules():  # HF's post_init covered the trunk, not our MTP module
        model.trunk._init_weights(mod)
    std = cfg.initializer_range
    with torch.no_grad():
        for lin in (model.mtp.e_proj, model.mtp.h_proj):
            lin.weight.normal_(0, std)
        for name, p in model.named_parameters():
            if name.endswith("sinks"):
                p.zero_()


class IndexerDistill:
    """Trains the lightning indexers, which get no gradient from the LM loss (their output is a top-k).
    As DeepSeek-V3.2's sparse stage: per query, KL(attention mass over the selected compressed rows, summed
    over heads and renormalised || softmax of the index scores over the same rows), with the indexer's
    inputs detached so this loss only moves indexer weights (its q_b_proj, weights_proj, own compressor)."""

    def __init__(self, model: "DefaultModel"):
        self.layers = []
        for layer in model.trunk.model.layers:
            comp = layer.self_attn.compressor
            if comp is None or not hasattr(comp, "indexer"):
                continue
            st = {}
            comp.indexer.register_forward_pre_hook(self._detach)
            comp.indexer.scorer.register_forward_hook(lambda m, a, o, st=st: st.__setitem__("scores", o))
            comp.register_forward_hook(lambda m, a, o, st=st: st.__setitem__("bias", o[1]))
            layer.self_attn.register_forward_hook(lambda m, a, o, st=st: st.__setitem__("attn", o[1]))
            self.layers.append(st)

    @staticmethod
    def _detach(module, args):
        return tuple(a.detach() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)

    def loss(self) -> torch.Tensor | None:
        total, n = None, 0
        for st in self.layers:
            scores, bias, attn = st.pop("scores", None), st.pop("bias", None), st.pop("attn", None)
            if scores is None or bias is None or attn is None:
                continue
            C = scores.shape[-1]
            sel = bias[:, 0] == 0                                     # [B, S, C] rows the indexer picked
            p = attn[..., -C:].detach().float().sum(1) * sel          # attention mass on them
            mass = p.sum(-1, keepdim=True)
            ok = mass.squeeze(-1) > 0
            if not ok.any():
                continue
            p = p / mass.clamp(min=1e-30)
            logq = torch.log_softmax(scores.float().masked_fill(~sel, float("-inf")), dim=-1)
            kl = torch.where(p > 0, p * (torch.log(p.clamp(min=1e-30)) - logq), torch.zeros_like(p)).sum(-1)
            term = kl[ok].mean()
            total = term if total is None else total + term
            n += 1
        return None if total is None else total / n


# ---------------------------------------------------------------------------------------------------------
# Quantisers (same arithmetic as tests/reference/model/make_goldens.quant_fp8 / quant_fp4)

E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
E2M1_TIE_UP = (False, True, False, True, False, True, False)  # ties go to the even code
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def pow2_scale(amax: torch.Tensor, qmax: float) -> torch.Tensor:
    v = amax.float() * torch.tensor(1.0 / qmax, dtype=torch.float32, device=amax.device)
    m, e = torch.frexp(v)
    e = torch.where(m == 0.5, e - 1, e)
    return torch.ldexp(torch.ones_like(v), e)


def fp8_block_fake(w: torch.Tensor, blk: int) -> torch.Tensor:
    """FP8 E4M3 quant->dequant with one power-of-two scale per blk x blk tile (padding tiles with zeros)."""
    o, i = w.shape
    po, pi = -(-o // blk) * blk, -(-i // blk) * blk
    wp = F.pad(w.float(), (0, pi - i, 0, po - o))
    tiles = wp.reshape(po // blk, blk, pi // blk, blk)
    s = pow2_scale(tiles.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-4), 448.0)
    q = (tiles / s).clamp(-448, 448).to(torch.float8_e4m3fn).float() * s
    return q.reshape(po, pi)[:o, :i]


def e2m1_round(v: torch.Tensor) -> torch.Tensor:
    a = v.abs()
    idx = torch.zeros_like(a, dtype=torch.int64)
    for m, up in zip(E2M1_MIDPOINTS, E2M1_TIE_UP):
        idx += ((a > m) | ((a == m) & up)).to(torch.int64)
    vals = torch.tensor(E2M1_VALUES, device=v.device, dtype=torch.float32)
    return torch.sign(v) * vals[idx]


def fp4_block_fake(w: torch.Tensor, block: int = 32) -> torch.Tensor:
    """FP4 E2M1 quant->dequant, one power-of-two scale per 1 x block along the last dim."""
    shp = w.shape
    b = w.float().reshape(*shp[:-1], shp[-1] // block, block)
    s = pow2_scale(b.abs().amax(-1, keepdim=True).clamp(min=6 * 2.0 ** -126), 6.0)
    return (e2m1_round((b / s).clamp(-6, 6)) * s).reshape(shp)


class STEFake(nn.Module):
    """torch parametrization: forward value = fake-quantised weight, gradient = identity."""

    def __init__(self, kind: str, blk: int):
        super().__init__()
        self.kind, self.blk = kind, blk

    def forward(self, w):
        if self.kind == "fp8":
            q = fp8_block_fake(w, self.blk)
        else:
            q = fp4_block_fake(w)
        return w + (q.to(w.dtype) - w).detach()


def quantized_params(model: DefaultModel):
    """(module, param name, kind) of every weight stored FP8/FP4 in the official checkpoint (spec §4)."""
    fp8_attn = ("q_a_proj", "q_b_proj", "kv_proj", "o_a_proj", "o_b_proj")
    layers = list(model.trunk.model.layers) + [model.mtp.layer]
    for layer in layers:
        at = layer.self_attn
        for n in fp8_attn:
            yield getattr(at, n), "weight", "fp8"
        if at.compressor is not None and hasattr(at.compressor, "indexer"):
            yield at.compressor.indexer.q_b_proj, "weight", "fp8"
        for n in ("gate_proj", "up_proj", "down_proj"):
            yield getattr(layer.mlp.shared_experts, n), "weight", "fp8"
        yield layer.mlp.experts, "gate_up_proj", "fp4"
        yield layer.mlp.experts, "down_proj", "fp4"
    yield model.mtp.e_proj, "weight", "fp8"
    yield model.mtp.h_proj, "weight", "fp8"


def enable_qat(model: DefaultModel, blk: int) -> int:
    import torch.nn.utils.parametrize as P
    n = 0
    for mod, name, kind in quantized_params(model):
        P.register_parametrization(mod, name, STEFake(kind, blk))
        n += 1
    return n


def disable_qat(model: DefaultModel) -> None:
    """Drop the parametrizations, keeping the latent (unquantised) weights; the exporter quantises them
    with the same arithmetic."""
    import torch.nn.utils.parametrize as P
    for mod, name, _ in quantized_params(model):
        if P.is_parametrized(mod, name):
            P.remove_parametrizations(mod, name, leave_parametrized=False)


def cosine_lr(progress: float, step: int, warmup: int, peak: float, floor: float) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(max(progress, 0.0), 1.0)
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * p))
