// EngineCore: the engine behind deepinfer::Engine (include/deepinfer/engine.h). What one step
// does, asynchronous scheduling, preemption, n > 1, prefix caching, structured outputs and
// per-request failures are described in docs/engine.md ("The runtime today" and after);
// speculative decoding in docs/speculative.md.
//
// Who owns what. The engine thread plans, launches and processes steps (engine_core.cc): the
// scheduler, stop checks, detokenization, callbacks, Scheduler::update. The StepExecutor (a
// worker thread with asynchronous scheduling, else inline) runs each StepJob: the forward,
// sampling, verification and drafting (engine_exec.cc, engine_spec.cc,
// engine_prompt_logprobs.cc). A request's SeqExec (its model cache and sampling state: RNG
// position, penalty history, grammar matcher and mask) is the executor's while a job holding it
// is outstanding: the executor advances it right after each draw, so step N+1's sampling never
// waits for N's processing, and the engine thread does not touch it meanwhile (jobs hold
// shared_ptrs, so a request ending on the engine thread frees nothing the executor uses).
// Members below say which side uses them.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/ops.h"
#include "base/thread_pool.h"
#include "deepinfer/engine.h"
#include "model/expert_parallel.h"
#include "model/model.h"
#include "runtime/engine_driver.h"
#include "runtime/lockstep.h"
#include "runtime/spec/drafter.h"
#include "runtime/step_executor.h"
#include "runtime/varlen_trace.h"
#include "sample/sampler.h"
#include "sample/stop_checker.h"
#include "sample/token_counts.h"
#include "sched/depth_calibration.h"
#include "sched/scheduler.h"
#include "sched/speculation_gain.h"
#include "sched/verify_budget.h"
#include "structured/compiler.h"
#include "structured/matcher.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::runtime {

class EngineCore final : public EngineDriver {
 public:
  // One engine over one model. `ep`: this rank's part of expert parallelism (the data-parallel
  // engine, data_parallel_engine.h, makes one core per rank): the model loads its share of the
  // routed experts and every forward goes through a Lockstep, so the ranks' forwards stay
  // matched; it needs synchronous scheduling (options.async_scheduling off). Every rank's core
  // must be created at the same time, on its own thread.
  // `tp`: this rank's part of tensor parallelism (tensor_parallel_engine.h): the model loads
  // its shards, and forwards go through a Lockstep that checks every rank runs each one.
  // `cp`: this rank's part of context parallelism (the same engine, tensor_parallel_engine.h):
  // the model splits each forward's rows with its peers; the same Lockstep as `tp`.
  // `gpu_shared`: other ranks of this process step at once on this core's GPU (data-parallel
  // ranks given one GPU twice): it records no CUDA graphs (backend::make_ops says why).
  // `decorate` (tests): wraps the backend made for the options before anything uses it (e.g. a
  // CPU decorator that claims to record, so that recorded steps run on the CPU).
  using OpsDecorator = std::function<std::unique_ptr<backend::Ops>(std::unique_ptr<backend::Ops>)>;
  static Expected<std::unique_ptr<EngineCore>> create(const EngineOptions& options,
                                                      const model::ExpertParallel& ep = {},
                                                      const model::TensorParallel& tp = {},
                                                      const model::ContextParallel& cp = {},
                                                      bool gpu_shared = false,
                                                      const OpsDecorator& decorate = {});
  ~EngineCore() override;

  Expected<RequestHandle> submit(std::span<const int32_t> prompt_ids, std::string prompt_text,
                                 const SamplingParams& params,
                                 Engine::StreamCallback on_delta) override;
  // submit() under a handle the caller chose (the data-parallel engine numbers requests over
  // all ranks); `handle` must be new to this core.
  Expected<RequestHandle> submit_as(RequestHandle handle, std::span<const int32_t> prompt_ids,
                                    std::string prompt_text, const SamplingParams& params,
                                    Engine::StreamCallback on_delta);
  Status abort(RequestHandle id) override;
  std::vector<RequestOutput> step() override;
  // A request has not ended, or a step is still in flight after the last one ended (with
  // asynchronous scheduling a request ended by a stop is planned one step further; that step
  // holds its sequence state, and its KV pages, until a step() completes it). Callers that
  // step while this holds end with every page back in its pool.
  bool has_unfinished() const override { return !parents_.empty() || in_flight_ != nullptr; }
  // Engine::reset_prefix_cache: no request live; completes the step in flight, then drops the
  // snapshots and the scheduler's cached block hashes.
  Status reset_prefix_cache() override;

  int64_t vocab_size() const override { return model_->vocab_size(); }
  int64_t max_model_len() const override { return sched_->config().max_model_len; }
  const tokenizer::Tokenizer* tokenizer() const override { return tok_ ? &*tok_ : nullptr; }
  // Why tokenizer() is null ("the model directory has no tokenizer.json", or why the one there
  // cannot be used for text); empty when there is a tokenizer.
  const std::string& no_tokenizer_reason() const override { return no_tokenizer_reason_; }
  const EngineStats& stats() const override { return stats_; }
  // Data-parallel placement, between steps, without side effects: a prompt's block hashes as
  // the prefix cache keys them (the same on every core of one engine's options: made once), and
  // the tokens of it this core's prefix cache would let a new request skip (whole KV blocks; 0
  // without prefix caching).
  std::vector<uint64_t> prompt_block_hashes(std::span<const int32_t> prompt) const {
    return sched_->kv().prefix_hashes(prompt);
  }
  int64_t cached_prefix_tokens(std::span<const uint64_t> prompt_hashes) const {
    return sched_->kv().find_prefix_hit(prompt_hashes);
  }
  bool async_scheduling() const { return executor_->threaded(); }
  bool batch_invariant() const { return batch_invariant_; }
  std::string describe() const override;
  // What the model bound from the checkpoint (with expert parallelism, this rank's experts).
  model::WeightStats weight_stats() const { return model_->weight_stats(); }
  // EPLB (data_parallel_engine.h): this rank's model switches to new expert placements
  // (Model::set_expert_placements). Between steps only: with expert parallelism scheduling is
  // synchronous, so no step is in flight then.
  Expected<model::ExpertMoves> set_expert_placements(
      std::vector<parallel::ExpertPlacement> placements);
  // Expert parallelism: empty forwards this rank ran to serve its peers (Lockstep); 0 without.
  // The seed of unseeded requests' draws. Tensor-parallel ranks share rank 0's, so that every
  // rank draws the same tokens.
  uint64_t engine_seed() const { return engine_seed_; }
  void set_engine_seed(uint64_t seed) { engine_seed_ = seed; }
  int64_t lockstep_empty_forwards() const { return lockstep_ ? lockstep_->empty_forwards() : 0; }

  // Benchmark seam (bench/engine/step_host_time): replaces Model::forward with `forward`, which
  // must fill out.logits with one vocabulary-sized row per span asking for logits. The model's
  // caches are then neither created nor checked. Call before the first step.
  using ForwardFn = std::function<Status(const model::StepInputs& in, model::StepOutputs& out)>;
  void replace_forward_for_benchmark(ForwardFn forward) { stand_in_forward_ = std::move(forward); }

 private:
  // What sampling one sample needs, owned by the executor while a job holding it runs.
  struct SeqExec {
    std::shared_ptr<const SamplingParams> params;
    uint64_t seed = 0;
    int32_t index = 0;
    int64_t num_sampled = 0;  // output position of the next sample (RNG key)
    std::optional<model::SequenceCache> cache;
    sample::TokenCounts history;  // only filled when the params have penalties
    std::optional<structured::GrammarMatcher> matcher;  // structured outputs only
    std::vector<uint32_t> mask;  // the matcher's next-token mask, model-vocabulary sized
    bool mask_ready = false;     // `mask` is already filled for the matcher's current state
    bool grammar_done = false;   // the grammar completed: nothing more to sample
    std::vector<int32_t> known;  // prompt + sampled tokens (a prefix hit without a snapshot
                                 // recomputes from them)
    // Bounded replay (engine_replay.cc): the first position of this prefill the layers above
    // the last KV source run on (0: all), set when the cache is (re)started.
    int64_t upper_from = 0;
    // Prefix caching: the chain hashes (kv/block_hash.h) of known's full blocks, extended as
    // snapshots are saved and restored (prefix_hash); they name the tokens a snapshot holds.
    std::vector<uint64_t> block_hashes;
    // SamplingParams::prompt_logprobs (engine_prompt_logprobs.cc): the prompt's length, the
    // next prompt position to score (kept across preemption: scored once), and the entries
    // scored in the running job (handed to the engine thread in Sampled).
    int64_t prompt_len = 0;
    int64_t prompt_lp_next = 1;
    std::vector<TokenLogprobs> prompt_lps;
    // Speculative decoding (engine_spec.cc): the drafter's proposal for the tokens after the
    // last accepted one (fed in this sequence's next draft slots), the tokens a verify step
    // feeds, and the optimistic end of the last verify step next to the length it kept (a
    // plan made before that step's update starts at the former; the cache is at the latter).
    spec::DraftState draft;
    std::vector<int32_t> fed;
    int32_t grammar_cut = 0;  // drafts the grammar refused before this step's verification
    // Residual acceptance (EngineOptions::speculative_acceptance): this request's drafts are
    // drawn from the drafter's distribution and judged by rejection sampling with the residual.
    // draft_round numbers the drafts made, so each draws fresh uniforms (a draft that was never
    // verified must not share its randomness with the next draft of the same position).
    bool residual = false;
    uint32_t draft_round = 0;
    std::vector<sample::SampleSpec> draws;
    int64_t spec_planned_end = -1, spec_kept_end = -1;
  };
  // One sample of one request = one scheduler request; engine-thread state.
  struct Seq {
    RequestHandle parent = 0;
    int32_t index = 0;
    std::shared_ptr<SeqExec> exec;
    std::optional<sample::StopChecker> stop;
    std::optional<tokenizer::IncrementalDetokenizer> detok;
    CompletionOutput out;
    std::string error;  // set when this sample failed (ends as finish_reason "error")
  };
  struct Parent {
    std::shared_ptr<const SamplingParams> params;
    std::shared_ptr<const structured::CompiledGrammar> grammar;  // structured outputs only
    Engine::StreamCallback on_delta;
    RequestOutput out;
    std::vector<sched::RequestId> seqs;
    int32_t num_ended = 0;
    bool cached_noted = false;  // out.num_cached_tokens set (first scheduling of sample 0)
  };
  // The executor's outcome for one request of a job: one sampled token, or with draft slots
  // the accepted run (the drafts the target's own draws confirmed, then the target's token).
  struct Sampled {
    sched::RequestId id = 0;
    std::vector<int32_t> tokens;
    bool grammar_done = false;
    std::string error;                           // the forward or sampling failed for this request
    std::vector<TokenLogprobs> logprobs;         // per token, when params.logprobs is set
    std::vector<TokenLogprobs> prompt_logprobs;  // SamplingParams::prompt_logprobs
    int32_t drafts_verified = 0;                 // draft tokens fed and checked this step
    int32_t drafts_grammar_cut = 0;              // drafts the grammar refused (not fed)
    int32_t drafts_proposed = 0;                 // for the next step (its draft-slot cap)
    std::vector<float> next_confidence;          // the drafter's per-position estimates
  };
  // One step for the executor. Written by the engine thread before launch, by the executor
  // while it runs, read by the engine thread after StepExecutor::wait().
  struct StepJob {
    sched::StepPlan plan;
    std::vector<std::shared_ptr<SeqExec>> seqs;         // per plan request; null: not run (ending)
    std::vector<std::shared_ptr<SeqExec>> drop_caches;  // preempted: free their caches first
    std::vector<Sampled> sampled;  // per run request that needed logits or failed
    double forward_seconds = 0;
    double sample_seconds = 0;
    double draft_seconds = 0;
    int64_t fed_tokens = 0;  // rows the forwards ran (draft slots left unused excluded)
    int forwards = 0;
    // A recorded unit ran its one-time setup during the step (Ops::recording_setups: a first
    // run or a CUDA graph capture): its times do not stand for later steps of its shape.
    bool recording_setup = false;
    bool draft_context = false;  // the forwards computed the drafter's context (DSpark)
    int64_t prefix_restores = 0, prefix_recomputes = 0;  // prefix hits served this step
    int64_t replay_skipped_rows = 0;  // bounded replay: rows the upper layers skipped
    int64_t prefix_window_replays = 0, prefix_window_replay_tokens = 0;
    int64_t snapshots = 0, snapshot_bytes = 0;  // the snapshot store after this step (gauges)
    std::chrono::steady_clock::time_point started, finished;
  };
  // A sequence state at a cached block boundary (prefix caching, engine_exec.cc).
  struct PrefixSnapshot {
    std::shared_ptr<const model::SequenceCache> cache;
    // The chain hash of the tokens the state was computed from (its last block's). The store
    // is keyed by a block id, which the pool hands to other tokens once it evicts the block,
    // and a request admitted in the plan that (re)computes a block hits it before this step
    // saved its state: only a snapshot of the hit's own tokens may be restored.
    uint64_t tokens_hash = 0;
    int64_t bytes = 0;
    uint64_t used = 0;  // LRU clock
  };

  EngineCore(std::unique_ptr<backend::Ops> ops, std::unique_ptr<model::Model> model,
             std::optional<tokenizer::Tokenizer> tok, sched::Scheduler sched,
             const EngineOptions& options);

  // Engine thread (engine_core.cc).
  // Schedules and wraps the plan in a job; null when the plan is empty.
  std::unique_ptr<StepJob> plan_job();
  void launch(StepJob& job);
  // Stop checks, detokenization, callbacks and Scheduler::update for a finished job.
  void process(StepJob& job);
  void fail_seq(sched::RequestId id, Seq& s, const std::string& message);
  // Compiles params.structured (cached); InvalidArgument with the compiler's message.
  Expected<std::shared_ptr<const structured::CompiledGrammar>> compile_structured(
      const SamplingParams& params);
  // A scheduler request ended: finalize its sample, and its parent when every sample ended.
  void end_seq(const sched::FinishedRequest& f, std::vector<RequestOutput>& done);
  void emit(Parent& p, Seq& s, std::string text, std::vector<int32_t> tokens, bool finished);
  // Front-end bookkeeping: a request's cached prompt tokens, the EngineStats gauges (and the
  // varlen controller's counters, which it keeps itself).
  void note_cached_tokens(const sched::ScheduledRequest& sr);
  void update_gauges();

  // Every forward of the main model goes through these (engine_exec.cc): with expert
  // parallelism each is first announced to the peers (Lockstep::before_forward).
  Status forward_model(const model::StepInputs& in, model::StepOutputs& out);
  Expected<model::StepOutputs> extend_model(model::SequenceCache& cache,
                                            std::span<const int32_t> ids,
                                            model::LogitsWanted logits, bool keep_hidden = false,
                                            int64_t upper_skip = 0, int64_t hidden_tail = -1);
  // After this rank's step (with or without work): serves the peers' forwards until every rank
  // has finished its step. Nothing without expert parallelism.
  void finish_lockstep_step();

  // Executor (engine_exec.cc): the forward over the job's plan, then sampling.
  void execute(StepJob& job);  // execute_unguarded + backend::OutOfMemory -> errors
  // Starts every request's span, then runs rounds of one forward each until every span is fed:
  // a round feeds each span up to its next block boundary (prefix snapshots), else to its end.
  void execute_unguarded(StepJob& job);
  // What is left of a request's span: [pos, end), its tokens at src[pos - begin]. A verify span
  // (draft slots) feeds SeqExec::fed from the cache's true length (engine_spec.cc).
  struct Piece {
    size_t i;  // plan index
    int64_t pos, end, begin;
    const int32_t* src;
  };
  // A request sampled in a round: plan index, position of the first drawn row (in this piece),
  // rows drawn, its Sampled entry, and the final streams of those rows (hidden-reading
  // drafters).
  struct Drawn {
    size_t i;
    int64_t start, fed;
    size_t sampled;
    std::span<const float> hidden;
  };
  // One round's inputs and draws, and what stays fixed for the step's rounds.
  struct Round {
    bool snapshots = false;    // pieces end at block boundaries (prefix caching)
    bool keep_hidden = false;  // a hidden-reading drafter (awake, or asleep: it holds them)
    size_t hidden_width = 0;   // floats of one row's final streams
    int64_t hidden_tail = -1;  // rows of a span whose streams it needs (SequenceSpan)
    std::vector<int32_t> ids, pos;
    std::vector<int64_t> piece_end;
    std::vector<Drawn> drawn;
  };
  // The caches (new, restored at a prefix hit) and first pieces of the plan's requests; a
  // request that cannot start gets its error in job.sampled.
  std::vector<Piece> start_pieces(StepJob& job);
  // The forward's inputs for the next piece of each span in `left` (spans_, order_, r).
  model::StepInputs round_inputs(StepJob& job, const std::vector<Piece>& left, Round& r);
  // After the round's forward: drafter rows, snapshots, prompt logprobs, backend draws taken
  // and host draws queued (pending_samples_); returns the pieces still to feed.
  std::vector<Piece> take_round_outputs(StepJob& job, const std::vector<Piece>& left, Round& r);
  void sample_one(sched::RequestId id, SeqExec& e, std::span<const float> row,
                  sample::Sampler& sampler, Sampled& out);
  // Speculative decoding (engine_spec.cc). The tokens a verify span feeds: the last accepted
  // token, then the proposal's drafts that fit its slots.
  void prepare_verify(const sched::ScheduledRequest& sr, SeqExec& e, int64_t start,
                      int32_t last) const;  // (e's matcher is advanced and rolled back)
  // Verification of a run of `count` rows: the target's own draw at each row (the draw plain
  // decoding makes at that output position) is accepted, and the run goes on while it equals
  // the draft fed after that row. Host rows (`rows`, count · V floats) or backend-drawn tokens.
  void verify_rows(sched::RequestId id, SeqExec& e, std::span<const float> rows, int64_t count,
                   sample::Sampler& sampler, Sampled& out);
  void verify_drawn(SeqExec& e, std::span<const int32_t> drawn, Sampled& out);
  // Residual acceptance (SeqExec::residual): row i's target distribution p (every logits
  // processor and the grammar mask) judges draft d = fed[i + 1], drawn from q_i: accepted with
  // probability min(1, p(d) / q_i(d)), else the token is drawn from max(0, p - q_i) and the run
  // ends. A draft the grammar refused (not fed) is such a rejection at the last row. The row
  // after the last judged draft draws from p as plain decoding does.
  void verify_residual(sched::RequestId id, SeqExec& e, std::span<const float> rows, int64_t count,
                       sample::Sampler& sampler, Sampled& out);
  // The sampling context of e's next draw (seed, position, history, grammar mask).
  sample::SampleContext sample_context(SeqExec& e);
  // Residual acceptance: the draw specs of the next proposal's drafts (e.draws; fresh uniforms).
  void prepare_draft_draws(SeqExec& e);
  // After a sequence's step was sampled: roll the cache back to the accepted tokens, commit the
  // prefix snapshots the accepted part reached, and draft for the next step.
  // `hidden`: the target's final streams of the span's rows (drafters that read them), else
  // empty.
  void finish_spec_step(const sched::ScheduledRequest& sr, SeqExec& e, int64_t start, int64_t fed,
                        std::span<const float> hidden, Sampled& out);
  // Hands a drafter that reads hidden streams the rows of positions [first, first + rows).
  void observe_hidden(SeqExec& e, int64_t first, std::span<const float> hidden);
  // Drafts for every sequence finish_spec_step queued this round, in one batch, then saves the
  // prefix snapshots deferred to after it (snapshot_after_drafting).
  void draft_all();
  std::vector<spec::Drafter::Job> draft_jobs_;
  std::vector<Sampled*> draft_outs_;
  // A snapshot at a position whose last row is drawn this round (a decode or verify step, the
  // end of a prompt): with a hidden-reading drafter (MTP) it is saved after draft_all, once the
  // drafter has taken that row, so that it carries the drafter's whole window (saved before, it
  // held the block a step behind, and a sequence restored from it, a chat's next turn,
  // restarted an empty window). Drafting leaves the main layers as they were.
  void snapshot_after_drafting(const sched::ScheduledRequest& sr, SeqExec& e);
  std::vector<std::pair<const sched::ScheduledRequest*, SeqExec*>> deferred_snapshots_;
  // The draw specs of the step's logits rows when every one of them may be drawn by the backend
  // (sample/sample_spec.h), else empty (the host samples the step).
  void backend_sample_specs(const StepJob& job);
  // A token drawn (by the host Sampler or the backend) for e: grammar, history, output.
  // False (with out.error) when the token cannot be taken.
  bool accept_token(SeqExec& e, int32_t token, Sampled& out);
  // One logits row waiting for its draw; sample_pending draws them all (on the sampling pool
  // when there are several) and appends the results to job.sampled in this order.
  struct PendingSample {
    sched::RequestId id;
    SeqExec* e;
    std::span<const float> row;  // `count` rows of V floats (count > 1: a verify span)
    int64_t count = 1;
  };
  void sample_pending(StepJob& job);
  // Fills e.mask from e.matcher for the matcher's current state.
  void fill_mask(SeqExec& e);
  // Prefix caching: e's cache after a hit of sr.num_prefix_hit tokens (snapshot or recompute).
  Status restore_prefix(const sched::ScheduledRequest& sr, SeqExec& e, StepJob& job);
  void save_snapshot(kv::BlockId block, const model::SequenceCache& c, uint64_t tokens_hash);
  // Over the byte bound: with bounded replay the least recently used snapshot that still has
  // its windows keeps only its compressed part; else (or when none has) the least recently used
  // goes.
  void evict_snapshots();
  // SWA bounded replay (engine_replay.cc; docs/bounded_replay.md). replay_keep_: tokens kept
  // (0 = off), resolved and checked against the model by configure_replay.
  Status configure_replay(const EngineOptions& options);
  // Whether e's prefill may skip the upper layers (not while it scores prompt logprobs or a
  // hidden-reading drafter follows it) and from which position (SeqExec::upper_from).
  bool truncates(const SeqExec& e, bool keep_hidden) const;
  int64_t replay_upper_from(const SeqExec& e, bool keep_hidden) const;
  // Whether a snapshot's windows may serve e: an exact state serves anyone; one whose upper
  // layers skipped rows only a request that skips them at least up to its length.
  static bool snapshot_serves(const model::SequenceCache& snap, const SeqExec& e);
  // A hit of h tokens from a snapshot's compressed part: the last window recomputed.
  Status replay_window(const model::SequenceCache& part, SeqExec& e, int64_t h, StepJob& job);
  int64_t replay_keep_ = 0;
  // Saves e's cache (whose length is a block boundary) under sr's window block ending there.
  void save_snapshot_at(const sched::ScheduledRequest& sr, SeqExec& e);
  // The chain hash of e.known's first `len` tokens (len a positive multiple of the block
  // size); nullopt when e knows fewer tokens.
  std::optional<uint64_t> prefix_hash(SeqExec& e, int64_t len) const;
  // Prompt logprobs (engine_prompt_logprobs.cc): whether e still scores prompt tokens; scoring
  // `count` logits rows from `row` for positions pos.. (returns the row after the prompt rows;
  // the last one stays when it is to be sampled); handing the scored entries to the job.
  static bool wants_prompt_logprobs(const SeqExec& e);
  int64_t score_prompt_rows(SeqExec& e, int64_t pos, int64_t count, const float* logits,
                            int64_t row, bool last_sampled);
  static void hand_over_prompt_logprobs(StepJob& job);

  std::unique_ptr<backend::Ops> ops_;  // outlives model_ (declared first, destroyed last)
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<Lockstep> lockstep_;  // expert parallelism only; uses model_
  std::optional<tokenizer::Tokenizer> tok_;
  std::string no_tokenizer_reason_;
  std::optional<sched::Scheduler> sched_;
  std::unique_ptr<structured::GrammarCompiler> grammar_compiler_;  // made on first use
  std::vector<int32_t> eos_;
  EngineOptions options_;
  bool batch_invariant_ = false;
  EngineStats stats_;

  std::unordered_map<RequestHandle, Parent> parents_;
  std::unordered_map<sched::RequestId, Seq> seqs_;
  std::vector<sched::FinishedRequest> early_failures_;  // refused before reaching the scheduler
  RequestHandle next_handle_ = 1;
  sched::RequestId next_seq_ = 1;
  uint64_t engine_seed_ = 0;

  // Engine thread: the launched job not yet processed, caches to drop with the next launch,
  // when the previous job finished (for the gap).
  std::unique_ptr<StepJob> in_flight_;
  std::vector<std::shared_ptr<SeqExec>> pending_drops_;
  std::optional<std::chrono::steady_clock::time_point> last_finished_;

  ForwardFn stand_in_forward_;  // benchmarks only

  // Speculative decoding: draft slots per decode step (0: off) and the drafter behind them.
  int32_t spec_tokens_ = 0;
  std::unique_ptr<spec::Drafter> drafter_;
  // Confidence-scheduled verification (engine_spec.cc; engine thread): on/off, the measured
  // step-cost curve, each request's per-position survival estimates from its latest proposal,
  // and, for drafters without confidences, the observed acceptance rate at each draft depth.
  bool spec_varlen_ = false;
  // EngineOptions::speculative_acceptance, resolved against the drafter: whether sampled
  // requests without a seq_seed (and with "residual-always" seeded ones too) use residual
  // acceptance.
  bool residual_unseeded_ = false, residual_seeded_ = false;
  // Varlen also decides whether drafting pays at all: the draft positions the executor drafts
  // for the next steps (the most the budget admitted lately, + 1; 0 = paused: a drafter that
  // follows hidden streams only keeps up with them). Written by the engine thread, read by the
  // executor. The pause controller compares tokens per executor second with drafting against
  // the step-cost curve's estimate without it.
  std::atomic<int32_t> draft_depth_{0};
  // A long pause (drafting failed to pay several probes in a row) also stops a hidden-reading
  // drafter from following the sequences (no hidden streams, no catch-up; DSpark: no drafter
  // context in the forwards): what it costs then is nothing. When it wakes, running sequences
  // resume from their next step's rows with empty draft windows (SequenceCache::skip_draft).
  std::atomic<bool> drafter_asleep_{false};
  // Whether drafting pays, per decode-count bucket (sched/speculation_gain.h): live probes
  // against the step-cost curve.
  sched::SpeculationGain gain_;
  sched::StepCostCurve step_cost_;
  std::unordered_map<sched::RequestId, std::vector<float>> draft_confidence_;
  sched::DepthCalibration depth_calibration_;  // observed survival per draft depth
  std::unique_ptr<VarlenTrace> varlen_trace_;  // DEEPINFER_VARLEN_TRACE (null: none)
  // A drafter that reads the model's drafter context (DSpark): the share of a forward of 1, 2,
  // 4, .. tokens that the context costs (1 - off / on, measured at start-up). Live steps carry
  // it, plain decoding without speculation does not: the pause controller takes it off the
  // curve's plain estimate. Stop 40, H100, default model: median 3.9 % of a forward at 1-64
  // tokens (2.7-4.8 % from the 10th to the 90th percentile of 168 start-up measurements)
  // (`--stats` of every DSpark varlen run of stop 40's calls 5-6; one is quoted in
  // bench/results/h100_2026-12-07_stop40.txt.xz); at 16 requests the
  // probes read 1.02-1.12x while the run read 0.92x, a gap this share explains only a part of.
  std::map<int64_t, double> draft_context_share_;
  double draft_context_share(int64_t tokens) const;
  // Varlen: seeds step_cost_ with forwards of 1, 2, 4, .. tokens on a scratch sequence (and
  // measures draft_context_share_).
  void profile_step_cost();
  // One count's share (draft_context_share_); false when a forward failed.
  bool measure_draft_context_share(int64_t tokens, const std::vector<int32_t>& ids);
  // On a recording backend: every step size's CUDA graphs (and the drafter's), made at
  // start-up, largest first (engine_graphs.cc).
  void capture_graphs();
  // One drafting step on `seqs` scratch sequences, rows_each rows each (capture_graphs);
  // `depth`: the draft positions (0: spec_tokens_).
  Status scratch_draft_step(int64_t seqs, int64_t rows_each, int depth = 0);
  // The DraftBudget installed on the scheduler when varlen is on.
  void choose_draft_slots(std::span<const sched::DraftCandidate> cands, int64_t spare,
                          std::span<int32_t> slots);
  // Varlen, after a step: the proposals' confidences, the depth acceptance rates, the step's
  // cost.
  void note_spec_results(const StepJob& job);
  // Varlen: pauses drafting while it is slower than plain decoding (gain_).
  void update_gain(const StepJob& job);
  // DEEPINFER_VARLEN_TRACE: the step's line (`ran`: its sums and times; `measured`: what the
  // controller took of it; `before`: the controller's counts before it).
  void trace_step(const StepJob& job, const sched::SpeculationGain::Step& ran,
                  const sched::SpeculationGain::Step& measured,
                  const sched::SpeculationGain::Counts& before);

  // Executor-only: prefix snapshots by the window block that ends at their boundary.
  int64_t block_size_ = 0;  // KV block size when prefix caching is on, else 0
  int64_t snapshot_cap_ = 0;
  int64_t snapshot_bytes_ = 0;
  uint64_t snapshot_clock_ = 0;
  std::unordered_map<kv::BlockId, PrefixSnapshot> snapshots_;

  // Executor-only scratch, reused.
  std::vector<PendingSample> pending_samples_;
  bool backend_sampling_ = false;  // EngineOptions::sample_on
  std::vector<sample::SampleSpec> sample_specs_;
  // Draws of one round in parallel: a request's draw depends only on its own row and state
  // (sampler.h), so the results are those of the serial loop. Null: sampling_threads 1.
  std::unique_ptr<ThreadPool> sampling_pool_;
  std::vector<model::SequenceSpan> spans_;
  std::vector<size_t> order_;
  model::StepOutputs step_out_;

  // Last: destroyed first, so an outstanding job finishes before anything it uses goes away.
  std::unique_ptr<StepExecutor> executor_;
};

}  // namespace deepinfer::runtime
