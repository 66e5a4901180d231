#!/usr/bin/env python3
"""CPU speed of DeepInfer's DeepSeek-V4 forward vs Hugging Face transformers, side by side.

One run, one machine, batch 1, the same checkpoint and the same prompt (random ids, fixed seed),
greedy, the same thread count for both:

  ours  `deepinfer generate --stats --json --ignore-eos` (the CLI binary given by --deepinfer; by
        default the dev build build/bench/tools/cli/deepinfer, else `deepinfer` on PATH), threads
        via DEEPINFER_NUM_THREADS. Prefill = the first extend over the whole prompt (last-row
        logits), decode = the later one-token steps; both timed inside the binary.
  HF    `DeepseekV4ForCausalLM` (FP32, eval, torch.set_num_threads = same count), in a child
        process so its peak RSS is its own. Prefill = one forward over the prompt
        (use_cache=True, logits_to_keep=1: the same work as ours); decode = (time of
        generate(max_new_tokens=N) - time of generate(max_new_tokens=1)) / (N - 1), greedy,
        use_cache=True, min_new_tokens=N. HF's cached decode path is not a trustworthy numerical
        reference (spec §7.7), so token agreement is printed for information only; for timing it
        does the same amount of work.

Every figure is the best of --repeats runs (the machine may be shared with other jobs).

Ceilings (roofline.py has the formulas): the prefill's compute floor = its multiply-accumulates
(every linear, the experts each token uses, the attention/indexer dots over the keys each query
reads, mHC) / the FMA peak of `--threads` cores, measured in this run (roofline_probe.cc), also
against the achievable sgemm rate (numpy/OpenBLAS, torch, 2048^3); the decode floor = max(the
weight + cache bytes a step reads / the read bandwidth measured at that working-set size, its
MACs / the FMA peak). Printed as floor/ours and floor/HF (1.0 = at the ceiling) and as the
largest ratio over HF the ceiling allows (HF time / floor time).

Checkpoints: `tiny` = the committed tests/data/model/v4_tiny_a/hf_fp32 (committed as a recipe over
official_fp32, derive.json: materialized under --workdir first; prompt 512, 256 new
tokens); `300m` = a ~0.3B V4-shaped random model this script creates with transformers and
saves with save_pretrained (FP32) under --workdir (reused when its config matches). FP32 so that
both engines compute the same thing in the same precision: our engine computes FP32 with weights
in their checkpoint dtype, and HF on a BF16 checkpoint would run BF16 matmuls (a different,
less accurate computation whose CPU speed depends on AMX/AVX512-BF16 kernels).

Run (the refenv has torch + transformers; the CLI is built with the `deepinfer_bin` target):
  /work/refenv/bin/python bench/model_cpu/bench_vs_hf.py --threads 2 --out /tmp/model_cpu_bench
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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import roofline  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "reference"))
from derive_checkpoint import materialized_checkpoint  # noqa: E402

YARN = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536,
        "beta_fast": 32.0, "beta_slow": 1.0}

# ~0.3B parameters, every V4 part: SWA, CSA (ratio 4, lightning indexer top-64), HCA (ratio 128),
# hash + score MoE with a shared expert, mHC (4 streams), grouped output projection, YaRN on the
# compressed layers. Proportions follow the real model at a smaller width (head_dim 128 with 32
# rope dims, window 128, 32 experts of width 512, top-6).
CONFIG_300M = dict(
    vocab_size=16384, hidden_size=768, moe_intermediate_size=512, num_hidden_layers=8,
    num_attention_heads=16, head_dim=128, partial_rotary_factor=0.25, q_lora_rank=512,
    o_groups=4, o_lora_rank=256, n_routed_experts=32, num_experts_per_tok=6, n_shared_experts=1,
    layer_types=["sliding_attention", "sliding_attention", "compressed_sparse_attention",
                 "heavily_compressed_attention", "compressed_sparse_attention",
                 "heavily_compressed_attention", "compressed_sparse_attention",
                 "heavily_compressed_attention"],
    mlp_layer_types=["hash_moe", "hash_moe", "hash_moe", "moe", "moe", "moe", "moe", "moe"],
    compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
    sliding_window=128, index_n_heads=16, index_head_dim=64, index_topk=64,
    rope_parameters=dict(YARN), max_position_embeddings=1048576, num_nextn_predict_layers=0)

CASES = {
    "tiny": dict(model=REPO / "tests/data/model/v4_tiny_a/hf_fp32", prompt=512, new=256),
    "300m": dict(model=None, prompt=512, new=64),
    # Extra: the same weights saved in BF16 (norms/mHC/sinks stay FP32, HF's keep-in-FP32 list).
    # Both compute FP32 with BF16-valued weights: ours reads the BF16 bytes in place, HF holds an
    # FP32 copy (see hf_worker).
    "300m_bf16": dict(model=None, prompt=512, new=64, bf16=True),
}


def dir_bytes(d: pathlib.Path) -> int:
    return sum(f.stat().st_size for f in d.glob("*.safetensors"))


# ------------------------------------------------------------------------------------------------
# Checkpoint creation (HF, random init with O(1) activations so routing/selection is non-trivial)

def reinit_(model, seed: int):
    import torch
    gen = torch.Generator().manual_seed(seed)
    cfg = model.config
    with torch.no_grad():
        for name, p in model.named_parameters():
            shp = tuple(p.shape)
            if "embed" in name:
                p.copy_(torch.randn(shp, generator=gen))
            elif name.endswith("head.weight"):
                p.copy_(torch.randn(shp, generator=gen) * (2.0 / cfg.hidden_size ** 0.5))
            elif name.endswith(("_fn", ".fn")):
                p.copy_(torch.randn(shp, generator=gen) * 0.08)
            elif name.endswith(("_base", ".base")):
                p.copy_(torch.randn(shp, generator=gen) * 0.5)
            elif name.endswith(("_scale", ".scale")):
                p.copy_(0.5 + torch.rand(shp, generator=gen))
            elif name.endswith(("attn_sink", ".sinks")):
                p.copy_(torch.randn(shp, generator=gen))
            elif name.endswith(("ape", "position_bias", "gate.bias", "e_score_correction_bias")):
                p.copy_(torch.randn(shp, generator=gen) * 0.5)
            elif p.dim() == 1:
                p.copy_(1.0 + torch.randn(shp, generator=gen) * 0.1)
            elif p.is_floating_point():
                p.copy_(torch.randn(shp, generator=gen) / shp[-1] ** 0.5)
        for name, b in model.named_buffers():
            if name.endswith("tid2eid"):
                k, e = cfg.num_experts_per_tok, cfg.n_routed_experts
                b.copy_(torch.stack([torch.randperm(e, generator=gen)[:k] for _ in range(b.shape[0])]))


def make_300m_bf16(workdir: pathlib.Path) -> pathlib.Path:
    src = make_300m(workdir)
    d = src.with_name(src.name + "_bf16")
    if (d / "config.json").exists() and list(d.glob("*.safetensors")):
        return d
    import torch
    from transformers.models.deepseek_v4 import DeepseekV4ForCausalLM
    DeepseekV4ForCausalLM.from_pretrained(str(src), dtype=torch.bfloat16).save_pretrained(str(d))
    (d / "generation_config.json").unlink(missing_ok=True)
    return d


def make_300m(workdir: pathlib.Path) -> pathlib.Path:
    tag = hashlib.sha1(json.dumps(CONFIG_300M, sort_keys=True).encode()).hexdigest()[:10]
    d = workdir / f"v4_300m_{tag}"
    if (d / "config.json").exists() and list(d.glob("*.safetensors")):
        return d
    import torch
    from transformers.models.deepseek_v4 import DeepseekV4Config, DeepseekV4ForCausalLM
    torch.manual_seed(0)
    t0 = time.time()
    model = DeepseekV4ForCausalLM(DeepseekV4Config(**CONFIG_300M)).float().eval()
    reinit_(model, 0)
    if d.exists():
        shutil.rmtree(d)
    model.save_pretrained(str(d))
    (d / "generation_config.json").unlink(missing_ok=True)
    n = sum(p.numel() for p in model.parameters())
    print(f"[make] {d}: {n / 1e6:.1f} M parameters, {time.time() - t0:.1f} s", flush=True)
    return d


# ------------------------------------------------------------------------------------------------
# HF worker (child process: its own peak RSS)

def rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def hf_worker(args):
    import torch
    torch.set_num_threads(args.threads)
    from transformers.models.deepseek_v4 import DeepseekV4ForCausalLM
    ids = json.loads(pathlib.Path(args.ids_file).read_text())
    rss_base = rss_now()
    t0 = time.perf_counter()
    # FP32 compute also for the BF16 checkpoint: transformers 5.17 cannot run this model in BF16
    # on the CPU (the FP32-kept q_a_norm feeds a BF16 q_b_proj: "expected m1 and m2 to have the
    # same dtype"), so HF upcasts the BF16 weights at load, which is what ours computes too.
    model = DeepseekV4ForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    load_s = time.perf_counter() - t0
    rss_load = rss_now()
    x = torch.tensor([ids], dtype=torch.long)
    n = args.new
    kw = dict(do_sample=False, use_cache=True, pad_token_id=0, eos_token_id=None)
    prefill, gen1, genn, tokens = [], [], [], None
    with torch.inference_mode():
        model(x[:, :16], use_cache=True, logits_to_keep=1)  # warm-up (lazy inits, allocator)
        for _ in range(args.repeats):
            t = time.perf_counter()
            model(x, use_cache=True, logits_to_keep=1)
            prefill.append(time.perf_counter() - t)
            t = time.perf_counter()
            model.generate(x, max_new_tokens=1, min_new_tokens=1, **kw)
            gen1.append(time.perf_counter() - t)
            t = time.perf_counter()
            out = model.generate(x, max_new_tokens=n, min_new_tokens=n, **kw)
            genn.append(time.perf_counter() - t)
            tokens = out[0, len(ids):].tolist()
    json.dump(dict(load_s=load_s, prefill_s=prefill, gen1_s=gen1, genn_s=genn, tokens=tokens,
                   rss_base_bytes=rss_base, rss_after_load_bytes=rss_load,
                   peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024),
              sys.stdout)


# ------------------------------------------------------------------------------------------------
# Driver

def find_deepinfer(arg):
    if arg:
        return arg, "given"
    for dev in (REPO / "build/bench/tools/cli/deepinfer", REPO / "build/test/tools/cli/deepinfer"):
        if dev.exists():
            return str(dev), "dev build"
    exe = shutil.which("deepinfer")
    if exe:
        return exe, "installed CLI"
    sys.exit("no deepinfer binary: build target deepinfer_bin or pass --deepinfer")


def run_ours(exe, model, ids, new, threads, repeats):
    env = dict(os.environ, DEEPINFER_NUM_THREADS=str(threads))
    runs = []
    for _ in range(repeats):
        r = subprocess.run([exe, "generate", "--model", str(model), "--prompt-ids",
                            ",".join(map(str, ids)), "--max-tokens", str(new), "--temperature", "0",
                            "--ignore-eos", "--json", "--stats"],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            sys.exit(f"deepinfer generate failed: {r.stderr}")
        runs.append(json.loads(r.stdout))
    s = [r["stats"] for r in runs]
    return dict(
        prefill_s=min(x["prefill_s"] for x in s),
        decode_s_per_token=min(x["decode_s"] / x["decode_steps"] for x in s),
        load_s=min(x["load_s"] for x in s),
        peak_rss_bytes=max(x["peak_rss_bytes"] for x in s),
        peak_rss_all=[x["peak_rss_bytes"] for x in s],
        rss_after_load_bytes=max(x["rss_after_load_bytes"] for x in s),
        tokens=runs[0]["token_ids"], raw=s)


def run_hf(model, ids, new, threads, repeats, out_dir):
    ids_file = out_dir / "prompt_ids.json"
    ids_file.write_text(json.dumps(ids))
    r = subprocess.run([sys.executable, __file__, "--hf-worker", "--model", str(model),
                        "--ids-file", str(ids_file), "--new", str(new), "--threads", str(threads),
                        "--repeats", str(repeats)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"HF worker failed:\n{r.stderr[-4000:]}")
    h = json.loads(r.stdout)
    decode = [(gn - g1) / (new - 1) for g1, gn in zip(h["gen1_s"], h["genn_s"])]
    h.update(prefill_best_s=min(h["prefill_s"]), decode_s_per_token=min(decode))
    return h


def kv_estimate(exe, model, context):
    """FP32 cache bytes for one sequence of `context` tokens (our engine keeps cache rows in
    FP32, docs/model.md), from `deepinfer inspect --json`'s per-token figures."""
    r = subprocess.run([exe, "inspect", str(model), "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    kv = json.loads(r.stdout)["kv_cache"]
    return int(4 * (kv["compressed_elements_per_token"] * context
                    + kv["window_elements_per_sequence"]) + kv["compressor_state_bytes_per_sequence_f32"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", default="tiny,300m,300m_bf16", help="comma list of: " + ",".join(CASES))
    ap.add_argument("--out", default="/tmp/model_cpu_bench")
    ap.add_argument("--workdir", default="/tmp/di_bench_models", help="where the 0.3B checkpoint goes")
    ap.add_argument("--deepinfer", default=None, help="deepinfer binary (default: dev build, else PATH)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompt", type=int, default=None, help="override the prompt length")
    ap.add_argument("--new", type=int, default=None, help="override the new-token count")
    # internal: the HF child
    ap.add_argument("--hf-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--ids-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hf_worker:
        return hf_worker(args)

    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    exe, exe_kind = find_deepinfer(args.deepinfer)
    print(f"deepinfer: {exe} ({exe_kind}); cases {args.cases}; threads {args.threads}; best of {args.repeats}; "
          f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} "
          f"(shared with other jobs)", flush=True)
    plans = []
    for name in args.cases.split(","):
        case = dict(CASES[name])
        bf16 = case.get("bf16", False)
        if case["model"] is not None:  # committed fixture: its weights may be a derive.json recipe
            model = materialized_checkpoint(case["model"], pathlib.Path(args.workdir) / f"{name}_materialized")
        else:
            model = (make_300m_bf16 if bf16 else make_300m)(pathlib.Path(args.workdir))
        prompt_len = args.prompt or case["prompt"]
        new = args.new or case["new"]
        cfg = json.loads((model / "config.json").read_text())
        # The work of this case: prefill MACs; decode MACs and bytes at the middle decode step.
        work = dict(prefill=roofline.prefill_macs(cfg, prompt_len),
                    decode=roofline.decode_cost(cfg, prompt_len + new // 2, 2 if bf16 else 4))
        plans.append((name, case, bf16, model, prompt_len, new, cfg, work))
    # The machine's peaks, now: FMA, sgemm, read bandwidth at each case's decode working set
    # (and 1 GiB, for DRAM).
    sizes = [w["decode"]["bytes"] for *_, w in plans] + [1 << 30]
    peak = roofline.probe_machine(args.threads, sizes, args.workdir)
    print(f"ceilings ({args.threads} threads, load average {os.getloadavg()[0]:.1f}): FMA peak "
          f"{peak['fma_peak_gmacs']:.1f} GMAC/s (per CPU second; {peak['fma_wall_gmacs']:.1f} by the "
          f"wall clock now), sgemm 2048^3 numpy {peak['sgemm_numpy_gmacs']:.1f} / torch "
          f"{peak['sgemm_torch_gmacs']:.1f} GMAC/s, read "
          + ", ".join(f"{b / 2**20:.1f} MiB {g:.1f} GB/s" for b, g in zip(sizes, peak["read_gb_s"])),
          flush=True)
    results = []
    for ci, (name, case, bf16, model, prompt_len, new, cfg, work) in enumerate(plans):
        rng = random.Random(args.seed)
        ids = [rng.randrange(2, cfg["vocab_size"]) for _ in range(prompt_len)]

        ours = run_ours(exe, model, ids, new, args.threads, args.repeats)
        load_before = os.getloadavg()[0]
        hf = run_hf(model, ids, new, args.threads, args.repeats, out_dir)
        agree = next((i for i, (a, b) in enumerate(zip(ours["tokens"], hf["tokens"])) if a != b),
                     min(len(ours["tokens"]), len(hf["tokens"])))
        row = dict(
            case=name, model=str(model), params_bytes=dir_bytes(model), prompt_tokens=prompt_len,
            new_tokens=new, weights="bf16" if bf16 else "fp32", threads=args.threads,
            repeats=args.repeats, deepinfer=exe_kind,
            ours_prefill_tok_s=prompt_len / ours["prefill_s"],
            hf_prefill_tok_s=prompt_len / hf["prefill_best_s"],
            ours_decode_tok_s=1.0 / ours["decode_s_per_token"],
            hf_decode_tok_s=1.0 / hf["decode_s_per_token"],
            ours_load_s=ours["load_s"], hf_load_s=hf["load_s"],
            ours_peak_rss_bytes=ours["peak_rss_bytes"],
            ours_peak_rss_each_run=" ".join(str(v) for v in ours["peak_rss_all"]),
            ours_rss_after_load_bytes=ours["rss_after_load_bytes"],
            kv_estimate_bytes=kv_estimate(exe, model, prompt_len + new),
            hf_peak_rss_bytes=hf["peak_rss_bytes"], hf_rss_after_load_bytes=hf["rss_after_load_bytes"],
            hf_rss_base_bytes=hf["rss_base_bytes"],
            greedy_tokens_agree=agree, load_avg_1min_before_hf=load_before,
            load_avg_1min_after_hf=os.getloadavg()[0])
        row["prefill_ratio"] = row["ours_prefill_tok_s"] / row["hf_prefill_tok_s"]
        row["decode_ratio"] = row["ours_decode_tok_s"] / row["hf_decode_tok_s"]
        # Ceilings (see the banner and roofline.py).
        gemm_peak = max(peak["sgemm_numpy_gmacs"], peak["sgemm_torch_gmacs"])
        pf_macs, dc = work["prefill"]["total"], work["decode"]
        pf_floor = pf_macs / (peak["fma_peak_gmacs"] * 1e9)
        bw = peak["read_gb_s"][ci]
        dc_floor_bytes = dc["bytes"] / (bw * 1e9)
        dc_floor_macs = dc["macs"] / (peak["fma_peak_gmacs"] * 1e9)
        dc_floor = max(dc_floor_bytes, dc_floor_macs)
        ours_pf_s, hf_pf_s = ours["prefill_s"], hf["prefill_best_s"]
        ours_dc_s, hf_dc_s = ours["decode_s_per_token"], hf["decode_s_per_token"]
        row.update(
            fma_peak_gmacs=peak["fma_peak_gmacs"], fma_wall_gmacs=peak["fma_wall_gmacs"],
            sgemm_numpy_gmacs=peak["sgemm_numpy_gmacs"], sgemm_torch_gmacs=peak["sgemm_torch_gmacs"],
            prefill_macs=pf_macs, prefill_attention_core_macs=work["prefill"]["attention_core"],
            prefill_floor_s=pf_floor, prefill_floor_sgemm_s=pf_macs / (gemm_peak * 1e9),
            prefill_floor_over_ours=pf_floor / ours_pf_s, prefill_floor_over_hf=pf_floor / hf_pf_s,
            prefill_sgemm_floor_over_ours=pf_macs / (gemm_peak * 1e9) / ours_pf_s,
            prefill_sgemm_floor_over_hf=pf_macs / (gemm_peak * 1e9) / hf_pf_s,
            prefill_max_ratio_vs_hf=hf_pf_s / pf_floor,
            prefill_max_ratio_vs_hf_sgemm=hf_pf_s / (pf_macs / (gemm_peak * 1e9)),
            decode_macs=dc["macs"], decode_bytes=dc["bytes"], decode_read_gb_s=bw,
            decode_floor_s=dc_floor,
            decode_floor_bound="bytes" if dc_floor_bytes >= dc_floor_macs else "compute",
            decode_floor_over_ours=dc_floor / ours_dc_s, decode_floor_over_hf=dc_floor / hf_dc_s,
            decode_max_ratio_vs_hf=hf_dc_s / dc_floor)
        results.append(row)
        mib = 1 / (1 << 20)
        print(f"\n== {name}: {model} ({row['params_bytes'] * mib:.1f} MiB on disk), prompt "
              f"{prompt_len}, {new} new tokens")
        print(f"  prefill tok/s  ours {row['ours_prefill_tok_s']:10.1f}   HF {row['hf_prefill_tok_s']:10.1f}"
              f"   ratio {row['prefill_ratio']:.2f}x   floor/ours {row['prefill_floor_over_ours']:.3f}"
              f"   floor/HF {row['prefill_floor_over_hf']:.3f}   (ceiling {prompt_len / pf_floor:.0f} tok/s"
              f" = {pf_macs / 1e9:.2f} GMAC / {peak['fma_peak_gmacs']:.0f} GMAC/s: at most "
              f"{row['prefill_max_ratio_vs_hf']:.1f}x HF; {row['prefill_max_ratio_vs_hf_sgemm']:.1f}x at "
              f"sgemm's {gemm_peak:.0f} GMAC/s)")
        print(f"  decode  tok/s  ours {row['ours_decode_tok_s']:10.1f}   HF {row['hf_decode_tok_s']:10.1f}"
              f"   ratio {row['decode_ratio']:.2f}x   floor/ours {row['decode_floor_over_ours']:.3f}"
              f"   floor/HF {row['decode_floor_over_hf']:.3f}   (ceiling {1 / dc_floor:.0f} tok/s, "
              f"{row['decode_floor_bound']}-bound: {dc['bytes'] / 2**20:.2f} MiB at {bw:.1f} GB/s, "
              f"{dc['macs'] / 1e6:.1f} MMAC; at most {row['decode_max_ratio_vs_hf']:.0f}x HF)")
        kv = row["kv_estimate_bytes"]
        print(f"  memory  ours peak RSS {row['ours_peak_rss_bytes'] * mib:.1f} MiB (after load "
              f"{row['ours_rss_after_load_bytes'] * mib:.1f}); checkpoint {row['params_bytes'] * mib:.1f}"
              f" MiB + KV est. {kv * mib if kv else float('nan'):.2f} MiB; HF peak RSS "
              f"{row['hf_peak_rss_bytes'] * mib:.1f} MiB (torch+transformers alone "
              f"{row['hf_rss_base_bytes'] * mib:.1f})")
        print(f"  load average (1 min) {row['load_avg_1min_before_hf']:.1f} before HF, "
              f"{row['load_avg_1min_after_hf']:.1f} after")
        print(f"  greedy tokens identical for the first {agree} of {new} (HF cache: spec §7.7)", flush=True)

    (out_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    with open(out_dir / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(results[0].keys()))
        w.writeheader()
        w.writerows(results)
    print(f"\nwrote {out_dir / 'results.json'} and {out_dir / 'results.csv'}")


if __name__ == "__main__":
    main()
