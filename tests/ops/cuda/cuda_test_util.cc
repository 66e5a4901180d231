// Helpers of the CUDA op harness (cuda_test_util.h).
#include "cuda_test_util.h"

#include <algorithm>
#include <cstdlib>

namespace deepinfer::backend::cuda_test {

std::vector<CaseEntry>& registry() {
  static std::vector<CaseEntry> r;
  return r;
}

Buf random_buf(std::mt19937& rng, int64_t r, int64_t c, float lo, float hi) {
  Buf b(r, c);
  std::uniform_real_distribution<float> d(lo, hi);
  for (float& x : b.v) x = d(rng);
  return b;
}

namespace {
template <typename T>
T must(Expected<T> e) {
  if (!e.ok()) {
    std::fprintf(stderr, "harness: %s\n", e.status().to_string().c_str());
    std::abort();
  }
  return std::move(e).value();
}
}  // namespace

DBuf dev_poisoned(int64_t rows, int64_t cols, int64_t pad) {
  DBuf d;
  d.rows = rows;
  d.cols = cols;
  d.ld = cols + pad;
  const size_t n = static_cast<size_t>(std::max<int64_t>(rows * d.ld, 1));
  d.mem = must(cuda::DeviceBuffer::allocate(n * sizeof(float)));
  const std::vector<float> nan(n, std::numeric_limits<float>::quiet_NaN());
  DI_CUDA_CHECK(cudaMemcpy(d.mem.data(), nan.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

DBuf dev_copy(const Buf& b, int64_t pad) {
  DBuf d = dev_poisoned(b.rows, b.cols, pad);
  if (b.rows * b.cols > 0) {
    DI_CUDA_CHECK(cudaMemcpy2D(d.mem.data(), static_cast<size_t>(d.ld) * sizeof(float), b.v.data(),
                               static_cast<size_t>(b.cols) * sizeof(float),
                               static_cast<size_t>(b.cols) * sizeof(float),
                               static_cast<size_t>(b.rows), cudaMemcpyHostToDevice));
  }
  return d;
}

std::vector<float> DBuf::download() const {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  if (!v.empty()) {
    DI_CUDA_CHECK(cudaMemcpy2D(v.data(), static_cast<size_t>(cols) * sizeof(float), mem.data(),
                               static_cast<size_t>(ld) * sizeof(float),
                               static_cast<size_t>(cols) * sizeof(float), static_cast<size_t>(rows),
                               cudaMemcpyDeviceToHost));
  }
  return v;
}

template <typename T>
cuda::DeviceBuffer dev_array(const std::vector<T>& v) {
  cuda::DeviceBuffer b =
      must(cuda::DeviceBuffer::allocate(std::max<size_t>(v.size(), 1) * sizeof(T)));
  if (!v.empty()) {
    DI_CUDA_CHECK(cudaMemcpy(b.data(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  return b;
}
template cuda::DeviceBuffer dev_array(const std::vector<int32_t>&);
template cuda::DeviceBuffer dev_array(const std::vector<int64_t>&);
template cuda::DeviceBuffer dev_array(const std::vector<float>&);
template cuda::DeviceBuffer dev_array(const std::vector<const float*>&);

std::vector<int32_t> download_ints(const cuda::DeviceBuffer& b, size_t n) {
  std::vector<int32_t> v(n);
  if (n) DI_CUDA_CHECK(cudaMemcpy(v.data(), b.data(), n * sizeof(int32_t), cudaMemcpyDeviceToHost));
  return v;
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

std::unique_ptr<OwnedWeight> random_weight(std::mt19937& rng, WKind kind, int64_t n, int64_t k,
                                           float amp, int bn, int bk) {
  auto w = std::make_unique<OwnedWeight>();
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
          put(&x, 4, w->bytes);
        } else {
          const uint16_t h =
              kind == WKind::kBf16
                  ? float_to_bf16(x)
                  : static_cast<uint16_t>(0x2000 + (byte(rng) << 2) + (byte(rng) & 1 ? 0x8000 : 0));
          put(&h, 2, w->bytes);
        }
      }
      const DType dt = kind == WKind::kBf16  ? DType::kBF16
                       : kind == WKind::kF16 ? DType::kF16
                                             : DType::kF32;
      w->ref = must(WeightRef::dense(TensorView::make(dt, {n, k}, w->bytes.data())));
      break;
    }
    case WKind::kFp8E8m0:
    case WKind::kFp8F32:
    case WKind::kFp8Bf16: {
      for (int64_t i = 0; i < n * k; ++i) w->bytes.push_back(float_to_fp8_e4m3(d(rng) * 400.0f));
      const int64_t sn = (n + bn - 1) / bn, sk = (k + bk - 1) / bk;
      for (int64_t i = 0; i < sn * sk; ++i) {
        const int e = 127 - 12 + byte(rng) % 3;
        if (kind == WKind::kFp8E8m0) {
          w->scale_bytes.push_back(static_cast<uint8_t>(e));
        } else if (kind == WKind::kFp8F32) {
          const float s = std::ldexp(1.0f, e - 127) * (1.0f + 0.25f * d(rng));
          put(&s, 4, w->scale_bytes);
        } else {
          const uint16_t s = float_to_bf16(std::ldexp(1.0f, e - 127) * (1.0f + 0.25f * d(rng)));
          put(&s, 2, w->scale_bytes);
        }
      }
      const DType st = kind == WKind::kFp8E8m0  ? DType::kF8E8M0
                       : kind == WKind::kFp8F32 ? DType::kF32
                                                : DType::kBF16;
      w->ref = must(WeightRef::fp8(TensorView::make(DType::kF8E4M3, {n, k}, w->bytes.data()),
                                   TensorView::make(st, {sn, sk}, w->scale_bytes.data()), bn, bk));
      break;
    }
    case WKind::kFp4: {
      for (int64_t i = 0; i < n * k / 2; ++i) w->bytes.push_back(static_cast<uint8_t>(byte(rng)));
      const int64_t sk = (k + 31) / 32;
      for (int64_t i = 0; i < n * sk; ++i)
        w->scale_bytes.push_back(static_cast<uint8_t>(127 - 5 + byte(rng) % 3));
      w->ref =
          must(WeightRef::fp4(TensorView::make(DType::kI8, {n, k / 2}, w->bytes.data()),
                              TensorView::make(DType::kF8E8M0, {n, sk}, w->scale_bytes.data())));
      break;
    }
  }
  w->dev = must(cuda::upload_weight(w->ref));
  return w;
}

bool close(Context& ctx, const std::string& what, const std::vector<float>& got,
           const std::vector<float>& want, double tol, double floor) {
  ++ctx.checks;
  auto fail = [&](const std::string& msg) {
    ++ctx.failures;
    std::printf("  FAIL %s: %s\n", what.c_str(), msg.c_str());
    return false;
  };
  if (got.size() != want.size()) return fail("size mismatch");
  double maxw = floor, maxd = 0.0;
  size_t where = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i])) {
      return fail("NaN mismatch at " + std::to_string(i) + ": got " + std::to_string(got[i]) +
                  " want " + std::to_string(want[i]));
    }
    if (std::isfinite(want[i])) maxw = std::max(maxw, std::fabs(static_cast<double>(want[i])));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) continue;
    if (std::isinf(want[i]) || std::isinf(got[i])) {
      if (got[i] != want[i]) return fail("inf mismatch at " + std::to_string(i));
      continue;
    }
    const double dd = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (dd > maxd) {
      maxd = dd;
      where = i;
    }
  }
  if (maxd / maxw <= tol) return true;
  char msg[256];
  std::snprintf(msg, sizeof msg,
                "normalised error %.3g > %.3g at %zu: got %.9g want %.9g (max |want| %.4g)",
                maxd / maxw, tol, where, static_cast<double>(got[where]),
                static_cast<double>(want[where]), maxw);
  return fail(msg);
}

bool equal_ints(Context& ctx, const std::string& what, const std::vector<int32_t>& got,
                const std::vector<int32_t>& want) {
  ++ctx.checks;
  if (got.size() != want.size()) {
    ++ctx.failures;
    std::printf("  FAIL %s: size mismatch\n", what.c_str());
    return false;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      ++ctx.failures;
      std::printf("  FAIL %s: at %zu got %d want %d\n", what.c_str(), i, got[i], want[i]);
      return false;
    }
  }
  return true;
}

}  // namespace deepinfer::backend::cuda_test
