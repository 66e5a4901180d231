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
  grid_dependency_sync();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= w.n * w.k) return;
  out[i] = to_bf16_bits(weight_at_d(w, i / w.k, i % w.k));
}

// The same values for FP8 / FP4 codes with E8M0 scales, 16 consecutive codes of a row per
// thread (one scale, one 16- or 8-byte load, two 16-byte stores): the per-element kernel above
// divided by K for every element and was most of a large-M FP8 linear's time.
template <bool kFp4>
__global__ void weight_to_bf16_e8m0_kernel(WeightDesc w, uint32_t chunks_per_row, uint32_t chunks,
                                           uint16_t* out) {
  grid_dependency_sync();
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= chunks) return;
  const uint32_t row = i / chunks_per_row, k0 = (i - row * chunks_per_row) * 16;
  const int64_t srow = kFp4 ? row : row / static_cast<uint32_t>(w.block_n);
  const float s = e8m0_to_f(static_cast<const uint8_t*>(
      w.scale)[srow * w.scale_ld + k0 / static_cast<uint32_t>(w.block_k)]);
  const uint8_t* base = static_cast<const uint8_t*>(w.w);
  uint32_t c[4];
  if constexpr (kFp4) {
    const uint2 b = *reinterpret_cast<const uint2*>(base + static_cast<int64_t>(row) * (w.k / 2) + k0 / 2);
    c[0] = b.x, c[1] = b.y;
  } else {
    const uint4 b = *reinterpret_cast<const uint4*>(base + static_cast<int64_t>(row) * w.k + k0);
    c[0] = b.x, c[1] = b.y, c[2] = b.z, c[3] = b.w;
  }
  uint32_t packed[8];
#pragma unroll
  for (int j = 0; j < 16; j += 2) {
    float v[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int q = j + h;
      v[h] = kFp4 ? fp4_e2m1_to_f((c[q / 8] >> (4 * (q % 8))) & 0xfu)
                  : fp8_e4m3_to_f((c[q / 4] >> (8 * (q % 4))) & 0xffu);
    }
    packed[j / 2] = static_cast<uint32_t>(to_bf16_bits(v[0] * s)) |
                    (static_cast<uint32_t>(to_bf16_bits(v[1] * s)) << 16);
  }
  uint4* o = reinterpret_cast<uint4*>(out + static_cast<int64_t>(row) * w.k + k0);
  o[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  o[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
}

__global__ void mat_to_bf16_kernel(MatDesc x, uint16_t* out) {
  grid_dependency_sync();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= x.rows * x.cols) return;
  out[i] = to_bf16_bits(x.data[(i / x.cols) * x.ld + i % x.cols]);
}

// v = hi + mid + lo exactly (each BF16 keeps 8 of v's 24 significant bits; the differences are
// exact in FP32), so three BF16 GEMMs reproduce an FP32 product to FP32 accuracy.
__global__ void mat_split_bf16_kernel(MatDesc x, uint16_t* hi, uint16_t* mid, uint16_t* lo) {
  grid_dependency_sync();
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

// Where k of a row goes in the paired order of the tensor-core MoE stages (moe/grouped_mma.cu):
// within each group of 8, k 0 4 1 5 2 6 3 7.
__device__ __forceinline__ int64_t paired_pos(int64_t k) {
  const int64_t j = k & 7;
  return (k & ~int64_t{7}) + (j < 4 ? 2 * j : 2 * (j - 4) + 1);
}

// One warp per (row, block of `block` columns): with kQuant the block's FP8 act-quantization
// round trip first (fake_quant_fp8's rules and bits: the block amax is a warp max), then BF16
// (exact for act-quantized values) in the paired order.
template <bool kQuant>
__global__ void bf16_paired_kernel(MatDesc x, int64_t block, int64_t blocks_per_row,
                                   uint16_t* out, int64_t out_ld) {
  grid_dependency_sync();
  const int64_t wg = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (wg >= x.rows * blocks_per_row) return;  // whole warps exit together
  const int64_t row = wg / blocks_per_row, b0 = (wg % blocks_per_row) * block;
  const int64_t len = (x.cols - b0) < block ? (x.cols - b0) : block;
  const float* p = x.data + row * x.ld + b0;
  float s = 1.0f;
  if constexpr (kQuant) s = pow2_scale_d(warp_block_amax(p, len, lane), kFp8MaxD);
  uint16_t* o = out + row * out_ld;
  for (int64_t i = lane; i < len; i += 32) {
    const float v = kQuant ? act_quant_fp8_d(p[i], s) : p[i];
    o[paired_pos(b0 + i)] = to_bf16_bits(v);
  }
}

}  // namespace

void launch_mat_split_bf16(MatDesc x, uint16_t* hi, uint16_t* mid, uint16_t* lo,
                           cudaStream_t stream) {
  const int64_t n = x.rows * x.cols;
  if (n) launch_kernel(mat_split_bf16_kernel, grid_for(n, 256), 256, 0, stream, x, hi, mid, lo);
}

void launch_weight_to_bf16(const WeightDesc& w, uint16_t* out, cudaStream_t stream) {
  const int64_t n = w.n * w.k;
  const bool coded = w.fmt == WFmt::kFp8 || w.fmt == WFmt::kFp4;
  // 16-byte rows of codes and of output (k % 16; the caller's out is 16-byte aligned), one
  // scale per 16 codes, 32-bit chunk indices.
  if (coded && w.sfmt == SFmt::kE8m0 && w.k % 16 == 0 && w.block_k % 16 == 0 && n / 16 < (1ll << 31)) {
    const auto cpr = static_cast<uint32_t>(w.k / 16), chunks = static_cast<uint32_t>(n / 16);
    if (chunks == 0) return;
    if (w.fmt == WFmt::kFp4) {
      launch_kernel(weight_to_bf16_e8m0_kernel<true>, grid_for(chunks, 256), 256, 0, stream, w, cpr,
                    chunks, out);
    } else {
      launch_kernel(weight_to_bf16_e8m0_kernel<false>, grid_for(chunks, 256), 256, 0, stream, w,
                    cpr, chunks, out);
    }
    return;
  }
  if (n) launch_kernel(weight_to_bf16_kernel, grid_for(n, 256), 256, 0, stream, w, out);
}

void launch_mat_to_bf16(MatDesc x, uint16_t* out, cudaStream_t stream) {
  const int64_t n = x.rows * x.cols;
  if (n) launch_kernel(mat_to_bf16_kernel, grid_for(n, 256), 256, 0, stream, x, out);
}

void launch_bf16_paired(MatDesc x, int64_t quant_block, uint16_t* out, int64_t out_ld,
                        cudaStream_t stream) {
  if (x.rows == 0 || x.cols == 0) return;
  // Blocks of 8-aligned width keep a group of 8 in one warp's block (any width is correct).
  const int64_t block = quant_block > 0 ? quant_block : 256;
  const int64_t bpr = (x.cols + block - 1) / block, threads = x.rows * bpr * 32;
  if (quant_block > 0) {
    launch_kernel(bf16_paired_kernel<true>, grid_for(threads, 256), 256, 0, stream, x, block, bpr,
                  out, out_ld);
  } else {
    launch_kernel(bf16_paired_kernel<false>, grid_for(threads, 256), 256, 0, stream, x, block, bpr,
                  out, out_ld);
  }
}

}  // namespace deepinfer::kernels::cuda
