// Tiled FP32 GEMM for M > 16 (prefill, large decode batches): y = x · Wᵀ with W decoded to FP32
// while it is staged in shared memory.
//
// Correct-first: a classic 64x64x16 register-blocked SIMT kernel (256 threads, 4x4 outputs
// each), any format through weight_at_d, any shape. Each output is one FP32 sum over k in
// ascending order, so it does not depend on M or on the tile a row falls in. The tensor-core
// path (wgmma on sm_90a, FP8 QGMMA with per-block scales) replaces it for the prefill ceiling;
// docs/cuda_backend.md lists it as missing.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/gemm_internal.h"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    gemm_tiled_kernel(const float* __restrict__ x, int64_t xld, int64_t M, WeightDesc w,
                      float* __restrict__ y, int64_t yld) {
  grid_dependency_sync();
  __shared__ float xs[kBK][kBM + 4];
  __shared__ float ws[kBK][kBN + 4];
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < w.k; k0 += kBK) {
    // 64 x 16 tiles: 1024 elements each, 4 per thread; k fastest so x reads coalesce.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = threadIdx.x + i * kThreads;
      const int r = e / kBK, kk = e % kBK;
      const int64_t gm = m0 + r, gn = n0 + r, gk = k0 + kk;
      xs[kk][r] = (gm < M && gk < w.k) ? x[gm * xld + gk] : 0.0f;
      ws[kk][r] = (gn < w.n && gk < w.k) ? weight_at_d(w, gn, gk) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = xs[kk][ty + 16 * i];
        b[i] = ws[kk][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t gm = m0 + ty + 16 * i;
    if (gm >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t gn = n0 + tx + 16 * j;
      if (gn < w.n) y[gm * yld + gn] = acc[i][j];
    }
  }
}

}  // namespace

void launch_gemm_tiled(MatDesc x, const WeightDesc& w, MatDesc y, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((w.n + kBN - 1) / kBN),
                  static_cast<unsigned>((x.rows + kBM - 1) / kBM));
  launch_kernel(gemm_tiled_kernel, grid, kThreads, 0, stream, x.data, x.ld, x.rows, w, y.data,
                y.ld);
}

}  // namespace deepinfer::kernels::cuda
