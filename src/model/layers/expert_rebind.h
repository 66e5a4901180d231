// Rebinding a rank's routed experts to new placements between steps: EPLB while serving
// (docs/parallel.md, "EPLB in the engine"). Both families' Model::set_expert_placements go
// through it.
//
// What moves. A rank holds, per main-model layer, the distinct experts its placement gives it
// (ExpertPlacement::experts_of); a new placement changes that set. Experts the rank keeps keep
// their bound views; experts it gains are bound from the checkpoint like at load (on the CPU
// backends a view over the memory-mapped file: no copy, the pages are read when first used);
// experts it loses are dropped (their views go; the mapped pages stay in the page cache, shared
// with the other ranks' mappings, and the OS reclaims them). WeightStats follows: tensors,
// bytes and routed experts bound now.
//
// All or nothing: everything that can fail (placements that do not fit the model or the group,
// a tensor missing from the checkpoint) is checked and bound first; only then are the layers'
// experts and the exchange's placements swapped, so an error leaves the rank as it was.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/ops.h"
#include "base/status.h"
#include "io/checkpoint.h"
#include "model/expert_parallel.h"
#include "model/layers/moe_ep.h"
#include "model/layers/weights.h"
#include "parallel/expert_placement.h"

namespace deepinfer::model {

// layers[l]: the MoeWeights of main-model layer l (bound with ep_layer == l), in layer order.
// placements: one per layer or one for all (ExpertParallel::placements), for the exchange's
// group. On success the layers hold exactly this rank's experts of `placements` and `exchange`
// routes by them.
Expected<ExpertMoves> rebind_routed_experts(const io::Checkpoint& ckpt, backend::Ops& ops,
                                            WeightStore& store, std::span<MoeWeights* const> layers,
                                            MoeExchange& exchange,
                                            std::vector<parallel::ExpertPlacement> placements);

}  // namespace deepinfer::model
