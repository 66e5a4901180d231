// Per-sequence KV / state cache of the DeepSeek-V4 family (spec §3, §6.3), in the backend's
// memory (host for the CPU backends, device for CUDA: backend/buffer.h). Both families use it;
// a family says what each layer keeps through a CachePlan.
//
// One LayerCache per attention layer (main layers, then the draft layers: V4's MTP blocks,
// V4.1's DSpark stages) holds up to four kinds of state:
//   window      sliding-window K=V rows (already RoPE'd and fake-quantized), a ring keyed by
//               absolute position;
//   comp        the compressor's per-token (kv, gate) rows not yet folded into a finished
//               compressed row (plus, for V4's ratio 4, the previous window's rows: the overlap
//               half), and the finished compressed rows, row w covering tokens [w·m, (w+1)·m);
//   idx         index keys: V4 CSA layers' own indexer compressor (state + rows); V4.1 Full
//               layers' keys derived from their compressed latents (rows only).
// Compressed rows and index keys belong to the layer that makes them: every V4 compressed
// layer, only the KV-source (Full) layers in V4.1, whose later layers read the source's rows
// (layers/attention.h: a layer's view names the source it reads). V4.1 also keeps, per
// sequence, the last compressed token ids its Engram hashes look back on.
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
#include <span>
#include <vector>

#include "backend/buffer.h"
#include "backend/mat.h"
#include "backend/page_pool.h"
#include "base/status.h"

namespace deepinfer::model {

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
  // Advances by n rows that are never written (bounded replay: positions a layer does not
  // run); every row so far becomes unreadable, so oldest() == size() afterwards.
  void skip(int64_t n);
  // Whether init() gave it storage (a snapshot's compressed part has none).
  bool has_storage() const { return page_ >= 0; }

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
  RowRing window;
  CompressorState comp;  // V4 CSA, HCA; V4.1 Full layers
  CompressorState idx;   // V4 CSA (indexer keys + their compressor); V4.1 Full layers (keys)
};

// What one layer keeps (a family's choice, from its config).
struct LayerCachePlan {
  int64_t window_width = 0;  // K=V row width; 0 = no window
  struct Compressed {
    int ratio = 0;            // 0 = none
    int64_t row_width = 0;    // finished rows
    int64_t state_width = 0;  // per-token (kv, gate) rows; 0 = no running state
    int64_t state_tokens = 0; // tokens an unfinished row still needs (before rollback slack)
  };
  Compressed comp, idx;
};

struct CachePlan {
  std::vector<LayerCachePlan> layers, draft_layers;
  int64_t window = 0;  // sliding window W (rows kept behind the next token)
  // Positions a draft layer's state lags the main layers by: V4's MTP row t uses token t + 1
  // (1); V4.1's DSpark context rings hold exactly the processed positions (0).
  int64_t draft_lag = 0;
  // Compressed token ids the Engram hash looks back on (V4.1: engram_max_ngram_size - 1; 0 =
  // none).
  int64_t engram_history = 0;
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
  static SequenceCache create(backend::PagePools& pools, const CachePlan& plan,
                              const CacheOptions& options = {});

  int64_t length() const { return length_; }  // tokens processed by the main layers
  // Positions processed by the draft layers (V4 MTP block, V4.1 DSpark context rings).
  int64_t draft_length() const { return draft_length_; }
  int max_rollback() const { return max_rollback_; }

  // Undo the last k tokens (k <= max_rollback). The draft state is cut so that it never holds a
  // row that used a rolled-back token (CachePlan::draft_lag).
  Status rollback(int64_t k);

  // Bounded replay (DeepSeek-V4.1, docs/bounded_replay.md). What a state holds besides exact
  // rows, so that the prefix cache knows whom a snapshot of it may serve:
  //   upper_from()       the layers above the last KV source (and the drafter's context) hold
  //                      no row before this position: a truncated prefill skipped them (0: none
  //                      skipped);
  //   window_from()      every layer's window was rebuilt from this position by a window
  //                      replay, so rows from here on are that replay's approximation (0: none);
  //   compressed_until() positions past length() whose compressed rows and index keys are
  //                      already held (a window replay restored them): the KV sources do not
  //                      compress them again.
  int64_t upper_from() const { return upper_from_; }
  int64_t window_from() const { return window_from_; }
  int64_t compressed_until() const { return compressed_until_; }
  // Decoder side: the next n positions skip the windows of main layers [first_layer, end) and
  // of every draft layer (called by the model before those layers run the step; length() then
  // advances as usual after it).
  void skip_upper(size_t first_layer, int64_t n);
  // Encoder side. The compressed part of a state: its compressed rows and index keys (shared),
  // length and marks, no rings (footprint O(compressed rows), nothing else): what the prefix
  // cache keeps of a snapshot whose windows it evicted. Not a sequence by itself.
  SequenceCache compressed_part() const;
  bool has_rings() const;
  // On a new sequence (length 0): takes part's compressed rows and index keys (shared) and
  // compressor states at part.length() = h (empty: h must close every compression group) and
  // sets length() to `from` with empty windows, so that the model's next step feeds positions
  // [from, h) without compressing them again. FailedPrecondition when h does not close a group.
  Status adopt_compressed(const SequenceCache& part, int64_t from);
  // Replaces the Engram look-back (the compressed ids before length()).
  void set_engram_history(std::span<const int32_t> ids);
  // Undo the draft layers' rows past `draft_length` (at most max_rollback of them): a drafter
  // that ran ahead on its own drafts (V4's chained MTP) returns to the accepted state.
  Status truncate_draft(int64_t draft_length);
  // Moves the draft layers on to position `to` (draft_length() <= to <= length()) without rows:
  // their windows restart empty there, as after bounded replay's skip. A drafter that lost the
  // hidden rows of some positions (it slept, or a prefix restore outran it) resumes from the
  // rows it has; its window refills as it goes, and after a window's worth of positions its
  // state is again the one it would have had. FailedPrecondition when a draft layer keeps a
  // compressed cache (its compressed rows would need the skipped positions).
  Status skip_draft(int64_t to);

  // Model-side access.
  size_t num_layers() const { return layers_.size(); }
  size_t num_draft_layers() const { return draft_layers_.size(); }
  LayerCache& layer(size_t i) { return layers_[i]; }
  const LayerCache& layer(size_t i) const { return layers_[i]; }
  LayerCache& draft_layer(size_t i) { return draft_layers_[i]; }
  const LayerCache& draft_layer(size_t i) const { return draft_layers_[i]; }
  void advance(int64_t n) { length_ += n; }
  void advance_draft(int64_t n) { draft_length_ += n; }

  // V4.1 Engram look-back: the compressed ids of positions [length() - size, length()), oldest
  // first (fewer at the sequence start). The model appends a step's ids after its forward.
  std::span<const int32_t> engram_history() const;
  void push_engram_history(std::span<const int32_t> ids);

  // Bytes of FP32 state held now (for logs and tests).
  int64_t footprint_bytes() const;

  // Bytes of pages this cache holds (rings whole; shared pages counted in full by every holder).
  int64_t page_bytes() const;

  // A copy in the same backend memory: the engine's prefix cache keeps one per cached block
  // boundary and restores a sequence from it (bitwise the state it would recompute). The rings
  // are copied, the compressed rows and index keys shared (PagedRows::clone).
  SequenceCache clone() const;

 private:
  // A cache with this one's lengths, counters and replay bounds and no rows (clone and
  // compressed_part start from it).
  SequenceCache scalars_copy() const;
  static void truncate_layer(LayerCache& c, int64_t new_len);

  std::vector<LayerCache> layers_, draft_layers_;
  int64_t length_ = 0, draft_length_ = 0;
  int64_t upper_from_ = 0, window_from_ = 0, compressed_until_ = 0;
  int64_t draft_lag_ = 0;
  int max_rollback_ = 0;
  // Engram look-back: the compressed ids of the last positions, oldest first, the last being
  // position length() - 1; at most engram_need_ + max_rollback_ are kept.
  std::vector<int32_t> engram_ids_;
  int64_t engram_need_ = 0;
};

}  // namespace deepinfer::model
