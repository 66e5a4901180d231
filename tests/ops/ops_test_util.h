// The GoogleTest side of the op harness: the CPU backend list, the oracle tests' fixture, and the
// normalised-error comparison (op_harness.h compare) as a GoogleTest assertion. Buffers, random
// weights and the op-case registry are op_harness.h's, shared with the CUDA driver.
//
// The oracle tests (ops_oracle*_test.cc) run on every backend in backends() (ref, opt at several
// thread counts) against independent float64 maths; the op cases (cases/, op_harness.h) run on
// every backend present against the ref backend (ops_cases_test.cc here, cuda/ops_cuda_main.cc
// on a GPU). Outputs start as NaN, so an element an op forgot to write fails the comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"
#include "backend/quant.h"
#include "base/numeric_types.h"
#include "op_harness.h"

namespace deepinfer::backend::testing {

struct BackendCase {
  std::string name;
  std::function<std::unique_ptr<Ops>()> make;
};

inline void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<BackendCase> backends() {
  return {
      {"ref", [] { return cpu::make_ref_ops(); }},
      {"opt1", [] { return cpu::make_opt_ops(1); }},
      {"opt2", [] { return cpu::make_opt_ops(2); }},
      {"opt3", [] { return cpu::make_opt_ops(3); }},
  };
}

// max |got - want| / max(max |want|, floor) must be <= tol; NaN anywhere fails. Reports where.
inline ::testing::AssertionResult close(const std::vector<float>& got,
                                        const std::vector<float>& want, double tol,
                                        double floor = 1e-30) {
  const std::string why = compare(got, want, tol, floor);
  if (why.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << why;
}

// The fixture of the oracle tests: one backend per instantiation.
class OracleTest : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override { ops_ = GetParam().make(); }
  std::unique_ptr<Ops> ops_;
  std::mt19937 rng_{1234};
};

// Independent E4M3 / E2M1 round trip: enumerate the grid, nearest value, ties to the even code.
inline double grid_round(double v, bool fp4) {
  std::vector<std::pair<double, int>> grid;  // (value, code) for non-negative codes
  if (fp4) {
    const double vals[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    for (int c = 0; c < 8; ++c) grid.push_back({vals[c], c});
  } else {
    for (int c = 0; c < 0x7f; ++c) {
      const int e = c >> 3, m = c & 7;
      grid.push_back(
          {e == 0 ? m * std::ldexp(1.0, -9) : (1 + m / 8.0) * std::ldexp(1.0, e - 7), c});
    }
  }
  const double a = std::min(std::fabs(v), grid.back().first);
  double best = 0.0, bestd = 1e300;
  int bestc = 0;
  for (auto [g, c] : grid) {
    const double d = std::fabs(a - g);
    if (d < bestd || (d == bestd && (c & 1) == 0)) {
      best = g;
      bestd = d;
      bestc = c;
    }
  }
  (void)bestc;
  return v < 0 ? -best : best;
}

inline double pow2_ceil_scale(double amax, double qmax) {
  return std::exp2(std::ceil(std::log2(std::max(amax, 1e-4) / qmax)));
}

}  // namespace deepinfer::backend::testing
