// Internal split of launch_linear between the decode GEMVs (gemv.cu, gemv_rows.cu) and the tiled
// GEMM (gemm_tiled.cu); each is its own translation unit so nvcc builds them in parallel.
#pragma once

#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {

inline constexpr int64_t kGemvMaxM = 16;
// round_out: each output rounded to BF16 in the store (the official rounding point after a
// projection, without a launch of its own).
void launch_gemv(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, cudaStream_t stream);
// 4 < M <= 16 with 16-byte-aligned FP8/FP4/BF16/F16 rows: four output rows per thread group.
bool gemv_rows_supported(const WeightDesc& w);
void launch_gemv_rows(MatDesc x, const WeightDesc& w, MatDesc y, int tpr, bool x_vec4,
                      bool round_out, cudaStream_t stream);
void launch_gemm_tiled(MatDesc x, const WeightDesc& w, MatDesc y, cudaStream_t stream);

}  // namespace deepinfer::kernels::cuda
