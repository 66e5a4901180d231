// Interleaved RoPE on the last rope_dim channels of each head (spec §2.6), one thread per
// (row, head, pair). The angle is float(pos) · f_j in FP32 and cosf/sinf are the accurate
// versions (no fast-math), matching the CPU reference to the last bits in practice.
#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

__global__ void rope_kernel(MatDesc x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                            const float* freqs, int64_t n_freqs, bool inverse) {
  const int64_t per_row = n_heads * n_freqs;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= x.rows * per_row) return;
  const int64_t row = i / per_row, rem = i % per_row;
  const int64_t h = rem / n_freqs, j = rem % n_freqs;
  float* r = x.data + row * x.ld + h * head_dim + (head_dim - 2 * n_freqs);
  const float angle = static_cast<float>(positions[row]) * freqs[j];
  const float c = cosf(angle);
  const float s = inverse ? -sinf(angle) : sinf(angle);
  const float a = r[2 * j], b = r[2 * j + 1];
  r[2 * j] = a * c - b * s;
  r[2 * j + 1] = a * s + b * c;
}

}  // namespace

void launch_rope(MatDesc x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                 const float* freqs, int64_t n_freqs, bool inverse, cudaStream_t stream) {
  const int64_t work = x.rows * n_heads * n_freqs;
  if (work == 0) return;
  rope_kernel<<<grid_for(work, 256), 256, 0, stream>>>(x, n_heads, head_dim, positions, freqs,
                                                       n_freqs, inverse);
}

}  // namespace deepinfer::kernels::cuda
