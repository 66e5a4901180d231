// SequenceCache (see cache.h): rings sized so that the next step and a rollback both find
// every row they need.
#include "model/cache.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "base/check.h"

namespace deepinfer::model {

// ---- RowRing: one page of the pool ------------------------------------------------------

RowRing::~RowRing() { release(); }

RowRing::RowRing(RowRing&& o) noexcept
    : pool_(std::move(o.pool_)),
      page_(std::exchange(o.page_, -1)),
      data_(std::exchange(o.data_, nullptr)),
      capacity_(o.capacity_),
      width_(o.width_),
      size_(o.size_),
      oldest_(o.oldest_) {}

RowRing& RowRing::operator=(RowRing&& o) noexcept {
  if (this != &o) {
    release();
    pool_ = std::move(o.pool_);
    page_ = std::exchange(o.page_, -1);
    data_ = std::exchange(o.data_, nullptr);
    capacity_ = o.capacity_;
    width_ = o.width_;
    size_ = o.size_;
    oldest_ = o.oldest_;
  }
  return *this;
}

void RowRing::release() {
  if (page_ >= 0) pool_->release(page_);
  page_ = -1;
  data_ = nullptr;
}

void RowRing::init(backend::PagePools& pools, int64_t capacity, int64_t width) {
  release();
  capacity_ = capacity;
  width_ = width;
  size_ = oldest_ = 0;
  pool_ = pools.pool(static_cast<size_t>(capacity * width) * sizeof(float));
  const backend::PagePool::Page p = pool_->acquire();
  page_ = p.id;
  data_ = static_cast<float*>(p.data);
}

const float* RowRing::row(int64_t index) const { return data_ + slot(index) * width_; }

int32_t RowRing::slot(int64_t index) const {
  DI_CHECK(index >= oldest_ && index < size_);
  return static_cast<int32_t>(index % capacity_);
}

int64_t RowRing::claim(int64_t n, std::vector<float*>& dst) {
  // Only the newest `capacity` rows survive: the earlier ones would be overwritten in the same
  // step, and a device scatter has no order between rows.
  const int64_t dropped = std::max<int64_t>(0, n - capacity_);
  for (int64_t r = dropped; r < n; ++r) dst.push_back(data_ + ((size_ + r) % capacity_) * width_);
  size_ += n;
  oldest_ = std::max(oldest_, size_ - capacity_);
  return dropped;
}

RowRing RowRing::clone_uncopied(std::vector<Copy>& copies) const {
  RowRing r;
  r.capacity_ = capacity_;
  r.width_ = width_;
  r.size_ = size_;
  r.oldest_ = oldest_;
  if (pool_ != nullptr) {
    r.pool_ = pool_;
    const backend::PagePool::Page p = pool_->acquire();
    r.page_ = p.id;
    r.data_ = static_cast<float*>(p.data);
    copies.push_back({data_, r.data_, capacity_ * width_});
  }
  return r;
}

void RowRing::truncate(int64_t new_size) {
  DI_CHECK(new_size <= size_);
  size_ = new_size;
  oldest_ = std::min(oldest_, size_);
}

void RowRing::skip(int64_t n) {
  DI_CHECK(n >= 0);
  size_ += n;
  oldest_ = size_;
}

// ---- PagedRows: a page table -----------------------------------------------------------

PagedRows::~PagedRows() { release(); }

PagedRows::PagedRows(PagedRows&& o) noexcept
    : pool_(std::move(o.pool_)),
      ids_(std::move(o.ids_)),
      pages_(std::move(o.pages_)),
      width_(o.width_),
      size_(std::exchange(o.size_, 0)),
      page_rows_(o.page_rows_),
      maybe_shared_(o.maybe_shared_) {
  o.ids_.clear();
  o.pages_.clear();
}

PagedRows& PagedRows::operator=(PagedRows&& o) noexcept {
  if (this != &o) {
    release();
    pool_ = std::move(o.pool_);
    ids_ = std::move(o.ids_);
    pages_ = std::move(o.pages_);
    o.ids_.clear();
    o.pages_.clear();
    width_ = o.width_;
    size_ = std::exchange(o.size_, 0);
    page_rows_ = o.page_rows_;
    maybe_shared_ = o.maybe_shared_;
  }
  return *this;
}

void PagedRows::release() {
  if (!ids_.empty()) pool_->release(ids_);
  ids_.clear();
  pages_.clear();
  size_ = 0;
}

void PagedRows::init(backend::PagePools& pools, int64_t width, int64_t page_rows) {
  release();
  DI_CHECK(width > 0 && page_rows > 0);
  width_ = width;
  page_rows_ = page_rows;
  pool_ = pools.pool(static_cast<size_t>(page_rows * width) * sizeof(float));
}

void PagedRows::claim(int64_t n, std::vector<float*>& dst) {
  if (n <= 0) return;
  const int64_t filled = size_ % page_rows_;  // rows already in the last page
  if (filled > 0 && maybe_shared_) {
    const size_t last = ids_.size() - 1;
    if (pool_->ref_count(ids_[last]) > 1) {  // a snapshot holds it: write a copy of our own
      const backend::PagePool::Page p = pool_->acquire();
      pool_->ops().copy(p.data, pages_[last], static_cast<size_t>(filled * width_) * sizeof(float));
      pool_->release(ids_[last]);
      ids_[last] = p.id;
      pages_[last] = static_cast<const float*>(p.data);
    }
  }
  const int64_t end = size_ + n;
  while (static_cast<int64_t>(ids_.size()) * page_rows_ < end) {
    const backend::PagePool::Page p = pool_->acquire();  // throws with nothing changed
    ids_.push_back(p.id);
    pages_.push_back(static_cast<const float*>(p.data));
  }
  for (int64_t r = size_; r < end; ++r) dst.push_back(const_cast<float*>(row(r)));
  size_ = end;
}

void PagedRows::truncate(int64_t new_size) {
  size_ = std::clamp<int64_t>(new_size, 0, size_);
  const size_t keep = static_cast<size_t>((size_ + page_rows_ - 1) / page_rows_);
  if (keep < ids_.size()) {
    pool_->release(std::span<const int32_t>(ids_).subspan(keep));
    ids_.resize(keep);
    pages_.resize(keep);
  }
}

PagedRows PagedRows::clone() const {
  PagedRows l;
  l.pool_ = pool_;
  l.width_ = width_;
  l.page_rows_ = page_rows_;
  maybe_shared_ = l.maybe_shared_ = true;
  if (!ids_.empty()) pool_->retain(ids_);
  l.ids_ = ids_;
  l.pages_ = pages_;
  l.size_ = size_;
  return l;
}

namespace {

void init_compressed(backend::PagePools& pools, CompressorState& s,
                     const LayerCachePlan::Compressed& p, int rollback, int page_tokens) {
  if (p.ratio <= 0) return;
  if (p.state_width > 0) {
    // Tokens whose rows an unfinished row still needs, + rollback slack.
    const int64_t cap = p.state_tokens + rollback;
    s.kv.init(pools, cap, p.state_width);
    s.gate.init(pools, cap, p.state_width);
  }
  s.rows.init(pools, p.row_width, std::max(1, page_tokens / p.ratio));
  s.ratio = p.ratio;
}

LayerCache make_layer(backend::PagePools& pools, const LayerCachePlan& p, int64_t window,
                      int rollback, int page_tokens) {
  LayerCache l;
  if (p.window_width > 0) l.window.init(pools, window + rollback, p.window_width);
  init_compressed(pools, l.comp, p.comp, rollback, page_tokens);
  init_compressed(pools, l.idx, p.idx, rollback, page_tokens);
  return l;
}

// Bytes of the rows a ring holds now (readable rows; the allocation is fixed at init).
int64_t ring_bytes(const RowRing& r) {
  return (r.size() - r.oldest()) * r.width() * static_cast<int64_t>(sizeof(float));
}

}  // namespace

SequenceCache SequenceCache::create(backend::PagePools& pools, const CachePlan& plan,
                                    const CacheOptions& options) {
  SequenceCache s;
  s.max_rollback_ = std::max(0, options.max_rollback);
  s.draft_lag_ = plan.draft_lag;
  s.engram_need_ = plan.engram_history;
  const int page_tokens = std::max(1, options.page_tokens);
  for (const auto& p : plan.layers) {
    s.layers_.push_back(make_layer(pools, p, plan.window, s.max_rollback_ + 1, page_tokens));
  }
  for (const auto& p : plan.draft_layers) {
    s.draft_layers_.push_back(make_layer(pools, p, plan.window, s.max_rollback_ + 1, page_tokens));
  }
  return s;
}

std::span<const int32_t> SequenceCache::engram_history() const {
  const size_t n = std::min(engram_ids_.size(), static_cast<size_t>(engram_need_));
  return std::span<const int32_t>(engram_ids_).subspan(engram_ids_.size() - n);
}

void SequenceCache::push_engram_history(std::span<const int32_t> ids) {
  if (engram_need_ == 0) return;
  engram_ids_.insert(engram_ids_.end(), ids.begin(), ids.end());
  const size_t keep = static_cast<size_t>(engram_need_ + max_rollback_);
  if (engram_ids_.size() > 2 * keep) {  // trim in batches: no shifting per decode step
    engram_ids_.erase(engram_ids_.begin(),
                      engram_ids_.begin() + static_cast<std::ptrdiff_t>(engram_ids_.size() - keep));
  }
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
  // Rows a window replay restored ahead of length() go with the rollback like any others.
  compressed_until_ = std::min(compressed_until_, length_);
  for (auto& l : layers_) truncate_layer(l, length_);
  draft_length_ = std::min(draft_length_, std::max<int64_t>(0, length_ - draft_lag_));
  for (auto& l : draft_layers_) truncate_layer(l, draft_length_);
  if (engram_need_ > 0) {
    engram_ids_.resize(engram_ids_.size() - std::min(engram_ids_.size(), static_cast<size_t>(k)));
  }
  return {};
}

Status SequenceCache::truncate_draft(int64_t draft_length) {
  if (draft_length < 0 || draft_length > draft_length_ ||
      draft_length_ - draft_length > max_rollback_) {
    return out_of_range("truncate_draft to " + std::to_string(draft_length) +
                        " positions: the draft state holds " + std::to_string(draft_length_) +
                        " and may undo at most " + std::to_string(max_rollback_));
  }
  draft_length_ = draft_length;
  for (auto& l : draft_layers_) truncate_layer(l, draft_length_);
  return {};
}

Status SequenceCache::skip_draft(int64_t to) {
  if (to < draft_length_ || to > length_) {
    return out_of_range("skip_draft to " + std::to_string(to) + ": the draft state is at " +
                        std::to_string(draft_length_) + " and the sequence at " +
                        std::to_string(length_));
  }
  for (const auto& l : draft_layers_) {
    if (l.comp.ratio != 0 || l.idx.ratio != 0) {
      return failed_precondition("skip_draft: a draft layer keeps compressed rows");
    }
  }
  for (auto& l : draft_layers_) l.window.skip(to - draft_length_);
  draft_length_ = to;
  return {};
}

SequenceCache SequenceCache::scalars_copy() const {
  SequenceCache s;
  s.length_ = length_;
  s.draft_length_ = draft_length_;
  s.draft_lag_ = draft_lag_;
  s.max_rollback_ = max_rollback_;
  s.engram_need_ = engram_need_;
  s.upper_from_ = upper_from_;
  s.window_from_ = window_from_;
  s.compressed_until_ = compressed_until_;
  return s;
}

SequenceCache SequenceCache::clone() const {
  SequenceCache s = scalars_copy();
  s.engram_ids_ = engram_ids_;
  // Every ring's page first, then one scatter_rows per ring size moves all their data (a copy
  // per ring was five launches per layer).
  std::vector<RowRing::Copy> copies;
  backend::Ops* ops = nullptr;
  auto copy_layer = [&](const LayerCache& l) {
    LayerCache c;
    c.window = l.window.clone_uncopied(copies);
    if (ops == nullptr) ops = l.window.ops();
    for (auto [dst, src] : {std::pair{&c.comp, &l.comp}, std::pair{&c.idx, &l.idx}}) {
      dst->kv = src->kv.clone_uncopied(copies);
      dst->gate = src->gate.clone_uncopied(copies);
      dst->rows = src->rows.clone();
      dst->ratio = src->ratio;
    }
    return c;
  };
  for (const auto& l : layers_) s.layers_.push_back(copy_layer(l));
  for (const auto& l : draft_layers_) s.draft_layers_.push_back(copy_layer(l));
  std::sort(copies.begin(), copies.end(),
            [](const RowRing::Copy& a, const RowRing::Copy& b) { return a.floats < b.floats; });
  std::vector<const float*> src;
  std::vector<float*> dst;
  for (size_t i = 0; i < copies.size();) {
    size_t j = i;
    src.clear();
    dst.clear();
    for (; j < copies.size() && copies[j].floats == copies[i].floats; ++j) {
      src.push_back(copies[j].src);
      dst.push_back(copies[j].dst);
    }
    ops->scatter_rows(src, dst, copies[i].floats);
    i = j;
  }
  return s;
}

void SequenceCache::skip_upper(size_t first_layer, int64_t n) {
  if (n <= 0) return;
  for (size_t l = first_layer; l < layers_.size(); ++l) layers_[l].window.skip(n);
  for (auto& l : draft_layers_) l.window.skip(n);
  // Called before the step advances length(): the skipped rows start at length().
  upper_from_ = std::max(upper_from_, length_ + n);
}

SequenceCache SequenceCache::compressed_part() const {
  SequenceCache s = scalars_copy();
  auto rows_only = [](const LayerCache& l) {
    LayerCache c;
    for (auto [dst, src] : {std::pair{&c.comp, &l.comp}, std::pair{&c.idx, &l.idx}}) {
      dst->rows = src->rows.clone();
      dst->ratio = src->ratio;
    }
    return c;
  };
  for (const auto& l : layers_) s.layers_.push_back(rows_only(l));
  for (const auto& l : draft_layers_) s.draft_layers_.push_back(rows_only(l));
  return s;
}

bool SequenceCache::has_rings() const {
  for (const auto* v : {&layers_, &draft_layers_}) {
    for (const auto& l : *v) {
      if (l.window.has_storage()) return true;
    }
  }
  return false;
}

Status SequenceCache::adopt_compressed(const SequenceCache& part, int64_t from) {
  const int64_t h = part.length_;
  if (length_ != 0 || layers_.size() != part.layers_.size() ||
      draft_layers_.size() != part.draft_layers_.size() || from < 0 || from > h) {
    return invalid_argument("adopt_compressed: a new sequence of the same model and 0 <= from (" +
                            std::to_string(from) + ") <= the part's length (" +
                            std::to_string(h) + ") are needed");
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (auto [dst, src] : {std::pair{&layers_[i].comp, &part.layers_[i].comp},
                            std::pair{&layers_[i].idx, &part.layers_[i].idx}}) {
      if (dst->ratio == 0) continue;
      // The running state is not kept: only a position that closes every group has none.
      if (h % dst->ratio != 0 || src->ratio != dst->ratio) {
        return failed_precondition("adopt_compressed: position " + std::to_string(h) +
                                   " does not close a compression group of ratio " +
                                   std::to_string(dst->ratio) + " (layer " + std::to_string(i) +
                                   ")");
      }
      dst->rows = src->rows.clone();
      dst->kv.skip(h);
      dst->gate.skip(h);
    }
    layers_[i].window.skip(from);
  }
  const int64_t draft_from = std::max<int64_t>(0, from - draft_lag_);
  for (auto& l : draft_layers_) l.window.skip(draft_from);
  length_ = from;
  draft_length_ = draft_from;
  compressed_until_ = h;
  window_from_ = from;
  upper_from_ = 0;
  engram_ids_.clear();
  return {};
}

void SequenceCache::set_engram_history(std::span<const int32_t> ids) {
  engram_ids_.assign(ids.begin(), ids.end());
}

int64_t SequenceCache::page_bytes() const {
  int64_t b = 0;
  for (const auto* v : {&layers_, &draft_layers_}) {
    for (const auto& l : *v) {
      for (const RowRing* r : {&l.window, &l.comp.kv, &l.comp.gate, &l.idx.kv, &l.idx.gate}) {
        b += r->page_bytes();
      }
      for (const PagedRows* p : {&l.comp.rows, &l.idx.rows}) b += p->page_bytes();
    }
  }
  return b;
}

int64_t SequenceCache::footprint_bytes() const {
  int64_t b = 0;
  for (const auto* v : {&layers_, &draft_layers_}) {
    for (const auto& l : *v) {
      b += ring_bytes(l.window) + ring_bytes(l.comp.kv) + ring_bytes(l.comp.gate) +
           ring_bytes(l.idx.kv) + ring_bytes(l.idx.gate);
      b += (l.comp.rows.size() * l.comp.rows.width() + l.idx.rows.size() * l.idx.rows.width()) * 4;
    }
  }
  return b;
}

}  // namespace deepinfer::model
