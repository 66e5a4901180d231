// Public parameter and result types of the DeepInfer engine (what the CLI, the server and the
// Python bindings see; no tensors, no kernels).
//
// SamplingParams (sampling_params.h: vLLM names and defaults, plus seq_seed, every field's
// meaning and range) is the sampler's own struct, not a copy, so the validation rules live in
// one place. Results are plain vectors and strings so a front end can copy them across a
// language boundary without knowing the engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "deepinfer/sampling_params.h"

namespace deepinfer {

struct EngineOptions {
  // A Hugging Face model directory (config.json, safetensors, optionally tokenizer.json).
  std::string model_dir;
  // Where the weights come from (vLLM's --load-format): "auto" reads the directory's
  // safetensors; "dummy" needs only config.json and generates every weight the config implies
  // with random values where it lives (on a GPU by a kernel, no host copy), the same bits on
  // every load (seed 0) and without the MTP / DSpark drafter: a full-size layer stack to time
  // without a checkpoint on disk, not a model to read text with. Text prompts still need a
  // tokenizer (tokenizer_path, or tokenizer.json in model_dir); token-id prompts do not.
  std::string load_format = "auto";
  // tokenizer.json or its directory; empty: <model_dir>/tokenizer.json when it exists. Without
  // a tokenizer the engine takes token-id prompts only and returns no text.
  std::string tokenizer_path;
  int32_t max_num_seqs = 64;              // running sequences at once
  int64_t max_num_batched_tokens = 2048;  // per-step token budget (chunked prefill + decodes)
  int64_t max_model_len = 0;              // 0: min(max_position_embeddings, 8192)
  // The scheduler's KV block accounting: admission, preemption and prefix hits count in these
  // blocks, so they bound how many tokens may be live at once (the model keeps the rows in its
  // own page pools in the backend's memory). 0 blocks: enough for max_num_seqs sequences of
  // max_model_len tokens.
  int32_t num_kv_blocks = 0;
  int32_t kv_block_size = 0;  // 0: 128 x the largest compression ratio's lcm, at least 128
  int num_threads = -1;       // CPU worker threads; -1: DEEPINFER_NUM_THREADS (0 = all cores)
  // Host threads drawing the tokens of one step (the requests' draws are independent, results
  // identical for every count); 0: min(8, hardware threads). A GPU step waits for them.
  int sampling_threads = 0;
  // Where the tokens of requests without grammar, penalties, logprobs or (still active)
  // min_tokens are drawn: "auto" on the backend when its memory is a device's (a GPU returns
  // token ids instead of vocabulary-sized logits rows), "backend" always, "host" never. The
  // tokens are the same bits either way (sample/sample_spec.h, kernels/cuda/sample).
  std::string sample_on = "auto";
  // "opt" (CPU), "ref" (the FP32 oracle: slow, tests), "cuda"; empty: DEEPINFER_ACCELERATOR
  // (nvidia = cuda; cpu or unset = opt).
  std::string backend;
  // Plan step N+1 on the calling thread while step N's forward and sampling run on a worker
  // thread (vLLM v1 / SGLang "zero-overhead" scheduling). Outputs are identical either way;
  // off: every step runs start to end on the calling thread.
  bool async_scheduling = true;
  // Bitwise identical results for a request whatever else shares its batches. Unset:
  // DEEPINFER_BATCH_INVARIANT. The CPU backends are batch-invariant by construction; the CUDA
  // backend picks batch-invariant kernels when this is on (slower at small batches).
  std::optional<bool> batch_invariant;
  // Reuse the computed state of a repeated prompt prefix (system prompt, multi-turn chat) at KV
  // block granularity; outputs are identical with and without a hit. prefix_cache_bytes bounds
  // the sequence-state snapshots kept for it (0: 1 GiB); an evicted one is recomputed on a hit.
  bool enable_prefix_caching = true;
  int64_t prefix_cache_bytes = 0;
  // Speculative decoding (docs/speculative.md): a drafter proposes up to num_speculative_tokens
  // tokens per request and step, and one forward verifies them; outputs are bitwise those of
  // decoding without it (greedy and seeded sampling alike). speculative_method: "off" (the
  // default: on the models measured so far drafting costs more than it saves; figures in
  // docs/speculative.md), "auto" (the checkpoint's own drafter: DSpark for DeepSeek-V4.1, MTP
  // for DeepSeek-V4; none for checkpoints without one), "mtp", "dspark", "ngram" (prompt
  // lookup, any model). num_speculative_tokens: -1 = DEEPINFER_USE_NEXTN_DECODE (default 5),
  // 0 = off, at most 16.
  std::string speculative_method = "off";
  int32_t num_speculative_tokens = -1;
  // Confidence-scheduled ("varlen") verification: per step, each request verifies only the
  // draft prefix whose expected accepted tokens per second of step time still rise (the
  // drafter's confidences against the step-cost curve measured on the backend); off: every
  // request verifies all its drafts. Outputs are identical either way. Unset:
  // DEEPINFER_ENABLE_MTP_VARLEN (default off).
  std::optional<bool> speculative_varlen;
  // With varlen: a CSV file the engine appends a line to per step (rows, times, tokens, drafts,
  // the controller's decisions; docs/speculative.md, "The varlen trace"). Unset:
  // DEEPINFER_VARLEN_TRACE (default none); "" = none.
  std::optional<std::string> speculative_trace;
  // How a sampled request's drafts are judged (docs/speculative.md, "Acceptance"):
  // "identical" (the default): a draft survives when it equals the target's own seeded draw at
  // its position, so outputs are bitwise those without speculation. "residual": drafters that
  // report full distributions (DSpark) draw their drafts from q (the request's temperature and
  // filters over the draft logits) and verification accepts d with probability min(1, p(d) /
  // q(d)), else draws from the residual max(0, p - q): the same target distribution, more drafts
  // accepted, but a seeded request's tokens then depend on the speculation settings, so it
  // applies to requests without a seq_seed only (greedy requests, requests asking for logprobs
  // and other drafters keep "identical"). "residual-always": seeded requests too.
  std::string speculative_acceptance = "identical";
  // SWA bounded replay (DeepSeek-V4.1 only; docs/bounded_replay.md), an approximation, off by
  // default. "compact": a prompt's prefill runs the layers above the last KV-source layer only
  // on its last prefill_keep_tokens tokens (the layers below run every token), and a prefix hit
  // whose snapshot kept only its compressed part recomputes only that many tokens instead of
  // the whole prefix. Requests with prompt_logprobs run the full prefill. "none" or "": off.
  // Unset: DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE. A V4 model with "compact" is refused.
  std::optional<std::string> prefill_truncation_mode;
  // Tokens kept: at least the sliding window + num_speculative_tokens (refused otherwise).
  // 0: DEEPINFER_YOCO_PREFILL_KEEP_TOKENS (default 140).
  int32_t prefill_keep_tokens = 0;
  // Ranks (vLLM's names; docs/parallel.md, "The data-parallel engine"). data_parallel_size N > 1
  // runs N attention-data-parallel ranks in this process, one thread each, on the CPU backends:
  // each rank has its own backend, model, scheduler, KV pages and prefix cache and owns whole
  // requests, which a front scheduler places by load; outputs are those of one rank.
  // enable_expert_parallel: the ranks split the routed experts (each loads its contiguous
  // share) and step in lockstep; off: every rank holds the whole model and steps on its own.
  // With one rank it changes nothing. tensor_parallel_size N > 1 (docs/parallel.md, "Tensor
  // parallelism"): N ranks holding shards of the weights (every routed expert's rows too, unless
  // enable_expert_parallel splits the experts whole) run every step of one request stream
  // together; with data_parallel_size, inside each data-parallel rank (expert parallelism then
  // spans every core). On the CUDA backend, data_parallel_size alone runs each rank on a GPU of
  // its own (cuda_devices); tensor, expert and context parallelism on GPUs are refused (their
  // device-to-device exchange over NCCL is not built). Values below 1 are refused.
  int32_t data_parallel_size = 1;
  bool enable_expert_parallel = false;
  int32_t tensor_parallel_size = 1;
  // Context parallelism (docs/parallel.md, "Context parallelism"): N > 1 ranks in this process,
  // one thread each, on the CPU backends, every rank with the whole model and the same requests
  // and batches; in every forward each sequence's new rows are split zig-zag over the ranks
  // (equal causal attention work, the point for long prefills) and the caches are gathered
  // whole on every rank; outputs are the single engine's. DeepSeek-V4 and V4.1; inside each
  // data-parallel rank when data_parallel_size > 1; with enable_expert_parallel the routed
  // experts split over the ranks (all the cores); with tensor_parallel_size T > 1 each rank is
  // a tensor-parallel group of T cores (a grid, with any of the above); not with bounded replay
  // (prefill_truncation_mode compact); not on CUDA. Values below 1 are refused.
  int32_t context_parallel_size = 1;
  // The GPUs of the CUDA backend (ids as CUDA numbers them, after CUDA_VISIBLE_DEVICES): one per
  // data-parallel rank, in rank order, or one for the single engine. Empty: rank r on GPU r
  // (GPU 0 for one rank). A GPU may be named twice (ranks sharing it, each with its own memory
  // and stream: tests, or models far smaller than the card). Ignored on the CPU backends; a
  // count that is not the rank count, or an id the machine lacks, is refused.
  std::vector<int32_t> cuda_devices;
  // EPLB while serving (vLLM's names; docs/parallel.md, "EPLB in the engine"), with
  // enable_expert_parallel over data_parallel_size > 1 ranks only (refused otherwise): the
  // routers count each layer's expert loads over the last eplb_window_size engine steps, and
  // every eplb_step_interval steps (0: only on Engine::rebalance_experts) the experts are
  // re-placed by DeepSeek's EPLB policy, num_redundant_experts extra replicas of the hottest
  // ones included (routed experts + num_redundant_experts must be a multiple of
  // data_parallel_size), between two steps: requests in flight go on, their outputs unchanged.
  bool enable_eplb = false;
  int32_t num_redundant_experts = 0;
  int32_t eplb_step_interval = 3000;
  int32_t eplb_window_size = 1000;
};

struct TokenLogprobs {
  int32_t token = 0;  // the sampled token
  float logprob = 0.0f;
  int32_t rank = 0;
  std::vector<std::pair<int32_t, float>> top;  // top-n (token, logprob), best first
};

// One sample of a request (index i of n).
struct CompletionOutput {
  int32_t index = 0;
  std::string text;  // generated text (stop string excluded), empty without a tokenizer
  std::vector<int32_t> token_ids;
  // "stop", "length" (max_tokens or the model's length), "abort", "error"; empty while running.
  std::string finish_reason;
  std::optional<int32_t> stop_reason;   // the stop token id, when one ended it
  std::vector<TokenLogprobs> logprobs;  // one per generated token when params.logprobs is set
  std::string error;                    // finish_reason == "error": why
  int32_t num_preemptions = 0;
};

using RequestHandle = int64_t;

struct RequestOutput {
  RequestHandle id = 0;
  std::string prompt;  // the text prompt, when one was given
  std::vector<int32_t> prompt_token_ids;
  std::vector<CompletionOutput> outputs;  // n of them, by index
  bool finished = false;
  // Set when the request failed as a whole (bad prompt); every output then carries it too.
  std::string error;
  // Prompt tokens taken from the prefix cache instead of computed (the first sample's first
  // scheduling; usage.prompt_tokens_details.cached_tokens in the OpenAI API).
  int64_t num_cached_tokens = 0;
  // SamplingParams::prompt_logprobs: one entry per prompt token after the first (entry i is
  // prompt token i + 1 given tokens 0..i); empty otherwise.
  std::vector<TokenLogprobs> prompt_logprobs;
};

// One streamed piece of one sample: the text (and tokens) that became final this step.
struct StreamDelta {
  RequestHandle id = 0;
  int32_t index = 0;  // sample index
  std::string text;
  std::vector<int32_t> token_ids;
  bool finished = false;
  std::string finish_reason;
  // One entry per token of token_ids when SamplingParams::logprobs is set.
  std::vector<TokenLogprobs> logprobs;
  std::optional<int32_t> stop_reason;  // finished: the stop token id, when one ended it
  std::string error;                   // finish_reason == "error": why
};

}  // namespace deepinfer
