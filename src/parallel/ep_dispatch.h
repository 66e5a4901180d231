// Expert-parallel MoE dispatch and combine over a Communicator.
//
// Every rank holds its own tokens (attention data parallelism) and a share of the experts. For
// one MoE layer:
//   1. dispatch(): each (token, k) pair of the router's top-k goes as one FP32 row to a rank
//      holding expert ids[token, k] (ExpertPlacement::rank_for picks among replicas); each rank
//      receives the rows for its experts, ordered by local expert, then by source rank, then by
//      the source's (token, k) order, so a grouped GEMM sees one contiguous segment per expert
//      and the layout is the same on every run. Pairs with a negative id are skipped (not sent),
//      as Ops::moe_experts skips them. dispatch_weighted() sends each pair's gate weight along,
//      for experts that apply it themselves (official semantics apply it before w2);
//   2. the caller runs its experts on those rows, output rows in the same order;
//   3. the output rows travel back to the ranks they came from, and each token's result is
//      formed there, from zero, in one of two fixed orders:
//        combine():                 sum_k weight[t, k] * y(t, k), in top-k order k = 0, 1, ...;
//        combine_in_expert_order(): sum of the (already weighted) y(t, k) in ascending expert
//                                   id (ties in top-k order): Ops::moe_experts' order, so a
//                                   model gets the single-rank bits (model/layers/moe_ep.h).
// Rows are never summed on the expert's rank, so the result of a token depends only on its
// own row, routing and experts: the same bits for 1, 2, 4, ... ranks, any split of tokens and
// any choice among replicas (batch-invariant mode needs nothing more from the exchange).
//
// A token whose top-k has two experts on one rank is sent twice (no de-duplication yet); rows are
// FP32 (the FP8/BF16 wire formats and the device path come with the GPU implementation).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "parallel/communicator.h"
#include "parallel/expert_placement.h"

namespace deepinfer::parallel {

// The rows a rank received for its experts (step 2's input).
struct DispatchedRows {
  int64_t hidden = 0;
  std::vector<float> rows;             // [num_rows, hidden]
  std::vector<int32_t> expert_ids;     // [num_rows], global expert ids, non-decreasing
  std::vector<float> weights;          // [num_rows] when dispatch() was given weights, else empty
  std::vector<int32_t> local_experts;  // the distinct experts this rank holds, ascending
  // Rows of local_experts[i] are [expert_offsets[i], expert_offsets[i + 1]).
  std::vector<int64_t> expert_offsets;

  int64_t num_rows() const { return static_cast<int64_t>(expert_ids.size()); }
};

// out[t] = 0 + rows[row_of_pair[t·top_k + j0]] + rows[...j1] + ... over token t's pairs with a
// row (row_of_pair >= 0) by ascending expert id ids[t·top_k + j] (ties in top-k order), FP32
// left to right, `width` values of each row (rows and out rows `row_ld` / `out_ld` apart): the
// order of Ops::moe_experts, for whoever has the pairs' outputs apart (the combine below; tensor
// parallelism's routed experts, model/layers/moe_tp.h).
void sum_pairs_in_expert_order(const int32_t* ids, int64_t num_tokens, int top_k,
                               const int64_t* row_of_pair, const float* rows, int64_t row_ld,
                               int64_t width, float* out, int64_t out_ld);

// One dispatcher per rank and MoE layer; dispatch() plans and sends, the following combine
// reuses the plan, and the next dispatch() replaces it (buffers are reused across calls).
// Collective: every rank of the communicator calls dispatch() and then the same combine, with
// or without weights alike; a rank with no tokens calls them with none.
class EpDispatcher {
 public:
  EpDispatcher(Communicator& comm, ExpertPlacement placement, int64_t hidden);

  const ExpertPlacement& placement() const { return placement_; }

  // tokens: [num_tokens, hidden] FP32 rows; expert_ids: [num_tokens, top_k]. num_tokens may be 0.
  Status dispatch(std::span<const float> tokens, int64_t num_tokens, int top_k,
                  std::span<const int32_t> expert_ids, DispatchedRows* received) {
    return dispatch_rows(tokens, num_tokens, top_k, expert_ids, {}, false, received);
  }
  // dispatch() with each pair's gate weight sent along (weights: [num_tokens, top_k]) into
  // DispatchedRows::weights. Every rank calls the same one of the two.
  Status dispatch_weighted(std::span<const float> tokens, int64_t num_tokens, int top_k,
                           std::span<const int32_t> expert_ids, std::span<const float> weights,
                           DispatchedRows* received) {
    return dispatch_rows(tokens, num_tokens, top_k, expert_ids, weights, true, received);
  }

  // expert_outputs: one row per received row, in DispatchedRows order; weights: [num_tokens,
  // top_k] of the dispatch; out: [num_tokens, hidden].
  Status combine(std::span<const float> expert_outputs, std::span<const float> weights,
                 std::span<float> out);

  // expert_outputs: one already weighted row per received row, in DispatchedRows order;
  // out[t] = 0 + y(t, j0) + y(t, j1) + ... over t's pairs by ascending expert id (FP32, left to
  // right). out: [num_tokens, hidden].
  Status combine_in_expert_order(std::span<const float> expert_outputs, std::span<float> out);

 private:
  Status dispatch_rows(std::span<const float> tokens, int64_t num_tokens, int top_k,
                       std::span<const int32_t> expert_ids, std::span<const float> weights,
                       bool weighted, DispatchedRows* received);
  // The reverse exchange: every output row back into its send slot (send_rows_).
  Status return_rows(std::span<const float> expert_outputs, int64_t out_values,
                     std::span<const float> weights, bool need_weights);

  Communicator& comm_;
  ExpertPlacement placement_;
  int64_t hidden_;

  // The plan of the last dispatch.
  int64_t num_tokens_ = -1;  // -1: no dispatch yet
  int top_k_ = 0;
  std::vector<int32_t> pair_experts_;    // [num_tokens * top_k]: the dispatched ids
  std::vector<int64_t> slot_of_pair_;    // [num_tokens * top_k]: the row in send order, -1: skipped
  std::vector<int64_t> rows_to_rank_;    // rows sent to each rank
  std::vector<int64_t> rows_from_rank_;  // rows received from each rank
  std::vector<int64_t> arrival_of_row_;  // [received rows]: DispatchedRows row -> arrival order
  std::vector<float> send_rows_, arrived_rows_;  // exchange buffers, reused across calls
};

}  // namespace deepinfer::parallel
