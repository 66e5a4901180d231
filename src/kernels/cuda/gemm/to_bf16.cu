// Conversions feeding the tensor-core (cuBLAS BF16) path of linear for M > 16: a quantized
// weight dequantized to BF16, and FP32 activations to BF16. The path is taken only where both
// conversions are exact (docs/cuda_backend.md): act-quantized activations (FP8 E4M3 values
// times a power of two) and FP8/FP4 weights with E8M0 scales are BF16 values, so the product
// summed in FP32 is the same function as the FP32 SIMT GEMM, up to summation order. For a dense
// BF16 weight with FP32 activations, x is split into hi + lo (two BF16 values; their sum is x
// to 2^-16 relative) and the product is W·hi + W·lo: FP32-grade accuracy on BF16 tensor cores.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {
namespace {

__device__ __forceinline__ uint16_t to_bf16_bits(float v) {
  return static_cast<uint16_t>(f2u(bf16_round_d(v)) >> 16);
}

__global__ void weight_to_bf16_kernel(WeightDesc w, uint16_t* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= w.n * w.k) return;
  out[i] = to_bf16_bits(weight_at_d(w, i / w.k, i % w.k));
}

__global__ void mat_to_bf16_kernel(MatDesc x, uint16_t* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= x.rows * x.cols) return;
  out[i] = to_bf16_bits(x.data[(i / x.cols) * x.ld + i % x.cols]);
}

// v = hi + mid + lo exactly (each BF16 keeps 8 of v's 24 significant bits; the differences are
// exact in FP32), so three BF16 GEMMs reproduce an FP32 product to FP32 accuracy.
__global__ void mat_split_bf16_kernel(MatDesc x, uint16_t* hi, uint16_t* mid, uint16_t* lo) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= x.rows * x.cols) return;
  const float v = x.data[(i / x.cols) * x.ld + i % x.cols];
  const float h = bf16_round_d(v);
  const float r = v - h;  // exact
  const float m = bf16_round_d(r);
  hi[i] = static_cast<uint16_t>(f2u(h) >> 16);
  mid[i] = static_cast<uint16_t>(f2u(m) >> 16);
  lo[i] = to_bf16_bits(r - m);  // exact
}

}  // namespace

void launch_mat_split_bf16(MatDesc x, uint16_t* hi, uint16_t* mid, uint16_t* lo,
                           cudaStream_t stream) {
  const int64_t n = x.rows * x.cols;
  if (n) mat_split_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(x, hi, mid, lo);
}

void launch_weight_to_bf16(const WeightDesc& w, uint16_t* out, cudaStream_t stream) {
  const int64_t n = w.n * w.k;
  if (n) weight_to_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(w, out);
}

void launch_mat_to_bf16(MatDesc x, uint16_t* out, cudaStream_t stream) {
  const int64_t n = x.rows * x.cols;
  if (n) mat_to_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(x, out);
}

}  // namespace deepinfer::kernels::cuda
