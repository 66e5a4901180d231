// Device plumbing of the CUDA backend: availability check, owned device memory, a grow-only
// scratch arena, and the weight upload that puts checkpoint weights on the GPU unchanged
// (still FP8/FP4 with their scales: kernels dequantize in their loops).
//
// Host-side only (compiled by the C++ compiler); device code is in src/kernels/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/weight_ref.h"
#include "base/status.h"
#include "tensor/tensor_view.h"

namespace deepinfer::backend::cuda {

// OK when device `device` exists, its driver works and this build has machine code for it (a
// probe kernel is launched). Otherwise FailedPrecondition saying what is missing and how to run
// on the CPU instead. Never aborts; safe to call on machines without a GPU or driver.
Status cuda_available(int device = 0);

// Aborts with the CUDA error string: device failures inside an op are not user errors and the
// op contract has no error channel (shape checks are DI_CHECKs too).
void cuda_check(cudaError_t e, const char* what, const char* file, int line);
#define DI_CUDA_CHECK(expr) \
  ::deepinfer::backend::cuda::cuda_check((expr), #expr, __FILE__, __LINE__)

// True for device (or managed) memory, false for ordinary host memory. Lets integer inputs of
// the op contract be either host arrays (staged by the op) or device arrays (used directly).
bool is_device_pointer(const void* p);

// One cudaMalloc'd allocation, freed on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Expected<DeviceBuffer> allocate(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Per-op scratch: bump allocation from device chunks, reset at the start of every op. Growth
// adds a chunk (earlier pointers of the op stay valid); the next reset waits for the stream and
// merges the chunks into one, so steady state is a single allocation and no cudaMalloc per op.
//
// Frozen (while a CUDA graph is captured from its ops): no merge and no growth, so the memory a
// graph was captured with never moves; an alloc that does not fit sets overflowed() and returns
// null (the capture is then refused, its kernels never run). generation() counts the merges:
// a graph captured at an older generation points to freed memory.
class DeviceArena {
 public:
  explicit DeviceArena(cudaStream_t stream) : stream_(stream) {}
  void reset();
  void* alloc(size_t bytes);
  template <typename T>
  T* alloc_n(int64_t n) {
    return static_cast<T*>(alloc(static_cast<size_t>(n) * sizeof(T)));
  }
  void freeze(bool on) {
    frozen_ = on;
    overflowed_ = false;
  }
  bool overflowed() const { return overflowed_; }
  uint64_t generation() const { return generation_; }

 private:
  cudaStream_t stream_;
  std::vector<DeviceBuffer> chunks_;
  size_t used_ = 0;  // bytes used in chunks_.back()
  bool frozen_ = false, overflowed_ = false;
  uint64_t generation_ = 0;
};

// A weight copied to device memory, with a WeightRef viewing it (device = kCuda).
struct DeviceWeight {
  DeviceBuffer weight, scale;
  WeightRef ref;
};
Expected<DeviceWeight> upload_weight(const WeightRef& host);

// Any host tensor copied to device memory (e.g. the hash router's tid2eid table).
struct DeviceTensor {
  DeviceBuffer buffer;
  TensorView view;
};
Expected<DeviceTensor> upload_tensor(const TensorView& host);

}  // namespace deepinfer::backend::cuda
