// least_loaded_rank (rank_balancer.h).
#include "sched/rank_balancer.h"

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

}  // namespace deepinfer::sched
