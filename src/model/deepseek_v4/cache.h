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
// tokens (speculative decoding) is only a truncation: nothing has to be recomputed. This is the
// interface the engine's paged block pool will implement later (append rows, read rows,
// truncate); the model never touches the storage directly. An append is a claim of the slots the
// new rows go to; the model fills the claims of every sequence of a step with one
// Ops::scatter_rows per layer, so the rows never leave the backend's memory and a device
// backend does not pay one copy per sequence.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/buffer.h"
#include "backend/mat.h"
#include "base/status.h"
#include "io/model_config.h"

namespace deepinfer::model::deepseek_v4 {

// Fixed-width FP32 rows addressed by absolute index; keeps the newest `capacity` rows.
class RowRing {
 public:
  void init(backend::Ops& ops, int64_t capacity, int64_t width);
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
  // A deep copy (backend copies of the storage).
  RowRing clone() const;
  // Forgets rows >= new_size. Rows below new_size stay readable when they were kept.
  void truncate(int64_t new_size);

 private:
  backend::Buffer data_;
  int64_t capacity_ = 0, width_ = 0, size_ = 0, oldest_ = 0;
};

// Growing list of fixed-width FP32 rows (compressed rows); contiguous, so it is a CMat.
class RowList {
 public:
  void init(backend::Ops& ops, int64_t width) {
    data_ = backend::Buffer(ops);
    width_ = width;
    size_ = 0;
  }
  int64_t size() const { return size_; }
  int64_t width() const { return width_; }
  const float* row(int64_t i) const { return data_.as<const float>() + i * width_; }
  backend::CMat view() const { return {data_.as<const float>(), size_, width_}; }
  // Appends n rows whose values the caller writes afterwards, contiguously at the returned
  // address. Growing may move the storage: earlier row pointers and views are invalid after it.
  float* claim(int64_t n);
  void truncate(int64_t new_size) { size_ = std::min(size_, new_size); }
  RowList clone() const;  // a deep copy of the rows held

 private:
  backend::Buffer data_;
  int64_t width_ = 0, size_ = 0;
};

// The running state of one compressor: the (kv, gate + ape) rows of recent tokens.
struct CompressorState {
  RowRing kv, gate;
  RowList rows;  // finished compressed rows
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
};

class SequenceCache {
 public:
  // Storage comes from `ops` (host or device memory), which must outlive the cache.
  static SequenceCache create(backend::Ops& ops, const io::ModelConfig& config,
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

  // A deep copy in the same backend memory: the engine's prefix cache keeps one per cached
  // block boundary and restores a sequence from it (bitwise the state it would recompute).
  SequenceCache clone() const;

 private:
  static void truncate_layer(LayerCache& c, int64_t new_len);

  std::vector<LayerCache> layers_, mtp_layers_;
  int64_t length_ = 0, mtp_length_ = 0;
  int max_rollback_ = 0;
};

}  // namespace deepinfer::model::deepseek_v4
