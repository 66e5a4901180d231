"""Ceilings for bench_vs_hf.py: the work a DeepSeek-V4 forward must do (from config.json) and
the machine's peaks (measured in the same run), so each figure is printed next to its floor.

Work model (multiply-accumulates, MACs; batch 1; the minimum any engine must compute, counting
only what each token really uses). Symbols from config.json: D hidden_size, H heads, d head_dim,
ql q_lora_rank, G o_groups, R o_lora_rank, E n_routed_experts, k num_experts_per_tok (hash
layers too: tid2eid is [V, k]), S n_shared_experts, I moe_intermediate_size, n hc_mult, V
vocab_size, W sliding_window, Hi index_n_heads, di index_head_dim, topk index_topk, m the layer's
compress rate; cw = 2d if m == 4 (overlapping CSA compressor) else d, cwi = 2 di.

  Per token at position p (0-based), per layer:
    attention linears   D·ql + ql·H·d + D·d + H·d·R (wo_a, grouped) + G·R·D (wo_b)
    compressor (CSA/HCA) 2·D·cw (wkv, wgate)
    indexer (CSA)       ql·Hi·di (wq_b) + D·Hi (weights_proj) + 2·D·cwi (its compressor)
    mHC (2 sites)       2·[(2+n)n·nD (fn dots) + nD (collapse) + n(n+1)·D (post mix)]
    MoE                 D·E (router) + (k + S)·3·D·I (w1, w3, w2 of the experts the token uses)
    attention core      2·H·d·keys(p): scores + values over the keys the query reads,
                        keys(p) = min(W, p+1) + {0 SWA; floor((p+1)/m) HCA; min(topk, floor((p+1)/4)) CSA}
    indexer dots (CSA)  Hi·(di+1)·floor((p+1)/4): q·k per head per visible index key, + ω·ReLU sum
    compressor pooling  (2·d per token for m = 4: 2m slots of d per row, a row per m tokens; d for
                        m > 4), likewise 2·di for the indexer's compressor
  Head (once per logits row: the last prompt token, every decode token):
    n·nD (hc_head fn) + nD (collapse) + D·V (lm_head)
  RMSNorms, RoPE, softmaxes, Sinkhorn, SwiGLU: elementwise, not counted (a floor).

  prefill MACs = Σ_{p<P} token(p) + head;   decode MACs at p = token(p) + head.

Decode also must read every weight a step uses once: all dense weights (attention, compressor,
indexer, router, shared expert, mHC, norms, the whole lm_head) + k routed experts per MoE layer +
one embedding row, plus the FP32 cache rows it attends to. decode floor = max(bytes / read
bandwidth at that working-set size, MACs / FMA peak).
"""

import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def _layer_kind(cfg, i):
    return cfg["layer_types"][i]


def _rate(cfg, kind):
    return 0 if kind == "sliding_attention" else cfg["compress_rates"][kind]


def work_model(cfg):
    """Static per-token quantities of a config (MACs and parameter counts by part)."""
    D, H, d = cfg["hidden_size"], cfg["num_attention_heads"], cfg["head_dim"]
    ql, G, R = cfg["q_lora_rank"], cfg["o_groups"], cfg["o_lora_rank"]
    E, k, S = cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg.get("n_shared_experts", 0)
    I, n, V = cfg["moe_intermediate_size"], cfg["hc_mult"], cfg["vocab_size"]
    Hi, di = cfg["index_n_heads"], cfg["index_head_dim"]
    layers = []
    for i in range(cfg["num_hidden_layers"]):
        kind = _layer_kind(cfg, i)
        m = _rate(cfg, kind)
        attn = D * ql + ql * H * d + D * d + H * d * R + G * R * D
        comp = idx = pool = 0
        if kind != "sliding_attention":
            cw = 2 * d if m == 4 else d
            comp = 2 * D * cw
            pool = 2 * d if m == 4 else d
        if kind == "compressed_sparse_attention":
            idx = ql * Hi * di + D * Hi + 2 * D * 2 * di
            pool += 2 * di
        mhc = 2 * ((2 + n) * n * n * D + n * D + n * (n + 1) * D)
        router = D * E
        experts = (k + S) * 3 * D * I
        # parameters a decode step reads (router + shared + k routed experts; all the rest)
        params_dense = attn + comp + idx + 2 * (2 + n) * n * n * D + router + S * 3 * D * I
        layers.append(dict(kind=kind, m=m, linear=attn + comp + idx + router + experts, mhc=mhc,
                           pool=pool, params_dense=params_dense, params_routed=k * 3 * D * I))
    head = n * n * D + n * D + D * V
    return dict(layers=layers, head=head, head_params=n * n * D + D * V, D=D, H=H, d=d, W=cfg["sliding_window"],
                Hi=Hi, di=di, topk=cfg["index_topk"])


def keys_at(wm, layer, p):
    """Keys query p reads in this layer: window + visible/selected compressed rows."""
    win = min(wm["W"], p + 1)
    if layer["kind"] == "sliding_attention":
        return win, 0
    vis = (p + 1) // layer["m"]
    if layer["kind"] == "heavily_compressed_attention":
        return win + vis, 0
    return win + min(wm["topk"], vis), vis  # CSA: top-k of the visible index keys


def token_macs(wm, p):
    """MACs of one token at position p, without the head; also the attention-core share."""
    total = core = 0
    for L in wm["layers"]:
        keys, vis = keys_at(wm, L, p)
        c = 2 * wm["H"] * wm["d"] * keys + wm["Hi"] * (wm["di"] + 1) * vis
        core += c
        total += L["linear"] + L["mhc"] + L["pool"] + c
    return total, core


def prefill_macs(cfg, P):
    wm = work_model(cfg)
    tot = core = 0
    for p in range(P):
        t, c = token_macs(wm, p)
        tot += t
        core += c
    return dict(total=tot + wm["head"], attention_core=core, head=wm["head"])


def decode_cost(cfg, p, linear_bytes=4):
    """MACs and bytes of one decode step at position p (FP32 caches; mHC/norms FP32)."""
    wm = work_model(cfg)
    t, _ = token_macs(wm, p)
    params = sum(L["params_dense"] + L["params_routed"] for L in wm["layers"]) + wm["head_params"]
    nbytes = linear_bytes * params + 4 * wm["D"]  # + the embedding row
    for L in wm["layers"]:  # cache rows read: keys (= values) and the indexer's keys
        keys, vis = keys_at(wm, L, p)
        nbytes += 4 * (keys * wm["d"] + vis * wm["di"])
    return dict(macs=t + wm["head"], bytes=nbytes)


# ------------------------------------------------------------------------------------------------
# Peaks, measured now

def probe_machine(threads, sizes, workdir):
    """FMA peak and read bandwidth (roofline_probe.cc, compiled once into workdir) and the
    achievable sgemm rate (numpy/OpenBLAS and torch, 2048^3, in a child with `threads`)."""
    src = HERE / "roofline_probe.cc"
    exe = pathlib.Path(workdir) / "roofline_probe"
    exe.parent.mkdir(parents=True, exist_ok=True)
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["c++", "-O2", "-mavx2", "-mfma", "-pthread", "-o", str(exe), str(src)],
                       check=True)
    r = subprocess.run([str(exe), str(threads)] + [str(int(s)) for s in sizes],
                       capture_output=True, text=True, check=True)
    peak = json.loads(r.stdout)
    code = (
        "import json, sys, time, numpy as np, torch\n"
        f"torch.set_num_threads({threads})\n"
        "n = 2048; a = np.random.rand(n, n).astype(np.float32); b = np.random.rand(n, n).astype(np.float32)\n"
        "ta, tb = torch.from_numpy(a), torch.from_numpy(b)\n"
        "def best(f):\n"
        "    f(); ts = []\n"
        "    for _ in range(5):\n"
        "        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)\n"
        "    return n ** 3 / min(ts) / 1e9\n"
        "json.dump(dict(numpy=best(lambda: a @ b), torch=best(lambda: torch.mm(ta, tb))), sys.stdout)\n")
    env = {"OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"}
    s = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    gemm = json.loads(s.stdout)
    return dict(threads=threads,
                fma_peak_gmacs=peak["fma_gmacs_per_core_cpu"] * threads,
                fma_wall_gmacs=peak["fma_gmacs_wall"],
                read_gb_s=[x["gb_s"] for x in peak["read"]],  # in the order of `sizes`
                sgemm_numpy_gmacs=gemm["numpy"], sgemm_torch_gmacs=gemm["torch"])
