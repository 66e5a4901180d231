// DataParallelEngine: attention data parallelism, with or without expert parallelism, over N
// ranks in one process (EngineOptions::data_parallel_size > 1; docs/parallel.md, "The
// data-parallel engine").
//
// Each rank is a whole EngineCore of its own: its backend Ops, its model (with expert parallelism
// only its share of the routed experts), its scheduler, KV pages and prefix cache. A request
// lives on one rank from submit to its output (all of its n samples together); the front
// scheduler (sched/rank_balancer.h) places it on the rank that cached the longest part of its
// prompt among those near the least load, else on the least loaded rank. Request handles are
// numbered here, over all ranks, so they are what one engine would hand out.
//
// step() steps the ranks at once, one thread per rank (the thread that calls step() is one of
// them), and returns when every rank's step is done:
//   * without expert parallelism the ranks are independent: only ranks with work step, each as
//     a lone engine would (asynchronous scheduling included);
//   * with it, every rank steps every time (a rank without work serves its experts to the
//     others: Lockstep) with synchronous scheduling, so no collective is ever left open between
//     two step() calls.
// Stream callbacks run on the calling thread, as Engine promises: the ranks' deltas are held
// during the step and handed out after it, rank by rank, each request's in order. Outputs come
// rank by rank too. A request that fails on its rank (too long, bad ids, its forward failing)
// ends with its error like on one engine; the other ranks go on.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "parallel/in_process_communicator.h"
#include "runtime/core_grid.h"
#include "runtime/engine_core.h"
#include "runtime/engine_driver.h"
#include "runtime/expert_rebalancer.h"

namespace deepinfer::runtime {

// The checks of the rank options (data_parallel_size, tensor_parallel_size, ranks with the
// backend), in one place: Engine::create runs them whatever the rank count. Each error names the
// option, its CLI spelling, and what to use instead.
Status validate_parallel_options(const EngineOptions& options);

// What each of `ranks` in-process ranks' EngineCore gets: per-rank limits as given, the cores
// and sampling threads left to the engine ("all cores") shared out, and synchronous scheduling
// when the ranks step in lockstep. Shared with the tensor-parallel engine.
EngineOptions per_rank_options(const EngineOptions& options, int ranks, bool lockstep);

// Runs body(r) for every r with run[r] set, at once, each on its own thread (the caller's
// thread takes the first); returns when all are done.
void run_on_ranks(const std::vector<bool>& run, const std::function<void(int)>& body);

// EPLB between steps (no rank in a forward): every core switches to `rebalancer`'s plan at once,
// each rebinding on its own thread; all or none: if one fails, those that switched go back (a
// failed restore aborts `group`, so later steps end with its error instead of exchanging with
// mismatched placements). On success the plan is adopted and `eplb` (EngineStats::eplb_*)
// counts it. `what` names the ranks in errors ("data-parallel rank").
Status rebalance_cores(const std::vector<EngineCore*>& cores, ExpertRebalancer& rebalancer,
                       parallel::InProcessGroup* group, const char* what, EngineStats& eplb);
// After an engine step (every rank idle, no collective open): the step's expert counts go into
// the window and, when a periodic rebalance is due, `rebalance` runs. A failure keeps the
// placement in use (the next try waits a whole period) and leaves its message in `error`
// (cleared by a success).
void rebalance_when_due(ExpertRebalancer& rebalancer, const std::function<Status()>& rebalance,
                        std::string& error);
// `stats`' EngineStats::eplb_* fields from `eplb` (what rebalance_cores counted).
void copy_eplb_stats(const EngineStats& eplb, EngineStats& stats);

class DataParallelEngine final : public EngineDriver {
 public:
  // options.data_parallel_size ranks (> 1). Loads every rank's model at once, one thread each.
  static Expected<std::unique_ptr<DataParallelEngine>> create(const EngineOptions& options);
  ~DataParallelEngine() override;

  Expected<RequestHandle> submit(std::span<const int32_t> prompt_ids, std::string prompt_text,
                                 const SamplingParams& params,
                                 Engine::StreamCallback on_delta) override;
  Status abort(RequestHandle id) override;
  std::vector<RequestOutput> step() override;
  bool has_unfinished() const override;
  Status reset_prefix_cache() override;
  // EPLB (enable_eplb): a plan from the counted window, applied by every rank at once between
  // steps (each binds the experts it gains and drops the ones it loses, then routes by the new
  // placement); all ranks or none: a rank that fails puts the others back on the old placement.
  Status rebalance_experts() override;

  // Every rank loads the same model and tokenizer: rank 0 answers for all.
  int64_t vocab_size() const override { return ranks_[0]->core->vocab_size(); }
  int64_t max_model_len() const override { return ranks_[0]->core->max_model_len(); }
  const tokenizer::Tokenizer* tokenizer() const override { return ranks_[0]->core->tokenizer(); }
  const std::string& no_tokenizer_reason() const override {
    return ranks_[0]->core->no_tokenizer_reason();
  }
  // Every field is the sum over the ranks (steps counts each rank's steps; the KV peak is the
  // sum of the ranks' peaks, an upper bound of the peak at one moment).
  const EngineStats& stats() const override { return stats_; }
  std::string describe() const override;

  // Tests and logs: the rank count, where a live request runs (-1 once it ended or when
  // unknown), and one rank's engine.
  int num_ranks() const { return static_cast<int>(ranks_.size()); }
  int rank_of(RequestHandle id) const;
  const EngineCore& rank(int r) const { return *ranks_[static_cast<size_t>(r)]->core; }
  // EPLB: the placement in use (one per main layer); empty without EPLB.
  const std::vector<parallel::ExpertPlacement>& expert_placements() const {
    static const std::vector<parallel::ExpertPlacement> kNone;
    return rebalancer_ ? rebalancer_->placements() : kNone;
  }

 private:
  struct Rank {
    // Expert parallelism: each core's communicator over every core of every rank, which its
    // model uses (outlive the cores); core t of rank r is expert rank r x tp + t.
    std::vector<std::unique_ptr<parallel::InProcessCommunicator>> ep_comms;
    // Tensor and/or context parallelism inside the rank (tensor_ or context_parallel_size > 1):
    // its cores' groups (core_grid.h), each core's communicators in them (null where a kind is
    // absent; outlive the cores), and the cores 1.. of the grid (core is core 0: it answers; the
    // copies run the same requests and steps, their outputs dropped).
    std::unique_ptr<CoreGrid> grid;
    std::vector<std::unique_ptr<parallel::InProcessCommunicator>> context_comms, tensor_comms;
    std::unique_ptr<EngineCore> core;
    std::vector<std::unique_ptr<EngineCore>> copies;
    int64_t live_samples = 0;  // of the requests placed here and not yet ended (placement)
    // Deltas streamed by this rank during the step in progress, handed out after it.
    std::vector<std::pair<std::shared_ptr<Engine::StreamCallback>, StreamDelta>> deltas;
  };
  struct Placed {
    int rank = 0;
    int32_t samples = 0;
  };

  explicit DataParallelEngine(const EngineOptions& options) : options_(options) {}
  void update_stats();

  EngineOptions options_;
  bool expert_parallel_ = false;
  int cores_per_rank_ = 1;  // the cores of each rank's grid (GridShape::of(options_).cores())
  int experts_ = 0;         // routed experts of the model (expert parallelism's placement)
  std::shared_ptr<parallel::InProcessGroup> group_;  // expert parallelism only: every core
  std::unique_ptr<ExpertRebalancer> rebalancer_;     // EPLB only; outlives the ranks' models
  // EPLB: the EngineStats::eplb_* fields (the ranks' stats know nothing of them), and why the
  // last periodic rebalance failed, if it did (the placement then stays; describe() says it).
  EngineStats eplb_stats_;
  std::string eplb_error_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::unordered_map<RequestHandle, Placed> live_;
  RequestHandle next_handle_ = 1;
  EngineStats stats_;
};

}  // namespace deepinfer::runtime
