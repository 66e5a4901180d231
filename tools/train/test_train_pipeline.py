"""Tests of the default-model training/export code (issue 7). They need torch + transformers 5.17, so they
run in the reference venv, standalone or under pytest:

    /work/refenv/bin/python tools/train/test_train_pipeline.py        # ~1-2 min on 2 busy CPU cores

1. The QAT fake-quantisers (v4_lib) equal the exporter's quantisers (tests/reference/model/make_goldens.py)
   bit for bit, including E2M1 round-half-to-even ties and ragged FP8 tiles.
2. Trunk + our MTP head reproduce tests/reference/model/official_ref.py (FP32 mode, spec §2 / §2.8) on a
   randomly re-initialised toy model written in the official layout: the MTP alignment and weights naming
   are the ones the engine will load.
3. export -> official files -> reload: every FP8/FP4 weight comes back as exactly the fake-quantised value
   QAT trained against; BF16 tensors as the BF16 rounding; and check_export accepts the directory.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import export_checkpoint as ex  # noqa: E402  (also puts tests/reference/model on sys.path)
import check_export  # noqa: E402
import v4_lib  # noqa: E402

mg, ref = ex.mg, ex.ref


def toy_model(seed=5):
    torch.manual_seed(seed)
    cfg, extras = v4_lib.hf_config("toy", vocab_size=512)
    cfg._experts_implementation = "eager"
    m = v4_lib.DefaultModel(cfg)
    v4_lib.init_weights(m, seed)
    g = torch.Generator().manual_seed(seed)
    sd = m.state_dict()
    new = mg.reinit({k: v for k, v in sd.items()}, cfg, g)  # O(1) activations, every parameter matters
    m.load_state_dict(new)
    return m.eval(), extras


def test_quantizers_match_exporter():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(200, 160, generator=g) * 0.05
    w[0, :8] = 0.0  # an all-zero stretch (amax floor) inside a tile
    w[199, 150:] = 3.0  # a ragged last tile (200 x 160 is not a multiple of the block)
    for blk in (32, 128):
        q, s = mg.quant_fp8(w, blk)
        sf = ref.e8m0_to_float(s).repeat_interleave(blk, 0)[:200].repeat_interleave(blk, 1)[:, :160]
        assert torch.equal(q.float() * sf, v4_lib.fp8_block_fake(w, blk)), f"FP8 {blk}"
    # FP4 with exact E2M1 midpoints: a block whose amax is 6 has scale 1, so the values are the ties.
    x = torch.randn(64, 128, generator=g)
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0,
                         -6.0])
    x[0, :16] = ties
    x[0, 16:32] = 0.0
    x[0, 31] = 6.0
    p, s = mg.quant_fp4(x)
    deq = ref.unpack_fp4(p) * ref.e8m0_to_float(s).repeat_interleave(32, 1)
    ours = v4_lib.fp4_block_fake(x)
    assert torch.equal(deq, ours)
    assert ours[0, :8].tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0], ours[0, :8].tolist()


def test_trunk_and_mtp_match_official_ref():
    m, _ = toy_model()
    ow, _ = ex.official_fp32(m)
    ids = torch.randint(3, 512, (1, 41), generator=torch.Generator().manual_seed(1))
    with tempfile.TemporaryDirectory() as td:
        mg.write_dir(pathlib.Path(td), ow, mg.official_config(m.cfg, 1, False))
        w, c = ref.load_checkpoint(td)
        with torch.no_grad():
            logits, mtp = m(ids)
        rl, rm = ref.forward(w, c, ids[0, :40].tolist(), "fp32", mtp=True)
    d_main = (logits[0] - rl).abs().max().item()
    d_mtp = (mtp[0, :39] - rm).abs().max().item()
    scale = rl.abs().max().item()
    print(f"trunk vs official_ref {d_main:.2e}, MTP vs official_ref {d_mtp:.2e} (logits up to {scale:.1f})")
    assert scale > 1.0
    assert d_main < 1e-4 and d_mtp < 1e-4, (d_main, d_mtp)


def test_export_roundtrip_is_the_qat_model():
    m, extras = toy_model()
    ck = {"block": extras["block"], "seq_len": 64, "metrics": {}}
    with tempfile.TemporaryDirectory() as td:
        out = pathlib.Path(td) / "export"
        ex.export_official(m, ck, out, 1.0, ex.REPO / "models" / "default")
        assert not check_export.check(out, 1.0)
        assert len(list(out.glob("model-*.safetensors"))) > 1  # 1 MB shards force several files
        _, inv = ex.official_fp32(m)
        back = ex.reload_official(out, m, inv)
    a, b = dict(m.named_parameters()), dict(back.named_parameters())
    checked = 0
    for mod, name, kind in v4_lib.quantized_params(m):
        full = [k for k, v in a.items() if v is getattr(mod, name)]
        assert len(full) == 1
        want = v4_lib.fp8_block_fake(a[full[0]], extras["block"]) if kind == "fp8" else \
            v4_lib.fp4_block_fake(a[full[0]])
        assert torch.equal(b[full[0]].detach(), want.detach()), full[0]
        checked += 1
    emb = "trunk.model.embed_tokens.weight"
    assert torch.equal(b[emb], a[emb].detach().to(torch.bfloat16).float())
    hc = "trunk.model.layers.0.attn_hc.fn"
    assert torch.equal(b[hc], a[hc].detach())  # mHC stays F32
    print(f"export round trip: {checked} quantised weights equal the QAT fake-quant values")


if __name__ == "__main__":
    for name, fn in list(globals().items()):
        if name.startswith("test_"):
            fn()
            print("ok", name)
