"""`deepinfer chat` driven through a pipe: one user turn per line, replies streamed, history kept
in the DeepSeek-V4 chat format, errors for a model without a tokenizer."""

DEFAULT_MODEL = "models/v4-small"


def test_two_turns_are_answered(cli, repo_dir):
    r = cli("chat", "--model", repo_dir / DEFAULT_MODEL, "--max-tokens", 8, "--seed", 1,
            input="Who made the sea?\n/reset\nWhat is light?\n")
    assert r.returncode == 0, r.stderr
    replies = [line for line in r.stdout.split("\n") if line.strip()]
    assert len(replies) >= 2, r.stdout  # one streamed reply per user turn (may wrap lines)


def test_same_seed_same_conversation(cli, repo_dir):
    run = lambda: cli("chat", "--model", repo_dir / DEFAULT_MODEL, "--max-tokens", 10,
                      "--seed", 5, input="Tell me of the river.\nAnd the hills?\n")
    a, b = run(), run()
    assert a.returncode == 0 and a.stdout == b.stdout


def test_model_without_tokenizer_is_an_error(cli, fixture_checkpoint):
    r = cli("chat", "--model", fixture_checkpoint("tests/data/model/v4_tiny_a/hf_fp32"), input="hi\n")
    assert r.returncode == 1
    assert "deepinfer chat: error:" in r.stderr and "tokenizer.json" in r.stderr
