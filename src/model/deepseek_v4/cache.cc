// SequenceCache (see cache.h): rings sized so that the next step and a rollback both find
// every row they need.
#include "model/deepseek_v4/cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/check.h"

namespace deepinfer::model::deepseek_v4 {

void RowRing::init(int64_t capacity, int64_t width) {
  capacity_ = capacity;
  width_ = width;
  size_ = oldest_ = 0;
  data_.assign(static_cast<size_t>(capacity * width), 0.0f);
}

const float* RowRing::row(int64_t index) const {
  DI_CHECK(index >= oldest_ && index < size_);
  return data_.data() + (index % capacity_) * width_;
}

void RowRing::append(backend::CMat rows) {
  DI_CHECK(rows.cols == width_);
  const int64_t skip = std::max<int64_t>(0, rows.rows - capacity_);
  for (int64_t r = skip; r < rows.rows; ++r) {
    const int64_t index = size_ + r;
    std::memcpy(data_.data() + (index % capacity_) * width_, rows.row(r),
                static_cast<size_t>(width_) * sizeof(float));
  }
  size_ += rows.rows;
  oldest_ = std::max(oldest_, size_ - capacity_);
}

void RowRing::truncate(int64_t new_size) {
  DI_CHECK(new_size <= size_);
  size_ = new_size;
  oldest_ = std::min(oldest_, size_);
}

void RowList::append(backend::CMat rows) {
  DI_CHECK(rows.cols == width_);
  for (int64_t r = 0; r < rows.rows; ++r)
    data_.insert(data_.end(), rows.row(r), rows.row(r) + width_);
}

namespace {

void init_compressor(CompressorState& s, int ratio, int d_c, int rollback) {
  const bool overlap = ratio == 4;
  const int64_t width = overlap ? 2 * d_c : d_c;
  // Tokens whose rows an unfinished window still needs: the current window, plus the previous
  // one for the overlap half; + rollback slack.
  const int64_t cap = (overlap ? 2 * ratio : ratio) + rollback;
  s.kv.init(cap, width);
  s.gate.init(cap, width);
  s.rows.init(d_c);
  s.ratio = ratio;
}

LayerCache make_layer(const io::ModelConfig& c, const io::LayerSpec& spec, int rollback) {
  LayerCache l;
  l.kind = spec.attention;
  l.window.init(c.sliding_window + rollback, c.head_dim);
  if (spec.attention != io::AttentionKind::kSWA) {
    init_compressor(l.comp, spec.compress_ratio, c.head_dim, rollback);
  }
  if (spec.attention == io::AttentionKind::kCSA) {
    init_compressor(l.idx, spec.compress_ratio, c.index_head_dim, rollback);
  }
  return l;
}

// Bytes of the rows a ring holds now (readable rows; the allocation is fixed at init).
int64_t ring_bytes(const RowRing& r) {
  return (r.size() - r.oldest()) * r.width() * static_cast<int64_t>(sizeof(float));
}

}  // namespace

SequenceCache SequenceCache::create(const io::ModelConfig& config, const CacheOptions& options) {
  SequenceCache s;
  s.max_rollback_ = std::max(0, options.max_rollback);
  for (const auto& spec : config.layers)
    s.layers_.push_back(make_layer(config, spec, s.max_rollback_ + 1));
  for (const auto& spec : config.mtp_layers) {
    s.mtp_layers_.push_back(make_layer(config, spec, s.max_rollback_ + 1));
  }
  return s;
}

void SequenceCache::truncate_layer(LayerCache& c, int64_t new_len) {
  c.window.truncate(std::min(c.window.size(), new_len));
  for (CompressorState* s : {&c.comp, &c.idx}) {
    if (s->ratio == 0) continue;
    s->kv.truncate(std::min(s->kv.size(), new_len));
    s->gate.truncate(std::min(s->gate.size(), new_len));
    s->rows.truncate(std::min(s->rows.size(), new_len / s->ratio));
  }
}

Status SequenceCache::rollback(int64_t k) {
  if (k < 0 || k > max_rollback_ || k > length_) {
    return out_of_range("rollback of " + std::to_string(k) + " tokens: allowed 0.." +
                        std::to_string(std::min<int64_t>(max_rollback_, length_)) +
                        " (cache max_rollback " + std::to_string(max_rollback_) + ", length " +
                        std::to_string(length_) + ")");
  }
  length_ -= k;
  for (auto& l : layers_) truncate_layer(l, length_);
  mtp_length_ = std::min(mtp_length_, std::max<int64_t>(0, length_ - 1));
  for (auto& l : mtp_layers_) truncate_layer(l, mtp_length_);
  return {};
}

int64_t SequenceCache::footprint_bytes() const {
  int64_t b = 0;
  for (const auto* v : {&layers_, &mtp_layers_}) {
    for (const auto& l : *v) {
      b += ring_bytes(l.window) + ring_bytes(l.comp.kv) + ring_bytes(l.comp.gate) +
           ring_bytes(l.idx.kv) + ring_bytes(l.idx.gate);
      b += (l.comp.rows.size() * l.comp.rows.width() + l.idx.rows.size() * l.idx.rows.width()) * 4;
    }
  }
  return b;
}

}  // namespace deepinfer::model::deepseek_v4
