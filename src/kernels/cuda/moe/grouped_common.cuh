// Device pieces shared by the grouped MoE kernels (grouped.cu: SIMT; grouped_mma.cu: tensor
// cores): the stage arguments, the block's expert and the per-(pair, row) epilogue.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {

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
