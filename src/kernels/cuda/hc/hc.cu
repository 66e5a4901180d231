// Manifold hyper-connections (mHC, spec §2.2): pre-mix with Sinkhorn, post-mix, head collapse.
//
// hc_pre / hc_head: one block per token. The (2+n)n (or n) logits are block-reduced dot products
// of the token's n·D stream values with fn rows (read through L1/L2), the tiny n x n Sinkhorn runs
// on one thread in shared memory exactly in the reference's order, then the block writes
// y = Σ pre_i X_i. hc_post: one thread per (token, channel) holding the n stream values in
// registers, so out may alias streams.
#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxLogits = (2 + kMaxHcStreams) * kMaxHcStreams;

__device__ float sigmoid_d(float v) { return 1.0f / (1.0f + expf(-v)); }

// mu[r] = (fn[r] · x) · rho for r < rows, into shared memory.
__device__ void hc_logits(const float* x, int64_t len, const HcDesc& p, int rows, float* mu,
                          float* red) {
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < len; c += blockDim.x) ss = fmaf(x[c], x[c], ss);
  ss = block_sum(ss, red);
  const float rho = 1.0f / sqrtf(ss / static_cast<float>(len) + p.norm_eps);
  for (int r = 0; r < rows; ++r) {
    const float* f = p.fn.data + r * p.fn.ld;
    float d = 0.0f;
    for (int64_t c = threadIdx.x; c < len; c += blockDim.x) d = fmaf(f[c], x[c], d);
    d = block_sum(d, red);
    if (threadIdx.x == 0) mu[r] = d * rho;
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads)
    hc_pre_kernel(MatDesc streams, HcDesc p, MatDesc y, MatDesc post, MatDesc comb) {
  __shared__ float red[32];
  __shared__ float mu[kMaxLogits];
  __shared__ float pre[kMaxHcStreams];
  const int n = p.n;
  const int64_t D = streams.cols / n, m = blockIdx.x;
  const float* x = streams.data + m * streams.ld;
  hc_logits(x, n * D, p, (2 + n) * n, mu, red);
  if (threadIdx.x == 0) {
    const float eps = p.hc_eps;
    for (int i = 0; i < n; ++i) {
      pre[i] = sigmoid_d(mu[i] * p.scale[0] + p.base[i]) + eps;
      post.data[m * post.ld + i] = 2.0f * sigmoid_d(mu[n + i] * p.scale[1] + p.base[n + i]);
    }
    float C[kMaxHcStreams * kMaxHcStreams];
    for (int i = 0; i < n * n; ++i) C[i] = mu[2 * n + i] * p.scale[2] + p.base[2 * n + i];
    for (int i = 0; i < n; ++i) {  // softmax over j, then + eps
      float mx = C[i * n];
      for (int j = 1; j < n; ++j) mx = fmaxf(mx, C[i * n + j]);
      float s = 0.0f;
      for (int j = 0; j < n; ++j) s += (C[i * n + j] = expf(C[i * n + j] - mx));
      for (int j = 0; j < n; ++j) C[i * n + j] = C[i * n + j] / s + eps;
    }
    // The reference normalises columns once even for iters <= 1.
    const int iters = p.sinkhorn_iters > 1 ? p.sinkhorn_iters : 1;
    for (int it = 0; it < iters; ++it) {
      if (it > 0) {
        for (int i = 0; i < n; ++i) {
          float s = 0.0f;
          for (int j = 0; j < n; ++j) s += C[i * n + j];
          for (int j = 0; j < n; ++j) C[i * n + j] /= s + eps;
        }
      }
      for (int j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int i = 0; i < n; ++i) s += C[i * n + j];
        for (int i = 0; i < n; ++i) C[i * n + j] /= s + eps;
      }
    }
    for (int i = 0; i < n * n; ++i) comb.data[m * comb.ld + i] = C[i];
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) acc = fmaf(pre[i], x[i * D + c], acc);
    y.data[m * y.ld + c] = acc;
  }
}

__global__ void __launch_bounds__(kThreads) hc_head_kernel(MatDesc streams, HcDesc p, MatDesc y) {
  __shared__ float red[32];
  __shared__ float mu[kMaxHcStreams];
  const int n = p.n;
  const int64_t D = streams.cols / n, m = blockIdx.x;
  const float* x = streams.data + m * streams.ld;
  hc_logits(x, n * D, p, n, mu, red);
  float pre[kMaxHcStreams];
#pragma unroll
  for (int i = 0; i < kMaxHcStreams; ++i)
    pre[i] = i < n ? sigmoid_d(mu[i] * p.scale[0] + p.base[i]) + p.hc_eps : 0.0f;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxHcStreams; ++i)
      if (i < n) acc = fmaf(pre[i], x[i * D + c], acc);
    y.data[m * y.ld + c] = acc;
  }
}

__global__ void hc_post_kernel(MatDesc streams, MatDesc o, MatDesc post, MatDesc comb, int n,
                               MatDesc out) {
  const int64_t D = o.cols;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= streams.rows * D) return;
  const int64_t m = i / D, c = i % D;
  float xs[kMaxHcStreams];
#pragma unroll
  for (int j = 0; j < kMaxHcStreams; ++j)
    xs[j] = j < n ? streams.data[m * streams.ld + j * D + c] : 0.0f;
  const float ov = o.data[m * o.ld + c];
  const float* cm = comb.data + m * comb.ld;
  for (int k = 0; k < n; ++k) {
    float acc = post.data[m * post.ld + k] * ov;
#pragma unroll
    for (int j = 0; j < kMaxHcStreams; ++j)
      if (j < n) acc = fmaf(cm[j * n + k], xs[j], acc);
    out.data[m * out.ld + k * D + c] = acc;
  }
}

}  // namespace

void launch_hc_pre(MatDesc streams, const HcDesc& p, MatDesc y, MatDesc post, MatDesc comb,
                   cudaStream_t stream) {
  if (streams.rows == 0) return;
  hc_pre_kernel<<<static_cast<unsigned>(streams.rows), kThreads, 0, stream>>>(streams, p, y, post,
                                                                              comb);
}
void launch_hc_post(MatDesc streams, MatDesc o, MatDesc post, MatDesc comb, int n, MatDesc out,
                    cudaStream_t stream) {
  const int64_t work = streams.rows * o.cols;
  if (work == 0) return;
  hc_post_kernel<<<grid_for(work, 256), 256, 0, stream>>>(streams, o, post, comb, n, out);
}
void launch_hc_head(MatDesc streams, const HcDesc& p, MatDesc y, cudaStream_t stream) {
  if (streams.rows == 0) return;
  hc_head_kernel<<<static_cast<unsigned>(streams.rows), kThreads, 0, stream>>>(streams, p, y);
}

}  // namespace deepinfer::kernels::cuda
