"""Loss-curve picture for the model card: train (smoothed) and validation loss, main and MTP, from the
train_log.csv written by train_default_model.py; the QAT phase is shaded.

    python3 tools/train/plot_loss.py RUN/train_log.csv OUT.png
"""

from __future__ import annotations

import csv
import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    src, dst = argv[:2]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(csv.DictReader(open(src)))
    v41 = "draft_ce" in (rows[0] if rows else {})  # train_v41_model.py's columns: trunk + DSpark drafter
    if v41:  # per-step losses: smoothed here
        tr = [(int(r["tokens"]) / 1e6, float(r["loss"]), float(r["draft_ce"])) for r in rows]
        va = [(int(r["tokens"]) / 1e6, float(r["val_loss"]), None) for r in rows if r["val_loss"]]
        second = "train DSpark draft CE (5-token blocks)"
    else:
        tr = [(int(r["tokens"]) / 1e6, float(r["train_loss_ema"]), float(r["train_mtp_loss_ema"]))
              for r in rows if r.get("train_loss_ema")]
        va = [(int(r["tokens"]) / 1e6, float(r["val_loss"]), float(r["val_mtp_loss"])) for r in rows if r["val_loss"]]
        second = "train MTP (t+2)"
    qat = [int(r["tokens"]) / 1e6 for r in rows if r["qat"] == "1"]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)

    def smooth(v, a=0.9 if v41 else 0.0):  # the V4 CSV already holds an EMA of the per-step loss
        out, s = [], None
        for x in v:
            s = x if s is None else a * s + (1 - a) * x
            out.append(s)
        return out

    if tr:
        ax.plot([t[0] for t in tr], smooth([t[1] for t in tr]), color="C0", lw=1, alpha=0.6, label="train")
        ax.plot([t[0] for t in tr], smooth([t[2] for t in tr]), color="C1", lw=1, alpha=0.6, label=second)
    if va:
        ax.plot([t[0] for t in va], [t[1] for t in va], "o-", color="C0", ms=3, label="validation")
        if not v41:
            ax.plot([t[0] for t in va], [t[2] for t in va], "o-", color="C1", ms=3, label="validation MTP (t+2)")
    if qat:
        ax.axvspan(min(qat), max(qat), color="grey", alpha=0.15, label="QAT (FP8/FP4 fake quant)")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_ylim(bottom=max(0.0, min([t[1] for t in va] or [0]) - 0.5), top=min(9.5, max([t[2] for t in tr] or [9.5])))
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(sys.argv[3] if len(sys.argv) > 3 else
                 "DeepInfer trained model" + (" (DeepSeek-V4.1 + DSpark)" if v41 else " (DeepSeek-V4)"))
    fig.tight_layout()
    fig.savefig(dst)
    print(f"wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
