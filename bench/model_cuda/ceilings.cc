// The card's ceilings measured in-process (ceilings.h). Each GEMM is timed with CUDA events over
// several runs after warm-up, so clocks and cuBLAS's algorithm choice have settled; the inputs
// are random finite values, not constants, so the tensor cores toggle as on real data (a matrix
// of ones draws less power and can clock higher than any real matmul).
#include "ceilings.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "backend/cuda/device.h"

namespace deepinfer::bench {
namespace {

// Times `reps` calls of `run` on the default stream with CUDA events; milliseconds per call.
template <typename Run>
double event_ms(int reps, Run&& run) {
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  DI_CUDA_CHECK(cudaEventCreate(&e0));
  DI_CUDA_CHECK(cudaEventCreate(&e1));
  DI_CUDA_CHECK(cudaEventRecord(e0));
  for (int i = 0; i < reps; ++i) run();
  DI_CUDA_CHECK(cudaEventRecord(e1));
  DI_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  DI_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  DI_CUDA_CHECK(cudaEventDestroy(e0));
  DI_CUDA_CHECK(cudaEventDestroy(e1));
  return static_cast<double>(ms) / reps;
}

// xorshift64: enough randomness for GEMM inputs, fast enough for 10^8 bytes.
struct XorShift {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};

// Random FP8 E4M3 codes with the top exponent bit clear: |x| < 2 and never the NaN code (0x7F).
std::vector<uint8_t> random_fp8(size_t n, XorShift& r) {
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(r.next() & 0xBF);
  return v;
}

// Random BF16 bit patterns with exponents 120..127 (|x| in [2^-7, 2)): finite, no overflow.
std::vector<uint16_t> random_bf16(size_t n, XorShift& r) {
  std::vector<uint16_t> v(n);
  for (auto& x : v) {
    const uint64_t b = r.next();
    x = static_cast<uint16_t>((b & 0x807F) | ((120 + ((b >> 7) & 7)) << 7));
  }
  return v;
}

// Device memory for a measurement; exits with the reason when the card has none to spare (the
// measurements run before the model is loaded, so this means a busy or broken card).
backend::cuda::DeviceBuffer device_buffer(size_t bytes, const char* what) {
  auto b = backend::cuda::DeviceBuffer::allocate(bytes);
  if (!b.ok()) {
    std::fprintf(stderr, "decode_bench: cannot allocate %zu bytes for %s: %s\n", bytes, what,
                 b.status().message().c_str());
    std::exit(1);
  }
  return std::move(*b);
}

// A device copy of `host`.
template <typename T>
backend::cuda::DeviceBuffer upload(const std::vector<T>& host, const char* what) {
  auto d = device_buffer(host.size() * sizeof(T), what);
  DI_CUDA_CHECK(cudaMemcpy(d.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// False (and `note` says which call and why) when a cuBLAS call failed.
bool blas_ok(cublasStatus_t s, const char* what, std::string& note) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  note = std::string(what) + " failed: " + cublasGetStatusName(s) + " (" +
         cublasGetStatusString(s) + ")";
  return false;
}

constexpr int kWarm = 3, kReps = 20;

// TFLOP/s of an n³ GEMM `run` after kWarm untimed runs, over kReps timed ones; 0 with `note`
// naming the failed call (`what`) when any run fails.
template <typename Run>
double timed_gemm_tflops(int n, const Run& run, const std::string& what, std::string& note) {
  for (int i = 0; i < kWarm; ++i) {
    if (!blas_ok(run(), what.c_str(), note)) return 0;
  }
  cublasStatus_t last = CUBLAS_STATUS_SUCCESS;
  const double ms = event_ms(kReps, [&] {
    const cublasStatus_t s = run();
    if (s != CUBLAS_STATUS_SUCCESS) last = s;
  });
  if (!blas_ok(last, (what + ", timed").c_str(), note)) return 0;
  return 2.0 * std::pow(static_cast<double>(n), 3) / (ms * 1e-3) / 1e12;
}

// FP8 E4M3 x E4M3 -> BF16 through cuBLASLt in the "TN" form Hopper's FP8 kernels need (A
// transposed, column-major), FP32 accumulation, unit scales. Fast accumulation stays off: its
// partial sums in reduced precision are what DeepSeek's FP8 GEMMs avoid by promoting to FP32, so
// the default is the rate a faithful FP8 matmul can reach. Returns TFLOP/s, or 0 with `note`.
double fp8_tflops(int n, XorShift& rng, std::string& note) {
  const size_t nn = static_cast<size_t>(n) * n;
  auto a = upload(random_fp8(nn, rng), "the FP8 GEMM's A");
  auto b = upload(random_fp8(nn, rng), "the FP8 GEMM's B");
  auto c = device_buffer(nn * 2, "the FP8 GEMM's output");
  const size_t ws_bytes = size_t{32} << 20;  // cuBLAS's recommendation for Hopper
  auto ws = device_buffer(ws_bytes, "the cuBLASLt workspace");
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  double tflops = 0;
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const uint64_t ws_limit = ws_bytes;
  cublasLtMatmulHeuristicResult_t algo{};
  int found = 0;
  const float alpha = 1.0f, beta = 0.0f;
  auto run = [&] {
    return cublasLtMatmul(lt, op, &alpha, a.data(), la, b.data(), lb, &beta, c.data(), lc, c.data(),
                          lc, &algo.algo, ws.data(), ws_bytes, nullptr);
  };
  // One pass of set-up calls; the first failure leaves its note and skips the rest.
  if (blas_ok(cublasLtCreate(&lt), "cublasLtCreate", note) &&
      blas_ok(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              "cublasLtMatmulDescCreate", note) &&
      blas_ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
              "set TRANSA", note) &&
      blas_ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
              "set TRANSB", note) &&
      blas_ok(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, n, n, n), "layout A", note) &&
      blas_ok(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, n, n, n), "layout B", note) &&
      blas_ok(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, n, n), "layout C/D", note) &&
      blas_ok(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", note) &&
      blas_ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &ws_limit, sizeof ws_limit),
              "set max workspace", note) &&
      blas_ok(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &algo, &found),
              "cublasLtMatmulAlgoGetHeuristic", note)) {
    if (found == 0) {
      note = "cuBLASLt has no FP8 E4M3 x E4M3 -> BF16 algorithm on this card";
    } else {
      tflops = timed_gemm_tflops(n, run, "cublasLtMatmul (FP8)", note);
    }
  }
  if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
  if (lc != nullptr) cublasLtMatrixLayoutDestroy(lc);
  if (lb != nullptr) cublasLtMatrixLayoutDestroy(lb);
  if (la != nullptr) cublasLtMatrixLayoutDestroy(la);
  if (op != nullptr) cublasLtMatmulDescDestroy(op);
  if (lt != nullptr) cublasLtDestroy(lt);
  DI_CUDA_CHECK(cudaDeviceSynchronize());
  return tflops;
}

// BF16 x BF16 -> BF16 through cuBLAS (cublasGemmEx, FP32 accumulation). TFLOP/s or 0 + `note`.
double bf16_tflops(int n, XorShift& rng, std::string& note) {
  const size_t nn = static_cast<size_t>(n) * n;
  auto a = upload(random_bf16(nn, rng), "the BF16 GEMM's A");
  auto b = upload(random_bf16(nn, rng), "the BF16 GEMM's B");
  auto c = device_buffer(nn * 2, "the BF16 GEMM's output");
  cublasHandle_t h = nullptr;
  double tflops = 0;
  const float alpha = 1.0f, beta = 0.0f;
  auto run = [&] {
    return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.data(), CUDA_R_16BF, n,
                        b.data(), CUDA_R_16BF, n, &beta, c.data(), CUDA_R_16BF, n,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  if (blas_ok(cublasCreate(&h), "cublasCreate", note)) {
    tflops = timed_gemm_tflops(n, run, "cublasGemmEx (BF16)", note);
  }
  if (h != nullptr) cublasDestroy(h);
  DI_CUDA_CHECK(cudaDeviceSynchronize());
  return tflops;
}

}  // namespace

double measure_copy_gbps() {
  const size_t bytes = size_t{2} << 30;
  auto a = device_buffer(bytes, "the copy-bandwidth source");
  auto b = device_buffer(bytes, "the copy-bandwidth destination");
  DI_CUDA_CHECK(cudaMemset(a.data(), 1, bytes));
  DI_CUDA_CHECK(cudaMemcpy(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice));  // warm-up
  const double ms = event_ms(10, [&] {
    DI_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice));
  });
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

namespace {
// GB/s of copies of `bytes` from a zeroed device buffer into `host` (written once untimed first:
// no page faults inside the timed copies).
double d2h_gbps_into(void* host, size_t bytes) {
  auto d = device_buffer(bytes, "the device-to-host copy");
  DI_CUDA_CHECK(cudaMemset(d.data(), 0, bytes));
  DI_CUDA_CHECK(cudaMemcpy(host, d.data(), bytes, cudaMemcpyDeviceToHost));
  const int reps = 5;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    DI_CUDA_CHECK(cudaMemcpy(host, d.data(), bytes, cudaMemcpyDeviceToHost));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(bytes) * reps / s / 1e9;
}
}  // namespace

double measure_d2h_gbps(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  std::vector<char> host(bytes, 1);
  return d2h_gbps_into(host.data(), bytes);
}

double measure_d2h_pinned_gbps(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  void* host = nullptr;
  if (cudaMallocHost(&host, bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: the benchmark goes on without this ceiling
    return 0.0;
  }
  const double gbps = d2h_gbps_into(host, bytes);
  DI_CUDA_CHECK(cudaFreeHost(host));
  return gbps;
}

GemmRates measure_gemm_tflops(int n) {
  GemmRates r;
  r.n = n;
  XorShift rng;
  r.fp8_tflops = fp8_tflops(n, rng, r.fp8_note);
  r.bf16_tflops = bf16_tflops(n, rng, r.bf16_note);
  return r;
}

double WeightBytes::step_bytes(int batch) const {
  const double distinct =
      experts * (1.0 - std::pow(1.0 - static_cast<double>(top_k) / experts, batch));
  return dense + moe_layers * distinct * per_expert;
}

WeightBytes count_weights(const io::Checkpoint& ck) {
  WeightBytes w;
  const auto& c = ck.config();
  w.moe_layers = static_cast<int>(c.layers.size());
  w.experts = c.n_routed_experts;
  w.top_k = c.num_experts_per_tok;
  double expert_total = 0, expert_params = 0;
  for (const auto& e : ck.expected()) {
    const std::string& name = e.name;
    const io::Weight* t = ck.find(name);
    if (t == nullptr) continue;
    double b = static_cast<double>(t->data.nbytes());
    double params = static_cast<double>(t->data.numel());
    if (t->scale) b += static_cast<double>(t->scale->nbytes());
    if (t->data.dtype == DType::kI8 || t->data.dtype == DType::kU8) {
      params *= 2;  // FP4: two codes per byte
    }
    if (name.find(".ffn.experts.") != std::string::npos) {
      expert_total += b;
      expert_params += params;
    } else if (name == "embed.weight" || e.role == io::TensorRole::kEngramTable) {
      continue;  // a few rows per token are read (V4.1's Engram tables stay in host memory)
    } else if (e.mtp) {
      continue;  // drafter blocks (V4 MTP, V4.1 DSpark): not run by a plain decode step
    } else if (name == "head.weight") {
      w.dense += b;  // read once per decode step
      w.head_bytes = b;
      w.head_params = params;
    } else {
      w.dense += b;
      w.body_params += params;
    }
  }
  if (w.head_params == 0) {  // tied embeddings: the head multiplies by the embedding table
    if (const io::Weight* t = ck.find("embed.weight"); t != nullptr) {
      w.head_bytes = static_cast<double>(t->data.nbytes());
      w.head_params = static_cast<double>(t->data.numel());
      w.dense += w.head_bytes;
    }
  }
  const double n_experts = static_cast<double>(w.moe_layers) * w.experts;
  w.per_expert = expert_total / n_experts;
  w.body_params += expert_params / n_experts * w.moe_layers * w.top_k;
  return w;
}

}  // namespace deepinfer::bench
