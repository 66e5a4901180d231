// GroupManager's shared mechanics and FullGroupManager (compressed rows, indexer keys).
#include "kv/group_manager.h"

#include <algorithm>

#include "base/check.h"

namespace deepinfer::kv {

GroupManager::GroupManager(int32_t index, const GroupSpec& spec, BlockPool* pool,
                           int32_t block_size, bool caching, int32_t max_rollback)
    : index_(index),
      spec_(spec),
      pool_(pool),
      block_size_(block_size),
      caching_(caching),
      max_rollback_(max_rollback) {}

void GroupManager::release_unneeded(SeqBlocks& /*s*/, int64_t /*len*/) {}

int64_t GroupManager::blocks_to_grow(const SeqBlocks& s, int64_t new_len) const {
  return std::max<int64_t>(0, ceil_blocks(new_len) - static_cast<int64_t>(s.blocks.size()));
}

void GroupManager::grow(SeqBlocks& s, int64_t new_len) {
  const int64_t want = ceil_blocks(new_len);
  while (static_cast<int64_t>(s.blocks.size()) < want) s.blocks.push_back(pool_->allocate());
}

void GroupManager::publish(SeqBlocks& s, std::span<const uint64_t> hashes) {
  if (!caching_) return;
  const int64_t end =
      std::min<int64_t>(static_cast<int64_t>(hashes.size()), static_cast<int64_t>(s.blocks.size()));
  for (int64_t j = s.num_published; j < end; ++j) {
    const BlockId id = s.blocks[static_cast<size_t>(j)];
    // The window and state groups hold a block until its tokens are known and it is published
    // here (their release_unneeded); a released block (kNullBlock) is not cached. A duplicate
    // key keeps the first copy.
    if (id != kNullBlock) pool_->register_hash(id, index_, hashes[static_cast<size_t>(j)]);
  }
  s.num_published = std::max(s.num_published, end);
}

void GroupManager::release_range(SeqBlocks& s, int64_t begin, int64_t end) {
  // Tail first: the LRU then evicts a sequence's last blocks before its first ones, which are
  // the ones other requests are most likely to share (vLLM frees in reverse for the same reason).
  for (int64_t j = end - 1; j >= begin; --j) {
    BlockId& id = s.blocks[static_cast<size_t>(j)];
    if (id != kNullBlock) {
      pool_->release(id);
      id = kNullBlock;
    }
  }
}

void GroupManager::shrink(SeqBlocks& s, int64_t new_len) { keep_blocks(s, ceil_blocks(new_len)); }

void GroupManager::keep_blocks(SeqBlocks& s, int64_t keep) {
  const auto size = static_cast<int64_t>(s.blocks.size());
  if (keep >= size) return;
  release_range(s, std::max(s.first_live, keep), size);
  s.blocks.resize(static_cast<size_t>(keep));
  s.first_live = std::min(s.first_live, keep);
  s.num_published = std::min(s.num_published, keep);
}

void GroupManager::free(SeqBlocks& s) {
  release_range(s, s.first_live, static_cast<int64_t>(s.blocks.size()));
  if (s.slot != kNullBlock) pool_->release(s.slot);
  s = SeqBlocks{};
}

BlockTable GroupManager::table(const SeqBlocks& s) const {
  BlockTable t;
  t.first_block = s.first_live;
  t.ids.assign(s.blocks.begin() + s.first_live, s.blocks.end());
  return t;
}

int64_t GroupManager::cached_free(std::span<const uint64_t> hashes, int64_t begin,
                                  int64_t end) const {
  int64_t n = 0;
  for (int64_t j = begin; j < end; ++j) {
    const BlockId id = pool_->lookup(index_, hashes[static_cast<size_t>(j)]);
    DI_CHECK(id != kNullBlock);
    n += pool_->ref_count(id) == 0 ? 1 : 0;
  }
  return n;
}

bool GroupManager::all_cached(std::span<const uint64_t> hashes, int64_t begin, int64_t end) const {
  for (int64_t j = begin; j < end; ++j) {
    if (pool_->lookup(index_, hashes[static_cast<size_t>(j)]) == kNullBlock) return false;
  }
  return true;
}

void GroupManager::take_cached(SeqBlocks& s, std::span<const uint64_t> hashes, int64_t begin,
                               int64_t end) {
  DI_CHECK(s.blocks.empty() && s.slot == kNullBlock);
  s.blocks.assign(static_cast<size_t>(end), kNullBlock);
  for (int64_t j = begin; j < end; ++j) {
    const BlockId id = pool_->lookup(index_, hashes[static_cast<size_t>(j)]);
    DI_CHECK(id != kNullBlock);
    pool_->acquire(id);
    s.blocks[static_cast<size_t>(j)] = id;
  }
  s.first_live = begin;
  s.num_published = end;
}

// ---- FullGroupManager -------------------------------------------------------------------

bool FullGroupManager::can_resume(std::span<const uint64_t> hashes, int64_t k) const {
  return all_cached(hashes, 0, k);
}

int64_t FullGroupManager::blocks_to_resume(std::span<const uint64_t> hashes, int64_t k) const {
  return cached_free(hashes, 0, k);
}

void FullGroupManager::resume(SeqBlocks& s, std::span<const uint64_t> hashes, int64_t k) {
  take_cached(s, hashes, 0, k);
}

int64_t FullGroupManager::resume_limit(std::span<const uint64_t> hashes) const {
  int64_t k = 0;
  while (k < static_cast<int64_t>(hashes.size()) &&
         pool_->lookup(index_, hashes[static_cast<size_t>(k)]) != kNullBlock) {
    ++k;
  }
  return k;
}

int64_t FullGroupManager::peak_blocks(int64_t len, int64_t /*chunk*/) const {
  return ceil_blocks(len);
}

}  // namespace deepinfer::kv
