// Internal split of launch_linear between the decode GEMVs (gemv.cu, gemv_rows.cu,
// gemv_stream.cu) and the tiled GEMM (gemm_tiled.cu); each is its own translation unit so nvcc
// builds them in parallel.
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
// M <= kGemvStreamMaxM rows, 16-byte-aligned FP32 rows, FP8 (128 x 128 E8M0) or FP4 (1 x 32
// E8M0) weights: warps streaming several rows each (gemv_stream.cu).
inline constexpr int64_t kGemvStreamMaxM = 4;
bool gemv_stream_supported(MatDesc x, const WeightDesc& w);
// ... and can act-quantize x itself in blocks of qblock channels (qblock > 0).
bool gemv_stream_quantizes(MatDesc x, const WeightDesc& w, int qblock);
// groups > 1: Ops::linear_grouped's block-diagonal product (x [M, groups·w.k], w.n = groups·n).
void launch_gemv_stream(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, int qblock,
                        cudaStream_t stream, int64_t groups = 1);
void launch_gemm_tiled(MatDesc x, const WeightDesc& w, MatDesc y, cudaStream_t stream);

}  // namespace deepinfer::kernels::cuda
