"""The work a DeepSeek-V4.1 forward must do (batch 1), for bench_v41_vs_nemo.py's ceilings.

Counted from the checkpoint's own tensor shapes (official names) and its config, so every part
the model has is in, at whatever size:

  Per token, dense MACs = the element count of every 2-D weight each token multiplies once:
    attention (wq_a, wq_b, wkv, wo_a, wo_b), KV-source compressors and index-key projections,
    indexer query / weight projections, mHC fn matrices, shared experts, routers, Engram wkv;
    routed experts: k/E of their elements (the k experts a token uses); not the embedding, the
    Engram tables (gathers) or the DSpark stages (mtp.*: not used without speculation).
  Attention core at position p: 2·H·d·keys(p), keys(p) = min(W, p+1) + the picks the layer reads
    (min(index_topk, rows its KV source has made: floor((p+1)/m))) for a layer after its source.
  Indexer dots at p: Hi·(di+1) per index key scored: a Full or Reindex layer scores every row
    of its KV source, or, after the candidate source, only the candidate blocks'.
  Head: D·V per logits row (the last prompt token, every decode token).
  Elementwise work (norms, RoPE, softmax, Sinkhorn, fake-quant, SwiGLU): not counted (a floor).

Decode must also read, once per step: every dense weight above at its stored size, k/E of the
experts, the whole head, one embedding row, (N-1)·heads Engram rows per Engram layer, and the
cache rows attended (FP32 as our engine keeps them: window + picked rows, index keys scored).
"""

import json
import pathlib
import struct

DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "I8": 1, "F8_E8M0": 1, "I64": 8, "I32": 4}


def header(model_dir):
    """name -> (dtype, shape) over the checkpoint's safetensors files."""
    out = {}
    for f in sorted(pathlib.Path(model_dir).glob("*.safetensors")):
        with open(f, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            h = json.loads(fh.read(n))
        for k, v in h.items():
            if k != "__metadata__":
                out[k] = (v["dtype"], v["shape"])
    return out


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def text_config(model_dir):
    c = json.loads((pathlib.Path(model_dir) / "config.json").read_text())
    return c.get("text_config", c)


def work_model(model_dir):
    t = text_config(model_dir)
    tensors = header(model_dir)
    E, k = t["n_routed_experts"], t["num_experts_per_tok"]
    dense_macs = dense_bytes = routed_macs = routed_bytes = 0
    for name, (dt, shape) in tensors.items():
        if name.startswith("mtp.") or name in ("embed.weight", "head.weight") or len(shape) != 2:
            continue
        if name.endswith(("engram.embed.weight", "tid2eid")) or dt == "F8_E8M0":
            continue
        # FP4 experts are stored packed (2 per byte, I8): their logical width is twice the bytes.
        n = _numel(shape) * (2 if dt == "I8" else 1)
        b = _numel(shape) * DTYPE_BYTES[dt]
        if ".ffn.experts." in name:
            routed_macs += n
            routed_bytes += b
        else:
            dense_macs += n
            dense_bytes += b
    scale_bytes = sum(_numel(s) for n, (dt, s) in tensors.items() if dt == "F8_E8M0" and not n.startswith("mtp."))
    head_dt, head_shape = tensors["head.weight"]
    L = t["num_hidden_layers"]
    ratios = t["compress_ratios"][:L]
    kv_src = t["kv_source_layer_ids"]
    idx_src = t["index_source_layer_ids"]
    cand = t.get("candidate_source_layer_id", -1)
    layers = []
    for i in range(L):
        src = max((s for s in kv_src if s <= i), default=-1)
        layers.append(dict(source=src, ratio=ratios[src] if src >= 0 else 0, index=i in idx_src,
                           restricted=cand >= 0 and i > cand))
    emb_dt, emb_shape = tensors["embed.weight"]
    engram_rows = 0
    engram_row_bytes = 0
    for lid in t.get("engram_layer_ids", []):
        dt, shape = tensors[f"layers.{lid}.engram.embed.weight"]
        engram_rows += (t["engram_max_ngram_size"] - 1) * t["engram_n_heads"]
        engram_row_bytes = shape[1] * DTYPE_BYTES[dt]
    return dict(t=t, layers=layers, W=t["sliding_window"], H=t["num_attention_heads"], d=t["head_dim"],
                Hi=t["index_n_heads"], di=t["index_head_dim"], topk=t["index_topk"],
                cand_keys=t.get("candidate_topk_blocks", 0) * t.get("candidate_block_size", 0),
                dense_macs=dense_macs, dense_bytes=dense_bytes + scale_bytes,
                routed_macs=routed_macs * k / E, routed_bytes=routed_bytes * k / E,
                head_macs=_numel(head_shape), head_bytes=_numel(head_shape) * DTYPE_BYTES[head_dt],
                embed_row_bytes=emb_shape[1] * DTYPE_BYTES[emb_dt],
                engram_read_bytes=engram_rows * engram_row_bytes)


def _keys(wm, L, p):
    """(keys attended, index keys scored) of a query at position p in layer L."""
    rows = (p + 1) // L["ratio"] if L["ratio"] else 0
    keys = min(wm["W"], p + 1) + min(wm["topk"], rows)
    scored = 0
    if L["index"] and rows:
        scored = min(rows, wm["cand_keys"]) if L["restricted"] and wm["cand_keys"] else rows
    return keys, scored


def token_macs(wm, p):
    core = 0
    for L in wm["layers"]:
        keys, scored = _keys(wm, L, p)
        core += 2 * wm["H"] * wm["d"] * keys + wm["Hi"] * (wm["di"] + 1) * scored
    return wm["dense_macs"] + wm["routed_macs"] + core, core


def prefill_macs(model_dir, P):
    wm = work_model(model_dir)
    tot = core = 0
    for p in range(P):
        a, c = token_macs(wm, p)
        tot += a
        core += c
    return dict(total=tot + wm["head_macs"], attention_core=core, head=wm["head_macs"])


def decode_cost(model_dir, p):
    wm = work_model(model_dir)
    macs, _ = token_macs(wm, p)
    nbytes = (wm["dense_bytes"] + wm["routed_bytes"] + wm["head_bytes"] + wm["embed_row_bytes"]
              + wm["engram_read_bytes"])
    for L in wm["layers"]:
        keys, scored = _keys(wm, L, p)
        nbytes += 4 * (keys * wm["d"] + scored * wm["di"])
    return dict(macs=macs + wm["head_macs"], bytes=nbytes)
