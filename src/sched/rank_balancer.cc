// least_loaded_rank, place_request (rank_balancer.h).
#include "sched/rank_balancer.h"

#include <algorithm>
#include <tuple>

namespace deepinfer::sched {

int least_loaded_rank(std::span<const RankLoad> loads) {
  int best = 0;
  for (int r = 1; r < static_cast<int>(loads.size()); ++r) {
    const RankLoad& a = loads[static_cast<size_t>(r)];
    const RankLoad& b = loads[static_cast<size_t>(best)];
    // Strictly less: equal loads keep the lower rank.
    if (std::tie(a.live_samples, a.kv_blocks_in_use) <
        std::tie(b.live_samples, b.kv_blocks_in_use)) {
      best = r;
    }
  }
  return best;
}

int place_request(std::span<const RankLoad> loads) {
  const int least = least_loaded_rank(loads);
  const int64_t floor = loads[static_cast<size_t>(least)].live_samples;
  const int64_t limit = floor + std::max<int64_t>(2, floor / 4);
  int best = least;
  for (int r = 0; r < static_cast<int>(loads.size()); ++r) {
    const RankLoad& a = loads[static_cast<size_t>(r)];
    const RankLoad& b = loads[static_cast<size_t>(best)];
    if (a.live_samples > limit) continue;
    // A longer hit wins; equal hits keep least_loaded_rank's order.
    if (std::make_tuple(-a.prefix_hit_tokens, a.live_samples, a.kv_blocks_in_use) <
        std::make_tuple(-b.prefix_hit_tokens, b.live_samples, b.kv_blocks_in_use)) {
      best = r;
    }
  }
  return best;
}

}  // namespace deepinfer::sched
