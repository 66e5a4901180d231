// The operands of the FP8 block-scaled GEMM (backend/cuda/cublaslt_fp8.cc): activations as E4M3
// codes with one FP32 power-of-two scale per 1 x 128 block, and a weight's E8M0 block scales as
// FP32.
//
// The codes decode to exactly launch_fake_quant_fp8's values: one warp per (row, block) takes
// the block amax, the power-of-two scale and each element's E4M3 rounding by the same rules
// (common.cuh), then stores the rounded value's byte (an exact conversion: the value is
// representable). Feeding values that are already act-quantized gives codes for the same values
// again: their amax is at most 448·s, so the new scale s' <= s is a power of two and every
// value / s' is the old E4M3 code times 2^j (j >= 0), still representable and at most 448.
#include <cuda_fp8.h>

#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

__device__ __forceinline__ float e8m0_to_f32_d(uint32_t b) {
  // backend/weight_ref.h kE8m0ToFloat: 0 is the subnormal 2^-127, 0xff NaN.
  return __uint_as_float(b == 0 ? (1u << 22) : (b == 0xffu ? 0x7fc00000u : b << 23));
}

// Blocks past x_blocks convert the weight's E8M0 scales (w_n of them) instead: the GEMM's two
// operand preparations in one launch, and no per-weight state to go stale.
__global__ void act_quant_fp8_codes_kernel(MatDesc x, int64_t block, int64_t blocks_per_row,
                                           uint8_t* codes, int64_t codes_ld, float* scales,
                                           unsigned x_blocks, const uint8_t* w_e8m0, int64_t w_n,
                                           float* w_f32) {
  grid_dependency_sync();
  if (blockIdx.x >= x_blocks) {
    const int64_t i = static_cast<int64_t>(blockIdx.x - x_blocks) * blockDim.x + threadIdx.x;
    if (i < w_n) w_f32[i] = e8m0_to_f32_d(w_e8m0[i]);
    return;
  }
  const int64_t wg = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (wg >= x.rows * blocks_per_row) return;  // whole warps exit together
  const int64_t row = wg / blocks_per_row, kb = wg % blocks_per_row, b0 = kb * block;
  const int64_t len = (x.cols - b0) < block ? (x.cols - b0) : block;
  const float* p = x.data + row * x.ld + b0;
  uint8_t* q = codes + row * codes_ld + b0;
  const float s = pow2_scale_d(warp_block_amax(p, len, lane), kFp8MaxD);
  for (int64_t i = lane; i < len; i += 32) {
    const float v = act_quant_fp8_d(p[i], s) / s;  // the E4M3 value itself (exact division)
    q[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
  }
  // Row-contiguous per block column: the 1 x 128 scale layout of cuBLASLt's VEC128_32F mode.
  if (lane == 0) scales[kb * x.rows + row] = s;
}

}  // namespace

void launch_act_quant_fp8_codes(MatDesc x, int64_t block, uint8_t* codes, int64_t codes_ld,
                                float* scales, const uint8_t* w_e8m0, int64_t w_n, float* w_f32,
                                cudaStream_t stream) {
  if (x.rows == 0 || x.cols == 0) return;
  const int64_t bpr = (x.cols + block - 1) / block;
  const unsigned x_blocks = grid_for(x.rows * bpr * 32, 256);
  const unsigned w_blocks = w_n > 0 ? grid_for(w_n, 256) : 0;
  launch_kernel(act_quant_fp8_codes_kernel, x_blocks + w_blocks, 256, 0, stream, x, block, bpr,
                codes, codes_ld, scales, x_blocks, w_e8m0, w_n, w_f32);
}

}  // namespace deepinfer::kernels::cuda
