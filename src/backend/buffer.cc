// Buffer and the placement helpers (see buffer.h).
#include "backend/buffer.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace deepinfer::backend {

Buffer::Buffer(Ops& ops, size_t bytes) : ops_(&ops) { fit_bytes(bytes); }

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& o) noexcept
    : ops_(std::exchange(o.ops_, nullptr)),
      ptr_(std::exchange(o.ptr_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    ops_ = std::exchange(o.ops_, nullptr);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void Buffer::release() {
  if (ptr_ != nullptr) ops_->deallocate(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

void* Buffer::fit_bytes(size_t bytes) {
  DI_CHECK(ops_ != nullptr);
  if (bytes > bytes_ || ptr_ == nullptr) {
    release();
    bytes_ = std::max<size_t>(bytes, 64);
    ptr_ = ops_->allocate(bytes_);
  }
  return ptr_;
}

StagingBuffer::~StagingBuffer() { release(); }

StagingBuffer::StagingBuffer(StagingBuffer&& o) noexcept
    : ops_(std::exchange(o.ops_, nullptr)),
      ptr_(std::exchange(o.ptr_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)) {}

StagingBuffer& StagingBuffer::operator=(StagingBuffer&& o) noexcept {
  if (this != &o) {
    release();
    ops_ = std::exchange(o.ops_, nullptr);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void StagingBuffer::release() {
  if (ptr_ != nullptr) {
    ops_->synchronize();  // an upload still queued may read it
    ops_->deallocate_staging(ptr_);
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

void* StagingBuffer::fit_bytes(size_t bytes) {
  DI_CHECK(ops_ != nullptr);
  if (bytes > bytes_ || ptr_ == nullptr) {
    release();
    bytes_ = std::max<size_t>(bytes, 64);
    ptr_ = ops_->allocate_staging(bytes_);
  }
  return ptr_;
}

void* Buffer::reserve_bytes(size_t bytes, size_t keep) {
  DI_CHECK(ops_ != nullptr && keep <= bytes_);
  if (bytes <= bytes_ && ptr_ != nullptr) return ptr_;
  const size_t grown = std::max<size_t>({bytes, 2 * bytes_, 256});
  void* p = ops_->allocate(grown);
  if (keep) ops_->copy(p, ptr_, keep);
  release();
  ptr_ = p;
  bytes_ = grown;
  return ptr_;
}

Buffer upload_floats(Ops& ops, std::span<const float> host) {
  Buffer b(ops, host.size_bytes());
  ops.upload(b.data(), host.data(), host.size_bytes());
  return b;
}

void download_mat(Ops& ops, CMat m, float* out) {
  if (m.rows == 0 || m.cols == 0) return;
  if (m.ld == m.cols) {
    ops.download(out, m.data, static_cast<size_t>(m.rows * m.cols) * sizeof(float));
    return;
  }
  for (int64_t r = 0; r < m.rows; ++r) {
    ops.download(out + r * m.cols, m.row(r), static_cast<size_t>(m.cols) * sizeof(float));
  }
}

TensorView place_tensor(Ops& ops, const TensorView& t, std::vector<Buffer>& owner) {
  if (ops.host_memory() || t.data == nullptr) return t;
  DI_CHECK(t.is_contiguous());
  Buffer b(ops, static_cast<size_t>(t.nbytes()));
  ops.upload(b.data(), t.data, static_cast<size_t>(t.nbytes()));
  TensorView v = TensorView::make(t.dtype, t.shape, b.data(), ops.device_kind());
  owner.push_back(std::move(b));
  return v;
}

WeightRef place_weight(Ops& ops, const WeightRef& w, std::vector<Buffer>& owner) {
  if (ops.host_memory()) return w;
  WeightRef d = w;
  d.weight = place_tensor(ops, w.weight, owner);
  if (w.quantized()) d.scale = place_tensor(ops, w.scale, owner);
  return d;
}

const float* place_floats(Ops& ops, const float* p, int64_t n, std::vector<Buffer>& owner) {
  if (ops.host_memory() || p == nullptr) return p;
  owner.push_back(upload_floats(ops, {p, static_cast<size_t>(n)}));
  return owner.back().as<const float>();
}

}  // namespace deepinfer::backend
