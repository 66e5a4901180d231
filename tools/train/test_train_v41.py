"""Checks of the V4.1 training pipeline (issue 20), on the toy size with random weights, CPU:

    TORCHDYNAMO_DISABLE=1 /work/refenv41/bin/python tools/train/test_train_v41.py

1. QAT = export: every weight the export stores FP8 / FP4 (`v41_lib.quantized_params`) is, fake-quantised in
   NeMo's layout, bit for bit the dequantised exported tensor under its official name(s) (so what the last part of
   training sees is exactly what ships).
2. The export is the model NeMo trained: official_ref41 (FP32 mode, written from the spec) on the dequantised
   export reproduces NeMo's forward with the fake-quantised weights (logits), and its DSpark drafter reproduces
   NeMo's draft logits and confidences, to 1e-4 (their documented agreement is ~2e-5).
Not run by CI (it needs torch and nemo-automodel, which the test environment does not install); run it after any
change to v41_lib.py or train_v41_model.py.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import v41_lib  # noqa: E402
from v41_lib import ref  # noqa: E402

TOKENIZER = v41_lib.REPO / "models" / "default" / "tokenizer.json"


def dequant(tensors: dict, text: dict):
    """official_ref41's view of an exported checkpoint: FP32 weights and its config."""
    import json
    with tempfile.TemporaryDirectory() as d:
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(pathlib.Path(d) / "model.safetensors"))
        (pathlib.Path(d) / "config.json").write_text(json.dumps(v41_lib.composite_config(text, "test", 64)))
        return ref.load_checkpoint(d)


def main() -> int:
    torch.manual_seed(0)
    text = v41_lib.text_config("toy", TOKENIZER)
    trunk, draft, ad, dad = v41_lib.build(text, TOKENIZER, num_anchors=4, bias_update=1e-3, device="cpu")
    v41_lib.init_weights(trunk, draft, 7)
    with torch.no_grad():  # random, larger than the init so that scales and codes vary
        for m in (trunk, draft):
            for p in m.parameters():
                p.add_(torch.randn_like(p) * 0.05)
    draft.initialize_embeddings_and_head(embed_tokens=trunk.model.embed_tokens, lm_head=trunk.lm_head)

    # 1. fake-quantised NeMo weights == dequantised export
    latent = v41_lib.official_tensors(trunk, draft, ad, dad)
    exported, cfg = dequant(v41_lib.export_tensors(latent), text)
    n = v41_lib.enable_qat(trunk, draft)
    # state_dict() of a parametrised module holds the latent weights: bake the fake-quantised values in
    import torch.nn.utils.parametrize as P
    for m in (trunk, draft):
        for owner, leaf, _ in list(v41_lib.quantized_params(m)):
            P.remove_parametrizations(owner, leaf, leave_parametrized=True)
    fake = v41_lib.official_tensors(trunk, draft, ad, dad)
    quantised = [k for k in exported if k.endswith(".weight") and (k[:-6] + "scale") in
                 v41_lib.export_tensors(latent)]
    bad = [k for k in quantised if not torch.equal(fake[k].float(), exported[k].float())]
    print(f"1. {n} parametrised weights; {len(quantised)} exported quantised tensors; bit-equal to the "
          f"fake-quantised weights: {len(quantised) - len(bad)}/{len(quantised)}")
    assert n > 0 and quantised and not bad, bad[:5]

    # 2. The export read back into NeMo through its adapters (so the names and layouts round-trip) and run by
    #    both: the non-quantised tensors are stored BF16, so the comparison runs on the exported values, with
    #    NeMo's top-k made stable (ties -> lower index) as official_ref41's is (tests/reference/model_v41).
    mg = v41_lib._goldens41()
    main_sd = {k: v.clone() for k, v in exported.items() if not k.startswith("mtp.")}
    trunk.load_state_dict(ad.from_hf(main_sd), strict=True)
    missing, unexpected = draft.load_state_dict(
        dad.from_hf({k: v.clone() for k, v in exported.items() if k.startswith("mtp.")}), strict=False)
    assert not unexpected and set(missing) <= {"embed_tokens.weight", "lm_head.weight"}, (missing, unexpected)
    draft.initialize_embeddings_and_head(embed_tokens=trunk.model.embed_tokens, lm_head=trunk.lm_head)
    torch.Tensor.topk = mg._stable_topk
    tmap = ref.token_map(TOKENIZER)
    ids = torch.randint(3, 8000, (48,), generator=torch.Generator().manual_seed(3))
    trunk.eval()
    feats: dict = {}
    v41_lib.capture_hooks(trunk, cfg["dspark_target_layer_ids"], feats)
    with torch.no_grad():
        nemo = trunk(ids[None]).logits[0].float()
        mine = ref.forward(exported, cfg, ids.tolist(), "fp32", tmap)
    d = (nemo - mine["logits"]).abs().max().item()
    print(f"2. the export in official_ref41 vs in NeMo: logits max |d| {d:.2e}")
    assert d < 1e-4, d
    f = v41_lib.features(feats, cfg["dspark_target_layer_ids"])[0]
    anchor, k = 20, cfg["dspark_block_size"]
    with torch.no_grad():
        keep = torch.ones(1, 1, dtype=torch.bool)
        toks = torch.full((1, k), cfg["dspark_noise_token_id"], dtype=torch.long)
        toks[0, 0] = ids[anchor]
        anchors = torch.tensor([[anchor]])
        out = super(type(draft), draft).forward(
            draft.embed_tokens(toks).float(), f[None].float(),
            position_ids=draft.build_position_ids(anchors, ids.numel()),
            attention_mask=draft.build_attention_mask(anchors, keep, ids.numel(), torch.float32),
            previous_token_ids=ids[None, anchor:anchor + k], enable_confidence_head=True)
        nl = draft.compute_logits(out.normalized_hidden_states)[0] + out.transition_logits[0].float()
        rd = ref.dspark(exported, cfg, ids.tolist(), mine["features"], anchor, "fp32")
    dl = (nl - rd["logits"]).abs().max().item()
    dc = (out.confidence_pred[0].float() - rd["confidence"]).abs().max().item()
    print(f"   DSpark draft logits max |d| {dl:.2e}, confidences {dc:.2e}")
    assert dl < 1e-4 and dc < 1e-4, (dl, dc)
    torch.Tensor.topk = mg._TORCH_TOPK
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
