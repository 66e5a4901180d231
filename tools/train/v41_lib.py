"""Shared pieces of the V4.1 default-model training and export (issue 20): sizes, the NeMo AutoModel objects,
straight-through fake quantisation in the export's layout, and the official-layout export.

Why NeMo AutoModel (PyPI `nemo-automodel` 0.7.0, Apache-2.0): it is a training port of DeepSeek's official
V4.1 code with the DSpark drafter and its loss (`components/speculative/dspark`), and it is the primary
reference our V4.1 goldens were made with (tests/reference/model_v41/README.md: official_ref41 reproduces it to
< 2e-5). Its state-dict adapters give the official tensor names, so the export is exactly the layout the C++
engine loads. transformers has no V4.1 drafter (spec §6.7 item 10).

What NeMo does not train: the lightning indexers (`_Indexer` is frozen, its forward runs under no_grad), so the
indexer weights keep their initialisation; the indexer's top-k still selects, with random projections. The
model card says so.

The fake-quantisers are tools/train/v4_lib.py's (bit-equal to the exporter's, tested there and in
test_train_v41.py against tests/reference/model_v41/make_goldens.py's quantize_official): FP8 E4M3 with one
power-of-two scale per 32x32 tile, FP4 E2M1 per 1x32 along the input dimension (NeMo stores routed experts as
[E, in, out], so that is dim -2 there), Engram tables FP8 per row and 32 values.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "reference" / "model_v41"))
sys.path.insert(0, str(REPO / "tests" / "reference"))
import v4_lib  # noqa: E402
import official_ref41 as ref  # noqa: E402


def _goldens41():
    """tests/reference/model_v41/make_goldens.py under its own name (V4's make_goldens.py has the same name)."""
    import importlib.util
    if "make_goldens41" not in sys.modules:
        path = REPO / "tests" / "reference" / "model_v41" / "make_goldens.py"
        spec = importlib.util.spec_from_file_location("make_goldens41", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["make_goldens41"] = mod
        threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
        spec.loader.exec_module(mod)
        torch.set_num_threads(threads)  # the goldens script pins both for reproducible goldens
        torch.use_deterministic_algorithms(det)
    return sys.modules["make_goldens41"]

BLOCK = 32  # V4.1's FP8 weight tile (spec §6.6)
YARN = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536,
        "beta_fast": 32.0, "beta_slow": 1.0}

# Every V4.1 role at small size (V4.1-Flash in comments). Layers: 0 SWA, 1 SWA + Engram, 2 Full r2 (KV + index
# source), 3 Reuse r2, 4 Full r1 (KV, index and candidate source) + Engram, 5 Reuse r1, 6 Reindex r1 (inside the
# candidates), 7 Reuse r1. Layers 5-7 come after the last KV source: the part SWA bounded replay truncates.
# DSpark: 2 stages fed by layers 5, 6, 7 (Flash: 3 stages, layers 37-39), block 5 (Flash: 5).
# Widths are multiples of 32 (FP8 tiles, MXFP4, FP8 window KV) and 16 (NVFP4).
_COMMON = dict(
    num_key_value_heads=1, n_shared_experts=1, scoring_func="sqrtsoftplus", gate_temp=1.0, norm_topk_prob=True,
    routed_scaling_factor=1.5, topk_method="noaux_tc", swiglu_limit=10.0, hc_mult=4, hc_sinkhorn_iters=20,
    hc_eps=1e-6, rms_norm_eps=1e-20, rope_theta=10000.0, compress_rope_theta=160000.0, rope_scaling=dict(YARN),
    max_position_embeddings=1048576, engram_pad_id=2, hidden_act="silu", initializer_range=0.02,
    attention_bias=False, attention_dropout=0.0, tie_word_embeddings=False, pad_token_id=2, bos_token_id=0,
    eos_token_id=1, num_hidden_layers=8, compress_ratios=[0, 0, 2, 2, 1, 1, 1, 1, 0, 0],
    kv_source_layer_ids=[2, 4], index_source_layer_ids=[2, 4, 6], candidate_source_layer_id=4,
    engram_layer_ids=[1, 4], engram_max_ngram_size=3, num_nextn_predict_layers=2, dspark_block_size=5,
    dspark_target_layer_ids=[5, 6, 7])

SIZES = {
    "default": dict(_COMMON, vocab_size=8192, hidden_size=256, num_attention_heads=4, head_dim=128,
                    qk_rope_head_dim=32, q_lora_rank=128, o_groups=2, o_lora_rank=128, moe_intermediate_size=256,
                    n_routed_experts=8, num_experts_per_tok=2, sliding_window=64, candidate_topk_blocks=16,
                    candidate_block_size=8, index_n_heads=4, index_head_dim=64, index_topk=32,
                    engram_n_heads=4, engram_head_dim=64, engram_vocab_size=2039, dspark_markov_rank=64,
                    dspark_n_routed_experts=8, dspark_num_experts_per_tok=2),
    "toy": dict(_COMMON, vocab_size=8192, hidden_size=64, num_attention_heads=2, head_dim=64, qk_rope_head_dim=16,
                q_lora_rank=64, o_groups=2, o_lora_rank=32, moe_intermediate_size=64, n_routed_experts=4,
                num_experts_per_tok=2, sliding_window=16, candidate_topk_blocks=4, candidate_block_size=4,
                index_n_heads=2, index_head_dim=32, index_topk=8, engram_n_heads=2, engram_head_dim=32,
                engram_vocab_size=251, dspark_markov_rank=16, dspark_n_routed_experts=4,
                dspark_num_experts_per_tok=2),
}
SEQ_LEN = {"default": 512, "toy": 64}
# The noise token of the drafter's block slots: an added token no training document contains
# (Flash: 128799). `<｜end_of_query｜>` in models/default/tokenizer.json.
NOISE_TOKEN = "<｜end_of_query｜>"


def text_config(size: str, tokenizer_json: pathlib.Path) -> dict:
    """The flat V4.1 text config (transformers main's field names) of a named size, with the Engram fields
    derived from the tokenizer (compressed vocabulary, table rows) exactly as official_ref41 / NeMo derive
    them."""
    t = dict(SIZES[size])
    tok = json.loads(pathlib.Path(tokenizer_json).read_text())
    added = {a["content"]: a["id"] for a in tok.get("added_tokens", [])}
    t["dspark_noise_token_id"] = added[NOISE_TOKEN]
    _, vc = ref.token_map(tokenizer_json)
    t["engram_compressed_vocab_size"] = vc
    primes, _ = ref.engram_layout(t)
    t["engram_num_embeddings"] = [sum(p) for p in primes]
    t["model_type"] = "deepseek_v41_text"
    return t


def composite_config(text: dict, name: str, trained_seq_len: int) -> dict:
    """config.json in the released composite layout with the official quantization_config (spec §6.6)."""
    return {"model_type": "deepseek_v41", "architectures": ["DeepseekV41ForCausalLM"], "text_config": text,
            "vision_config": {"num_hidden_layers": 0}, "image_token_id": text["vocab_size"] - 1,
            "tie_word_embeddings": False, "dtype": "bfloat16", "bos_token_id": 0, "eos_token_id": 1,
            "pad_token_id": 2, "model_name": name, "trained_seq_len": trained_seq_len,
            "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                    "weight_block_size": [BLOCK, BLOCK], "expert_dtype": "fp4",
                                    "expert_fmt": "e2m1", "expert_block_size": [1, BLOCK]}}


def backend(attn: str = "eager"):
    from nemo_automodel.components.models.common import BackendConfig
    return BackendConfig(attn=attn, linear="torch", rms_norm="torch_fp32", experts="torch", dispatcher="torch")


def build(text: dict, tokenizer_json: pathlib.Path, num_anchors: int, bias_update: float, device):
    """NeMo trunk (DeepseekV41ForCausalLM) and DSpark drafter (DeepseekV41DSparkModel), FP32 master weights, plus
    the two state-dict adapters. The trunk's routers balance load with V4's bias-only rule (`update_bias`)."""
    from transformers import PreTrainedTokenizerFast
    from nemo_automodel.components.models.deepseek_v41.config import DeepseekV41Config
    from nemo_automodel.components.models.deepseek_v41.dspark import DeepseekV41DSparkModel
    from nemo_automodel.components.models.deepseek_v41.model import DeepseekV41ForCausalLM
    from nemo_automodel.components.models.deepseek_v41.state_dict_adapter import (
        DeepseekV41DSparkStateDictAdapter, DeepseekV41StateDictAdapter)
    from nemo_automodel.components.moe.config import MoEConfig

    nt = {k: v for k, v in text.items() if k not in ("engram_pad_id", "gate_temp", "model_type", "layer_types")}
    nt["engram_pad_token_id"] = text["engram_pad_id"]
    nt["dtype"] = "float32"
    cfg = DeepseekV41Config(text_config=nt, vision_config={"num_hidden_layers": 0}, dtype="float32",
                            image_token_id=text["vocab_size"] - 1)
    tc = cfg.text_config
    moe = MoEConfig(dim=tc.hidden_size, inter_dim=tc.moe_intermediate_size, moe_inter_dim=tc.moe_intermediate_size,
                    n_routed_experts=tc.n_routed_experts, n_shared_experts=tc.n_shared_experts,
                    n_activated_experts=tc.num_experts_per_tok, n_expert_groups=0, n_limited_groups=0,
                    train_gate=True, gate_bias_update_factor=bias_update, aux_loss_coeff=0.0,
                    score_func="sqrtsoftplus", route_scale=tc.routed_scaling_factor, norm_topk_prob=tc.norm_topk_prob,
                    router_weights_fp32=True, force_e_score_correction_bias=True, swiglu_limit=tc.swiglu_limit,
                    dtype=torch.float32)
    tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json))
    trunk = DeepseekV41ForCausalLM(cfg, backend=backend("eager"), tokenizer=tok, moe_config=moe).float()
    draft = DeepseekV41DSparkModel(tc, backend("eager"), num_anchors=num_anchors, enable_confidence_head=True,
                                   confidence_head_stop_gradient=True).float()
    ad = DeepseekV41StateDictAdapter(cfg, trunk.moe_config, backend("eager"), dtype=torch.float32)
    dad = DeepseekV41DSparkStateDictAdapter(tc, draft.moe_config, backend("eager"), dtype=torch.float32)
    return trunk.to(device), draft.to(device), ad, dad


def init_weights(trunk, draft, seed: int) -> None:
    """NeMo's own initialisation (normal(0, initializer_range) projections, ones for norms, its mHC and Engram
    rules), seeded, kept in FP32 master weights."""
    torch.manual_seed(seed)
    trunk.initialize_weights(dtype=torch.float32)
    draft.initialize_weights()
    trunk.float()
    draft.float()


def features(captured: dict, layer_ids) -> torch.Tensor:
    """DSpark target features: the streams at each target layer's attention-HC input, averaged over streams,
    concatenated in layer order (spec §6.7 item 10)."""
    return torch.cat([captured[i].float().mean(dim=2) for i in layer_ids], -1)


def capture_hooks(trunk, layer_ids, store: dict) -> None:
    mods = trunk.get_dspark_target_feature_modules(list(layer_ids))
    for lid, mod in zip(layer_ids, mods):
        mod.register_forward_pre_hook(lambda m, args, lid=lid: store.__setitem__(lid, args[0].detach()))


def gates(trunk):
    return [layer.ffn.gate for layer in trunk.model.layers.values()]


# ---------------------------------------------------------------------------------------------------------
# Quantisation-aware training: which NeMo parameters the export stores FP8 / FP4, and their fake-quantisers

FP8_TILE_SUFFIXES = ("attn.wq_a.weight", "attn.wq_b.weight", "attn.wkv.weight", "attn.wo_a.weight",
                     "attn.wo_b.weight", "attn.indexer.wq_b.weight", "shared_experts.gate_proj.weight",
                     "shared_experts.up_proj.weight", "shared_experts.down_proj.weight", "engram.wkv.weight",
                     "main_proj.weight")


def fp8_rows_fake(w: torch.Tensor, blk: int = BLOCK) -> torch.Tensor:
    """FP8 E4M3 quant->dequant with one power-of-two scale per row and blk values (Engram tables)."""
    o, i = w.shape
    b = w.float().reshape(o, i // blk, blk)
    s = v4_lib.pow2_scale(b.abs().amax(-1, keepdim=True).clamp(min=1e-4), 448.0)
    return ((b / s).clamp(-448, 448).to(torch.float8_e4m3fn).float() * s).reshape(o, i)


class Fake(nn.Module):
    """torch parametrization: the forward sees the fake-quantised weight, the gradient passes straight through."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, w):
        if self.kind == "fp8":
            q = v4_lib.fp8_block_fake(w, BLOCK)
        elif self.kind == "fp8_rows":
            q = fp8_rows_fake(w)
        else:  # "fp4_in": NeMo experts are [E, in, out]; the official blocks run along `in`
            q = v4_lib.fp4_block_fake(w.transpose(-1, -2).contiguous()).transpose(-1, -2)
        return w + (q.to(w.dtype) - w).detach()


def quantized_params(module):
    """(owner module, parameter name, kind) for every weight the official V4.1 checkpoint stores quantised."""
    for name, p in list(module.named_parameters()):
        if "parametrizations" in name:
            name = name.replace(".parametrizations", "").replace(".original", "")
        owner_name, _, leaf = name.rpartition(".")
        owner = module.get_submodule(owner_name) if owner_name else module
        if name.endswith(FP8_TILE_SUFFIXES):
            yield owner, leaf, "fp8"
        elif name.endswith("engram.embed.weight"):
            yield owner, leaf, "fp8_rows"
        elif name.endswith(("experts.gate_and_up_projs", "experts.down_projs")):
            yield owner, leaf, "fp4_in"


def enable_qat(*modules) -> int:
    import torch.nn.utils.parametrize as P
    n = 0
    for m in modules:
        for owner, leaf, kind in list(quantized_params(m)):
            if not P.is_parametrized(owner, leaf):
                P.register_parametrization(owner, leaf, Fake(kind))
                n += 1
    return n


def disable_qat(*modules) -> None:
    """Drop the parametrizations and keep the latent weights; the exporter quantises them identically."""
    import torch.nn.utils.parametrize as P
    for m in modules:
        for owner, leaf, _ in list(quantized_params(m)):
            if P.is_parametrized(owner, leaf):
                P.remove_parametrizations(owner, leaf, leave_parametrized=False)


# ---------------------------------------------------------------------------------------------------------
# Export

def official_tensors(trunk, draft, ad, dad) -> dict:
    """Official names, FP32, from the latent weights through NeMo's adapters (mtp.* from the drafter; its copies
    of the shared embedding and head are not stored)."""
    sd = {k: v.detach().float().cpu() for k, v in trunk.state_dict().items()}
    out = dict(ad.to_hf(sd))
    dsd = {k: v.detach().float().cpu() for k, v in draft.state_dict().items()
           if not k.startswith(("embed_tokens", "lm_head"))}
    out.update(dad.to_hf(dsd))
    return {k: v.float() for k, v in out.items() if not k.startswith(("vision.", "aligner.", "image_"))}


QUANT_DTYPES = (torch.float8_e4m3fn, torch.float8_e8m0fnu, torch.int8)


def export_tensors(fp32: dict) -> dict:
    """The checkpoint: quantised from the FP32 latent weights (the values QAT trained against), every other
    tensor in its released dtype (BF16; FP32 for mHC, sinks, gate biases, confidence head)."""
    mg = _goldens41()
    q = mg.quantize_official(fp32, BLOCK)
    rest = mg.released_dtypes({k: v for k, v in q.items() if v.dtype not in QUANT_DTYPES})
    return {k: rest.get(k, v) for k, v in q.items()}
