// Prefix caching across all V4 cache kinds: what a hit reuses (compressed rows, indexer keys,
// the compressor-state snapshot, the window blocks still resident), the reference counts of
// shared blocks, hit statistics, and how evicting window blocks shortens a hit.
#include <gtest/gtest.h>

#include <numeric>

#include "kv/coordinator.h"
#include "test_models.h"

namespace deepinfer::kv {
namespace {

std::vector<int32_t> iota_tokens(int64_t n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

KvCoordinator make(int32_t blocks) {
  KvConfig c;
  c.block_size = 8;
  c.num_blocks = blocks;
  c.max_rollback_tokens = 0;
  auto kv = KvCoordinator::create(testing_models::tiny(8), c);
  EXPECT_TRUE(kv.ok());
  return std::move(kv).value();
}

TEST(PrefixCache, RepeatedPromptReusesEveryKindAndCountsRefs) {
  auto kv = make(100);
  const auto p = iota_tokens(40, 1);
  EXPECT_EQ(kv.find_prefix_hit(p), 0);
  ASSERT_TRUE(kv.start(1, p, 0, 40));
  const SeqTables a = kv.tables(1);
  ASSERT_EQ(a.groups[4].ids.size(), 5u);  // snapshots after blocks 0..4
  const BlockId snapshot3 = a.groups[4].ids[3];
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 100);

  // The last token is always recomputed: 39 usable tokens -> 4 full blocks.
  const int64_t hit = kv.find_prefix_hit(p);
  EXPECT_EQ(hit, 32);
  ASSERT_TRUE(kv.start(2, p, hit, 8));
  const SeqTables b = kv.tables(2);
  for (size_t g = 1; g <= 3; ++g) {
    for (size_t j = 0; j < 4; ++j) {
      EXPECT_EQ(b.groups[g].ids[j], a.groups[g].ids[j]) << "group " << g << " block " << j;
      EXPECT_EQ(kv.pool().ref_count(b.groups[g].ids[j]), 1);
    }
  }
  // Window: the token at 32 reads rows 25..31, all in block 3, the only one taken back.
  EXPECT_EQ(b.groups[0].first_block, 3);
  EXPECT_EQ(b.groups[0].ids[0], a.groups[0].ids[3]);
  EXPECT_EQ(kv.state_restore_block(2), snapshot3);

  // A second sharer while the first is alive: shared blocks now have two references.
  ASSERT_TRUE(kv.start(3, p, kv.find_prefix_hit(p), 8));
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(kv.pool().ref_count(a.groups[1].ids[j]), 2);
  EXPECT_EQ(kv.pool().ref_count(snapshot3), 2);
  // The new block 4 of each sharer is private.
  EXPECT_NE(kv.tables(2).groups[1].ids[4], kv.tables(3).groups[1].ids[4]);
  EXPECT_TRUE(kv.check_consistency().ok());

  const auto& st = kv.prefix_stats();
  EXPECT_EQ(st.queries, 3);
  EXPECT_EQ(st.hit_sequences, 2);
  EXPECT_EQ(st.hit_tokens, 64);
  EXPECT_DOUBLE_EQ(st.hit_rate(), 64.0 / 120.0);

  // The restore block is reported only until the sequence's next grow.
  ASSERT_TRUE(kv.grow(2, p, 0));
  EXPECT_EQ(kv.state_restore_block(2), kNullBlock);
  kv.free(2);
  kv.free(3);
  EXPECT_EQ(kv.num_free_blocks(), 100);
  EXPECT_TRUE(kv.check_consistency().ok());
}

TEST(PrefixCache, DivergingPromptsHitUpToTheLastCommonFullBlock) {
  auto kv = make(100);
  const auto p = iota_tokens(40, 1);
  ASSERT_TRUE(kv.start(1, p, 0, 40));
  kv.free(1);
  std::vector<int32_t> q(p.begin(), p.begin() + 20);
  for (int i = 0; i < 10; ++i) q.push_back(1000 + i);
  EXPECT_EQ(kv.find_prefix_hit(q), 16);
  std::vector<int32_t> r = p;
  r[3] = 999;  // differs inside block 0: the chained hashes all differ
  EXPECT_EQ(kv.find_prefix_hit(r), 0);
  // Exactly one full block plus one token.
  EXPECT_EQ(kv.find_prefix_hit(std::span<const int32_t>(p.data(), 9)), 8);
  EXPECT_EQ(kv.find_prefix_hit(std::span<const int32_t>(p.data(), 8)), 0);
}

TEST(PrefixCache, DecodedTokensArePublishedToo) {
  auto kv = make(100);
  auto t = iota_tokens(10, 1);
  ASSERT_TRUE(kv.start(1, t, 0, 10));
  for (int i = 0; i < 20; ++i) {  // decode: each new token becomes known, then is fed
    t.push_back(500 + i);
    ASSERT_TRUE(kv.grow(1, t, 1));
  }
  kv.free(1);
  t.push_back(77);  // next turn of the conversation
  EXPECT_EQ(kv.find_prefix_hit(t), 24);
}

TEST(PrefixCache, EvictedWindowBlocksShortenTheHit) {
  // 40 blocks stay cached after the run (compressed/4, compressed/8, indexer, window and state
  // snapshots: 8 each); 12 more are never hashed.
  auto kv = make(52);
  const auto p = iota_tokens(64, 1);
  ASSERT_TRUE(kv.start(1, p, 0, 8));
  for (int64_t len = 8; len < 64; len += 8) ASSERT_TRUE(kv.grow(1, p, 8));
  kv.free(1);
  int plain = 0;
  for (const BlockId id : kv.pool().free_order()) plain += kv.pool().is_hashed(id) ? 0 : 1;
  ASSERT_EQ(plain, 12);

  std::vector<int32_t> q(p.begin(), p.begin() + 24);
  for (int i = 0; i < 6; ++i) q.push_back(2000 + i);
  std::vector<int32_t> p41(p.begin(), p.begin() + 41);
  EXPECT_EQ(kv.find_prefix_hit(q), 24);
  EXPECT_EQ(kv.find_prefix_hit(p), 56);
  EXPECT_EQ(kv.find_prefix_hit(p41), 40);

  // Window blocks and snapshots of the early blocks were released first while the sequence
  // ran, so they are the least recently used. Three unrelated 8-token sequences (6 blocks each)
  // take the 12 plain blocks and evict the 6 oldest cached ones: snapshots 0-2, windows 0-2.
  for (int s = 0; s < 3; ++s) {
    const auto z = iota_tokens(8, 5000 + 100 * s);
    ASSERT_TRUE(kv.start(10 + s, z, 0, 8));
  }
  EXPECT_EQ(kv.pool().num_evictions(), 6);
  // Compressed rows of blocks 0-2 are still cached, but no window tail around 24 is: no hit.
  EXPECT_EQ(kv.find_prefix_hit(q), 0);
  EXPECT_EQ(kv.find_prefix_hit(p), 56);
  EXPECT_EQ(kv.find_prefix_hit(p41), 40);
  for (int s = 0; s < 3; ++s) kv.free(10 + s);
  EXPECT_EQ(kv.num_free_blocks(), 52);
  EXPECT_TRUE(kv.check_consistency().ok());
}

TEST(PrefixCache, DisabledCachingNeverHits) {
  KvConfig c;
  c.block_size = 8;
  c.num_blocks = 100;
  c.enable_prefix_caching = false;
  auto kv = KvCoordinator::create(testing_models::tiny(8), c);
  ASSERT_TRUE(kv.ok());
  const auto p = iota_tokens(40, 1);
  ASSERT_TRUE(kv->start(1, p, 0, 40));
  EXPECT_TRUE(kv->tables(1).groups[4].ids.empty());
  kv->free(1);
  EXPECT_EQ(kv->find_prefix_hit(p), 0);
  EXPECT_EQ(kv->pool().num_cached(), 0);
}

}  // namespace
}  // namespace deepinfer::kv
