// The 16-byte weight chunk both decode GEMVs walk (gemv.cu: one row per thread group,
// gemv_rows.cu: four rows per group): how many weights a chunk holds, a row's bytes, the block
// scale of a chunk, and the one switch from a run-time weight format to a kernel instantiation.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {

// Weights in one 16-byte chunk: 16 FP8, 32 FP4, 8 BF16/F16 or 4 F32.
__host__ __device__ constexpr int chunk_elems(WFmt f) {
  return f == WFmt::kFp8 ? 16 : f == WFmt::kFp4 ? 32 : f == WFmt::kF32 ? 4 : 8;
}

// Bytes of one weight row of k elements.
__host__ __device__ constexpr int64_t weight_row_bytes(WFmt f, int64_t k) {
  return f == WFmt::kFp4 ? k / 2 : f == WFmt::kFp8 ? k : f == WFmt::kF32 ? k * 4 : k * 2;
}

// Block scale of chunk c of row n (1 for dense formats); the chunk's partial sum is multiplied
// by it.
template <WFmt F>
__device__ __forceinline__ float chunk_scale(const WeightDesc& w, int64_t n, int64_t c) {
  if constexpr (F == WFmt::kFp8) return scale_at(w, n / w.block_n, c * 16 / w.block_k);
  if constexpr (F == WFmt::kFp4) return scale_at(w, n, c * 32 / w.block_k);
  return 1.0f;
}

// Calls fn(std::integral_constant<WFmt, F>{}) for the format f, so a launcher names its kernel
// once as kernel<decltype(f)::value>.
template <typename Fn>
void dispatch_wfmt(WFmt f, Fn&& fn) {
  switch (f) {
    case WFmt::kFp8:
      fn(std::integral_constant<WFmt, WFmt::kFp8>{});
      break;
    case WFmt::kFp4:
      fn(std::integral_constant<WFmt, WFmt::kFp4>{});
      break;
    case WFmt::kBf16:
      fn(std::integral_constant<WFmt, WFmt::kBf16>{});
      break;
    case WFmt::kF16:
      fn(std::integral_constant<WFmt, WFmt::kF16>{});
      break;
    case WFmt::kF32:
      fn(std::integral_constant<WFmt, WFmt::kF32>{});
      break;
  }
}

}  // namespace deepinfer::kernels::cuda
