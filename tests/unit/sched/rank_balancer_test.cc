// least_loaded_rank (sched/rank_balancer.h): live samples first, then KV use, ties to the lowest
// rank; equal requests submitted together spread evenly. place_request: the longest cached
// prefix among ranks near the least load, else the least loaded rank.
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

// The longest hit wins among ranks within max(2, least / 4) live samples of the least loaded;
// a rank past that limit is passed over however long its hit; no hit: the least loaded rank.
TEST(RankBalancer, PlaceRequestPrefersTheLongestCachedPrefixNearTheLeastLoad) {
  // {live samples, KV blocks, hit tokens}
  EXPECT_EQ(place_request(std::vector<RankLoad>{{1, 0, 0}, {0, 0, 0}}), 1);
  EXPECT_EQ(place_request(std::vector<RankLoad>{{1, 0, 64}, {0, 0, 0}}), 0);
  EXPECT_EQ(place_request(std::vector<RankLoad>{{2, 0, 64}, {0, 0, 32}, {0, 0, 0}}), 0);
  EXPECT_EQ(place_request(std::vector<RankLoad>{{3, 0, 64}, {0, 0, 32}, {0, 0, 0}}), 1);
  EXPECT_EQ(place_request(std::vector<RankLoad>{{3, 0, 64}, {1, 0, 0}, {1, 0, 0}}), 0);
  // Least 16: the limit is 20.
  EXPECT_EQ(place_request(std::vector<RankLoad>{{20, 0, 16}, {16, 0, 0}}), 0);
  EXPECT_EQ(place_request(std::vector<RankLoad>{{21, 0, 16}, {16, 0, 0}}), 1);
  // Equal hits: the less loaded, then less KV, then the lower rank.
  EXPECT_EQ(place_request(std::vector<RankLoad>{{2, 0, 16}, {1, 9, 16}, {1, 5, 16}}), 2);
  EXPECT_EQ(place_request(std::vector<RankLoad>{{1, 5, 16}, {1, 5, 16}}), 0);
}

}  // namespace
}  // namespace deepinfer::sched
