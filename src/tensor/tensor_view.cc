#include "tensor/tensor_view.h"

namespace deepinfer {

TensorView TensorView::make(DType dtype, std::vector<int64_t> shape, const void* data,
                            DeviceKind device) {
  TensorView v;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.strides.assign(v.shape.size(), 1);
  for (int i = static_cast<int>(v.shape.size()) - 2; i >= 0; --i) {
    v.strides[static_cast<size_t>(i)] =
        v.strides[static_cast<size_t>(i) + 1] * v.shape[static_cast<size_t>(i) + 1];
  }
  v.device = device;
  v.data = data;
  return v;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape[static_cast<size_t>(i)] != 1 && strides[static_cast<size_t>(i)] != expected) return false;
    expected *= shape[static_cast<size_t>(i)];
  }
  return true;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace deepinfer
