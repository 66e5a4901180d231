// BlockPool implementation: see block_pool.h for the invariants.
#include "kv/block_pool.h"

#include <string>

#include "base/check.h"

namespace deepinfer::kv {

BlockPool::BlockPool(int32_t num_blocks)
    : num_blocks_(num_blocks),
      num_free_(0),
      sentinel_(num_blocks),
      ref_(static_cast<size_t>(num_blocks), 0),
      prev_(static_cast<size_t>(num_blocks) + 1),
      next_(static_cast<size_t>(num_blocks) + 1),
      in_free_(static_cast<size_t>(num_blocks), 0),
      hashed_(static_cast<size_t>(num_blocks), 0),
      key_(static_cast<size_t>(num_blocks), Key{0, -1}) {
  DI_CHECK(num_blocks >= 0);
  prev_[static_cast<size_t>(sentinel_)] = sentinel_;
  next_[static_cast<size_t>(sentinel_)] = sentinel_;
  // Ascending ids in allocation order keeps tests and traces readable.
  for (BlockId id = 0; id < num_blocks; ++id) {
    link_after(prev_[static_cast<size_t>(sentinel_)], id);
  }
}

void BlockPool::unlink(BlockId id) {
  const auto i = static_cast<size_t>(id);
  DI_CHECK(in_free_[i]);
  next_[static_cast<size_t>(prev_[i])] = next_[i];
  prev_[static_cast<size_t>(next_[i])] = prev_[i];
  in_free_[i] = 0;
  --num_free_;
}

void BlockPool::link_after(int32_t where, BlockId id) {
  const auto i = static_cast<size_t>(id);
  DI_CHECK(!in_free_[i]);
  const int32_t after = next_[static_cast<size_t>(where)];
  prev_[i] = where;
  next_[i] = after;
  next_[static_cast<size_t>(where)] = id;
  prev_[static_cast<size_t>(after)] = id;
  in_free_[i] = 1;
  ++num_free_;
}

BlockId BlockPool::allocate() {
  DI_CHECK(num_free_ > 0);
  const BlockId id = next_[static_cast<size_t>(sentinel_)];
  unlink(id);
  const auto i = static_cast<size_t>(id);
  if (hashed_[i]) {
    by_hash_.erase(key_[i]);
    hashed_[i] = 0;
    key_[i] = Key{0, -1};
    ++num_evictions_;
  }
  ref_[i] = 1;
  return id;
}

void BlockPool::acquire(BlockId id) {
  DI_CHECK(id >= 0 && id < num_blocks_);
  const auto i = static_cast<size_t>(id);
  if (ref_[i] == 0) unlink(id);
  ++ref_[i];
}

void BlockPool::release(BlockId id) {
  DI_CHECK(id >= 0 && id < num_blocks_);
  const auto i = static_cast<size_t>(id);
  DI_CHECK(ref_[i] > 0);
  if (--ref_[i] > 0) return;
  if (hashed_[i]) {
    link_after(prev_[static_cast<size_t>(sentinel_)], id);  // most recently freed: evicted last
  } else {
    link_after(sentinel_, id);  // no cached data: reuse first
  }
}

BlockId BlockPool::lookup(int32_t group, uint64_t hash) const {
  const auto it = by_hash_.find(Key{hash, group});
  return it == by_hash_.end() ? kNullBlock : it->second;
}

bool BlockPool::register_hash(BlockId id, int32_t group, uint64_t hash) {
  const auto i = static_cast<size_t>(id);
  DI_CHECK(ref_[i] > 0);
  if (hashed_[i]) return false;
  const Key key{hash, group};
  if (!by_hash_.emplace(key, id).second) return false;
  hashed_[i] = 1;
  key_[i] = key;
  return true;
}

int32_t BlockPool::drop_free_hashes() {
  int32_t dropped = 0;
  for (size_t i = 0; i < hashed_.size(); ++i) {
    if (!hashed_[i] || ref_[i] != 0) continue;
    by_hash_.erase(key_[i]);
    hashed_[i] = 0;
    key_[i] = Key{0, -1};
    ++dropped;
  }
  return dropped;
}

std::vector<BlockId> BlockPool::free_order() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_));
  for (int32_t id = next_[static_cast<size_t>(sentinel_)]; id != sentinel_;
       id = next_[static_cast<size_t>(id)]) {
    out.push_back(id);
  }
  return out;
}

Status BlockPool::check_consistency() const {
  int32_t zero_ref = 0;
  for (size_t i = 0; i < ref_.size(); ++i) {
    if (ref_[i] < 0) return internal_error("block " + std::to_string(i) + " has a negative ref");
    if ((ref_[i] == 0) != (in_free_[i] != 0)) {
      return internal_error("block " + std::to_string(i) + ": ref count " +
                            std::to_string(ref_[i]) + " disagrees with free-list membership");
    }
    zero_ref += ref_[i] == 0 ? 1 : 0;
  }
  const auto order = free_order();
  if (static_cast<int32_t>(order.size()) != zero_ref || zero_ref != num_free_) {
    return internal_error("free list holds " + std::to_string(order.size()) + " blocks, " +
                          std::to_string(zero_ref) + " have ref 0, counter says " +
                          std::to_string(num_free_));
  }
  size_t hashed = 0;
  for (size_t i = 0; i < hashed_.size(); ++i) {
    if (!hashed_[i]) continue;
    ++hashed;
    const auto it = by_hash_.find(key_[i]);
    if (it == by_hash_.end() || it->second != static_cast<BlockId>(i)) {
      return internal_error("block " + std::to_string(i) + " is marked hashed but not indexed");
    }
  }
  if (hashed != by_hash_.size()) return internal_error("hash index holds stale entries");
  return Status::ok_status();
}

}  // namespace deepinfer::kv
