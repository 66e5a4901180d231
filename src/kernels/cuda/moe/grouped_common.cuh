// Device pieces shared by the grouped MoE kernels (grouped.cu: SIMT; grouped_mma.cu: tensor
// cores): the 32-value weight loader and the per-(pair, row) epilogue.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {

// w[row, k0 .. k0+32) dequantized (k0 % 32 == 0, row-major, 16-byte-aligned rows): 16-byte
// loads only (one for FP4, two for FP8, four for BF16/F16, eight for F32), all issued before
// the first use.
__device__ __forceinline__ void load32(const WeightDesc& w, int64_t row, int64_t k0, float* v) {
  switch (w.fmt) {
    case WFmt::kFp4: {
      const uint4 b = *reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.w) +
                                                      row * (w.k / 2) + k0 / 2);
      const float s = scale_at(w, row, k0 / w.block_k);
      const uint32_t words[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int i = 0; i < 8; ++i) v[8 * q + i] = fp4_e2m1_to_f((words[q] >> (4 * i)) & 0xfu) * s;
      return;
    }
    case WFmt::kFp8: {
      const uint4* p =
          reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.w) + row * w.k + k0);
      const uint4 b0 = p[0], b1 = p[1];
      const float s = scale_at(w, row / w.block_n, k0 / w.block_k);
      const uint32_t words[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int q = 0; q < 8; ++q)
#pragma unroll
        for (int i = 0; i < 4; ++i) v[4 * q + i] = fp8_e4m3_to_f((words[q] >> (8 * i)) & 0xffu) * s;
      return;
    }
    case WFmt::kBf16:
    case WFmt::kF16: {
      const uint4* p =
          reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w.w) + row * w.k + k0);
      uint4 b[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) b[q] = p[q];
      const bool bf = w.fmt == WFmt::kBf16;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const uint32_t words[4] = {b[q].x, b[q].y, b[q].z, b[q].w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint16_t lo = static_cast<uint16_t>(words[i] & 0xffffu);
          const uint16_t hi = static_cast<uint16_t>(words[i] >> 16);
          v[8 * q + 2 * i] = bf ? bf16_bits_to_f(lo) : f16_bits_to_f(lo);
          v[8 * q + 2 * i + 1] = bf ? bf16_bits_to_f(hi) : f16_bits_to_f(hi);
        }
      }
      return;
    }
    case WFmt::kF32: {
      const float4* p =
          reinterpret_cast<const float4*>(static_cast<const float*>(w.w) + row * w.k + k0);
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const float4 a = p[q];
        v[4 * q] = a.x, v[4 * q + 1] = a.y, v[4 * q + 2] = a.z, v[4 * q + 3] = a.w;
      }
      return;
    }
  }
}

// What a grouped stage reads besides its input rows: the experts, the device layout, the
// routing weights, and where it writes (out row = the pair's grouped row).
struct GroupedStageArgs {
  const GroupedExpert* experts = nullptr;
  MoeLayout layout;
  const float* gates = nullptr;
  int64_t gates_ld = 0;
  int top_k = 0;
  MoeEpilogue ep;
  float* out = nullptr;
  int64_t out_ld = 0;
};

// The expert of this block (blockIdx.x indexes the active experts), or -1 past them.
__device__ __forceinline__ int stage_expert(const GroupedStageArgs& a) {
  return static_cast<int>(blockIdx.x) < *a.layout.n_active ? a.layout.active[blockIdx.x] : -1;
}

// The value a grouped stage stores for one (pair, weight row) from its dot(s): gate_up applies
// the official BF16 points, SwiGLU with the clamp and (official) the routing weight; down the
// BF16 point and (HF) the routing weight. `gate` is read only when used.
template <bool kGateUp>
__device__ __forceinline__ float moe_epilogue(float a, float b, const MoeEpilogue& ep,
                                              const float* gate) {
  float r;
  if constexpr (kGateUp) {
    float u = a, v = b;
    if (ep.bf16_rounding) u = bf16_round_d(u), v = bf16_round_d(v);
    if (ep.swiglu_limit > 0.0f) {
      u = fminf(u, ep.swiglu_limit);
      v = fminf(fmaxf(v, -ep.swiglu_limit), ep.swiglu_limit);
    }
    r = u * (1.0f / (1.0f + expf(-u))) * v;
    if (ep.weight_before_w2) r *= *gate;
    if (ep.bf16_rounding) r = bf16_round_d(r);
  } else {
    (void)b;
    r = a;
    if (ep.bf16_rounding) r = bf16_round_d(r);
    if (!ep.weight_before_w2) {
      r *= *gate;
      if (ep.bf16_rounding) r = bf16_round_d(r);
    }
  }
  return r;
}

}  // namespace deepinfer::kernels::cuda
