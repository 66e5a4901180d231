// BlockPool: the one pool of KV pages every cache group draws from.
//
// Invariants: a block is either referenced (ref count > 0, by one or more sequences sharing a
// cached prefix) or free (ref count 0, on the free list). A free block may still carry a prefix
// hash: its data stays valid and a later request with the same prefix can take it back
// ("touch") until the block is evicted. Allocation takes never-hashed free blocks first and then
// evicts hashed free blocks least-recently-freed first, so the prefix cache is an LRU over
// unreferenced blocks (vLLM v1 block_pool.py + kv_cache_utils.py FreeKVCacheBlockQueue, with the
// twist that plain free blocks go to the front so cached data survives longer).
//
// The free list is intrusive (prev/next arrays plus a sentinel) so taking a cached block back is
// O(1); hashes live in one map keyed by (group, chain hash) because the same token prefix gives
// different data in different groups.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kv/types.h"

namespace deepinfer::kv {

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t num_free() const { return num_free_; }  // ref count 0, cached or not
  int32_t num_cached() const { return static_cast<int32_t>(by_hash_.size()); }
  int64_t num_evictions() const { return num_evictions_; }

  // Takes the front free block (ref count becomes 1); drops its hash if it had one.
  // Callers check num_free() first: running out here is a bookkeeping bug.
  BlockId allocate();
  // One more reference; a free block leaves the free list (a prefix-cache hit).
  void acquire(BlockId id);
  // One reference less; at zero the block goes back to the free list, to the LRU end when it
  // holds cached data and to the front otherwise.
  void release(BlockId id);

  int32_t ref_count(BlockId id) const { return ref_[static_cast<size_t>(id)]; }
  bool is_hashed(BlockId id) const { return hashed_[static_cast<size_t>(id)] != 0; }

  // The block holding (group, hash), or kNullBlock.
  BlockId lookup(int32_t group, uint64_t hash) const;
  // Publishes a referenced block's data under (group, hash). Returns false (and changes nothing)
  // when the block is already hashed or another block already holds that key.
  bool register_hash(BlockId id, int32_t group, uint64_t hash);

  // Forgets the prefix-cache data of every free block (its hash), as if never published;
  // referenced blocks keep theirs. Returns how many were forgotten.
  int32_t drop_free_hashes();

  // Free blocks in allocation order (front first): plain ones, then cached ones oldest first.
  std::vector<BlockId> free_order() const;
  // Recounts everything from scratch (tests, debug builds).
  Status check_consistency() const;

 private:
  struct Key {
    uint64_t hash;
    int32_t group;
    bool operator==(const Key&) const = default;
  };
  struct KeyHasher {
    size_t operator()(const Key& k) const {
      return static_cast<size_t>(k.hash ^ (0x9E3779B97F4A7C15ull * (uint64_t(k.group) + 1)));
    }
  };

  void unlink(BlockId id);
  void link_after(int32_t where, BlockId id);

  int32_t num_blocks_ = 0;
  int32_t num_free_ = 0;
  int64_t num_evictions_ = 0;
  int32_t sentinel_ = 0;  // == num_blocks_: head/tail of the circular free list
  std::vector<int32_t> ref_;
  std::vector<int32_t> prev_, next_;  // num_blocks_ + 1 entries (the sentinel last)
  std::vector<uint8_t> in_free_;
  std::vector<uint8_t> hashed_;
  std::vector<Key> key_;
  std::unordered_map<Key, BlockId, KeyHasher> by_hash_;
};

}  // namespace deepinfer::kv
