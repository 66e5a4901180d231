"""Optional cross-check against Hugging Face transformers main's `deepseek_v41` (no PyPI release has it yet).

Needs `transformers.models.deepseek_v41` importable in the reference venv (README.md says how it was made
importable locally; nothing of it is committed). For each config with an `hf_bf16/` folder it

* builds `DeepseekV41ForCausalLM` from `hf_bf16/config.json`, loads the weights `hf_bf16/derive.json` describes strictly (so the
  file's names are exactly the module tree's), and checks that a BF16 `save_pretrained` of that model writes the
  same names and dtypes;
* runs it in FP32 (weights upcast, `use_cache=False`) on the committed prompts and compares the logits with the
  NeMo goldens `ref.*` and its Engram hash rows with `engram_hash.*`.

    TORCHDYNAMO_DISABLE=1 /work/refenv41/bin/python tests/reference/model_v41/check_hf_main.py [v41_tiny_a]
"""

from __future__ import annotations

import json
import pathlib
import sys
import tempfile

import torch
from safetensors import safe_open
from safetensors.torch import load_file

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from derive_checkpoint import save_materialized  # noqa: E402
OUT = HERE.parents[2] / "tests" / "data" / "model"
torch.set_num_threads(1)
_TORCH_TOPK = torch.Tensor.topk


def _stable_topk(self, k, dim=-1, largest=True, sorted=True):
    srt = torch.sort(self, dim=dim, descending=largest, stable=True)
    return torch.return_types.topk((srt.values.narrow(dim, 0, k), srt.indices.narrow(dim, 0, k)))


def check(name: str) -> dict:
    from transformers import PreTrainedTokenizerFast
    from transformers.models.deepseek_v41 import DeepseekV41ForCausalLM, DeepseekV41TextConfig

    root = OUT / name
    # hf_bf16/ is committed as a recipe over official_bf16 (derive.json): materialize it first.
    made = pathlib.Path(tempfile.mkdtemp(prefix="v41_hf_bf16_"))
    save_materialized(root / "hf_bf16", made)
    cfg_json = json.loads((made / "config.json").read_text())
    cfg_json = {k: v for k, v in cfg_json.items() if k not in ("architectures", "model_type", "dtype")}
    cfg = DeepseekV41TextConfig(**cfg_json)
    torch.manual_seed(0)
    model = DeepseekV41ForCausalLM(cfg).float().eval()
    sd = load_file(str(made / "model.safetensors"))
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    tok = PreTrainedTokenizerFast(tokenizer_file=str(made / "tokenizer.json"))
    model.model.bind_tokenizer(tok)

    # save_pretrained of the BF16 model: same names and dtypes as the committed file?
    bf = DeepseekV41ForCausalLM(cfg)
    bf.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    bf = bf.to(torch.bfloat16)
    for n, p in bf.named_parameters():
        if any(m in n for m in bf._keep_in_fp32_modules_strict):
            p.data = p.data.float()
    with tempfile.TemporaryDirectory() as d:
        bf.save_pretrained(d)
        with safe_open(str(pathlib.Path(d) / "model.safetensors"), "pt") as f:
            saved = {k: f.get_slice(k).get_dtype() for k in f.keys()}
    with safe_open(str(made / "model.safetensors"), "pt") as f:
        ours = {k: f.get_slice(k).get_dtype() for k in f.keys()}
    assert saved == ours, {k: (saved.get(k), ours.get(k)) for k in set(saved) | set(ours) if saved.get(k) != ours.get(k)}

    gold = load_file(str(root / "goldens.safetensors"))
    meta = json.loads((root / "goldens.json").read_text())
    worst, per, hashes_equal = 0.0, {}, True
    for L in (1, 7, 40, 300):
        ids = meta["prompts"][f"len{L}"]
        torch.Tensor.topk = _stable_topk  # ties -> lower index, as the goldens (make_goldens.py)
        try:
            with torch.no_grad():
                # The default forward (use_cache=True): its per-source cache layers replace the shared compressed
                # KV / index keys at every KV source. Without a cache, transformers main CONCATENATES the second
                # source's rows onto the first's (README.md), which is wrong with two or more KV sources.
                logits = model(torch.tensor([ids]), use_cache=True).logits[0].float()
                nocache = model(torch.tensor([ids]), use_cache=False).logits[0].float()
        finally:
            torch.Tensor.topk = _TORCH_TOPK
        ref = gold[f"ref.len{L}" if L != 300 else "ref.len300_tail"]
        logits = logits[-ref.shape[0]:]
        per[f"len{L}"] = float((logits - ref).abs().max())
        per[f"len{L}_use_cache_false"] = float((nocache[-ref.shape[0]:] - ref).abs().max())
        worst = max(worst, per[f"len{L}"])
        hashes_equal &= torch.equal(model.model.last_hash_ids[0], gold[f"engram_hash.len{L}"])
    res = {"hf_main_fp32_vs_nemo_fp32_max": worst, "per_prompt": per, "engram_hash_equal": bool(hashes_equal),
           "save_pretrained_names_dtypes_equal": True}
    print(name, res)
    return res


if __name__ == "__main__":
    for n in sys.argv[1:] or ["v41_tiny_a"]:
        check(n)
