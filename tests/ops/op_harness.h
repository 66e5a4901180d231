// The one op harness (ggml's test-backend-ops is the model): a registry of op cases, each run on
// every backend present against the oracle, and the helpers the cases share. No GoogleTest and
// no CUDA header here: the same case files compile into the CPU GoogleTest driver
// (ops_cases_test.cc: every case on every CPU backend) and the CUDA plain driver
// (cuda/ops_cuda_main.cc: every case on CudaOps, for GPU machines without GoogleTest).
//
// A case receives a CaseContext: `ops` is the backend under test, `ref` the oracle (the CPU ref
// backend, host memory). Inputs are built on the host; the oracle reads them there and the
// backend under test reads its own copies, placed in its memory through the Ops memory interface
// (allocate / upload / download): host memory for the CPU backends, device memory for CudaOps.
// Outputs start as NaN (padding too), so an element an op forgot to write fails the comparison.
//
// A case names the features it needs (a backend without one reports the case as skipped) and
// the backends it is meant for (kOnAll unless it checks a property of one backend: thread or
// batch invariance of a kernel family, graph capture).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/ops.h"

namespace deepinfer::backend::testing {

// ---- host matrices ---------------------------------------------------------------------------
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
  void poison();
};
Buf random_buf(std::mt19937& rng, int64_t r, int64_t c, float lo = -1.0f, float hi = 1.0f);
// b with every value rounded to BF16 (backend/quant.h's bf16_round): inputs of the ops whose BF16
// flags promise BF16 numbers.
Buf bf16_rounded(Buf b);

// ---- host weights ----------------------------------------------------------------------------
enum class WKind { kBf16, kF16, kF32, kFp8E8m0, kFp8F32, kFp8Bf16, kFp4 };
const char* wkind_name(WKind k);

// A weight plus the bytes it views (moving keeps the views valid; copying does not).
struct OwnedWeight {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> scale_bytes;
  WeightRef ref;
};
// Random weight [n, k] of the given kind; values of magnitude ~amp after dequantization (F16:
// exactly representable values of magnitude 2^-3 .. 2^-2 whatever amp); bn x bk the FP8 block.
OwnedWeight random_weight(std::mt19937& rng, WKind kind, int64_t n, int64_t k, float amp = 0.1f,
                          int bn = 128, int bk = 128);

// ---- comparison ------------------------------------------------------------------------------
// max |got - want| / max(max |want|, floor) must be <= tol; NaN where want is not NaN fails, inf
// must match exactly. Empty when it holds, else what failed and where.
std::string compare(const std::vector<float>& got, const std::vector<float>& want, double tol,
                    double floor = 1e-30);

// ---- backend memory --------------------------------------------------------------------------
// One allocation in a backend's memory (Ops::allocate, zero-filled), freed with the object.
class BackendMem {
 public:
  BackendMem() = default;
  BackendMem(Ops& ops, size_t bytes);
  BackendMem(BackendMem&& o) noexcept { *this = std::move(o); }
  BackendMem& operator=(BackendMem&& o) noexcept;
  BackendMem(const BackendMem&) = delete;
  BackendMem& operator=(const BackendMem&) = delete;
  ~BackendMem();
  void* data() const { return p_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  Ops* ops_ = nullptr;
  void* p_ = nullptr;
};

// An FP32 matrix in the backend's memory with leading dimension ld = cols + pad.
struct DBuf {
  Ops* ops = nullptr;
  BackendMem mem;
  int64_t rows = 0, cols = 0, ld = 0;
  Mat mat() const { return {mem.as<float>(), rows, cols, ld}; }
  CMat cmat() const { return {mem.as<float>(), rows, cols, ld}; }
  std::vector<float> download() const;  // dense rows x cols; waits for the ops queued before
};

// A host weight (the oracle's view) and its copy in the backend's memory.
struct TestWeight : OwnedWeight {
  struct {
    BackendMem weight, scale;
    WeightRef ref;
  } dev;
};

// ---- the registry ----------------------------------------------------------------------------
// Which backends a case is meant for (the drivers say which one theirs is). kHeavy marks a case
// at model-size shapes (minutes on a CPU, most of it the oracle): the CPU driver runs it on one
// opt configuration, not at every thread count (OptThreads covers those).
enum OnBackends : unsigned { kOnCpu = 1u, kOnCuda = 2u, kOnAll = 3u, kHeavy = 4u };
const char* on_backends_name(unsigned on);

struct CaseContext {
  Ops* ops = nullptr;    // the backend under test
  Ops* ref = nullptr;    // the oracle (host memory)
  // The same backend in its batch-invariant mode, where it has a separate one (CUDA), for the
  // checks of that promise; null: `ops` promises it itself (the CPU backends).
  Ops* invariant_ops = nullptr;
  unsigned on = kOnCpu;  // the OnBackends bit of `ops`
  std::mt19937 rng{1234};
  int checks = 0, failures = 0;
  // Called with "what: why" for each failed check (the drivers print or ADD_FAILURE it).
  std::function<void(const std::string&)> report;
};

using CaseFn = void (*)(CaseContext&);
struct OpCase {
  const char* name;
  unsigned on;                    // OnBackends
  std::vector<Feature> features;  // all needed, else the case is skipped
  CaseFn fn;
};
// Every case, in registration order (file by file).
const std::vector<OpCase>& op_cases();
struct CaseRegistrar {
  CaseRegistrar(const char* name, unsigned on, std::initializer_list<Feature> features, CaseFn fn);
};
// The first feature of `c` that `ops` lacks, or kCount when it has them all.
Feature missing_feature(const OpCase& c, const Ops& ops);
// Runs `c` on ctx.ops (the caller checked on/features), counting its checks into ctx.
void run_case(const OpCase& c, CaseContext& ctx);

// OP_CASE(name, on, features...) { body using ctx }
#define OP_CASE(name, on, ...)                                                  \
  static void op_case_##name(::deepinfer::backend::testing::CaseContext&);      \
  static const ::deepinfer::backend::testing::CaseRegistrar op_case_reg_##name( \
      #name, on, {__VA_ARGS__}, op_case_##name);                                \
  static void op_case_##name([[maybe_unused]] ::deepinfer::backend::testing::CaseContext& ctx)

// ---- what the cases use ----------------------------------------------------------------------
// Checks: count, and report a failure through ctx.report. They return whether it held.
bool close(CaseContext& ctx, const std::string& what, const std::vector<float>& got,
           const std::vector<float>& want, double tol, double floor = 1e-30);
bool equal_ints(CaseContext& ctx, const std::string& what, const std::vector<int32_t>& got,
                const std::vector<int32_t>& want);
bool check(CaseContext& ctx, const std::string& what, bool ok);

// Copies in the backend under test's memory.
DBuf dev_poisoned(CaseContext& ctx, int64_t rows, int64_t cols, int64_t pad = 0);
DBuf dev_copy(CaseContext& ctx, const Buf& b, int64_t pad = 0);
template <typename T>
BackendMem dev_array(CaseContext& ctx, const std::vector<T>& v) {
  BackendMem m(*ctx.ops, std::max<size_t>(v.size(), 1) * sizeof(T));
  if (!v.empty()) ctx.ops->upload(m.data(), v.data(), v.size() * sizeof(T));
  return m;
}
template <typename T>
std::vector<T> download_array(CaseContext& ctx, const BackendMem& m, size_t n) {
  std::vector<T> v(n);
  if (n) ctx.ops->download(v.data(), m.data(), n * sizeof(T));
  return v;
}
inline std::vector<int32_t> download_ints(CaseContext& ctx, const BackendMem& m, size_t n) {
  return download_array<int32_t>(ctx, m, n);
}
// A random weight (random_weight's) and its copy in the backend under test's memory.
std::unique_ptr<TestWeight> test_weight(CaseContext& ctx, WKind kind, int64_t n, int64_t k,
                                        float amp = 0.1f, int bn = 128, int bk = 128);

}  // namespace deepinfer::backend::testing
