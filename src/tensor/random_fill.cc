// RandomFill (see random_fill.h): the fill constructors and the host loop.
#include "tensor/random_fill.h"

#include <cstring>

#include "base/check.h"

namespace deepinfer {

RandomFill normal_fill(uint64_t key, DType dtype, float mean, float std) {
  DI_CHECK(dtype == DType::kBF16 || dtype == DType::kF32);
  RandomFill f;
  f.kind = dtype == DType::kBF16 ? FillKind::kNormalBf16 : FillKind::kNormalF32;
  f.elem_bytes = dtype_size(dtype);
  f.key = key;
  f.mean = mean;
  f.scale = static_cast<float>(static_cast<double>(std) * std::sqrt(3.0) / 65536.0);
  return f;
}

RandomFill fp8_near_one_fill(uint64_t key) {
  RandomFill f;
  f.kind = FillKind::kFp8NearOne;
  f.key = key;
  return f;
}

RandomFill byte_fill(uint64_t key) {
  RandomFill f;
  f.kind = FillKind::kBytes;
  f.key = key;
  return f;
}

RandomFill constant_fill(DType dtype, uint64_t bits) {
  RandomFill f;
  f.kind = FillKind::kConstant;
  f.elem_bytes = dtype_size(dtype);
  f.constant = bits;
  return f;
}

RandomFill distinct_ids_fill(uint64_t key, DType dtype, int64_t id_range, int64_t row_width) {
  DI_CHECK(dtype == DType::kI32 || dtype == DType::kI64);
  DI_CHECK(row_width >= 1 && row_width <= id_range);
  RandomFill f;
  f.kind = FillKind::kDistinctIds;
  f.elem_bytes = dtype_size(dtype);
  f.key = key;
  f.id_range = id_range;
  f.row_width = row_width;
  return f;
}

void fill_random_host(void* dst, int64_t n, const RandomFill& f) {
  auto* out = static_cast<unsigned char*>(dst);
  const size_t w = static_cast<size_t>(f.elem_bytes);
  DI_CHECK(w == 1 || w == 2 || w == 4 || w == 8);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = random_fill_bits(f, static_cast<uint64_t>(i));
    std::memcpy(out + static_cast<size_t>(i) * w, &bits, w);  // little-endian: the low bytes
  }
}

}  // namespace deepinfer
