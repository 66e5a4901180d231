// V4.1's hierarchical selection (spec §6.2, §6.7 item 3; ops.h candidate_blocks and
// restrict_to_blocks), the rules of the host defaults in backend/ops_v41.cc:
//   level one  a block's score is the max of its rows' scores; the block holding row
//              visible[t] - 1 scores +inf; the n_blocks best (ties: lower block) in ascending
//              block order, -1 past the blocks the row has or for blocks of -inf rows only;
//   level two  rows outside the chosen blocks become -inf.
// Level one reuses the indexer's top-k over a [M, ceil(R / block_size)] matrix of block scores,
// then sorts each row's picks (n_blocks is small: one thread per row).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {
namespace {

__global__ void block_scores_kernel(MatDesc scores, const int32_t* visible, int64_t block_size,
                                    MatDesc out, int32_t* n_blocks_visible) {
  grid_dependency_sync();
  const int64_t t = blockIdx.y;
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= out.cols) return;
  int64_t vis = visible[t];
  vis = vis < 0 ? 0 : (vis > scores.cols ? scores.cols : vis);
  const int64_t nb = (vis + block_size - 1) / block_size;
  if (b == 0) n_blocks_visible[t] = static_cast<int32_t>(nb);
  float best = -INFINITY;
  if (b == nb - 1) {
    best = INFINITY;  // the newest visible row's block
  } else if (b < nb) {
    const float* s = scores.data + t * scores.ld;
    for (int64_t r = b * block_size; r < (b + 1) * block_size; ++r) best = fmaxf(best, s[r]);
  }
  out.data[t * out.ld + b] = best;
}

// picks [M, n] descending by score with -1 at the end -> ascending block ids, -1 at the end.
__global__ void sort_picks_kernel(int32_t* picks, int64_t rows, int64_t n) {
  grid_dependency_sync();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= rows) return;
  int32_t* p = picks + t * n;
  for (int64_t i = 1; i < n; ++i) {
    const int32_t v = p[i];
    if (v < 0) continue;  // -1s stay behind every pick
    int64_t j = i;
    while (j > 0 && (p[j - 1] < 0 || p[j - 1] > v)) {
      p[j] = p[j - 1];
      --j;
    }
    p[j] = v;
  }
}

__global__ void restrict_kernel(MatDesc scores, const int32_t* visible, const int32_t* blocks,
                                int64_t n_blocks, int64_t block_size) {
  grid_dependency_sync();
  const int64_t t = blockIdx.y;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t vis = visible[t];
  vis = vis < 0 ? 0 : (vis > scores.cols ? scores.cols : vis);
  if (r >= vis) return;
  const int32_t b = static_cast<int32_t>(r / block_size);
  const int32_t* bt = blocks + t * n_blocks;
  for (int64_t j = 0; j < n_blocks; ++j) {
    if (bt[j] == b) return;
  }
  scores.data[t * scores.ld + r] = -INFINITY;
}

}  // namespace

int64_t candidate_blocks_scratch_floats(int64_t rows, int64_t cols, int64_t block_size) {
  return rows * ((cols + block_size - 1) / block_size) + rows;  // block scores + counts
}

void launch_candidate_blocks(MatDesc scores, const int32_t* visible, int64_t block_size,
                             int64_t n_blocks, int32_t* out, float* scratch, cudaStream_t stream) {
  if (scores.rows == 0) return;
  const int64_t nb_max = (scores.cols + block_size - 1) / block_size;
  if (nb_max == 0) {
    // No row has a block: every pick is -1.
    cudaMemsetAsync(out, 0xff, static_cast<size_t>(scores.rows * n_blocks) * sizeof(int32_t),
                    stream);
    return;
  }
  MatDesc bs{scratch, scores.rows, nb_max, nb_max};
  auto* counts = reinterpret_cast<int32_t*>(scratch + scores.rows * nb_max);
  const dim3 grid(static_cast<unsigned>((nb_max + 127) / 128), static_cast<unsigned>(scores.rows));
  launch_kernel(block_scores_kernel, grid, 128, 0, stream, scores, visible, block_size, bs, counts);
  launch_topk(bs, counts, n_blocks, out, stream);
  launch_kernel(sort_picks_kernel, grid_for(scores.rows, 128), 128, 0, stream, out, scores.rows,
                n_blocks);
}

void launch_restrict_to_blocks(MatDesc scores, const int32_t* visible, const int32_t* blocks,
                               int64_t n_blocks, int64_t block_size, cudaStream_t stream) {
  if (scores.rows == 0 || scores.cols == 0) return;
  const dim3 grid(static_cast<unsigned>((scores.cols + 255) / 256),
                  static_cast<unsigned>(scores.rows));
  launch_kernel(restrict_kernel, grid, 256, 0, stream, scores, visible, blocks, n_blocks,
                block_size);
}

}  // namespace deepinfer::kernels::cuda
