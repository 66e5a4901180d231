"""LLM: offline inference over the C++ engine, shaped like vLLM's `LLM`.

    from deepinfer import LLM, SamplingParams
    llm = LLM()                                    # DEEPINFER_HF_MODEL_DIR, HF cache, or default
    outs = llm.generate(["Hello"], SamplingParams(temperature=0, max_tokens=32))
    print(outs[0].outputs[0].text)

Model lookup for LLM(model=None), first hit wins: DEEPINFER_HF_MODEL_DIR (read by the C++ typed
options); the Hugging Face cache copy of deepseek-ai/DeepSeek-V4.1-Flash-1017; the embedded
default model (the installed package's deepinfer/models/default, then the repository's
models/default), announced with a one-line notice on stderr.

The engine runs requests with continuous batching (chunked prefill mixed with decodes) on its
own thread (the C++ EngineLoop, include/deepinfer/engine_loop.h); generate() submits every
prompt at once and waits, with the GIL released, until all are done. generate_stream() yields
one request's text as it is generated. Prompts are
checked before anything runs (ValueError naming the prompt). `so_args` (structured outputs)
is compiled by the engine when its request is submitted: an invalid schema raises ValueError
with the compiler's message and aborts the requests already submitted by that call. A sample
ends with finish_reason "stop" once its output is a complete match; "length" means max_tokens
cut it first, so its text may be an incomplete document.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from deepinfer import _core
from deepinfer.sampling_params import SamplingParams

__all__ = ["LLM", "RequestOutput", "CompletionOutput", "Logprob", "StreamDelta",
           "DEFAULT_HF_MODEL", "resolve_model_dir"]

DEFAULT_HF_MODEL = "deepseek-ai/DeepSeek-V4.1-Flash-1017"


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None
    stop_reason: int | str | None = None
    error: str | None = None
    # Filled by LLM.chat from the DeepSeek-V4 output parser.
    reasoning_content: str | None = None
    content: str | None = None
    tool_calls: list[dict] = field(default_factory=list)

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool = True
    error: str | None = None
    # SamplingParams(prompt_logprobs=N): None for the first prompt token, then one dict per
    # prompt token (the token itself and the top N), as vLLM returns them.
    prompt_logprobs: list[dict[int, Logprob] | None] | None = None
    num_cached_tokens: int = 0


@dataclass
class StreamDelta:
    """One piece of LLM.generate_stream: the text and tokens of sample `index` that became
    final, `finished` with its finish_reason when that sample ended. The last item of the
    stream has `output` set: the request's whole RequestOutput."""
    index: int
    text: str
    token_ids: list[int]
    finished: bool = False
    finish_reason: str | None = None
    output: "RequestOutput | None" = None


def _hf_cache_copy(repo_id: str) -> Path | None:
    hub = os.environ.get("HF_HUB_CACHE")
    if not hub:
        home = os.environ.get("HF_HOME") or os.path.join(Path.home(), ".cache", "huggingface")
        hub = os.path.join(home, "hub")
    snapshots = Path(hub) / ("models--" + repo_id.replace("/", "--")) / "snapshots"
    if not snapshots.is_dir():
        return None
    found = [p for p in snapshots.iterdir() if (p / "config.json").is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _embedded_default() -> Path | None:
    here = Path(__file__).resolve().parent
    candidates = [here / "models" / "default"]  # installed wheel
    candidates += [p / "models" / "default" for p in here.parents]  # repository checkout
    for c in candidates:
        if (c / "config.json").is_file():
            return c
    return None


def resolve_model_dir(model: str | os.PathLike | None = None, *, notice: bool = True) -> str:
    """The model directory LLM(model) runs, following the lookup order in the module doc."""
    if model is not None:
        return str(model)
    env = _core.env_hf_model_dir()
    if env:
        return env
    cached = _hf_cache_copy(DEFAULT_HF_MODEL)
    if cached is not None:
        return str(cached)
    default = _embedded_default()
    if default is None:
        raise FileNotFoundError(
            f"no model: DEEPINFER_HF_MODEL_DIR is unset, the Hugging Face cache has no "
            f"{DEFAULT_HF_MODEL}, and the embedded default model (models/default) is missing; "
            "pass LLM(model=DIR)")
    if notice:
        print(f"deepinfer: no model given (DEEPINFER_HF_MODEL_DIR unset, no Hugging Face cache "
              f"copy of {DEFAULT_HF_MODEL}); using the embedded default model at {default}",
              file=sys.stderr)
    return str(default)


class _Progress:
    """tqdm when installed, else a one-line counter on stderr."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.bar = total, 0, None
        self.enabled = enabled and total > 0
        self.t0 = time.perf_counter()
        if not self.enabled:
            return
        try:
            from tqdm import tqdm  # type: ignore
            self.bar = tqdm(total=total, desc="Processed prompts", dynamic_ncols=True)
        except ImportError:
            self.bar = None

    def update(self, n: int, out_tokens: int) -> None:
        self.done += n
        if not self.enabled or n == 0:
            return
        if self.bar is not None:
            self.bar.update(n)
            return
        rate = out_tokens / max(time.perf_counter() - self.t0, 1e-9)
        end = "\n" if self.done >= self.total else ""
        print(f"\rProcessed prompts: {self.done}/{self.total} ({rate:.1f} output tok/s)",
              end=end, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _is_token_list(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(
        isinstance(t, int) and not isinstance(t, bool) for t in x)


class LLM:
    """A DeepSeek-V4 or V4.1 model behind the continuous-batching engine (CPU or CUDA
    backend)."""

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        *,
        tokenizer: str | None = None,
        max_num_seqs: int = 64,
        max_num_batched_tokens: int = 2048,
        max_model_len: int | None = None,
        num_kv_blocks: int | None = None,
        kv_block_size: int | None = None,
        num_threads: int | None = None,
        async_scheduling: bool = True,
        batch_invariant: bool | None = None,
        enable_prefix_caching: bool = True,
        prefix_cache_bytes: int | None = None,
        backend: str | None = None,
        sampling_threads: int | None = None,
        sample_on: str = "auto",
        speculative_config: dict | None = None,
        speculative_varlen: bool | None = None,
        speculative_trace: str | None = None,
        load_format: str = "auto",
        data_parallel_size: int = 1,
        enable_expert_parallel: bool = False,
        tensor_parallel_size: int = 1,
        enable_eplb: bool = False,
        num_redundant_experts: int = 0,
        eplb_step_interval: int = 3000,
        eplb_window_size: int = 1000,
        context_parallel_size: int = 1,
        cuda_devices: list[int] | None = None,
    ):
        # async_scheduling: plan step N+1 while step N runs (identical outputs); off: every
        # step runs start to end in step(). batch_invariant None: DEEPINFER_BATCH_INVARIANT.
        # enable_prefix_caching: reuse repeated prompt prefixes (identical outputs);
        # prefix_cache_bytes bounds the state snapshots kept for it (None: 1 GiB).
        # backend: "opt" (CPU), "ref" (the FP32 oracle), "cuda"; None: DEEPINFER_ACCELERATOR.
        # sampling_threads: host threads drawing a step's tokens (None: min(8, cores)); the
        # outputs do not depend on it. sample_on: "auto" (draw on a GPU backend when the step's
        # requests need no grammar, penalties, logprobs or min_tokens), "backend", "host"; the
        # tokens are the same either way.
        # speculative_config (vLLM's form): {"method": "auto" | "mtp" | "dspark" | "ngram" |
        # "off", "num_speculative_tokens": k}; "auto" is the checkpoint's own drafter, k
        # defaults to DEEPINFER_USE_NEXTN_DECODE (5). None: no speculation. Outputs are
        # identical either way (docs/speculative.md).
        # speculative_config["acceptance"]: "identical" (default: outputs bitwise those
        # without speculation), "residual" (DSpark drafts sampled from the drafter's
        # distribution and judged by rejection sampling with the residual: the same target
        # distribution, more drafts accepted; requests without a seed only) or
        # "residual-always" (seeded requests too).
        # speculative_varlen: confidence-scheduled verification (None:
        # DEEPINFER_ENABLE_MTP_VARLEN). speculative_trace: with it, a CSV file the engine appends
        # a line to per step, for diagnosing its decisions (None: DEEPINFER_VARLEN_TRACE; "":
        # none; docs/speculative.md, "The varlen trace").
        # load_format (vLLM's name): "auto" reads the model directory's safetensors; "dummy"
        # needs only config.json and generates random weights on the backend (the same on every
        # load, no drafter): a full-size layer stack to time without a checkpoint, not a model
        # to read. Text prompts still need a tokenizer (`tokenizer`, or tokenizer.json in the
        # directory); token-id prompts do not.
        # data_parallel_size (vLLM's name): ranks in this process (threads, CPU backends), each
        # serving whole requests with its own scheduler and KV pages; the outputs are those of
        # one rank. enable_expert_parallel: the ranks (data- or tensor-parallel) split the
        # routed experts and step in lockstep. tensor_parallel_size: ranks holding shards of the
        # dense weights, stepping every batch together (inside each data-parallel rank when both
        # are given; with enable_expert_parallel too, the experts split over all the cores);
        # sizes < 1 raise; on the CUDA backend data parallelism runs each rank on a GPU of its
        # own, and the other kinds of ranks raise (not built on GPUs). docs/parallel.md.
        # enable_eplb (vLLM's names, with enable_expert_parallel over data- or tensor-parallel
        # ranks):
        # count each layer's expert loads over the last eplb_window_size steps and re-place the
        # experts by DeepSeek's EPLB policy every eplb_step_interval steps (0: only on
        # rebalance_experts()), with num_redundant_experts extra replicas of the hottest ones;
        # outputs are unchanged. context_parallel_size: ranks splitting every forward's rows by
        # causal attention work (zig-zag), for long prefills; DeepSeek-V4 and V4.1 on the CPU
        # backends, alone or inside data-parallel ranks, with or without enable_expert_parallel,
        # with tensor_parallel_size as a grid of cores or not; outputs are unchanged.
        # cuda_devices (backend "cuda"): each data-parallel rank's GPU, in rank order (None:
        # rank r on GPU r); a GPU may be named twice. docs/parallel.md.
        spec = dict(speculative_config or {})
        spec_method = str(spec.pop("method", "auto" if speculative_config else "off"))
        spec_tokens = spec.pop("num_speculative_tokens", None)
        spec_acceptance = str(spec.pop("acceptance", "identical"))
        if spec:
            raise ValueError(
                f"speculative_config: unknown keys {sorted(spec)}; give 'method', "
                "'num_speculative_tokens' and 'acceptance'")
        self.model_dir = resolve_model_dir(model)
        self._tokenizer_path = tokenizer
        self._engine = _core.EngineLoop(
            self.model_dir, tokenizer_path=tokenizer or "", max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len or 0,
            num_kv_blocks=num_kv_blocks or 0, kv_block_size=kv_block_size or 0,
            num_threads=-1 if num_threads is None else num_threads,
            async_scheduling=bool(async_scheduling), batch_invariant=batch_invariant,
            enable_prefix_caching=bool(enable_prefix_caching),
            prefix_cache_bytes=prefix_cache_bytes or 0, backend=backend or "",
            sampling_threads=sampling_threads or 0, sample_on=sample_on,
            speculative_method=spec_method,
            num_speculative_tokens=-1 if spec_tokens is None else int(spec_tokens),
            speculative_varlen=speculative_varlen,
            speculative_trace=speculative_trace,
            speculative_acceptance=spec_acceptance,
            load_format=load_format,
            data_parallel_size=int(data_parallel_size),
            enable_expert_parallel=bool(enable_expert_parallel),
            tensor_parallel_size=int(tensor_parallel_size),
            enable_eplb=bool(enable_eplb),
            num_redundant_experts=int(num_redundant_experts),
            eplb_step_interval=int(eplb_step_interval),
            eplb_window_size=int(eplb_window_size),
            context_parallel_size=int(context_parallel_size),
            cuda_devices=[int(d) for d in (cuda_devices or [])])

    # -- information ------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._engine.vocab_size

    @property
    def max_model_len(self) -> int:
        return self._engine.max_model_len

    def describe(self) -> str:
        return self._engine.describe()

    def stats(self) -> dict:
        return self._engine.stats()

    def rebalance_experts(self) -> None:
        """EPLB (enable_eplb): re-place the experts from the expert loads counted so far, between
        two engine steps (stats() then shows eplb_rebalances and the balance before and after).
        Raises ValueError without EPLB."""
        self._engine.rebalance_experts()

    def encode(self, text: str) -> list[int]:
        self._need_tokenizer("encode")
        return self._engine.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._engine.decode(list(ids))

    def get_tokenizer(self):
        """The model's tokenizer (deepinfer.tokenizer.Tokenizer: encode, decode, ...), as vLLM's
        LLM.get_tokenizer() returns its tokenizer."""
        from deepinfer.tokenizer import Tokenizer

        self._need_tokenizer("get_tokenizer")
        return Tokenizer.from_file(self._tokenizer_path or self.model_dir)

    def _need_tokenizer(self, what: str) -> None:
        if not self._engine.has_tokenizer:
            raise ValueError(f"{what}: no tokenizer for the model at {self.model_dir} "
                             f"({self._engine.no_tokenizer_reason}); give token-id prompts (lists of ints)")

    # -- generation -------------------------------------------------------------------------
    def _normalize(self, prompts: Any) -> list[tuple[str | None, list[int]]]:
        if isinstance(prompts, (str, dict)) or _is_token_list(prompts):
            prompts = [prompts]
        if not isinstance(prompts, (list, tuple)):
            raise ValueError("prompts: expected a str, a list of str, or a list of token-id "
                             f"lists, got {type(prompts).__name__}")
        out = []
        for i, p in enumerate(prompts):
            if isinstance(p, dict):
                if "prompt_token_ids" in p:
                    p = list(p["prompt_token_ids"])
                elif "prompt" in p:
                    p = p["prompt"]
                else:
                    raise ValueError(f"prompt {i}: a dict prompt needs 'prompt' or "
                                     "'prompt_token_ids'")
            if isinstance(p, str):
                self._need_tokenizer(f"prompt {i}")
                ids = self._engine.encode(p)
                text: str | None = p
            elif isinstance(p, (list, tuple)) and all(
                    isinstance(t, int) and not isinstance(t, bool) for t in p):
                ids, text = list(p), None
            else:
                raise ValueError(f"prompt {i}: expected a str or a list of token ids, got "
                                 f"{type(p).__name__}")
            if not ids:
                raise ValueError(f"prompt {i} is empty: give at least one token")
            vocab = self.vocab_size
            for j, t in enumerate(ids):
                if t < 0 or t >= vocab:
                    raise ValueError(f"prompt {i}: token {j} is id {t}, outside the model's "
                                     f"vocabulary [0, {vocab})")
            if len(ids) >= self.max_model_len:
                raise ValueError(f"prompt {i} has {len(ids)} tokens; the model's maximum "
                                 f"(max_model_len) is {self.max_model_len}, which must also "
                                 "leave room for one generated token")
            out.append((text, ids))
        return out

    def _params_list(self, params: Any, n: int) -> list[SamplingParams]:
        if params is None:
            params = SamplingParams()
        if isinstance(params, SamplingParams):
            plist = [params] * n
        elif isinstance(params, (list, tuple)):
            if len(params) != n:
                raise ValueError(f"sampling_params: {len(params)} given for {n} prompts; give one "
                                 "SamplingParams or one per prompt")
            plist = list(params)
        else:
            raise ValueError("sampling_params: expected a SamplingParams or a list of them, got "
                             f"{type(params).__name__}")
        for i, p in enumerate(plist):
            if not isinstance(p, SamplingParams):
                raise ValueError(f"sampling_params[{i}]: expected SamplingParams, got "
                                 f"{type(p).__name__}")
            if p.so_args is not None and not self._engine.has_tokenizer:
                raise ValueError(f"sampling_params[{i}]: so_args (structured outputs) needs a "
                                 f"tokenizer: {self._engine.no_tokenizer_reason}")
            if p.stop and not self._engine.has_tokenizer:
                raise ValueError(f"sampling_params[{i}]: stop strings need a tokenizer: "
                                 f"{self._engine.no_tokenizer_reason} (use stop_token_ids)")
        return plist

    @staticmethod
    def _logprob_dict(e: dict) -> dict:
        entry = {t: Logprob(l, r + 1) for r, (t, l) in enumerate(e["top"])}
        entry[e["token"]] = Logprob(e["logprob"], e["rank"])
        return entry

    def _wrap(self, d: dict, want_logprobs: bool) -> RequestOutput:
        outs = []
        for c in d["outputs"]:
            lps, cum = None, None
            if want_logprobs and c["logprobs"] is not None:
                lps, cum = [], 0.0
                for e in c["logprobs"]:
                    entry = {t: Logprob(l, r + 1) for r, (t, l) in enumerate(e["top"])}
                    entry[e["token"]] = Logprob(e["logprob"], e["rank"])
                    lps.append(entry)
                    cum += e["logprob"]
            outs.append(CompletionOutput(
                index=c["index"], text=c["text"], token_ids=list(c["token_ids"]),
                cumulative_logprob=cum, logprobs=lps, finish_reason=c["finish_reason"] or None,
                stop_reason=c["stop_reason"], error=c["error"] or None))
        plp = None
        if d.get("prompt_logprobs") is not None:
            plp = [None] + [self._logprob_dict(e) for e in d["prompt_logprobs"]]
        return RequestOutput(request_id=str(d["id"]), prompt=d["prompt"] or None,
                             prompt_token_ids=list(d["prompt_token_ids"]), outputs=outs,
                             finished=d["finished"], error=d["error"] or None,
                             prompt_logprobs=plp,
                             num_cached_tokens=d.get("num_cached_tokens", 0))

    def generate(self, prompts: Any, sampling_params: SamplingParams | Sequence[SamplingParams]
                 | None = None, *, use_tqdm: bool = True) -> list[RequestOutput]:
        """One RequestOutput per prompt, in prompt order."""
        items = self._normalize(prompts)
        plist = self._params_list(sampling_params, len(items))
        handles = []
        try:
            for (text, ids), p in zip(items, plist):
                h = self._engine.submit(ids, self._engine_params(p), text or "")
                handles.append((h, text, p.logprobs is not None))
        except Exception:
            self._abort_and_drain([h for h, _, _ in handles], set())
            raise
        results: dict[int, dict] = {}
        bar = _Progress(len(handles), use_tqdm)
        tokens = 0
        rejected = None
        try:
            while len(results) < len(handles):
                done = self._engine.wait_done(100)  # the GIL is released while waiting
                for ev in done:
                    d = ev["output"]
                    results[d["id"]] = d
                    tokens += sum(len(c["token_ids"]) for c in d["outputs"])
                    if ev["rejected"] and rejected is None:
                        rejected = d["error"]
                bar.update(len(done), tokens)
                if rejected is not None:
                    # After the whole batch is recorded: a request that ended in this batch must
                    # not be waited for again (its final event came already).
                    self._abort_and_drain([h for h, _, _ in handles], results)
        except KeyboardInterrupt:
            self._abort_and_drain([h for h, _, _ in handles], results)
            raise
        finally:
            bar.close()
        if rejected is not None:
            raise ValueError(rejected)
        outs = []
        for h, text, want_lp in handles:
            o = self._wrap(results[h], want_lp)
            o.prompt = text
            outs.append(o)
        return outs

    @staticmethod
    def _engine_params(p: SamplingParams) -> dict:
        d = p.to_engine_dict()
        if p.so_args is not None:
            d["structured"] = p.structured_engine_dict()
        return d

    def _abort_and_drain(self, handles: list[int], results) -> None:
        """Aborts the requests not in `results` and waits for their final events."""
        live = [h for h in handles if h not in results]
        for h in live:
            try:
                self._engine.abort(h)
            except (ValueError, FileNotFoundError):
                pass  # it ended meanwhile (NotFound): its final event is still on its way
        left = set(live)
        while left:
            for ev in self._engine.wait_done(100):
                left.discard(ev["output"]["id"])
                if isinstance(results, dict):
                    results[ev["output"]["id"]] = ev["output"]

    def generate_stream(self, prompt: Any, sampling_params: SamplingParams | None = None):
        """Yields StreamDelta pieces of one prompt's samples as the engine produces them (the
        engine runs on its own thread; the GIL is released while waiting). The last item has
        `output`: the whole RequestOutput. Closing the generator early aborts the request."""
        (text, ids), = self._normalize(prompt)
        p, = self._params_list(sampling_params, 1)
        stream = self._engine.submit_stream(ids, self._engine_params(p), text or "")
        finished = False
        try:
            while True:
                ev = stream.next(100)
                if ev is None:
                    continue
                if ev["done"]:
                    finished = True
                    d = ev["output"]
                    if ev["rejected"]:
                        raise ValueError(d["error"])
                    o = self._wrap(d, p.logprobs is not None)
                    o.prompt = text
                    yield StreamDelta(index=0, text="", token_ids=[], finished=True,
                                      finish_reason=o.outputs[0].finish_reason if o.outputs
                                      else None, output=o)
                    return
                yield StreamDelta(index=ev["index"], text=ev["text"],
                                  token_ids=list(ev["token_ids"]), finished=ev["finished"],
                                  finish_reason=ev["finish_reason"] or None)
        finally:
            if not finished:
                try:
                    self._engine.abort(stream.id)
                except (ValueError, FileNotFoundError):
                    pass  # it ended meanwhile
                while stream.next(100) is not None or not stream.done:
                    pass

    def chat(self, messages: list[dict] | list[list[dict]],
             sampling_params: SamplingParams | Sequence[SamplingParams] | None = None, *,
             thinking: bool = False, use_tqdm: bool = True, tools: Iterable[dict] | None = None,
             reasoning_effort: str | None = None, **render_kwargs: Any) -> list[RequestOutput]:
        """Chat in the DeepSeek-V4 format: one conversation (list of messages) or several.

        Each completion gets `reasoning_content`, `content` and `tool_calls` from the V4
        output parser; `text` stays the raw generated text.
        """
        from deepinfer.chat import parse_assistant_output, render_chat

        self._need_tokenizer("chat")
        if not isinstance(messages, (list, tuple)) or not messages:
            raise ValueError("chat: messages must be a non-empty list of message dicts (or a list "
                             "of such lists)")
        convs = [messages] if isinstance(messages[0], dict) else list(messages)
        prompts = [render_chat(list(c), thinking=thinking, tools=tools,
                               reasoning_effort=reasoning_effort, **render_kwargs) for c in convs]
        outs = self.generate(prompts, sampling_params, use_tqdm=use_tqdm)
        for o in outs:
            for c in o.outputs:
                parsed = parse_assistant_output(c.text, thinking=thinking)
                c.reasoning_content = parsed.get("reasoning_content") or None
                c.content = parsed.get("content") or ""
                c.tool_calls = parsed.get("tool_calls") or []
        return outs
