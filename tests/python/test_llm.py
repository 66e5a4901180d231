"""The Python API over the engine: LLM / SamplingParams as a vLLM user drives them.

Most tests use the committed tiny checkpoint tests/data/model/v4_tiny_a/hf_fp32 (no tokenizer:
token-id prompts; fast; committed as a derive.json recipe, materialized by the fixture_checkpoint
fixture); the text and chat tests use the embedded default model models/default.
"""

import shutil
import subprocess
import sys

import pytest

from deepinfer import LLM, SamplingParams

TINY = "tests/data/model/v4_tiny_a/hf_fp32"
PROMPTS = [[5, 17, 42, 7], [3], [100, 101, 102, 103, 104, 105, 106, 107, 108, 9],
           [200, 2, 2, 2, 250, 31], list(range(11, 34))]


@pytest.fixture(scope="module")
def tiny_dir(fixture_checkpoint):
    return fixture_checkpoint(TINY)


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return LLM(str(tiny_dir), max_num_batched_tokens=7, num_threads=1)


@pytest.fixture(scope="module")
def default_llm(repo_dir):
    return LLM(str(repo_dir / "models" / "v4-small"), max_model_len=512)


def greedy(n, **kw):
    return SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True, **kw)


def test_batched_greedy_equals_one_at_a_time(tiny):
    batched = tiny.generate(PROMPTS, greedy(10), use_tqdm=False)
    assert [o.prompt_token_ids for o in batched] == PROMPTS
    for p, o in zip(PROMPTS, batched):
        alone = tiny.generate([p], greedy(10), use_tqdm=False)[0]
        assert o.outputs[0].token_ids == alone.outputs[0].token_ids
        assert len(o.outputs[0].token_ids) == 10
        assert o.outputs[0].finish_reason == "length"


def test_deterministic_sampling_alone_batched_and_preempted(tiny_dir, tiny):
    p = SamplingParams(temperature=1.0, top_k=50, max_tokens=12, ignore_eos=True, seq_seed=11)
    alone = tiny.generate([PROMPTS[2]], p, use_tqdm=False)[0].outputs[0].token_ids
    others = [SamplingParams(temperature=0.8, max_tokens=12, ignore_eos=True, seq_seed=s)
              for s in range(4)]
    batch = tiny.generate(PROMPTS[:2] + [PROMPTS[2]] + PROMPTS[3:] + [PROMPTS[0]],
                          others[:2] + [p] + others[2:] + [greedy(3)], use_tqdm=False)
    assert batch[2].outputs[0].token_ids == alone
    starved = LLM(str(tiny_dir), kv_block_size=8, num_kv_blocks=40,
                  max_num_batched_tokens=16, num_threads=1)
    batch2 = starved.generate(PROMPTS[:2] + [PROMPTS[2]] + PROMPTS[3:] + [PROMPTS[0]],
                              others[:2] + [p] + others[2:] + [greedy(3)], use_tqdm=False)
    stats = starved.stats()
    assert stats["preemptions"] > 0
    # KV pages: what the pools took from the backend, and the most held at once.
    assert 0 < stats["kv_bytes_in_use_peak"] <= stats["kv_bytes_reserved"]
    # CUDA graphs: a CPU backend never records, so nothing was set up, captured or replayed.
    assert {k: stats[k] for k in ("graph_setup_steps", "graph_captures", "graph_replays",
                                  "graph_drops", "graph_startup_seconds")} == {
        "graph_setup_steps": 0, "graph_captures": 0, "graph_replays": 0, "graph_drops": 0,
        "graph_startup_seconds": 0.0}
    assert batch2[2].outputs[0].token_ids == alone
    rechunked = LLM(str(tiny_dir), max_num_batched_tokens=3, num_threads=1)
    assert rechunked.generate([PROMPTS[2]], p, use_tqdm=False)[0].outputs[0].token_ids == alone
    other_seed = tiny.generate([PROMPTS[2]], p.clone(seq_seed=12), use_tqdm=False)[0]
    assert other_seed.outputs[0].token_ids != alone


def test_seed_alias_and_n_samples_with_logprobs(tiny):
    p = SamplingParams(n=3, temperature=1.0, max_tokens=6, ignore_eos=True, seed=5, logprobs=2)
    assert p.seq_seed == 5
    o = tiny.generate(PROMPTS[0], p, use_tqdm=False)[0]
    assert [c.index for c in o.outputs] == [0, 1, 2]
    assert len({tuple(c.token_ids) for c in o.outputs}) > 1
    for c in o.outputs:
        assert len(c.logprobs) == 6
        for tok, entry in zip(c.token_ids, c.logprobs):
            assert tok in entry and entry[tok].logprob <= 0.0
            assert len(entry) >= 2
        assert c.cumulative_logprob == pytest.approx(
            sum(e[t].logprob for t, e in zip(c.token_ids, c.logprobs)), rel=1e-5)


def test_stop_token_ids_and_max_tokens(tiny):
    ref = tiny.generate([PROMPTS[0]], greedy(8), use_tqdm=False)[0].outputs[0].token_ids
    stop_at = ref[2]
    o = tiny.generate([PROMPTS[0]], greedy(8, stop_token_ids=[stop_at]), use_tqdm=False)[0]
    c = o.outputs[0]
    assert c.finish_reason == "stop" and c.stop_reason == stop_at
    assert c.token_ids == ref[:ref.index(stop_at) + 1]
    short = tiny.generate([PROMPTS[0]], greedy(1), use_tqdm=False)[0].outputs[0]
    assert short.token_ids == ref[:1] and short.finish_reason == "length"


@pytest.mark.parametrize("kwargs, needle", [
    ({"temperature": -1.0}, "temperature"),
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"n": 0}, "n"),
    ({"logprobs": 50}, "logprobs"),
    ({"temperature": 0.0, "n": 2}, "n"),
    ({"top_k": "3"}, "top_k"),
    ({"bogus_key": 1}, "bogus_key"),
    ({"so_args": {"schema_type": "xml", "schema": "x"}}, "schema_type"),
    ({"so_args": {"schema_type": "regex"}}, "schema"),
    ({"logit_bias": {5: 101.0}}, "logit_bias"),
    ({"logit_bias": {-1: 1.0}}, "logit_bias"),
    ({"logit_bias": {"5": 1.0}}, "logit_bias"),
    ({"logit_bias": [5]}, "logit_bias"),
    ({"allowed_token_ids": [-4]}, "allowed_token_ids"),
    ({"allowed_token_ids": 5}, "allowed_token_ids"),
])
def test_invalid_sampling_params_raise_value_error(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        SamplingParams(**kwargs)


def test_logit_bias_forces_and_bans_tokens(tiny):
    base = tiny.generate([PROMPTS[1]], greedy(6), use_tqdm=False)[0].outputs[0].token_ids
    forced = tiny.generate([PROMPTS[1]], greedy(6, logit_bias={9: 100.0}),
                           use_tqdm=False)[0].outputs[0].token_ids
    assert forced == [9] * 6 != base
    banned = tiny.generate([PROMPTS[1]], greedy(6, logit_bias={t: -100.0 for t in set(base)}),
                           use_tqdm=False)[0].outputs[0].token_ids
    assert not set(banned) & set(base)
    p = greedy(6, logit_bias={9: 100.0})
    assert p.clone(max_tokens=2).logit_bias == {9: 100.0}
    sampled = SamplingParams(temperature=1.0, max_tokens=8, ignore_eos=True, seq_seed=3,
                             allowed_token_ids=[11, 12])
    out = tiny.generate([PROMPTS[1]], sampled, use_tqdm=False)[0].outputs[0].token_ids
    assert len(out) == 8 and set(out) <= {11, 12}
    with pytest.raises(ValueError, match="logit_bias"):  # past the vocabulary: at generate
        tiny.generate([PROMPTS[1]], greedy(2, logit_bias={1 << 30: 1.0}), use_tqdm=False)


def test_so_args_refused_at_generate_not_ignored(tiny):
    # The tiny checkpoint has no tokenizer, so a grammar cannot be compiled for it.
    p = SamplingParams(max_tokens=2, so_args={"schema_type": "regex", "schema": "[a-z]+"})
    with pytest.raises(ValueError, match="needs a tokenizer"):
        tiny.generate([PROMPTS[0]], p, use_tqdm=False)


def test_bad_prompts_raise_and_engine_keeps_serving(tiny):
    with pytest.raises(ValueError, match="empty"):
        tiny.generate([[]], greedy(2), use_tqdm=False)
    with pytest.raises(ValueError, match="vocabulary"):
        tiny.generate([[1, 2, 999]], greedy(2), use_tqdm=False)
    with pytest.raises(ValueError, match="max_model_len"):
        tiny.generate([[3] * (tiny.max_model_len + 5)], greedy(2), use_tqdm=False)
    with pytest.raises(ValueError, match="tokenizer"):
        tiny.generate("text needs a tokenizer", greedy(2), use_tqdm=False)
    with pytest.raises(ValueError, match="one per prompt"):
        tiny.generate(PROMPTS[:2], [greedy(2)] * 3, use_tqdm=False)
    o = tiny.generate([PROMPTS[1]], greedy(3), use_tqdm=False)[0]
    assert len(o.outputs[0].token_ids) == 3 and o.error is None


def test_engine_options_by_keyword(tiny_dir):
    # One table of option names for both engines: an unknown one, or a value of the wrong type,
    # raises TypeError before anything loads; max_waiting belongs to EngineLoop only.
    from deepinfer import _core
    with pytest.raises(TypeError, match="engine option 'max_num_seq' is unknown"):
        _core.Engine(str(tiny_dir), max_num_seq=4)
    with pytest.raises(TypeError, match="'num_threads' got a value of the wrong type"):
        _core.Engine(str(tiny_dir), num_threads="one")
    with pytest.raises(TypeError, match="'max_waiting' is unknown"):
        _core.Engine(str(tiny_dir), max_waiting=4)
    loop = _core.EngineLoop(str(tiny_dir), num_threads=1, max_num_seqs=2, max_waiting=4,
                            cuda_devices=[], batch_invariant=None)
    assert loop.vocab_size > 0


def test_abort_mid_stream(tiny_dir):
    from deepinfer import _core
    eng = _core.Engine(str(tiny_dir), num_threads=1)
    seen = []
    victim = eng.submit(PROMPTS[0], greedy(40).to_engine_dict(),
                        lambda i, text, toks, fin: seen.extend(toks))
    other = eng.submit(PROMPTS[1], greedy(10).to_engine_dict())
    results, aborted = {}, False
    while eng.has_unfinished():
        if len(seen) >= 3 and not aborted:
            eng.abort(victim)
            aborted = True
        for d in eng.step():
            results[d["id"]] = d
    assert results[victim]["outputs"][0]["finish_reason"] == "abort"
    assert len(results[victim]["outputs"][0]["token_ids"]) < 40
    assert len(results[other]["outputs"][0]["token_ids"]) == 10
    with pytest.raises(FileNotFoundError):
        eng.abort(victim)


def test_default_model_fallback_notice(repo_dir, tmp_path, tiny_dir):
    code = ("import deepinfer.llm as l; print(l.resolve_model_dir())")
    env = {"PATH": "/usr/bin:/bin", "HF_HOME": str(tmp_path), "PYTHONPATH": sys.path[0] if
           sys.path[0] else ".", **{k: v for k, v in __import__("os").environ.items()
                                    if k == "PYTHONPATH"}}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=repo_dir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("models/default")
    notice = [ln for ln in r.stderr.splitlines() if "embedded default model" in ln]
    assert len(notice) == 1
    env["DEEPINFER_HF_MODEL_DIR"] = str(tiny_dir)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=repo_dir)
    assert r.stdout.strip() == str(tiny_dir) and "embedded" not in r.stderr


def test_text_generate_and_stop_strings_on_default_model(default_llm):
    outs = default_llm.generate(["In the beginning God created", "The meaning of"],
                                greedy(12), use_tqdm=False)
    assert outs[0].prompt == "In the beginning God created"
    for o in outs:
        c = o.outputs[0]
        assert len(c.token_ids) == 12 and c.text
        assert default_llm.decode(c.token_ids).startswith(c.text[:3])
    full = outs[0].outputs[0].text
    word = full.strip().split()[1] if len(full.split()) > 1 else full.strip()
    o = default_llm.generate(["In the beginning God created"], greedy(12, stop=[word]),
                             use_tqdm=False)[0].outputs[0]
    assert o.finish_reason == "stop"
    assert word not in o.text and full.startswith(o.text)


def test_chat_returns_text(default_llm):
    outs = default_llm.chat([{"role": "user", "content": "Who created the heaven?"}],
                            SamplingParams(temperature=0.0, max_tokens=24), use_tqdm=False)
    c = outs[0].outputs[0]
    assert c.text and c.token_ids
    assert c.content is not None
    both = default_llm.chat([[{"role": "user", "content": "Hello"}],
                             [{"role": "user", "content": "Bye"}]],
                            SamplingParams(temperature=0.0, max_tokens=4), use_tqdm=False)
    assert len(both) == 2


def test_prefix_caching_reuses_a_shared_prompt_and_changes_nothing(tiny_dir):
    # A system prompt shared by several requests and a later turn that extends one of them:
    # with caching the shared blocks are restored, not recomputed, and every token and logprob
    # is what the same requests give without it.
    system = [(7 * i + 3) % 250 + 2 for i in range(40)]
    prompts = [system + [11, 12], system + [13], system + [11, 12, 99, 98, 97]]
    params = [SamplingParams(temperature=0.9, max_tokens=8, ignore_eos=True, seq_seed=5 + i,
                             logprobs=1) for i in range(3)]
    runs = {}
    for cached in (False, True):
        llm = LLM(str(tiny_dir), kv_block_size=16, max_num_seqs=1, num_threads=1,
                  enable_prefix_caching=cached)
        outs = llm.generate(prompts, params, use_tqdm=False)
        runs[cached] = ([o.outputs[0].token_ids for o in outs],
                        [[lp for lp in o.outputs[0].logprobs] for o in outs], llm.stats())
    assert runs[True][0] == runs[False][0]
    assert runs[True][1] == runs[False][1]
    assert runs[False][2]["prefix_hit_tokens"] == 0
    assert runs[True][2]["prefix_hit_tokens"] >= 64  # 2 requests x 2 blocks of 16 at least
    assert runs[True][2]["prompt_tokens"] < runs[False][2]["prompt_tokens"]


def test_backend_argument(tiny_dir):
    # LLM(backend=) reaches the engine: describe() names the backend that runs, and a bad name
    # is refused with the choices.
    ref = LLM(str(tiny_dir), backend="ref", num_threads=1)
    assert "backend cpu-ref" in ref.describe(), ref.describe()
    opt = LLM(str(tiny_dir), backend="opt", num_threads=1)
    assert "backend cpu-opt" in opt.describe(), opt.describe()
    with pytest.raises(ValueError, match="backend 'gpu' is unknown: use opt, ref or cuda"):
        LLM(str(tiny_dir), backend="gpu")


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine may have a GPU")
def test_cuda_backend_without_a_gpu_says_how_to_run_on_the_cpu(tiny_dir):
    with pytest.raises(ValueError, match="DEEPINFER_ACCELERATOR=cpu"):
        LLM(str(tiny_dir), backend="cuda")


def test_sampling_threads_do_not_change_outputs(tiny_dir):
    # A step's draws run on a host thread pool; each is keyed by its own request, so one
    # thread and several give the same tokens and logprobs.
    params = [SamplingParams(temperature=0.9, top_p=0.9, seed=s, max_tokens=6, logprobs=2,
                             ignore_eos=True) for s in range(len(PROMPTS))]
    runs = []
    for threads in (1, 2, 3):
        llm = LLM(str(tiny_dir), num_threads=1, sampling_threads=threads)
        outs = llm.generate(PROMPTS, params, use_tqdm=False)
        runs.append([(o.outputs[0].token_ids, [sorted(d.items()) for d in o.outputs[0].logprobs])
                     for o in outs])
    assert runs[0] == runs[1] == runs[2]


def test_sample_on_backend_gives_the_host_tokens(tiny_dir):
    # Draws on the backend (Ops::sample; the CPU's default here, a GPU's kernel there) are the
    # host Sampler's tokens; a request with logprobs sends its steps to the host.
    params = [SamplingParams(temperature=0.8, top_k=20, top_p=0.9, seed=s, max_tokens=6,
                             ignore_eos=True) for s in range(len(PROMPTS))]
    params[0] = SamplingParams(temperature=0.8, seed=3, max_tokens=6, logprobs=1, ignore_eos=True)
    runs = [[o.outputs[0].token_ids for o in
             LLM(str(tiny_dir), num_threads=1, sample_on=where).generate(
                 PROMPTS, params, use_tqdm=False)] for where in ("host", "backend")]
    assert runs[0] == runs[1]
    with pytest.raises(ValueError, match="sample_on"):
        LLM(str(tiny_dir), sample_on="gpu")


def test_load_format_dummy_runs_from_a_config_alone(repo_dir, tmp_path):
    # vLLM's load_format="dummy": config.json is all the directory needs; the random weights
    # are the same on every load, so two engines give the same tokens.
    shutil.copy(repo_dir / "tests/data/model/v4_tiny_a/official_quant/config.json", tmp_path)
    runs = [[o.outputs[0].token_ids for o in
             LLM(str(tmp_path), load_format="dummy", num_threads=1).generate(
                 PROMPTS[:3], greedy(5), use_tqdm=False)] for _ in range(2)]
    assert runs[0] == runs[1]
    assert all(len(t) == 5 for t in runs[0])
    with pytest.raises(ValueError, match="load_format"):
        LLM(str(tmp_path), load_format="random")


def test_data_parallel_ranks_give_the_single_rank_outputs(tiny_dir):
    # LLM(data_parallel_size=, enable_expert_parallel=) (vLLM's names) reach the engine: the ranks
    # (threads here) give each request the single rank's tokens and logprobs, bit for bit.
    params = [SamplingParams(temperature=0.9, top_p=0.9, seed=s, max_tokens=6, logprobs=2,
                             ignore_eos=True) for s in range(len(PROMPTS))]
    runs = []
    for dp, ep in ((1, False), (2, False), (2, True), (4, True)):
        llm = LLM(str(tiny_dir), num_threads=1, data_parallel_size=dp, enable_expert_parallel=ep)
        if dp > 1:
            assert f"data parallel: {dp} ranks" in llm.describe(), llm.describe()
        outs = llm.generate(PROMPTS, params, use_tqdm=False)
        runs.append([(o.outputs[0].token_ids, [sorted(d.items()) for d in o.outputs[0].logprobs])
                     for o in outs])
    assert runs[0] == runs[1] == runs[2] == runs[3]


def test_tensor_parallel_ranks_give_the_single_rank_outputs(tiny_dir):
    # LLM(tensor_parallel_size=) (vLLM's name): ranks (threads) holding shards of the dense
    # weights give the single rank's tokens and logprobs, bit for bit; with
    # enable_expert_parallel the routed experts are split over the same ranks, the same again;
    # inside two data-parallel ranks with expert parallelism over all four cores, again.
    params = [SamplingParams(temperature=0.9, top_p=0.9, seed=s, max_tokens=6, logprobs=2,
                             ignore_eos=True) for s in range(len(PROMPTS))]
    runs = []
    for tp, ep, dp in ((1, False, 1), (2, False, 1), (4, False, 1), (2, True, 1), (2, True, 2)):
        llm = LLM(str(tiny_dir), num_threads=1, tensor_parallel_size=tp, enable_expert_parallel=ep,
                  data_parallel_size=dp)
        if tp > 1 and dp == 1:
            assert f"tensor parallel: {tp} ranks" in llm.describe(), llm.describe()
            assert ("routed experts split" in llm.describe()) == ep, llm.describe()
        if dp > 1:
            assert "routed experts split contiguously over all 4 cores" in llm.describe(), \
                llm.describe()
        outs = llm.generate(PROMPTS, params, use_tqdm=False)
        runs.append([(o.outputs[0].token_ids, [sorted(d.items()) for d in o.outputs[0].logprobs])
                     for o in outs])
    assert all(r == runs[0] for r in runs[1:])


def test_context_parallel_ranks_give_the_single_rank_outputs(tiny_dir):
    # LLM(context_parallel_size=): ranks (threads) splitting every forward's rows zig-zag give
    # the single rank's tokens and logprobs, bit for bit; inside two data-parallel ranks, and with
    # the routed experts split over the ranks (enable_expert_parallel), too.
    params = [SamplingParams(temperature=0.9, top_p=0.9, seed=s, max_tokens=6, logprobs=2,
                             ignore_eos=True) for s in range(len(PROMPTS))]
    runs = []
    for cp, dp, ep in ((1, 1, False), (2, 1, False), (2, 2, False), (2, 1, True)):
        llm = LLM(str(tiny_dir), num_threads=1, context_parallel_size=cp, data_parallel_size=dp,
                  enable_expert_parallel=ep)
        if cp > 1 and dp == 1:
            assert "context parallel: 2 ranks" in llm.describe(), llm.describe()
        if dp > 1:
            assert "each rank 2 context-parallel ranks" in llm.describe(), llm.describe()
        outs = llm.generate(PROMPTS, params, use_tqdm=False)
        runs.append([(o.outputs[0].token_ids, [sorted(d.items()) for d in o.outputs[0].logprobs])
                     for o in outs])
    assert all(r == runs[0] for r in runs[1:])
    with pytest.raises(ValueError, match="context"):
        LLM(str(tiny_dir), num_threads=1, context_parallel_size=0)


def test_eplb_rebalances_keep_the_outputs(tiny_dir):
    # LLM(enable_eplb=, num_redundant_experts=, eplb_step_interval=, eplb_window_size=) (vLLM's
    # names): experts re-placed every step and by LLM.rebalance_experts(), the same tokens and
    # logprobs as one rank; the stats count the rebalances.
    params = [SamplingParams(temperature=0.9, top_p=0.9, seed=s, max_tokens=6, logprobs=2,
                             ignore_eos=True) for s in range(len(PROMPTS))]

    def run(llm):
        outs = llm.generate(PROMPTS, params, use_tqdm=False)
        return [(o.outputs[0].token_ids, [sorted(d.items()) for d in o.outputs[0].logprobs])
                for o in outs]

    single = run(LLM(str(tiny_dir), num_threads=1))
    llm = LLM(str(tiny_dir), num_threads=1, data_parallel_size=2, enable_expert_parallel=True,
              enable_eplb=True, num_redundant_experts=2, eplb_step_interval=1,
              eplb_window_size=2)
    assert "placed by EPLB" in llm.describe(), llm.describe()
    assert run(llm) == single
    periodic = llm.stats()["eplb_rebalances"]
    assert periodic > 0
    assert llm.stats()["eplb_balance_after"] >= 1.0
    llm.rebalance_experts()
    assert llm.stats()["eplb_rebalances"] == periodic + 1
    assert run(llm) == single
    with pytest.raises(ValueError, match="enable-expert-parallel"):
        LLM(str(tiny_dir), num_threads=1, data_parallel_size=2, enable_eplb=True)
    with pytest.raises(ValueError, match="num-redundant-experts"):
        LLM(str(tiny_dir), num_threads=1, data_parallel_size=2, enable_expert_parallel=True,
            enable_eplb=True, num_redundant_experts=1)
    with pytest.raises(ValueError, match="enable-eplb"):
        LLM(str(tiny_dir), num_threads=1).rebalance_experts()


@pytest.mark.parametrize("kwargs,needle", [
    ({"tensor_parallel_size": 2, "backend": "cuda"}, "with the CUDA backend"),
    ({"data_parallel_size": 0}, "data_parallel_size"),
    ({"data_parallel_size": 2, "backend": "cuda", "cuda_devices": [0]}, "one GPU id per rank"),
    ({"cuda_devices": [0]}, "names GPUs but the backend"),
])
def test_rank_options_refused_with_a_reason(tiny_dir, kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        LLM(str(tiny_dir), num_threads=1, **kwargs)
