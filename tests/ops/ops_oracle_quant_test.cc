// Every backend against hand-decoded bytes and an independent quantizer (the enumerated
// E4M3 / E2M1 grids of ops_test_util.h): weight formats (spec §4) and the activation/KV/indexer
// quantization rules (spec §2.0, §2.3-§2.5).
#include <bit>
#include <numeric>

#include "ops_test_util.h"

namespace deepinfer::backend::testing {
namespace {

// Own suite name, so INSTANTIATE below does not instantiate ops_oracle_test.cc's cases again.
class QuantOracleTest : public OracleTest {};

TEST_P(QuantOracleTest, Fp8BlockDequantOfKnownBytes) {
  // 3x5 weight, 2x2 blocks -> scale [2, 3]. Bytes hand-decoded: 0x38=1, 0x40=2, 0xB8=-1,
  // 0x3C=1.5, 0x01=2^-9 (subnormal), 0x7E=448, 0x00=0. E8M0: 127=1, 128=2, 126=0.5.
  const std::vector<uint8_t> wb = {0x38, 0x40, 0xB8, 0x3C, 0x01,  //
                                   0x7E, 0x00, 0x38, 0x38, 0x40,  //
                                   0x40, 0xB8, 0x3C, 0x01, 0x7E};
  const std::vector<uint8_t> sb = {127, 128, 126,  //
                                   128, 126, 127};
  const double want[3][5] = {{1, 2, -2, 3, std::ldexp(1.0, -10)},
                             {448, 0, 2, 2, 1},
                             {4, -2, 0.75, std::ldexp(1.0, -10), 448}};
  auto w = WeightRef::fp8(TensorView::make(DType::kF8E4M3, {3, 5}, wb.data()),
                          TensorView::make(DType::kF8E8M0, {2, 3}, sb.data()), 2, 2)
               .value();
  Buf eye(5, 5);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) eye.at(i, j) = i == j ? 1.0f : 0.0f;
  Buf y(5, 3);
  ops_->linear(eye.cmat(), w, y.mat());
  for (int n = 0; n < 3; ++n) {
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(y.at(k, n), static_cast<float>(want[n][k])) << n << "," << k;
      EXPECT_EQ(weight_at(w, n, k), static_cast<float>(want[n][k]));
    }
  }
}

TEST_P(QuantOracleTest, Fp4NibbleOrderAndScale) {
  // Row 0: 0x72 -> even col code 2 (1.0), odd col code 7 (6.0); 0x9F -> -6, -0.5. Scale 2^1.
  // Row 1: 0x10 -> 0, 0.5; 0xC8 -> -0 (code 8), -2 (code 12). Scale 2^-1 (one 32-block).
  const std::vector<uint8_t> wb = {0x72, 0x9F, 0x10, 0xC8};
  const std::vector<uint8_t> sb = {128, 126};
  const float want[2][4] = {{2, 12, -12, -1}, {0, 0.25f, 0, -1}};
  auto w = WeightRef::fp4(TensorView::make(DType::kI8, {2, 2}, wb.data()),
                          TensorView::make(DType::kF8E8M0, {2, 1}, sb.data()))
               .value();
  Buf eye(4, 4);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) eye.at(i, j) = i == j ? 1.0f : 0.0f;
  Buf y(4, 2);
  ops_->linear(eye.cmat(), w, y.mat());
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; ++k) EXPECT_EQ(y.at(k, n), want[n][k]) << n << "," << k;
}

TEST_P(QuantOracleTest, EveryFp8AndFp4ByteDecodes) {
  // All 254 non-NaN E4M3 bytes (2 rows x 127) and all 256 packed FP4 bytes, against weight_at
  // (the element-wise definition), through linear with identity inputs. Exercises the wide
  // decode paths of fast backends, whose tails are covered by the small cases above.
  std::vector<uint8_t> b8;
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7f) != 0x7f) b8.push_back(static_cast<uint8_t>(b));
  const std::vector<uint8_t> s8 = {130, 120};
  auto w8 = WeightRef::fp8(TensorView::make(DType::kF8E4M3, {2, 127}, b8.data()),
                           TensorView::make(DType::kF8E8M0, {2, 1}, s8.data()), 1, 128)
                .value();
  std::vector<uint8_t> b4(256);
  std::iota(b4.begin(), b4.end(), 0);
  const std::vector<uint8_t> s4 = {127, 128, 126, 131, 125, 127, 127, 127,
                                   127, 127, 127, 127, 127, 127, 127, 127};
  auto w4 = WeightRef::fp4(TensorView::make(DType::kU8, {2, 128}, b4.data()),
                           TensorView::make(DType::kF8E8M0, {2, 8}, s4.data()))
                .value();
  for (const WeightRef* w : {&w8, &w4}) {
    Buf eye(w->k, w->k);
    for (int64_t i = 0; i < w->k; ++i)
      for (int64_t j = 0; j < w->k; ++j) eye.at(i, j) = i == j ? 1.0f : 0.0f;
    Buf y(w->k, w->n);
    ops_->linear(eye.cmat(), *w, y.mat());
    for (int64_t n = 0; n < w->n; ++n) {
      for (int64_t k = 0; k < w->k; ++k) {
        ASSERT_EQ(y.at(k, n), weight_at(*w, n, k))  // -0 sums to +0 in a dot: compare values
            << w->describe() << " row " << n << " col " << k;
      }
    }
  }
}

TEST_P(QuantOracleTest, ActQuantScaleRule) {
  // Hand cases: amax 3 -> s = 2^-7; 0.1/s = 12.8 -> 13 on the E4M3 grid -> 0.1015625.
  Buf x(1, 4);
  x.v = {3.0f, 1.0f, 0.1f, -0.3f};
  ops_->act_quant_fp8(x.mat(), 4);
  EXPECT_EQ(x.v[0], 3.0f);
  EXPECT_EQ(x.v[1], 1.0f);
  EXPECT_EQ(x.v[2], 0.1015625f);
  EXPECT_EQ(x.v[3], -40.0f / 128.0f);  // 38.4 -> 40 (spacing 4 in [32, 64))
  // Random rows against the enumerated-grid oracle, with blocks that do not divide the row.
  for (int64_t block : {128, 64, 7}) {
    Buf r = random_buf(rng_, 5, 300, -3.0f, 3.0f);
    for (int64_t c = 0; c < 300; ++c) r.at(1, c) *= 1e-6f;  // amax below the 1e-4 floor
    r.at(2, 5) = 448.0f * 4;                                // ratio exactly a power of two
    Buf want = r;
    for (int64_t m = 0; m < 5; ++m) {
      for (int64_t b = 0; b < 300; b += block) {
        const int64_t e = std::min<int64_t>(300, b + block);
        double amax = 0;
        for (int64_t c = b; c < e; ++c)
          amax = std::max(amax, std::fabs(static_cast<double>(r.at(m, c))));
        const double s = pow2_ceil_scale(amax, 448.0);
        for (int64_t c = b; c < e; ++c)
          want.at(m, c) = static_cast<float>(grid_round(r.at(m, c) / s, false) * s);
      }
    }
    ops_->act_quant_fp8(r.mat(), block);
    EXPECT_TRUE(close(r.v, want.v, 0.0)) << "block " << block;
  }
}

TEST_P(QuantOracleTest, FakeQuantFp8LeavesRopeChannels) {
  Buf r = random_buf(rng_, 3, 512, -5.0f, 5.0f);
  Buf want = r;
  for (int64_t m = 0; m < 3; ++m) {
    for (int64_t b = 0; b < 448; b += 64) {
      double amax = 0;
      for (int64_t c = b; c < b + 64; ++c)
        amax = std::max(amax, std::fabs(static_cast<double>(r.at(m, c))));
      const double s = pow2_ceil_scale(amax, 448.0);
      for (int64_t c = b; c < b + 64; ++c)
        want.at(m, c) = static_cast<float>(grid_round(r.at(m, c) / s, false) * s);
    }
  }
  ops_->fake_quant_fp8(r.mat(), 448, 64);
  EXPECT_TRUE(close(r.v, want.v, 0.0));
}

TEST_P(QuantOracleTest, FakeQuantFp4) {
  Buf x(1, 32);
  for (int i = 0; i < 32; ++i) x.v[static_cast<size_t>(i)] = 0.0f;
  x.v[0] = 6.0f;
  x.v[1] = 0.25f;
  x.v[2] = 0.75f;
  x.v[3] = 5.0f;
  x.v[4] = -2.5f;
  x.v[5] = 1.3f;
  ops_->fake_quant_fp4(x.mat(), 32);  // amax 6 -> s = 1: ties go to the even code
  EXPECT_EQ(x.v[0], 6.0f);
  EXPECT_EQ(x.v[1], 0.0f);
  EXPECT_EQ(x.v[2], 1.0f);
  EXPECT_EQ(x.v[3], 4.0f);
  EXPECT_EQ(x.v[4], -2.0f);
  EXPECT_EQ(x.v[5], 1.5f);
  Buf r = random_buf(rng_, 4, 256, -2.0f, 2.0f);
  Buf want = r;
  for (int64_t m = 0; m < 4; ++m) {
    for (int64_t b = 0; b < 256; b += 32) {
      double amax = 0;
      for (int64_t c = b; c < b + 32; ++c)
        amax = std::max(amax, std::fabs(static_cast<double>(r.at(m, c))));
      const double s = pow2_ceil_scale(amax, 6.0);
      for (int64_t c = b; c < b + 32; ++c)
        want.at(m, c) = static_cast<float>(grid_round(r.at(m, c) / s, true) * s);
    }
  }
  ops_->fake_quant_fp4(r.mat(), 32);
  EXPECT_TRUE(close(r.v, want.v, 0.0));
}

TEST_P(QuantOracleTest, RoundBf16Ties) {
  Buf x(1, 4);
  x.v = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8), -1.0f - std::ldexp(1.0f, -9),
         3.0f};
  ops_->round_bf16(x.mat());
  EXPECT_EQ(x.v[0], 1.0f);                         // tie -> even
  EXPECT_EQ(x.v[1], 1.0f + std::ldexp(1.0f, -6));  // tie -> even (up)
  EXPECT_EQ(x.v[2], -1.0f);
  EXPECT_EQ(x.v[3], 3.0f);
}

TEST(OpsContract, FastFp8RoundMatchesByteCodec) {
  // fp8_e4m3_round (vectorisable) against the byte codec of base/numeric_types.h, on a sweep
  // that covers every binade of E4M3, the subnormals, exact ties and the saturation edge.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::vector<float> vals = {0.0f,
                             -0.0f,
                             448.0f,
                             460.0f,
                             464.0f,
                             1e6f,
                             std::ldexp(1.0f, -10),
                             std::ldexp(3.0f, -11),
                             std::ldexp(1.0f, -6),
                             std::ldexp(15.0f, -10)};
  for (int e = -14; e <= 9; ++e) {
    for (int i = 0; i < 2000; ++i) vals.push_back(std::ldexp(mant(rng), e));
    for (int m = 0; m < 16; ++m) vals.push_back(std::ldexp(1.0f + m / 16.0f, e));  // incl. ties
  }
  for (float v : vals) {
    for (float sv : {v, -v}) {
      const float want = fp8_e4m3_to_float(float_to_fp8_e4m3(sv));
      ASSERT_EQ(std::bit_cast<uint32_t>(fp8_e4m3_round(sv)), std::bit_cast<uint32_t>(want)) << sv;
    }
  }
  EXPECT_TRUE(std::isnan(fp8_e4m3_round(std::nanf(""))));
}

INSTANTIATE_TEST_SUITE_P(Backends, QuantOracleTest, ::testing::ValuesIn(backends()),
                         [](const auto& p) { return p.param.name; });

}  // namespace
}  // namespace deepinfer::backend::testing
