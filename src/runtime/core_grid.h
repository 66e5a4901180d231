// CoreGrid: the in-process groups of the cores that serve one request stream together: `context`
// context-parallel ranks, each a tensor-parallel group of `tensor` cores (either may be 1), core
// c x tensor + t being tensor-parallel rank t of context-parallel rank c. One context-parallel
// group per tensor index (when context > 1) and one tensor-parallel group per context rank (when
// tensor > 1): with one of the two at 1 that is a single group. The tensor-parallel engine's grid
// and every data-parallel rank's cores are made from it.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "deepinfer/params.h"
#include "parallel/in_process_communicator.h"

namespace deepinfer::runtime {

// The grid's shape: what `options` asks for per request stream (context_parallel_size x
// tensor_parallel_size; tensor parallelism alone is a grid of one context rank).
struct GridShape {
  int context = 1, tensor = 1;
  static GridShape of(const EngineOptions& options);
  int cores() const { return context * tensor; }
};

class CoreGrid {
 public:
  explicit CoreGrid(GridShape shape);  // makes the groups

  const GridShape& shape() const { return shape_; }
  // Core `core`'s communicator in its context-parallel group (null when context == 1) and in its
  // tensor-parallel group (null when tensor == 1). Each at most once per core.
  std::unique_ptr<parallel::InProcessCommunicator> context_comm(int core) const;
  std::unique_ptr<parallel::InProcessCommunicator> tensor_comm(int core) const;
  // Fails every group: cores waiting in a collective get `status` instead of the timeout.
  void abort(const Status& status) const;

 private:
  GridShape shape_;
  std::vector<std::shared_ptr<parallel::InProcessGroup>> context_groups_;  // one per tensor index
  std::vector<std::shared_ptr<parallel::InProcessGroup>> tensor_groups_;   // one per context rank
};

}  // namespace deepinfer::runtime
