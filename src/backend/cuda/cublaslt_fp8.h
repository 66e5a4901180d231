// The FP8 block-scaled GEMM of DeepSeek's checkpoints on the stored bytes, through cuBLASLt:
// y[M, N] (FP32) = x · Wᵀ with x as E4M3 codes and one FP32 scale per 1 x 128 block of a row
// (VEC128_32F), W as E4M3 codes and one FP32 scale per 128 x 128 block (BLK128x128_32F). Hopper's
// FP8 tensor cores at twice the BF16 rate, reading each weight byte once; the alternative
// (matmul_tensor_cores) writes and reads a dequantised BF16 copy of W on every call.
//
// Numerics: the products are the exact E4M3 products times the same powers of two, but the
// tensor cores sum each 128-long block in their own FP8 accumulator (DeepGEMM's and cuBLAS's
// Hopper kernels promote to FP32 once per block, as DeepSeek-V3's report describes) before the
// FP32 sum over blocks: not the FP32 FMA order of the CPU oracle, within the tolerance the op
// harness states for it (tests/ops/cases/dense.cc).
//
// libcublasLt is opened with dlopen on first use, as libcublas is (cuda_gemm.cc): a CPU-only
// user of a CUDA-enabled build never maps it, and a machine without it keeps the other paths.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

namespace deepinfer::backend::cuda {

struct Fp8GemmOperands {
  const uint8_t* x = nullptr;      // [M, K] E4M3, row-major, ld K
  const float* x_scale = nullptr;  // [K / 128, M]: block column kb of row m at kb * M + m
  const uint8_t* w = nullptr;      // [N, K] E4M3, row-major, ld K
  const float* w_scale = nullptr;  // [N / 128, K / 128] row-major (K / 128 a multiple of 4)
  float* y = nullptr;              // [M, N] FP32 with leading dimension ldy
  int64_t M = 0, N = 0, K = 0, ldy = 0;
};

class Fp8BlockGemm {
 public:
  // Null (and one line on stderr) when libcublasLt.so.13 or its entry points are missing.
  static std::unique_ptr<Fp8BlockGemm> open();
  ~Fp8BlockGemm();
  Fp8BlockGemm(const Fp8BlockGemm&) = delete;
  Fp8BlockGemm& operator=(const Fp8BlockGemm&) = delete;

  // The shapes it takes (alignment cuBLASLt needs for FP8: K a multiple of 512 so that both
  // scale tensors are dense, N of 16, ldy of 4 floats).
  static bool shape_ok(int64_t N, int64_t K, int64_t ldy);
  // One shape's descriptors and algorithm.
  struct Plan;
  // The plan for o's shape, or null when cuBLASLt has no algorithm for it on this card (the
  // caller takes another path). The first call per shape asks cuBLASLt's heuristic and keeps
  // its answer. o's pointers need not hold data yet, but must be its own (the heuristic is asked
  // with them).
  Plan* plan(const Fp8GemmOperands& o, size_t workspace_bytes);
  // Which forms of the product cuBLASLt takes at this shape, and why not where it does not (the
  // perf mode prints it: a card or library version without them shows here).
  // `placeholder`: any device address, given to the heuristic as both scale pointers.
  std::string probe(int64_t M, int64_t N, int64_t K, const void* placeholder,
                    size_t workspace_bytes);
  // Queues the product on `stream` with plan(o)'s plan: the two scale pointers set on its
  // descriptor, then cuBLASLt.
  void run(Plan& plan, const Fp8GemmOperands& o, cudaStream_t stream, void* workspace,
           size_t workspace_bytes);

 private:
  Fp8BlockGemm() = default;
  void* handle_ = nullptr;  // cublasLtHandle_t
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, std::unique_ptr<Plan>> plans_;
};

}  // namespace deepinfer::backend::cuda
