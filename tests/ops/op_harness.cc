// The op harness's shared helpers and registry (op_harness.h).
#include "op_harness.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "backend/quant.h"
#include "base/numeric_types.h"

namespace deepinfer::backend::testing {

void Buf::poison() { std::fill(v.begin(), v.end(), std::numeric_limits<float>::quiet_NaN()); }

Buf random_buf(std::mt19937& rng, int64_t r, int64_t c, float lo, float hi) {
  Buf b(r, c);
  std::uniform_real_distribution<float> d(lo, hi);
  for (float& x : b.v) x = d(rng);
  return b;
}

Buf bf16_rounded(Buf b) {
  for (float& v : b.v) v = bf16_round(v);
  return b;
}

const char* wkind_name(WKind k) {
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
    case WKind::kFp8Bf16:
      return "fp8-bf16scale";
    case WKind::kFp4:
      return "fp4";
  }
  return "?";
}

namespace {

template <typename T>
T must(Expected<T> e) {
  if (!e.ok()) {
    std::fprintf(stderr, "op harness: %s\n", e.status().to_string().c_str());
    std::abort();
  }
  return std::move(e).value();
}

}  // namespace

OwnedWeight random_weight(std::mt19937& rng, WKind kind, int64_t n, int64_t k, float amp, int bn,
                          int bk) {
  OwnedWeight w;
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  auto put = [](const void* p, size_t nbytes, std::vector<uint8_t>& out) {
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
          // F16: exactly representable values in a small range, whatever amp.
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
      w.ref = must(WeightRef::dense(TensorView::make(dt, {n, k}, w.bytes.data())));
      return w;
    }
    case WKind::kFp8E8m0:
    case WKind::kFp8F32:
    case WKind::kFp8Bf16: {
      for (int64_t i = 0; i < n * k; ++i) w.bytes.push_back(float_to_fp8_e4m3(d(rng) * 400.0f));
      const int64_t sn = (n + bn - 1) / bn, sk = (k + bk - 1) / bk;
      for (int64_t i = 0; i < sn * sk; ++i) {
        const int e = 127 - 12 + byte(rng) % 3;  // 2^-12 .. 2^-10: |w| up to ~0.4
        if (kind == WKind::kFp8E8m0) {
          w.scale_bytes.push_back(static_cast<uint8_t>(e));
        } else if (kind == WKind::kFp8F32) {
          const float s = std::ldexp(1.0f, e - 127) * (1.0f + 0.25f * d(rng));
          put(&s, 4, w.scale_bytes);
        } else {
          const uint16_t s = float_to_bf16(std::ldexp(1.0f, e - 127) * (1.0f + 0.25f * d(rng)));
          put(&s, 2, w.scale_bytes);
        }
      }
      const DType st = kind == WKind::kFp8E8m0  ? DType::kF8E8M0
                       : kind == WKind::kFp8F32 ? DType::kF32
                                                : DType::kBF16;
      w.ref = must(WeightRef::fp8(TensorView::make(DType::kF8E4M3, {n, k}, w.bytes.data()),
                                  TensorView::make(st, {sn, sk}, w.scale_bytes.data()), bn, bk));
      return w;
    }
    case WKind::kFp4: {
      for (int64_t i = 0; i < n * k / 2; ++i) w.bytes.push_back(static_cast<uint8_t>(byte(rng)));
      const int64_t sk = (k + 31) / 32;
      for (int64_t i = 0; i < n * sk; ++i)
        w.scale_bytes.push_back(static_cast<uint8_t>(127 - 5 + byte(rng) % 3));
      w.ref = must(WeightRef::fp4(TensorView::make(DType::kI8, {n, k / 2}, w.bytes.data()),
                                  TensorView::make(DType::kF8E8M0, {n, sk}, w.scale_bytes.data())));
      return w;
    }
  }
  return w;
}

std::string compare(const std::vector<float>& got, const std::vector<float>& want, double tol,
                    double floor) {
  if (got.size() != want.size()) {
    return "size mismatch: got " + std::to_string(got.size()) + " want " +
           std::to_string(want.size());
  }
  char msg[256];
  double maxw = floor, maxd = 0.0;
  size_t where = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i])) {
      std::snprintf(msg, sizeof msg, "NaN mismatch at %zu: got %.9g want %.9g", i,
                    static_cast<double>(got[i]), static_cast<double>(want[i]));
      return msg;
    }
    if (std::isfinite(want[i])) maxw = std::max(maxw, std::fabs(static_cast<double>(want[i])));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) continue;
    if (std::isinf(want[i]) || std::isinf(got[i])) {
      if (got[i] != want[i]) return "inf mismatch at " + std::to_string(i);
      continue;
    }
    const double dd = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (dd > maxd) {
      maxd = dd;
      where = i;
    }
  }
  if (maxd / maxw <= tol) return {};
  std::snprintf(msg, sizeof msg,
                "normalised error %.3g > %.3g at %zu: got %.9g want %.9g (max |want| %.4g)",
                maxd / maxw, tol, where, static_cast<double>(got[where]),
                static_cast<double>(want[where]), maxw);
  return msg;
}

// ---- backend memory --------------------------------------------------------------------------

BackendMem::BackendMem(Ops& ops, size_t bytes) : ops_(&ops), p_(ops.allocate(bytes)) {}

BackendMem& BackendMem::operator=(BackendMem&& o) noexcept {
  if (this != &o) {
    if (ops_ != nullptr) ops_->deallocate(p_);
    ops_ = std::exchange(o.ops_, nullptr);
    p_ = std::exchange(o.p_, nullptr);
  }
  return *this;
}

BackendMem::~BackendMem() {
  if (ops_ != nullptr) ops_->deallocate(p_);
}

std::vector<float> DBuf::download() const {
  std::vector<float> all(static_cast<size_t>(rows * ld)), v(static_cast<size_t>(rows * cols));
  if (all.empty()) return v;
  ops->download(all.data(), mem.data(), all.size() * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(all.begin() + r * ld, all.begin() + r * ld + cols, v.begin() + r * cols);
  }
  return v;
}

DBuf dev_poisoned(CaseContext& ctx, int64_t rows, int64_t cols, int64_t pad) {
  DBuf d;
  d.ops = ctx.ops;
  d.rows = rows;
  d.cols = cols;
  d.ld = cols + pad;
  const size_t n = static_cast<size_t>(std::max<int64_t>(rows * d.ld, 1));
  d.mem = BackendMem(*ctx.ops, n * sizeof(float));
  const std::vector<float> nan(n, std::numeric_limits<float>::quiet_NaN());
  ctx.ops->upload(d.mem.data(), nan.data(), n * sizeof(float));
  return d;
}

DBuf dev_copy(CaseContext& ctx, const Buf& b, int64_t pad) {
  DBuf d;
  d.ops = ctx.ops;
  d.rows = b.rows;
  d.cols = b.cols;
  d.ld = b.cols + pad;
  const size_t n = static_cast<size_t>(std::max<int64_t>(b.rows * d.ld, 1));
  d.mem = BackendMem(*ctx.ops, n * sizeof(float));
  std::vector<float> host(n, std::numeric_limits<float>::quiet_NaN());  // padding poisoned
  for (int64_t r = 0; r < b.rows; ++r) {
    std::copy(b.v.begin() + r * b.cols, b.v.begin() + (r + 1) * b.cols, host.begin() + r * d.ld);
  }
  ctx.ops->upload(d.mem.data(), host.data(), n * sizeof(float));
  return d;
}

std::unique_ptr<TestWeight> test_weight(CaseContext& ctx, WKind kind, int64_t n, int64_t k,
                                        float amp, int bn, int bk) {
  auto w = std::make_unique<TestWeight>();
  static_cast<OwnedWeight&>(*w) = random_weight(ctx.rng, kind, n, k, amp, bn, bk);
  auto place = [&](const TensorView& host, BackendMem& mem) {
    mem = BackendMem(*ctx.ops, static_cast<size_t>(host.nbytes()));
    ctx.ops->upload(mem.data(), host.data, static_cast<size_t>(host.nbytes()));
    return TensorView::make(host.dtype, host.shape, mem.data(), ctx.ops->device_kind());
  };
  w->dev.ref = w->ref;
  w->dev.ref.weight = place(w->ref.weight, w->dev.weight);
  if (w->ref.quantized()) w->dev.ref.scale = place(w->ref.scale, w->dev.scale);
  return w;
}

// ---- checks ----------------------------------------------------------------------------------

namespace {

bool record(CaseContext& ctx, const std::string& what, const std::string& why) {
  ++ctx.checks;
  if (why.empty()) return true;
  ++ctx.failures;
  if (ctx.report) ctx.report(what + ": " + why);
  return false;
}

}  // namespace

bool close(CaseContext& ctx, const std::string& what, const std::vector<float>& got,
           const std::vector<float>& want, double tol, double floor) {
  return record(ctx, what, compare(got, want, tol, floor));
}

bool equal_ints(CaseContext& ctx, const std::string& what, const std::vector<int32_t>& got,
                const std::vector<int32_t>& want) {
  if (got.size() != want.size()) {
    return record(ctx, what,
                  "size mismatch: got " + std::to_string(got.size()) + " want " +
                      std::to_string(want.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return record(ctx, what,
                    "at " + std::to_string(i) + " got " + std::to_string(got[i]) + " want " +
                        std::to_string(want[i]));
    }
  }
  return record(ctx, what, {});
}

bool check(CaseContext& ctx, const std::string& what, bool ok) {
  return record(ctx, what, ok ? std::string() : std::string("does not hold"));
}

// ---- registry --------------------------------------------------------------------------------

namespace {

std::vector<OpCase>& mutable_cases() {
  static std::vector<OpCase> cases;
  return cases;
}

}  // namespace

const std::vector<OpCase>& op_cases() { return mutable_cases(); }

CaseRegistrar::CaseRegistrar(const char* name, unsigned on, std::initializer_list<Feature> features,
                             CaseFn fn) {
  mutable_cases().push_back({name, on, std::vector<Feature>(features), fn});
}

const char* on_backends_name(unsigned on) {
  switch (on & kOnAll) {
    case kOnCpu:
      return "cpu";
    case kOnCuda:
      return "cuda";
    case kOnAll:
      return "all";
    default:
      return "?";
  }
}

Feature missing_feature(const OpCase& c, const Ops& ops) {
  for (Feature f : c.features) {
    if (!ops.supports(f)) return f;
  }
  return Feature::kCount;
}

void run_case(const OpCase& c, CaseContext& ctx) {
  ctx.rng.seed(1234);  // every case sees the same inputs alone or in a full run
  c.fn(ctx);
  ctx.ops->synchronize();
}

}  // namespace deepinfer::backend::testing
