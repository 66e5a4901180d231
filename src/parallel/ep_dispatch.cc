// EpDispatcher (ep_dispatch.h): plan the (token, k) -> rank exchange, run it as three
// all_to_allv calls (row counts, expert ids, rows), order the arrivals by expert, and undo all
// of it in combine(). Every ordering here is a stable counting sort, so the layout is a function
// of the routing alone.
#include "parallel/ep_dispatch.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace deepinfer::parallel {
namespace {

std::vector<int64_t> scaled(const std::vector<int64_t>& counts, int64_t factor) {
  std::vector<int64_t> out(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) out[i] = counts[i] * factor;
  return out;
}

int64_t total(const std::vector<int64_t>& counts) {
  int64_t sum = 0;
  for (int64_t c : counts) sum += c;
  return sum;
}

}  // namespace

ExpertPlacement ExpertPlacement::contiguous(int num_experts, int num_ranks) {
  ExpertPlacement placement;
  placement.num_ranks = num_ranks;
  placement.owner.resize(static_cast<size_t>(num_experts));
  for (int e = 0; e < num_experts; ++e) {
    placement.owner[static_cast<size_t>(e)] =
        static_cast<int>(static_cast<int64_t>(e) * num_ranks / num_experts);
  }
  return placement;
}

Status ExpertPlacement::validate() const {
  if (num_ranks < 1) return invalid_argument("expert placement: num_ranks must be at least 1");
  for (size_t e = 0; e < owner.size(); ++e) {
    if (owner[e] < 0 || owner[e] >= num_ranks) {
      return invalid_argument("expert placement: expert " + std::to_string(e) +
                              " is owned by rank " + std::to_string(owner[e]) + ", outside 0.." +
                              std::to_string(num_ranks - 1));
    }
  }
  return Status();
}

EpDispatcher::EpDispatcher(Communicator& comm, ExpertPlacement placement, int64_t hidden)
    : comm_(comm), placement_(std::move(placement)), hidden_(hidden) {}

Status EpDispatcher::dispatch(std::span<const float> tokens, int64_t num_tokens, int top_k,
                              std::span<const int32_t> expert_ids, DispatchedRows* received) {
  // Argument errors are returned before any communication; every rank sees the same placement,
  // so a bad one fails everywhere, but a bad token count on one rank leaves its peers waiting
  // in the first exchange (the in-process group reports that rank as gone once it leaves).
  const int n = comm_.size();
  DI_TRY(placement_.validate());
  if (placement_.num_ranks != n) {
    return invalid_argument("ep dispatch: the expert placement is for " +
                            std::to_string(placement_.num_ranks) + " ranks, the communicator has " +
                            std::to_string(n));
  }
  if (num_tokens < 0 || top_k < 1 || hidden_ < 1) {
    return invalid_argument("ep dispatch: num_tokens " + std::to_string(num_tokens) + ", top_k " +
                            std::to_string(top_k) + ", hidden " + std::to_string(hidden_) +
                            " (need num_tokens >= 0, top_k >= 1, hidden >= 1)");
  }
  const int64_t pairs = num_tokens * top_k;
  if (static_cast<int64_t>(tokens.size()) != num_tokens * hidden_ ||
      static_cast<int64_t>(expert_ids.size()) != pairs) {
    return invalid_argument("ep dispatch: " + std::to_string(num_tokens) + " tokens need " +
                            std::to_string(num_tokens * hidden_) + " values and " +
                            std::to_string(pairs) + " expert ids, got " +
                            std::to_string(tokens.size()) + " and " +
                            std::to_string(expert_ids.size()));
  }
  for (int64_t i = 0; i < pairs; ++i) {
    if (expert_ids[static_cast<size_t>(i)] < 0 ||
        expert_ids[static_cast<size_t>(i)] >= placement_.num_experts()) {
      return invalid_argument("ep dispatch: token " + std::to_string(i / top_k) +
                              " routes to expert " +
                              std::to_string(expert_ids[static_cast<size_t>(i)]) + ", outside 0.." +
                              std::to_string(placement_.num_experts() - 1));
    }
  }
  num_tokens_ = num_tokens;
  top_k_ = top_k;

  // Send order: by destination rank, then (token, k). A counting sort over the pairs in
  // (token, k) order keeps that order inside each destination.
  rows_to_rank_.assign(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < pairs; ++i) {
    ++rows_to_rank_[static_cast<size_t>(
        placement_.owner[static_cast<size_t>(expert_ids[static_cast<size_t>(i)])])];
  }
  std::vector<int64_t> next_slot(static_cast<size_t>(n), 0);
  for (int p = 1; p < n; ++p) {
    next_slot[static_cast<size_t>(p)] =
        next_slot[static_cast<size_t>(p - 1)] + rows_to_rank_[static_cast<size_t>(p - 1)];
  }
  slot_of_pair_.resize(static_cast<size_t>(pairs));
  send_rows_.resize(static_cast<size_t>(pairs * hidden_));
  std::vector<int32_t> send_ids(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    const int32_t expert = expert_ids[static_cast<size_t>(i)];
    const int64_t slot =
        next_slot[static_cast<size_t>(placement_.owner[static_cast<size_t>(expert)])]++;
    slot_of_pair_[static_cast<size_t>(i)] = slot;
    send_ids[static_cast<size_t>(slot)] = expert;
    std::memcpy(send_rows_.data() + slot * hidden_, tokens.data() + (i / top_k) * hidden_,
                static_cast<size_t>(hidden_) * sizeof(float));
  }

  // How many rows each peer sends here, then the ids, then the rows.
  rows_from_rank_.assign(static_cast<size_t>(n), 0);
  DI_TRY(comm_.all_to_all(const_buffer<int64_t>(rows_to_rank_),
                          mutable_buffer<int64_t>(rows_from_rank_)));
  const int64_t arrivals = total(rows_from_rank_);
  std::vector<int32_t> arrived_ids(static_cast<size_t>(arrivals));
  DI_TRY(comm_.all_to_allv(const_buffer<int32_t>(send_ids), rows_to_rank_,
                           mutable_buffer<int32_t>(arrived_ids), rows_from_rank_));
  arrived_rows_.resize(static_cast<size_t>(arrivals * hidden_));
  DI_TRY(comm_.all_to_allv(const_buffer<float>(send_rows_), scaled(rows_to_rank_, hidden_),
                           mutable_buffer<float>(arrived_rows_), scaled(rows_from_rank_, hidden_)));

  // Arrivals come by source rank; the experts want them by expert (stable within one).
  received->hidden = hidden_;
  received->local_experts.clear();
  std::vector<int64_t> local_index(static_cast<size_t>(placement_.num_experts()), -1);
  for (int e = 0; e < placement_.num_experts(); ++e) {
    if (placement_.owner[static_cast<size_t>(e)] != comm_.rank()) continue;
    local_index[static_cast<size_t>(e)] = static_cast<int64_t>(received->local_experts.size());
    received->local_experts.push_back(e);
  }
  const size_t local = received->local_experts.size();
  received->expert_offsets.assign(local + 1, 0);
  for (int32_t e : arrived_ids) {
    const int64_t li = local_index[static_cast<size_t>(e)];
    if (li < 0) {
      return internal_error("ep dispatch: rank " + std::to_string(comm_.rank()) +
                            " received a row for expert " + std::to_string(e) +
                            ", which it does not own (do the ranks' placements differ?)");
    }
    ++received->expert_offsets[static_cast<size_t>(li) + 1];
  }
  for (size_t i = 0; i < local; ++i) received->expert_offsets[i + 1] += received->expert_offsets[i];
  std::vector<int64_t> next_row(received->expert_offsets.begin(),
                                received->expert_offsets.end() - 1);
  arrival_of_row_.resize(static_cast<size_t>(arrivals));
  received->expert_ids.resize(static_cast<size_t>(arrivals));
  received->rows.resize(static_cast<size_t>(arrivals * hidden_));
  for (int64_t a = 0; a < arrivals; ++a) {
    const int32_t e = arrived_ids[static_cast<size_t>(a)];
    const int64_t row = next_row[static_cast<size_t>(local_index[static_cast<size_t>(e)])]++;
    arrival_of_row_[static_cast<size_t>(row)] = a;
    received->expert_ids[static_cast<size_t>(row)] = e;
    std::memcpy(received->rows.data() + row * hidden_, arrived_rows_.data() + a * hidden_,
                static_cast<size_t>(hidden_) * sizeof(float));
  }
  return Status();
}

Status EpDispatcher::combine(std::span<const float> expert_outputs, std::span<const float> weights,
                             std::span<float> out) {
  if (num_tokens_ < 0) return failed_precondition("ep combine: called before dispatch");
  const int64_t arrivals = static_cast<int64_t>(arrival_of_row_.size());
  const int64_t pairs = num_tokens_ * top_k_;
  if (static_cast<int64_t>(expert_outputs.size()) != arrivals * hidden_ ||
      static_cast<int64_t>(weights.size()) != pairs ||
      static_cast<int64_t>(out.size()) != num_tokens_ * hidden_) {
    return invalid_argument("ep combine: expected " + std::to_string(arrivals * hidden_) +
                            " expert output values, " + std::to_string(pairs) + " weights and " +
                            std::to_string(num_tokens_ * hidden_) + " output values; got " +
                            std::to_string(expert_outputs.size()) + ", " +
                            std::to_string(weights.size()) + " and " + std::to_string(out.size()));
  }
  // Back to arrival order, then the reverse exchange lands each row in its send slot.
  for (int64_t row = 0; row < arrivals; ++row) {
    std::memcpy(arrived_rows_.data() + arrival_of_row_[static_cast<size_t>(row)] * hidden_,
                expert_outputs.data() + row * hidden_,
                static_cast<size_t>(hidden_) * sizeof(float));
  }
  DI_TRY(comm_.all_to_allv(const_buffer<float>(arrived_rows_), scaled(rows_from_rank_, hidden_),
                           mutable_buffer<float>(send_rows_), scaled(rows_to_rank_, hidden_)));

  // The fixed order: token by token, k = 0, 1, ... within a token.
  std::fill(out.begin(), out.end(), 0.0f);
  for (int64_t t = 0; t < num_tokens_; ++t) {
    float* dst = out.data() + t * hidden_;
    for (int k = 0; k < top_k_; ++k) {
      const int64_t pair = t * top_k_ + k;
      const float w = weights[static_cast<size_t>(pair)];
      const float* y = send_rows_.data() + slot_of_pair_[static_cast<size_t>(pair)] * hidden_;
      for (int64_t h = 0; h < hidden_; ++h) dst[h] += w * y[h];
    }
  }
  return Status();
}

}  // namespace deepinfer::parallel
