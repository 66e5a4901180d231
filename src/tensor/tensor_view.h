// TensorView: a non-owning typed view {dtype, shape, strides, device, pointer}. No compute.
//
// Views over a memory-mapped checkpoint are zero-copy; whoever owns the mapping outlives them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace deepinfer {

enum class DeviceKind : uint8_t { kCpu, kCuda };

struct TensorView {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; row-major contiguous when built by make()
  DeviceKind device = DeviceKind::kCpu;
  const void* data = nullptr;

  static TensorView make(DType dtype, std::vector<int64_t> shape, const void* data,
                         DeviceKind device = DeviceKind::kCpu);

  int64_t numel() const;
  int64_t nbytes() const { return numel() * dtype_size(dtype); }
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t dim(int i) const { return shape[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
  bool is_contiguous() const;

  template <typename T>
  const T* ptr() const { return static_cast<const T*>(data); }
};

// "[4096, 512]" for messages.
std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace deepinfer
