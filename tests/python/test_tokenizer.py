"""deepinfer.tokenizer (Python API) and the `deepinfer tokenize` / `detokenize` commands."""

import json
import threading

import pytest

from deepinfer.tokenizer import IncrementalDetokenizer, Tokenizer

CHAT = "<｜begin▁of▁sentence｜><｜User｜>Hello, 世界! 😀\n<｜Assistant｜><think>ok</think>done"


@pytest.fixture(scope="module")
def tok(v4_tokenizer_path):
    return Tokenizer.from_file(v4_tokenizer_path)


def test_encode_matches_hf(tok, v4_tokenizer_path):
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(str(v4_tokenizer_path))
    texts = [CHAT, "  leading spaces\r\n\ttabs 12345678 ٣٤٥ \u00a0\u3000end  ", "ｶﾀｶﾅ and カタカナ " * 20, ""]
    for text in texts:
        assert tok.encode(text) == hf.encode(text).ids
    hf.encode_special_tokens = True
    assert tok.encode(CHAT, allow_special=False) == hf.encode(CHAT).ids


def test_api_basics(tok, v4_tokenizer_path):
    assert tok.vocab_size == 129280
    assert tok.bos_id == 0 and tok.eos_id == 1
    assert tok.token_to_id("<｜User｜>") == 128803
    assert tok.token_to_id("no such token") is None
    assert tok.id_to_token(128804) == "<｜Assistant｜>"
    assert tok.id_to_token(10**6) is None
    # A model directory works as well as the file itself.
    assert Tokenizer.from_file(v4_tokenizer_path.parent).encode("abc") == tok.encode("abc")


def test_round_trip_and_skip_special(tok):
    ids = tok.encode(CHAT)
    assert tok.decode(ids) == CHAT
    assert tok.decode(ids, skip_special_tokens=True) == CHAT.replace("<｜begin▁of▁sentence｜>", "")


def test_bytes_input_repairs_invalid_utf8(tok):
    raw = b"caf\xc3\xa9 \xff\xfe x\xe4\xb8"
    assert tok.encode(raw) == tok.encode(raw.decode("utf-8", errors="replace"))
    assert tok.decode(tok.encode(raw)) == raw.decode("utf-8", errors="replace")
    with pytest.raises(TypeError):
        tok.encode(12)


def test_incremental_detokenizer(tok):
    text = "😀👨‍👩‍👧 中文 ﷽ end"
    ids = tok.encode(text)
    detok = IncrementalDetokenizer(tok)
    deltas = [detok.add(i) for i in ids]
    assert "".join(deltas) + detok.flush() == text
    assert any(d == "" for d in deltas)  # some ids hold only part of a character


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        Tokenizer.from_file(tmp_path / "missing.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": {"type": "Unigram"')
    with pytest.raises(ValueError, match="malformed JSON"):
        Tokenizer.from_file(bad)
    bad.write_text('{"model": {"type": "Unigram", "vocab": []}}')
    with pytest.raises(ValueError, match="model type 'Unigram'"):
        Tokenizer.from_file(bad)


def test_threads_encode_concurrently(tok):
    text = ("The quick brown fox. 敏捷的棕色狐狸。 " * 400)
    want = tok.encode(text)
    results = [None] * 4

    def work(k):
        results[k] = tok.encode(text)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == want for r in results)


def test_cli_tokenize_and_detokenize(cli, tok, v4_tokenizer_path):
    r = cli("tokenize", "--tokenizer", v4_tokenizer_path, input=CHAT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith("\n")
    ids = [int(x) for x in r.stdout.split()]
    assert ids == tok.encode(CHAT)

    r = cli("tokenize", "--tokenizer", v4_tokenizer_path.parent, "--json", "--no-special", input=CHAT)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == tok.encode(CHAT, allow_special=False)

    # Round trip through both commands, ids as a JSON array and as comma/space separated.
    r = cli("detokenize", "--tokenizer", v4_tokenizer_path, input=json.dumps(ids))
    assert r.returncode == 0, r.stderr
    assert r.stdout == CHAT
    r = cli("detokenize", "--tokenizer", v4_tokenizer_path, "--skip-special", input=", ".join(map(str, ids)))
    assert r.stdout == CHAT.replace("<｜begin▁of▁sentence｜>", "")


@pytest.mark.parametrize("bad", ["-1", "129280", "12x", "1.5"])
def test_cli_detokenize_bad_id(cli, v4_tokenizer_path, bad):
    r = cli("detokenize", "--tokenizer", v4_tokenizer_path, input=f"[1, {bad}, 2]")
    assert r.returncode == 1
    assert "deepinfer detokenize: error:" in r.stderr
    assert bad in r.stderr


def test_cli_missing_tokenizer(cli, tmp_path):
    r = cli("tokenize", "--tokenizer", tmp_path / "nope.json", input="x")
    assert r.returncode == 1
    assert "nope.json" in r.stderr
