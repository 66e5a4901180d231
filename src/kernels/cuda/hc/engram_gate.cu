// V4.1's Engram gate (spec §6.7 item 1; ops.h engram_gate), in place on the streams: one block
// per (token, stream) reduces the three sums (|X_k|², |key_k|², Σ X_k·w_k·key_k) in a fixed
// order (independent of the batch), thread 0 forms the gate as the host loop does, and the
// block adds g · value to the stream.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    engram_gate_kernel(MatDesc streams, MatDesc kv, MatDesc w, int n, float eps) {
  grid_dependency_sync();
  __shared__ float red[32];
  __shared__ float gate;
  const int64_t m = blockIdx.x, k = blockIdx.y, D = w.cols;
  float* h = streams.data + m * streams.ld + k * D;
  const float* key = kv.data + m * kv.ld + k * D;
  const float* value = kv.data + m * kv.ld + n * D;
  const float* wk = w.data + k * w.ld;
  float hh = 0.0f, kk = 0.0f, dot = 0.0f;
  for (int64_t d = threadIdx.x; d < D; d += kThreads) {
    hh = fmaf(h[d], h[d], hh);
    kk = fmaf(key[d], key[d], kk);
    dot = fmaf(h[d] * wk[d], key[d], dot);
  }
  hh = block_sum(hh, red);
  kk = block_sum(kk, red);
  dot = block_sum(dot, red);
  if (threadIdx.x == 0) {
    const float fd = static_cast<float>(D);
    const float inv_sqrt_d = static_cast<float>(1.0 / sqrt(static_cast<double>(D)));
    const float rstd = (1.0f / sqrtf(hh / fd + eps)) * (1.0f / sqrtf(kk / fd + eps));
    const float x = dot * rstd * inv_sqrt_d;
    const float mag = sqrtf(fmaxf(fabsf(x), 1e-6f));
    gate = 1.0f / (1.0f + expf(-copysignf(mag, x)));
  }
  __syncthreads();
  const float g = gate;
  for (int64_t d = threadIdx.x; d < D; d += kThreads) h[d] = fmaf(g, value[d], h[d]);
}

}  // namespace

void launch_engram_gate(MatDesc streams, MatDesc kv, MatDesc w, int n, float eps,
                        cudaStream_t stream) {
  if (streams.rows == 0) return;
  launch_kernel(engram_gate_kernel,
                dim3(static_cast<unsigned>(streams.rows), static_cast<unsigned>(n)), kThreads, 0,
                stream, streams, kv, w, n, eps);
}

}  // namespace deepinfer::kernels::cuda
