"""Standalone DeepSeek-V4 forward pass written from shared/spec/deepseek_v4_family.md §2 (not from any
library), over a checkpoint in the *official* tensor naming (spec §4) and an official-style config.json
(spec §1.1 keys).

Why it exists: HF transformers has no quantisation-aware semantics and no MTP. This file gives the C++
engine a second oracle with two numeric modes:

* ``mode="fp32"``: every op in FP32 with the checkpoint's weights as stored (FP8/FP4 tensors are
  dequantized). On the FP32 checkpoints this reproduces HF ``DeepseekV4ForCausalLM`` (use_cache=False)
  to ~1e-5 (see README.md), which cross-checks that this file and HF implement the same equations.
* ``mode="official"``: the rounding/quantisation points of the official ``inference/model.py`` as the spec
  lists them (§2.0, §2.3-2.7): BF16 activations between ops, FP8 E4M3 activation quant with power-of-two
  scale before every FP8/FP4 GEMM (block = ``quantization_config.weight_block_size[1]``, 128 in the real
  model, 32 in our tiny checkpoints), FP8 fake-quant of window/compressed KV non-rope channels (block 64),
  Hadamard + FP4 fake-quant (block 32) of indexer q and keys, BF16 indexer scoring, routing weight applied
  before w2, BF16 probabilities in P.V (the sparse_attn kernel's 64-key online softmax), FP32 router/head.

Only prefill semantics (all positions of one sequence, start_pos = 0) are implemented: decode must give the
same numbers (spec §3) and is what the C++ side checks against these logits.

Tie-break rule for discrete choices (indexer top-k, score routing top-k): higher score first, then lower
index. torch.topk leaves ties unspecified; in official mode BF16 index scores do tie, so a C++ engine that
wants bit-equal selections must use the same rule.

Usage as a library: ``w, cfg = load_checkpoint(dir)``; ``logits, mtp_logits = forward(w, cfg, ids, mode)``.
"""

from __future__ import annotations

import json
import math
import pathlib

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

E2M1_GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
KV_FP8_BLOCK = 64  # spec §2.3 step 3: fixed, independent of the weight block size
FP4_BLOCK = 32  # spec §2.4/2.5: indexer FP4 fake-quant block, and FP4 expert weight block


# ----------------------------------------------------------------------------------------------------------
# Loading

def e8m0_to_float(t: torch.Tensor) -> torch.Tensor:
    """E8M0 byte e -> 2^(e-127). Accepts torch.float8_e8m0fnu or uint8."""
    if t.dtype != torch.uint8:
        t = t.view(torch.uint8)
    return torch.pow(2.0, t.to(torch.float32) - 127.0)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """I8 [out, in/2] -> float [out, in]: low nibble = even column, high nibble = odd column (spec §4)."""
    b = packed.view(torch.uint8).to(torch.int64)
    lo, hi = b & 0xF, (b >> 4) & 0xF
    codes = torch.stack([lo, hi], dim=-1).flatten(-2)
    mag = E2M1_GRID[codes & 7]
    return torch.where(codes >= 8, -mag, mag)


def load_checkpoint(path) -> tuple[dict, dict]:
    """Returns ({name: fp32 tensor (dequantized) or int tensor}, config dict). The config gains
    ``_quantized``: the set of weight names that were FP8/FP4 in the file (the GEMMs that quantize
    their activation in official mode)."""
    path = pathlib.Path(path)
    cfg = json.loads((path / "config.json").read_text())
    raw = {}
    for f in sorted(path.glob("*.safetensors")):
        raw.update(load_file(str(f)))
    qcfg = cfg.get("quantization_config") or {}
    wb = qcfg.get("weight_block_size", [128, 128])
    out, quantized = {}, set()
    for name, t in raw.items():
        if name.endswith(".scale") and name[: -len(".scale")] in raw:
            continue
        sname = name[: -len(".weight")] + ".scale" if name.endswith(".weight") else None
        if sname is not None and sname in raw:
            scale = e8m0_to_float(raw[sname])
            if t.dtype == torch.float8_e4m3fn:
                w = t.to(torch.float32)
                s = scale.repeat_interleave(wb[0], 0)[: w.shape[0]].repeat_interleave(wb[1], 1)[:, : w.shape[1]]
                out[name] = w * s
            elif t.dtype == torch.int8:
                w = unpack_fp4(t)
                out[name] = w * scale.repeat_interleave(FP4_BLOCK, 1)[:, : w.shape[1]]
            else:
                raise ValueError(f"{name}: has a .scale but dtype {t.dtype} is neither F8_E4M3 nor I8")
            quantized.add(name)
        elif t.dtype in (torch.int64, torch.int32):
            out[name] = t.to(torch.int64)
        else:
            out[name] = t.to(torch.float32)
    cfg["_quantized"] = quantized
    return out, cfg


# ----------------------------------------------------------------------------------------------------------
# Numerics helpers

def bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).to(torch.float32)


def pow2_scale(amax: torch.Tensor, qmax: float) -> torch.Tensor:
    """2^ceil(log2(amax * (1/qmax))) with the product rounded to FP32 first, as the reference kernel."""
    v = amax.to(torch.float32) * torch.tensor(1.0 / qmax, dtype=torch.float32)
    m, e = torch.frexp(v)  # v = m * 2^e, m in [0.5, 1)
    e = torch.where(m == 0.5, e - 1, e)
    return torch.ldexp(torch.ones_like(v), e)


def fp8_fake_quant(x: torch.Tensor, block: int, amax_floor: float = 1e-4) -> torch.Tensor:
    """Per 1 x block (last dim) E4M3 quant->dequant with ue8m0 scale (spec §2.0, kernel act_quant)."""
    shp = x.shape
    assert shp[-1] % block == 0, f"last dim {shp[-1]} not a multiple of block {block}"
    xb = x.reshape(*shp[:-1], shp[-1] // block, block)
    amax = xb.abs().amax(-1, keepdim=True).clamp(min=amax_floor)
    s = pow2_scale(amax, 448.0)
    q = (xb / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).to(torch.float32)
    return (q * s).reshape(shp)


def e2m1_round(v: torch.Tensor) -> torch.Tensor:
    """Round to the nearest E2M1 value, ties to the even code (values already clamped to [-6, 6])."""
    a = v.abs()
    d = (a.unsqueeze(-1) - E2M1_GRID).abs()
    best = d.min(-1, keepdim=True).values
    # Among equally near grid points prefer the even code (argmin returns the first minimum).
    codes = torch.arange(8)
    idx = torch.where(d == best, codes % 2, torch.full_like(codes, 2)).argmin(-1)
    return torch.sign(v) * E2M1_GRID[idx]


def fp4_fake_quant(x: torch.Tensor, block: int = FP4_BLOCK) -> torch.Tensor:
    shp = x.shape
    assert shp[-1] % block == 0
    xb = x.reshape(*shp[:-1], shp[-1] // block, block)
    amax = xb.abs().amax(-1, keepdim=True).clamp(min=6 * 2.0 ** -126)
    s = pow2_scale(amax, 6.0)
    return (e2m1_round((xb / s).clamp(-6.0, 6.0)) * s).reshape(shp)


def hadamard(x: torch.Tensor) -> torch.Tensor:
    """Normalised Sylvester-order Walsh-Hadamard transform over the last dim (power of two)."""
    n = x.shape[-1]
    assert n & (n - 1) == 0
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (x @ h.T) * n ** -0.5


# Selection diagnostics since the last reset_stats(): per kind ("moe", "indexer") the smallest gap between
# the k-th and (k+1)-th candidate, and under "fragile" the query positions whose gap fell below
# FRAGILE[mode] in some layer; an engine whose numbers differ from this reference by normal rounding may
# legitimately pick differently at those positions.
STATS: dict = {}
FRAGILE = {"fp32": 1e-4, "official": 1e-2}
_MODE = {"mode": "fp32"}


def reset_stats() -> None:
    STATS.clear()


def stable_topk(scores: torch.Tensor, k: int, kind: str | None = None) -> torch.Tensor:
    """Indices of the k largest along the last dim; ties -> lower index first (documented rule)."""
    srt = torch.sort(scores, dim=-1, descending=True, stable=True)
    if kind is not None and scores.shape[-1] > k:
        gap = srt.values[..., k - 1] - srt.values[..., k]  # [T]; inf/nan where candidates are masked
        ok = torch.isfinite(gap)
        if ok.any():
            STATS[kind] = min(STATS.get(kind, float("inf")), float(gap[ok].min()))
        weak = torch.where(ok & (gap < FRAGILE[_MODE["mode"]]))[0].tolist()
        STATS.setdefault("fragile", set()).update(weak)
    return srt.indices[..., :k]


class Num:
    """Where the two modes differ. In fp32 mode every hook is the identity / plain FP32 op."""

    def __init__(self, mode: str, cfg: dict):
        assert mode in ("fp32", "official")
        self.official = mode == "official"
        q = cfg.get("quantization_config") or {}
        self.act_block = (q.get("weight_block_size") or [128, 128])[1]
        self.quantized = cfg["_quantized"]

    def act(self, x):
        return bf16(x) if self.official else x

    def linear(self, x, w, name):
        """GEMM for checkpoint weight `name` (FP8/FP4 in file -> activation quant in official mode)."""
        if self.official and name in self.quantized:
            x = fp8_fake_quant(self.act(x), self.act_block)
        return self.act(x @ w.T)

    def linear_bf16(self, x, w):
        """BF16 x BF16 -> BF16 linear of the reference (FP32 accumulate)."""
        return self.act(self.act(x) @ self.act(w).T)


# ----------------------------------------------------------------------------------------------------------
# Model pieces

def rms_norm(x, w, eps, num: Num):
    x = x.float()
    y = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)
    return num.act(w * y)


def rope_freqs(cfg, compressed: bool):
    rd = cfg["rope_head_dim"]
    base = cfg["compress_rope_theta"] if compressed else cfg["rope_theta"]
    f = 1.0 / (base ** (torch.arange(0, rd, 2, dtype=torch.float32) / rd))
    if compressed and cfg.get("original_seq_len", 0) > 0:
        L0, bf, bs = cfg["original_seq_len"], cfg["beta_fast"], cfg["beta_slow"]
        def corr(rot):
            return rd * math.log(L0 / (rot * 2 * math.pi)) / (2 * math.log(base))
        low, high = max(math.floor(corr(bf)), 0), min(math.ceil(corr(bs)), rd - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(rd // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
        f = f * (1 - ramp) + (f / cfg["rope_factor"]) * ramp
    return f


def apply_rope(x, pos, freqs, num: Num, inverse=False):
    """Interleaved RoPE on the last 2*len(freqs) channels; x [..., T, (heads,) d], pos [T]."""
    rd = 2 * freqs.numel()
    ang = pos.to(torch.float32)[:, None] * freqs[None, :]  # [T, rd/2]
    cos, sin = torch.cos(ang), torch.sin(ang)
    if inverse:
        sin = -sin
    while cos.dim() < x.dim():
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    r = x[..., -rd:].float()
    re, im = r[..., 0::2], r[..., 1::2]
    out = torch.stack([re * cos - im * sin, re * sin + im * cos], dim=-1).flatten(-2)
    return torch.cat([x[..., :-rd], num.act(out)], dim=-1)


def hc_pre(X, w, p, cfg, num: Num):
    """mHC site: returns (collapsed input y, post [T,n], comb [T,n,n]) (spec §2.2)."""
    n, eps = cfg["hc_mult"], cfg["hc_eps"]
    T = X.shape[0]
    x = X.reshape(T, -1).float()
    rho = torch.rsqrt(x.square().mean(-1, keepdim=True) + cfg["norm_eps"])
    mu = (x @ w[p + "_fn"].T) * rho
    base, scale = w[p + "_base"], w[p + "_scale"]
    pre = torch.sigmoid(mu[:, :n] * scale[0] + base[:n]) + eps
    post = 2 * torch.sigmoid(mu[:, n:2 * n] * scale[1] + base[n:2 * n])
    c = mu[:, 2 * n:].reshape(T, n, n) * scale[2] + base[2 * n:].reshape(n, n)
    c = torch.softmax(c, dim=-1) + eps
    c = c / (c.sum(-2, keepdim=True) + eps)
    for _ in range(cfg["hc_sinkhorn_iters"] - 1):
        c = c / (c.sum(-1, keepdim=True) + eps)
        c = c / (c.sum(-2, keepdim=True) + eps)
    y = num.act((pre.unsqueeze(-1) * X.float()).sum(1))
    return y, post, c


def hc_post(o, X, post, comb, num: Num):
    return num.act(post.unsqueeze(-1) * o.float().unsqueeze(1) + torch.einsum("tjk,tjd->tkd", comb, X.float()))


def hc_head(X, w, p, cfg, num: Num):
    T = X.shape[0]
    x = X.reshape(T, -1).float()
    rho = torch.rsqrt(x.square().mean(-1, keepdim=True) + cfg["norm_eps"])
    mu = (x @ w[p + "hc_head_fn"].T) * rho
    pre = torch.sigmoid(mu * w[p + "hc_head_scale"] + w[p + "hc_head_base"]) + cfg["hc_eps"]
    return num.act((pre.unsqueeze(-1) * X.float()).sum(1))


def compressor(u, w, p, cfg, ratio, d_c, rotate, num: Num):
    """Compressed rows [T//ratio, d_c] from block input u [T, D] (spec §2.4)."""
    T = u.shape[0]
    nw = T // ratio
    if nw == 0:
        return u.new_zeros(0, d_c)
    x = u.float()
    a = x @ w[p + "wkv.weight"].T
    b = x @ w[p + "wgate.weight"].T
    a = a[: nw * ratio].reshape(nw, ratio, -1)
    b = b[: nw * ratio].reshape(nw, ratio, -1) + w[p + "ape"]
    if ratio == 4:  # overlapping windows: [prev window's A half | current window's B half]
        ka = a.new_zeros(nw, 2 * ratio, d_c)
        kb = b.new_full((nw, 2 * ratio, d_c), float("-inf"))
        ka[:, ratio:], kb[:, ratio:] = a[..., d_c:], b[..., d_c:]
        ka[1:, :ratio], kb[1:, :ratio] = a[:-1, :, :d_c], b[:-1, :, :d_c]
        a, b = ka, kb
    c = (a * torch.softmax(b, dim=1)).sum(1)
    c = rms_norm(num.act(c), w[p + "norm.weight"], cfg["norm_eps"], num)
    pos = torch.arange(nw) * ratio
    c = apply_rope(c, pos, rope_freqs(cfg, True), num)
    if num.official:
        if rotate:
            c = fp4_fake_quant(num.act(hadamard(c)))
        else:
            rd = cfg["rope_head_dim"]
            c = torch.cat([fp8_fake_quant(c[:, :-rd], KV_FP8_BLOCK), c[:, -rd:]], dim=-1)
    return c


def indexer_select(u, qr, w, p, cfg, num: Num, nrows):
    """Top-k compressed-row indices per query, -1 = none (spec §2.5). Returns [T, k] int64."""
    T = u.shape[0]
    Hi, di, ratio = cfg["index_n_heads"], cfg["index_head_dim"], 4
    q = num.linear(qr, w[p + "indexer.wq_b.weight"], p + "indexer.wq_b.weight").reshape(T, Hi, di)
    q = apply_rope(q, torch.arange(T), rope_freqs(cfg, True), num)
    K = compressor(u, w, p + "indexer.compressor.", cfg, ratio, di, True, num)
    assert K.shape[0] == nrows
    k = min(cfg["index_topk"], nrows)
    if nrows == 0:
        return torch.zeros(T, 0, dtype=torch.int64)
    scale = di ** -0.5 * Hi ** -0.5
    if num.official:
        q = fp4_fake_quant(num.act(hadamard(q)))
        wts = num.act(num.linear_bf16(u, w[p + "indexer.weights_proj.weight"]) * scale)
        s = num.act(torch.einsum("thd,rd->thr", q, K)).relu()
        s = num.act(num.act(s * wts.unsqueeze(-1)).sum(1))
    else:
        wts = (u @ w[p + "indexer.weights_proj.weight"].T) * scale
        s = (torch.einsum("thd,rd->thr", q, K).relu() * wts.unsqueeze(-1)).sum(1)
    visible = (torch.arange(T) + 1) // ratio
    s = s.masked_fill(torch.arange(nrows)[None, :] >= visible[:, None], float("-inf"))
    idx = stable_topk(s, k, "indexer")
    return torch.where(idx >= visible[:, None], torch.full_like(idx, -1), idx)


def sparse_attention(q, keys, slots, sink, num: Num):
    """q [T,H,d]; keys [N,d]; slots [T,S] indices into keys (-1 absent); value = key (spec §2.3).
    Official mode follows the reference kernel: 64-slot blocks, online softmax, exp() cast to BF16
    before P.V, sink added to the denominator at the end."""
    T, H, d = q.shape
    scale = d ** -0.5
    valid = slots >= 0
    kg = keys[slots.clamp(min=0)] * valid.unsqueeze(-1)  # [T,S,d]
    z = torch.einsum("thd,tsd->ths", q.float(), kg.float()) * scale
    z = z.masked_fill(~valid.unsqueeze(1), float("-inf"))
    if not num.official:
        m = torch.maximum(z.amax(-1), sink.view(1, H))
        e = torch.exp(z - m.unsqueeze(-1))
        den = e.sum(-1) + torch.exp(sink.view(1, H) - m)
        return torch.einsum("ths,tsd->thd", e / den.unsqueeze(-1), kg)
    S = slots.shape[1]
    m = torch.full((T, H), float("-inf"))
    acc = torch.zeros(T, H, d)
    ssum = torch.zeros(T, H)
    for b0 in range(0, S, 64):
        zb = z[..., b0:b0 + 64]
        m_new = torch.maximum(m, zb.amax(-1))
        alpha = torch.exp(m - m_new).nan_to_num(0.0)
        eb = torch.exp(zb - m_new.unsqueeze(-1)).nan_to_num(0.0)
        ssum = ssum * alpha + eb.sum(-1)
        acc = acc * alpha.unsqueeze(-1) + torch.einsum("ths,tsd->thd", bf16(eb), kg[:, b0:b0 + 64])
        m = m_new
    ssum = ssum + torch.exp(sink.view(1, H) - m)
    return bf16(acc / ssum.unsqueeze(-1))


def attention(u, w, p, cfg, ratio, num: Num):
    T = u.shape[0]
    H, hd, rd, W = cfg["n_heads"], cfg["head_dim"], cfg["rope_head_dim"], cfg["window_size"]
    eps = cfg["norm_eps"]
    freqs = rope_freqs(cfg, ratio > 0)
    pos = torch.arange(T)
    qr = rms_norm(num.linear(u, w[p + "wq_a.weight"], p + "wq_a.weight"), w[p + "q_norm.weight"], eps, num)
    q = num.linear(qr, w[p + "wq_b.weight"], p + "wq_b.weight").reshape(T, H, hd)
    if num.official:  # per-head RMS in BF16 arithmetic (spec §2.3 step 3)
        ms = bf16(bf16(q.square()).mean(-1, keepdim=True))
        q = bf16(q * bf16(torch.rsqrt(bf16(ms + eps))))
    else:
        q = q * torch.rsqrt(q.square().mean(-1, keepdim=True) + eps)
    q = apply_rope(q, pos, freqs, num)
    kv = rms_norm(num.linear(u, w[p + "wkv.weight"], p + "wkv.weight"), w[p + "kv_norm.weight"], eps, num)
    kv = apply_rope(kv, pos, freqs, num)
    if num.official:
        kv = torch.cat([fp8_fake_quant(kv[:, :-rd], KV_FP8_BLOCK), kv[:, -rd:]], dim=-1)
    # window slots: keys max(0,t-W+1)..t, -1 padded (reference get_window_topk_idxs order)
    width = min(T, W)
    win = (pos[:, None] - W + 1).clamp(min=0) + torch.arange(width)[None, :]
    win = torch.where(win > pos[:, None], torch.full_like(win, -1), win)
    keys, slots = kv, win
    if ratio > 0:
        comp = compressor(u, w, p + "compressor.", cfg, ratio, hd, False, num)
        nrows = comp.shape[0]
        if ratio == 4:
            cidx = indexer_select(u, qr, w, p, cfg, num, nrows)
        else:
            cidx = torch.arange(nrows).repeat(T, 1)
            cidx = torch.where(cidx >= ((pos + 1) // ratio)[:, None], torch.full_like(cidx, -1), cidx)
        cidx = torch.where(cidx >= 0, cidx + T, cidx)
        keys = torch.cat([kv, comp], 0)
        slots = torch.cat([win, cidx], 1)
    o = sparse_attention(q, keys, slots, w[p + "attn_sink"], num)
    o = apply_rope(o, pos, freqs, num, inverse=True)
    g, r = cfg["o_groups"], cfg["o_lora_rank"]
    wo_a = w[p + "wo_a.weight"].reshape(g, r, -1)
    if num.official:
        z = bf16(torch.einsum("tgd,grd->tgr", o.reshape(T, g, -1), bf16(wo_a)))
    else:
        z = torch.einsum("tgd,grd->tgr", o.reshape(T, g, -1), wo_a)
    return num.linear(z.reshape(T, g * r), w[p + "wo_b.weight"], p + "wo_b.weight")


def moe(v, ids, w, p, cfg, is_hash, num: Num):
    T = v.shape[0]
    k, lim = cfg["n_activated_experts"], cfg["swiglu_limit"]
    z = v.float() @ w[p + "gate.weight"].T
    assert cfg.get("score_func", "sqrtsoftplus") == "sqrtsoftplus"
    sc = F.softplus(z).sqrt()
    if is_hash:
        idx = w[p + "gate.tid2eid"][ids]
    else:
        idx = stable_topk(sc + w[p + "gate.bias"], k, "moe")
    g = sc.gather(1, idx)
    g = g / g.sum(-1, keepdim=True) * cfg["route_scale"]

    def expert(x, pe, weight):
        a = num.linear(x, w[pe + "w1.weight"], pe + "w1.weight").float()
        b = num.linear(x, w[pe + "w3.weight"], pe + "w3.weight").float()
        if lim > 0:
            a, b = a.clamp(max=lim), b.clamp(-lim, lim)
        h = F.silu(a) * b
        if weight is not None:
            h = weight.unsqueeze(-1) * h
        return num.linear(num.act(h), w[pe + "w2.weight"], pe + "w2.weight")

    y = torch.zeros(T, v.shape[1])
    for e in range(cfg["n_routed_experts"]):
        tok, slot = torch.where(idx == e)
        if tok.numel():
            y.index_add_(0, tok, expert(v[tok], f"{p}experts.{e}.", g[tok, slot]))
    y = y + expert(v, p + "shared_experts.", None)
    return num.act(y)


def block(X, ids, w, p, cfg, ratio, is_hash, num: Num):
    eps = cfg["norm_eps"]
    y, post, comb = hc_pre(X, w, p + "hc_attn", cfg, num)
    o = attention(rms_norm(y, w[p + "attn_norm.weight"], eps, num), w, p + "attn.", cfg, ratio, num)
    X = hc_post(o, X, post, comb, num)
    y, post, comb = hc_pre(X, w, p + "hc_ffn", cfg, num)
    o = moe(rms_norm(y, w[p + "ffn_norm.weight"], eps, num), ids, w, p + "ffn.", cfg, is_hash, num)
    return hc_post(o, X, post, comb, num)


def forward(w: dict, cfg: dict, ids, mode: str = "fp32", mtp: bool = False):
    """Logits at every position [T, vocab] (FP32), and if mtp: MTP draft logits [T-1, vocab] where row t
    uses the main stream state of token t and the embedding of token t+1 and predicts token t+2 (spec §2.8).
    The MTP block runs at positions 0..T-2 (the position of the main-stream token; spec §8.4 leaves the
    official alignment open)."""
    num = Num(mode, cfg)
    _MODE["mode"] = mode
    ids = torch.as_tensor(ids, dtype=torch.int64)
    eps, n = cfg["norm_eps"], cfg["hc_mult"]
    h = num.act(w["embed.weight"][ids])
    X = h.unsqueeze(1).expand(-1, n, -1).contiguous()
    ratios = cfg["compress_ratios"]
    for l in range(cfg["n_layers"]):
        X = block(X, ids, w, f"layers.{l}.", cfg, ratios[l], l < cfg["n_hash_layers"], num)

    def head(Xs, p):
        y = rms_norm(hc_head(Xs, w, p, cfg, num), w[p + "norm.weight"], eps, num)
        return y.float() @ w["head.weight"].T

    logits = head(X, "")
    if not mtp or len(ids) < 2:
        return logits, None
    p = "mtp.0."
    e = rms_norm(num.act(w["embed.weight"][ids[1:]]), w[p + "enorm.weight"], eps, num)
    hs = rms_norm(X[:-1], w[p + "hnorm.weight"], eps, num)
    Xm = num.act(num.linear(e, w[p + "e_proj.weight"], p + "e_proj.weight").unsqueeze(1)
                 + num.linear(hs, w[p + "h_proj.weight"], p + "h_proj.weight"))
    Xm = block(Xm, ids[1:], w, p, cfg, ratios[cfg["n_layers"]], False, num)
    return logits, head(Xm, p)
