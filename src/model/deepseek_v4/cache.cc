// SequenceCache (see cache.h): rings sized so that the next step and a rollback both find
// every row they need.
#include "model/deepseek_v4/cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/check.h"

namespace deepinfer::model::deepseek_v4 {

void RowRing::init(backend::Ops& ops, int64_t capacity, int64_t width) {
  capacity_ = capacity;
  width_ = width;
  size_ = oldest_ = 0;
  data_ = backend::Buffer(ops, static_cast<size_t>(capacity * width) * sizeof(float));
}

const float* RowRing::row(int64_t index) const {
  return data_.as<const float>() + slot(index) * width_;
}

int32_t RowRing::slot(int64_t index) const {
  DI_CHECK(index >= oldest_ && index < size_);
  return static_cast<int32_t>(index % capacity_);
}

int64_t RowRing::claim(int64_t n, std::vector<float*>& dst) {
  // Only the newest `capacity` rows survive: the earlier ones would be overwritten in the same
  // step, and a device scatter has no order between rows.
  const int64_t dropped = std::max<int64_t>(0, n - capacity_);
  for (int64_t r = dropped; r < n; ++r) {
    dst.push_back(data_.as<float>() + ((size_ + r) % capacity_) * width_);
  }
  size_ += n;
  oldest_ = std::max(oldest_, size_ - capacity_);
  return dropped;
}

RowRing RowRing::clone() const {
  RowRing r;
  r.capacity_ = capacity_;
  r.width_ = width_;
  r.size_ = size_;
  r.oldest_ = oldest_;
  if (data_.ops() != nullptr) {
    r.data_ = backend::Buffer(*data_.ops(), data_.bytes());
    data_.ops()->copy(r.data_.data(), data_.data(), data_.bytes());
  }
  return r;
}

RowList RowList::clone() const {
  RowList l;
  l.width_ = width_;
  l.size_ = size_;
  if (data_.ops() != nullptr) {
    l.data_ = backend::Buffer(*data_.ops());
    const size_t bytes = static_cast<size_t>(size_ * width_) * sizeof(float);
    if (bytes > 0) {
      l.data_.fit_bytes(bytes);
      data_.ops()->copy(l.data_.data(), data_.data(), bytes);
    }
  }
  return l;
}

void RowRing::truncate(int64_t new_size) {
  DI_CHECK(new_size <= size_);
  size_ = new_size;
  oldest_ = std::min(oldest_, size_);
}

float* RowList::claim(int64_t n) {
  const size_t row_bytes = static_cast<size_t>(width_) * sizeof(float);
  float* base = static_cast<float*>(data_.reserve_bytes(row_bytes * static_cast<size_t>(size_ + n),
                                                        row_bytes * static_cast<size_t>(size_)));
  float* at = base + size_ * width_;
  size_ += n;
  return at;
}

namespace {

void init_compressor(backend::Ops& ops, CompressorState& s, int ratio, int d_c, int rollback) {
  const bool overlap = ratio == 4;
  const int64_t width = overlap ? 2 * d_c : d_c;
  // Tokens whose rows an unfinished window still needs: the current window, plus the previous
  // one for the overlap half; + rollback slack.
  const int64_t cap = (overlap ? 2 * ratio : ratio) + rollback;
  s.kv.init(ops, cap, width);
  s.gate.init(ops, cap, width);
  s.rows.init(ops, d_c);
  s.ratio = ratio;
}

LayerCache make_layer(backend::Ops& ops, const io::ModelConfig& c, const io::LayerSpec& spec,
                      int rollback) {
  LayerCache l;
  l.kind = spec.attention;
  l.window.init(ops, c.sliding_window + rollback, c.head_dim);
  if (spec.attention != io::AttentionKind::kSWA) {
    init_compressor(ops, l.comp, spec.compress_ratio, c.head_dim, rollback);
  }
  if (spec.attention == io::AttentionKind::kCSA) {
    init_compressor(ops, l.idx, spec.compress_ratio, c.index_head_dim, rollback);
  }
  return l;
}

// Bytes of the rows a ring holds now (readable rows; the allocation is fixed at init).
int64_t ring_bytes(const RowRing& r) {
  return (r.size() - r.oldest()) * r.width() * static_cast<int64_t>(sizeof(float));
}

}  // namespace

SequenceCache SequenceCache::create(backend::Ops& ops, const io::ModelConfig& config,
                                    const CacheOptions& options) {
  SequenceCache s;
  s.max_rollback_ = std::max(0, options.max_rollback);
  for (const auto& spec : config.layers)
    s.layers_.push_back(make_layer(ops, config, spec, s.max_rollback_ + 1));
  for (const auto& spec : config.mtp_layers) {
    s.mtp_layers_.push_back(make_layer(ops, config, spec, s.max_rollback_ + 1));
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

SequenceCache SequenceCache::clone() const {
  SequenceCache s;
  s.length_ = length_;
  s.mtp_length_ = mtp_length_;
  s.max_rollback_ = max_rollback_;
  auto copy_layer = [](const LayerCache& l) {
    LayerCache c;
    c.kind = l.kind;
    c.window = l.window.clone();
    for (auto [dst, src] : {std::pair{&c.comp, &l.comp}, std::pair{&c.idx, &l.idx}}) {
      dst->kv = src->kv.clone();
      dst->gate = src->gate.clone();
      dst->rows = src->rows.clone();
      dst->ratio = src->ratio;
    }
    return c;
  };
  for (const auto& l : layers_) s.layers_.push_back(copy_layer(l));
  for (const auto& l : mtp_layers_) s.mtp_layers_.push_back(copy_layer(l));
  return s;
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
