#!/usr/bin/env python3
"""CPU speed and memory of DeepInfer's DeepSeek-V4.1 forward vs NeMo AutoModel's, side by side.

NeMo AutoModel 0.7.0 (`nemo_automodel.components.models.deepseek_v41`) is the one runnable V4.1
implementation on PyPI (transformers has none in a release; spec §6.7), and the oracle our
goldens come from. One run, one machine, batch 1, the same checkpoint (official names, BF16 as
released) and the same prompt (random ids, fixed seed), the same thread count:

  ours  `deepinfer generate --prompt-ids ... --stats --json --ignore-eos` (the CLI binary given by
        --deepinfer; default a dev build, build/bench or build/test). Prefill = the first
        extend over the whole prompt (last-row logits), decode = the later one-token steps (KV
        cache, Engram look-back), both timed inside the binary.
  NeMo  `DeepseekV41ForCausalLM` (FP32, eval; the BF16 weights upcast, which is what ours
        computes), in a child process so its peak RSS is its own. Prefill = one forward over the
        prompt with logits_to_keep=1 (the same work as ours). NeMo has no inference KV cache, so
        its decode step is a forward over the whole sequence (logits_to_keep=1) at the context
        length of the middle decode step: that is what decoding with NeMo costs, not a cached
        engine's step; the ratio says so.

Every figure is the best of --repeats runs. Ceilings (roofline_v41.py has the work model): the
prefill floor = its MACs / the FMA peak of `--threads` cores measured in this run
(roofline_probe.cc); the decode floor = max(bytes a step must read / the read bandwidth at that
working-set size, MACs / FMA peak). Printed as floor/ours and floor/NeMo (1.0 = at the ceiling).
Greedy tokens of both are compared over the first --check-tokens (NeMo by recomputation).

Checkpoints: `tiny` = the committed tests/data/model/v41_tiny_a/official_bf16; `600m` = a 0.62B
V4.1-shaped random model (every part: SWA, Full ratio 2 and 1, Reuse, Reindex, a candidate source,
two Engram layers, 3 DSpark stages; the DeepSeek-V4 tokenizer for its Engram map) this script
makes through NeMo's own state-dict adapter under --workdir (reused when its config matches; made
in a child process: Linux carries a parent's peak RSS into its children's ru_maxrss). A third of its
parameters is the 129K-token vocabulary's embedding and head, half the routed experts.

Run with the reference environment (torch + nemo_automodel; tests/reference/model_v41/README.md):
  TORCHDYNAMO_DISABLE=1 /work/refenv41/bin/python bench/model_cpu/bench_v41_vs_nemo.py --threads 2
Writes <out>/results.json and <out>/results.csv and prints a table.
"""

import argparse
import csv
import hashlib
import json
import os
import pathlib
import random
import resource
import shutil
import subprocess
import sys
import time

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import roofline  # noqa: E402  (probe_machine)
import roofline_v41  # noqa: E402
from bench_vs_hf import dir_bytes, find_deepinfer, rss_now, run_ours  # noqa: E402  (V4's CLI runner)

V4_TOKENIZER = REPO / "python/deepinfer/data/deepseek_v4/tokenizer.json"
YARN = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536,
        "beta_fast": 32.0, "beta_slow": 1.0}

# 0.62B: proportions of V4.1-Flash at a smaller width (bench_vs_hf.py's V4 300m widths, the V4 vocabulary).
CONFIG_600M = dict(
    vocab_size=129280, hidden_size=768, num_key_value_heads=1, head_dim=128, qk_rope_head_dim=32,
    q_lora_rank=512, o_groups=4, o_lora_rank=256, moe_intermediate_size=512, n_shared_experts=1,
    scoring_func="sqrtsoftplus", gate_temp=1.0, norm_topk_prob=True, routed_scaling_factor=1.5,
    topk_method="noaux_tc", swiglu_limit=10.0, hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-6,
    rope_theta=10000.0, compress_rope_theta=160000.0, rope_scaling=dict(YARN), max_position_embeddings=1048576,
    engram_pad_id=1, engram_head_dim=64, dspark_markov_rank=64, hidden_act="silu", initializer_range=0.02,
    attention_bias=False, attention_dropout=0.0, tie_word_embeddings=False, pad_token_id=1, bos_token_id=0,
    eos_token_id=1,
    num_hidden_layers=8, num_attention_heads=16, n_routed_experts=32, num_experts_per_tok=6,
    sliding_window=128, compress_ratios=[0, 0, 2, 2, 2, 1, 1, 1, 0, 0, 0], kv_source_layer_ids=[2, 4, 5],
    index_source_layer_ids=[2, 4, 5, 6], candidate_source_layer_id=5, candidate_topk_blocks=16,
    candidate_block_size=16, index_n_heads=16, index_head_dim=64, index_topk=64,
    engram_layer_ids=[1, 4], engram_max_ngram_size=3, engram_n_heads=4, engram_vocab_size=20011,
    num_nextn_predict_layers=3, dspark_block_size=5, dspark_noise_token_id=2, dspark_target_layer_ids=[5, 6, 7],
    dspark_n_routed_experts=8, dspark_num_experts_per_tok=2)

CASES = {
    "tiny": dict(model=REPO / "tests/data/model/v41_tiny_a/official_bf16", prompt=300, new=64),
    "600m": dict(model=None, prompt=512, new=32),
}


def make_goldens_module(tokenizer: pathlib.Path):
    sys.path.insert(0, str(REPO / "tests/reference/model_v41"))
    import make_goldens as mg  # the reference's config, init and NeMo plumbing
    mg.TOKENIZER = tokenizer
    return mg


def checkpoint_600m(workdir: pathlib.Path) -> pathlib.Path:
    tag = hashlib.sha1(json.dumps(CONFIG_600M, sort_keys=True).encode()).hexdigest()[:10]
    return workdir / f"v41_600m_{tag}"


def ensure_600m(workdir: pathlib.Path) -> pathlib.Path:
    d = checkpoint_600m(workdir)
    if not ((d / "config.json").exists() and list(d.glob("*.safetensors"))):
        subprocess.run([sys.executable, __file__, "--make-600m", "--workdir", str(workdir)], check=True)
    return d


def make_600m(workdir: pathlib.Path) -> pathlib.Path:
    d = checkpoint_600m(workdir)
    import torch
    from safetensors.torch import save_file
    mg = make_goldens_module(V4_TOKENIZER)
    t0 = time.time()
    tmap = mg.ref.token_map(V4_TOKENIZER)
    text = mg.full_text_config({"text": CONFIG_600M}, tmap[1])
    model, draft, ad, dad = mg.nemo_objects(text)
    shapes = mg.official_shapes(model, draft, ad, dad)
    del model, draft
    w = mg.released_dtypes(mg.reinit(shapes, text, torch.Generator().manual_seed(0)))
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    save_file(w, str(d / "model.safetensors"), metadata={"format": "pt"})
    (d / "config.json").write_text(json.dumps(mg.composite_config(text, False), indent=2, sort_keys=True) + "\n")
    shutil.copyfile(V4_TOKENIZER, d / "tokenizer.json")
    n = sum(v.numel() for v in w.values())
    print(f"[make] {d}: {n / 1e6:.1f} M parameters, {time.time() - t0:.1f} s", flush=True)
    return d


# ------------------------------------------------------------------------------------------------
# NeMo worker (child process: its own peak RSS)

def nemo_worker(args):
    import torch
    from safetensors.torch import load_file
    torch.set_num_threads(args.threads)
    model_dir = pathlib.Path(args.model)
    mg = make_goldens_module(model_dir / "tokenizer.json")
    text = json.loads((model_dir / "config.json").read_text())["text_config"]
    ids = json.loads(pathlib.Path(args.ids_file).read_text())
    rss_base = rss_now()
    t0 = time.perf_counter()
    model, draft, ad, dad = mg.nemo_objects(text)
    weights = {k: v.float() for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    mg.load_nemo(model, draft, ad, dad, weights)
    del weights, draft
    load_s = time.perf_counter() - t0
    rss_load = rss_now()
    P, n = len(ids), args.new
    x = torch.tensor([ids], dtype=torch.long)
    mid = torch.tensor([ids + ids[: n // 2]], dtype=torch.long)  # context of the middle decode step
    prefill, step = [], []
    with torch.inference_mode():
        model(x[:, :16], logits_to_keep=1)  # warm-up
        for _ in range(args.repeats):
            t = time.perf_counter()
            model(x, logits_to_keep=1)
            prefill.append(time.perf_counter() - t)
            t = time.perf_counter()
            model(mid, logits_to_keep=1)
            step.append(time.perf_counter() - t)
        tokens, seq = [], list(ids)
        for _ in range(min(args.check_tokens, n)):  # greedy by recomputation
            nxt = int(model(torch.tensor([seq]), logits_to_keep=1).logits[0, -1].argmax())
            tokens.append(nxt)
            seq.append(nxt)
    json.dump(dict(load_s=load_s, prefill_s=prefill, step_s=step, tokens=tokens, prompt=P,
                   rss_base_bytes=rss_base, rss_after_load_bytes=rss_load,
                   peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024),
              sys.stdout)


# ------------------------------------------------------------------------------------------------
# Driver

def run_nemo(model, ids, new, threads, repeats, check, out_dir):
    ids_file = out_dir / "prompt_ids.json"
    ids_file.write_text(json.dumps(ids))
    r = subprocess.run([sys.executable, __file__, "--nemo-worker", "--model", str(model), "--ids-file",
                        str(ids_file), "--new", str(new), "--threads", str(threads), "--repeats", str(repeats),
                        "--check-tokens", str(check)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"NeMo worker failed:\n{r.stderr[-4000:]}")
    h = json.loads(r.stdout.strip().splitlines()[-1])
    h.update(prefill_best_s=min(h["prefill_s"]), step_best_s=min(h["step_s"]))
    return h


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", default="tiny,600m", help="comma list of: " + ",".join(CASES))
    ap.add_argument("--out", default="/tmp/model_cpu_bench_v41")
    ap.add_argument("--workdir", default="/tmp/di_bench_models", help="where the 0.62B checkpoint goes")
    ap.add_argument("--deepinfer", default=None, help="deepinfer binary (default: the dev build)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-tokens", type=int, default=8, help="greedy tokens compared with NeMo's")
    ap.add_argument("--nemo-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--make-600m", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--ids-file", help=argparse.SUPPRESS)
    ap.add_argument("--new", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.nemo_worker:
        return nemo_worker(args)
    if args.make_600m:
        return make_600m(pathlib.Path(args.workdir))

    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    exe, _ = find_deepinfer(args.deepinfer)
    print(f"deepinfer: {exe}; cases {args.cases}; threads {args.threads}; best of {args.repeats}; machine: "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
    plans = []
    for name in args.cases.split(","):
        case = dict(CASES[name])
        model = case["model"] or ensure_600m(pathlib.Path(args.workdir))
        P, new = case["prompt"], case["new"]
        work = dict(prefill=roofline_v41.prefill_macs(model, P), decode=roofline_v41.decode_cost(model, P + new // 2))
        plans.append((name, model, P, new, work))
    sizes = [w["decode"]["bytes"] for *_, w in plans] + [1 << 30]
    peak = roofline.probe_machine(args.threads, sizes, args.workdir)
    print(f"ceilings ({args.threads} threads): FMA peak {peak['fma_peak_gmacs']:.1f} GMAC/s, read "
          + ", ".join(f"{b / 2**20:.1f} MiB {g:.1f} GB/s" for b, g in zip(sizes, peak["read_gb_s"])), flush=True)
    results = []
    for ci, (name, model, P, new, work) in enumerate(plans):
        vocab = roofline_v41.text_config(model)["vocab_size"]
        rng = random.Random(args.seed)
        ids = [rng.randrange(3, vocab - 1) for _ in range(P)]
        ours = run_ours(exe, model, ids, new, args.threads, args.repeats)
        nemo = run_nemo(model, ids, new, args.threads, args.repeats, args.check_tokens, out_dir)
        agree = next((i for i, (a, b) in enumerate(zip(ours["tokens"], nemo["tokens"])) if a != b),
                     min(len(ours["tokens"]), len(nemo["tokens"])))
        pf_floor = work["prefill"]["total"] / (peak["fma_peak_gmacs"] * 1e9)
        dc = work["decode"]
        bw = peak["read_gb_s"][ci]
        dc_floor = max(dc["bytes"] / (bw * 1e9), dc["macs"] / (peak["fma_peak_gmacs"] * 1e9))
        row = dict(case=name, model=str(model), params_bytes=dir_bytes(model), prompt_tokens=P, new_tokens=new,
                   threads=args.threads, repeats=args.repeats,
                   ours_prefill_tok_s=P / ours["prefill_s"], nemo_prefill_tok_s=P / nemo["prefill_best_s"],
                   ours_decode_tok_s=1 / ours["decode_s_per_token"], nemo_recompute_step_tok_s=1 / nemo["step_best_s"],
                   ours_load_s=ours["load_s"], nemo_load_s=nemo["load_s"],
                   ours_peak_rss_bytes=ours["peak_rss_bytes"], ours_rss_after_load_bytes=ours["rss_after_load_bytes"],
                   nemo_peak_rss_bytes=nemo["peak_rss_bytes"], nemo_rss_after_load_bytes=nemo["rss_after_load_bytes"],
                   nemo_rss_base_bytes=nemo["rss_base_bytes"],
                   greedy_tokens_checked=len(nemo["tokens"]), greedy_tokens_agree=agree,
                   fma_peak_gmacs=peak["fma_peak_gmacs"], decode_read_gb_s=bw,
                   prefill_macs=work["prefill"]["total"], prefill_floor_s=pf_floor,
                   decode_macs=dc["macs"], decode_bytes=dc["bytes"], decode_floor_s=dc_floor)
        row.update(prefill_ratio=row["ours_prefill_tok_s"] / row["nemo_prefill_tok_s"],
                   decode_ratio_vs_nemo_recompute=row["ours_decode_tok_s"] / row["nemo_recompute_step_tok_s"],
                   prefill_floor_over_ours=pf_floor / ours["prefill_s"],
                   prefill_floor_over_nemo=pf_floor / nemo["prefill_best_s"],
                   decode_floor_over_ours=dc_floor / ours["decode_s_per_token"])
        results.append(row)
        mib = 1 / (1 << 20)
        print(f"\n== {name}: {model} ({row['params_bytes'] * mib:.1f} MiB), prompt {P}, {new} new tokens")
        print(f"  prefill tok/s  ours {row['ours_prefill_tok_s']:9.1f}   NeMo {row['nemo_prefill_tok_s']:9.1f}   "
              f"ratio {row['prefill_ratio']:.2f}x   floor/ours {row['prefill_floor_over_ours']:.3f}   "
              f"floor/NeMo {row['prefill_floor_over_nemo']:.3f}   (ceiling {P / pf_floor:.0f} tok/s = "
              f"{work['prefill']['total'] / 1e9:.2f} GMAC / {peak['fma_peak_gmacs']:.0f} GMAC/s)")
        print(f"  decode  tok/s  ours {row['ours_decode_tok_s']:9.1f}   NeMo {row['nemo_recompute_step_tok_s']:9.1f} "
              f"(no KV cache: a whole-sequence forward per token)   ratio {row['decode_ratio_vs_nemo_recompute']:.1f}x   "
              f"floor/ours {row['decode_floor_over_ours']:.3f}   (ceiling {1 / dc_floor:.0f} tok/s: "
              f"{dc['bytes'] / 2**20:.2f} MiB at {bw:.1f} GB/s, {dc['macs'] / 1e6:.1f} MMAC)")
        print(f"  memory  ours peak RSS {row['ours_peak_rss_bytes'] * mib:.1f} MiB (after load "
              f"{row['ours_rss_after_load_bytes'] * mib:.1f}); NeMo peak RSS {row['nemo_peak_rss_bytes'] * mib:.1f} MiB "
              f"(torch + NeMo alone {row['nemo_rss_base_bytes'] * mib:.1f}); checkpoint {row['params_bytes'] * mib:.1f} MiB")
        print(f"  load    ours {row['ours_load_s']:.2f} s   NeMo {row['nemo_load_s']:.2f} s")
        print(f"  greedy tokens identical for the first {agree} of {len(nemo['tokens'])} checked", flush=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    with open(out_dir / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(results[0].keys()))
        w.writeheader()
        w.writerows(results)
    print(f"\nwrote {out_dir / 'results.json'} and {out_dir / 'results.csv'}")


if __name__ == "__main__":
    main()
