// least_loaded_rank (sched/rank_balancer.h): live samples first, then KV use, ties to the lowest
// rank; equal requests submitted together spread evenly.
#include "sched/rank_balancer.h"

#include <gtest/gtest.h>

#include <vector>

namespace deepinfer::sched {
namespace {

TEST(RankBalancer, FewestLiveSamplesThenKvThenLowestRank) {
  EXPECT_EQ(least_loaded_rank(std::vector<RankLoad>{{0, 0}}), 0);
  EXPECT_EQ(least_loaded_rank(std::vector<RankLoad>{{2, 0}, {1, 50}, {1, 9}, {3, 0}}), 2);
  EXPECT_EQ(least_loaded_rank(std::vector<RankLoad>{{1, 5}, {1, 5}, {1, 6}}), 0);
  EXPECT_EQ(least_loaded_rank(std::vector<RankLoad>{{4, 0}, {2, 7}, {2, 7}}), 1);
}

TEST(RankBalancer, EqualRequestsSpreadEvenly) {
  std::vector<RankLoad> loads(4);
  std::vector<int> placed(4, 0);
  for (int i = 0; i < 8; ++i) {
    const int r = least_loaded_rank(loads);
    ++placed[static_cast<size_t>(r)];
    ++loads[static_cast<size_t>(r)].live_samples;
  }
  EXPECT_EQ(placed, (std::vector<int>{2, 2, 2, 2}));
}

}  // namespace
}  // namespace deepinfer::sched
