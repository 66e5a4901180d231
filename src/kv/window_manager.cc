// WindowGroupManager: sliding-window rows (vLLM v1 SlidingWindowManager). A token at position p
// reads window rows [p - W + 1, p]; the next token is at `len`, and a rollback may move it back
// by up to max_rollback, so blocks ending before len - W + 1 - max_rollback are released. They
// keep their prefix hash, so a request resuming from that prefix can take them back until the
// LRU evicts them.
#include <algorithm>

#include "kv/group_manager.h"

namespace deepinfer::kv {

void WindowGroupManager::release_unneeded(SeqBlocks& s, int64_t len) {
  const int64_t first_pos = std::max<int64_t>(0, len - spec_.window + 1 - max_rollback_);
  int64_t first_block =
      std::min<int64_t>(first_pos / block_size_, static_cast<int64_t>(s.blocks.size()));
  // Not before it is published (as StateGroupManager: a block whose tokens are not known yet
  // would otherwise leave the prefix cache without ever entering it).
  if (caching_) first_block = std::min(first_block, s.num_published);
  if (first_block <= s.first_live) return;
  release_range(s, s.first_live, first_block);
  s.first_live = first_block;
}

int64_t WindowGroupManager::first_needed_for_resume(int64_t h) const {
  // The first recomputed token (position h) reads rows from h - W + 1 on.
  return std::max<int64_t>(0, h - spec_.window + 1) / block_size_;
}

bool WindowGroupManager::can_resume(std::span<const uint64_t> hashes, int64_t k) const {
  return all_cached(hashes, first_needed_for_resume(k * block_size_), k);
}

int64_t WindowGroupManager::blocks_to_resume(std::span<const uint64_t> hashes, int64_t k) const {
  return cached_free(hashes, first_needed_for_resume(k * block_size_), k);
}

void WindowGroupManager::resume(SeqBlocks& s, std::span<const uint64_t> hashes, int64_t k) {
  take_cached(s, hashes, first_needed_for_resume(k * block_size_), k);
}

int64_t WindowGroupManager::peak_blocks(int64_t len, int64_t chunk) const {
  // Before a grow the live blocks start at most W - 1 + rollback tokens back; the grow adds the
  // chunk's blocks; +2 covers both ends landing mid-block.
  const int64_t bound =
      (spec_.window - 1 + max_rollback_ + chunk + block_size_ - 1) / block_size_ + 2;
  return std::min(ceil_blocks(len), bound);
}

}  // namespace deepinfer::kv
