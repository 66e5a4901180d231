// ExpertPlacement (expert_placement.h): constructors from owners and from EPLB slots, lookups
// and the coverage check.
#include "parallel/expert_placement.h"

#include <algorithm>
#include <string>

namespace deepinfer::parallel {

ExpertPlacement ExpertPlacement::contiguous(int num_experts, int num_ranks) {
  std::vector<int> owner(static_cast<size_t>(std::max(num_experts, 0)));
  for (int e = 0; e < num_experts; ++e) {
    owner[static_cast<size_t>(e)] =
        static_cast<int>(static_cast<int64_t>(e) * num_ranks / num_experts);
  }
  return from_owners(owner, num_ranks);
}

ExpertPlacement ExpertPlacement::from_owners(std::span<const int> owner, int num_ranks) {
  ExpertPlacement p;
  p.num_ranks = num_ranks;
  for (int r : owner) p.replicas.push_back({r});
  return p;
}

Expected<ExpertPlacement> ExpertPlacement::from_physical(
    std::span<const int32_t> physical_to_logical, int num_experts, int num_ranks) {
  const auto slots = static_cast<int64_t>(physical_to_logical.size());
  if (num_ranks < 1 || slots == 0 || slots % num_ranks != 0) {
    return invalid_argument("expert placement: " + std::to_string(slots) +
                            " physical expert slots cannot be spread evenly over " +
                            std::to_string(num_ranks) +
                            " ranks (plan with EplbConfig::num_gpus equal to the rank count)");
  }
  const int64_t per_rank = slots / num_ranks;
  ExpertPlacement p;
  p.num_ranks = num_ranks;
  p.replicas.resize(static_cast<size_t>(std::max(num_experts, 0)));
  for (int64_t s = 0; s < slots; ++s) {
    const int32_t e = physical_to_logical[static_cast<size_t>(s)];
    if (e < 0 || e >= num_experts) {
      return invalid_argument("expert placement: physical slot " + std::to_string(s) +
                              " holds expert " + std::to_string(e) + ", outside 0.." +
                              std::to_string(num_experts - 1) +
                              " (was the plan made for a model with another expert count?)");
    }
    p.replicas[static_cast<size_t>(e)].push_back(static_cast<int>(s / per_rank));
  }
  DI_TRY(p.validate());
  return p;
}

bool ExpertPlacement::holds(int rank, int expert) const {
  const std::vector<int>& r = replicas[static_cast<size_t>(expert)];
  return std::find(r.begin(), r.end(), rank) != r.end();
}

std::vector<int32_t> ExpertPlacement::experts_of(int rank) const {
  std::vector<int32_t> out;
  for (int e = 0; e < num_experts(); ++e) {
    if (holds(rank, e)) out.push_back(e);
  }
  return out;
}

Status ExpertPlacement::validate() const {
  if (num_ranks < 1) return invalid_argument("expert placement: num_ranks must be at least 1");
  for (size_t e = 0; e < replicas.size(); ++e) {
    if (replicas[e].empty()) {
      return invalid_argument("expert placement: expert " + std::to_string(e) +
                              " is held by no rank; every routed expert needs at least one copy "
                              "(start from ExpertPlacement::contiguous, or an EPLB plan)");
    }
    for (int r : replicas[e]) {
      if (r < 0 || r >= num_ranks) {
        return invalid_argument("expert placement: expert " + std::to_string(e) +
                                " is held by rank " + std::to_string(r) + ", outside 0.." +
                                std::to_string(num_ranks - 1));
      }
    }
  }
  return Status();
}

}  // namespace deepinfer::parallel
