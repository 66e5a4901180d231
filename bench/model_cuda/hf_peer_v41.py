#!/usr/bin/env python3
"""The V4.1 peer of decode_bench: transformers main's DeepseekV41ForCausalLM on the same GPU.

transformers 5.17 has no `deepseek_v41`; the model comes from a wheel built from transformers
main's source (docs/cuda_backend.md says how to rebuild it; never committed), installed with

    pip install --no-deps .deps/wheels/transformers_deepseek_v41_peer-*.whl

Builds the model of a synthetic V4.1 checkpoint's config.json (tools/gpu/make_synthetic_v41.py
--config-only: real V4.1-Flash widths, the first layers of the real schedule: 0 SWA, 1 SWA +
Engram, 2 Full ratio-2 KV / index source, 3 Reuse) with random weights, in BF16 on the GPU
(transformers has no FP8 / FP4 path: its weights are BF16, 4x our expert bytes, and the Engram
table sits on the GPU, not in host memory), and times, like decode_bench and hf_peer.py: a
decode step at each batch size after --context prompt tokens (generate with the KV cache:
(time of N new tokens - time of 1) / (N - 1)), and one prefill of --prefill tokens (one forward
of the text model, the head on the last row only). The Engram layers hash token ids through the
DeepSeek-V4 tokenizer's compressed vocabulary (python/deepinfer/data/deepseek_v4, read offline).
If the model does not fit the GPU, the first layers that fit are built (the config's layer lists
cut to them) and per-layer times are reported too. Prints a table and writes JSON (hf_peer.py's
fields plus layers / per-layer times).

    python bench/model_cuda/hf_peer_v41.py --config DIR/config.json [--batches 1,16] [--out F]
    python bench/model_cuda/hf_peer_v41.py --config DIR/config.json --tiny --device cpu  # check
"""

import argparse
import json
import os
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WHEEL_HINT = ("pip install --no-deps --no-index .deps/wheels/transformers_deepseek_v41_peer-*.whl "
              "(built from transformers main's deepseek_v41: docs/cuda_backend.md)")


def import_peer():
    try:
        import transformers_deepseek_v41_peer as peer
    except ImportError as e:
        raise SystemExit(f"the transformers V4.1 peer is not installed ({e}): {WHEEL_HINT}")
    return peer


def cut_layers(t: dict, n: int) -> dict:
    """The first n layers of the schedule, with every layer list cut to them (as
    make_synthetic_v41.py cuts the released config)."""
    t = dict(t)
    t["num_hidden_layers"] = n
    t["compress_ratios"] = t["compress_ratios"][:n]
    for k in ("kv_source_layer_ids", "index_source_layer_ids", "dspark_target_layer_ids"):
        t[k] = [i for i in t.get(k) or [] if i < n]
    if t.get("candidate_source_layer_id", -1) >= n:
        t["candidate_source_layer_id"] = -1
    keep = [k for k, i in enumerate(t.get("engram_layer_ids") or []) if i < n]
    t["engram_layer_ids"] = [t["engram_layer_ids"][k] for k in keep]
    t["engram_num_embeddings"] = [t["engram_num_embeddings"][k] for k in keep]
    return t


def tiny(t: dict) -> dict:
    """The same layer kinds at tiny widths (a CPU check in seconds). The vocabulary stays (the
    Engram map hashes the tokenizer's ids); the Engram tables follow the prime layout of a small
    bucket count."""
    t = dict(t)
    t.update(hidden_size=64, num_attention_heads=2, head_dim=128, qk_rope_head_dim=64,
             q_lora_rank=64, o_lora_rank=32, o_groups=2, moe_intermediate_size=64,
             n_routed_experts=8, num_experts_per_tok=2, index_n_heads=2, index_head_dim=64,
             index_topk=8, sliding_window=16, engram_head_dim=64, engram_n_heads=2,
             engram_vocab_size=1000)
    t["engram_num_embeddings"] = [0] * len(t.get("engram_layer_ids") or [])
    return t


def text_config(peer, t: dict):
    t = {k: v for k, v in t.items() if k not in ("model_type", "architectures")}
    return peer.DeepseekV41TextConfig(**t)


def engram_rows(peer, cfg) -> list:
    from transformers_deepseek_v41_peer.modeling_deepseek_v41 import EngramLayout
    lay = EngramLayout.from_config(cfg)
    return [] if lay is None else [sum(sum(p) for p in layer) for layer in lay.primes]


def param_bytes(t: dict, layers: int, elt: int = 2) -> tuple[int, list]:
    """Bytes of the model's parameters in BF16 (mHC in F32): the fixed part and each layer's."""
    D, H, d, V = t["hidden_size"], t["num_attention_heads"], t["head_dim"], t["vocab_size"]
    Q, G, R, I = t["q_lora_rank"], t["o_groups"], t["o_lora_rank"], t["moe_intermediate_size"]
    E, hc = t["n_routed_experts"], t["hc_mult"]
    IH, ID = t["index_n_heads"], t["index_head_dim"]
    fixed = 2 * V * D * elt + D * elt
    per = []
    for i in range(layers):
        n = D * Q + Q * H * d + D * d + (H * d // G) * G * R + G * R * D + 2 * D + Q + d + H
        n += 3 * D * I * (E + t["n_shared_experts"]) + E * D + 2 * E
        b = n * elt + 2 * (2 + hc) * hc * hc * D * 4
        if i in t["kv_source_layer_ids"]:
            b += (2 * d * D + d + ID * d + ID) * elt
        if i in t["index_source_layer_ids"]:
            b += (Q * IH * ID + D * IH) * elt
        if i in t["engram_layer_ids"]:
            rows = t["engram_num_embeddings"][t["engram_layer_ids"].index(i)]
            hd, cols = t["engram_head_dim"], (t["engram_max_ngram_size"] - 1) * t["engram_n_heads"]
            b += (rows * hd + rows * (hd // 32) + cols * hd * D * (hc + 1) + 2 * hc * D) * elt
        per.append(b)
    return fixed, per


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="the synthetic V4.1 checkpoint's config.json")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--new", type=int, default=8)
    ap.add_argument("--prefill", type=int, default=4096)
    ap.add_argument("--prefill-chunk", type=int, default=1024,
                    help="if the one-forward prefill runs out of memory: chunks of this many tokens")
    ap.add_argument("--layers", type=int, default=0,
                    help="build the first N layers (default: all of the config's that fit)")
    ap.add_argument("--reserve-gib", type=float, default=24.0,
                    help="GPU memory kept free for activations when choosing the layer count")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny widths, same layer kinds (CPU check)")
    ap.add_argument("--tokenizer", default=os.path.join(REPO, "python/deepinfer/data/deepseek_v4"))
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    peer = import_peer()
    import torch
    import transformers
    from transformers import AutoTokenizer

    print(f"transformers {transformers.__version__}, torch {torch.__version__}; peer "
          f"transformers_deepseek_v41_peer {peer.__version__} from {peer.SOURCE_REPO}@"
          f"{peer.SOURCE_COMMIT} ({peer.SOURCE_PATH})")
    with open(a.config) as f:
        c = json.load(f)
    t = c.get("text_config", c)
    t["num_nextn_predict_layers"] = 0  # no DSpark stages (the peer has no DSpark modules either)
    t["compress_ratios"] = t["compress_ratios"][:t["num_hidden_layers"]]
    if a.tiny:
        t = tiny(t)
        t["engram_num_embeddings"] = engram_rows(peer, text_config(peer, t))
    else:  # the peer hashes into its own prime layout: the table must have at least its rows
        need = engram_rows(peer, text_config(peer, t))
        if need != list(t.get("engram_num_embeddings") or []):
            print(f"note: Engram rows {t.get('engram_num_embeddings')} in the config, the peer's "
                  f"prime layout needs {need}: using the peer's")
            t["engram_num_embeddings"] = need
    cuda = a.device.startswith("cuda")
    L = a.layers or t["num_hidden_layers"]
    fixed, per = param_bytes(t, t["num_hidden_layers"])
    print(f"parameters in BF16: {fixed / 2**30:.2f} GiB embed+head, layers "
          f"{', '.join(f'{b / 2**30:.2f}' for b in per)} GiB; all {t['num_hidden_layers']}: "
          f"{(fixed + sum(per)) / 2**30:.1f} GiB")
    if cuda and not a.layers:
        free, total = torch.cuda.mem_get_info()
        budget = free - a.reserve_gib * 2**30
        while L > 1 and fixed + sum(per[:L]) > budget:
            L -= 1
        if L < t["num_hidden_layers"]:
            print(f"{t['num_hidden_layers']} layers need {(fixed + sum(per)) / 2**30:.1f} GiB of "
                  f"{free / 2**30:.1f} GiB free (keeping {a.reserve_gib:.0f} GiB for activations): "
                  f"building the first {L}")
    if L != t["num_hidden_layers"]:
        t = cut_layers(t, L)
    cfg = text_config(peer, t)
    kinds = []
    for i in range(L):
        r = cfg.compress_ratios[i]
        k = "SWA" if r == 0 else (f"Full ratio-{r} source" if i in cfg.kv_source_layer_ids
                                  else f"Reuse ratio-{r}")
        if i in cfg.index_source_layer_ids:
            k += " + indexer"
        if i in cfg.engram_layer_ids:
            k += " + Engram"
        kinds.append(k)
    print("layers: " + "; ".join(f"{i} {k}" for i, k in enumerate(kinds)))

    dev = torch.device(a.device)
    torch.manual_seed(0)
    t0 = time.time()
    torch.set_default_dtype(torch.bfloat16)  # built in BF16 directly: an FP32 copy would not fit
    with dev:
        model = peer.DeepseekV41ForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)
    with torch.no_grad():  # O(1) activations, like the synthetic checkpoint
        for name, p in model.named_parameters():
            if name.endswith("engram.embed.weight"):
                p.normal_(0.0, 1.0)  # FP8 rows near 1 in ours
            elif p.dim() >= 2 and name != "model.embed.weight" and not name.endswith("embed.scale"):
                p.normal_(0.0, p.shape[-1] ** -0.5)
    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    tb = time.time()
    model.model.bind_tokenizer(tok)  # the Engram hash state: compressed map, primes, multipliers
    bind_s = time.time() - tb

    def sync():
        if cuda:
            torch.cuda.synchronize()

    sync()
    res = {"load_s": time.time() - t0,
           "gpu_gib": torch.cuda.memory_allocated() / 2**30 if cuda else 0.0,
           "dtype": "bf16", "decode": [], "layers": L, "layer_kinds": kinds,
           "transformers": transformers.__version__, "torch": torch.__version__,
           "peer_source": f"{peer.SOURCE_REPO}@{peer.SOURCE_COMMIT}",
           "param_gib": (fixed + sum(per[:L])) / 2**30, "tokenizer_bind_s": bind_s,
           "device": torch.cuda.get_device_name() if cuda else "cpu"}
    print(f"HF model built in {res['load_s']:.1f} s (tokenizer map {bind_s:.1f} s), "
          f"{res['gpu_gib']:.1f} GiB on the GPU")
    # Token ids the tokenizer knows (the Engram map is indexed by them).
    V = min(cfg.vocab_size, len(tok))
    gen = torch.Generator(device=dev).manual_seed(0)

    def timed_generate(x, n):
        sync()
        t = time.time()
        out = model.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             use_cache=True, pad_token_id=0)
        sync()
        assert out.shape[1] == x.shape[1] + n, out.shape
        return time.time() - t

    print(f"{'batch':<7} {'step ms':>10} {'tok/s':>10} {'ms/layer':>10}")
    for B in [int(b) for b in a.batches.split(",")]:
        x = torch.randint(0, V, (B, a.context), device=dev, generator=gen)
        try:
            with torch.no_grad():
                timed_generate(x, 2)  # warm-up
                t1 = min(timed_generate(x, 1) for _ in range(2))
                tn = min(timed_generate(x, a.new) for _ in range(2))
            ms = (tn - t1) / (a.new - 1) * 1e3
            res["decode"].append({"batch": B, "step_ms": ms, "tokens_per_s": B / ms * 1e3,
                                  "ms_per_layer": ms / L})
            print(f"{B:<7} {ms:>10.2f} {B / ms * 1e3:>10.1f} {ms / L:>10.2f}")
        except Exception as e:  # noqa: BLE001 - report and go on (e.g. out of memory)
            res["decode"].append({"batch": B, "error": str(e)[:300]})
            print(f"{B:<7} error: {str(e)[:200]}")
            if cuda:
                torch.cuda.empty_cache()

    def prefill(x, chunk):
        from transformers import DynamicCache
        cache = DynamicCache(config=model.config)
        for s in range(0, x.shape[1], chunk):
            h = model.model(x[:, s:s + chunk], past_key_values=cache, use_cache=True)
        return model.lm_head(h.last_hidden_state[:, -1:])  # the last row's logits

    if a.prefill > 0:
        x = torch.randint(0, V, (1, a.prefill), device=dev, generator=gen)
        chunk = a.prefill
        for attempt in range(2):
            try:
                with torch.no_grad():
                    prefill(x[:, :128], 128)
                    sync()
                    t = time.time()
                    logits = prefill(x, chunk)
                    sync()
                    s = time.time() - t
                assert logits.shape == (1, 1, cfg.vocab_size) and torch.isfinite(logits).all()
                res["prefill"] = {"tokens": a.prefill, "seconds": s, "tokens_per_s": a.prefill / s,
                                  "chunk": chunk, "ms_per_layer": s * 1e3 / L}
                if cuda:
                    res["prefill"]["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
                print(f"prefill {a.prefill} tokens{'' if chunk == a.prefill else f' in chunks of {chunk}'}: "
                      f"{s:.2f} s = {a.prefill / s:.0f} tok/s ({s * 1e3 / L:.1f} ms per layer)")
                break
            except torch.OutOfMemoryError as e:
                print(f"prefill of {chunk} tokens in one forward: out of memory ({str(e)[:120]})")
                torch.cuda.empty_cache()
                if attempt == 0 and a.prefill_chunk < a.prefill:
                    chunk = a.prefill_chunk
                    continue
                res["prefill"] = {"tokens": a.prefill, "error": str(e)[:300]}
                break
            except Exception as e:  # noqa: BLE001
                res["prefill"] = {"tokens": a.prefill, "error": str(e)[:300]}
                print(f"prefill error: {str(e)[:200]}")
                break
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
