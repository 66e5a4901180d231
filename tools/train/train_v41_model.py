"""Trains the V4.1 default model (issue 20): a small DeepSeek-V4.1 trunk (every V4.1 role, NeMo AutoModel's
training port, tools/train/v41_lib.py) and its DSpark drafter, together, within a wall-clock budget, then
exports the official V4.1 layout.

    python3 tools/train/train_v41_model.py --minutes 5 --out runs/v41          # GPU (bf16 autocast)
    python3 tools/train/train_v41_model.py --size toy --minutes 0.5 --out /tmp/v41toy   # CPU smoke run

Loss = next-token CE of the trunk + the DSpark loss (NeMo's `compute_dspark_loss`: CE of the drafted block
positions, the L1 distance between the draft's and the target's distributions, and the confidence head trained
toward the per-position acceptance 1 - TV(p_draft, p_target), on detached inputs). The drafter reads the
trunk's target-layer features detached, so its loss does not move the trunk; its embedding and head are copies
of the trunk's, refreshed every step (the export stores them once). AdamW, warm-up then cosine over the *time*
budget; routers balance load with V4's bias-only rule. The last --qat-frac of the budget trains through
straight-through fake quantisation of exactly the weights the export stores FP8 (32x32 tiles) / FP4 (1x32).

Outputs in --out: train_log.csv, metrics.json, checkpoint.pt (latent FP32 weights + text config), export/
(config.json, model-*.safetensors <= --shard-mb, index, tokenizer files), run.log is the caller's.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import pathlib
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import v41_lib  # noqa: E402
import v4_lib  # noqa: E402

MODEL_NAME = "deepinfer-default-v41-tiny"


def load_tokens(path: pathlib.Path) -> torch.Tensor:
    return torch.from_numpy(np.fromfile(path, dtype=np.uint16).astype(np.int64))


class Runner:
    """One forward of trunk + drafter over a batch of windows; returns the losses and diagnostics."""

    def __init__(self, trunk, draft, text: dict, amp):
        self.trunk, self.draft, self.text, self.amp = trunk, draft, text, amp
        self.captured: dict = {}
        v41_lib.capture_hooks(trunk, text["dspark_target_layer_ids"], self.captured)

    def sync_shared(self) -> None:
        self.draft.initialize_embeddings_and_head(embed_tokens=self.trunk.model.embed_tokens,
                                                  lm_head=self.trunk.lm_head, freeze=True)

    def __call__(self, ids: torch.Tensor, dspark_w: dict):
        from nemo_automodel.components.speculative.dspark.loss import compute_dspark_loss
        x = ids[:, :-1]
        with self.amp():
            out = self.trunk(x, return_hidden_states=True)
        logits = out.logits.float()
        lm = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        acc = (logits.argmax(-1) == ids[:, 1:]).float().mean()
        feats = v41_lib.features(self.captured, self.text["dspark_target_layer_ids"])
        with self.amp():
            d = self.draft(x, feats, torch.ones_like(x, dtype=torch.bool),
                           target_last_hidden_states=out.hidden_states.detach())
        dl, terms = compute_dspark_loss(outputs=d, return_terms=True, **dspark_w)
        return lm, acc, dl, terms


def ratio(terms, num: str, den: str):
    d = terms[den]
    return (terms[num] / d.clamp(min=1e-9)).detach().float().cpu()


@torch.no_grad()
def evaluate(runner: Runner, windows: torch.Tensor, batch: int, dspark_w: dict) -> dict:
    runner.trunk.eval()
    runner.draft.eval()
    tot = {"loss": 0.0, "acc": 0.0, "draft_ce": 0.0}
    sums = {}
    n = 0
    torch.manual_seed(0)  # the same anchors every evaluation
    for i in range(0, windows.shape[0], batch):
        ids = windows[i:i + batch]
        lm, acc, _, terms = runner(ids, dspark_w)
        k = ids.shape[0]
        tot["loss"] += lm.item() * k
        tot["acc"] += acc.item() * k
        tot["draft_ce"] += terms["ce_loss"].item() * k
        for key in ("accept_rate_per_pos_num", "accept_rate_per_pos_den", "tau_num", "tau_den",
                    "confidence_abs_error_num", "confidence_bias_num", "confidence_cumprod_bias_num",
                    "confidence_diag_den"):
            sums[key] = sums.get(key, 0) + terms[key].detach().float().cpu()
        n += k
    runner.trunk.train()
    runner.draft.train()
    res = {k: v / n for k, v in tot.items()}
    res["accept_per_pos"] = (sums["accept_rate_per_pos_num"] / sums["accept_rate_per_pos_den"].clamp(min=1)).tolist()
    res["tau"] = float(sums["tau_num"] / max(float(sums["tau_den"]), 1.0))
    den = max(float(sums["confidence_diag_den"]), 1.0)
    res["confidence_abs_error"] = float(sums["confidence_abs_error_num"]) / den
    res["confidence_bias"] = float(sums["confidence_bias_num"]) / den
    res["confidence_cumprod_bias"] = float(sums["confidence_cumprod_bias_num"]) / den
    return res


def write_export(runner: Runner, ad, dad, text: dict, out: pathlib.Path, tokenizer_dir: pathlib.Path,
                 seq: int, shard_mb: float) -> dict:
    from export_checkpoint import write_shards
    out.mkdir(parents=True, exist_ok=True)
    fp32 = v41_lib.official_tensors(runner.trunk, runner.draft, ad, dad)
    tensors = v41_lib.export_tensors(fp32)
    files = write_shards(tensors, out, shard_mb)
    cfg = v41_lib.composite_config(text, MODEL_NAME, seq)
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if (tokenizer_dir / f).exists():
            shutil.copyfile(tokenizer_dir / f, out / f)
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    return {"bytes": nbytes, "shards": len(files), "tensors": len(tensors)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="default", choices=sorted(v41_lib.SIZES))
    ap.add_argument("--data", default=str(REPO / "data" / "default_model" / "tokens"))
    ap.add_argument("--tokenizer-dir", default=str(REPO / "models" / "default"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--batch", type=int, default=0, help="sequences per step (0: 64 on CUDA, 2 on CPU)")
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--anchors", type=int, default=32, help="DSpark anchor blocks per sequence")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--draft-lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.05)
    ap.add_argument("--qat-frac", type=float, default=0.12)
    ap.add_argument("--bias-rate", type=float, default=3e-3)
    ap.add_argument("--decay-gamma", type=float, default=7.0, help="DSpark per-position loss decay (paper: 7)")
    ap.add_argument("--eval-every", type=float, default=30.0)
    ap.add_argument("--val-windows", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--shard-mb", type=float, default=10.0)
    args = ap.parse_args(argv)

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cuda = dev.type == "cuda"
    seq = args.seq or v41_lib.SEQ_LEN[args.size]
    batch = args.batch or (64 if cuda else 2)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tok_dir = pathlib.Path(args.tokenizer_dir)
    text = v41_lib.text_config(args.size, tok_dir / "tokenizer.json")
    torch.manual_seed(args.seed)
    trunk, draft, ad, dad = v41_lib.build(text, tok_dir / "tokenizer.json", args.anchors, args.bias_rate, dev)
    v41_lib.init_weights(trunk, draft, args.seed)
    trunk.to(dev)
    draft.to(dev)
    amp = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if cuda else \
        (lambda: torch.autocast("cpu", enabled=False))
    runner = Runner(trunk, draft, text, amp)
    runner.sync_shared()
    dspark_w = dict(loss_decay_gamma=args.decay_gamma, ce_loss_alpha=1.0, l1_loss_alpha=1.0,
                    confidence_head_alpha=1.0)

    data = pathlib.Path(args.data)
    train = load_tokens(data / "train.bin")
    val = load_tokens(data / "val.bin")
    nval = min((val.numel() - 1) // (seq + 1), args.val_windows)
    val_w = val[: nval * (seq + 1)].view(nval, seq + 1).to(dev)
    gen = torch.Generator().manual_seed(args.seed)

    def params(mod):
        return [p for p in mod.parameters() if p.requires_grad]

    def groups(mod, lr):
        decay = [p for n, p in mod.named_parameters() if p.requires_grad and p.ndim >= 2 and "embed" not in n]
        rest = [p for n, p in mod.named_parameters() if p.requires_grad and not (p.ndim >= 2 and "embed" not in n)]
        return [{"params": decay, "weight_decay": args.wd, "base": lr}, {"params": rest, "weight_decay": 0.0,
                                                                          "base": lr}]
    opt = torch.optim.AdamW(groups(trunk, args.lr) + groups(draft, args.draft_lr), betas=(0.9, 0.95),
                            eps=1e-8, fused=cuda)
    n_trunk = sum(p.numel() for p in trunk.parameters())
    n_draft = sum(p.numel() for n, p in draft.named_parameters() if not n.startswith(("embed_tokens", "lm_head")))
    print(f"== V4.1 {args.size}: trunk {n_trunk / 1e6:.2f} M params, drafter {n_draft / 1e6:.2f} M, "
          f"batch {batch} x {seq}, device {dev}", flush=True)

    log_f = open(out / "train_log.csv", "w", newline="")
    log = csv.writer(log_f)
    log.writerow(["step", "seconds", "tokens", "lr", "loss", "draft_ce", "tau_train", "val_loss", "val_acc",
                  "val_tau", "qat", "max_load"])
    budget = args.minutes * 60.0
    t0 = time.time()
    last_eval = -1e9
    step, tokens, qat = 0, 0, False
    pre_qat = None
    while True:
        elapsed = time.time() - t0
        progress = elapsed / budget
        if progress >= 1.0 or (args.max_steps and step >= args.max_steps):
            break
        if not qat and progress >= 1.0 - args.qat_frac:
            pre_qat = evaluate(runner, val_w, batch, dspark_w)
            n = v41_lib.enable_qat(trunk, draft)
            qat = True
            print(f"[{elapsed:6.1f}s] step {step}: QAT on ({n} weights); val before {pre_qat['loss']:.3f}",
                  flush=True)
        lr_mult = v4_lib.cosine_lr(progress, step, args.warmup, 1.0, args.min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = g["base"] * lr_mult
        starts = torch.randint(0, train.numel() - seq - 2, (batch,), generator=gen)
        ids = torch.stack([train[s:s + seq + 1] for s in starts.tolist()]).to(dev, non_blocking=True)
        lm, acc, dl, terms = runner(ids, dspark_w)
        loss = lm + dl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params(trunk), 1.0)
        torch.nn.utils.clip_grad_norm_(params(draft), 1.0)
        opt.step()
        worst = 0.0
        with torch.no_grad():
            for g in v41_lib.gates(trunk):
                load = g._cumulative_expert_load
                if load is not None:
                    worst = max(worst, float(load.max() / load.float().mean().clamp(min=1e-9)))
                    g.update_bias()
        runner.sync_shared()
        step += 1
        tokens += batch * seq
        elapsed = time.time() - t0
        row = [step, f"{elapsed:.1f}", tokens, f"{lr_mult * args.lr:.3e}", f"{lm.item():.4f}",
               f"{terms['ce_loss'].item():.4f}", f"{float(ratio(terms, 'tau_num', 'tau_den')):.3f}", "", "", "",
               int(qat), f"{worst:.2f}"]
        if elapsed - last_eval >= args.eval_every:
            ev = evaluate(runner, val_w, batch, dspark_w)
            row[7:10] = [f"{ev['loss']:.4f}", f"{ev['acc']:.4f}", f"{ev['tau']:.3f}"]
            last_eval = elapsed
            print(f"[{elapsed:6.1f}s] step {step} loss {lm.item():.3f} val {ev['loss']:.3f} acc {ev['acc']:.3f} "
                  f"draft CE {ev['draft_ce']:.3f} tau {ev['tau']:.2f} accept/pos "
                  f"{[round(a, 2) for a in ev['accept_per_pos']]} max load {worst:.2f}", flush=True)
        log.writerow(row)
    train_s = time.time() - t0
    log_f.close()

    final_q = evaluate(runner, val_w, batch, dspark_w)
    v41_lib.disable_qat(trunk, draft)
    final_latent = evaluate(runner, val_w, batch, dspark_w)
    metrics = {"steps": step, "tokens": tokens, "train_seconds": train_s, "tokens_per_s": tokens / train_s,
               "batch": batch, "seq": seq, "params_trunk": n_trunk, "params_drafter": n_draft,
               "pre_qat": pre_qat, "final_qat": final_q, "final_unquantized": final_latent,
               "device": str(dev), "gpu": torch.cuda.get_device_name(0) if cuda else None,
               "torch": torch.__version__, "args": vars(args)}
    print(f"== trained {step} steps, {tokens / 1e6:.1f} M tokens in {train_s:.0f} s "
          f"({tokens / train_s:.0f} tokens/s); val {final_q['loss']:.3f} (fake-quantised weights), "
          f"{final_latent['loss']:.3f} (latent); DSpark tau {final_q['tau']:.2f}", flush=True)
    torch.save({"text": text, "trunk": trunk.state_dict(), "draft": draft.state_dict()}, out / "checkpoint.pt")
    metrics["export"] = write_export(runner, ad, dad, text, out / "export", tok_dir, seq, args.shard_mb)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    print(f"== export: {metrics['export']['bytes'] / 1e6:.2f} MB in {metrics['export']['shards']} shards",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
