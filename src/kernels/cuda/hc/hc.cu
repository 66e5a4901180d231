// Manifold hyper-connections (mHC, spec §2.2): pre-mix with Sinkhorn, post-mix, head collapse.
//
// hc_pre / hc_head: the (2+n)n (or n) logits are dot products of the token's n·D stream values
// with fn rows, and Σ x² their norm. hc_dots_kernel makes them as partial sums over chunks of
// kDotChunk values (scratch [token, dot, chunk]); the consumer (one block per token) adds each
// dot's partials in a fixed order (hc_gather_dots). For hc_pre the backend may make them with a
// cuBLAS FP32 GEMM and launch_row_sumsq instead (dots_ready: one partial per dot). Then the tiny
// n x n Sinkhorn on one thread exactly in the reference's order (in a warp for n = 4), and
// y = Σ pre_i X_i. hc_post: one thread per (token, channel) holding the n stream values in
// registers, so out may alias streams.
#include <algorithm>

#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxLogits = (2 + kMaxHcStreams) * kMaxHcStreams;

__device__ float sigmoid_d(float v) { return 1.0f / (1.0f + expf(-v)); }

// f · x over len values by the whole block: four independent accumulators per thread, then a
// fixed-order block sum (the same bits for the same inputs, whatever the grid).
__device__ __forceinline__ float block_dot(const float* f, const float* x, int64_t len,
                                           float* red) {
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  int64_t c = threadIdx.x;
  for (; c + 3 * kThreads < len; c += 4 * kThreads) {
    a0 = fmaf(f[c], x[c], a0);
    a1 = fmaf(f[c + kThreads], x[c + kThreads], a1);
    a2 = fmaf(f[c + 2 * kThreads], x[c + 2 * kThreads], a2);
    a3 = fmaf(f[c + 3 * kThreads], x[c + 3 * kThreads], a3);
  }
  for (; c < len; c += kThreads) a0 = fmaf(f[c], x[c], a0);
  return block_sum((a0 + a1) + (a2 + a3), red);
}

// The logits' dot products as partial sums: partials[(m·R + r)·S + s] = Σ fn[r, c] · x_m[c]
// over chunk s (c in [s·kDotChunk, (s+1)·kDotChunk)), r < rows, and Σ x_m[c]² for r = rows
// (R = rows + 1, S = hc_dot_chunks(K)). Block (s, t) takes chunk s of tokens
// [t·tokens_per_block, ...); warp w the dots w, w + 8, ... in groups of kDotGroup, whose fn
// values it holds in registers while it walks the tokens. Lane l adds values l, l + 32, ... of
// the chunk in order, then a butterfly: each partial's order is fixed by K alone, so the bits
// do not depend on the token count or the tiling (batch-invariant). The form before stop 43, a
// block per (token, dot) over all n·D values, ran 25 blocks at one token, each reading 128 KB of
// fn and x in 16 dependent rounds; here V4-Flash's K takes 64 blocks of 26 KB, one round each,
// and at 64 tokens fn is read once per 8 tokens, not once per token.
constexpr int kDotChunk = 256, kDotLanes = kDotChunk / 32, kDotWarps = 8, kDotGroup = 4;

__global__ void __launch_bounds__(kDotWarps * 32)
    hc_dots_kernel(MatDesc streams, MatDesc fn, int rows, int64_t tokens_per_block,
                   float* partials) {
  grid_dependency_sync();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, R = rows + 1;
  const int64_t K = streams.cols, S = gridDim.x, s = blockIdx.x;
  const int64_t c0 = s * kDotChunk + lane;
  const int64_t m0 = blockIdx.y * tokens_per_block;
  const int64_t m1 = m0 + tokens_per_block < streams.rows ? m0 + tokens_per_block : streams.rows;
  for (int g = warp; g < R; g += kDotWarps * kDotGroup) {
    float f[kDotGroup][kDotLanes];
#pragma unroll
    for (int j = 0; j < kDotGroup; ++j) {
      const int r = g + j * kDotWarps;
#pragma unroll
      for (int i = 0; i < kDotLanes; ++i) {
        const int64_t c = c0 + 32 * i;
        f[j][i] = r < rows && c < K ? fn.data[r * fn.ld + c] : 0.0f;
      }
    }
    // The next token's x is loaded before this token's sums and stores, so its reads are in
    // flight while they run.
    float xv[kDotLanes], xn[kDotLanes];
    auto load_x = [&](int64_t m, float* v) {
      const float* x = streams.data + m * streams.ld;
#pragma unroll
      for (int i = 0; i < kDotLanes; ++i) v[i] = c0 + 32 * i < K ? x[c0 + 32 * i] : 0.0f;
    };
    if (m0 < m1) load_x(m0, xv);
    for (int64_t m = m0; m < m1; ++m) {
      if (m + 1 < m1) load_x(m + 1, xn);
#pragma unroll
      for (int j = 0; j < kDotGroup; ++j) {
        const int r = g + j * kDotWarps;
        if (r >= R) break;
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < kDotLanes; ++i) acc = fmaf(r < rows ? f[j][i] : xv[i], xv[i], acc);
        acc = warp_sum(acc);  // the same in every lane
        if (lane == 0) partials[(m * R + r) * S + s] = acc;
      }
#pragma unroll
      for (int i = 0; i < kDotLanes; ++i) xv[i] = xn[i];
    }
  }
}

// Token m's R dot products into out (shared memory), each the sum of its S partial sums
// (hc_dots_kernel's layout; S = 1 where cuBLAS made the dots). A group of L lanes per dot (L
// the power of two from ceil(S / 4), at most 32: V4-Flash's S = 64 takes 16) adds partials
// l, l + L, ... in order, then a butterfly inside the group: the order is fixed by S alone.
// Every dot of the block's round is in flight at once (32 / L per warp), not one per warp in
// turn: with 4 warps and 25 dots that was 7 dependent reads of L2 (measured on models/v4-small,
// stop 43: its decode step 4 % slower than before the partial sums). With S = 1 the value is
// the partial itself (its sum with zeros).
__device__ void hc_gather_dots(const float* partials, int64_t S, int64_t m, int R, float* out) {
  int L = 1;
  while (L < 32 && L * 4 < S) L *= 2;
  const int lane = threadIdx.x & 31, sub = lane & (L - 1);
  const int per_round = static_cast<int>(blockDim.x) / L;  // blockDim is a multiple of 32
  for (int base = 0; base < R; base += per_round) {        // uniform across the block
    const int r = base + static_cast<int>(threadIdx.x) / L;
    float acc = 0.0f;
    if (r < R) {
      const float* p = partials + (m * R + r) * S;
      for (int64_t s = sub; s < S; s += L) acc += p[s];
    }
    for (int o = L / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (r < R && sub == 0) out[r] = acc;
  }
  __syncthreads();
}

// out[m * out_ld] = Σ x_m², one block per row (the dots' last column when cuBLAS made the others;
// in a different order from hc_dots_kernel's, as the GEMM's dots are).
__global__ void __launch_bounds__(kThreads)
    row_sumsq_kernel(MatDesc x, float* out, int64_t out_ld) {
  grid_dependency_sync();
  __shared__ float red[32];
  const float* r = x.data + static_cast<int64_t>(blockIdx.x) * x.ld;
  const float d = block_dot(r, r, x.cols, red);
  if (threadIdx.x == 0) out[blockIdx.x * out_ld] = d;
}

// mu[r] = dots[r] · rho, rho = 1 / sqrt(mean(x²) + eps), in shared memory (rows + 1 floats: the
// last holds Σ x²), token m's dots gathered from their S partial sums first.
__device__ void hc_logits(const float* partials, int64_t S, int64_t m, int64_t len, const HcDesc& p,
                          int rows, float* mu) {
  hc_gather_dots(partials, S, m, rows + 1, mu);
  const float rho = 1.0f / sqrtf(mu[rows] / static_cast<float>(len) + p.norm_eps);
  for (int r = threadIdx.x; r < rows; r += blockDim.x) mu[r] *= rho;
  __syncthreads();
}

// pre, post and the Sinkhorn-normalised comb of one token, on one thread, in the reference's
// order, for any n <= kMaxHcStreams (n = 4, V4's, takes hc_mix4_warp below: same bits).
__device__ void hc_mix(int n, const float* mu, const HcDesc& p, float* pre, float* post,
                       float* comb) {
  const float eps = p.hc_eps;
#pragma unroll
  for (int i = 0; i < kMaxHcStreams; ++i) {
    if (i >= n) break;
    pre[i] = sigmoid_d(mu[i] * p.scale[0] + p.base[i]) + eps;
    post[i] = 2.0f * sigmoid_d(mu[n + i] * p.scale[1] + p.base[n + i]);
  }
  constexpr int kC = kMaxHcStreams * kMaxHcStreams;
  float C[kC];
#pragma unroll
  for (int i = 0; i < kC; ++i) {
    if (i >= n * n) break;
    C[i] = mu[2 * n + i] * p.scale[2] + p.base[2 * n + i];
  }
#pragma unroll
  for (int i = 0; i < kMaxHcStreams; ++i) {  // softmax over j, then + eps
    if (i >= n) break;
    float mx = C[i * n];
#pragma unroll
    for (int j = 1; j < kMaxHcStreams; ++j)
      if (j < n) mx = fmaxf(mx, C[i * n + j]);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxHcStreams; ++j)
      if (j < n) s += (C[i * n + j] = expf(C[i * n + j] - mx));
#pragma unroll
    for (int j = 0; j < kMaxHcStreams; ++j)
      if (j < n) C[i * n + j] = C[i * n + j] / s + eps;
  }
  // The reference normalises columns once even for iters <= 1.
  const int iters = p.sinkhorn_iters > 1 ? p.sinkhorn_iters : 1;
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {
#pragma unroll
      for (int i = 0; i < kMaxHcStreams; ++i) {
        if (i >= n) break;
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < kMaxHcStreams; ++j)
          if (j < n) s += C[i * n + j];
#pragma unroll
        for (int j = 0; j < kMaxHcStreams; ++j)
          if (j < n) C[i * n + j] /= s + eps;
      }
    }
#pragma unroll
    for (int j = 0; j < kMaxHcStreams; ++j) {
      if (j >= n) break;
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxHcStreams; ++i)
        if (i < n) s += C[i * n + j];
#pragma unroll
      for (int i = 0; i < kMaxHcStreams; ++i)
        if (i < n) C[i * n + j] /= s + eps;
    }
  }
#pragma unroll
  for (int i = 0; i < kC; ++i) {
    if (i >= n * n) break;
    comb[i] = C[i];
  }
}

// hc_mix for n = 4 on warp 0: lane i·4 + j holds C_ij (lanes 16..31 mirror 0..15), every sum
// is gathered by shuffles and added in hc_mix's order, so the bits are hc_mix's by construction
// (decode_bench --profile, batch 1, hc_pre's 8 calls: 0.65 ms with the one-thread version,
// bench/results/model_cuda_h200_2026-12-01_stop10.log; 0.26 ms, ..._stop11.log).
__device__ void hc_mix4_warp(const float* mu, const HcDesc& p, float* pre, float* post,
                             float* comb) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x & 31, j = lane & 3, e = lane & 15;
  const float eps = p.hc_eps;
  if (lane < 4) {
    pre[lane] = sigmoid_d(mu[lane] * p.scale[0] + p.base[lane]) + eps;
    post[lane] = 2.0f * sigmoid_d(mu[4 + lane] * p.scale[1] + p.base[4 + lane]);
  }
  // C_ik (same row i) and C_kj (same column j) of this lane's element.
  auto row = [&](float v, int k) { return __shfl_sync(kAll, v, (lane & ~3) + k); };
  auto col = [&](float v, int k) { return __shfl_sync(kAll, v, (lane & 16) + k * 4 + j); };
  float c = mu[8 + e] * p.scale[2] + p.base[8 + e];
  float mx = row(c, 0);
  for (int k = 1; k < 4; ++k) mx = fmaxf(mx, row(c, k));
  c = expf(c - mx);
  float s = 0.0f;
  for (int k = 0; k < 4; ++k) s += row(c, k);
  c = c / s + eps;
  const int iters = p.sinkhorn_iters > 1 ? p.sinkhorn_iters : 1;
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {
      s = 0.0f;
      for (int k = 0; k < 4; ++k) s += row(c, k);
      c /= s + eps;
    }
    s = 0.0f;
    for (int k = 0; k < 4; ++k) s += col(c, k);
    c /= s + eps;
  }
  if (lane < 16) comb[e] = c;
}

// The pre-mix of token blockIdx.x with any block size (hc_pre_kernel's body): mu and pre are
// shared arrays of kMaxLogits + 1 and kMaxHcStreams floats; dots has `splits` partial sums per dot.
// Channel c of y is thread c mod blockDim's.
__device__ __forceinline__ void hc_pre_row(const MatDesc& streams, const HcDesc& p,
                                           const float* dots, const MatDesc& collapse,
                                           const MatDesc& y, const MatDesc& pre_out,
                                           const MatDesc& post, const MatDesc& comb, bool round_y,
                                           int64_t splits, float* mu, float* pre) {
  const int n = p.n;
  const int64_t D = streams.cols / n, m = blockIdx.x;
  const float* x = streams.data + m * streams.ld;
  hc_logits(dots, splits, m, n * D, p, (2 + n) * n, mu);
  float* pm = post.data + m * post.ld;
  float* cm = comb.data + m * comb.ld;
  if (n == 4) {
    if (threadIdx.x < 32) hc_mix4_warp(mu, p, pre, pm, cm);
  } else if (threadIdx.x == 0) {
    hc_mix(n, mu, p, pre, pm, cm);
  }
  __syncthreads();
  if (pre_out.data != nullptr && threadIdx.x < n) {
    pre_out.data[m * pre_out.ld + threadIdx.x] = pre[threadIdx.x];
  }
  // V4.1 single pass: the streams collapse with the previous site's pre.
  const float* c_row = collapse.data != nullptr ? collapse.data + m * collapse.ld : pre;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) acc = fmaf(c_row[i], x[i * D + c], acc);
    y.data[m * y.ld + c] = round_y ? bf16_round_d(acc) : acc;
  }
}

__global__ void __launch_bounds__(kThreads)
    hc_pre_kernel(MatDesc streams, HcDesc p, const float* dots, int64_t splits, MatDesc collapse,
                  MatDesc y, MatDesc pre_out, MatDesc post, MatDesc comb, bool round_y) {
  grid_dependency_sync();
  __shared__ float mu[kMaxLogits + 1];
  __shared__ float pre[kMaxHcStreams];
  hc_pre_row(streams, p, dots, collapse, y, pre_out, post, comb, round_y, splits, mu, pre);
}

// hc_pre, then rms_norm of y into u (Ops::hc_pre_norm) in one launch, with rms_norm_kernel's
// threads (T = rms_norm_threads(D)) and helpers (common.cuh), so u has its bits; y is written as
// by hc_pre_kernel, and each thread's norm channels are the y channels it wrote itself.
template <int T>
__global__ void __launch_bounds__(T)
    hc_pre_norm_kernel(MatDesc streams, HcDesc p, const float* dots, int64_t splits,
                       MatDesc collapse, MatDesc y, MatDesc pre_out, MatDesc post, MatDesc comb,
                       bool rounded, WeightDesc w, float eps, MatDesc u) {
  grid_dependency_sync();
  __shared__ float mu[kMaxLogits + 1];
  __shared__ float pre[kMaxHcStreams];
  __shared__ float red[32];
  hc_pre_row(streams, p, dots, collapse, y, pre_out, post, comb, rounded, splits, mu, pre);
  const int64_t D = y.cols, m = blockIdx.x;
  const float* yr = y.data + m * y.ld;
  rms_norm_apply(yr, u.data + m * u.ld, D, block_sum(rms_sumsq_thread(yr, D), red), eps, w, true,
                 rounded);
}

__global__ void hc_collapse_kernel(MatDesc streams, MatDesc pre, int n, MatDesc y) {
  grid_dependency_sync();
  const int64_t D = y.cols;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= streams.rows * D) return;
  const int64_t m = i / D, c = i % D;
  const float* x = streams.data + m * streams.ld;
  const float* w = pre.data + m * pre.ld;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc = fmaf(w[k], x[k * D + c], acc);
  y.data[m * y.ld + c] = acc;
}

__global__ void __launch_bounds__(kThreads)
    hc_head_kernel(MatDesc streams, HcDesc p, const float* dots, int64_t splits, MatDesc y,
                   bool round_y) {
  grid_dependency_sync();
  __shared__ float mu[kMaxHcStreams + 1];
  const int n = p.n;
  const int64_t D = streams.cols / n, m = blockIdx.x;
  const float* x = streams.data + m * streams.ld;
  hc_logits(dots, splits, m, n * D, p, n, mu);
  float pre[kMaxHcStreams];
#pragma unroll
  for (int i = 0; i < kMaxHcStreams; ++i)
    pre[i] = i < n ? sigmoid_d(mu[i] * p.scale[0] + p.base[i]) + p.hc_eps : 0.0f;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxHcStreams; ++i)
      if (i < n) acc = fmaf(pre[i], x[i * D + c], acc);
    y.data[m * y.ld + c] = round_y ? bf16_round_d(acc) : acc;
  }
}

__global__ void hc_post_kernel(MatDesc streams, MatDesc o, MatDesc post, MatDesc comb, int n,
                               MatDesc out, bool round_out) {
  grid_dependency_sync();
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
    out.data[m * out.ld + k * D + c] = round_out ? bf16_round_d(acc) : acc;
  }
}

// The R = rows + 1 dot products of every token as partial sums into scratch (hc_dots_kernel);
// returns the partials per dot. Tokens per block (dot_tokens, else this rule): as many as keep
// ~1024 blocks, 1 to 32: each block reads its 26 KB chunk of fn once for all its tokens, and
// its warps walk them one after another. A fixed 8 per block (below 256 tokens) left
// models/v4-small's K (2 chunks) 16 blocks at 64 tokens, its decode step 6-9 % slower than with
// the earlier block per (token, dot) on an H100; this rule took it 5 % below at 64 (1-2 %
// above at one token). At V4-Flash's K (64 chunks) the op harness's perf mode read hc_pre at
// 16 / 64 tokens in 18.2 / 25.8 µs with 8 per block and 20.3 / 30.4 µs with this rule's 1 / 4
// (two calls on H100s, not one run; the decode steps did not move past the spread): the next
// A/B to make (--perf, --hc-dot-tokens). Either way the same bits.
int64_t launch_hc_dots(MatDesc streams, MatDesc fn, int rows, int dot_tokens, float* scratch,
                       cudaStream_t stream) {
  const int64_t S = hc_dot_chunks(streams.cols);
  const int64_t per =
      dot_tokens > 0
          ? dot_tokens
          : std::min<int64_t>(32, std::max<int64_t>(1, (streams.rows * S + 1023) / 1024));
  const auto tiles = static_cast<unsigned>((streams.rows + per - 1) / per);
  launch_kernel(hc_dots_kernel, dim3(static_cast<unsigned>(S), tiles), kDotWarps * 32, 0, stream,
                streams, fn, rows, per, scratch);
  return S;
}

// hc_pre's logits' dot products into scratch, unless the backend made them (dots_ready: one
// partial per dot); returns the partials per dot.
int64_t launch_hc_pre_dots(MatDesc streams, const HcDesc& p, float* scratch, bool dots_ready,
                           cudaStream_t stream) {
  if (dots_ready) return 1;
  return launch_hc_dots(streams, p.fn, (2 + p.n) * p.n, p.dot_tokens, scratch, stream);
}

}  // namespace

void launch_hc_pre(MatDesc streams, const HcDesc& p, MatDesc collapse, MatDesc y, MatDesc pre_out,
                   MatDesc post, MatDesc comb, float* scratch, bool dots_ready, bool round_y,
                   cudaStream_t stream) {
  if (streams.rows == 0) return;
  const int64_t S = launch_hc_pre_dots(streams, p, scratch, dots_ready, stream);
  launch_kernel(hc_pre_kernel, static_cast<unsigned>(streams.rows), kThreads, 0, stream, streams, p,
                scratch, S, collapse, y, pre_out, post, comb, round_y);
}
void launch_hc_pre_norm(MatDesc streams, const HcDesc& p, MatDesc collapse, MatDesc y,
                        MatDesc pre_out, MatDesc post, MatDesc comb, float* scratch,
                        bool dots_ready, bool rounded, const WeightDesc& w, float eps, MatDesc u,
                        cudaStream_t stream) {
  if (streams.rows == 0) return;
  const int64_t S = launch_hc_pre_dots(streams, p, scratch, dots_ready, stream);
  const int threads = rms_norm_threads(y.cols);  // the norm's reduction tree
  const auto grid = static_cast<unsigned>(streams.rows);
  if (threads == 512) {
    launch_kernel(hc_pre_norm_kernel<512>, grid, 512, 0, stream, streams, p, scratch, S, collapse,
                  y, pre_out, post, comb, rounded, w, eps, u);
  } else if (threads == 256) {
    launch_kernel(hc_pre_norm_kernel<256>, grid, 256, 0, stream, streams, p, scratch, S, collapse,
                  y, pre_out, post, comb, rounded, w, eps, u);
  } else {
    launch_kernel(hc_pre_norm_kernel<128>, grid, 128, 0, stream, streams, p, scratch, S, collapse,
                  y, pre_out, post, comb, rounded, w, eps, u);
  }
}
int64_t hc_dot_chunks(int64_t k) { return (k + kDotChunk - 1) / kDotChunk; }
void launch_row_sumsq(MatDesc x, float* out, int64_t out_ld, cudaStream_t stream) {
  if (x.rows == 0) return;
  launch_kernel(row_sumsq_kernel, static_cast<unsigned>(x.rows), kThreads, 0, stream, x, out,
                out_ld);
}
void launch_hc_collapse(MatDesc streams, MatDesc pre, int n, MatDesc y, cudaStream_t stream) {
  const int64_t work = streams.rows * y.cols;
  if (work == 0) return;
  launch_kernel(hc_collapse_kernel, grid_for(work, 256), 256, 0, stream, streams, pre, n, y);
}
void launch_hc_post(MatDesc streams, MatDesc o, MatDesc post, MatDesc comb, int n, MatDesc out,
                    bool round_out, cudaStream_t stream) {
  const int64_t work = streams.rows * o.cols;
  if (work == 0) return;
  launch_kernel(hc_post_kernel, grid_for(work, 256), 256, 0, stream, streams, o, post, comb, n, out,
                round_out);
}
void launch_hc_head(MatDesc streams, const HcDesc& p, MatDesc y, float* scratch, bool round_y,
                    cudaStream_t stream) {
  if (streams.rows == 0) return;
  const int64_t S = launch_hc_dots(streams, p.fn, p.n, p.dot_tokens, scratch, stream);
  launch_kernel(hc_head_kernel, static_cast<unsigned>(streams.rows), kThreads, 0, stream, streams,
                p, scratch, S, y, round_y);
}

}  // namespace deepinfer::kernels::cuda
