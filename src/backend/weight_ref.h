// WeightRef: a checkpoint weight in its stored format, as the backend ops consume it.
//
// Weights are never expanded to FP32 at load; kernels dequantize them tile by tile. A WeightRef
// is a view (TensorView) of the stored bytes plus, for the quantized formats, a view of the scale
// tensor and the block geometry from the checkpoint's quantization config (spec §4):
//   kDense : BF16 / F16 / F32 [N, K]
//   kFp8   : F8_E4M3 [N, K] + scale [ceil(N/block_n), ceil(K/block_k)] (E8M0, F32 or BF16);
//            element (n, k) = fp8(w[n,k]) * scale[n / block_n, k / block_k]
//   kFp4   : I8/U8 [N, K/2], two E2M1 codes per byte, low nibble = even column, + scale
//            [N, K/block_k] (E8M0 or F32, block_k = 32, block_n = 1)
// The factories validate shapes once, at load; the ops then trust them (DI_CHECK only).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <string>

#include "base/check.h"
#include "base/numeric_types.h"
#include "base/status.h"
#include "tensor/tensor_view.h"

namespace deepinfer::backend {

enum class WeightFormat : uint8_t { kDense, kFp8, kFp4 };

const char* weight_format_name(WeightFormat f);

struct WeightRef {
  WeightFormat format = WeightFormat::kDense;
  TensorView weight;  // rank 2, row-major contiguous
  TensorView scale;   // rank 2, row-major contiguous; unused (data null) for kDense
  int64_t n = 0;      // output features (rows)
  int64_t k = 0;      // input features (logical columns; FP4 stores k/2 bytes per row)
  int block_n = 1;
  int block_k = 1;

  bool quantized() const { return format != WeightFormat::kDense; }

  // Rows [row0, row0 + count) as a WeightRef of the same format; row0 must be a multiple of
  // block_n (checked). Used for the grouped output projection (wo_a groups) and fused weights.
  WeightRef slice_rows(int64_t row0, int64_t count) const;

  // "FP8 [512, 4096] (blocks 128x128, scale F8_E8M0)" for messages.
  std::string describe() const;

  static Expected<WeightRef> dense(const TensorView& w);
  static Expected<WeightRef> fp8(const TensorView& w, const TensorView& scale, int block_n = 128,
                                 int block_k = 128);
  static Expected<WeightRef> fp4(const TensorView& w, const TensorView& scale, int block_k = 32);
};

// Every E8M0 byte decoded: 2^(e-127) (e = 0 is the subnormal 2^-127), 0xff NaN; the same
// floats as e8m0_to_float, built at compile time.
inline constexpr std::array<float, 256> kE8m0ToFloat = [] {
  std::array<float, 256> t{};
  t[0] = std::bit_cast<float>(uint32_t{1} << 22);
  for (uint32_t e = 1; e < 255; ++e) t[e] = std::bit_cast<float>(e << 23);
  t[255] = std::bit_cast<float>(uint32_t{0x7fc00000});
  return t;
}();
// Scale number i of a block-scale tensor (E8M0, F32 or BF16) as FP32: the one decoding of
// scales both CPU backends use. Inline: the opt backend's FP4 rows call it every 32 weights.
inline float scale_value(const TensorView& s, int64_t i) {
  switch (s.dtype) {
    case DType::kF8E8M0:
      return kE8m0ToFloat[s.ptr<uint8_t>()[i]];
    case DType::kF32:
      return s.ptr<float>()[i];
    case DType::kBF16:
      return bf16_to_float(s.ptr<uint16_t>()[i]);
    default:
      DI_CHECK(false && "scale dtype");
      return 0.0f;
  }
}
// Scale of weight element (row, col) for the quantized formats (1 for dense). Shared by both
// CPU backends; the ops tests check it against hand-decoded bytes.
float weight_scale_at(const WeightRef& w, int64_t row, int64_t col);
// The dequantized value of element (row, col), FP32. Slow, obviously correct: the ref backend
// and the tests use it; fast paths decode whole rows.
float weight_at(const WeightRef& w, int64_t row, int64_t col);

}  // namespace deepinfer::backend
