// One manager per cache kind (vLLM v1 single_type_kv_cache_manager.py): each knows which of a
// sequence's blocks its kind still needs, how many blocks growing by N tokens costs, and what a
// prefix-cache hit must find for that kind. Managers hold no per-sequence state; the
// coordinator owns one SeqBlocks per (sequence, group) and passes it in, so a sequence's
// bookkeeping lives in one place and freeing it cannot miss a group.
//
//   FullGroupManager    compressed rows and indexer keys: every block from the start is kept,
//                       because a query may attend to any earlier compressed row.
//   WindowGroupManager  sliding-window rows: blocks entirely before (len - W + 1 - rollback)
//                       are released as the sequence advances; they stay in the prefix cache.
//   StateGroupManager   the compressor's running state: one live slot per sequence (its content
//                       carries its own rollback ring, as the CPU model's RowRing does), plus,
//                       with prefix caching, one snapshot block per crossed block boundary; a
//                       snapshot is published and released right away (nobody running needs it,
//                       a later request resuming at that boundary does).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_pool.h"
#include "kv/cache_layout.h"
#include "kv/types.h"

namespace deepinfer::kv {

// One sequence's blocks in one group. blocks[j] is logical block j (source tokens
// [jB, (j+1)B); for the state group, the snapshot taken after block j), kNullBlock below
// first_live.
struct SeqBlocks {
  std::vector<BlockId> blocks;
  int64_t first_live = 0;
  int64_t num_published = 0;  // leading logical blocks already offered to the prefix cache
  BlockId slot = kNullBlock;  // state group: the live running-state slot
};

class GroupManager {
 public:
  GroupManager(int32_t index, const GroupSpec& spec, BlockPool* pool, int32_t block_size,
               bool caching, int32_t max_rollback);
  virtual ~GroupManager() = default;
  GroupManager(const GroupManager&) = delete;
  GroupManager& operator=(const GroupManager&) = delete;

  const GroupSpec& spec() const { return spec_; }

  // Frees blocks that no token at position >= len - max_rollback can read.
  virtual void release_unneeded(SeqBlocks& s, int64_t len);
  // Free-pool blocks grow() takes to reach new_len tokens.
  virtual int64_t blocks_to_grow(const SeqBlocks& s, int64_t new_len) const;
  virtual void grow(SeqBlocks& s, int64_t new_len);
  // Offers live, not-yet-offered blocks to the prefix cache; hashes[j] is logical block j's.
  void publish(SeqBlocks& s, std::span<const uint64_t> hashes);

  // Prefix-cache resume after k full blocks (tokens [0, kB) reused, k >= 1).
  virtual bool can_resume(std::span<const uint64_t> hashes, int64_t k) const = 0;
  // Free-pool blocks resume() takes (cached blocks nobody references right now).
  virtual int64_t blocks_to_resume(std::span<const uint64_t> hashes, int64_t k) const = 0;
  virtual void resume(SeqBlocks& s, std::span<const uint64_t> hashes, int64_t k) = 0;
  // Upper bound for the leading k that can_resume accepts (full groups: leading cached blocks).
  virtual int64_t resume_limit(std::span<const uint64_t> hashes) const {
    return static_cast<int64_t>(hashes.size());
  }

  // Rollback to new_len tokens: frees every block that only later tokens filled.
  virtual void shrink(SeqBlocks& s, int64_t new_len);
  void free(SeqBlocks& s);
  BlockTable table(const SeqBlocks& s) const;
  // Blocks one sequence of `len` tokens holds at its peak when computed in chunks of at most
  // `chunk` tokens, starting from nothing.
  virtual int64_t peak_blocks(int64_t len, int64_t chunk) const = 0;

 protected:
  int64_t ceil_blocks(int64_t len) const { return (len + block_size_ - 1) / block_size_; }
  int64_t cached_free(std::span<const uint64_t> hashes, int64_t begin, int64_t end) const;
  bool all_cached(std::span<const uint64_t> hashes, int64_t begin, int64_t end) const;
  void take_cached(SeqBlocks& s, std::span<const uint64_t> hashes, int64_t begin, int64_t end);
  void release_range(SeqBlocks& s, int64_t begin, int64_t end);
  // Keeps the first `keep` blocks (releasing the live ones after them); what shrink does once
  // a group has said how many blocks new_len needs.
  void keep_blocks(SeqBlocks& s, int64_t keep);

  int32_t index_;
  GroupSpec spec_;
  BlockPool* pool_;
  int32_t block_size_;
  bool caching_;
  int32_t max_rollback_;
};

class FullGroupManager final : public GroupManager {
 public:
  using GroupManager::GroupManager;
  bool can_resume(std::span<const uint64_t> hashes, int64_t k) const override;
  int64_t blocks_to_resume(std::span<const uint64_t> hashes, int64_t k) const override;
  void resume(SeqBlocks& s, std::span<const uint64_t> hashes, int64_t k) override;
  int64_t resume_limit(std::span<const uint64_t> hashes) const override;
  int64_t peak_blocks(int64_t len, int64_t chunk) const override;
};

class WindowGroupManager final : public GroupManager {
 public:
  using GroupManager::GroupManager;
  void release_unneeded(SeqBlocks& s, int64_t len) override;
  bool can_resume(std::span<const uint64_t> hashes, int64_t k) const override;
  int64_t blocks_to_resume(std::span<const uint64_t> hashes, int64_t k) const override;
  void resume(SeqBlocks& s, std::span<const uint64_t> hashes, int64_t k) override;
  int64_t peak_blocks(int64_t len, int64_t chunk) const override;

 private:
  // First logical block a sequence resuming at token h must find cached.
  int64_t first_needed_for_resume(int64_t h) const;
};

class StateGroupManager final : public GroupManager {
 public:
  using GroupManager::GroupManager;
  void release_unneeded(SeqBlocks& s, int64_t len) override;
  int64_t blocks_to_grow(const SeqBlocks& s, int64_t new_len) const override;
  void grow(SeqBlocks& s, int64_t new_len) override;
  bool can_resume(std::span<const uint64_t> hashes, int64_t k) const override;
  int64_t blocks_to_resume(std::span<const uint64_t> hashes, int64_t k) const override;
  void resume(SeqBlocks& s, std::span<const uint64_t> hashes, int64_t k) override;
  void shrink(SeqBlocks& s, int64_t new_len) override;
  int64_t peak_blocks(int64_t len, int64_t chunk) const override;
};

}  // namespace deepinfer::kv
