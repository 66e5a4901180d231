// Lockstep (lockstep.h): forward announcements and empty forwards for expert-parallel ranks.
#include "runtime/lockstep.h"

#include <span>
#include <string>

namespace deepinfer::runtime {

Expected<int32_t> Lockstep::announce(int32_t flag) {
  int32_t sum = 0;
  DI_TRY(comm_.all_reduce_sum(parallel::const_buffer(std::span<const int32_t>(&flag, 1)),
                              parallel::mutable_buffer(std::span<int32_t>(&sum, 1))));
  return sum;
}

Status Lockstep::before_forward() {
  auto sum = announce(1);
  if (!sum.ok()) {
    return Status(sum.status().code(),
                  "expert parallelism: announcing a forward: " + sum.status().message());
  }
  if (mode_ == Mode::kTensorParallel && *sum != comm_.size()) {
    return internal_error("tensor parallelism: the ranks diverged: " + std::to_string(*sum) +
                          " of " + std::to_string(comm_.size()) +
                          " ranks run a forward in this round");
  }
  return {};
}

Status Lockstep::finish_step() {
  while (true) {
    auto sum = announce(0);
    if (!sum.ok()) {
      return Status(sum.status().code(),
                    "expert parallelism: finishing a step: " + sum.status().message());
    }
    if (*sum == 0) return {};
    if (mode_ == Mode::kTensorParallel) {
      return internal_error("tensor parallelism: the ranks diverged: " + std::to_string(*sum) +
                            " of " + std::to_string(comm_.size()) +
                            " ranks run a forward after this rank finished its step");
    }
    // A peer runs a forward in this round: take part with no rows of our own.
    model::StepInputs in;
    model::StepOutputs out;
    ++empty_forwards_;
    DI_TRY(model_.forward(in, out));
  }
}

}  // namespace deepinfer::runtime
