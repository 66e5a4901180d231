// Shared pieces of the op harness: the backend list, owned buffers poisoned with NaN, random
// weights in every stored format, and a normalised-error comparison.
//
// Every op test here runs on every backend in backends() (ref, opt at several thread counts).
// The CUDA backend's cases are a separate list with their own helpers (tests/ops/cuda, run on a
// GPU machine). Outputs start as NaN, so an element an op forgot to write fails the comparison.
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

// Row-major FP32 matrix that owns its storage; starts poisoned.
struct Buf {
  std::vector<float> v;
  int64_t rows = 0, cols = 0;
  Buf() = default;
  Buf(int64_t r, int64_t c)
      : v(static_cast<size_t>(r * c), std::numeric_limits<float>::quiet_NaN()), rows(r), cols(c) {}
  Mat mat() { return {v.data(), rows, cols}; }
  CMat cmat() const { return {v.data(), rows, cols}; }
  float& at(int64_t i, int64_t j) { return v[static_cast<size_t>(i * cols + j)]; }
  float at(int64_t i, int64_t j) const { return v[static_cast<size_t>(i * cols + j)]; }
  void poison() { std::fill(v.begin(), v.end(), std::numeric_limits<float>::quiet_NaN()); }
};

inline Buf random_buf(std::mt19937& rng, int64_t r, int64_t c, float lo = -1.0f, float hi = 1.0f) {
  Buf b(r, c);
  std::uniform_real_distribution<float> d(lo, hi);
  for (float& x : b.v) x = d(rng);
  return b;
}

// A weight plus the bytes it views.
struct OwnedWeight {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> scale_bytes;
  WeightRef ref;
};

enum class WKind { kBf16, kF16, kF32, kFp8E8m0, kFp8F32, kFp4 };
inline const char* wkind_name(WKind k) {
  switch (k) {
    case WKind::kBf16:
      return "bf16";
    case WKind::kF16:
      return "f16";
    case WKind::kF32:
      return "f32";
    case WKind::kFp8E8m0:
      return "fp8-e8m0";
    case WKind::kFp8F32:
      return "fp8-f32scale";
    case WKind::kFp4:
      return "fp4";
  }
  return "?";
}

// Random weight [n, k] of the given kind; values of magnitude ~amp after dequantization.
inline OwnedWeight random_weight(std::mt19937& rng, WKind kind, int64_t n, int64_t k,
                                 float amp = 0.1f, int bn = 128, int bk = 128) {
  OwnedWeight w;
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  auto put = [&](const void* p, size_t nbytes, std::vector<uint8_t>& out) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + nbytes);
  };
  switch (kind) {
    case WKind::kBf16:
    case WKind::kF16:
    case WKind::kF32: {
      for (int64_t i = 0; i < n * k; ++i) {
        const float x = d(rng) * amp;
        if (kind == WKind::kF32) {
          put(&x, 4, w.bytes);
        } else {
          // F16: keep values exactly representable by building them from BF16 with small range.
          const uint16_t h = kind == WKind::kBf16
                                 ? float_to_bf16(x)
                                 : static_cast<uint16_t>(0x3000 + (byte(rng) & 0x3ff) +
                                                         (byte(rng) & 1 ? 0x8000 : 0));
          put(&h, 2, w.bytes);
        }
      }
      const DType dt = kind == WKind::kBf16  ? DType::kBF16
                       : kind == WKind::kF16 ? DType::kF16
                                             : DType::kF32;
      w.ref = WeightRef::dense(TensorView::make(dt, {n, k}, w.bytes.data())).value();
      return w;
    }
    case WKind::kFp8E8m0:
    case WKind::kFp8F32: {
      for (int64_t i = 0; i < n * k; ++i) w.bytes.push_back(float_to_fp8_e4m3(d(rng) * 400.0f));
      const int64_t sn = (n + bn - 1) / bn, sk = (k + bk - 1) / bk;
      for (int64_t i = 0; i < sn * sk; ++i) {
        const int e = 127 - 12 + byte(rng) % 3;  // 2^-12 .. 2^-10: |w| up to ~0.4
        if (kind == WKind::kFp8E8m0) {
          w.scale_bytes.push_back(static_cast<uint8_t>(e));
        } else {
          const float s = std::ldexp(1.0f, e - 127) * (1.0f + 0.25f * d(rng));
          put(&s, 4, w.scale_bytes);
        }
      }
      const DType st = kind == WKind::kFp8E8m0 ? DType::kF8E8M0 : DType::kF32;
      w.ref = WeightRef::fp8(TensorView::make(DType::kF8E4M3, {n, k}, w.bytes.data()),
                             TensorView::make(st, {sn, sk}, w.scale_bytes.data()), bn, bk)
                  .value();
      return w;
    }
    case WKind::kFp4: {
      for (int64_t i = 0; i < n * k / 2; ++i) w.bytes.push_back(static_cast<uint8_t>(byte(rng)));
      const int64_t sk = (k + 31) / 32;
      for (int64_t i = 0; i < n * sk; ++i)
        w.scale_bytes.push_back(static_cast<uint8_t>(127 - 5 + byte(rng) % 3));
      w.ref = WeightRef::fp4(TensorView::make(DType::kI8, {n, k / 2}, w.bytes.data()),
                             TensorView::make(DType::kF8E8M0, {n, sk}, w.scale_bytes.data()))
                  .value();
      return w;
    }
  }
  return w;
}

// max |got - want| / max(max |want|, floor) must be <= tol; NaN anywhere fails. Reports where.
inline ::testing::AssertionResult close(const std::vector<float>& got,
                                        const std::vector<float>& want, double tol,
                                        double floor = 1e-30) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size mismatch";
  double maxw = floor, maxd = 0.0;
  size_t where = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i])) {
      return ::testing::AssertionFailure()
             << "NaN mismatch at " << i << ": got " << got[i] << " want " << want[i];
    }
    if (std::isfinite(want[i])) maxw = std::max(maxw, std::fabs(static_cast<double>(want[i])));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) continue;
    if (std::isinf(want[i]) || std::isinf(got[i])) {
      if (got[i] != want[i]) return ::testing::AssertionFailure() << "inf mismatch at " << i;
      continue;
    }
    const double dd = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (dd > maxd) {
      maxd = dd;
      where = i;
    }
  }
  if (maxd / maxw <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "normalised error " << maxd / maxw << " > " << tol << " at " << where << ": got "
         << got[where] << " want " << want[where] << " (max |want| " << maxw << ")";
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
