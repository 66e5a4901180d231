// ExpertRebalancer: EPLB's bookkeeping for the data-parallel engine with expert parallelism
// (EngineOptions::enable_eplb; docs/parallel.md, "EPLB in the engine"). It owns what the
// engine's ranks count into and decides where the experts go; DataParallelEngine applies it.
//
//   * Counting: one ExpertLoadCounter for all ranks (in-process ranks are threads, and the
//     counter is thread-safe); every rank's routers add each routed (token, k) pair of their own
//     tokens per main layer, so it sees the whole group's load. Ranks in separate processes
//     would have to all-reduce their counts into one histogram first (not built).
//   * Window: after every engine step (all ranks idle) the step's counts move from the counter
//     into a ring of the last eplb_window_size steps; the load a plan is made from is the sum
//     over the ring, exact integer counts (no decay).
//   * Planning: parallel::rebalance(window load, EplbConfig{experts + num_redundant_experts
//     slots, 1 group, 1 node, ranks GPUs}) -> one ExpertPlacement per layer. The initial
//     placement is the same policy on a uniform load (no counts yet).
//   * Period: due every eplb_step_interval engine steps (0: never; only on command).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "deepinfer/params.h"
#include "io/model_config.h"
#include "parallel/eplb.h"
#include "parallel/expert_placement.h"

namespace deepinfer::runtime {

// The EPLB options (enable_eplb, num_redundant_experts, eplb_step_interval, eplb_window_size)
// against the rank options and the model; each error names the option, its flag and the fix.
// Options that only matter with enable_eplb are refused without it when set to a non-default.
Status validate_eplb_options(const EngineOptions& options, const io::ModelConfig* config);

class ExpertRebalancer {
 public:
  // options.enable_eplb must be on (validated); config: the model's.
  static Expected<std::unique_ptr<ExpertRebalancer>> create(const EngineOptions& options,
                                                            const io::ModelConfig& config);

  // What every rank's model counts into (model::ExpertParallel::load_counter).
  parallel::ExpertLoadCounter* counter() { return &counter_; }
  // The placement in use: one per main layer.
  const std::vector<parallel::ExpertPlacement>& placements() const { return placements_; }

  // After every engine step, with no rank in a forward: moves the step's counts into the window.
  // True when a periodic rebalance is due.
  bool end_step();

  struct Plan {
    std::vector<parallel::ExpertPlacement> placements;  // one per main layer
    // balance() of the window load per layer, averaged over the layers: under the placement in
    // use, and under the new plan.
    double balance_before = 1.0;
    double balance_after = 1.0;
  };
  // A plan for the window's load (the placement in use is not changed).
  Expected<Plan> plan() const;
  // The ranks now hold `placements` (a plan's): the placement in use, and the period restarts.
  void adopt(std::vector<parallel::ExpertPlacement> placements);

  // [layers][experts]: the window's counts.
  std::vector<std::vector<double>> window_load() const;
  int64_t window_steps() const { return static_cast<int64_t>(filled_); }

 private:
  ExpertRebalancer(const EngineOptions& options, const io::ModelConfig& config);

  parallel::EplbConfig eplb_;
  int num_layers_ = 0;
  int num_experts_ = 0;
  int32_t step_interval_ = 0;
  int64_t steps_since_ = 0;  // engine steps since the last rebalance (or the start)
  parallel::ExpertLoadCounter counter_;
  // The window: window_size rows of [layers * experts] step counts, a ring; `sum_` is the sum of
  // its rows (int64: exact however long the window).
  std::vector<std::vector<int32_t>> ring_;
  size_t next_ = 0, filled_ = 0;
  std::vector<int64_t> sum_;
  std::vector<parallel::ExpertPlacement> placements_;
};

}  // namespace deepinfer::runtime
