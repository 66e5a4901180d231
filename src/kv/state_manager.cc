// StateGroupManager: the compressor's running state.
//
// The live slot is the state the model reads and updates every step. It is one fixed-size page
// per sequence, however long the sequence; rolling it back is the runner's job (the slot keeps
// the last max_rollback tokens' (kv, score) rows, as the CPU model's RowRing does).
// With prefix caching, each time a step reaches a block boundary (j + 1) * B the runner also
// writes the state at that boundary into snapshot block j. Because B is a multiple of every
// ratio, a boundary never falls inside a compression window: the snapshot holds only the
// overlap half of ratio-4 compressors (the previous window's rows); ratio-128 compressors are
// empty there. Snapshots are published under the same chain hash as block j and released at
// the next grow: nobody running needs them, a later request resuming at that boundary copies
// one into its own live slot.
#include <algorithm>

#include "kv/group_manager.h"

namespace deepinfer::kv {

void StateGroupManager::release_unneeded(SeqBlocks& s, int64_t /*len*/) {
  // A snapshot whose block's tokens are not known yet (asynchronous scheduling's placeholder,
  // speculative drafts) stays until a later grow publishes it: released unpublished, its
  // boundary could never be resumed from (a chat's next turn found no hit in its previous
  // answer under asynchronous scheduling, stop 45).
  const auto size = static_cast<int64_t>(s.blocks.size());
  const int64_t end = caching_ ? std::min(size, s.num_published) : size;
  if (end <= s.first_live) return;
  release_range(s, s.first_live, end);
  s.first_live = end;
}

int64_t StateGroupManager::blocks_to_grow(const SeqBlocks& s, int64_t new_len) const {
  int64_t n = s.slot == kNullBlock ? 1 : 0;
  if (caching_) {
    n += std::max<int64_t>(0, new_len / block_size_ - static_cast<int64_t>(s.blocks.size()));
  }
  return n;
}

void StateGroupManager::grow(SeqBlocks& s, int64_t new_len) {
  if (s.slot == kNullBlock) s.slot = pool_->allocate();
  if (!caching_) return;
  const int64_t want = new_len / block_size_;
  while (static_cast<int64_t>(s.blocks.size()) < want) s.blocks.push_back(pool_->allocate());
}

bool StateGroupManager::can_resume(std::span<const uint64_t> hashes, int64_t k) const {
  return all_cached(hashes, k - 1, k);
}

int64_t StateGroupManager::blocks_to_resume(std::span<const uint64_t> hashes, int64_t k) const {
  return cached_free(hashes, k - 1, k);
}

void StateGroupManager::resume(SeqBlocks& s, std::span<const uint64_t> hashes, int64_t k) {
  take_cached(s, hashes, k - 1, k);
}

void StateGroupManager::shrink(SeqBlocks& s, int64_t new_len) {
  // Snapshot j exists for boundary (j + 1) * B <= len; keep those still inside new_len.
  keep_blocks(s, new_len / block_size_);
}

int64_t StateGroupManager::peak_blocks(int64_t /*len*/, int64_t chunk) const {
  return 1 + (caching_ ? chunk / block_size_ + 1 : 0);
}

}  // namespace deepinfer::kv
