// ExpertPlacement: which ranks hold a copy of each routed expert of one MoE layer, and which copy
// serves a given (token, k) pair. One copy per expert is plain expert parallelism (contiguous(),
// from_owners()); more copies are EPLB's redundant replicas (from_physical() takes a layer of
// EplbPlacement, eplb.h).
//
// Replicas hold identical weights, so which copy serves a pair never changes the result's bits;
// it only spreads the load. The choice is (token + k) mod copies, on the token's own rank: a
// pure function of the routing, the same on every run, and the copies of a hot expert share
// its tokens evenly, which is what an EPLB plan assumes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace deepinfer::parallel {

struct ExpertPlacement {
  int num_ranks = 1;
  // replicas[e]: the rank of each copy of expert e, in physical-slot order; at least one per
  // expert. A rank may appear twice (two of EPLB's copies packed onto one GPU): it then serves
  // two shares of the expert's pairs with one set of weights.
  std::vector<std::vector<int>> replicas;

  // Rank r holds experts [r * E / R, (r + 1) * E / R), one copy each.
  static ExpertPlacement contiguous(int num_experts, int num_ranks);
  // owner[e]: the one rank that holds expert e.
  static ExpertPlacement from_owners(std::span<const int> owner, int num_ranks);
  // A layer of an EPLB plan: physical slot p holds logical expert physical_to_logical[p] and
  // lives on rank p / (slots / num_ranks). Errors name what does not fit (slots not a multiple
  // of the ranks, an id outside 0..num_experts-1, an expert with no slot).
  static Expected<ExpertPlacement> from_physical(std::span<const int32_t> physical_to_logical,
                                                 int num_experts, int num_ranks);

  int num_experts() const { return static_cast<int>(replicas.size()); }
  // The rank that serves pair (token, k) of expert e: copy (token + k) mod copies. token is the
  // token's index on its own rank.
  int rank_for(int expert, int64_t token, int k) const {
    const std::vector<int>& r = replicas[static_cast<size_t>(expert)];
    return r[static_cast<size_t>((token + k) % static_cast<int64_t>(r.size()))];
  }
  bool holds(int rank, int expert) const;
  // The distinct experts rank holds, ascending: the weights that rank loads.
  std::vector<int32_t> experts_of(int rank) const;
  // Every expert has at least one copy and every copy is on a rank of a group of num_ranks; the
  // message names the expert and how to fix the placement.
  Status validate() const;
};

}  // namespace deepinfer::parallel
