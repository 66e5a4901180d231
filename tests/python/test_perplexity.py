"""`deepinfer perplexity` on the committed tiny checkpoints (tests/data/model/, random weights, vocab
256, made by tests/reference/model/make_goldens.py). The token files are generated here: a
deterministic pseudo-random stream and a greedy continuation. What is checked: determinism, finite
values in sane ranges, that --max-windows and --window set the amount of work, top-1 accuracy
against `deepinfer generate`, opt == ref backend, the MTP metrics (present with an MTP block,
skipped with a note without one), the error messages, and on models/default (when present) the
--text path and the uniform bound (a trained model's perplexity far below the vocabulary size)."""

import json
import math

import numpy as np
import pytest

QUANT = "tests/data/model/v4_tiny_a/official_quant"  # official layout, FP8/FP4, has an MTP block
HF = "tests/data/model/v4_tiny_a/hf_fp32"  # HF names: no MTP tensors (a derive.json recipe: materialized)
VOCAB = 256


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    """200 pseudo-random ids in [3, 256) as uint16 (the training data's format)."""
    path = tmp_path_factory.mktemp("ppl") / "val.bin"
    np.random.default_rng(7).integers(3, VOCAB, size=200).astype("<u2").tofile(path)
    return path


def ppl(cli, repo_dir, model, tokens, *extra):
    r = cli("perplexity", "--model", repo_dir / model, "--tokens", tokens, "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_windows_follow_the_training_layout(cli, repo_dir, tokens):
    # 200 tokens, window 40: chunks of 41 tokens, (200 - 1) // 41 = 4 windows of 39 scored rows.
    out, _ = ppl(cli, repo_dir, QUANT, tokens, "--window", 40)
    assert out["windows"] == 4
    assert out["scored_tokens"] == 4 * 39
    assert out["input_tokens"] == 200
    assert out["semantics"] == "official"
    out1, _ = ppl(cli, repo_dir, QUANT, tokens, "--window", 40, "--max-windows", 1)
    assert out1["windows"] == 1 and out1["scored_tokens"] == 39
    # Window 0 is the same computation in both runs, the others are not: the totals must differ.
    assert out1["nll"] != out["nll"]


def test_deterministic_finite_and_sane(cli, repo_dir, tokens):
    a, _ = ppl(cli, repo_dir, QUANT, tokens, "--window", 40, "--max-windows", 2)
    b, _ = ppl(cli, repo_dir, QUANT, tokens, "--window", 40, "--max-windows", 2)
    for key in ("nll", "perplexity", "top1_accuracy", "mtp_nll", "mtp_top1_accuracy",
                "mtp_greedy_acceptance"):
        assert a[key] == b[key], key
        assert math.isfinite(a[key]), key
    assert math.isclose(a["perplexity"], math.exp(a["nll"]), rel_tol=1e-9)
    # Random weights on random tokens: no better than guessing (they are confidently wrong, so
    # above the uniform bound); the trained model's bound is in test_text_with_a_tokenizer.
    assert a["perplexity"] > 0.5 * VOCAB and a["mtp_perplexity"] > 0.5 * VOCAB
    for key in ("top1_accuracy", "mtp_top1_accuracy", "mtp_greedy_acceptance"):
        assert 0.0 <= a[key] <= 1.0, key


def first_greedy(cli, repo_dir, prompt):
    r = cli("generate", "--model", repo_dir / QUANT, "--prompt-ids", ",".join(map(str, prompt)),
            "--max-tokens", 1, "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["token_ids"][0]


def test_top1_matches_greedy_generate(cli, repo_dir, tmp_path):
    """Top-1 accuracy recomputed through `deepinfer generate`: the stream is a prompt plus the
    model's own greedy continuation, so every position from the prompt's last token on is a hit;
    the two positions inside the prompt are checked with one-token generations."""
    prompt = [171, 129, 100]
    r = cli("generate", "--model", repo_dir / QUANT, "--prompt-ids", "171,129,100",
            "--max-tokens", 11, "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    w = prompt + json.loads(r.stdout)["token_ids"]  # 14 tokens: one window of 12 fed + 1
    path = tmp_path / "greedy.bin"
    np.asarray(w, dtype="<u2").tofile(path)
    out, _ = ppl(cli, repo_dir, QUANT, path, "--window", 12)
    assert out["windows"] == 1 and out["scored_tokens"] == 11
    hits = 9 + sum(first_greedy(cli, repo_dir, w[:p + 1]) == w[p + 1] for p in range(2))
    assert out["top1_accuracy"] == pytest.approx(hits / 11)


def test_ref_backend_agrees(cli, repo_dir, tokens):
    a, _ = ppl(cli, repo_dir, QUANT, tokens, "--window", 24, "--max-windows", 1)
    b, _ = ppl(cli, repo_dir, QUANT, tokens, "--window", 24, "--max-windows", 1, "--backend", "ref")
    assert math.isclose(a["nll"], b["nll"], rel_tol=1e-4)
    assert math.isclose(a["mtp_nll"], b["mtp_nll"], rel_tol=1e-4)


def test_model_without_mtp_skips_mtp_metrics(cli, repo_dir, fixture_checkpoint, tokens):
    out, err = ppl(cli, repo_dir, fixture_checkpoint(HF), tokens, "--window", 40, "--max-windows", 1)
    assert out["semantics"] == "hf"
    assert out["mtp"] is None and "mtp_top1_accuracy" not in out
    assert "no MTP block" in err and "skipped" in err
    assert math.isfinite(out["nll"]) and out["perplexity"] > 0.5 * VOCAB


def test_text_output(cli, repo_dir, tokens):
    r = cli("perplexity", "--model", repo_dir / QUANT, "--tokens", tokens, "--window", 40,
            "--max-windows", 1)
    assert r.returncode == 0, r.stderr
    assert "perplexity" in r.stdout and "greedy draft acceptance" in r.stdout


def expect_error(r, code, *words):
    assert r.returncode == code, (r.stdout, r.stderr)
    assert "deepinfer perplexity: error:" in r.stderr or code == 2
    for w in words:
        assert w in r.stderr, r.stderr


def test_errors(cli, repo_dir, tokens, tmp_path):
    model = repo_dir / QUANT
    expect_error(cli("perplexity", "--model", model, "--tokens", tmp_path / "missing.bin"), 1,
                 "missing.bin", "does not exist")
    expect_error(cli("perplexity", "--model", model, "--text", tmp_path / "missing.txt"), 1,
                 "missing.txt", "does not exist")
    expect_error(cli("perplexity", "--model", model), 2, "exactly one of --text")
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x01\x00\x02")
    expect_error(cli("perplexity", "--model", model, "--tokens", odd), 1, "odd.bin", "uint16")
    expect_error(cli("perplexity", "--model", model, "--tokens", tokens), 1,  # 200 < 513 + 2
                 "200 tokens", "--window")
    big = tmp_path / "big.bin"
    np.array([5, 300, 7], dtype="<u2").tofile(big)
    expect_error(cli("perplexity", "--model", model, "--tokens", big, "--window", 3), 1,
                 "id 300", "vocabulary")
    expect_error(cli("perplexity", "--model", model, "--tokens", tokens, "--window", 2), 2,
                 "--window")
    # --text needs the model's tokenizer.json; the tiny checkpoints have none.
    text = tmp_path / "val.txt"
    text.write_text("In the beginning\n\x1e\nAnd the earth\n", encoding="utf-8")
    expect_error(cli("perplexity", "--model", model, "--text", text), 1, "tokenizer.json",
                 "--tokens")
    expect_error(cli("perplexity", "--model", tmp_path / "nomodel", "--tokens", tokens), 1,
                 "nomodel")


def test_text_with_a_tokenizer(cli, repo_dir, tmp_path):
    """--text on the default model: documents split like prepare_data.py (BOS ids EOS each);
    an empty text is an error. Skipped where models/default is absent."""
    model = repo_dir / "models/default"
    if not (model / "tokenizer.json").exists():
        pytest.skip("models/default not present")
    text = tmp_path / "val.txt"
    docs = ["In the beginning God created the heaven and the earth.",
            "Apple, n. The fleshy pome or fruit of a rosaceous tree."]
    text.write_text("\n\x1e\n".join(docs) + "\n", encoding="utf-8")
    r = cli("perplexity", "--model", model, "--text", text, "--window", 8, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["documents"] == 2
    assert out["windows"] == (out["input_tokens"] - 1) // 9
    # The trained model must beat the uniform bound by far on its own kind of text.
    assert out["perplexity"] < 8192 / 10
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\x1e\n  \n", encoding="utf-8")
    expect_error(cli("perplexity", "--model", model, "--text", empty), 1, "holds no text")
