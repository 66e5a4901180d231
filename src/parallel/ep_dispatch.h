// Expert-parallel MoE dispatch and combine over a Communicator.
//
// Every rank holds its own tokens (attention data parallelism) and a share of the experts. For
// one MoE layer:
//   1. dispatch(): each (token, k) pair of the router's top-k goes as one FP32 row to the rank
//      that owns expert ids[token, k]; each rank receives the rows for its experts, ordered by
//      local expert, then by source rank, then by the source's (token, k) order, so a grouped
//      GEMM sees one contiguous segment per expert and the layout is the same on every run;
//   2. the caller runs its experts on those rows, output rows in the same order;
//   3. combine(): the output rows travel back to the ranks they came from and each token's
//      result is sum_k weight[t, k] * y(t, k), added in the token's top-k order k = 0, 1, ...
// Rows are never summed on the expert's rank, so the result of a token depends only on its
// own row, routing and experts: the same bits for 1, 2, 4, ... ranks and any split of tokens
// (batch-invariant mode needs nothing more from the exchange).
//
// A token whose top-k has two experts on one rank is sent twice (no de-duplication yet); rows are
// FP32 (the FP8/BF16 wire formats and the device path come with the GPU implementation).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "parallel/communicator.h"

namespace deepinfer::parallel {

// Which rank owns each expert. contiguous() gives rank r the experts [r * E / R, (r+1) * E / R);
// EPLB will produce other maps (replicas are not modelled yet).
struct ExpertPlacement {
  int num_ranks = 1;
  std::vector<int> owner;  // [num_experts]: the rank that runs expert e

  static ExpertPlacement contiguous(int num_experts, int num_ranks);
  int num_experts() const { return static_cast<int>(owner.size()); }
  // Every owner is a rank of a group of num_ranks.
  Status validate() const;
};

// The rows a rank received for its experts (step 2's input).
struct DispatchedRows {
  int64_t hidden = 0;
  std::vector<float> rows;             // [num_rows, hidden]
  std::vector<int32_t> expert_ids;     // [num_rows], global expert ids, non-decreasing
  std::vector<int32_t> local_experts;  // the experts this rank owns, ascending
  // Rows of local_experts[i] are [expert_offsets[i], expert_offsets[i + 1]).
  std::vector<int64_t> expert_offsets;

  int64_t num_rows() const { return static_cast<int64_t>(expert_ids.size()); }
};

// One dispatcher per rank and MoE layer call; dispatch() plans and sends, combine() reuses the
// plan. Collective: every rank of the communicator calls dispatch() and then combine().
class EpDispatcher {
 public:
  EpDispatcher(Communicator& comm, ExpertPlacement placement, int64_t hidden);

  // tokens: [num_tokens, hidden] FP32 rows; expert_ids: [num_tokens, top_k]. num_tokens may be 0.
  Status dispatch(std::span<const float> tokens, int64_t num_tokens, int top_k,
                  std::span<const int32_t> expert_ids, DispatchedRows* received);

  // expert_outputs: one row per received row, in DispatchedRows order; weights: [num_tokens,
  // top_k] of the dispatch; out: [num_tokens, hidden].
  Status combine(std::span<const float> expert_outputs, std::span<const float> weights,
                 std::span<float> out);

 private:
  Communicator& comm_;
  ExpertPlacement placement_;
  int64_t hidden_;

  // The plan of the last dispatch.
  int64_t num_tokens_ = -1;  // -1: no dispatch yet
  int top_k_ = 0;
  std::vector<int64_t> slot_of_pair_;    // [num_tokens * top_k]: the pair's row in the send order
  std::vector<int64_t> rows_to_rank_;    // rows sent to each rank
  std::vector<int64_t> rows_from_rank_;  // rows received from each rank
  std::vector<int64_t> arrival_of_row_;  // [received rows]: DispatchedRows row -> arrival order
  std::vector<float> send_rows_, arrived_rows_;  // exchange buffers, reused across calls
};

}  // namespace deepinfer::parallel
