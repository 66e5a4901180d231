// Sparse gathered MQA with shared K = V and an attention sink (spec §2.3 "Attention kernel"),
// head dim up to 512.
//
// Main kernel: one block per (query token, group of kGroup = 16 heads). MQA shares the gathered
// key rows among all heads, so the block reads each key row twice for 16 heads (scores, then
// P·V) instead of twice per head. Warp 0 compacts the index list (-1 = absent) with ballots;
// phase 1: a warp per key holds the key's channels in registers and dots it with the 16 queries
// (in shared memory), one warp reduction per head; each head's max and FP32 denominator (sink
// included) follow; phase 2: a thread per channel walks the keys in order, reading each key
// element once for the 16 heads (probabilities are shared-memory broadcasts). Scores of the
// group live in shared memory (16·L floats), so long index lists (L·16·4 bytes past the limit)
// fall back to the simple kernel: one block per (token, head), same maths.
#include "kernels/cuda/attention/sparse_common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxHeadDim = kSparseMaxHeadDim;

__global__ void __launch_bounds__(kThreads)
    sparse_attention_kernel(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                            const float* sink, float scale, bool bf16_probs, MatDesc o,
                            bool round_out) {
  grid_dependency_sync();
  extern __shared__ float smem[];
  const float** rows = reinterpret_cast<const float**>(smem);  // [L] (8-byte aligned first)
  float* z = reinterpret_cast<float*>(rows + L);               // [L]
  __shared__ float qs[kMaxHeadDim];
  __shared__ float red[32];
  __shared__ int count;
  const int64_t t = blockIdx.x, h = blockIdx.y, d = keys.d;
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) qs[c] = q.data[t * q.ld + h * d + c];
  sparse_compact_rows(keys, t, L, rows, &count);
  __syncthreads();
  const int n = count;
  float* oh = o.data + t * o.ld + h * d;
  if (n == 0) {
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) oh[c] = 0.0f;
    return;
  }
  for (int j = wid; j < n; j += nw) {
    const float* k = rows[j];
    float s = 0.0f;
    for (int64_t c = lane; c < d; c += 32) s = fmaf(qs[c], k[c], s);
    s = warp_sum(s);
    if (lane == 0) z[j] = s * scale;
  }
  __syncthreads();
  float mx = -__int_as_float(0x7f800000);
  for (int j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, z[j]);
  mx = block_max(mx, red);
  float den = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = expf(z[j] - mx);
    den += e;
    z[j] = bf16_probs ? bf16_round_d(e) : e;
  }
  den = block_sum(den, red);  // ends with a barrier after the z writes of every thread
  if (sink) den += expf(sink[h] - mx);
  __syncthreads();
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) acc = fmaf(z[j], rows[j][c], acc);
    oh[c] = round_out ? bf16_round_d(acc / den) : acc / den;
  }
}

constexpr int kGroup = kSparseGroup;
constexpr int kGroupThreads = 512;
constexpr size_t kGroupSmemLimit = 160 * 1024;

size_t group_smem_bytes(int64_t L, int64_t d) {
  return static_cast<size_t>(L) * sizeof(const float*) +
         static_cast<size_t>(kGroup) * static_cast<size_t>(L + d + 2) * sizeof(float);
}

__global__ void __launch_bounds__(kGroupThreads)
    sparse_attention_group_kernel(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                  const float* sink, float scale, bool bf16_probs, MatDesc o,
                                  bool round_out) {
  grid_dependency_sync();
  extern __shared__ float smem[];
  const int64_t t = blockIdx.x, h0 = static_cast<int64_t>(blockIdx.y) * kGroup, d = keys.d;
  const int hn = static_cast<int>(n_heads - h0 < kGroup ? n_heads - h0 : kGroup);
  const float** rows = reinterpret_cast<const float**>(smem);  // [L]
  float* z = reinterpret_cast<float*>(rows + L);               // [kGroup][L]
  float* qs = z + kGroup * L;                        // [kGroup][d]
  float* mx = qs + kGroup * d;                       // [kGroup]
  float* den = mx + kGroup;                          // [kGroup]
  __shared__ int count;
  for (int64_t i = threadIdx.x; i < kGroup * d; i += blockDim.x) {
    const int64_t h = i / d, c = i % d;
    qs[i] = h < hn ? q.data[t * q.ld + (h0 + h) * d + c] : 0.0f;
  }
  sparse_compact_rows(keys, t, L, rows, &count);
  __syncthreads();
  const int n = count;
  if (n == 0) {
    for (int64_t i = threadIdx.x; i < hn * d; i += blockDim.x) {
      o.data[t * o.ld + h0 * d + i] = 0.0f;
    }
    return;
  }
  // Phase 1: scores z[h][j] = (q_h · k_j) · scale; then per head the max, probabilities
  // (BF16-rounded when asked) and FP32 denominator with the sink.
  sparse_group_scores(qs, hn, d, rows, 0, n, scale, z, L);
  __syncthreads();
  sparse_group_softmax(z, L, n, hn, sink, h0, bf16_probs, mx, den);
  __syncthreads();
  // Phase 2: o_h[c] = Σ_j p_h[j] · k_j[c] / den_h, keys in index order.
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float acc[kGroup];
#pragma unroll
    for (int h = 0; h < kGroup; ++h) acc[h] = 0.0f;
    sparse_group_pv(z, L, hn, rows, 0, n, c, acc);
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      if (h < hn) {
        const float v = acc[h] / den[h];
        o.data[t * o.ld + (h0 + h) * d + c] = round_out ? bf16_round_d(v) : v;
      }
    }
  }
}

}  // namespace

void launch_sparse_attention(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                             const float* sink, float scale, bool bf16_probs, MatDesc o,
                             bool round_out, cudaStream_t stream) {
  if (q.rows == 0 || n_heads == 0) return;
  allow_dynamic_smem(reinterpret_cast<const void*>(sparse_attention_kernel),
                     static_cast<int>(kMaxSparseKeys * (sizeof(float) + sizeof(float*))));
  allow_dynamic_smem(reinterpret_cast<const void*>(sparse_attention_group_kernel),
                     static_cast<int>(kGroupSmemLimit));
  const int64_t L1 = L > 0 ? L : 1;
  const size_t gsmem = group_smem_bytes(L1, keys.d);
  if (gsmem <= kGroupSmemLimit) {
    const dim3 grid(static_cast<unsigned>(q.rows),
                    static_cast<unsigned>((n_heads + kGroup - 1) / kGroup));
    launch_kernel(sparse_attention_group_kernel, grid, kGroupThreads, gsmem, stream, q, n_heads,
                  keys, L, sink, scale, bf16_probs, o, round_out);
    return;
  }
  const size_t smem = static_cast<size_t>(L1) * (sizeof(float) + sizeof(const float*));
  const dim3 grid(static_cast<unsigned>(q.rows), static_cast<unsigned>(n_heads));
  launch_kernel(sparse_attention_kernel, grid, kThreads, smem, stream, q, n_heads, keys, L, sink,
                scale, bf16_probs, o, round_out);
}

}  // namespace deepinfer::kernels::cuda
