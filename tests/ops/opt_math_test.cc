// The opt backend's vector e^x and SwiGLU row (backend/cpu/opt/opt_math.cc) against libm:
// within 3 ulp over the range softmax and SiLU use, the edges (underflow to 0, overflow to +inf,
// -inf, NaN), and every tail length (n mod 8).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/opt/kernels.h"

namespace deepinfer::backend::cpu::opt {
namespace {

int64_t ulps(float a, float b) {
  const auto ia = static_cast<int64_t>(std::bit_cast<int32_t>(a));
  const auto ib = static_cast<int64_t>(std::bit_cast<int32_t>(b));
  return ia > ib ? ia - ib : ib - ia;
}

TEST(OptMath, ExpWithinThreeUlpOfLibm) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-87.0f, 88.0f);
  for (int64_t n : {1, 7, 8, 9, 100, 4099}) {
    std::vector<float> x(static_cast<size_t>(n)), y(x.size());
    for (float& v : x) v = d(rng);
    exp_to(x.data(), y.data(), n);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_LE(ulps(y[i], std::exp(x[i])), 3) << "x=" << x[i] << " n=" << n;
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> e = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          -inf,
                          inf,
                          -100.0f,
                          100.0f,
                          88.0f,
                          -87.0f,
                          std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> y(e.size());
  exp_to(e.data(), y.data(), static_cast<int64_t>(e.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_LE(ulps(y[2], std::exp(1.0f)), 3);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_EQ(y[5], inf);
  EXPECT_EQ(y[6], 0.0f);
  EXPECT_EQ(y[7], inf);
  EXPECT_LE(ulps(y[8], std::exp(88.0f)), 3);
  EXPECT_LE(ulps(y[9], std::exp(-87.0f)), 3);
  EXPECT_TRUE(std::isnan(y[10]));
}

TEST(OptMath, SwigluRowMatchesScalarFormula) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-12.0f, 12.0f);
  for (float limit : {0.0f, 10.0f}) {
    for (int64_t n : {1, 5, 8, 13, 64, 515}) {
      std::vector<float> a(static_cast<size_t>(n)), b(a.size()), o(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = d(rng);
        b[i] = d(rng);
      }
      swiglu_row(a.data(), b.data(), limit, o.data(), n);
      for (size_t i = 0; i < a.size(); ++i) {
        const float u = limit > 0 ? std::min(a[i], limit) : a[i];
        const float v = limit > 0 ? std::clamp(b[i], -limit, limit) : b[i];
        const double want = static_cast<double>(u) / (1.0 + std::exp(-static_cast<double>(u))) * v;
        EXPECT_NEAR(o[i], want, 4e-7 * (std::abs(want) + 1e-3)) << "n " << n << " i " << i;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::backend::cpu::opt
