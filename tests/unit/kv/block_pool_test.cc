// BlockPool: reference counting, the free list's order (plain blocks first, then cached ones
// least recently freed first), prefix-hash lookup, and eviction.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

namespace deepinfer::kv {
namespace {

TEST(BlockPool, AllocatesEveryBlockOnceAndRestoresTheFreeCount) {
  BlockPool pool(4);
  EXPECT_EQ(pool.num_free(), 4);
  std::vector<BlockId> got;
  for (int i = 0; i < 4; ++i) got.push_back(pool.allocate());
  EXPECT_EQ(pool.num_free(), 0);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<BlockId>{0, 1, 2, 3}));
  for (const BlockId id : got) EXPECT_EQ(pool.ref_count(id), 1);
  for (const BlockId id : got) pool.release(id);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_TRUE(pool.check_consistency().ok());
}

TEST(BlockPool, SharedBlockReturnsOnlyAfterTheLastReference) {
  BlockPool pool(2);
  const BlockId a = pool.allocate();
  pool.acquire(a);
  EXPECT_EQ(pool.ref_count(a), 2);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 1);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_TRUE(pool.check_consistency().ok());
}

TEST(BlockPool, DropFreeHashesForgetsOnlyFreeCachedBlocks) {
  BlockPool pool(3);
  const BlockId a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  ASSERT_TRUE(pool.register_hash(a, 0, 1));
  ASSERT_TRUE(pool.register_hash(b, 0, 2));
  pool.release(a);  // free, cached
  pool.release(c);  // free, plain; b stays referenced and cached
  EXPECT_EQ(pool.num_cached(), 2);
  EXPECT_EQ(pool.drop_free_hashes(), 1);
  EXPECT_EQ(pool.num_cached(), 1);
  EXPECT_EQ(pool.lookup(0, 1), kNullBlock);
  EXPECT_EQ(pool.lookup(0, 2), b);
  EXPECT_FALSE(pool.is_hashed(a));
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_TRUE(pool.check_consistency().ok());
  pool.allocate();
  pool.allocate();
  EXPECT_EQ(pool.num_evictions(), 0);  // a forgotten block is not an eviction
  EXPECT_TRUE(pool.check_consistency().ok());
}

TEST(BlockPool, CachedBlocksAreEvictedLeastRecentlyFreedFirst) {
  BlockPool pool(5);
  std::vector<BlockId> b;
  for (int i = 0; i < 5; ++i) b.push_back(pool.allocate());
  // Blocks 0..2 carry cached data, freed in the order 2, 0, 1; blocks 3 and 4 are plain.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.register_hash(b[i], 0, 100 + i));
  pool.release(b[2]);
  pool.release(b[3]);
  pool.release(b[0]);
  pool.release(b[4]);
  pool.release(b[1]);
  // Plain blocks are handed out first (most recently freed plain block in front), then the
  // cached ones oldest first.
  EXPECT_EQ(pool.free_order(), (std::vector<BlockId>{b[4], b[3], b[2], b[0], b[1]}));
  EXPECT_EQ(pool.allocate(), b[4]);
  EXPECT_EQ(pool.allocate(), b[3]);
  EXPECT_EQ(pool.num_evictions(), 0);
  EXPECT_EQ(pool.lookup(0, 102), b[2]);
  EXPECT_EQ(pool.allocate(), b[2]);  // evicts hash 102
  EXPECT_EQ(pool.num_evictions(), 1);
  EXPECT_EQ(pool.lookup(0, 102), kNullBlock);
  EXPECT_EQ(pool.lookup(0, 100), b[0]);
  EXPECT_TRUE(pool.check_consistency().ok());
}

TEST(BlockPool, TouchingACachedFreeBlockTakesItOffTheFreeList) {
  BlockPool pool(3);
  const BlockId a = pool.allocate();
  ASSERT_TRUE(pool.register_hash(a, 1, 7));
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 3);
  pool.acquire(pool.lookup(1, 7));
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_EQ(pool.ref_count(a), 1);
  // The remaining two allocations must not hand out `a` again.
  EXPECT_NE(pool.allocate(), a);
  EXPECT_NE(pool.allocate(), a);
  EXPECT_EQ(pool.lookup(1, 7), a);
  EXPECT_TRUE(pool.check_consistency().ok());
}

TEST(BlockPool, HashKeysAreDistinctPerGroupAndUnique) {
  BlockPool pool(3);
  const BlockId a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  EXPECT_TRUE(pool.register_hash(a, 0, 9));
  EXPECT_FALSE(pool.register_hash(b, 0, 9));  // same key: the first copy stays
  EXPECT_TRUE(pool.register_hash(b, 1, 9));   // same hash, other group
  EXPECT_FALSE(pool.register_hash(a, 2, 5));  // already hashed
  EXPECT_EQ(pool.lookup(0, 9), a);
  EXPECT_EQ(pool.lookup(1, 9), b);
  EXPECT_EQ(pool.num_cached(), 2);
  pool.release(c);
  EXPECT_EQ(pool.free_order().front(), c);
  EXPECT_TRUE(pool.check_consistency().ok());
}

}  // namespace
}  // namespace deepinfer::kv
