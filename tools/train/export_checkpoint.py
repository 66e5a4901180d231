"""Exports a trained default model (checkpoint.pt of train_default_model.py) in the official DeepSeek-V4
checkpoint layout (spec §4), the format the engine loads:

    python3 tools/train/export_checkpoint.py RUN/checkpoint.pt --out models/default [--verify RUN/val.bin]
    python3 tools/train/export_checkpoint.py RUN/checkpoint.pt --hf-out /tmp/hf_fp32 [--hf-dtype bf16]

Official layout: names without the `model.` prefix (`embed`, `head`, `norm`, `hc_head_*`, `attn.kv_norm`,
per-expert w1/w2/w3, `mtp.0.*`); FP8 E4M3 dense weights + `.scale` E8M0 per BxB tile (B = the model's block,
128), FP4 E2M1 routed experts packed in I8 [out, in/2] (low nibble = even column) + `.scale` E8M0 per 1x32;
BF16 embeddings/head/norms/router/compressor and indexer projections; F32 mHC, sinks, ape, router bias;
I64 tid2eid. `config.json` has the official ModelArgs keys (spec §1.1) and `quantization_config`.
Safetensors shards of at most --shard-mb with model.safetensors.index.json; tokenizer files copied.

The name mapping and the quantisers are those of tests/reference/model/make_goldens.py (imported, not
copied, so the default model and the golden checkpoints cannot drift apart); the MTP block goes through
HF's own save_pretrained name conversion by wrapping it in a one-layer DeepseekV4ForCausalLM.

--verify reloads the written files (dequantised, through tests/reference/model/official_ref.load_checkpoint),
puts them back into the HF trunk + MTP head and reports the validation loss; with --official-windows N it
also runs official_ref's quantisation-aware "official" mode (what the engine emulates) on N windows.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
import tempfile
import time

import torch
from safetensors.torch import load_file, save_file

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "reference" / "model"))
_threads, _det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
import make_goldens as mg  # noqa: E402  (sets 1 thread + deterministic mode at import: undone below)
import official_ref as ref  # noqa: E402

torch.set_num_threads(_threads)
torch.use_deterministic_algorithms(_det)
import check_export  # noqa: E402
import v4_lib  # noqa: E402


def load_run(path) -> tuple[v4_lib.DefaultModel, dict]:
    from transformers.models.deepseek_v4 import DeepseekV4Config
    ck = torch.load(path, map_location="cpu", weights_only=False)
    cfg = DeepseekV4Config.from_dict(ck["hf_config"])
    cfg._experts_implementation = "eager"
    model = v4_lib.DefaultModel(cfg)
    model.load_state_dict(ck["state_dict"], strict=True)
    return model.eval(), ck


def hf_saved(module, tmp: pathlib.Path) -> dict:
    module.save_pretrained(str(tmp), safe_serialization=True)
    out = {}
    for f in sorted(tmp.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def mtp_wrapper(model):
    from transformers.models.deepseek_v4 import DeepseekV4ForCausalLM
    w = DeepseekV4ForCausalLM(model.mtp.mcfg)
    return w


def official_fp32(model: v4_lib.DefaultModel) -> tuple[dict, dict]:
    """{official name: FP32 tensor} incl. mtp.0.*, and the inverse name map for the trunk."""
    with tempfile.TemporaryDirectory() as td:
        saved = hf_saved(model.trunk, pathlib.Path(td))
    ow, inv = {}, {}
    for k, v in saved.items():
        ok = mg.official_name(k)
        ow[ok] = v.float() if v.is_floating_point() else v
        inv[ok] = k
    wrap = mtp_wrapper(model)
    wrap.model.layers[0].load_state_dict(model.mtp.layer.state_dict(), strict=True)
    with tempfile.TemporaryDirectory() as td:
        saved = hf_saved(wrap, pathlib.Path(td))
    for k, v in saved.items():
        if k.startswith("model.layers.0."):
            ok = "mtp.0." + mg.official_name(k)[len("layers.0."):]
            ow[ok] = v.float() if v.is_floating_point() else v
    m = model.mtp
    extra = {"e_proj.weight": m.e_proj.weight, "h_proj.weight": m.h_proj.weight, "enorm.weight": m.enorm.weight,
             "hnorm.weight": m.hnorm.weight, "norm.weight": m.norm.weight, "hc_head_fn": m.hc_head.hc_fn,
             "hc_head_base": m.hc_head.hc_base, "hc_head_scale": m.hc_head.hc_scale}
    for k, v in extra.items():
        ow["mtp.0." + k] = v.detach().float().clone()
    return ow, inv


def write_shards(tensors: dict, out: pathlib.Path, shard_mb: float) -> list[str]:
    for f in out.glob("model*.safetensors"):
        f.unlink()
    limit = shard_mb * 1e6
    groups, cur, size = [], {}, 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        nb = t.numel() * t.element_size()
        if cur and size + nb > limit:
            groups.append(cur)
            cur, size = {}, 0
        cur[name] = t
        size += nb
    groups.append(cur)
    files, wmap = [], {}
    for i, g in enumerate(groups):
        fn = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        save_file(g, str(out / fn), metadata={"format": "pt"})
        (out / fn).chmod(0o644)
        files.append(fn)
        wmap.update({k: fn for k in g})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": dict(sorted(wmap.items()))}, indent=1) + "\n")
    return files


def export_official(model, ck, out: pathlib.Path, shard_mb: float, tokenizer_dir: pathlib.Path) -> dict:
    cfg = model.cfg
    blk = ck["block"]
    ow, _ = official_fp32(model)
    q = mg.quantize_official(ow, blk)
    conf = mg.official_config(cfg, 1, True)
    conf["quantization_config"]["weight_block_size"] = [blk, blk]
    conf.update({"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2, "max_seq_len": 4096,
                 "model_name": "deepinfer-default-v4-tiny", "trained_seq_len": ck["seq_len"]})
    out.mkdir(parents=True, exist_ok=True)
    files = write_shards(q, out, shard_mb)
    (out / "config.json").write_text(json.dumps(conf, indent=2, sort_keys=True) + "\n")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        src = tokenizer_dir / f
        if src.resolve() != (out / f).resolve():
            shutil.copyfile(src, out / f)
    size = sum((out / f).stat().st_size for f in files)
    errs = check_export.check(out, shard_mb)
    if errs:
        raise RuntimeError(f"{out}: export does not match its config.json:\n  " + "\n  ".join(errs[:20]))
    print(f"wrote {len(q)} tensors in {len(files)} shards, {size / 1e6:.2f} MB -> {out}")
    return {"tensors": len(q), "shards": len(files), "bytes": size}


def export_hf(model, out: pathlib.Path, dtype: str) -> None:
    trunk = model.trunk
    if dtype == "bf16":
        trunk = trunk.to(torch.bfloat16)
    trunk.save_pretrained(str(out))
    (out / "generation_config.json").unlink(missing_ok=True)
    print(f"wrote HF-name {dtype} trunk (no MTP: HF has none) -> {out}")


def reload_official(path: pathlib.Path, like: v4_lib.DefaultModel, inv: dict) -> v4_lib.DefaultModel:
    """Dequantised official files -> a DefaultModel via HF's own loader (reverse of official_fp32)."""
    from transformers.models.deepseek_v4 import DeepseekV4ForCausalLM
    w, _ = ref.load_checkpoint(path)
    w = {k: v for k, v in w.items() if not (k.endswith(".scale") and k[:-len("scale")] + "weight" in w)}
    model = v4_lib.DefaultModel(like.cfg)
    with tempfile.TemporaryDirectory() as td:
        td = pathlib.Path(td)
        (td / "a").mkdir()
        save_file({inv[k]: v.contiguous() for k, v in w.items() if not k.startswith("mtp.")},
                  str(td / "a" / "model.safetensors"), metadata={"format": "pt"})
        like.cfg.save_pretrained(str(td / "a"))
        model.trunk = DeepseekV4ForCausalLM.from_pretrained(str(td / "a"), dtype=torch.float32)
        model.trunk.model.hc_head.register_forward_pre_hook(model._grab)
        wrap = mtp_wrapper(like)
        with tempfile.TemporaryDirectory() as td2:
            hf_saved(wrap, pathlib.Path(td2))
            sd = load_file(str(next(pathlib.Path(td2).glob("*.safetensors"))))
            for k in list(sd):
                if k.startswith("model.layers.0."):
                    ok = "mtp.0." + mg.official_name(k)[len("layers.0."):]
                    sd[k] = w[ok].to(sd[k].dtype)
            save_file(sd, str(td / "m.safetensors"), metadata={"format": "pt"})
            (td / "b").mkdir()
            shutil.move(str(td / "m.safetensors"), str(td / "b" / "model.safetensors"))
            like.mtp.mcfg.save_pretrained(str(td / "b"))
            mw = DeepseekV4ForCausalLM.from_pretrained(str(td / "b"), dtype=torch.float32)
    model.mtp.layer.load_state_dict(mw.model.layers[0].state_dict())
    m = model.mtp
    with torch.no_grad():
        for name, p in (("e_proj.weight", m.e_proj.weight), ("h_proj.weight", m.h_proj.weight),
                        ("enorm.weight", m.enorm.weight), ("hnorm.weight", m.hnorm.weight),
                        ("norm.weight", m.norm.weight), ("hc_head_fn", m.hc_head.hc_fn),
                        ("hc_head_base", m.hc_head.hc_base), ("hc_head_scale", m.hc_head.hc_scale)):
            p.copy_(w["mtp.0." + name])
    return model.eval()


def verify(model, ck, out: pathlib.Path, val_bin: pathlib.Path, windows: int, official_windows: int) -> dict:
    import numpy as np
    import train_default_model as tdm
    _, inv = official_fp32(model)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    re = reload_official(out, model, inv).to(dev)
    T = ck["seq_len"]
    val = tdm.val_windows(torch.from_numpy(np.fromfile(val_bin, dtype=np.uint16).astype(np.int64)).to(dev),
                          T + 2, windows)
    res = {"hf_semantics_on_export": tdm.evaluate(re, val, 16, lambda: torch.autocast("cpu", enabled=False))}
    print(f"exported checkpoint, HF FP32 semantics on {val.shape[0]} windows: {res['hf_semantics_on_export']}")
    if official_windows:
        # windows spread over the whole validation split (its documents are grouped by source)
        sub = val[:: max(1, val.shape[0] // official_windows)][:official_windows]
        official_windows = sub.shape[0]
        res["hf_semantics_same_windows"] = tdm.evaluate(re, sub, 16, lambda: torch.autocast("cpu", enabled=False))
        print(f"HF FP32 semantics on the {official_windows} windows below: {res['hf_semantics_same_windows']}")
        w, c = ref.load_checkpoint(out)
        t0 = time.time()
        nll = mnll = hit = mhit = n = 0.0
        for ids in sub.cpu():
            lg, ml = ref.forward(w, c, ids[:-2].tolist(), "official", mtp=True)  # T tokens
            tgt, mtgt = ids[1:-1], ids[2:]
            nll += torch.nn.functional.cross_entropy(lg, tgt, reduction="sum").item()
            # official_ref's MTP rows cover positions 0..T-2 of the T-token input
            mnll += torch.nn.functional.cross_entropy(ml, mtgt[:-1], reduction="sum").item()
            hit += (lg.argmax(-1) == tgt).sum().item()
            mhit += (ml.argmax(-1) == mtgt[:-1]).sum().item()
            n += tgt.numel()
        nm = n - official_windows
        res["official_semantics_on_export"] = {"loss": nll / n, "mtp_loss": mnll / nm, "acc": hit / n,
                                               "mtp_acc": mhit / nm, "windows": official_windows,
                                               "seconds": time.time() - t0}
        print(f"official_ref 'official' mode on {official_windows} windows: {res['official_semantics_on_export']}")
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--out", default=str(REPO / "models" / "default"))
    ap.add_argument("--shard-mb", type=float, default=10.0)
    ap.add_argument("--tokenizer-dir", default=str(REPO / "models" / "default"))
    ap.add_argument("--hf-out", help="also/only write the HF-name trunk here")
    ap.add_argument("--hf-dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--no-official", action="store_true")
    ap.add_argument("--verify", help="val.bin: reload the export and report its validation loss")
    ap.add_argument("--verify-windows", type=int, default=64)
    ap.add_argument("--official-windows", type=int, default=0)
    ap.add_argument("--report", help="write the export/verify report (JSON) here")
    args = ap.parse_args(argv)
    model, ck = load_run(args.checkpoint)
    report = {"training": ck["metrics"]}
    out = pathlib.Path(args.out)
    if not args.no_official:
        report["export"] = export_official(model, ck, out, args.shard_mb, pathlib.Path(args.tokenizer_dir))
    if args.hf_out:
        export_hf(model, pathlib.Path(args.hf_out), args.hf_dtype)
    if args.verify and not args.no_official:
        report["verify"] = verify(model, ck, out, pathlib.Path(args.verify), args.verify_windows,
                                  args.official_windows)
    report.pop("training")
    if args.report:
        pathlib.Path(args.report).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
