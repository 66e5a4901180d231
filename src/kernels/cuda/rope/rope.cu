// Interleaved RoPE on the last rope_dim channels of each head (spec §2.6), one thread per
// (row, head, pair). The angle is float(pos) · f_j in FP32 and cosf/sinf are the accurate
// versions (no fast-math), matching the CPU reference to the last bits in practice. The rounded
// form (the official BF16 point after RoPE) takes every pair of the head, rotating the rope
// pairs and rounding all: one pass where a rotation and a rounding launch were two.
#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

// Grids: x over a row's work items, y over rows (looping past the grid's 65,535): the index
// arithmetic stays in 32 bits. 64-bit divisions per thread made the rounded form compute-bound
// (0.2 ms per call on a 4096-row prefill's queries).
constexpr int kRopeThreads = 256;
constexpr int64_t kMaxGridY = 65535;

__global__ void rope_kernel(MatDesc x, int n_heads, int head_dim, const int32_t* positions,
                            const float* freqs, int n_freqs, bool inverse) {
  grid_dependency_sync();
  const int per_row = n_heads * n_freqs;
  const int i = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= per_row) return;
  const int h = i / n_freqs, j = i % n_freqs;
  for (int64_t row = blockIdx.y; row < x.rows; row += gridDim.y) {
    float* r = x.data + row * x.ld + h * head_dim + (head_dim - 2 * n_freqs);
    float a = r[2 * j], b = r[2 * j + 1];
    rope_pair_d(a, b, static_cast<float>(positions[row]), freqs[j], inverse);
    r[2 * j] = a;
    r[2 * j + 1] = b;
  }
}

// One thread per (row, head, channel pair) of the whole head: the last n_freqs pairs rotated,
// every value rounded to BF16.
__global__ void rope_rounded_kernel(MatDesc x, int n_heads, int head_dim,
                                    const int32_t* positions, const float* freqs, int n_freqs,
                                    bool inverse) {
  grid_dependency_sync();
  const int pairs = head_dim / 2, per_row = n_heads * pairs;
  const int i = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= per_row) return;
  const int h = i / pairs, p = i % pairs, j = p - (pairs - n_freqs);
  for (int64_t row = blockIdx.y; row < x.rows; row += gridDim.y) {
    float* r = x.data + row * x.ld + h * head_dim + 2 * p;
    float a = r[0], b = r[1];
    if (j >= 0) rope_pair_d(a, b, static_cast<float>(positions[row]), freqs[j], inverse);
    r[0] = bf16_round_d(a);
    r[1] = bf16_round_d(b);
  }
}

dim3 rope_grid(int64_t per_row, int64_t rows) {
  return dim3(static_cast<unsigned>((per_row + kRopeThreads - 1) / kRopeThreads),
              static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY));
}

}  // namespace

void launch_rope(MatDesc x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                 const float* freqs, int64_t n_freqs, bool inverse, bool round_out,
                 cudaStream_t stream) {
  if (x.rows == 0 || n_heads == 0) return;
  const int nh = static_cast<int>(n_heads), hd = static_cast<int>(head_dim),
            nf = static_cast<int>(n_freqs);
  if (round_out) {
    if (head_dim % 2 != 0) {  // no whole pairs: rotate, then round in a pass of its own
      launch_rope(x, n_heads, head_dim, positions, freqs, n_freqs, inverse, false, stream);
      launch_round_bf16(x, stream);
      return;
    }
    launch_kernel(rope_rounded_kernel, rope_grid(n_heads * (head_dim / 2), x.rows), kRopeThreads, 0,
                  stream, x, nh, hd, positions, freqs, nf, inverse);
    return;
  }
  if (n_freqs == 0) return;
  launch_kernel(rope_kernel, rope_grid(n_heads * n_freqs, x.rows), kRopeThreads, 0, stream, x, nh,
                hd, positions, freqs, nf, inverse);
}

}  // namespace deepinfer::kernels::cuda
