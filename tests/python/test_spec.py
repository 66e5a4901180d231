"""Speculative decoding through the Python API (LLM(speculative_config=...), vLLM's form) and
the CLI: outputs equal those without speculation, the stats report acceptance, bad configs are
refused with a message naming the fix."""

import pytest

from deepinfer import LLM, SamplingParams

PROMPTS = ["In the beginning God created", "And it came to pass", "The law of the"]


@pytest.fixture(scope="module")
def default_dir(repo_dir):
    return str(repo_dir / "models" / "v4-small")


def outputs(llm):
    params = [SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True),
              SamplingParams(temperature=0.9, top_p=0.95, seed=7, max_tokens=40, ignore_eos=True,
                             logprobs=2),
              SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True, stop=[" the"])]
    outs = llm.generate(PROMPTS, params, use_tqdm=False)
    return [(o.outputs[0].token_ids, o.outputs[0].text,
             [lp and sorted(lp.items()) for lp in (o.outputs[0].logprobs or [])]) for o in outs]


@pytest.mark.parametrize("spec", [{"method": "mtp", "num_speculative_tokens": 4},
                                  {"method": "ngram", "num_speculative_tokens": 3}])
@pytest.mark.parametrize("varlen", [False, True])
def test_speculation_keeps_outputs_and_reports_acceptance(default_dir, spec, varlen):
    off = LLM(default_dir, max_model_len=256, speculative_config={"method": "off"})
    on = LLM(default_dir, max_model_len=256, speculative_config=spec, speculative_varlen=varlen)
    assert "speculative off" in off.describe()
    assert f"speculative {spec['method']} k={spec['num_speculative_tokens']}" in on.describe()
    assert ("varlen" in on.describe()) == varlen
    assert outputs(on) == outputs(off)
    st = on.stats()
    assert 0 <= st["spec_accepted_tokens"] <= st["spec_draft_tokens"]
    # The latest varlen decisions: one per probe verdict or predicted loss, at most 8.
    probes = st["spec_varlen_recent_probes"]
    decided = st["spec_varlen_probes_passed"] + st["spec_varlen_probes_failed"]
    assert len(probes) == min(8, decided)
    for p in probes:
        assert set(p) == {"plan_step", "decodes", "steps", "ratio", "passed", "tokens",
                          "spent_seconds", "plain_seconds", "rank", "draft_cost_seconds",
                          "draft_spent_seconds", "plain_sample_seconds"}
        assert 0 <= p["draft_spent_seconds"] <= p["spent_seconds"]
        assert 0 <= p["plain_sample_seconds"] <= p["plain_seconds"]
        assert p["rank"] == 0  # one engine
        assert p["draft_cost_seconds"] >= 0  # what drafting cost per step as the controller saw it
        assert p["passed"] == (p["steps"] > 0 and p["ratio"] >= 1.0)
    if not varlen:
        # With varlen the engine may verify nothing: it pauses drafting where the measured step
        # costs say it does not pay (on a 2-core CPU it rarely does), which timing decides.
        assert st["spec_verify_steps"] > 0
        assert st["spec_accepted_tokens"] > 0


def test_varlen_trace_through_the_python_api(default_dir, tmp_path):
    # LLM(speculative_trace=...): one CSV line per engine step and per predicted loss, every
    # decision the controller made on a line (docs/speculative.md, "The varlen trace").
    trace = tmp_path / "varlen.csv"
    llm = LLM(default_dir, max_model_len=256, speculative_config={"method": "mtp",
              "num_speculative_tokens": 3}, speculative_varlen=True, speculative_trace=str(trace))
    outputs(llm)
    st = llm.stats()
    lines = trace.read_text().splitlines()
    assert lines[0].startswith("engine,kind,plan_step,decodes,")
    rows = [line.split(",") for line in lines[1:]]
    assert all(len(r) == 20 for r in rows)
    assert sum(r[1] == "step" for r in rows) == st["steps"]
    decided = sum(r[1] == "predicted" or (r[1] == "step" and r[18] != "") for r in rows)
    assert decided == st["spec_varlen_probes_passed"] + st["spec_varlen_probes_failed"]


def test_bad_speculative_config_is_refused(default_dir):
    with pytest.raises(ValueError, match="unknown keys"):
        LLM(default_dir, speculative_config={"method": "ngram", "prompt_lookup_max": 4})
    with pytest.raises(Exception, match="auto, dspark, mtp, ngram or off"):
        LLM(default_dir, speculative_config={"method": "eagle"})
    with pytest.raises(Exception, match="DSpark"):
        LLM(default_dir, speculative_config={"method": "dspark"})


def test_cli_generate_reports_speculation(cli, default_dir):
    args = ["generate", "--model", default_dir, "--prompt", "And it came to pass",
            "--max-tokens", "32", "--ignore-eos", "--no-stream", "--stats"]
    plain = cli(*args, "--speculative-method", "off", check=True)
    spec = cli(*args, "--speculative-method", "mtp", "--num-speculative-tokens", "3", check=True)
    assert spec.stdout == plain.stdout
    assert "speculative decoding:" in spec.stderr and "acceptance length" in spec.stderr
    assert "speculative mtp k=3" in spec.stderr


@pytest.mark.parametrize("varlen", [False, True])
def test_trained_v41_default_dspark_keeps_outputs_and_accepts(repo_dir, varlen):
    """The embedded default model is a trained V4.1 with its DSpark drafter: speculation keeps every
    output (greedy, seeded with logprobs, stop strings) and its trained drafter is accepted (on the
    training distribution it accepts ~1 token per verify step; a broken drafter, e.g. one reading the
    wrong target features, accepts ~none)."""
    model = str(repo_dir / "models" / "default")
    off = LLM(model, max_model_len=256)
    on = LLM(model, max_model_len=256, speculative_config={"method": "auto", "num_speculative_tokens": 5},
             speculative_varlen=varlen)
    assert "speculative dspark k=5" in on.describe()
    assert outputs(on) == outputs(off)
    st = on.stats()
    if not varlen:  # varlen may pause drafting on a CPU, where it does not pay (timing decides)
        assert st["spec_verify_steps"] > 0
        assert st["spec_accepted_tokens"] >= 0.3 * st["spec_verify_steps"], st


def test_residual_acceptance_through_the_python_api(repo_dir):
    """speculative_config["acceptance"]: "residual" keeps greedy and seeded requests exactly as
    without speculation (seeded ones stay on identical-output verification), samples unseeded
    ones by rejection sampling with the residual (they finish, with drafts accepted); a bad value
    names the choices."""
    model = str(repo_dir / "models" / "default")
    off = LLM(model, max_model_len=256)
    on = LLM(model, max_model_len=256,
             speculative_config={"method": "dspark", "num_speculative_tokens": 5,
                                 "acceptance": "residual"})
    assert outputs(on) == outputs(off)
    unseeded = on.generate(PROMPTS, SamplingParams(temperature=1.0, max_tokens=24, ignore_eos=True),
                           use_tqdm=False)
    assert all(len(o.outputs[0].token_ids) == 24 for o in unseeded)
    assert on.stats()["spec_accepted_tokens"] > 0
    with pytest.raises(Exception, match="identical, residual or residual-always"):
        LLM(model, speculative_config={"method": "dspark", "acceptance": "lossy"})
