// Quantization round trips (FP8 E4M3 and FP4 E2M1 with power-of-two block scales, the rules of
// backend/quant.h, bit-identical), the in-place Hadamard transforms (128 and any power of two up
// to 1024) and the official BF16-arithmetic per-head RMS norm.
//
// One warp per (row, block): the block amax is a warp max, then each lane rounds its elements.
// Hadamard: one 128-thread block per 128-wide chunk, a fast Walsh-Hadamard transform in shared
// memory (Sylvester order, H_ij = (-1)^popcount(i & j)), scaled once at the end.
#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

// kFp8: E4M3 with a power-of-two scale; kFp4: MXFP4 (E2M1, power-of-two scale); kNvfp4: E2M1
// with an E4M3 scale e4m3(max(amax, 6·2^-9) / 6) (V4.1 compressed KV). backend/quant.h's rules.
enum class Fq { kFp8, kFp4, kNvfp4 };

// x -> out (the same matrix for the in-place round trips; the act-quantized copy of a linear's
// input otherwise, one launch instead of a copy and a round trip).
template <Fq kMode>
__global__ void fake_quant_kernel(MatDesc x, MatDesc out, int64_t n, int64_t block,
                                  int64_t blocks_per_row) {
  grid_dependency_sync();
  const int64_t wg = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (wg >= x.rows * blocks_per_row) return;  // whole warps exit together
  const int64_t row = wg / blocks_per_row, b0 = (wg % blocks_per_row) * block;
  const int64_t len = (n - b0) < block ? (n - b0) : block;
  const float* p = x.data + row * x.ld + b0;
  float* q = out.data + row * out.ld + b0;
  if constexpr (kMode == Fq::kFp8) {
    act_quant_fp8_warp(p, q, len, lane);
  } else {
    const float amax = warp_block_amax(p, len, lane);
    const float s =
        kMode == Fq::kFp4
            ? pow2_scale_d(amax, kFp4MaxD, kFp4AmaxFloorD)
            : fp8_e4m3_round_d((amax < kNvfp4AmaxFloorD ? kNvfp4AmaxFloorD : amax) / kFp4MaxD);
    for (int64_t i = lane; i < len; i += 32) q[i] = fp4_e2m1_round_d(p[i] / s) * s;
  }
}

__global__ void hadamard128_kernel(MatDesc x, int64_t chunks_per_row) {
  grid_dependency_sync();
  __shared__ float v[128];
  const int64_t row = blockIdx.x / chunks_per_row, c0 = (blockIdx.x % chunks_per_row) * 128;
  float* p = x.data + row * x.ld + c0;
  const int i = threadIdx.x;
  v[i] = p[i];
  __syncthreads();
#pragma unroll
  for (int h = 1; h < 128; h <<= 1) {
    const float mine = v[i], other = v[i ^ h];
    __syncthreads();
    v[i] = (i & h) ? other - mine : mine + other;
    __syncthreads();
  }
  p[i] = v[i] * 0.08838834764831845f;  // 128^-1/2
}

// Any power-of-two width n <= 1024: one n-thread block per chunk, the same butterflies as the
// host loop (a+b, a-b for h = 1, 2, 4, ...), then one multiply by the host's FP32 1/sqrt(n).
__global__ void hadamard_kernel(MatDesc x, int64_t chunks_per_row, float scale) {
  grid_dependency_sync();
  extern __shared__ float v[];
  const int n = static_cast<int>(blockDim.x);
  const int64_t row = blockIdx.x / chunks_per_row, c0 = (blockIdx.x % chunks_per_row) * n;
  float* p = x.data + row * x.ld + c0;
  const int i = threadIdx.x;
  v[i] = p[i];
  __syncthreads();
  for (int h = 1; h < n; h <<= 1) {
    const float mine = v[i], other = v[i ^ h];
    __syncthreads();
    v[i] = (i & h) ? other - mine : mine + other;
    __syncthreads();
  }
  p[i] = v[i] * scale;
}

// The official per-head q norm in BF16 arithmetic (ops.h rms_norm_bf16): one warp per
// (row, group); lane j sums the rounded squares of channels j, j + 32, ... and a fixed xor tree
// combines the lanes, so a row's result never depends on the batch (the host sums in channel
// order; the two may differ by one BF16 rounding).
__global__ void rms_norm_bf16_kernel(MatDesc x, int64_t group, int64_t groups_per_row, float eps) {
  grid_dependency_sync();
  const int64_t t = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (t >= x.rows * groups_per_row) return;  // whole warps exit together
  rms_norm_bf16_warp(x.data + (t / groups_per_row) * x.ld + (t % groups_per_row) * group, group,
                     eps, lane);
}

template <Fq kMode>
void launch_fq(MatDesc x, MatDesc out, int64_t n, int64_t block, cudaStream_t stream) {
  if (x.rows == 0 || n == 0) return;
  const int64_t bpr = (n + block - 1) / block;
  const int64_t threads = x.rows * bpr * 32;
  launch_kernel(fake_quant_kernel<kMode>, grid_for(threads, 256), 256, 0, stream, x, out, n, block,
                bpr);
}

}  // namespace

void launch_fake_quant_fp8(MatDesc x, int64_t n, int64_t block, cudaStream_t stream) {
  launch_fq<Fq::kFp8>(x, x, n, block, stream);
}
void launch_act_quant_fp8_copy(MatDesc x, MatDesc out, int64_t block, cudaStream_t stream) {
  launch_fq<Fq::kFp8>(x, out, x.cols, block, stream);
}
void launch_fake_quant_fp4(MatDesc x, int64_t block, cudaStream_t stream) {
  launch_fq<Fq::kFp4>(x, x, x.cols, block, stream);
}
void launch_fake_quant_nvfp4(MatDesc x, int64_t block, cudaStream_t stream) {
  launch_fq<Fq::kNvfp4>(x, x, x.cols, block, stream);
}
void launch_hadamard(MatDesc x, int64_t n, float scale, cudaStream_t stream) {
  const int64_t chunks = x.cols / n;
  if (x.rows == 0 || chunks == 0) return;
  launch_kernel(hadamard_kernel, static_cast<unsigned>(x.rows * chunks), static_cast<unsigned>(n),
                static_cast<size_t>(n) * sizeof(float), stream, x, chunks, scale);
}
void launch_rms_norm_bf16(MatDesc x, int64_t group, float eps, cudaStream_t stream) {
  const int64_t groups = x.cols / group, threads = x.rows * groups * 32;
  if (threads == 0) return;
  launch_kernel(rms_norm_bf16_kernel, grid_for(threads, 256), 256, 0, stream, x, group, groups,
                eps);
}
void launch_hadamard128(MatDesc x, cudaStream_t stream) {
  const int64_t chunks = x.cols / 128;
  if (x.rows == 0 || chunks == 0) return;
  launch_kernel(hadamard128_kernel, static_cast<unsigned>(x.rows * chunks), 128, 0, stream, x,
                chunks);
}

}  // namespace deepinfer::kernels::cuda
