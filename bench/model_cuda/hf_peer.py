#!/usr/bin/env python3
"""The peer of decode_bench: Hugging Face transformers' DeepseekV4ForCausalLM on the same GPU.

Builds the model of a synthetic checkpoint's config.json (tools/gpu/make_synthetic_v4.py: real
V4-Flash dimensions, the first few layers) in transformers with random weights, in BF16 on the
GPU (transformers has no FP4-expert path, so its weights are BF16: 4x the expert bytes of ours),
and times, like decode_bench: a decode step at each batch size after --context prompt tokens
(generate with the KV cache: (time of N new tokens - time of 1) / (N - 1)), and one prefill of
--prefill tokens (one forward, logits of the last row). Prints a table and writes JSON.

    python bench/model_cuda/hf_peer.py --config DIR/config.json [--batches 1,16] [--out F]
"""

import argparse
import json
import time


def hf_config(c: dict):
    from transformers.models.deepseek_v4 import DeepseekV4Config
    kinds = {0: "sliding_attention", 4: "compressed_sparse_attention",
             128: "heavily_compressed_attention"}
    L = c["n_layers"]
    factor = c["rope_head_dim"] / c["head_dim"]
    return DeepseekV4Config(
        vocab_size=c["vocab_size"], hidden_size=c["dim"], num_hidden_layers=L,
        num_attention_heads=c["n_heads"], num_key_value_heads=1, head_dim=c["head_dim"],
        partial_rotary_factor=factor, q_lora_rank=c["q_lora_rank"], o_groups=c["o_groups"],
        o_lora_rank=c["o_lora_rank"], moe_intermediate_size=c["moe_inter_dim"],
        n_routed_experts=c["n_routed_experts"], n_shared_experts=c["n_shared_experts"],
        num_experts_per_tok=c["n_activated_experts"], scoring_func="sqrtsoftplus",
        norm_topk_prob=True, routed_scaling_factor=c["route_scale"],
        swiglu_limit=c["swiglu_limit"], sliding_window=c["window_size"],
        layer_types=[kinds[r] for r in c["compress_ratios"][:L]],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
        mlp_layer_types=["hash_moe" if i < c["n_hash_layers"] else "moe" for i in range(L)],
        index_n_heads=c["index_n_heads"], index_head_dim=c["index_head_dim"],
        index_topk=c["index_topk"], hc_mult=c["hc_mult"], hc_sinkhorn_iters=20,
        rope_parameters={"rope_type": "yarn", "factor": 16.0,
                         "original_max_position_embeddings": 65536, "beta_fast": 32.0,
                         "beta_slow": 1.0},
        max_position_embeddings=1048576, num_nextn_predict_layers=0, tie_word_embeddings=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--new", type=int, default=8)
    ap.add_argument("--prefill", type=int, default=4096)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    import torch
    from transformers.models.deepseek_v4 import DeepseekV4ForCausalLM
    with open(a.config) as f:
        c = json.load(f)
    cfg = hf_config(c)
    torch.manual_seed(0)
    t0 = time.time()
    torch.set_default_dtype(torch.bfloat16)  # built in BF16 directly: an FP32 copy would not fit
    with torch.device("cuda"):
        model = DeepseekV4ForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)
    with torch.no_grad():  # O(1) activations, like the synthetic checkpoint
        for name, p in model.named_parameters():
            if p.dim() >= 2 and "embed" not in name:
                p.normal_(0.0, p.shape[-1] ** -0.5)
    torch.cuda.synchronize()
    res = {"load_s": time.time() - t0, "gpu_gib": torch.cuda.memory_allocated() / 2**30,
           "dtype": "bf16", "decode": []}
    print(f"HF model built in {res['load_s']:.1f} s, {res['gpu_gib']:.1f} GiB on the GPU")
    V = c["vocab_size"]
    gen = torch.Generator(device="cuda").manual_seed(0)

    def timed_generate(x, n):
        torch.cuda.synchronize()
        t = time.time()
        model.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=False, use_cache=True,
                       pad_token_id=0)
        torch.cuda.synchronize()
        return time.time() - t

    print(f"{'batch':<7} {'step ms':>10} {'tok/s':>10}")
    for B in [int(b) for b in a.batches.split(",")]:
        x = torch.randint(0, V, (B, a.context), device="cuda", generator=gen)
        try:
            with torch.no_grad():
                timed_generate(x, 2)  # warm-up
                t1 = min(timed_generate(x, 1) for _ in range(2))
                tn = min(timed_generate(x, a.new) for _ in range(2))
            ms = (tn - t1) / (a.new - 1) * 1e3
            res["decode"].append({"batch": B, "step_ms": ms, "tokens_per_s": B / ms * 1e3})
            print(f"{B:<7} {ms:>10.2f} {B / ms * 1e3:>10.1f}")
        except Exception as e:  # noqa: BLE001 - report and go on (e.g. out of memory)
            res["decode"].append({"batch": B, "error": str(e)[:300]})
            print(f"{B:<7} error: {str(e)[:200]}")
            torch.cuda.empty_cache()
    if a.prefill > 0:
        x = torch.randint(0, V, (1, a.prefill), device="cuda", generator=gen)
        try:
            with torch.no_grad():
                model(x[:, :128], use_cache=False, logits_to_keep=1)
                torch.cuda.synchronize()
                t = time.time()
                model(x, use_cache=True, logits_to_keep=1)
                torch.cuda.synchronize()
                s = time.time() - t
            res["prefill"] = {"tokens": a.prefill, "seconds": s, "tokens_per_s": a.prefill / s}
            print(f"prefill {a.prefill} tokens: {s:.2f} s = {a.prefill / s:.0f} tok/s")
        except Exception as e:  # noqa: BLE001
            res["prefill"] = {"tokens": a.prefill, "error": str(e)[:300]}
            print(f"prefill error: {str(e)[:200]}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
