// Buffer: an owned allocation in a backend's memory (host memory for the CPU backends, device
// memory for CUDA), through Ops::allocate / deallocate. Move-only.
//
// The model keeps every activation, cache row and uploaded weight in Buffers, so the same model
// code runs on any backend (ops.h, "Memory"). Two growth rules:
//   fit(n)       grow-only scratch: contents are NOT kept when it grows (the next op overwrites);
//   reserve(n)   grows keeping the first `keep` elements (cache row lists).
// New memory is zero-filled (Ops::allocate), so a read of a row nothing wrote yet is 0, never
// garbage: a bug then shows up as a wrong number the tests catch, not as a NaN lottery.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/mat.h"
#include "backend/ops.h"

namespace deepinfer::backend {

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(Ops& ops) : ops_(&ops) {}
  Buffer(Ops& ops, size_t bytes);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Ops* ops() const { return ops_; }
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

  // Grow-only scratch of at least `bytes`; contents are lost when it grows.
  void* fit_bytes(size_t bytes);
  // At least `bytes`, keeping the first `keep` bytes (a backend-to-backend copy when it grows;
  // capacity doubles so appends are amortised).
  void* reserve_bytes(size_t bytes, size_t keep);

 private:
  void release();

  Ops* ops_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// StagingBuffer: grow-only host memory for Ops::upload_async (Ops::allocate_staging: pinned on
// a device backend). Growing or freeing it first waits for the backend (synchronize), since an
// upload still queued may read the old memory. Move-only.
class StagingBuffer {
 public:
  StagingBuffer() = default;
  explicit StagingBuffer(Ops& ops) : ops_(&ops) {}
  ~StagingBuffer();
  StagingBuffer(StagingBuffer&& o) noexcept;
  StagingBuffer& operator=(StagingBuffer&& o) noexcept;
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  // At least `bytes` of host memory; contents are lost when it grows.
  void* fit_bytes(size_t bytes);
  size_t bytes() const { return bytes_; }

 private:
  void release();

  Ops* ops_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Grow-only FP32 scratch of n floats (contents lost on growth).
inline float* fit(Buffer& b, int64_t n) {
  return static_cast<float*>(b.fit_bytes(static_cast<size_t>(n) * sizeof(float)));
}

// A copy of host floats in the backend's memory (weights' small parameters, constant rows).
Buffer upload_floats(Ops& ops, std::span<const float> host);

// Host copy of a backend matrix (waits for queued ops), into pageable or page-locked floats
// (host_memory.h).
void download_mat(Ops& ops, CMat m, float* out);
template <class Alloc>
void download_mat(Ops& ops, CMat m, std::vector<float, Alloc>& out) {
  out.resize(static_cast<size_t>(m.rows * m.cols));
  download_mat(ops, m, out.data());
}

// A backend-resident copy of a weight (same format, scales too) when the backend's memory is
// not host memory; `owner` keeps the allocations. Host backends get `w` back unchanged
// (zero-copy views of the memory-mapped checkpoint).
WeightRef place_weight(Ops& ops, const WeightRef& w, std::vector<Buffer>& owner);
TensorView place_tensor(Ops& ops, const TensorView& t, std::vector<Buffer>& owner);
const float* place_floats(Ops& ops, const float* p, int64_t n, std::vector<Buffer>& owner);

}  // namespace deepinfer::backend
