// KvCoordinator without prefix hits: per-kind growth, window release as tokens slide,
// all-or-nothing allocation, rollback, freeing.
#include "kv/coordinator.h"

#include <gtest/gtest.h>

#include <numeric>

#include "test_models.h"

namespace deepinfer::kv {
namespace {

std::vector<int32_t> iota_tokens(int64_t n, int32_t first = 1) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

KvCoordinator make(const io::ModelConfig& m, int32_t block, int32_t blocks, bool caching,
                   int32_t rollback) {
  KvConfig c;
  c.block_size = block;
  c.num_blocks = blocks;
  c.enable_prefix_caching = caching;
  c.max_rollback_tokens = rollback;
  auto kv = KvCoordinator::create(m, c);
  EXPECT_TRUE(kv.ok()) << kv.status().to_string();
  return std::move(kv).value();
}

TEST(KvCoordinator, WindowBlocksAreReleasedAsTokensSlideFullGroupsKeepAll) {
  constexpr int W = 20, B = 8;
  auto kv = make(testing_models::tiny(W), B, 200, /*caching=*/false, /*rollback=*/0);
  const auto tokens = iota_tokens(300);
  ASSERT_TRUE(kv.start(1, tokens, 0, 1));
  int64_t max_live_window = 0;
  for (int64_t len = 1; len < 300; ++len) {
    ASSERT_TRUE(kv.grow(1, tokens, 1));
    const SeqTables t = kv.tables(1);
    // The grow from len released what the token at position len no longer reads.
    const int64_t first = std::max<int64_t>(0, len - W + 1) / B;
    EXPECT_EQ(t.groups[0].first_block, first) << "len " << len;
    EXPECT_EQ(static_cast<int64_t>(t.groups[0].ids.size()), (len + 1 + B - 1) / B - first);
    max_live_window =
        std::max<int64_t>(max_live_window, static_cast<int64_t>(t.groups[0].ids.size()));
    for (size_t g = 1; g <= 3; ++g) {  // compressed/4, compressed/8, indexer/4
      EXPECT_EQ(t.groups[g].first_block, 0);
      EXPECT_EQ(static_cast<int64_t>(t.groups[g].ids.size()), (len + 1 + B - 1) / B);
    }
    EXPECT_TRUE(t.groups[4].ids.empty());  // no snapshots without prefix caching
    EXPECT_NE(t.state_slot, kNullBlock);
  }
  EXPECT_LE(max_live_window, (W - 1 + B - 1) / B + 1);
  EXPECT_TRUE(kv.check_consistency().ok());
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 200);
}

TEST(KvCoordinator, GrowIsAllOrNothing) {
  constexpr int B = 8;
  auto kv = make(testing_models::tiny(8), B, 12, /*caching=*/false, /*rollback=*/0);
  const auto tokens = iota_tokens(64);
  // 16 tokens: window 2 + compressed/4 2 + compressed/8 2 + indexer 2 + state slot 1 = 9.
  ASSERT_TRUE(kv.start(1, tokens, 0, 16));
  EXPECT_EQ(kv.num_free_blocks(), 3);
  const SeqTables before = kv.tables(1);
  // +16 tokens needs 8 new blocks; releasing window block 0 leaves 4 free.
  EXPECT_FALSE(kv.grow(1, tokens, 16));
  EXPECT_EQ(kv.num_tokens(1), 16);
  const SeqTables after = kv.tables(1);
  for (size_t g = 1; g < after.groups.size(); ++g) EXPECT_EQ(after.groups[g], before.groups[g]);
  EXPECT_EQ(kv.num_free_blocks(), 4);
  EXPECT_TRUE(kv.check_consistency().ok());
  // +8 needs exactly the 4 that are free.
  EXPECT_TRUE(kv.grow(1, tokens, 8));
  EXPECT_EQ(kv.num_free_blocks(), 0);
  // Starting another sequence fails cleanly and leaves no trace.
  EXPECT_FALSE(kv.start(2, tokens, 0, 1));
  EXPECT_FALSE(kv.contains(2));
  EXPECT_TRUE(kv.check_consistency().ok());
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 12);
}

TEST(KvCoordinator, RollbackRestoresEveryGroup) {
  constexpr int B = 8;
  auto kv = make(testing_models::tiny(8), B, 64, /*caching=*/true, /*rollback=*/6);
  const auto tokens = iota_tokens(64);
  const std::span<const int32_t> known(tokens.data(), 12);
  ASSERT_TRUE(kv.start(1, known, 0, 12));
  const SeqTables before = kv.tables(1);
  // Six speculative tokens (not known yet) open block 2 in every group and cross the state
  // boundary at 16; then all of them are rejected.
  ASSERT_TRUE(kv.grow(1, known, 6));
  EXPECT_EQ(kv.tables(1).groups[1].ids.size(), 3u);
  EXPECT_EQ(kv.tables(1).groups[0].ids.size(), 3u);
  ASSERT_TRUE(kv.rollback(1, 6).ok());
  EXPECT_EQ(kv.num_tokens(1), 12);
  const SeqTables after = kv.tables(1);
  for (size_t g = 0; g < 4; ++g) EXPECT_EQ(after.groups[g], before.groups[g]) << "group " << g;
  EXPECT_EQ(after.state_slot, before.state_slot);
  EXPECT_TRUE(after.groups[4].ids.empty());  // the snapshot at 16 was dropped
  EXPECT_TRUE(kv.check_consistency().ok());

  EXPECT_EQ(kv.rollback(1, 7).code(), StatusCode::kOutOfRange);   // > max_rollback_tokens
  EXPECT_EQ(kv.rollback(1, 13).code(), StatusCode::kOutOfRange);  // > length
  // Tokens [0, 8) are published (known and full): rolling back into them is refused.
  EXPECT_EQ(kv.rollback(1, 5).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(kv.rollback(1, 4).ok());
  EXPECT_EQ(kv.rollback(99, 1).code(), StatusCode::kNotFound);
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 64);
  EXPECT_TRUE(kv.check_consistency().ok());
}

TEST(KvCoordinator, WindowKeepsRollbackSlack) {
  constexpr int W = 8, B = 8, R = 8;
  auto kv = make(testing_models::swa_only(), B, 64, /*caching=*/false, R);
  const auto tokens = iota_tokens(200);
  ASSERT_TRUE(kv.start(1, tokens, 0, 40));
  ASSERT_TRUE(kv.grow(1, tokens, 8));  // releases from len 40: first kept pos 40-8+1-8 = 25
  EXPECT_EQ(kv.tables(1).groups[0].first_block, 25 / B);
  ASSERT_TRUE(kv.rollback(1, R).ok());  // next token at 40 reads from 33: still live
  EXPECT_LE(kv.tables(1).groups[0].first_block * B, 40 - W + 1);
  kv.free(1);
  EXPECT_TRUE(kv.check_consistency().ok());
}

TEST(KvCoordinator, PeakBlocksBoundsWhatASequenceHolds) {
  constexpr int B = 8;
  auto kv = make(testing_models::tiny(8), B, 500, /*caching=*/true, /*rollback=*/4);
  const auto tokens = iota_tokens(300);
  ASSERT_TRUE(kv.start(1, tokens, 0, 5));
  int64_t len = 5, peak = 0;
  while (len < 300) {
    const int64_t n = std::min<int64_t>(13, 300 - len);
    ASSERT_TRUE(kv.grow(1, tokens, n));
    len += n;
    peak = std::max<int64_t>(peak, 500 - kv.num_free_blocks());
  }
  EXPECT_LE(peak, kv.peak_blocks(300, 13));
  kv.free(1);
}

TEST(KvCoordinator, V4FlashShapedLongSequence) {
  auto kv = make(testing_models::v4_flash_shaped(), 256, 400, /*caching=*/true, 16);
  const auto tokens = iota_tokens(10000);
  ASSERT_TRUE(kv.start(7, tokens, 0, 2048));
  for (int64_t len = 2048; len < 10000; len += 512) {
    ASSERT_TRUE(kv.grow(7, tokens, std::min<int64_t>(512, 10000 - len)));
  }
  const SeqTables t = kv.tables(7);
  EXPECT_EQ(t.groups[1].ids.size(), 40u);  // ceil(10000 / 256)
  EXPECT_EQ(t.groups[2].ids.size(), 40u);
  EXPECT_EQ(t.groups[3].ids.size(), 40u);
  EXPECT_LE(t.groups[0].ids.size(), 4u);  // window: a few blocks whatever the length
  EXPECT_TRUE(kv.check_consistency().ok());
  kv.free(7);
  EXPECT_EQ(kv.num_free_blocks(), 400);
}

}  // namespace
}  // namespace deepinfer::kv
