"""LLM on the engine thread: the streaming generator, the GIL released while the engine runs,
and vLLM's SamplingParams names (prompt_logprobs, skip_special_tokens, detokenize,
truncate_prompt_tokens) plus LLM.get_tokenizer()."""

from __future__ import annotations

import threading
import time

import pytest

from deepinfer import LLM, SamplingParams


@pytest.fixture(scope="module")
def llm(repo_dir):
    return LLM(str(repo_dir / "models" / "v4-small"), num_threads=1)


def test_stream_equals_generate(llm):
    p = SamplingParams(max_tokens=12, temperature=0.8, seq_seed=3)
    whole = llm.generate("In the beginning", p, use_tqdm=False)[0].outputs[0]
    pieces = list(llm.generate_stream("In the beginning", p))
    assert "".join(d.text for d in pieces) == whole.text
    assert [t for d in pieces for t in d.token_ids] == whole.token_ids
    assert pieces[-1].output is not None and pieces[-1].output.outputs[0].text == whole.text
    assert sum(d.finished for d in pieces if d.output is None) == 1


def test_stream_closed_early_aborts(llm):
    gen = llm.generate_stream("In the beginning",
                              SamplingParams(max_tokens=500, ignore_eos=True, temperature=0))
    for i, _ in enumerate(gen):
        if i == 3:
            break
    gen.close()
    assert llm.stats()["num_running"] == 0 or time.sleep(0.5) or llm.stats()["num_running"] == 0


def test_gil_is_released_while_the_engine_runs(llm):
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    llm.generate(["In the beginning"] * 4, SamplingParams(max_tokens=64, ignore_eos=True),
                 use_tqdm=False)
    stop.set()
    t.join()
    assert len(ticks) > 10  # the other thread ran while generate() waited


def test_prompt_logprobs(llm):
    o = llm.generate("In the beginning God created",
                     SamplingParams(max_tokens=2, temperature=0, prompt_logprobs=2),
                     use_tqdm=False)[0]
    plp = o.prompt_logprobs
    assert plp[0] is None and len(plp) == len(o.prompt_token_ids)
    for tok, entry in zip(o.prompt_token_ids[1:], plp[1:]):
        assert tok in entry and entry[tok].logprob <= 0
        assert len(entry) in (2, 3)  # the top 2, plus the prompt token when it is not among them
    # The same request twice: the second hits the prefix cache but scores identically.
    again = llm.generate("In the beginning God created",
                         SamplingParams(max_tokens=2, temperature=0, prompt_logprobs=2),
                         use_tqdm=False)[0]
    assert [e and {k: v.logprob for k, v in e.items()} for e in again.prompt_logprobs] == \
        [e and {k: v.logprob for k, v in e.items()} for e in plp]


def test_detokenize_skip_special_truncate(llm):
    ids = llm.encode("In the beginning God created the heaven")
    o = llm.generate(ids, SamplingParams(max_tokens=4, temperature=0, detokenize=False,
                                         ignore_eos=True, truncate_prompt_tokens=3),
                     use_tqdm=False)[0]
    assert o.prompt_token_ids == ids[-3:]
    assert o.outputs[0].text == "" and len(o.outputs[0].token_ids) == 4
    # The prompt [4] makes models/v4-small draw EOS (id 1) next; with ignore_eos the EOS
    # token stays in the output, and in its text only with skip_special_tokens=False.
    p = dict(max_tokens=2, temperature=0, ignore_eos=True)
    skipped = llm.generate([[4]], SamplingParams(**p), use_tqdm=False)[0].outputs[0]
    kept = llm.generate([[4]], SamplingParams(**p, skip_special_tokens=False),
                        use_tqdm=False)[0].outputs[0]
    assert skipped.token_ids == kept.token_ids and kept.token_ids[0] == 1
    assert "<｜end▁of▁sentence｜>" in kept.text and "<｜end▁of▁sentence｜>" not in skipped.text
    with pytest.raises(ValueError, match="detokenize"):
        SamplingParams(detokenize=False, stop=["x"])
    with pytest.raises(ValueError, match="prompt_logprobs"):
        SamplingParams(prompt_logprobs=21)
    with pytest.raises(ValueError, match="truncate_prompt_tokens"):
        SamplingParams(truncate_prompt_tokens=0)


def test_get_tokenizer(llm):
    tok = llm.get_tokenizer()
    assert tok.encode("In the beginning") == llm.encode("In the beginning")
    assert tok.decode(llm.encode("In the beginning")) == "In the beginning"
