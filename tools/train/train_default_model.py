"""Trains the embedded default model (issue 7): a small DeepSeek-V4 (HF `DeepseekV4ForCausalLM` trunk + our
MTP head, tools/train/v4_lib.py) on the prepared corpus, within a wall-clock budget.

    python3 tools/train/train_default_model.py --minutes 5 --out runs/default      # GPU (bf16 autocast)
    python3 tools/train/train_default_model.py --size toy --minutes 0.5 --out /tmp/toy   # CPU smoke run

Loss = next-token CE + --mtp-weight x MTP CE (row t predicts token t+2). AdamW, linear warmup then cosine
decay over the *time* budget (the step count is not known in advance). Score-routed layers use V4's
auxiliary-loss-free balancing: after every step each router's selection bias moves by --bias-rate toward
equal expert load (the bias steers selection only, as in V4). The last --qat-frac of the budget trains with
straight-through fake quantisation of every weight the official checkpoint stores in FP8 (BxB E8M0 tiles)
or FP4 (1x32, routed experts), so the exported checkpoint keeps the quality measured here.

Deterministic given the seed, except for where the time budget cuts the run (the number of steps).
Outputs in --out: train_log.csv (one row per log step; val columns filled at evaluations), metrics.json,
checkpoint.pt (latent FP32 weights + config; input of export_checkpoint.py), stdout log.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import pathlib
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import v4_lib  # noqa: E402


def load_tokens(path: pathlib.Path, device) -> torch.Tensor:
    arr = np.fromfile(path, dtype=np.uint16).astype(np.int64)
    return torch.from_numpy(arr).to(device)


def val_windows(val: torch.Tensor, win: int, limit: int) -> torch.Tensor:
    n = min((val.numel() - 1) // win, limit)
    return val[: n * win].view(n, win)


@torch.no_grad()
def evaluate(model, windows: torch.Tensor, batch: int, amp) -> dict:
    model.eval()
    tot = {"loss": 0.0, "mtp_loss": 0.0, "acc": 0.0, "mtp_acc": 0.0}
    n = 0
    for i in range(0, windows.shape[0], batch):
        ids = windows[i:i + batch]
        with amp():
            logits, mtp = model(ids[:, :-1])
        tgt, mtgt = ids[:, 1:-1], ids[:, 2:]
        k = tgt.numel()
        tot["loss"] += F.cross_entropy(logits.float().flatten(0, 1), tgt.flatten(), reduction="sum").item()
        tot["mtp_loss"] += F.cross_entropy(mtp.float().flatten(0, 1), mtgt.flatten(), reduction="sum").item()
        tot["acc"] += (logits.argmax(-1) == tgt).sum().item()
        tot["mtp_acc"] += (mtp.argmax(-1) == mtgt).sum().item()
        n += k
    model.train()
    return {k: v / n for k, v in tot.items()}


class RouterBalance:
    """V4 auxiliary-loss-free load balancing for score-routed layers (bias steers selection only)."""

    def __init__(self, model, rate: float):
        from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4TopKRouter
        self.rate = rate
        self.routers = [m for m in model.modules() if isinstance(m, DeepseekV4TopKRouter)]
        self.counts = {id(r): None for r in self.routers}
        for r in self.routers:
            r.register_forward_hook(self._hook)

    def _hook(self, mod, args, out):
        if not mod.training:
            return
        idx = out[2].reshape(-1)
        c = torch.bincount(idx, minlength=mod.num_experts).float()
        prev = self.counts[id(mod)]
        self.counts[id(mod)] = c if prev is None else prev + c

    @torch.no_grad()
    def step(self) -> float:
        worst = 0.0
        for r in self.routers:
            c = self.counts[id(r)]
            if c is None:
                continue
            load = c / c.sum()
            r.e_score_correction_bias += self.rate * torch.sign(load.mean() - load)
            worst = max(worst, float(load.max() * load.numel()))
            self.counts[id(r)] = None
        return worst  # max expert load relative to uniform, over routers


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="default", choices=sorted(v4_lib.SIZES))
    ap.add_argument("--data", default=str(REPO / "data" / "default_model" / "tokens"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=5.0, help="wall-clock budget of the training loop")
    ap.add_argument("--max-steps", type=int, default=0, help="stop earlier after this many steps (0: none)")
    ap.add_argument("--batch", type=int, default=0, help="sequences per step (0: 64 on CUDA, 4 on CPU)")
    ap.add_argument("--seq", type=int, default=0, help="sequence length (0: the size's default)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.05)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--indexer-weight", type=float, default=1.0, help="indexer KL (touches only the indexers)")
    ap.add_argument("--qat-frac", type=float, default=0.12)
    ap.add_argument("--bias-rate", type=float, default=3e-3)
    ap.add_argument("--eval-every", type=float, default=30.0, help="seconds between validation runs")
    ap.add_argument("--val-windows", type=int, default=256)
    ap.add_argument("--experts-impl", default="auto", help="HF experts implementation: eager|grouped_mm|batched_mm")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args(argv)

    dev = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    data = pathlib.Path(args.data)
    meta = json.loads((data / "meta.json").read_text())
    cfg, extras = v4_lib.hf_config(args.size, vocab_size=meta["vocab_size"])
    impl = args.experts_impl if args.experts_impl != "auto" else ("grouped_mm" if cuda else "eager")
    cfg._experts_implementation = impl
    T = args.seq or extras["seq_len"]
    B = args.batch or (64 if cuda else 4)
    blk = extras["block"]

    model = v4_lib.DefaultModel(cfg)
    v4_lib.init_weights(model, args.seed)
    model.to(dev).train()
    n_params = sum(p.numel() for p in model.parameters())
    n_expert = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    print(f"device {dev} ({torch.cuda.get_device_name(0) if cuda else 'cpu'}), experts impl {impl}; "
          f"params {n_params / 1e6:.2f} M ({n_expert / 1e6:.2f} M in routed experts); batch {B} x seq {T}",
          flush=True)

    train = load_tokens(data / "train.bin", dev)
    val = val_windows(load_tokens(data / "val.bin", dev), T + 2, args.val_windows)
    print(f"train tokens {train.numel()}, val windows {val.shape[0]} x {T + 2}", flush=True)
    gen = torch.Generator().manual_seed(args.seed)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "hc" not in n and "fn" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "hc" not in n and "fn" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=cuda)
    balance = RouterBalance(model, args.bias_rate)
    distill = v4_lib.IndexerDistill(model)

    def amp():
        return torch.autocast("cuda", dtype=torch.bfloat16) if cuda else torch.autocast("cpu", enabled=False)

    budget = args.minutes * 60.0
    log_f = open(out / "train_log.csv", "w", newline="")
    log = csv.writer(log_f)
    log.writerow(["step", "elapsed_s", "tokens", "lr", "train_loss", "train_mtp_loss", "val_loss", "val_mtp_loss",
                  "val_acc", "val_mtp_acc", "qat", "max_expert_load", "train_loss_ema", "train_mtp_loss_ema",
                  "indexer_kl"])
    metrics = {"size": args.size, "batch": B, "seq_len": T, "params": n_params, "device": str(dev),
               "experts_impl": impl, "seed": args.seed, "lr": args.lr, "mtp_weight": args.mtp_weight}

    import torch.nn.utils.parametrize as P
    qat, step, tokens = False, 0, 0
    t0 = time.time()
    last_eval = -1e9
    run_loss = run_mtp = None
    while True:
        if cuda:
            torch.cuda.synchronize()
        elapsed = time.time() - t0
        progress = elapsed / budget
        done = elapsed >= budget or (args.max_steps and step >= args.max_steps)
        if not qat and (progress >= 1 - args.qat_frac or done or
                        (args.max_steps and step >= args.max_steps * (1 - args.qat_frac))):
            ev = evaluate(model, val, B, amp)
            metrics["pre_qat"] = dict(ev, step=step, elapsed_s=elapsed)
            print(f"step {step}: val before QAT {ev}", flush=True)
            n = v4_lib.enable_qat(model, blk)
            print(f"QAT on: {n} weights fake-quantised (FP8 {blk}x{blk} tiles, FP4 1x32)", flush=True)
            qat = True
        if done:
            break
        want_eval = elapsed - last_eval >= args.eval_every
        lr = v4_lib.cosine_lr(max(progress, step / args.max_steps if args.max_steps else 0.0), step,
                              args.warmup, args.lr, args.lr * args.min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, train.numel() - (T + 2), (B,), generator=gen)
        ids = train[(starts[:, None] + torch.arange(T + 2)[None, :]).to(dev)]
        ctx = P.cached() if qat else torch.autocast("cpu", enabled=False)
        with ctx, amp():
            logits, mtp = model(ids[:, :-1])
            loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:-1].flatten())
            mloss = F.cross_entropy(mtp.float().flatten(0, 1), ids[:, 2:].flatten())
            total = loss + args.mtp_weight * mloss
            iloss = distill.loss()
            if iloss is not None:
                total = total + args.indexer_weight * iloss
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        load = balance.step()
        step += 1
        tokens += B * T
        lv, mv = loss.item(), mloss.item()
        if not math.isfinite(lv):
            raise RuntimeError(f"step {step}: loss is {lv}")
        run_loss = lv if run_loss is None else 0.95 * run_loss + 0.05 * lv
        run_mtp = mv if run_mtp is None else 0.95 * run_mtp + 0.05 * mv
        row = [step, f"{time.time() - t0:.2f}", tokens, f"{lr:.3e}", f"{lv:.4f}", f"{mv:.4f}", "", "", "", "",
               int(qat), f"{load:.2f}", f"{run_loss:.4f}", f"{run_mtp:.4f}",
               "" if iloss is None else f"{iloss.item():.4f}"]
        if want_eval:
            ev = evaluate(model, val, B, amp)
            last_eval = time.time() - t0
            row[6:10] = [f"{ev['loss']:.4f}", f"{ev['mtp_loss']:.4f}", f"{ev['acc']:.4f}", f"{ev['mtp_acc']:.4f}"]
            print(f"step {step} t={elapsed:.0f}s tok/s {tokens / max(elapsed, 1e-9):.0f} lr {lr:.2e} "
                  f"train {run_loss:.3f} mtp {run_mtp:.3f} | val {ev['loss']:.3f} mtp {ev['mtp_loss']:.3f} "
                  f"acc {ev['acc']:.3f} mtp_acc {ev['mtp_acc']:.3f} | max load {load:.2f} idx_kl {row[14]} qat {int(qat)}",
                  flush=True)
        if step % 10 == 0 or want_eval:
            log.writerow(row)
            log_f.flush()

    elapsed = time.time() - t0
    ev = evaluate(model, val, B, amp)  # QAT on: this is the quantised model's quality
    metrics["final_qat"] = dict(ev, step=step, elapsed_s=elapsed)
    log.writerow([step, f"{elapsed:.2f}", tokens, "", "", "", f"{ev['loss']:.4f}", f"{ev['mtp_loss']:.4f}",
                  f"{ev['acc']:.4f}", f"{ev['mtp_acc']:.4f}", int(qat), ""])
    log_f.close()
    v4_lib.disable_qat(model)
    ev = evaluate(model, val, B, amp)  # the same final weights without quantisation: the cost of quantising
    metrics["final_unquantized"] = dict(ev, step=step)
    print(f"val of the final weights without fake quant: {ev}", flush=True)
    if cuda:
        metrics["max_gpu_memory_gb"] = torch.cuda.max_memory_allocated() / 1e9
    metrics.update(steps=step, tokens=tokens, train_seconds=elapsed, tokens_per_s=tokens / elapsed,
                   final_train_loss=run_loss, final_train_mtp_loss=run_mtp)
    model.cpu()
    torch.save({"state_dict": model.state_dict(), "size": args.size, "hf_config": cfg.to_dict(),
                "block": blk, "seq_len": T, "metrics": metrics}, out / "checkpoint.pt")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    print(f"done: {step} steps, {tokens} tokens in {elapsed:.1f}s ({tokens / elapsed:.0f} tok/s); "
          f"val after QAT (fake-quantised) {metrics['final_qat']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
