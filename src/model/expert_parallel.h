// ExpertParallel: what a model needs to run its routed experts over several ranks (expert
// parallelism, docs/parallel.md). Given at load (model::load_model); absent by default, and then
// nothing changes: one rank, every expert loaded, the same code and bits as before.
//
// With it, each rank
//   * loads only the routed experts its placement gives it (all of its copies share one set of
//     weights), and everything else (dense layers, the shared expert, router gate, bias and
//     tid2eid, the drafter blocks with all of their experts) in full;
//   * routes its own tokens as before, sends each (token, k) pair to a rank holding the expert,
//     runs the pairs it receives through its local experts, and gets its pairs' outputs back;
//     each token's result is then bit for bit the single-rank one (model/layers/moe_ep.h says
//     how);
//   * takes part in every MoE layer's exchange of every step, with zero tokens too: ranks call
//     Model::forward in lockstep (the same number of steps), a rank without work for a step
//     calls it with an empty step, so it still serves its experts to the others.
//
// The ranks are threads of one process over host memory (parallel::InProcessCommunicator), on
// the CPU backends: a backend whose memory is not host memory (CUDA) is refused at load.
// Drafter blocks (V4 MTP, V4.1 DSpark) stay local: they hold every expert and exchange nothing,
// so drafting never waits for peers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "base/status.h"
#include "io/model_config.h"
#include "parallel/communicator.h"
#include "parallel/eplb.h"
#include "parallel/expert_placement.h"

namespace deepinfer::model {

struct ExpertParallel {
  // This rank's communicator (its rank() is this rank); null: no expert parallelism. Not owned:
  // it must outlive the model.
  parallel::Communicator* comm = nullptr;
  // One placement per layer of the main model (EPLB plans differ per layer:
  // parallel::expert_placements), or a single one for every layer. Every rank passes the same.
  std::vector<parallel::ExpertPlacement> placements;
  // Optional: the router adds each step's routed ids of this rank's tokens, per layer (what EPLB
  // plans from). Shared by the ranks of one process or not; not owned.
  parallel::ExpertLoadCounter* load_counter = nullptr;

  bool enabled() const { return comm != nullptr; }
  int rank() const { return comm->rank(); }
  const parallel::ExpertPlacement& placement(size_t layer) const {
    return placements.size() == 1 ? placements[0] : placements[layer];
  }
  // Before anything is loaded: the backend's memory is host memory, the placements fit the
  // communicator and the config (count, ranks, experts per layer, every expert held somewhere),
  // and the load counter has the config's shape. Each message names the problem and the fix.
  Status validate(const io::ModelConfig& config, const backend::Ops& ops) const;
  // Beside ranks of another kind (tensor or context parallelism) whose groups have `group_size`
  // ranks: absent, or over whole groups (a multiple of group_size). `what` prefixes the message,
  // `kind` names the groups ("tensor-parallel").
  Status check_whole_groups(const std::string& what, int group_size, const char* kind) const;
};

// What Model::set_expert_placements changed on this rank, summed over the main layers.
struct ExpertMoves {
  int64_t bound = 0;     // experts newly bound (the rank did not hold them)
  int64_t released = 0;  // experts dropped (the rank no longer holds them)
  int64_t bytes_bound = 0;
  int64_t bytes_released = 0;
};

}  // namespace deepinfer::model
