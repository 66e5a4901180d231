// Exact decodings of the checkpoint scalar formats (spec §4), checked on every code point
// against independent definitions.
#include "base/numeric_types.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tensor/dtype.h"
#include "tensor/tensor_view.h"

namespace deepinfer {
namespace {

TEST(NumericTypes, Bf16RoundTripAndRounding) {
  for (float f : {0.0f, 1.0f, -2.5f, 3.140625f, 1e-30f, 65504.0f, -1e30f}) {
    EXPECT_EQ(bf16_to_float(float_to_bf16(f)), bf16_to_float(float_to_bf16(bf16_to_float(float_to_bf16(f)))));
  }
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even -> 1.0.
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1.0078125 (odd mantissa) and 1.015625: -> 1.015625.
  EXPECT_EQ(float_to_bf16(1.01171875f), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(NumericTypes, Fp16Decoding) {
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(fp16_to_float(0x7c00)));
}

TEST(NumericTypes, Fp8E4M3EveryCode) {
  for (int code = 0; code < 256; ++code) {
    const float v = fp8_e4m3_to_float(static_cast<uint8_t>(code));
    const int e = (code >> 3) & 15, m = code & 7;
    if (e == 15 && m == 7) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    const float mag = e == 0 ? m / 8.0f * std::ldexp(1.0f, -6) : (1 + m / 8.0f) * std::ldexp(1.0f, e - 7);
    EXPECT_EQ(v, (code & 0x80) ? -mag : mag) << code;
    // Every finite code round-trips through the encoder (except -0 -> -0 keeps sign).
    EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(v)), v) << code;
  }
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(float_to_fp8_e4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(float_to_fp8_e4m3(-1000.0f), 0xfe);
  // Ties to even: 1.0625 is halfway between 1.0 (m=0) and 1.125 (m=1) -> 1.0.
  EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(1.0625f)), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(1.1875f)), 1.25f);
}

TEST(NumericTypes, E8M0AndFp4) {
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(120), 1.0f / 128);
  EXPECT_EQ(e8m0_to_float(0), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
  const float expected[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(fp4_e2m1_to_float(static_cast<uint8_t>(c)), expected[c]);
    EXPECT_EQ(fp4_e2m1_to_float(static_cast<uint8_t>(c + 8)), -expected[c]);
  }
  const uint8_t row[2] = {0x21, 0xf7};  // columns: 0.5, 1.0, 6.0, -6.0
  EXPECT_EQ(fp4_packed_at(row, 0), 0.5f);
  EXPECT_EQ(fp4_packed_at(row, 1), 1.0f);
  EXPECT_EQ(fp4_packed_at(row, 2), 6.0f);
  EXPECT_EQ(fp4_packed_at(row, 3), -6.0f);
}

TEST(DType, SafetensorsNames) {
  for (const char* n : {"BF16", "F16", "F32", "F8_E4M3", "F8_E8M0", "I8", "I32", "I64"}) {
    auto t = dtype_from_safetensors(n);
    ASSERT_TRUE(t.has_value()) << n;
    EXPECT_EQ(dtype_name(*t), n);
  }
  EXPECT_FALSE(dtype_from_safetensors("F8_E5M2FNUZ").has_value());
  EXPECT_EQ(dtype_size(DType::kBF16), 2);
  EXPECT_EQ(dtype_size(DType::kI64), 8);
  auto v = TensorView::make(DType::kBF16, {4, 3}, nullptr);
  EXPECT_EQ(v.numel(), 12);
  EXPECT_EQ(v.nbytes(), 24);
  EXPECT_EQ(v.strides[0], 3);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(shape_to_string(v.shape), "[4, 3]");
}

}  // namespace
}  // namespace deepinfer
