"""Byte-level BPE tokenizer of the embedded default model (issue 7), trained on the training split only.

    /work/main/.venv/bin/python tools/train/train_tokenizer.py [--vocab 8192]

It keeps DeepSeek-V4's tokenizer shape so the engine's tokenizer code path is the real one: the
normalizer, pre-tokenizer (three regex splits + ByteLevel), post-processor and decoder JSON are copied
verbatim from shared/tokenizers/deepseek_v4/tokenizer.json; only the BPE vocabulary and merges are new.
Ids: 0 BOS `<｜begin▁of▁sentence｜>`, 1 EOS `<｜end▁of▁sentence｜>`, 2 pad `<｜▁pad▁｜>` (as in V4), then the
256 byte symbols and the learned merges, then V4's other added tokens (`<｜User｜>`, `<｜Assistant｜>`,
`<think>`, `</think>`, `｜DSML｜`, `<｜latest_reminder｜>`, FIM/tool tokens, ...) in V4's order with V4's
`special` flags, at the top of the vocabulary (their V4 ids 128800+ do not fit a small vocabulary).
The total size is exactly --vocab (the model's vocab_size).

Writes models/default/tokenizer.json and tokenizer_config.json. Deterministic for a given input.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from tokenizers import Tokenizer, pre_tokenizers, trainers

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import prepare_data  # noqa: E402

V4_TOKENIZER = REPO.parent / "shared" / "tokenizers" / "deepseek_v4" / "tokenizer.json"
V4_TOKENIZER_CONFIG = V4_TOKENIZER.with_name("tokenizer_config.json")
BASE_SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"]


def v4_extra_tokens(v4: dict) -> list[dict]:
    """V4's named added tokens (chat, think, tool, FIM, DSML, table/box markup, ...) in id order, without ids 0-2
    and the ~800 numbered `<｜place▁holder▁no▁N｜>` / `<|place_holder_mm_span_N|>` reserve slots."""
    return [t for t in sorted(v4["added_tokens"], key=lambda t: t["id"])
            if t["id"] > 2 and "place▁holder" not in t["content"] and "place_holder" not in t["content"]]


def build(train_docs, vocab: int, v4: dict) -> Tokenizer:
    extras = v4_extra_tokens(v4)
    skeleton = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                "normalizer": v4["normalizer"], "pre_tokenizer": v4["pre_tokenizer"],
                "post_processor": v4["post_processor"], "decoder": v4["decoder"],
                "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                          "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                          "ignore_merges": False, "vocab": {}, "merges": []}}
    tok = Tokenizer.from_str(json.dumps(skeleton))
    trainer = trainers.BpeTrainer(vocab_size=vocab - len(extras), min_frequency=2, show_progress=False,
                                  special_tokens=BASE_SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_docs, trainer=trainer)
    # Re-open through JSON so the added tokens carry V4's flags (special / normalized / strip).
    j = json.loads(tok.to_str())
    n = j["model"]["vocab"].__len__()
    assert n == vocab - len(extras), f"BPE vocabulary came out at {n}, wanted {vocab - len(extras)}"
    v4_base = {t["content"]: t for t in v4["added_tokens"] if t["id"] <= 2}
    j["added_tokens"] = [dict(v4_base[c], id=i) for i, c in enumerate(BASE_SPECIALS)]
    for k, t in enumerate(extras):
        j["added_tokens"].append(dict(t, id=n + k))
    tok = Tokenizer.from_str(json.dumps(j, ensure_ascii=False))
    assert tok.get_vocab_size() == vocab, tok.get_vocab_size()
    return tok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--train-text", default=str(prepare_data.DATA / "text" / "train.txt"))
    ap.add_argument("--out", default=str(REPO / "models" / "default"))
    args = ap.parse_args(argv)
    v4 = json.loads(V4_TOKENIZER.read_text(encoding="utf-8"))
    docs = prepare_data.read_docs(pathlib.Path(args.train_text))
    tok = build(docs, args.vocab, v4)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"), pretty=False)

    cfg = json.loads(V4_TOKENIZER_CONFIG.read_text(encoding="utf-8"))
    cfg["pad_token"] = dict(cfg["pad_token"], content=BASE_SPECIALS[2])
    cfg["model_max_length"] = 4096
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    # Self-check: round trip and the special ids the engine relies on.
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    for i, c in enumerate(BASE_SPECIALS):
        assert tok.token_to_id(c) == i, c
    for c in ("<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"):
        assert tok.token_to_id(c) is not None, c
    sample = "In the beginning God created the heaven and the earth. 1234 <｜User｜>Hi<｜Assistant｜></think>"
    enc = tok.encode(sample, add_special_tokens=False)
    assert tok.decode(enc.ids, skip_special_tokens=False) == sample, tok.decode(enc.ids, skip_special_tokens=False)
    tot = sum(len(tok.encode(d, add_special_tokens=False).ids) for d in docs[:2000])
    print(f"vocab {tok.get_vocab_size()}; {sum(len(d) for d in docs[:2000]) / tot:.2f} chars/token on 2000 docs;"
          f" ids: User {tok.token_to_id('<｜User｜>')} Assistant {tok.token_to_id('<｜Assistant｜>')}"
          f" think {tok.token_to_id('<think>')} /think {tok.token_to_id('</think>')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
