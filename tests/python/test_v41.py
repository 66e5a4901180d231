"""DeepSeek-V4.1 through the Python API and the CLI, on the committed tiny V4.1 checkpoints
(tests/data/model/v41_tiny_a: every CSA2 role, Engram, a DSpark drafter). Their tokenizer.json is
a WordLevel vocabulary the model reads for its Engram token map; the text path cannot run it, so
prompts are token ids, as a user of such a checkpoint would give them.

The reference is the goldens' greedy continuation (NeMo AutoModel's forward, full recomputation
at every step; tests/reference/model_v41/make_goldens.py), which LLM.generate must reproduce
token for token through the engine's caches."""

import json

import pytest

from deepinfer import LLM, SamplingParams

V41 = "tests/data/model/v41_tiny_a"


@pytest.fixture(scope="module")
def goldens(repo_dir):
    return json.loads((repo_dir / V41 / "goldens.json").read_text())


@pytest.fixture(scope="module")
def v41(repo_dir):
    return LLM(str(repo_dir / V41 / "official_bf16"), max_num_batched_tokens=16, num_threads=1)


def greedy(n):
    return SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)


def test_generate_reproduces_the_reference_continuations(v41, goldens):
    names = ["len1", "len7", "len40"]  # no fragile position in these continuations
    prompts = [goldens["prompts"][n] for n in names]
    outs = v41.generate(prompts, greedy(16), use_tqdm=False)
    for name, out in zip(names, outs):
        want = goldens["continuations"][f"ref.{name}"]
        assert not want["fragile_positions"]
        assert out.outputs[0].token_ids == want["tokens"], name
        assert out.outputs[0].text == ""  # no text for a tokenizer the text path cannot run


def test_official_quant_checkpoint_reproduces_its_reference(repo_dir, goldens):
    llm = LLM(str(repo_dir / V41 / "official_quant"), num_threads=1)
    out = llm.generate([goldens["prompts"]["len40"]], greedy(16), use_tqdm=False)[0]
    assert out.outputs[0].token_ids == goldens["continuations"]["official_quant.len40"]["tokens"]


def test_sampling_is_seeded_and_batch_independent(v41, goldens):
    p = SamplingParams(temperature=0.9, top_p=0.95, max_tokens=10, ignore_eos=True, seq_seed=5)
    prompt = goldens["prompts"]["len40"]
    alone = v41.generate([prompt], p, use_tqdm=False)[0].outputs[0].token_ids
    batch = v41.generate([goldens["prompts"]["len7"], prompt, goldens["prompts"]["len1"]],
                         [greedy(4), p, greedy(6)], use_tqdm=False)
    assert batch[1].outputs[0].token_ids == alone


def test_text_prompts_say_why_they_cannot_run(v41):
    with pytest.raises(ValueError, match="WordLevel"):
        v41.generate(["the cat"], greedy(4), use_tqdm=False)


def test_cli_generates_through_the_engine_and_the_model(cli, repo_dir, goldens):
    ids = ",".join(map(str, goldens["prompts"]["len7"]))
    want = goldens["continuations"]["ref.len7"]["tokens"]
    model = repo_dir / V41 / "official_bf16"
    direct = cli("generate", "--model", model, "--prompt-ids", ids, "--max-tokens", "16",
                 "--temperature", "0", "--ignore-eos", "--json")
    assert direct.returncode == 0, direct.stderr
    assert json.loads(direct.stdout)["token_ids"] == want
    sampled = cli("generate", "--model", model, "--prompt-ids", ids, "--max-tokens", "8",
                  "--temperature", "0.7", "--seed", "3", "--ignore-eos", "--json")
    assert sampled.returncode == 0, sampled.stderr
    text = cli("generate", "--model", model, "--prompt", "the cat", "--max-tokens", "4")
    assert text.returncode != 0
    assert "WordLevel" in text.stderr and "--prompt-ids" in text.stderr


def test_cli_inspect_names_the_family(cli, repo_dir):
    r = cli("inspect", repo_dir / V41 / "official_bf16")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("DeepSeek-V4.1 model:")
