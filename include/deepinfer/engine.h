// deepinfer::Engine: the public face of the inference engine (continuous batching over one
// model, sampling, stop checks, incremental detokenization).
//
//   DI_ASSIGN_OR_RETURN(auto engine, Engine::create({.model_dir = "/models/v4"}));
//   SamplingParams p;  p.temperature = 0;  p.max_tokens = 32;
//   DI_ASSIGN_OR_RETURN(RequestHandle h, engine->submit_text("Hello", p));
//   for (const RequestOutput& out : engine->run_until_done()) ...
//
// step() advances by one scheduler step: plan, one model forward over every scheduled request,
// sampling, stop checks, detokenization, bookkeeping. With EngineOptions::async_scheduling
// (the default) the forward and sampling run on a worker thread while step() plans the next
// step, so a step() call returns the outputs of the step before the one it launched; outputs
// are identical to the synchronous engine's. Not thread-safe; one thread drives it, and stream
// callbacks run on that thread. Every submitted request ends exactly once, as an output
// from step()/run_until_done(): finished, aborted, or failed with an error message; a failure
// of one request never ends another.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/params.h"
#include "deepinfer/status.h"

namespace deepinfer {

namespace runtime {
class EngineDriver;
}

struct EngineStats {
  int64_t steps = 0;
  int64_t prompt_tokens = 0;     // prefill tokens computed (recomputation included)
  int64_t generated_tokens = 0;  // tokens sampled
  int64_t preemptions = 0;
  double forward_seconds = 0;  // model forward (on the executor)
  double sample_seconds = 0;   // sampling + structured-output masks (on the executor)
  // The engine thread's own work: schedule + prepare inputs + stop checks + detokenize +
  // callbacks + update (waiting for the executor excluded).
  double host_seconds = 0;
  // Time the executor sat idle between two steps waiting for the host (the "gap"). With
  // asynchronous scheduling it is only what cannot overlap: filling the previous step's
  // tokens into the next plan. It includes the caller's time between step() calls.
  double gap_seconds = 0;
  // Prefix caching: prompt tokens not computed thanks to a hit, and how hits were served (a
  // snapshot of the sequence state, or a recompute when the snapshot had been evicted).
  int64_t prefix_hit_tokens = 0;
  int64_t prefix_restores = 0;
  int64_t prefix_recomputes = 0;
  // SWA bounded replay (EngineOptions::prefill_truncation_mode): prompt rows the layers above
  // the last KV source did not run, prefix hits served by recomputing only their last window
  // from a snapshot's compressed part, and the tokens those replays recomputed.
  int64_t replay_skipped_rows = 0;
  int64_t prefix_window_replays = 0;
  int64_t prefix_window_replay_tokens = 0;
  // Speculative decoding: steps of a request that verified drafts, the draft tokens they fed,
  // and how many of those the target accepted (acceptance length = 1 + accepted / verify
  // steps), and the drafters' time (on the executor, after sampling).
  int64_t spec_verify_steps = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  int64_t spec_grammar_cut_tokens = 0;  // drafts a structured output's grammar refused (not fed)
  // Times a drafter's window restarted empty because positions it needed were gone and the
  // rows it had left did not refill it (MTP: a sequence restored from a prefix snapshot that
  // held the block behind it, a failed block step): its drafts are weaker until the window
  // refills (docs/speculative.md).
  int64_t spec_draft_window_restarts = 0;
  double draft_seconds = 0;
  // Confidence-scheduled verification (speculative_varlen): probes of whether drafting pays
  // that passed and failed (a failure, measured or predicted, pauses drafting at that batch
  // size), and the plans made while paused (docs/speculative.md).
  int64_t spec_varlen_probes_passed = 0;
  int64_t spec_varlen_probes_failed = 0;
  int64_t spec_varlen_paused_plans = 0;
  // The latest varlen decisions (at most 8, oldest first): a measured probe over `steps` steps
  // (tokens per executor second against the step-cost curve's plain estimate, as `ratio`; it
  // passes at >= 1), or a loss the budget predicted without probing (steps 0, its expected
  // ratio). `decodes`: the probe's mean decodes per step (the batch it judged). With data
  // parallelism every rank decides for its own batches: the latest 8 over all ranks by plan
  // step, each with its `rank` (0 on a single engine).
  struct SpecProbe {
    int64_t plan_step = 0;
    double decodes = 0;
    int steps = 0;
    double ratio = 0;
    bool passed = false;
    double tokens = 0, spent_seconds = 0, plain_seconds = 0;
    int rank = 0;
    // The drafting seconds per step the controller charged at that batch size when it decided
    // (its estimate; for a prediction, what made it).
    double draft_cost_seconds = 0;
    // A probe's parts: the drafting seconds in spent_seconds, and the sampling seconds in
    // plain_seconds (the rest of it is the step-cost curve's forward estimate).
    double draft_spent_seconds = 0, plain_sample_seconds = 0;
  };
  std::vector<SpecProbe> spec_varlen_recent_probes;
  // The step-cost curve varlen decides from, as of the last step: (tokens, seconds) at 1, 2, 4,
  // .., 512 tokens per step (start-up seeds until live steps of that size replace them); empty
  // without varlen. What a verify size costs against the decode step it replaces.
  std::vector<std::pair<int64_t, double>> spec_step_cost_seconds;
  // A drafter that reads the model's drafter context (DSpark), varlen: (tokens, share) of a
  // forward of that many tokens the context costs, measured at start-up; the pause controller
  // takes it off the plain estimate (plain decoding computes no context). Empty otherwise.
  std::vector<std::pair<int64_t, double>> spec_draft_context_share;
  // CUDA graphs (a recording backend; all 0 otherwise): steps during which a recorded unit ran
  // its one-time setup (a first run or a graph capture) instead of a replay, and the executor
  // seconds those steps took (forward, sampling, drafting); graphs captured, replays, and the
  // times every recording was dropped because the buffers they use moved (a step bigger than
  // any before grew them). Setups cost what later steps of their shape do not.
  int64_t graph_setup_steps = 0;
  double graph_setup_seconds = 0;
  int64_t graph_captures = 0;
  int64_t graph_replays = 0;
  int64_t graph_drops = 0;
  // Seconds the engine spent at start-up recording every step size's graphs (a recording
  // backend only; EngineCore::capture_graphs).
  double graph_startup_seconds = 0;
  // KV memory (model/deepseek_v4/cache.h page pools, in the backend's memory): what the pools
  // have taken from the backend (kept and recycled, never returned while the engine lives), and
  // the most that sequences and prefix snapshots held at once, sampled after every step.
  int64_t kv_bytes_reserved = 0;
  int64_t kv_bytes_in_use_peak = 0;
  // Gauges, as of the end of the last step (for /metrics): scheduler requests (samples)
  // running and waiting, KV blocks of the scheduler's pool held by live sequences (cached free
  // blocks excluded) out of its total, the model's KV bytes in use now, and the prefix cache's
  // queries (sequences started, their known tokens) and hits (tokens taken from the cache).
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_in_use = 0;
  int64_t kv_bytes_in_use = 0;
  int64_t prefix_queries = 0;
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_sequences = 0;
  int64_t prefix_cache_hit_tokens = 0;
  // What the prefix cache keeps (gauges, same moment): the scheduler's KV blocks published in
  // it (hashed; free ones count in kv_blocks_total - kv_blocks_in_use), the sequence-state
  // snapshots kept for hits, and the bytes those may pin (their footprint: every row they can
  // read, shared or not; an upper bound on their share of kv_bytes_in_use).
  int64_t kv_blocks_cached = 0;
  int64_t prefix_snapshots = 0;
  int64_t prefix_snapshot_bytes = 0;
  // EPLB (EngineOptions::enable_eplb): rebalances done, routed experts the ranks bound anew in
  // them (a replica moved to a rank counts once per rank), and the last one's balance (max /
  // mean load over the ranks, averaged over the layers; 1.0 is perfect) of the counted window
  // under the placement before it and under the new one. 0 before the first.
  int64_t eplb_rebalances = 0;
  int64_t eplb_experts_bound = 0;
  double eplb_balance_before = 0;
  double eplb_balance_after = 0;
};

class Engine {
 public:
  // Called with every delta of one request as soon as its text becomes final (stop strings
  // are held back until they can no longer match).
  using StreamCallback = std::function<void(const StreamDelta&)>;

  // Loads the model onto the backend EngineOptions::backend names (the CPU opt backend by
  // default, CUDA on an NVIDIA GPU) and the tokenizer. Errors name the directory / file. With
  // EngineOptions::data_parallel_size > 1 the engine runs that many ranks inside (the same API:
  // request handles, streaming, abort and outputs as with one; docs/parallel.md).
  static Expected<std::unique_ptr<Engine>> create(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Invalid sampling parameters (or stop strings without a tokenizer) are an
  // InvalidArgument error and nothing is queued. A bad prompt (empty, longer than
  // max_model_len, a token id outside the vocabulary) is queued and ends at the next step() as
  // a failed output whose error says why.
  Expected<RequestHandle> submit(std::span<const int32_t> prompt_ids, const SamplingParams& params,
                                 StreamCallback on_delta = {});
  // Encodes `prompt` with the tokenizer (special tokens recognised); errors without one.
  Expected<RequestHandle> submit_text(std::string_view prompt, const SamplingParams& params,
                                      StreamCallback on_delta = {});
  // Ends a live request (every sample); its output comes from the next step() with
  // finish_reason "abort". NotFound for unknown or already finished handles.
  Status abort(RequestHandle id);

  // Empties the prefix cache (vLLM's reset_prefix_cache): drops every prefix snapshot and
  // makes the KV blocks forget their cached prefixes. Only while no request is unfinished
  // (FailedPrecondition otherwise); the step still in flight is completed first. Afterwards
  // every KV page is back in its pool: stats() shows kv_blocks_in_use, kv_blocks_cached,
  // kv_bytes_in_use and prefix_snapshots at 0 (what tests/soak checks after its runs).
  Status reset_prefix_cache();

  // EPLB (EngineOptions::enable_eplb): re-places the routed experts now, from the expert loads
  // counted over the window, as the periodic rebalance does (EngineStats::eplb_*). Between
  // steps, like every call here; requests in flight go on with unchanged outputs. An error
  // (FailedPrecondition without EPLB) leaves the placement as it was.
  Status rebalance_experts();

  // One step; returns the requests that ended in it.
  std::vector<RequestOutput> step();
  // Steps until no request is left; returns every output in the order they ended.
  std::vector<RequestOutput> run_until_done();
  // True while a request has not ended, and also while a step launched after the last one
  // ended is still in flight (asynchronous scheduling plans a request ended by a stop one step
  // further; that step holds the sequence's KV pages until a step() completes it, returning no
  // output). Stepping while this is true leaves the engine with every KV page back in its pool.
  bool has_unfinished() const;

  int64_t vocab_size() const;
  int64_t max_model_len() const;
  bool has_tokenizer() const;
  // Without a tokenizer: why ("the model directory has no tokenizer.json", or why the one there
  // cannot be used for text, e.g. a WordLevel vocabulary); empty with one. Token-id prompts work
  // either way.
  std::string no_tokenizer_reason() const;
  std::vector<int32_t> encode(std::string_view text) const;  // empty without a tokenizer
  std::string decode(std::span<const int32_t> ids) const;
  // Thread-safe (the tokenizer is immutable): decode keeping or skipping special tokens, and
  // the raw bytes of one token id (empty for unknown ids or without a tokenizer).
  std::string decode(std::span<const int32_t> ids, bool skip_special) const;
  std::string token_bytes(int32_t id) const;
  const EngineStats& stats() const;
  // One line describing the model, backend and limits (for logs).
  std::string describe() const;

 private:
  explicit Engine(std::unique_ptr<runtime::EngineDriver> core);
  std::unique_ptr<runtime::EngineDriver> core_;
};

}  // namespace deepinfer
