// EpDispatcher (ep_dispatch.h): plan the (token, k) -> rank exchange, run it as three or four
// all_to_allv calls (row counts, expert ids, the weights when given, rows), order the arrivals
// by expert, and undo all of it in the combines. Every ordering here is a stable counting sort,
// so the layout is a function of the routing alone.
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

EpDispatcher::EpDispatcher(Communicator& comm, ExpertPlacement placement, int64_t hidden)
    : comm_(comm), placement_(std::move(placement)), hidden_(hidden) {}

Status EpDispatcher::dispatch_rows(std::span<const float> tokens, int64_t num_tokens, int top_k,
                                   std::span<const int32_t> expert_ids,
                                   std::span<const float> weights, bool weighted,
                                   DispatchedRows* received) {
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
      static_cast<int64_t>(expert_ids.size()) != pairs ||
      (weighted && static_cast<int64_t>(weights.size()) != pairs)) {
    return invalid_argument(
        "ep dispatch: " + std::to_string(num_tokens) + " tokens need " +
        std::to_string(num_tokens * hidden_) + " values and " + std::to_string(pairs) +
        " expert ids (and as many weights, if any), "
        "got " +
        std::to_string(tokens.size()) + ", " + std::to_string(expert_ids.size()) + " and " +
        std::to_string(weights.size()));
  }
  for (int64_t i = 0; i < pairs; ++i) {
    if (expert_ids[static_cast<size_t>(i)] >= placement_.num_experts()) {
      return invalid_argument("ep dispatch: token " + std::to_string(i / top_k) +
                              " routes to expert " +
                              std::to_string(expert_ids[static_cast<size_t>(i)]) + ", outside 0.." +
                              std::to_string(placement_.num_experts() - 1));
    }
  }
  num_tokens_ = num_tokens;
  top_k_ = top_k;
  pair_experts_.assign(expert_ids.begin(), expert_ids.end());

  // Send order: by destination rank, then (token, k). A counting sort over the pairs in
  // (token, k) order keeps that order inside each destination.
  std::vector<int> dest(static_cast<size_t>(pairs), -1);
  rows_to_rank_.assign(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < pairs; ++i) {
    const int32_t e = expert_ids[static_cast<size_t>(i)];
    if (e < 0) continue;  // skipped pair (Ops::moe_experts' -1)
    dest[static_cast<size_t>(i)] = placement_.rank_for(e, i / top_k, static_cast<int>(i % top_k));
    ++rows_to_rank_[static_cast<size_t>(dest[static_cast<size_t>(i)])];
  }
  std::vector<int64_t> next_slot(static_cast<size_t>(n), 0);
  for (int p = 1; p < n; ++p) {
    next_slot[static_cast<size_t>(p)] =
        next_slot[static_cast<size_t>(p - 1)] + rows_to_rank_[static_cast<size_t>(p - 1)];
  }
  const int64_t sent = total(rows_to_rank_);
  slot_of_pair_.assign(static_cast<size_t>(pairs), -1);
  send_rows_.resize(static_cast<size_t>(sent * hidden_));
  std::vector<int32_t> send_ids(static_cast<size_t>(sent));
  std::vector<float> send_weights(weighted ? static_cast<size_t>(sent) : 0);
  for (int64_t i = 0; i < pairs; ++i) {
    if (dest[static_cast<size_t>(i)] < 0) continue;
    const int64_t slot = next_slot[static_cast<size_t>(dest[static_cast<size_t>(i)])]++;
    slot_of_pair_[static_cast<size_t>(i)] = slot;
    send_ids[static_cast<size_t>(slot)] = expert_ids[static_cast<size_t>(i)];
    if (weighted) send_weights[static_cast<size_t>(slot)] = weights[static_cast<size_t>(i)];
    std::memcpy(send_rows_.data() + slot * hidden_, tokens.data() + (i / top_k) * hidden_,
                static_cast<size_t>(hidden_) * sizeof(float));
  }

  // How many rows each peer sends here, then the ids, the weights, the rows.
  rows_from_rank_.assign(static_cast<size_t>(n), 0);
  DI_TRY(comm_.all_to_all(const_buffer<int64_t>(rows_to_rank_),
                          mutable_buffer<int64_t>(rows_from_rank_)));
  const int64_t arrivals = total(rows_from_rank_);
  std::vector<int32_t> arrived_ids(static_cast<size_t>(arrivals));
  DI_TRY(comm_.all_to_allv(const_buffer<int32_t>(send_ids), rows_to_rank_,
                           mutable_buffer<int32_t>(arrived_ids), rows_from_rank_));
  std::vector<float> arrived_weights(weighted ? static_cast<size_t>(arrivals) : 0);
  if (weighted) {
    DI_TRY(comm_.all_to_allv(const_buffer<float>(send_weights), rows_to_rank_,
                             mutable_buffer<float>(arrived_weights), rows_from_rank_));
  }
  arrived_rows_.resize(static_cast<size_t>(arrivals * hidden_));
  DI_TRY(comm_.all_to_allv(const_buffer<float>(send_rows_), scaled(rows_to_rank_, hidden_),
                           mutable_buffer<float>(arrived_rows_), scaled(rows_from_rank_, hidden_)));

  // Arrivals come by source rank; the experts want them by expert (stable within one).
  received->hidden = hidden_;
  received->local_experts = placement_.experts_of(comm_.rank());
  std::vector<int64_t> local_index(static_cast<size_t>(placement_.num_experts()), -1);
  for (size_t i = 0; i < received->local_experts.size(); ++i) {
    local_index[static_cast<size_t>(received->local_experts[i])] = static_cast<int64_t>(i);
  }
  const size_t local = received->local_experts.size();
  received->expert_offsets.assign(local + 1, 0);
  for (int32_t e : arrived_ids) {
    const int64_t li =
        e >= 0 && e < placement_.num_experts() ? local_index[static_cast<size_t>(e)] : -1;
    if (li < 0) {
      return internal_error("ep dispatch: rank " + std::to_string(comm_.rank()) +
                            " received a row for expert " + std::to_string(e) +
                            ", which it does not hold (do the ranks' placements differ?)");
    }
    ++received->expert_offsets[static_cast<size_t>(li) + 1];
  }
  for (size_t i = 0; i < local; ++i) received->expert_offsets[i + 1] += received->expert_offsets[i];
  std::vector<int64_t> next_row(received->expert_offsets.begin(),
                                received->expert_offsets.end() - 1);
  arrival_of_row_.resize(static_cast<size_t>(arrivals));
  received->expert_ids.resize(static_cast<size_t>(arrivals));
  received->weights.resize(weighted ? static_cast<size_t>(arrivals) : 0);
  received->rows.resize(static_cast<size_t>(arrivals * hidden_));
  for (int64_t a = 0; a < arrivals; ++a) {
    const int32_t e = arrived_ids[static_cast<size_t>(a)];
    const int64_t row = next_row[static_cast<size_t>(local_index[static_cast<size_t>(e)])]++;
    arrival_of_row_[static_cast<size_t>(row)] = a;
    received->expert_ids[static_cast<size_t>(row)] = e;
    if (weighted)
      received->weights[static_cast<size_t>(row)] = arrived_weights[static_cast<size_t>(a)];
    std::memcpy(received->rows.data() + row * hidden_, arrived_rows_.data() + a * hidden_,
                static_cast<size_t>(hidden_) * sizeof(float));
  }
  return Status();
}

Status EpDispatcher::return_rows(std::span<const float> expert_outputs, int64_t out_values,
                                 std::span<const float> weights, bool need_weights) {
  if (num_tokens_ < 0) return failed_precondition("ep combine: called before dispatch");
  const int64_t arrivals = static_cast<int64_t>(arrival_of_row_.size());
  const int64_t pairs = num_tokens_ * top_k_;
  if (static_cast<int64_t>(expert_outputs.size()) != arrivals * hidden_ ||
      (need_weights && static_cast<int64_t>(weights.size()) != pairs) ||
      out_values != num_tokens_ * hidden_) {
    return invalid_argument("ep combine: expected " + std::to_string(arrivals * hidden_) +
                            " expert output values, " + std::to_string(need_weights ? pairs : 0) +
                            " weights and " + std::to_string(num_tokens_ * hidden_) +
                            " output values; got " + std::to_string(expert_outputs.size()) + ", " +
                            std::to_string(weights.size()) + " and " + std::to_string(out_values));
  }
  // Back to arrival order, then the reverse exchange lands each row in its send slot.
  for (int64_t row = 0; row < arrivals; ++row) {
    std::memcpy(arrived_rows_.data() + arrival_of_row_[static_cast<size_t>(row)] * hidden_,
                expert_outputs.data() + row * hidden_,
                static_cast<size_t>(hidden_) * sizeof(float));
  }
  return comm_.all_to_allv(const_buffer<float>(arrived_rows_), scaled(rows_from_rank_, hidden_),
                           mutable_buffer<float>(send_rows_), scaled(rows_to_rank_, hidden_));
}

Status EpDispatcher::combine(std::span<const float> expert_outputs, std::span<const float> weights,
                             std::span<float> out) {
  DI_TRY(return_rows(expert_outputs, static_cast<int64_t>(out.size()), weights, true));
  // The fixed order: token by token, k = 0, 1, ... within a token.
  std::fill(out.begin(), out.end(), 0.0f);
  for (int64_t t = 0; t < num_tokens_; ++t) {
    float* dst = out.data() + t * hidden_;
    for (int k = 0; k < top_k_; ++k) {
      const int64_t pair = t * top_k_ + k;
      const int64_t slot = slot_of_pair_[static_cast<size_t>(pair)];
      if (slot < 0) continue;
      const float w = weights[static_cast<size_t>(pair)];
      const float* y = send_rows_.data() + slot * hidden_;
      for (int64_t h = 0; h < hidden_; ++h) dst[h] += w * y[h];
    }
  }
  return Status();
}

Status EpDispatcher::combine_in_expert_order(std::span<const float> expert_outputs,
                                             std::span<float> out) {
  DI_TRY(return_rows(expert_outputs, static_cast<int64_t>(out.size()), {}, false));
  sum_pairs_in_expert_order(pair_experts_.data(), num_tokens_, top_k_, slot_of_pair_.data(),
                            send_rows_.data(), hidden_, hidden_, out.data(), hidden_);
  return Status();
}

void sum_pairs_in_expert_order(const int32_t* ids, int64_t num_tokens, int top_k,
                               const int64_t* row_of_pair, const float* rows, int64_t row_ld,
                               int64_t width, float* out, int64_t out_ld) {
  // Per token: its pairs by ascending expert id, ties in top-k order (a stable insertion sort
  // of at most top_k entries), added from zero left to right.
  std::vector<int> order(static_cast<size_t>(top_k));
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int32_t* id = ids + t * top_k;
    int used = 0;
    for (int k = 0; k < top_k; ++k) {
      if (row_of_pair[t * top_k + k] < 0) continue;
      int at = used++;
      while (at > 0 && id[order[static_cast<size_t>(at - 1)]] > id[k]) {
        order[static_cast<size_t>(at)] = order[static_cast<size_t>(at - 1)];
        --at;
      }
      order[static_cast<size_t>(at)] = k;
    }
    float* dst = out + t * out_ld;
    std::fill(dst, dst + width, 0.0f);
    for (int i = 0; i < used; ++i) {
      const float* y = rows + row_of_pair[t * top_k + order[static_cast<size_t>(i)]] * row_ld;
      for (int64_t h = 0; h < width; ++h) dst[h] += y[h];
    }
  }
}

}  // namespace deepinfer::parallel
