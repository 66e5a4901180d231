// MoeExchange: the routed experts of a MoE layer over the ranks of expert parallelism
// (model/expert_parallel.h), bit for bit what Ops::moe_experts gives on one rank.
//
// Why the bits match. On one rank, Ops::moe_experts computes each (token, k) pair's expert
// output from the token's FP32 row alone (the GEMMs and the activation quantisation are per
// row, whatever else is in the batch), applies the gate weight inside the expert (official
// semantics: before w2, then the BF16 roundings; else after w2), and sums a token's pairs in
// FP32 from zero in ascending expert id. Here:
//   1. the token's rank sends its row and the pair's gate weight to a rank holding the expert
//      (parallel::EpDispatcher::dispatch_weighted; replicas hold the same weights, so the copy
//      chosen does not matter);
//   2. that rank runs Ops::moe_experts over the rows it received, one pair per row (top_k 1,
//      the pair's weight), with the same MoeOpts: each row's output is the pair's weighted,
//      rounded expert output, the same bits as on one rank (0 + y is y: the sum of one term);
//   3. the outputs return and the token's rank adds them from zero in ascending expert id
//      (EpDispatcher::combine_in_expert_order): Ops::moe_experts' own order and arithmetic.
// The shared expert, accumulated afterwards, and the activation rounding then run unchanged.
//
// A failed exchange (a peer failed, stalled or disagreed) throws parallel::CollectiveFailure,
// which the model turns into its step's error at its API boundary, like backend::OutOfMemory.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/mat.h"
#include "backend/ops.h"
#include "base/status.h"
#include "model/expert_parallel.h"
#include "parallel/communicator.h"
#include "parallel/ep_dispatch.h"

namespace deepinfer::model {

class MoeExchange {
 public:
  // One dispatcher per main-model layer (`layers` of them), rows of `hidden` values.
  MoeExchange(const ExpertParallel& ep, size_t layers, int64_t hidden);

  const ExpertParallel& context() const { return ep_; }
  // Between steps only (EPLB, model/layers/expert_rebind.h): routes every later exchange by
  // `placements` (already validated against the model), in one go for every layer. Every rank
  // must switch before the next forward, or the ranks' pairs no longer meet.
  void set_placements(std::vector<parallel::ExpertPlacement> placements);

  // out [M, D] = the routed experts' sum for this rank's M rows (M may be 0), through the ranks
  // holding the experts of main-model layer `layer`; local: this rank's experts of that layer
  // (the placement's experts_of(rank), ascending). ids, g: the router's [M, top_k] in host
  // memory. opts.accumulate must be false. Throws parallel::CollectiveFailure.
  void routed(backend::Ops& ops, size_t layer, backend::CMat v, const int32_t* ids, backend::CMat g,
              int top_k, std::span<const backend::ExpertWeights> local,
              const backend::MoeOpts& opts, backend::Mat out);

  // The routed ids [n] of this rank's tokens at `layer`, into the load counter (if any).
  void count(size_t layer, const int32_t* ids, int64_t n);

 private:
  void make_dispatchers();

  ExpertParallel ep_;
  size_t layers_ = 0;
  int64_t hidden_ = 0;
  std::vector<std::unique_ptr<parallel::EpDispatcher>> dispatchers_;  // per layer
  parallel::DispatchedRows rows_;                                     // reused across layers
  std::vector<int32_t> local_ids_;
  std::vector<float> outputs_;
};

}  // namespace deepinfer::model
