// Finishing chains of the attention rows in one launch each, with the separate kernels' bits.
//
// kv_rows_finish: a K=V row's chain (Ops::kv_rows_finish): RMS norm, RoPE on the last
// 2·n_freqs channels, then the FP8 round trip per quant block, where rowwise.cu, rope.cu and
// quant.cu took three. One block per row. Each stage calls the device helpers its own kernel
// calls (common.cuh: rms_sumsq_thread / rms_norm_apply with rms_norm_threads, rope_pair_d,
// act_quant_fp8_warp), so the bits are the same by construction. A stage reads what the block
// wrote before it only after a barrier.
#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

__global__ void kv_rows_finish_kernel(MatDesc x, WeightDesc w, float eps, const int32_t* positions,
                                      const float* freqs, int n_freqs, bool rounded,
                                      int64_t quant_cols, int64_t quant_block) {
  grid_dependency_sync();
  __shared__ float red[32];
  const int64_t g = x.cols;
  float* xr = x.data + static_cast<int64_t>(blockIdx.x) * x.ld;
  // rms_norm_kernel (one group: the whole row), in place.
  rms_norm_apply(xr, xr, g, block_sum(rms_sumsq_thread(xr, g), red), eps, w, true, rounded);
  __syncthreads();
  // rope_rounded_kernel (every pair, rotated where it is a RoPE pair, rounded) or rope_kernel
  // (the RoPE pairs only).
  const float pos = static_cast<float>(positions[blockIdx.x]);
  const int pairs = static_cast<int>(g / 2);
  const int tid = static_cast<int>(threadIdx.x), step = static_cast<int>(blockDim.x);
  for (int p = rounded ? tid : pairs - n_freqs + tid; p < pairs; p += step) {
    const int j = p - (pairs - n_freqs);
    float a = xr[2 * p], b = xr[2 * p + 1];
    if (j >= 0) rope_pair_d(a, b, pos, freqs[j], false);
    xr[2 * p] = rounded ? bf16_round_d(a) : a;
    xr[2 * p + 1] = rounded ? bf16_round_d(b) : b;
  }
  if (quant_cols <= 0) return;
  __syncthreads();
  // fake_quant_kernel<Fq::kFp8>, a warp per block of channels.
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const int64_t blocks = (quant_cols + quant_block - 1) / quant_block;
  for (int64_t b = warp; b < blocks; b += warps) {
    const int64_t b0 = b * quant_block;
    const int64_t len = quant_cols - b0 < quant_block ? quant_cols - b0 : quant_block;
    act_quant_fp8_warp(xr + b0, xr + b0, len, lane);
  }
}

// q_heads_finish (official): one warp per (row, head), rms_norm_bf16_kernel's warp for that
// group (rms_norm_bf16_warp), then rope_rounded_kernel's pairs of the head by the same warp
// after __syncwarp.
__global__ void q_heads_finish_kernel(MatDesc q, int n_heads, int head_dim, float eps,
                                      const int32_t* positions, const float* freqs, int n_freqs) {
  grid_dependency_sync();
  const int64_t t = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (t >= q.rows * n_heads) return;  // whole warps exit together
  const int64_t row = t / n_heads;
  float* p = q.data + row * q.ld + (t % n_heads) * head_dim;
  rms_norm_bf16_warp(p, head_dim, eps, lane);
  __syncwarp();
  const float pos = static_cast<float>(positions[row]);
  const int pairs = head_dim / 2;
  for (int i = lane; i < pairs; i += 32) {
    const int j = i - (pairs - n_freqs);
    float a = p[2 * i], b = p[2 * i + 1];
    if (j >= 0) rope_pair_d(a, b, pos, freqs[j], false);
    p[2 * i] = bf16_round_d(a);
    p[2 * i + 1] = bf16_round_d(b);
  }
}

}  // namespace

void launch_q_heads_finish(MatDesc q, int64_t n_heads, int64_t head_dim, float eps,
                           const int32_t* positions, const float* freqs, int64_t n_freqs,
                           cudaStream_t stream) {
  const int64_t threads = q.rows * n_heads * 32;
  if (threads == 0) return;
  launch_kernel(q_heads_finish_kernel, grid_for(threads, 256), 256, 0, stream, q,
                static_cast<int>(n_heads), static_cast<int>(head_dim), eps, positions, freqs,
                static_cast<int>(n_freqs));
}

bool kv_rows_finish_supported(MatDesc x, int64_t n_freqs, int64_t quant_cols) {
  return x.rows > 0 && x.rows <= 0x7fffffff && x.cols % 2 == 0 && 2 * n_freqs <= x.cols &&
         quant_cols <= x.cols;
}

void launch_kv_rows_finish(MatDesc x, const WeightDesc& w, float eps, const int32_t* positions,
                           const float* freqs, int64_t n_freqs, bool rounded, int64_t quant_cols,
                           int64_t quant_block, cudaStream_t stream) {
  launch_kernel(kv_rows_finish_kernel, static_cast<unsigned>(x.rows), rms_norm_threads(x.cols), 0,
                stream, x, w, eps, positions, freqs, static_cast<int>(n_freqs), rounded, quant_cols,
                quant_block);
}

}  // namespace deepinfer::kernels::cuda
