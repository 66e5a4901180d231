// Sparse attention with the keys split across blocks, for grids too small to fill the card
// (decode at small batch: one token's 64 heads are 4 head-group blocks, and a block's P·V walk
// over ~640 keys x 512 channels took ~60 us on one SM).
//
// Four launches over (token, head group[, split]):
//   scores   each split scores its chunk of the compacted keys into global z [rows, H, L];
//   softmax  per (token, group), exactly the single-pass kernel's max / probabilities /
//            denominator (sparse_common.cuh), over the whole row;
//   pv       each split sums p · v over its chunk, keys in index order, into partial sums;
//   combine  o = (Σ over splits, in split order) / den.
// Scores, maxima, probabilities and denominators are the single-pass kernel's bits; only the
// P·V sum is associated per chunk. The split count depends on the shape, so the backend takes
// this path only outside batch-invariant mode.
#include <algorithm>

#include "kernels/cuda/attention/sparse_common.cuh"
#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kMinKeysPerSplit = 32;
constexpr int kMaxSplits = 16;
constexpr int64_t kTargetBlocks = 264;  // two waves of an H100/H200's 132 SMs

struct SplitShape {
  int64_t groups = 0, splits = 0;
};

SplitShape split_shape(int64_t rows, int64_t n_heads, int64_t L) {
  SplitShape s;
  s.groups = (n_heads + kSparseGroup - 1) / kSparseGroup;
  const int64_t blocks = rows * s.groups;
  const int64_t by_keys = L / kMinKeysPerSplit;
  s.splits = std::min<int64_t>({kTargetBlocks / std::max<int64_t>(blocks, 1), by_keys, kMaxSplits});
  if (s.splits < 2) s.splits = 0;
  return s;
}

// This block's chunk [j0, j1) of the n compacted keys.
__device__ __forceinline__ void chunk_of(int n, int splits, int s, int* j0, int* j1) {
  const int per = (n + splits - 1) / splits;
  *j0 = min(n, s * per);
  *j1 = min(n, *j0 + per);
}

__global__ void __launch_bounds__(kThreads)
    split_scores_kernel(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L, float scale,
                        float* z, int* counts) {
  grid_dependency_sync();
  extern __shared__ float smem[];
  const float** rows = reinterpret_cast<const float**>(smem);  // [L]
  float* qs = reinterpret_cast<float*>(rows + L);              // [kSparseGroup][d]
  __shared__ int count;
  const int64_t t = blockIdx.x, h0 = static_cast<int64_t>(blockIdx.y) * kSparseGroup, d = keys.d;
  const int hn = static_cast<int>(n_heads - h0 < kSparseGroup ? n_heads - h0 : kSparseGroup);
  for (int64_t i = threadIdx.x; i < kSparseGroup * d; i += blockDim.x) {
    const int64_t h = i / d, c = i % d;
    qs[i] = h < hn ? q.data[t * q.ld + (h0 + h) * d + c] : 0.0f;
  }
  sparse_compact_rows(keys, t, L, rows, &count);
  __syncthreads();
  if (blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0) counts[t] = count;
  int j0, j1;
  chunk_of(count, static_cast<int>(gridDim.z), static_cast<int>(blockIdx.z), &j0, &j1);
  sparse_group_scores(qs, hn, d, rows, j0, j1, scale, z + (t * n_heads + h0) * L, L);
}

__global__ void __launch_bounds__(kThreads)
    split_softmax_kernel(int64_t n_heads, int64_t L, const float* sink, bool bf16_probs, float* z,
                         const int* counts, float* den) {
  grid_dependency_sync();
  __shared__ float mx[kSparseGroup], dn[kSparseGroup];
  const int64_t t = blockIdx.x, h0 = static_cast<int64_t>(blockIdx.y) * kSparseGroup;
  const int hn = static_cast<int>(n_heads - h0 < kSparseGroup ? n_heads - h0 : kSparseGroup);
  sparse_group_softmax(z + (t * n_heads + h0) * L, L, counts[t], hn, sink, h0, bf16_probs, mx, dn);
  __syncthreads();
  if (threadIdx.x < hn) den[t * n_heads + h0 + threadIdx.x] = dn[threadIdx.x];
}

// partial[(s · rows + t) · H · d + h · d + c] = Σ_{j in chunk s} p[t, h, j] · v_j[c].
__global__ void __launch_bounds__(kThreads)
    split_pv_kernel(int64_t n_heads, SparseKeys keys, int64_t L, int64_t rows_total,
                    const float* z, float* partial) {
  grid_dependency_sync();
  extern __shared__ float smem[];
  const float** rows = reinterpret_cast<const float**>(smem);  // [L]
  __shared__ int count;
  const int64_t t = blockIdx.x, h0 = static_cast<int64_t>(blockIdx.y) * kSparseGroup, d = keys.d;
  const int hn = static_cast<int>(n_heads - h0 < kSparseGroup ? n_heads - h0 : kSparseGroup);
  sparse_compact_rows(keys, t, L, rows, &count);
  __syncthreads();
  int j0, j1;
  chunk_of(count, static_cast<int>(gridDim.z), static_cast<int>(blockIdx.z), &j0, &j1);
  const float* zt = z + (t * n_heads + h0) * L;
  float* out = partial + (static_cast<int64_t>(blockIdx.z) * rows_total + t) * n_heads * d + h0 * d;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float acc[kSparseGroup];
#pragma unroll
    for (int h = 0; h < kSparseGroup; ++h) acc[h] = 0.0f;
    sparse_group_pv(zt, L, hn, rows, j0, j1, c, acc);
#pragma unroll
    for (int h = 0; h < kSparseGroup; ++h) {
      if (h < hn) out[h * d + c] = acc[h];
    }
  }
}

__global__ void split_combine_kernel(int64_t n_heads, int64_t d, int64_t rows_total, int splits,
                                     const float* partial, const float* den, const int* counts,
                                     MatDesc o, bool round_out) {
  grid_dependency_sync();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_row = n_heads * d;
  if (i >= rows_total * per_row) return;
  const int64_t t = i / per_row, hc = i % per_row, h = hc / d;
  float* dst = o.data + t * o.ld + hc;
  if (counts[t] == 0) {
    *dst = 0.0f;
    return;
  }
  float acc = 0.0f;
  for (int s = 0; s < splits; ++s) acc += partial[(s * rows_total + t) * per_row + hc];
  const float v = acc / den[t * n_heads + h];
  *dst = round_out ? bf16_round_d(v) : v;
}

}  // namespace

int64_t sparse_attention_split_scratch(int64_t rows, int64_t n_heads, int64_t L, int64_t d) {
  const SplitShape s = split_shape(rows, n_heads, L);
  if (s.splits == 0 || d > kSparseMaxHeadDim) return 0;
  // z [rows, H, L], den [rows, H], counts [rows] (as floats), partial [splits, rows, H, d].
  return rows * n_heads * L + rows * n_heads + rows + s.splits * rows * n_heads * d;
}

bool launch_sparse_attention_split(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                   const float* sink, float scale, bool bf16_probs, MatDesc o,
                                   bool round_out, float* scratch, cudaStream_t stream) {
  const SplitShape s = split_shape(q.rows, n_heads, L);
  const int64_t d = keys.d;
  const size_t smem = static_cast<size_t>(L) * sizeof(const float*) +
                      static_cast<size_t>(kSparseGroup * d) * sizeof(float);
  if (scratch == nullptr || s.splits == 0 || d > kSparseMaxHeadDim || smem > 160 * 1024) {
    return false;
  }
  allow_dynamic_smem(reinterpret_cast<const void*>(split_scores_kernel), 160 * 1024);
  allow_dynamic_smem(reinterpret_cast<const void*>(split_pv_kernel), 160 * 1024);
  const int64_t M = q.rows;
  float* z = scratch;
  float* den = z + M * n_heads * L;
  int* counts = reinterpret_cast<int*>(den + M * n_heads);
  float* partial = den + M * n_heads + M;
  const dim3 split_grid(static_cast<unsigned>(M), static_cast<unsigned>(s.groups),
                        static_cast<unsigned>(s.splits));
  const dim3 group_grid(static_cast<unsigned>(M), static_cast<unsigned>(s.groups));
  launch_kernel(split_scores_kernel, split_grid, kThreads, smem, stream, q, n_heads, keys, L, scale,
                z, counts);
  launch_kernel(split_softmax_kernel, group_grid, kThreads, 0, stream, n_heads, L, sink, bf16_probs,
                z, counts, den);
  launch_kernel(split_pv_kernel, split_grid, kThreads,
                static_cast<size_t>(L) * sizeof(const float*), stream, n_heads, keys, L, M, z,
                partial);
  const int64_t work = M * n_heads * d;
  launch_kernel(split_combine_kernel, grid_for(work, 256), 256, 0, stream, n_heads, d, M,
                static_cast<int>(s.splits), partial, den, counts, o, round_out);
  return true;
}

}  // namespace deepinfer::kernels::cuda
