// WeightRef factories (shape validation at load) and the element-wise dequantization that the
// ref backend and the tests treat as the definition of each format (spec §4).
#include "backend/weight_ref.h"

#include "base/check.h"
#include "base/numeric_types.h"

namespace deepinfer::backend {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string dims(const TensorView& t) { return shape_to_string(t.shape); }

Status check_matrix(const TensorView& t, const char* what) {
  if (t.rank() != 2) {
    return invalid_argument(std::string(what) + " must be rank 2, got shape " + dims(t));
  }
  if (!t.is_contiguous()) {
    return invalid_argument(std::string(what) + " must be row-major contiguous, shape " + dims(t));
  }
  if (t.data == nullptr) return invalid_argument(std::string(what) + " has no data");
  return {};
}

bool scale_dtype_ok(DType d) {
  return d == DType::kF8E8M0 || d == DType::kF32 || d == DType::kBF16;
}

}  // namespace


const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kDense:
      return "dense";
    case WeightFormat::kFp8:
      return "FP8";
    case WeightFormat::kFp4:
      return "FP4";
  }
  return "?";
}

std::string WeightRef::describe() const {
  std::string s = std::string(weight_format_name(format)) + " " + shape_to_string({n, k}) + " (" +
                  std::string(dtype_name(weight.dtype));
  if (quantized()) {
    s += ", blocks " + std::to_string(block_n) + "x" + std::to_string(block_k) + ", scale " +
         std::string(dtype_name(scale.dtype)) + " " + dims(scale);
  }
  return s + ")";
}

Expected<WeightRef> WeightRef::dense(const TensorView& w) {
  DI_TRY(check_matrix(w, "dense weight"));
  if (w.dtype != DType::kBF16 && w.dtype != DType::kF16 && w.dtype != DType::kF32) {
    return invalid_argument("dense weight must be BF16, F16 or F32, got " +
                            std::string(dtype_name(w.dtype)));
  }
  WeightRef r;
  r.format = WeightFormat::kDense;
  r.weight = w;
  r.n = w.shape[0];
  r.k = w.shape[1];
  return r;
}

Expected<WeightRef> WeightRef::fp8(const TensorView& w, const TensorView& scale, int block_n,
                                   int block_k) {
  DI_TRY(check_matrix(w, "FP8 weight"));
  DI_TRY(check_matrix(scale, "FP8 weight scale"));
  if (w.dtype != DType::kF8E4M3) {
    return invalid_argument("FP8 weight must be F8_E4M3, got " + std::string(dtype_name(w.dtype)));
  }
  if (!scale_dtype_ok(scale.dtype)) {
    return invalid_argument("FP8 weight scale must be F8_E8M0, F32 or BF16, got " +
                            std::string(dtype_name(scale.dtype)));
  }
  if (block_n <= 0 || block_k <= 0) {
    return invalid_argument("FP8 weight_block_size must be positive");
  }
  const int64_t n = w.shape[0], k = w.shape[1];
  if (scale.shape[0] != ceil_div(n, block_n) || scale.shape[1] != ceil_div(k, block_k)) {
    return invalid_argument("FP8 weight " + dims(w) + " with blocks " + std::to_string(block_n) +
                            "x" + std::to_string(block_k) + " needs scale [" +
                            std::to_string(ceil_div(n, block_n)) + ", " +
                            std::to_string(ceil_div(k, block_k)) + "], got " + dims(scale));
  }
  WeightRef r;
  r.format = WeightFormat::kFp8;
  r.weight = w;
  r.scale = scale;
  r.n = n;
  r.k = k;
  r.block_n = block_n;
  r.block_k = block_k;
  return r;
}

Expected<WeightRef> WeightRef::fp4(const TensorView& w, const TensorView& scale, int block_k) {
  DI_TRY(check_matrix(w, "FP4 weight"));
  DI_TRY(check_matrix(scale, "FP4 weight scale"));
  if (w.dtype != DType::kI8 && w.dtype != DType::kU8) {
    return invalid_argument("FP4 weight must be packed I8/U8, got " +
                            std::string(dtype_name(w.dtype)));
  }
  if (scale.dtype != DType::kF8E8M0 && scale.dtype != DType::kF32) {
    return invalid_argument("FP4 weight scale must be F8_E8M0 or F32, got " +
                            std::string(dtype_name(scale.dtype)));
  }
  if (block_k <= 0 || block_k % 2 != 0) return invalid_argument("FP4 block must be even");
  const int64_t n = w.shape[0], k = w.shape[1] * 2;
  if (scale.shape[0] != n || scale.shape[1] != ceil_div(k, block_k)) {
    return invalid_argument("FP4 weight " + dims(w) + " (" + std::to_string(k) +
                            " columns) needs scale [" + std::to_string(n) + ", " +
                            std::to_string(ceil_div(k, block_k)) + "], got " + dims(scale));
  }
  WeightRef r;
  r.format = WeightFormat::kFp4;
  r.weight = w;
  r.scale = scale;
  r.n = n;
  r.k = k;
  r.block_n = 1;
  r.block_k = block_k;
  return r;
}

WeightRef WeightRef::slice_rows(int64_t row0, int64_t count) const {
  DI_CHECK(row0 >= 0 && count >= 0 && row0 + count <= n);
  // A slice starts on a scale block, or lies inside one block's rows (wo_a's output groups when
  // o_lora_rank divides the block: every row of the slice then reads the same scale row).
  DI_CHECK(row0 % block_n == 0 || row0 % block_n + count <= block_n);
  WeightRef r = *this;
  r.n = count;
  const int64_t wrow_bytes = weight.shape[1] * dtype_size(weight.dtype);
  r.weight =
      TensorView::make(weight.dtype, {count, weight.shape[1]},
                       static_cast<const char*>(weight.data) + row0 * wrow_bytes, weight.device);
  if (quantized()) {
    const int64_t srow0 = row0 / block_n;
    const int64_t srows = ceil_div(count, block_n);
    const int64_t srow_bytes = scale.shape[1] * dtype_size(scale.dtype);
    r.scale =
        TensorView::make(scale.dtype, {srows, scale.shape[1]},
                         static_cast<const char*>(scale.data) + srow0 * srow_bytes, scale.device);
  }
  return r;
}

float weight_scale_at(const WeightRef& w, int64_t row, int64_t col) {
  if (!w.quantized()) return 1.0f;
  const int64_t srow = row / w.block_n, scol = col / w.block_k;
  return scale_value(w.scale, srow * w.scale.shape[1] + scol);
}

float weight_at(const WeightRef& w, int64_t row, int64_t col) {
  switch (w.format) {
    case WeightFormat::kDense: {
      const int64_t i = row * w.k + col;
      switch (w.weight.dtype) {
        case DType::kBF16:
          return bf16_to_float(w.weight.ptr<uint16_t>()[i]);
        case DType::kF16:
          return fp16_to_float(w.weight.ptr<uint16_t>()[i]);
        case DType::kF32:
          return w.weight.ptr<float>()[i];
        default:
          DI_CHECK(false && "dense dtype");
          return 0.0f;
      }
    }
    case WeightFormat::kFp8:
      return fp8_e4m3_to_float(w.weight.ptr<uint8_t>()[row * w.k + col]) *
             weight_scale_at(w, row, col);
    case WeightFormat::kFp4:
      return fp4_packed_at(w.weight.ptr<uint8_t>() + row * (w.k / 2), col) *
             weight_scale_at(w, row, col);
  }
  return 0.0f;
}

}  // namespace deepinfer::backend
