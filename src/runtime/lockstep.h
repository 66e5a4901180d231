// Lockstep: keeps the Model::forward calls of expert-parallel ranks matched (docs/parallel.md,
// "The data-parallel engine").
//
// With expert parallelism every main-model forward exchanges rows with every rank in each MoE
// layer (model/expert_parallel.h), so the ranks must call forward the same number of times. An
// engine step of one rank may run several forwards (prefill rounds that stop at prefix-cache
// block boundaries, a prefix recomputed after its snapshot was evicted, a window replay) or
// none (no work), and which it will run is only known while it runs. So each forward is
// announced first: every rank's announcement is one small all-reduce, and a rank that has
// finished its step keeps answering announcements with 0 and, while some peer still announces
// a forward, runs an empty forward beside it (it still serves its experts). The step is over for
// everyone at the first round where every rank answers 0.
//
//   rank A: before_forward (1) forward | before_forward (1) forward | finish_step: 0 -> done
//   rank B: before_forward (1) forward | finish_step: 0, empty forward | 0 -> done
//
// Failures: a failed announcement or empty forward is returned (the in-process group is then
// failed, and every rank's later calls fail too, so no rank waits forever).
#pragma once

#include "base/status.h"
#include "model/model.h"
#include "parallel/communicator.h"

namespace deepinfer::runtime {

// Tensor parallelism (kTensorParallel): every rank runs the same batch, so every rank must
// announce every forward; a round where only some do means the ranks' engines diverged (a bug,
// or a failure on one rank): each rank's call returns an error at once, before any rank enters
// a forward whose gathers the others would never join.
class Lockstep {
 public:
  enum class Mode : uint8_t { kExpertParallel, kTensorParallel };
  // Neither is owned; both outlive this object.
  Lockstep(parallel::Communicator& comm, model::Model& model, Mode mode = Mode::kExpertParallel)
      : comm_(comm), model_(model), mode_(mode) {}

  // Before each forward of this rank's own work (Model::forward or Model::extend).
  Status before_forward();
  // At the end of this rank's step (also a step without work): serves the peers' remaining
  // forwards with empty ones until every rank has finished its step.
  Status finish_step();

  int64_t empty_forwards() const { return empty_forwards_; }

 private:
  // One announcement round: this rank's flag (0 or 1); returns how many ranks announced 1.
  Expected<int32_t> announce(int32_t flag);

  parallel::Communicator& comm_;
  model::Model& model_;
  Mode mode_;
  int64_t empty_forwards_ = 0;
};

}  // namespace deepinfer::runtime
