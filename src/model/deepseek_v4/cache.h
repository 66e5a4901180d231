// Per-sequence KV / state cache of the DeepSeek-V4 forward pass (spec §3), in the backend's
// memory (host for the CPU backends, device for CUDA: backend/buffer.h).
//
// One LayerCache per attention layer (main layers, then MTP blocks) holds the four kinds of
// state a V4 layer needs:
//   window      sliding-window K=V rows (already RoPE'd and fake-quantized), a ring keyed by
//               absolute position;
//   comp_state  the compressor's per-token (kv, gate+ape) rows not yet folded into a finished
//               compressed row (plus, for ratio 4, the previous window's rows: the overlap half);
//   comp_rows   finished compressed rows, row w covering tokens [w·m, (w+1)·m);
//   idx_state / idx_rows: the same two for the CSA indexer's own compressor (index keys).
//
// Rows are stored as the FP32 values the attention reads (BF16-exact in official semantics).
// Rings keep `max_rollback` rows beyond what the next step needs, so rolling back the last k
// tokens (speculative decoding) is only a truncation: nothing has to be recomputed. An append is
// a claim of the slots the new rows go to; the model fills the claims of every sequence of a
// step with one Ops::scatter_rows per layer, so the rows never leave the backend's memory and a
// device backend does not pay one copy per sequence.
//
// Paged storage (backend/page_pool.h): every kind lives in pages of the model's PagePools, in
// the backend's memory, so a running engine neither allocates nor frees backend memory per
// sequence. The bounded kinds (window, compressor states) hold one page each: a ring of their
// fixed capacity, overwritten in place. The growing kinds (compressed rows, index keys) are
// PagedRows: a page table of pages of `page_rows` rows, appended without moving earlier rows,
// and shared with clones (prefix-cache snapshots) by reference count. A snapshot of a long
// sequence therefore copies only its rings (O(window)), not its compressed history (O(context));
// whichever holder appends into a shared, partly filled last page copies that page first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/buffer.h"
#include "backend/mat.h"
#include "backend/page_pool.h"
#include "base/status.h"
#include "io/model_config.h"

namespace deepinfer::model::deepseek_v4 {

// Fixed-width FP32 rows addressed by absolute index; keeps the newest `capacity` rows in one
// page of the pool.
class RowRing {
 public:
  RowRing() = default;
  ~RowRing();
  RowRing(RowRing&& o) noexcept;
  RowRing& operator=(RowRing&& o) noexcept;
  RowRing(const RowRing&) = delete;
  RowRing& operator=(const RowRing&) = delete;

  void init(backend::PagePools& pools, int64_t capacity, int64_t width);
  int64_t size() const { return size_; }      // rows appended so far (minus truncation)
  int64_t oldest() const { return oldest_; }  // smallest index still readable
  int64_t width() const { return width_; }
  const float* row(int64_t index) const;
  // Slot of row `index` in the ring storage (readable indices only).
  int32_t slot(int64_t index) const;
  // Appends n rows whose values the caller writes afterwards (before anything reads them): the
  // slot of each row that survives, the newest min(n, capacity), is pushed onto `dst` in row
  // order. Returns how many leading rows of the n were dropped (n - kept).
  int64_t claim(int64_t n, std::vector<float*>& dst);
  // A deep copy with the data copy left to the caller: the copy's page is taken and
  // {source, destination} of its capacity · width floats appended to `copies` (SequenceCache
  // copies every ring of a snapshot with one scatter_rows per ring size).
  struct Copy {
    const float* src;
    float* dst;
    int64_t floats;
  };
  RowRing clone_uncopied(std::vector<Copy>& copies) const;
  int64_t page_bytes() const {
    return page_ >= 0 ? static_cast<int64_t>(pool_->page_bytes()) : 0;
  }
  backend::Ops* ops() const { return pool_ != nullptr ? &pool_->ops() : nullptr; }
  // Forgets rows >= new_size. Rows below new_size stay readable when they were kept.
  void truncate(int64_t new_size);

 private:
  void release();

  std::shared_ptr<backend::PagePool> pool_;
  int32_t page_ = -1;
  float* data_ = nullptr;
  int64_t capacity_ = 0, width_ = 0, size_ = 0, oldest_ = 0;
};

// Growing list of fixed-width FP32 rows (compressed rows, index keys) in pages of `page_rows`
// rows: row i is at page i / page_rows. Earlier rows never move when it grows.
class PagedRows {
 public:
  PagedRows() = default;
  ~PagedRows();
  PagedRows(PagedRows&& o) noexcept;
  PagedRows& operator=(PagedRows&& o) noexcept;
  PagedRows(const PagedRows&) = delete;
  PagedRows& operator=(const PagedRows&) = delete;

  void init(backend::PagePools& pools, int64_t width, int64_t page_rows);
  int64_t size() const { return size_; }
  int64_t width() const { return width_; }
  int64_t page_rows() const { return page_rows_; }
  int64_t num_pages() const { return static_cast<int64_t>(ids_.size()); }
  const float* row(int64_t i) const {
    return pages_[static_cast<size_t>(i / page_rows_)] + (i % page_rows_) * width_;
  }
  // The rows as a paged matrix (valid until the next claim or truncate).
  backend::PagedCMat view() const { return {pages_.data(), size_, width_, page_rows_}; }
  // Appends n rows whose values the caller writes afterwards: each new row's address is pushed
  // onto `dst` in row order. A shared, partly filled last page is copied first (copy-on-write).
  void claim(int64_t n, std::vector<float*>& dst);
  // Forgets rows >= new_size; pages past the new end go back to the pool.
  void truncate(int64_t new_size);
  // Shares every page (no copy): the prefix cache's snapshots.
  PagedRows clone() const;
  int64_t page_bytes() const {
    return num_pages() * static_cast<int64_t>(pool_ != nullptr ? pool_->page_bytes() : 0);
  }

 private:
  void release();

  std::shared_ptr<backend::PagePool> pool_;
  std::vector<int32_t> ids_;
  std::vector<const float*> pages_;  // addresses of ids_, in order (the view's page table)
  int64_t width_ = 0, size_ = 0, page_rows_ = 1;
  // Set on both sides of a clone: only then may a page have another holder, so a list never
  // cloned appends without asking the pool (its mutex) for reference counts.
  mutable bool maybe_shared_ = false;
};

// The running state of one compressor: the (kv, gate + ape) rows of recent tokens.
struct CompressorState {
  RowRing kv, gate;
  PagedRows rows;  // finished compressed rows
  int ratio = 0;
};

struct LayerCache {
  io::AttentionKind kind = io::AttentionKind::kSWA;
  RowRing window;
  CompressorState comp;  // CSA, HCA
  CompressorState idx;   // CSA (indexer keys)
};

struct CacheOptions {
  int max_rollback = 16;  // tokens that rollback() can undo
  // Source tokens one page of compressed rows or index keys covers: a ratio-m list has
  // max(1, page_tokens / m) rows per page. 256 (the KV block size) gives V4's m = 4 pages of
  // 64 rows (whole 64-key blocks of the CUDA indexer; 128 KiB of V4-Flash attention rows per
  // layer), and m = 128 pages of 2 rows. Tests use small pages to cross many page boundaries.
  int page_tokens = 256;
};

class SequenceCache {
 public:
  // Storage comes from `pools` (pages of host or device memory); the pools' ops must outlive
  // the cache (the pools themselves are kept alive by the cache).
  static SequenceCache create(backend::PagePools& pools, const io::ModelConfig& config,
                              const CacheOptions& options = {});

  int64_t length() const { return length_; }          // tokens processed by the main layers
  int64_t mtp_length() const { return mtp_length_; }  // positions processed by the MTP block
  int max_rollback() const { return max_rollback_; }

  // Undo the last k tokens (k <= max_rollback). The MTP state is cut so that it never holds a
  // row that used a rolled-back token (row t of the MTP block uses token t + 1).
  Status rollback(int64_t k);

  // Model-side access.
  LayerCache& layer(size_t i) { return layers_[i]; }
  LayerCache& mtp_layer(size_t i) { return mtp_layers_[i]; }
  void advance(int64_t n) { length_ += n; }
  void advance_mtp(int64_t n) { mtp_length_ += n; }

  // Bytes of FP32 state held now (for logs and tests).
  int64_t footprint_bytes() const;

  // Bytes of pages this cache holds (rings whole; shared pages counted in full by every holder).
  int64_t page_bytes() const;

  // A copy in the same backend memory: the engine's prefix cache keeps one per cached block
  // boundary and restores a sequence from it (bitwise the state it would recompute). The rings
  // are copied, the compressed rows and index keys shared (PagedRows::clone).
  SequenceCache clone() const;

 private:
  static void truncate_layer(LayerCache& c, int64_t new_len);

  std::vector<LayerCache> layers_, mtp_layers_;
  int64_t length_ = 0, mtp_length_ = 0;
  int max_rollback_ = 0;
};

}  // namespace deepinfer::model::deepseek_v4
