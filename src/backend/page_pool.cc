// PagePool / PagePools (see page_pool.h).
#include "backend/page_pool.h"

#include <algorithm>

#include "base/check.h"

namespace deepinfer::backend {

PagePool::PagePool(Ops& ops, size_t page_bytes) : ops_(ops), page_bytes_(page_bytes) {
  DI_CHECK(page_bytes > 0);
}

PagePool::Page PagePool::acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) {
    // Geometric growth: as many new pages as are reserved already (at least 1), capped by bytes.
    const size_t cap = std::max<size_t>(1, kMaxChunkBytes / page_bytes_);
    const size_t n = std::clamp<size_t>(address_.size(), 1, cap);
    Buffer chunk(ops_, n * page_bytes_);  // throws OutOfMemory: nothing has changed yet
    auto* base = static_cast<char*>(chunk.data());
    chunks_.push_back(std::move(chunk));
    for (size_t i = n; i-- > 0;) {  // lowest address on top: a sequence's pages come in order
      free_.push_back(static_cast<int32_t>(address_.size() + i));
    }
    for (size_t i = 0; i < n; ++i) {
      address_.push_back(base + i * page_bytes_);
      refs_.push_back(0);
    }
  }
  const int32_t id = free_.back();
  free_.pop_back();
  DI_CHECK(refs_[static_cast<size_t>(id)] == 0);
  refs_[static_cast<size_t>(id)] = 1;
  return {id, address_[static_cast<size_t>(id)]};
}

void PagePool::retain(std::span<const int32_t> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int32_t id : ids) {
    DI_CHECK(id >= 0 && static_cast<size_t>(id) < refs_.size() && refs_[static_cast<size_t>(id)] > 0);
    ++refs_[static_cast<size_t>(id)];
  }
}

void PagePool::release(std::span<const int32_t> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int32_t id : ids) {
    DI_CHECK(id >= 0 && static_cast<size_t>(id) < refs_.size() && refs_[static_cast<size_t>(id)] > 0);
    if (--refs_[static_cast<size_t>(id)] == 0) free_.push_back(id);
  }
}

int32_t PagePool::ref_count(int32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  DI_CHECK(id >= 0 && static_cast<size_t>(id) < refs_.size());
  return refs_[static_cast<size_t>(id)];
}

PagePool::Stats PagePool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.pages_reserved = static_cast<int64_t>(address_.size());
  s.pages_in_use = s.pages_reserved - static_cast<int64_t>(free_.size());
  s.bytes_reserved = s.pages_reserved * static_cast<int64_t>(page_bytes_);
  s.bytes_in_use = s.pages_in_use * static_cast<int64_t>(page_bytes_);
  return s;
}

std::shared_ptr<PagePool> PagePools::pool(size_t page_bytes) {
  const size_t rounded = (std::max<size_t>(page_bytes, 1) + kPageAlign - 1) / kPageAlign * kPageAlign;
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<PagePool>& p = pools_[rounded];
  if (p == nullptr) p = std::make_shared<PagePool>(ops_, rounded);
  return p;
}

PagePool::Stats PagePools::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PagePool::Stats total;
  for (const auto& [bytes, p] : pools_) {
    const PagePool::Stats s = p->stats();
    total.pages_reserved += s.pages_reserved;
    total.pages_in_use += s.pages_in_use;
    total.bytes_reserved += s.bytes_reserved;
    total.bytes_in_use += s.bytes_in_use;
  }
  return total;
}

}  // namespace deepinfer::backend
