// Interleaved RoPE on the last rope_dim channels of each head (spec §2.6), one thread per
// (row, head, pair). The angle is float(pos) · f_j in FP32 and cosf/sinf are the accurate
// versions (no fast-math), matching the CPU reference to the last bits in practice. The rounded
// form (the official BF16 point after RoPE) takes every pair of the head, rotating the rope
// pairs and rounding all: one pass where a rotation and a rounding launch were two.
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

// One thread per (row, head, channel pair) of the whole head: the last n_freqs pairs rotated,
// every value rounded to BF16.
__global__ void rope_rounded_kernel(MatDesc x, int64_t n_heads, int64_t head_dim,
                                    const int32_t* positions, const float* freqs, int64_t n_freqs,
                                    bool inverse) {
  const int64_t pairs = head_dim / 2, per_row = n_heads * pairs;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= x.rows * per_row) return;
  const int64_t row = i / per_row, rem = i % per_row;
  const int64_t h = rem / pairs, p = rem % pairs, j = p - (pairs - n_freqs);
  float* r = x.data + row * x.ld + h * head_dim + 2 * p;
  float a = r[0], b = r[1];
  if (j >= 0) {
    const float angle = static_cast<float>(positions[row]) * freqs[j];
    const float c = cosf(angle);
    const float s = inverse ? -sinf(angle) : sinf(angle);
    const float ra = a * c - b * s, rb = a * s + b * c;
    a = ra, b = rb;
  }
  r[0] = bf16_round_d(a);
  r[1] = bf16_round_d(b);
}

}  // namespace

void launch_rope(MatDesc x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                 const float* freqs, int64_t n_freqs, bool inverse, bool round_out,
                 cudaStream_t stream) {
  if (round_out) {
    if (head_dim % 2 != 0) {  // no whole pairs: rotate, then round in a pass of its own
      launch_rope(x, n_heads, head_dim, positions, freqs, n_freqs, inverse, false, stream);
      launch_round_bf16(x, stream);
      return;
    }
    const int64_t work = x.rows * n_heads * (head_dim / 2);
    if (work == 0) return;
    rope_rounded_kernel<<<grid_for(work, 256), 256, 0, stream>>>(x, n_heads, head_dim, positions,
                                                                 freqs, n_freqs, inverse);
    return;
  }
  const int64_t work = x.rows * n_heads * n_freqs;
  if (work == 0) return;
  rope_kernel<<<grid_for(work, 256), 256, 0, stream>>>(x, n_heads, head_dim, positions, freqs,
                                                       n_freqs, inverse);
}

}  // namespace deepinfer::kernels::cuda
