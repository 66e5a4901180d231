"""Standalone DeepSeek-V4.1 forward pass written from shared/spec/deepseek_v4_family.md §6 (with §6.7 overriding
the rest of §6), over a checkpoint in the *official* tensor naming and the released composite config.json
(``text_config`` with Hugging Face field names).

Two numeric modes:

* ``mode="fp32"``: NeMo AutoModel 0.7.0's FP32 semantics. Every op in FP32 on the stored weights (FP8/FP4/BF16
  tensors dequantized/upcast), plus the fake-quant points that V4.1 runs in every forward (§6.7 item 6): window
  KV FP8 E4M3 per 32 channels (pow2 scales), compressed KV NVFP4 (E2M1 per 16 channels, E4M3 scales), indexer q
  and keys MXFP4 (E2M1 per 32, pow2 scales). make_goldens.py asserts that this mode reproduces NeMo (max
  |dlogit| ~1e-5) on the BF16 checkpoints before it writes anything.
* ``mode="official"``: the rounding points of the official V4.1 inference code as README.md lists them (V4's
  official_ref conventions where V4.1 says nothing else): BF16 activations between ops, FP8 activation
  fake-quant per 1 x ``weight_block_size[1]`` before every FP8/FP4 GEMM, the V4 ``sparse_attn`` kernel (64-slot
  online softmax, BF16 probabilities before P.V, sink in the denominator), BF16 index scores, FP32 router / mHC /
  Engram gate / head.

Only full-sequence prefill (start_pos 0) is implemented: a correct cached decode gives the same numbers.

Discrete choices (MoE top-k, indexer top-k, candidate-block top-k) break ties toward the LOWER index; STATS
records the smallest gap between the k-th and (k+1)-th candidate of each kind and the query positions whose gap
fell below FRAGILE[mode].

Library use: ``w, cfg = load_checkpoint(dir)``; ``tm = token_map(tokenizer_json)``;
``out = forward(w, cfg, ids, mode, tm)`` -> dict with ``logits`` [T, V], ``hashes`` [T, n_engram_layers, cols],
``features`` [T, n_target * D] (DSpark target features); ``dspark(w, cfg, ids, features, anchor, mode)`` -> dict
with ``logits`` [k, V] and ``confidence`` [k] (logits before the sigmoid).
"""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

E2M1_LEVELS = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
E2M1_MIDPOINTS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
WINDOW_KV_BLOCK = 32  # §6.2 / §6.7 item 6: FP8 window KV block, over all channels
NVFP4_BLOCK = 16  # compressed KV
MXFP4_BLOCK = 32  # indexer q / keys; FP4 routed-expert weight scale block
ROW_BLOCK = 32  # Engram table scale block (per row)


# ----------------------------------------------------------------------------------------------------------
# Loading

def e8m0_to_float(t: torch.Tensor) -> torch.Tensor:
    if t.dtype != torch.uint8:
        t = t.view(torch.uint8)
    return torch.pow(2.0, t.to(torch.float32) - 127.0)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """I8 [out, in/2] -> float [out, in]: low nibble = even column, high nibble = odd column."""
    b = packed.view(torch.uint8).to(torch.int64)
    codes = torch.stack([b & 0xF, (b >> 4) & 0xF], dim=-1).flatten(-2)
    mag = E2M1_LEVELS[codes & 7]
    return torch.where(codes >= 8, -mag, mag)


def text_config(cfg: dict) -> dict:
    """The text section of a composite (``text_config``) or flat config."""
    t = dict(cfg.get("text_config") or cfg)
    if "quantization_config" in cfg:
        t["quantization_config"] = cfg["quantization_config"]
    return t


def load_checkpoint(path) -> tuple[dict, dict]:
    """({official name: FP32 tensor}, text config). FP8 dense weights use weight_block_size tiles, FP4 experts
    [out, in/32] E8M0 scales, Engram tables per-row E8M0 scales per 32 values. ``cfg["_quantized"]`` lists the
    weights that were FP8/FP4 in the file (their GEMMs quantize the activation in official mode)."""
    path = pathlib.Path(path)
    cfg = text_config(json.loads((path / "config.json").read_text()))
    raw = {}
    for f in sorted(path.glob("*.safetensors")):
        raw.update(load_file(str(f)))
    wb = ((cfg.get("quantization_config") or {}).get("weight_block_size")) or [32, 32]
    out, quantized = {}, set()
    for name, t in raw.items():
        if name.endswith(".scale") and name[: -len(".scale")] + ".weight" in raw:
            continue
        sname = name[: -len(".weight")] + ".scale" if name.endswith(".weight") else None
        if sname is not None and sname in raw:
            scale = e8m0_to_float(raw[sname])
            if t.dtype == torch.int8:  # FP4 E2M1, [out, in/32] scales
                w = unpack_fp4(t)
                w = w * scale.repeat_interleave(MXFP4_BLOCK, 1)[:, : w.shape[1]]
            elif t.dtype == torch.float8_e4m3fn and ".engram.embed." in name:  # per row, 32 values
                w = t.to(torch.float32) * scale.repeat_interleave(ROW_BLOCK, 1)[:, : t.shape[1]]
            elif t.dtype == torch.float8_e4m3fn:
                w = t.to(torch.float32)
                s = scale.repeat_interleave(wb[0], 0)[: w.shape[0]].repeat_interleave(wb[1], 1)[:, : w.shape[1]]
                w = w * s
            else:
                raise ValueError(f"{name}: has a .scale but dtype {t.dtype}")
            out[name] = w
            quantized.add(name)
        else:
            out[name] = t.to(torch.float32)
    cfg["_quantized"] = quantized
    return out, cfg


# ----------------------------------------------------------------------------------------------------------
# Engram hashing (§6.7 item 2)

def token_map(tokenizer_json) -> tuple[list[int], int]:
    """Compressed id of every token id: decode the id alone, normalise (NFKC, NFD, strip accents, lowercase,
    whitespace runs -> one space, a lone space kept, strip); a decoded text holding U+FFFD is keyed by its raw
    token string, an empty normalisation by the decoded text. Ids are numbered in order of first appearance."""
    from tokenizers import Regex, Tokenizer, normalizers

    tk = Tokenizer.from_file(str(tokenizer_json))
    sentinel = "\ue000"
    norm = normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "), normalizers.Replace(Regex(r"^ $"), sentinel),
        normalizers.Strip(), normalizers.Replace(sentinel, " "),
    ])
    keys: dict[str, int] = {}
    out = []
    for i in range(tk.get_vocab_size(with_added_tokens=True)):
        text = tk.decode([i], skip_special_tokens=False)
        key = tk.id_to_token(i) if "\ufffd" in text else (norm.normalize_str(text) or text)
        out.append(keys.setdefault(key, len(keys)))
    return out, len(keys)


def _is_prime(n: int) -> bool:
    return n >= 2 and (n == 2 or (n % 2 and all(n % d for d in range(3, math.isqrt(n) + 1, 2))))


def engram_layout(cfg: dict) -> tuple[list[list[int]], list[list[int]]]:
    """Per Engram layer: the (N-1)*heads bucket primes in (n-gram size, head) order and their offsets (exclusive
    prefix sums). For every layer and n-gram size the search restarts at engram_vocab_size - 1 and takes the
    next primes ABOVE it (NeMo and transformers both search upward), skipping primes used anywhere before."""
    seen: set[int] = set()
    primes, offsets = [], []
    for _ in cfg["engram_layer_ids"]:
        lp = []
        for _ in range(cfg["engram_max_ngram_size"] - 1):
            cur = cfg["engram_vocab_size"] - 1
            for _ in range(cfg["engram_n_heads"]):
                cur += 1
                while not _is_prime(cur) or cur in seen:
                    cur += 1
                seen.add(cur)
                lp.append(cur)
        primes.append(lp)
        offsets.append([int(v) for v in np.cumsum([0] + lp[:-1])])
    return primes, offsets


def engram_multipliers(cfg: dict, vc: int) -> list[list[int]]:
    bound = max(1, (np.iinfo(np.int64).max // vc) // 2)
    out = []
    for layer in cfg["engram_layer_ids"]:
        v = np.random.default_rng(10007 * layer).integers(0, bound, size=(cfg["engram_max_ngram_size"],),
                                                          dtype=np.int64)
        out.append([int(x) * 2 + 1 for x in v])
    return out


def engram_hashes(ids, cfg: dict, tmap) -> torch.Tensor:
    """[T, n_engram_layers, (N-1)*heads] int64 table rows. Look-back before the sequence start is replaced (with
    every longer shift) by the compressed id of the pad token."""
    tmap_list, vc = tmap
    comp = torch.tensor(tmap_list, dtype=torch.int64)[torch.as_tensor(ids, dtype=torch.int64)]
    pad = tmap_list[cfg["engram_pad_id"]]
    T, N, heads = comp.shape[0], cfg["engram_max_ngram_size"], cfg["engram_n_heads"]
    primes, offsets = engram_layout(cfg)
    mult = torch.tensor(engram_multipliers(cfg, vc), dtype=torch.int64)  # [Le, N]
    pos = torch.arange(T)
    toks = torch.stack([torch.where(pos >= s, comp[(pos - s).clamp(min=0)], torch.full_like(comp, pad))
                        for s in range(N)], -1)  # [T, N]
    prod = toks.unsqueeze(1) * mult  # [T, Le, N]
    pr, off = torch.tensor(primes, dtype=torch.int64), torch.tensor(offsets, dtype=torch.int64)
    rolling, cols = prod[..., 0], []
    for s in range(1, N):
        rolling = torch.bitwise_xor(rolling, prod[..., s])
        cols.append(rolling.unsqueeze(-1) % pr[:, (s - 1) * heads: s * heads])
    return torch.cat(cols, -1) + off


# ----------------------------------------------------------------------------------------------------------
# Numerics

def bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).to(torch.float32)


def pow2_ceil(v: torch.Tensor) -> torch.Tensor:
    """2^ceil(log2 v) for positive normal FP32 v, by the IEEE bit trick (exponent + any nonzero mantissa)."""
    bits = v.to(torch.float32).contiguous().view(torch.int32)
    e = ((bits >> 23) & 255) + ((bits & 0x7FFFFF) != 0).to(torch.int32)
    return (e << 23).view(torch.float32)


def e2m1_round(v: torch.Tensor) -> torch.Tensor:
    """Nearest E2M1 level, ties to the even code (v already clamped to [-6, 6])."""
    a = v.abs()
    lo = torch.bucketize(a, E2M1_MIDPOINTS)
    tie = a == E2M1_MIDPOINTS[lo.clamp(max=6)]
    idx = lo + (tie & (lo % 2 == 1)).to(lo.dtype)
    return torch.copysign(E2M1_LEVELS[idx], v)


# Fragility probe (make_goldens.py): relative noise injected before every fake-quant and every top-k, to find the
# positions whose logits an implementation with different FP32 rounding may legitimately change.
NOISE = {"rel": 0.0, "gen": None}


def _jitter(x: torch.Tensor) -> torch.Tensor:
    if not NOISE["rel"]:
        return x
    return x * (1 + NOISE["rel"] * torch.randn(x.shape, generator=NOISE["gen"]))


def fake_quant(x: torch.Tensor, fmt: str, block: int) -> torch.Tensor:
    """Quantize->dequantize per 1 x block along the last dim. fmt: "fp8" (E4M3, pow2 scale, amax floor 1e-4),
    "mxfp4" (E2M1, pow2 scale, floor 6*2^-126), "nvfp4" (E2M1, E4M3 scale e4m3(max(amax, 6*2^-9)/6))."""
    shp = x.shape
    assert shp[-1] % block == 0, f"last dim {shp[-1]} not a multiple of {block}"
    xb = _jitter(x.float()).reshape(*shp[:-1], shp[-1] // block, block)
    amax = xb.abs().amax(-1, keepdim=True)
    if fmt == "fp8":
        s = pow2_ceil(amax.clamp(min=1e-4) * (1 / 448))
        q = (xb / s).clamp(-448, 448).to(torch.float8_e4m3fn).float()
    else:
        if fmt == "nvfp4":
            s = (amax.clamp(min=6 * 2.0 ** -9) / 6).to(torch.float8_e4m3fn).float()
        else:
            s = pow2_ceil(amax.clamp(min=6 * 2.0 ** -126) * (1 / 6))
        q = e2m1_round((xb / s).clamp(-6, 6))
    return (q * s).reshape(shp)


STATS: dict = {}
FRAGILE = {"fp32": 1e-4, "official": 1e-2}
_MODE = {"mode": "fp32", "offset": 0}


def reset_stats() -> None:
    STATS.clear()


def stable_topk(scores: torch.Tensor, k: int, kind: str | None = None) -> torch.Tensor:
    """Indices of the k largest along the last dim, ties -> lower index; records the k-th/(k+1)-th gap."""
    srt = torch.sort(_jitter(scores), dim=-1, descending=True, stable=True)
    if kind is not None and scores.shape[-1] > k:
        gap = srt.values[..., k - 1] - srt.values[..., k]  # inf / nan where the competitor is masked
        ok = torch.isfinite(gap)
        if ok.any():
            STATS[kind] = min(STATS.get(kind, float("inf")), float(gap[ok].min()))
            pos = ok & (gap > 0)
            if pos.any():
                STATS[kind + "_nonzero"] = min(STATS.get(kind + "_nonzero", float("inf")), float(gap[pos].min()))
        tie = ok & (gap == 0)
        STATS["exact_ties_" + kind] = STATS.get("exact_ties_" + kind, 0) + int(tie.sum())
        # FP32: an exact tie (equal values, e.g. rows whose every indexer head is ReLU-zero) is decided by the
        # lower-index rule and is not rounding-sensitive; a small nonzero gap is. Official (BF16): both are.
        near = (gap < FRAGILE[_MODE["mode"]]) & (gap > 0 if _MODE["mode"] == "fp32" else ok)
        weak = torch.where(ok & near)
        rows = weak[0] if weak[0].numel() else torch.zeros(0, dtype=torch.int64)
        STATS.setdefault("fragile", set()).update(int(r) + _MODE["offset"] for r in rows.tolist())
    return srt.indices[..., :k]


class Num:
    """Where the two modes differ; in fp32 mode every hook is the identity / a plain FP32 op."""

    def __init__(self, mode: str, cfg: dict):
        assert mode in ("fp32", "official")
        self.official = mode == "official"
        q = cfg.get("quantization_config") or {}
        self.act_block = (q.get("weight_block_size") or [32, 32])[1]
        self.quantized = cfg["_quantized"]

    def act(self, x):
        return bf16(x) if self.official else x

    def linear(self, x, w, name):
        """GEMM with checkpoint weight `name`: FP8/FP4 in file -> FP8 activation quant in official mode;
        BF16 in file -> BF16 x BF16 with FP32 accumulate, BF16 out (official)."""
        if self.official and name in self.quantized:
            x = fake_quant(bf16(x), "fp8", self.act_block)
        return self.act(self.act(x) @ w.T)


# ----------------------------------------------------------------------------------------------------------
# Model pieces

def rms_norm(x, w, eps, num: Num):
    x = x.float()
    return num.act(w * (x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)))


def rope_angles(cfg: dict, compressed: bool, pos: torch.Tensor) -> torch.Tensor:
    rd = cfg["qk_rope_head_dim"]
    base = cfg["compress_rope_theta"] if compressed else cfg["rope_theta"]
    f = 1.0 / (base ** (torch.arange(0, rd, 2, dtype=torch.float32) / rd))
    rs = cfg.get("rope_scaling") or {}
    if compressed and rs.get("rope_type", rs.get("type")) == "yarn" and rs.get("original_max_position_embeddings"):
        L0, bfast, bslow = rs["original_max_position_embeddings"], rs.get("beta_fast", 32), rs.get("beta_slow", 1)

        def corr(rot):
            return rd * math.log(L0 / (rot * 2 * math.pi)) / (2 * math.log(base))
        low, high = max(math.floor(corr(bfast)), 0), min(math.ceil(corr(bslow)), rd - 1)
        ramp = ((torch.arange(rd // 2, dtype=torch.float32) - low) / max(high - low, 1e-3)).clamp(0, 1)
        f = f / rs["factor"] * ramp + f * (1 - ramp)
    return pos.to(torch.float32)[:, None] * f[None, :]


def apply_rope(x, ang, num: Num, inverse=False):
    """Adjacent-pair RoPE on the trailing 2*ang.shape[-1] channels (complex multiply in FP32, as the reference's
    torch.polar); x [T, d] or [T, H, d]; ang [T, rd/2]."""
    rd = 2 * ang.shape[-1]
    c = torch.polar(torch.ones_like(ang), ang)
    if x.dim() == 3:
        c = c.unsqueeze(1)
    if inverse:
        c = c.conj()
    pairs = torch.view_as_complex(x[..., -rd:].float().unflatten(-1, (-1, 2)).contiguous())
    out = torch.view_as_real(pairs * c).flatten(-2)
    return torch.cat([x[..., :-rd], num.act(out)], dim=-1)


def hc_mix(X, w, p, cfg):
    """(pre, post, comb) of one mHC site from streams X [T, n, D] (FP32)."""
    n, eps = cfg["hc_mult"], cfg["hc_eps"]
    T = X.shape[0]
    x = X.reshape(T, -1).float()
    mu = (x @ w[p + "_fn"].T) * torch.rsqrt(x.square().mean(-1, keepdim=True) + cfg["rms_norm_eps"])
    sc = w[p + "_scale"]
    scales = torch.cat([sc[0].expand(n), sc[1].expand(n), sc[2].expand(n * n)])
    logits = torch.addcmul(w[p + "_base"], mu, scales)
    pre = torch.sigmoid(logits[:, :n]) + eps
    post = 2 * torch.sigmoid(logits[:, n:2 * n])
    c = torch.softmax(logits[:, 2 * n:].reshape(T, n, n), dim=-1) + eps
    c = c / (c.sum(-2, keepdim=True) + eps)
    for _ in range(cfg["hc_sinkhorn_iters"] - 1):
        c = c / (c.sum(-1, keepdim=True) + eps)
        c = c / (c.sum(-2, keepdim=True) + eps)
    return pre, post, c


def hc_collapse(X, pre, num: Num):
    return num.act((pre.unsqueeze(-1) * X.float()).sum(1))


def hc_expand(o, X, post, comb, num: Num):
    """out_k = post_k * o + sum_j comb[j, k] * X_j (streams stored BF16 in official mode)."""
    mixed = (comb.unsqueeze(-1) * X.float().unsqueeze(-2)).sum(1)
    return num.act(post.unsqueeze(-1) * o.float().unsqueeze(-2) + mixed)


def engram(X, rows, w, p, cfg, num: Num):
    """§6.7 item 1: keys-first projection of the looked-up rows, normalised dot-product gate per stream."""
    n, D = cfg["hc_mult"], cfg["hidden_size"]
    emb = w[p + "embed.weight"][rows].flatten(-2)  # [T, cols * dim]; exact BF16 values
    kv = num.linear(emb, w[p + "wkv.weight"], p + "wkv.weight")
    key, value = kv[:, : n * D].float().reshape(-1, n, D), kv[:, n * D:].float()
    h = X.float()
    eps = cfg["rms_norm_eps"]
    wt = w[p + "q_weight"] * w[p + "k_weight"]
    rstd = torch.rsqrt(h.square().mean(-1) + eps) * torch.rsqrt(key.square().mean(-1) + eps)
    dot = (h * wt * key).sum(-1) * rstd * D ** -0.5
    gate = torch.sigmoid(torch.copysign(dot.abs().clamp(min=1e-6).sqrt(), dot))
    return num.act(h + gate.unsqueeze(-1) * value.unsqueeze(1))


def compressor(u, w, p, cfg, ratio, num: Num):
    """Unrotated normalised latent [T // ratio, head_dim] (§6.2: no overlap, no ape)."""
    T = u.shape[0]
    nw = T // ratio
    if ratio == 1:
        return rms_norm(num.linear(u, w[p + "wkv.weight"], p + "wkv.weight"), w[p + "norm.weight"],
                        cfg["rms_norm_eps"], num)
    x = u[: nw * ratio].float()
    a = (x @ w[p + "wkv.weight"].T).reshape(nw, ratio, cfg["head_dim"])
    b = (x @ w[p + "wgate.weight"].T).reshape(nw, ratio, cfg["head_dim"])
    c = num.act((a * torch.softmax(b, dim=1)).sum(1))
    return rms_norm(c, w[p + "norm.weight"], cfg["rms_norm_eps"], num)


def select_candidates(scores, visible, topk_blocks, bs):
    """Candidate mask [T, N]: block score = max over its rows, the block of the newest visible row pinned
    (+inf), top-`topk_blocks` blocks (ties -> lower block), blocks with no visible row dropped."""
    T, N = scores.shape
    nb = -(-N // bs)
    sp = F.pad(scores, (0, nb * bs - N), value=float("-inf")).reshape(T, nb, bs).amax(-1)
    last = (visible - 1).div(bs, rounding_mode="floor")
    sp = sp.masked_fill(torch.arange(nb)[None, :] == last[:, None], float("inf"))
    k = min(topk_blocks, nb)
    idx = stable_topk(sp, k, "candidate")
    keep = torch.zeros(T, nb, dtype=torch.bool).scatter(1, idx, sp.gather(1, idx) > float("-inf"))
    return keep.repeat_interleave(bs, dim=1)[:, :N]


def indexer(u, qr, latent, w, p, cfg, st, num: Num, layer):
    """Index keys (KV sources) and the top-k picks of an index-source layer (§6.2, §6.7 items 3, 4)."""
    T = u.shape[0]
    Hi, di, ratio = cfg["index_n_heads"], cfg["index_head_dim"], st["ratio"]
    if latent is not None:
        k = num.linear(latent, w[p + "indexer.wk.weight"], p + "indexer.wk.weight")
        k = rms_norm(k, w[p + "indexer.k_norm.weight"], cfg["rms_norm_eps"], num)
        k = apply_rope(k, rope_angles(cfg, True, torch.arange(latent.shape[0]) * ratio), num)
        st["keys"] = fake_quant(k, "mxfp4", MXFP4_BLOCK)
    K = st["keys"]
    N = K.shape[0]
    if N == 0:
        st["topk"] = torch.zeros(T, 0, dtype=torch.int64)
        if layer == cfg["candidate_source_layer_id"]:
            st["cand"] = torch.zeros(T, 0, dtype=torch.bool)
        return
    q = num.linear(qr, w[p + "indexer.wq_b.weight"], p + "indexer.wq_b.weight").reshape(T, Hi, di)
    q = fake_quant(apply_rope(q, rope_angles(cfg, True, torch.arange(T)), num), "mxfp4", MXFP4_BLOCK)
    scale = di ** -0.5 * Hi ** -0.5
    if num.official:
        wts = num.act(num.linear(u, w[p + "indexer.weights_proj.weight"], p + "indexer.weights_proj.weight")
                      * scale)
        s = bf16(torch.einsum("thd,nd->thn", q, K)).relu()
        s = bf16(bf16(s * wts.unsqueeze(-1)).sum(1))
    else:
        wts = (u @ w[p + "indexer.weights_proj.weight"].T) * scale
        s = (torch.einsum("thd,nd->thn", q, K).relu() * wts.unsqueeze(-1)).sum(1)
    visible = (torch.arange(T) + 1) // ratio
    allowed = torch.arange(N)[None, :] < visible[:, None]
    s = s.masked_fill(~allowed, float("-inf"))
    cs = cfg["candidate_source_layer_id"]
    if layer == cs:
        st["cand"] = select_candidates(s, visible, cfg["candidate_topk_blocks"], cfg["candidate_block_size"]) \
            & allowed
    elif 0 <= cs < layer:
        s = s.masked_fill(~st["cand"], float("-inf"))
    idx = stable_topk(s, min(cfg["index_topk"], N), "indexer")
    st["topk"] = torch.where(torch.isfinite(s.gather(1, idx)), idx, torch.full_like(idx, -1))


def sparse_attention(q, keys, slots, sink, num: Num):
    """q [T,H,d]; keys [N,d]; slots [T,S] key indices (-1 = absent); value = key. Official mode: the V4
    reference kernel (64-slot blocks in slot order, online softmax, exp() cast to BF16 before P.V, sink added
    to the denominator at the end, BF16 output)."""
    T, H, d = q.shape
    valid = slots >= 0
    kg = keys[slots.clamp(min=0)] * valid.unsqueeze(-1)
    z = torch.einsum("thd,tsd->ths", q.float(), kg.float()) * d ** -0.5
    z = z.masked_fill(~valid.unsqueeze(1), float("-inf"))
    if not num.official:
        zz = torch.cat([z, sink.view(1, H, 1).expand(T, H, 1)], -1)
        p = torch.softmax(zz, -1)[..., :-1]
        return torch.einsum("ths,tsd->thd", p, kg.float())
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


def q_and_kv(u, w, p, cfg, ang, num: Num):
    T = u.shape[0]
    H, hd, eps = cfg["num_attention_heads"], cfg["head_dim"], cfg["rms_norm_eps"]
    qr = rms_norm(num.linear(u, w[p + "wq_a.weight"], p + "wq_a.weight"), w[p + "q_norm.weight"], eps, num)
    q = num.linear(qr, w[p + "wq_b.weight"], p + "wq_b.weight").reshape(T, H, hd)
    q = apply_rope(q, ang, num)  # V4.1: no per-head q RMS normalisation
    kv = rms_norm(num.linear(u, w[p + "wkv.weight"], p + "wkv.weight"), w[p + "kv_norm.weight"], eps, num)
    kv = fake_quant(apply_rope(kv, ang, num), "fp8", WINDOW_KV_BLOCK)
    return qr, q, kv


def out_proj(o, w, p, cfg, ang, num: Num):
    T = o.shape[0]
    o = apply_rope(o, ang, num, inverse=True)
    g, r = cfg["o_groups"], cfg["o_lora_rank"]
    wo_a = w[p + "wo_a.weight"].reshape(g, r, -1)
    z = num.act(torch.einsum("tgd,grd->tgr", o.reshape(T, g, -1), num.act(wo_a)))
    return num.linear(z.reshape(T, g * r), w[p + "wo_b.weight"], p + "wo_b.weight")


def attention(u, w, p, cfg, layer, st, num: Num):
    T = u.shape[0]
    W = cfg["sliding_window"]
    ratio = cfg["compress_ratios"][layer]
    pos = torch.arange(T)
    ang = rope_angles(cfg, ratio > 0, pos)
    qr, q, kv = q_and_kv(u, w, p, cfg, ang, num)
    width = min(T, W)
    win = (pos[:, None] - W + 1).clamp(min=0) + torch.arange(width)[None, :]
    win = torch.where(win > pos[:, None], torch.full_like(win, -1), win)
    keys, slots = kv, win
    if ratio > 0:
        latent = None
        if layer in cfg["kv_source_layer_ids"]:
            latent = compressor(u, w, p + "compressor.", cfg, ratio, num)
            rot = apply_rope(latent, rope_angles(cfg, True, torch.arange(latent.shape[0]) * ratio), num)
            st["kv"], st["ratio"] = fake_quant(rot, "nvfp4", NVFP4_BLOCK), ratio
        assert st.get("ratio") == ratio, "a compressed layer needs a preceding KV source of the same ratio"
        if layer in cfg["index_source_layer_ids"]:
            indexer(u, qr, latent, w, p, cfg, st, num, layer)
        cidx = st["topk"]
        keys = torch.cat([kv, st["kv"]], 0)
        slots = torch.cat([win, torch.where(cidx >= 0, cidx + T, cidx)], 1)
    o = sparse_attention(q, keys, slots, w[p + "attn_sink"], num)
    return out_proj(o, w, p, cfg, ang, num)


def moe(v, w, p, cfg, num: Num, n_experts, topk):
    T = v.shape[0]
    lim = cfg["swiglu_limit"]
    z = (v.float() @ w[p + "gate.weight"].T) / cfg.get("gate_temp", 1.0)
    sc = F.softplus(z).sqrt()
    idx = stable_topk(sc + w[p + "gate.bias"], topk, "moe")
    g = sc.gather(1, idx)
    if topk > 1:
        g = g / (g.sum(-1, keepdim=True) + 1e-20)
    g = g * cfg["routed_scaling_factor"]

    def expert(x, pe, weight):
        a = num.linear(x, w[pe + "w1.weight"], pe + "w1.weight").float().clamp(max=lim)
        b = num.linear(x, w[pe + "w3.weight"], pe + "w3.weight").float().clamp(-lim, lim)
        h = F.silu(a) * b
        if weight is not None and num.official:  # official: routing weight before w2
            h = weight.unsqueeze(-1) * h
        out = num.linear(num.act(h), w[pe + "w2.weight"], pe + "w2.weight")
        if weight is not None and not num.official:  # NeMo (FP32): after the expert
            out = out * weight.unsqueeze(-1)
        return out

    y = torch.zeros(T, v.shape[1])
    for e in range(n_experts):
        tok, slot = torch.where(idx == e)
        if tok.numel():
            y.index_add_(0, tok, expert(v[tok], f"{p}experts.{e}.", g[tok, slot]))
    y = y + expert(v, p + "shared_experts.", None)
    return num.act(y)


def block(X, pre, w, p, cfg, num: Num, attn_fn, n_experts, topk):
    eps = cfg["rms_norm_eps"]
    pre_a, post_a, comb_a = hc_mix(X, w, p + "hc_attn", cfg)
    o = attn_fn(rms_norm(hc_collapse(X, pre, num), w[p + "attn_norm.weight"], eps, num))
    X = hc_expand(o, X, post_a, comb_a, num)
    pre_f, post_f, comb_f = hc_mix(X, w, p + "hc_ffn", cfg)
    o = moe(rms_norm(hc_collapse(X, pre_a, num), w[p + "ffn_norm.weight"], eps, num), w, p + "ffn.", cfg, num,
            n_experts, topk)
    return hc_expand(o, X, post_f, comb_f, num), pre_f


def forward(w: dict, cfg: dict, ids, mode: str = "fp32", tmap=None) -> dict:
    """Full-sequence forward: logits [T, V] (FP32), Engram hash rows, DSpark target features [T, n_t * D]."""
    num = Num(mode, cfg)
    _MODE["mode"], _MODE["offset"] = mode, 0
    ids = torch.as_tensor(ids, dtype=torch.int64)
    T, n = ids.shape[0], cfg["hc_mult"]
    X = num.act(w["embed.weight"][ids]).unsqueeze(1).expand(-1, n, -1).contiguous()
    pre = torch.zeros(T, n)
    pre[:, 0] = 1
    hashes = engram_hashes(ids, cfg, tmap) if cfg.get("engram_layer_ids") else None
    st: dict = {}
    feats = []
    for layer in range(cfg["num_hidden_layers"]):
        p = f"layers.{layer}."
        if layer in cfg["engram_layer_ids"]:
            X = engram(X, hashes[:, cfg["engram_layer_ids"].index(layer)], w, p + "engram.", cfg, num)
        if layer in cfg["dspark_target_layer_ids"]:
            feats.append((layer, X.float().mean(1)))

        def attn_fn(u, p=p, layer=layer):
            return attention(u, w, p + "attn.", cfg, layer, st, num)
        X, pre = block(X, pre, w, p, cfg, num, attn_fn, cfg["n_routed_experts"], cfg["num_experts_per_tok"])
    y = rms_norm(hc_collapse(X, pre, num), w["norm.weight"], cfg["rms_norm_eps"], num)
    feats = [f for _, f in sorted(feats, key=lambda t: cfg["dspark_target_layer_ids"].index(t[0]))]
    return {"logits": y.float() @ w["head.weight"].T, "hashes": hashes,
            "features": torch.cat(feats, -1) if feats else None}


# ----------------------------------------------------------------------------------------------------------
# DSpark drafter (§6.4, §6.7 item 10; NeMo dspark.py)

def dspark(w: dict, cfg: dict, ids, features: torch.Tensor, anchor: int, mode: str = "fp32") -> dict:
    """Draft block for an anchor at position A: slot 0 = embed(ids[A]), slots 1.. = embed(noise), positions
    A..A+k-1; every slot sees the projected target context of positions [A-W, A), all slots of its block and the
    sink. previous tokens (Markov head / confidence) teacher-forced: ids[A..A+k-1]. Returns draft logits
    lm_head(n_j) + T_j [k, V] and confidence logits (before the sigmoid) [k]."""
    num = Num(mode, cfg)
    _MODE["mode"], _MODE["offset"] = mode, anchor
    ids = torch.as_tensor(ids, dtype=torch.int64)
    k, n, W, S = cfg["dspark_block_size"], cfg["hc_mult"], cfg["sliding_window"], cfg["num_nextn_predict_layers"]
    eps = cfg["rms_norm_eps"]
    c0 = max(0, anchor - W)
    cpos = torch.arange(c0, anchor)
    dpos = torch.arange(anchor, anchor + k)
    toks = torch.full((k,), cfg["dspark_noise_token_id"], dtype=torch.int64)
    toks[0] = ids[anchor]
    prev = ids[anchor: anchor + k]
    assert prev.numel() == k, "teacher-forced previous tokens must lie inside the prompt"
    ctx = num.linear(num.act(features[c0:anchor]), w["mtp.0.main_proj.weight"], "mtp.0.main_proj.weight")
    ctx = rms_norm(ctx, w["mtp.0.main_norm.weight"], eps, num)
    X = num.act(w["embed.weight"][toks]).unsqueeze(1).expand(-1, n, -1).contiguous()
    pre = torch.zeros(k, n)
    pre[:, 0] = 1
    C = ctx.shape[0]
    ang_d, ang_c = rope_angles(cfg, False, dpos), rope_angles(cfg, False, cpos)
    for s in range(S):
        p = f"mtp.{s}."

        def attn_fn(u, p=p):
            _, q, kv_d = q_and_kv(u, w, p + "attn.", cfg, ang_d, num)
            kv_c = rms_norm(num.linear(ctx, w[p + "attn.wkv.weight"], p + "attn.wkv.weight"),
                            w[p + "attn.kv_norm.weight"], eps, num)
            kv_c = fake_quant(apply_rope(kv_c, ang_c, num), "fp8", WINDOW_KV_BLOCK)
            keys = torch.cat([kv_c, kv_d], 0)
            slots = torch.arange(C + k).repeat(k, 1)  # context slots first, then the block
            o = sparse_attention(q, keys, slots, w[p + "attn.attn_sink"], num)
            return out_proj(o, w, p + "attn.", cfg, ang_d, num)
        X, pre = block(X, pre, w, p, cfg, num, attn_fn, cfg["dspark_n_routed_experts"],
                       cfg["dspark_num_experts_per_tok"])
    p = f"mtp.{S - 1}."
    nj = rms_norm(hc_collapse(X, pre, num), w[p + "norm.weight"], eps, num)
    e = w[p + "markov_head.embed.weight"][prev]
    if num.official:
        trans = num.act(num.act(e) @ num.act(w[p + "markov_head.head.weight"]).T)
    else:
        trans = e @ w[p + "markov_head.head.weight"].T
    logits = nj.float() @ w["head.weight"].T + trans.float()
    conf = torch.cat([nj.float(), e.float()], -1) @ w[p + "confidence_head.proj.weight"].T
    return {"logits": logits, "confidence": conf.squeeze(-1)}
