// CoreGrid (see core_grid.h).
#include "runtime/core_grid.h"

#include <algorithm>

namespace deepinfer::runtime {

GridShape GridShape::of(const EngineOptions& options) {
  return {std::max(1, options.context_parallel_size), std::max(1, options.tensor_parallel_size)};
}

CoreGrid::CoreGrid(GridShape shape) : shape_(shape) {
  if (shape_.context > 1) {
    for (int t = 0; t < shape_.tensor; ++t) {
      context_groups_.push_back(parallel::InProcessGroup::create(shape_.context));
    }
  }
  if (shape_.tensor > 1) {
    for (int c = 0; c < shape_.context; ++c) {
      tensor_groups_.push_back(parallel::InProcessGroup::create(shape_.tensor));
    }
  }
}

std::unique_ptr<parallel::InProcessCommunicator> CoreGrid::context_comm(int core) const {
  if (context_groups_.empty()) return nullptr;
  const int t = core % shape_.tensor, c = core / shape_.tensor;
  return context_groups_[static_cast<size_t>(t)]->communicator(c);
}

std::unique_ptr<parallel::InProcessCommunicator> CoreGrid::tensor_comm(int core) const {
  if (tensor_groups_.empty()) return nullptr;
  const int t = core % shape_.tensor, c = core / shape_.tensor;
  return tensor_groups_[static_cast<size_t>(c)]->communicator(t);
}

void CoreGrid::abort(const Status& status) const {
  for (const auto& g : context_groups_) g->abort(status);
  for (const auto& g : tensor_groups_) g->abort(status);
}

}  // namespace deepinfer::runtime
