// Randomized KV workload with a fixed seed: sequences sharing prompt prefixes start (with
// prefix hits), grow in random chunks, speculate and roll back, and are freed in random order.
// After every operation the coordinator's references must match the pool's, and once every
// sequence is gone the whole pool must be free again: nothing leaks.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kv/coordinator.h"
#include "test_models.h"

namespace deepinfer::kv {
namespace {

struct Live {
  std::vector<int32_t> tokens;  // the sequence's full token stream
  int64_t known = 0;            // tokens accepted so far (prefix of `tokens`)
};

void run_workload(const io::ModelConfig& model, int32_t block, int32_t blocks, int steps,
                  uint32_t seed, int64_t max_len) {
  KvConfig c;
  c.block_size = block;
  c.num_blocks = blocks;
  c.max_rollback_tokens = 6;
  auto created = KvCoordinator::create(model, c);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  KvCoordinator kv = std::move(created).value();
  std::mt19937 rng(seed);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  // Three shared "system prompts" so prefix hits happen.
  std::vector<std::vector<int32_t>> prefixes(3);
  for (auto& p : prefixes) {
    p.resize(static_cast<size_t>(uni(block, 3 * block)));
    for (auto& t : p) t = static_cast<int32_t>(uni(0, 50));
  }
  std::map<SeqId, Live> live;
  SeqId next = 0;
  int64_t hits = 0, rollbacks = 0, failed_grows = 0;
  for (int step = 0; step < steps; ++step) {
    const int op = static_cast<int>(uni(0, 9));
    if (op <= 2 || live.empty()) {  // start
      Live l;
      l.tokens = prefixes[static_cast<size_t>(uni(0, 2))];
      const int64_t total = uni(static_cast<int64_t>(l.tokens.size()) + 1, max_len);
      while (static_cast<int64_t>(l.tokens.size()) < total) {
        l.tokens.push_back(static_cast<int32_t>(uni(0, 50)));
      }
      l.known = uni(static_cast<int64_t>(prefixes[0].size()) / 2 + 1, total);
      const std::span<const int32_t> known(l.tokens.data(), static_cast<size_t>(l.known));
      const int64_t hit = kv.find_prefix_hit(known);
      ASSERT_EQ(hit % block, 0);
      ASSERT_LT(hit, l.known);
      const int64_t n = uni(1, l.known - hit);
      if (kv.start(next, known, hit, n)) {
        hits += hit > 0 ? 1 : 0;
        live.emplace(next, std::move(l));
      } else {
        ASSERT_FALSE(kv.contains(next));
      }
      ++next;
    } else {
      auto it = live.begin();
      std::advance(it, uni(0, static_cast<int64_t>(live.size()) - 1));
      const SeqId id = it->first;
      Live& l = it->second;
      const int64_t len = kv.num_tokens(id);
      if (op <= 6 && len < static_cast<int64_t>(l.tokens.size())) {  // grow, maybe speculate
        const int64_t room = static_cast<int64_t>(l.tokens.size()) - len;
        const int64_t n = uni(1, std::min<int64_t>(room, 3 * block));
        // Tokens beyond `known` act as drafts: computed, not yet accepted.
        l.known =
            std::max(l.known, std::min<int64_t>(len + 1, static_cast<int64_t>(l.tokens.size())));
        const std::span<const int32_t> known(l.tokens.data(), static_cast<size_t>(l.known));
        if (!kv.grow(id, known, n)) {
          ++failed_grows;
          ASSERT_EQ(kv.num_tokens(id), len);
        } else if (kv.num_tokens(id) > l.known && uni(0, 1) == 1) {
          const int64_t drafts = kv.num_tokens(id) - l.known;
          const int64_t k = uni(0, std::min<int64_t>(drafts, c.max_rollback_tokens));
          const Status s = kv.rollback(id, k);
          ASSERT_TRUE(s.ok()) << s.to_string();
          rollbacks += k > 0 ? 1 : 0;
        }
        l.known =
            std::max(l.known, std::min(kv.num_tokens(id), static_cast<int64_t>(l.tokens.size())));
      } else {
        kv.free(id);
        live.erase(it);
      }
    }
    const Status s = kv.check_consistency();
    ASSERT_TRUE(s.ok()) << "step " << step << ": " << s.to_string();
  }
  for (auto& [id, l] : live) kv.free(id);
  EXPECT_EQ(kv.num_free_blocks(), blocks);
  EXPECT_TRUE(kv.check_consistency().ok());
  EXPECT_GT(hits, 0);
  EXPECT_GT(rollbacks, 0);
  EXPECT_GT(failed_grows, 0);  // the pool was small enough to run out
}

TEST(KvRandomWorkload, TinyModelNeverLeaks) {
  run_workload(testing_models::tiny(8), 8, 120, 4000, 1234u, 120);
}

TEST(KvRandomWorkload, WideWindowNeverLeaks) {
  run_workload(testing_models::tiny(21), 8, 150, 3000, 99u, 160);
}

TEST(KvRandomWorkload, SwaOnlyModelNeverLeaks) {
  run_workload(testing_models::swa_only(), 8, 40, 3000, 7u, 200);
}

TEST(KvRandomWorkload, V4FlashShapedNeverLeaks) {
  run_workload(testing_models::v4_flash_shaped(), 256, 200, 1500, 42u, 6000);
}

}  // namespace
}  // namespace deepinfer::kv
