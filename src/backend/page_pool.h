// PagePool: fixed-size pages of a backend's memory (device memory for CUDA), reference-counted
// and recycled, so a KV cache never allocates or frees backend memory in steady state.
//
// Why: every KV kind used to be its own allocation per sequence and layer, and the growing
// row lists doubled by allocate-copy-free. On CUDA that is a cudaMalloc per new sequence and
// layer, a cudaFree (which synchronises the whole device) per finished one, and 2x the rows'
// bytes live while a list grows. The pool takes memory from the backend in chunks that are
// never moved or returned until the pool dies; a released page goes on a free list and the next
// acquire of any sequence reuses it. Pages are shared by reference count: a prefix-cache
// snapshot of a sequence holds the same pages as the sequence (copy-on-write by the holder that
// writes, see PagedRows in model/cache.h).
//
// Reuse is safe without waiting for the device: every op of a backend runs in issue order on one
// stream, so the writes of a page's next owner queue behind the reads of its last one.
// A recycled page is NOT zero-filled (unlike Ops::allocate): its holder writes a row before
// anything reads it.
//
// Thread-safe: sequences are extended on the executor thread and dropped on the engine's.
// Page addresses are returned at acquire time and cached by the holder, so the hot paths that
// address rows never touch the pool (or its mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "backend/buffer.h"
#include "backend/ops.h"

namespace deepinfer::backend {

class PagePool {
 public:
  // Chunks grow geometrically (1, 1, 2, 4, ... pages) up to kMaxChunkBytes, so a small model
  // reserves little and a big one few chunks.
  static constexpr size_t kMaxChunkBytes = size_t{64} << 20;

  PagePool(Ops& ops, size_t page_bytes);
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  size_t page_bytes() const { return page_bytes_; }
  Ops& ops() const { return ops_; }

  struct Page {
    int32_t id = -1;
    void* data = nullptr;
  };
  // A page with reference count 1: a free one, else one of a new chunk (Ops::allocate, which
  // throws OutOfMemory when the backend's memory is exhausted; nothing changes then).
  Page acquire();
  // One more reference to each page (a snapshot sharing them).
  void retain(std::span<const int32_t> ids);
  void retain(int32_t id) { retain(std::span<const int32_t>(&id, 1)); }
  // One reference less to each; at zero a page goes back to the free list.
  void release(std::span<const int32_t> ids);
  void release(int32_t id) { release(std::span<const int32_t>(&id, 1)); }
  // Current holders of a page (1: the caller may write it in place).
  int32_t ref_count(int32_t id) const;

  struct Stats {
    int64_t pages_reserved = 0;  // in chunks taken from the backend
    int64_t pages_in_use = 0;    // reference count > 0
    int64_t bytes_reserved = 0;
    int64_t bytes_in_use = 0;
  };
  Stats stats() const;

 private:
  Ops& ops_;
  size_t page_bytes_;
  mutable std::mutex mu_;
  std::vector<Buffer> chunks_;
  std::vector<void*> address_;  // per page id
  std::vector<int32_t> refs_;   // per page id
  std::vector<int32_t> free_;   // ids with reference count 0, reused last-in first-out
};

// One pool per page size, shared by every cache of a model (and its snapshots, which may outlive
// a sequence: holders keep their pool alive through the shared pointer).
class PagePools {
 public:
  explicit PagePools(Ops& ops) : ops_(ops) {}
  Ops& ops() const { return ops_; }
  // The pool of pages of `page_bytes` (rounded up to kPageAlign), made on first use.
  std::shared_ptr<PagePool> pool(size_t page_bytes);
  // Sums over every pool.
  PagePool::Stats stats() const;

  static constexpr size_t kPageAlign = 256;  // whole 16-byte vectors and cache lines per page

 private:
  Ops& ops_;
  mutable std::mutex mu_;
  std::map<size_t, std::shared_ptr<PagePool>> pools_;
};

}  // namespace deepinfer::backend
