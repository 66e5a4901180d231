"""`deepinfer generate` as a user runs it, on the committed tiny checkpoints (tests/data/model/,
made by tests/reference/model/make_goldens.py; their hf_fp32 folders are derive.json recipes, materialized
by the fixture_checkpoint fixture): JSON output, agreement with the greedy goldens,
determinism, EOS handling and error messages."""

import json
import shutil

import pytest

MODEL_A = "tests/data/model/v4_tiny_a/hf_fp32"
MODEL_B = "tests/data/model/v4_tiny_b/hf_fp32"


@pytest.fixture(scope="module")
def model_a(fixture_checkpoint):
    return fixture_checkpoint(MODEL_A)


@pytest.fixture(scope="module")
def model_b(fixture_checkpoint):
    return fixture_checkpoint(MODEL_B)


def generate(cli, repo_dir, model, ids, *extra):
    # model: repository-relative, or absolute (a materialized fixture; repo_dir / an absolute path is that path)
    return cli("generate", "--model", repo_dir / model, "--prompt-ids", ",".join(map(str, ids)),
               *extra)


def goldens(repo_dir, config):
    return json.loads((repo_dir / "tests/data/model" / config / "goldens.json").read_text())


@pytest.mark.parametrize("config,model", [("v4_tiny_a", MODEL_A), ("v4_tiny_b", MODEL_B)])
@pytest.mark.parametrize("prompt", ["len1", "len7", "len40"])
def test_greedy_matches_goldens(cli, repo_dir, fixture_checkpoint, config, model, prompt):
    model = fixture_checkpoint(model)
    g = goldens(repo_dir, config)
    want = g["continuations"][f"hf_fp32.{prompt}"]["tokens"]
    r = generate(cli, repo_dir, model, g["prompts"][prompt], "--max-tokens", len(want),
                 "--temperature", "0", "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["token_ids"] == want
    assert out["finish_reason"] == "length"
    assert "text" not in out  # the tiny checkpoints carry no tokenizer.json


def test_deterministic_and_backends_agree(cli, repo_dir, model_a):
    ids = [171, 129, 100, 223, 76, 53, 97]
    runs = [generate(cli, repo_dir, model_a, ids, "--max-tokens", 8, "--json", *extra)
            for extra in ([], [], ["--backend", "ref"])]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    outs = [json.loads(r.stdout)["token_ids"] for r in runs]
    assert outs[0] == outs[1] == outs[2]
    assert len(outs[0]) == 8


def test_stops_at_eos_unless_ignored(cli, repo_dir, model_b):
    # Found by search: greedy from prompt [3] on v4_tiny_b reaches EOS (id 1) at step 32.
    r = generate(cli, repo_dir, model_b, [3], "--max-tokens", 40, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["finish_reason"] == "eos"
    assert out["token_ids"][-1] == 1 and 1 not in out["token_ids"][:-1]
    n = len(out["token_ids"])
    r2 = generate(cli, repo_dir, model_b, [3], "--max-tokens", n + 4, "--ignore-eos", "--json")
    out2 = json.loads(r2.stdout)
    assert out2["finish_reason"] == "length"
    assert out2["token_ids"][:n] == out["token_ids"] and len(out2["token_ids"]) == n + 4


def test_text_output(cli, repo_dir, model_a):
    r = generate(cli, repo_dir, model_a, [5, 17, 42], "--max-tokens", 3)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.split()) == 3 and all(t.isdigit() for t in r.stdout.split())


def test_zero_max_tokens(cli, repo_dir, model_a):
    r = generate(cli, repo_dir, model_a, [5], "--max-tokens", 0, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["token_ids"] == []


@pytest.mark.parametrize("args,code,message", [
    (["--prompt-ids", "5,999"], 2, "token id 999 (item 1) is outside the model's vocabulary [0, 256)"),
    (["--prompt-ids", ""], 2, "--prompt-ids is empty"),
    (["--prompt-ids", "5,,6"], 2, "empty item"),
    (["--prompt-ids", "5,x"], 2, "'x' is not a token id"),
    (["--prompt-ids", "5", "--temperature", "0.7", "--top-p", "1.5"], 2, "top_p = 1.5 is invalid"),
    (["--max-tokens", "3"], 2, "no prompt: give --prompt TEXT"),
    (["--prompt-ids", "5", "--backend", "gpu"], 2, "backend 'gpu' is unknown: use opt, ref or cuda"),
])
def test_usage_errors(cli, model_a, args, code, message):
    r = cli("generate", "--model", model_a, *args)
    assert r.returncode == code, (r.stdout, r.stderr)
    assert "deepinfer generate: error:" in r.stderr and message in r.stderr, r.stderr
    assert r.stdout == ""


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine may have a GPU")
@pytest.mark.parametrize("how", ["flag", "env"])
def test_cuda_without_a_gpu_is_a_clear_error(cli, model_a, how, monkeypatch):
    # Either this build has no CUDA backend or the machine has no GPU: both say how to run on
    # the CPU instead, and nothing is printed on stdout.
    args = ["--backend", "cuda"] if how == "flag" else []
    if how == "env":
        monkeypatch.setenv("DEEPINFER_ACCELERATOR", "nvidia")
    r = cli("generate", "--model", model_a, "--prompt-ids", "5", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "DEEPINFER_ACCELERATOR=cpu" in r.stderr, r.stderr
    assert r.stdout == ""


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine may have a GPU")
def test_engine_path_honours_backend_cuda(cli, repo_dir):
    # Text prompts go through the engine, which takes --backend too (it used to run on the CPU
    # whatever the flag said).
    r = cli("generate", "--model", repo_dir / "models" / "v4-small", "--prompt", "In the beginning",
            "--max-tokens", "2", "--backend", "cuda")
    assert r.returncode != 0, (r.stdout, r.stderr)
    assert "DEEPINFER_ACCELERATOR=cpu" in r.stderr, r.stderr


def test_bad_model_dir(cli, repo_dir, tmp_path):
    r = cli("generate", "--model", tmp_path / "missing", "--prompt-ids", "5")
    assert r.returncode == 1
    assert "deepinfer generate: error:" in r.stderr and "missing" in r.stderr
    (tmp_path / "empty").mkdir()
    r = cli("generate", "--model", tmp_path / "empty", "--prompt-ids", "5")
    assert r.returncode == 1
    assert "config.json" in r.stderr


def test_text_when_model_dir_has_tokenizer(cli, repo_dir, model_a, v4_tokenizer_path, tmp_path):
    if not v4_tokenizer_path.is_file():
        pytest.skip(f"no tokenizer at {v4_tokenizer_path}")
    for f in model_a.iterdir():
        (tmp_path / f.name).symlink_to(f)
    (tmp_path / "tokenizer.json").symlink_to(v4_tokenizer_path)
    r = cli("generate", "--model", tmp_path, "--prompt-ids", "5,17,42", "--max-tokens", 6,
            "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    plain = json.loads(generate(cli, repo_dir, model_a, [5, 17, 42], "--max-tokens", 6,
                                "--ignore-eos", "--json").stdout)
    assert out["token_ids"] == plain["token_ids"]
    assert isinstance(out["text"], str)
    from tokenizers import Tokenizer  # HF's own decoder as the reference for the text
    assert out["text"] == Tokenizer.from_file(str(v4_tokenizer_path)).decode(out["token_ids"],
                                                                            skip_special_tokens=False)


def test_stats(cli, repo_dir, model_a):
    ids = [171, 129, 100, 223, 76, 53, 97, 12, 200]
    plain = generate(cli, repo_dir, model_a, ids, "--max-tokens", 12, "--ignore-eos", "--json")
    r = generate(cli, repo_dir, model_a, ids, "--max-tokens", 12, "--ignore-eos", "--json",
                 "--stats")
    assert r.returncode == 0 and plain.returncode == 0, (r.stderr, plain.stderr)
    assert "stats" not in json.loads(plain.stdout)
    out = json.loads(r.stdout)
    assert out["token_ids"] == json.loads(plain.stdout)["token_ids"]  # timing changes nothing
    s = out["stats"]
    assert s["prompt_tokens"] == len(ids)
    assert s["generated_tokens"] == 12 and s["decode_steps"] == 11
    assert s["threads"] >= 1
    for key in ("load_s", "prefill_s", "decode_s"):
        assert 0 < s[key] < 60, (key, s)
    assert s["prefill_tokens_per_s"] == pytest.approx(len(ids) / s["prefill_s"], rel=1e-9)
    assert s["decode_tokens_per_s"] == pytest.approx(11 / s["decode_s"], rel=1e-9)
    # The process holds at least the 1.7 MB checkpoint once loaded; peak covers after-load.
    assert s["rss_after_load_bytes"] > 1_600_000
    assert s["peak_rss_bytes"] >= s["peak_rss_after_load_bytes"] > 1_600_000
    assert s["peak_rss_bytes"] < 4 << 30

    text = generate(cli, repo_dir, model_a, ids, "--max-tokens", 3, "--stats")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].split() == list(map(str, json.loads(plain.stdout)["token_ids"][:3]))
    assert lines[1].startswith("prompt 9 tokens: prefill") and "peak RSS" in lines[1]


def test_stats_without_generation(cli, repo_dir, model_a):
    r = generate(cli, repo_dir, model_a, [5], "--max-tokens", 0, "--json", "--stats")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)["stats"]
    assert s["generated_tokens"] == 0 and s["decode_steps"] == 0
    assert s["prefill_s"] == 0 and s["decode_tokens_per_s"] == 0


DEFAULT_MODEL = "models/v4-small"


def test_text_prompts_through_the_engine(cli, repo_dir):
    r = cli("generate", "--model", repo_dir / DEFAULT_MODEL, "--prompt", "A river is",
            "--prompt", "And God said", "--max-tokens", 6, "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    outs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [o["prompt"] for o in outs] == ["A river is", "And God said"]  # given order
    for o in outs:
        assert len(o["token_ids"]) == 6 and o["finish_reason"] == "length"
        assert o["text"] and o["prompt_token_ids"]
    # Greedy through the engine equals greedy through the direct model path.
    ids = outs[0]["prompt_token_ids"]
    direct = generate(cli, repo_dir, DEFAULT_MODEL, ids, "--max-tokens", 6, "--ignore-eos", "--json")
    assert json.loads(direct.stdout)["token_ids"] == outs[0]["token_ids"]


def test_sampling_is_seeded(cli, repo_dir):
    def sample(seed):
        r = cli("generate", "--model", repo_dir / DEFAULT_MODEL, "--prompt", "In the beginning",
                "--max-tokens", 12, "--temperature", "1.0", "--seed", seed, "--ignore-eos", "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["token_ids"]
    a, b, c = sample(7), sample(7), sample(8)
    assert a == b and len(a) == 12
    assert a != c  # 12 tokens at temperature 1 from a 8192-token vocabulary


def test_streams_a_single_prompt(cli, repo_dir):
    r = cli("generate", "--model", repo_dir / DEFAULT_MODEL, "--prompt", "-", "--max-tokens", 5,
            "--ignore-eos", input="A river is")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()


def test_data_parallel_options(cli, repo_dir, model_a):
    # --data-parallel-size / --enable-expert-parallel run ranks in the engine with the same
    # tokens, and so does --tensor-parallel-size (with --enable-expert-parallel, or inside
    # --data-parallel-size ranks, with or without --enable-expert-parallel); a size below 1 and
    # ranks on CUDA are refused by name.
    plain = json.loads(generate(cli, repo_dir, model_a, [5, 17, 42], "--max-tokens", 6,
                                "--ignore-eos", "--json").stdout)
    r = generate(cli, repo_dir, model_a, [5, 17, 42], "--max-tokens", 6, "--ignore-eos", "--json",
                 "--data-parallel-size", 2, "--enable-expert-parallel")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["token_ids"] == plain["token_ids"]
    r = generate(cli, repo_dir, model_a, [5, 17, 42], "--max-tokens", 6, "--ignore-eos", "--json",
                 "--tensor-parallel-size", 2)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["token_ids"] == plain["token_ids"]
    # Tensor with expert parallelism: the routed experts split over the same ranks.
    r = generate(cli, repo_dir, model_a, [5, 17, 42], "--max-tokens", 6, "--ignore-eos", "--json",
                 "--tensor-parallel-size", 2, "--enable-expert-parallel")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["token_ids"] == plain["token_ids"]
    # Tensor inside data parallelism: 2 x 2 cores, the same tokens.
    r = generate(cli, repo_dir, model_a, [5, 17, 42], "--max-tokens", 6, "--ignore-eos", "--json",
                 "--tensor-parallel-size", 2, "--data-parallel-size", 2)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["token_ids"] == plain["token_ids"]
    # All three: the routed experts split over the 4 cores, the same tokens.
    r = generate(cli, repo_dir, model_a, [5, 17, 42], "--max-tokens", 6, "--ignore-eos", "--json",
                 "--tensor-parallel-size", 2, "--data-parallel-size", 2, "--enable-expert-parallel")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["token_ids"] == plain["token_ids"]
    for extra, needle in ((("--data-parallel-size", 0), "--data-parallel-size"),
                          (("--data-parallel-size", 2, "--backend", "cuda", "--cuda-devices",
                            "0,0,0"), "names 3 GPUs for 2 data-parallel ranks"),
                          (("--cuda-devices", "0"), "--backend cuda")):
        r = generate(cli, repo_dir, model_a, [5, 17, 42], *extra)
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert needle in r.stderr, r.stderr
    # --enable-eplb with its knobs rebalances while generating, the same tokens; without expert
    # parallelism, or with slots that do not split over the ranks, it is refused by name.
    r = generate(cli, repo_dir, model_a, [5, 17, 42], "--max-tokens", 6, "--ignore-eos", "--json",
                 "--data-parallel-size", 2, "--enable-expert-parallel", "--enable-eplb",
                 "--num-redundant-experts", 2, "--eplb-step-interval", 1, "--eplb-window-size", 2)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["token_ids"] == plain["token_ids"]
    # The same over tensor-parallel ranks that hold the experts.
    r = generate(cli, repo_dir, model_a, [5, 17, 42], "--max-tokens", 6, "--ignore-eos", "--json",
                 "--tensor-parallel-size", 2, "--enable-expert-parallel", "--enable-eplb",
                 "--num-redundant-experts", 2, "--eplb-step-interval", 1, "--eplb-window-size", 2)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["token_ids"] == plain["token_ids"]
    for extra, needle in ((("--data-parallel-size", 2, "--enable-eplb"), "--enable-expert-parallel"),
                          (("--data-parallel-size", 2, "--enable-expert-parallel", "--enable-eplb",
                            "--num-redundant-experts", 1), "--num-redundant-experts")):
        r = generate(cli, repo_dir, model_a, [5, 17, 42], *extra)
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert needle in r.stderr, r.stderr
