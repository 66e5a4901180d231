// Shared pieces of the CUDA op harness: a tiny case registry and check macros (the GPU machine
// has no GoogleTest), host buffers and random weights in every stored format, their device
// copies (outputs poisoned with NaN so a forgotten element fails), and the normalised-error
// comparison of the CPU harness (tests/ops/ops_test_util.h), re-stated here without gtest.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/ops.h"
#include "base/numeric_types.h"

namespace deepinfer::backend::cuda_test {

// ---- registry ------------------------------------------------------------------------------
struct Context {
  Ops* ref = nullptr;
  cuda::CudaOps* gpu = nullptr;
  std::mt19937 rng{1234};
  int checks = 0;
  int failures = 0;
};
using CaseFn = void (*)(Context&);
struct CaseEntry {
  const char* name;
  CaseFn fn;
};
std::vector<CaseEntry>& registry();
struct Registrar {
  Registrar(const char* name, CaseFn fn) { registry().push_back({name, fn}); }
};
#define CUDA_CASE(name)                                                                       \
  static void cuda_case_##name(::deepinfer::backend::cuda_test::Context&);                    \
  static ::deepinfer::backend::cuda_test::Registrar cuda_reg_##name(#name, cuda_case_##name); \
  static void cuda_case_##name(::deepinfer::backend::cuda_test::Context& ctx)

// ---- host buffers ----------------------------------------------------------------------------
struct Buf {
  std::vector<float> v;
  int64_t rows = 0, cols = 0;
  Buf() = default;
  Buf(int64_t r, int64_t c)
      : v(static_cast<size_t>(r * c), std::numeric_limits<float>::quiet_NaN()), rows(r), cols(c) {}
  Mat mat() { return {v.data(), rows, cols}; }
  CMat cmat() const { return {v.data(), rows, cols}; }
  float& at(int64_t i, int64_t j) { return v[static_cast<size_t>(i * cols + j)]; }
};
Buf random_buf(std::mt19937& rng, int64_t r, int64_t c, float lo = -1.0f, float hi = 1.0f);

// ---- device buffers --------------------------------------------------------------------------
// Device FP32 matrix with leading dimension ld >= cols (padding poisoned too).
struct DBuf {
  cuda::DeviceBuffer mem;
  int64_t rows = 0, cols = 0, ld = 0;
  Mat mat() const { return {mem.as<float>(), rows, cols, ld}; }
  CMat cmat() const { return {mem.as<float>(), rows, cols, ld}; }
  std::vector<float> download() const;  // dense rows x cols
};
DBuf dev_poisoned(int64_t rows, int64_t cols, int64_t pad = 0);
DBuf dev_copy(const Buf& b, int64_t pad = 0);
template <typename T>
cuda::DeviceBuffer dev_array(const std::vector<T>& v);
std::vector<int32_t> download_ints(const cuda::DeviceBuffer& b, size_t n);

// ---- weights ---------------------------------------------------------------------------------
enum class WKind { kBf16, kF16, kF32, kFp8E8m0, kFp8F32, kFp8Bf16, kFp4 };
const char* wkind_name(WKind k);
struct OwnedWeight {
  std::vector<uint8_t> bytes, scale_bytes;
  WeightRef ref;           // host view (the oracle's)
  cuda::DeviceWeight dev;  // device copy (CudaOps')
};
// Values of magnitude ~amp after dequantization; bn/bk the FP8 block.
std::unique_ptr<OwnedWeight> random_weight(std::mt19937& rng, WKind kind, int64_t n, int64_t k,
                                           float amp = 0.1f, int bn = 128, int bk = 128);

// ---- checks ----------------------------------------------------------------------------------
// max |got - want| / max(max |want|, floor) <= tol, NaN where want is not NaN fails, inf must
// match exactly. Prints the failing case and returns false.
bool close(Context& ctx, const std::string& what, const std::vector<float>& got,
           const std::vector<float>& want, double tol, double floor = 1e-30);
bool equal_ints(Context& ctx, const std::string& what, const std::vector<int32_t>& got,
                const std::vector<int32_t>& want);

}  // namespace deepinfer::backend::cuda_test
