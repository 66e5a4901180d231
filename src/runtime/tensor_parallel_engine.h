// TensorParallelEngine: tensor parallelism over N ranks in one process
// (EngineOptions::tensor_parallel_size > 1; docs/parallel.md, "Tensor parallelism").
//
// One request stream, N copies of the engine: each rank is a whole EngineCore whose model holds
// its shards of the split weights (model/tensor_parallel.h) and gathers the rest from its peers
// inside every forward. Every request goes to every rank under the same handle, and every rank
// steps every time, one thread per rank: the ranks see the same requests, schedule the same
// batches (the same limits, KV pages and prefix cache) and draw the same tokens (they share one
// engine seed; the logits they sample from are the same bits), so their forwards, and the
// gathers inside them, pair up. A Lockstep in tensor-parallel mode checks that before each
// forward: ranks that would diverge get an error instead of waiting in a gather. Scheduling is
// synchronous, so no collective is open between two step() calls.
//
// With EngineOptions::enable_expert_parallel the routed experts are split over the same ranks
// (contiguous blocks): each rank sends its share of a step's rows through the expert exchange
// and the routed sums are gathered by rows (model/layers/moe.h), so a rank holds 1/N of the
// routed experts' bytes and the tokens stay the single engine's.
//
// The same engine runs context parallelism (EngineOptions::context_parallel_size > 1): every
// rank's model holds the whole weights and splits each forward's rows with its peers
// (model/context_parallel.h); the same requests, batches, seed and lockstep pair the forwards.
//
// Rank 0 answers: its outputs, stream callbacks (on the calling thread, which steps rank 0) and
// stats are the engine's; the other ranks' copies are dropped.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/in_process_communicator.h"
#include "runtime/core_grid.h"
#include "runtime/engine_core.h"
#include "runtime/engine_driver.h"
#include "runtime/expert_rebalancer.h"

namespace deepinfer::runtime {

class TensorParallelEngine final : public EngineDriver {
 public:
  // options.tensor_parallel_size (or context_parallel_size) ranks (> 1). Loads every rank's model
  // at once, one thread each.
  static Expected<std::unique_ptr<TensorParallelEngine>> create(const EngineOptions& options);
  ~TensorParallelEngine() override;

  Expected<RequestHandle> submit(std::span<const int32_t> prompt_ids, std::string prompt_text,
                                 const SamplingParams& params,
                                 Engine::StreamCallback on_delta) override;
  Status abort(RequestHandle id) override;
  std::vector<RequestOutput> step() override;
  bool has_unfinished() const override;
  Status reset_prefix_cache() override;
  // EPLB (enable_eplb, with expert parallelism): as the data-parallel engine's, over the
  // tensor-parallel ranks that hold the experts.
  Status rebalance_experts() override;

  int64_t vocab_size() const override { return ranks_[0]->core->vocab_size(); }
  int64_t max_model_len() const override { return ranks_[0]->core->max_model_len(); }
  const tokenizer::Tokenizer* tokenizer() const override { return ranks_[0]->core->tokenizer(); }
  const std::string& no_tokenizer_reason() const override {
    return ranks_[0]->core->no_tokenizer_reason();
  }
  // Rank 0's: every rank does the same work (only the weight bytes differ); with EPLB a copy
  // whose eplb_* fields are the engine's (made after each step only then).
  const EngineStats& stats() const override {
    return rebalancer_ ? stats_ : ranks_[0]->core->stats();
  }
  std::string describe() const override;

  int num_ranks() const { return static_cast<int>(ranks_.size()); }
  const EngineCore& rank(int r) const { return *ranks_[static_cast<size_t>(r)]->core; }

 private:
  struct Rank {
    std::unique_ptr<parallel::InProcessCommunicator> comm;  // the model's (outlives core)
    // Context with tensor parallelism (a grid): comm is this core's context-parallel
    // communicator, tp_comm its tensor-parallel one and, with expert parallelism, ep_comm its
    // communicator over every core (group_).
    std::unique_ptr<parallel::InProcessCommunicator> tp_comm, ep_comm;
    std::unique_ptr<EngineCore> core;
  };

  TensorParallelEngine() = default;
  void update_stats();

  std::shared_ptr<parallel::InProcessGroup> group_;
  // A context x tensor grid's groups (core_grid.h), or null (one group: group_); with a grid,
  // group_ holds every core only for the experts' exchange (expert parallelism), else is unused.
  std::unique_ptr<CoreGrid> grid_;
  std::unique_ptr<ExpertRebalancer> rebalancer_;  // EPLB only; outlives the ranks' models
  EngineStats eplb_stats_;                        // EPLB: the eplb_* fields
  std::string eplb_error_;                        // why the last periodic rebalance failed
  EngineStats stats_;                             // with EPLB only (stats())
  std::vector<std::unique_ptr<Rank>> ranks_;
  RequestHandle next_handle_ = 1;
  bool context_ = false;          // context parallelism rather than tensor parallelism
  bool expert_parallel_ = false;  // routed experts split over the ranks too
};

}  // namespace deepinfer::runtime
