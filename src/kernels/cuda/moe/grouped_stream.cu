// Grouped MoE stages for a few pairs per expert (decode steps): the weight-streaming form of
// gate_up and down, for FP8 (128 x 128 E8M0) and FP4 (1 x 32 E8M0) experts.
//
// At one to a few pairs per expert the stages only stream weights: a decode step at batch 1
// reads 6 experts x 13.4 MB. The tensor-core stages (grouped_mma.cu) give each block 16 weight
// rows with K split over its warps, one 16-byte load per row in flight per lane, and read their
// weights at ~25% of the copy bandwidth there (bench/results/cuda_fp8_gemm_perf_h200_
// 2026-12-03_stop30.txt, moe_experts M=1). Here each warp streams whole weight rows (gate_up: row
// n of w1 and of w3; down: rows n and n + 1 of w2) with every lane's loads for several chunks
// issued before the first decode (gemm/stream_chunk.cuh), and runs the expert's pairs in tiles of
// kPairs against each decoded chunk, the pair inputs read once per chunk for both rows. Each
// (pair, row) value is one lane-ordered FP32 sum and a fixed warp butterfly, then the same
// epilogue as the other stages (grouped_common.cuh): a pair's value does not depend on the
// other pairs of its expert or of the step.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/stream_chunk.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/moe/grouped_common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kWarps = 8;  // warps per block
constexpr int kPairs = 4;  // pairs per pass over the weight rows
constexpr int kRows = 2;   // weight rows a warp streams together

template <bool kGateUp, WFmt F>
__global__ void __launch_bounds__(kWarps * 32, 2)  // <= 128 registers: two blocks per SM
    grouped_stream_kernel(const float* __restrict__ in, int64_t in_ld, GroupedStageArgs st) {
  constexpr int E = stream_chunk_elems<F>;
  constexpr int U = F == WFmt::kFp8 ? 4 : 2;  // chunks per row per iteration (registers)
  constexpr int kOut = kGateUp ? 1 : kRows;   // output rows per warp
  const int e = stage_expert(st);
  if (e < 0) return;
  const GroupedExpert& ex = st.experts[e];
  const WeightDesc& wa = kGateUp ? ex.w1 : ex.w2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.y) * kWarps + warp) * kOut;
  if (row0 >= wa.n) return;  // whole warps; no block barrier below
  // The two weight rows: w1 and w3 at row0, or w2 at row0 and row0 + 1 (clamped, not stored).
  const WeightDesc* w[kRows] = {&wa, kGateUp ? &ex.w3 : &wa};
  const int64_t n[kRows] = {row0, kGateUp ? row0 : (row0 + 1 < wa.n ? row0 + 1 : row0)};
  const uint8_t* srow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) srow[r] = stream_scale_row<F>(*w[r], n[r]);
  const int64_t nchunks = wa.k / E;
  const int32_t begin = st.layout.offsets[e], count = st.layout.counts[e];

  for (int32_t p0 = 0; p0 < count; p0 += kPairs) {
    const int np = min(kPairs, count - p0);
    const float* xrow[kPairs];
#pragma unroll
    for (int m = 0; m < kPairs; ++m) {
      const int32_t r = begin + p0 + (m < np ? m : 0);
      xrow[m] = in + static_cast<int64_t>(kGateUp ? st.layout.row_pair[r] / st.top_k : r) * in_ld;
    }
    float acc[kRows][kPairs];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int m = 0; m < kPairs; ++m) acc[r][m] = 0.0f;

    for (int64_t c0 = lane; c0 < nchunks; c0 += 32 * U) {
      uint4 raw[kRows][U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t c = c0 + 32 * u;
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          raw[r][u] = c < nchunks ? load_stream_chunk<F>(*w[r], n[r], c) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t c = c0 + 32 * u;
        if (c >= nchunks) break;
        float wv[kRows][E], cs[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          decode_stream_chunk<F>(raw[r][u], wv[r]);
          cs[r] = stream_chunk_multiplier<F>(srow[r], c);
        }
#pragma unroll
        for (int m = 0; m < kPairs; ++m) {
          if (m >= np) break;
          const float4* xr = reinterpret_cast<const float4*>(xrow[m] + c * E);
          float s[kRows] = {};
#pragma unroll
          for (int i = 0; i < E / 4; ++i) {
            const float4 xv = __ldg(xr + i);
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              s[r] = fmaf(wv[r][4 * i], xv.x, s[r]);
              s[r] = fmaf(wv[r][4 * i + 1], xv.y, s[r]);
              s[r] = fmaf(wv[r][4 * i + 2], xv.z, s[r]);
              s[r] = fmaf(wv[r][4 * i + 3], xv.w, s[r]);
            }
          }
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][m] = fmaf(s[r], cs[r], acc[r][m]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int m = 0; m < kPairs; ++m) acc[r][m] = warp_sum(acc[r][m]);
    if (lane != 0) continue;
#pragma unroll
    for (int m = 0; m < kPairs; ++m) {
      if (m >= np) break;
      const int32_t pair = begin + p0 + m;
      const int32_t pr = st.layout.row_pair[pair];
      const float* gate = st.gates + pr / st.top_k * st.gates_ld + pr % st.top_k;
      float* out = st.out + static_cast<int64_t>(pair) * st.out_ld;
      if constexpr (kGateUp) {
        out[row0] = moe_epilogue<true>(acc[0][m], acc[1][m], st.ep, gate);
      } else {
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          if (row0 + r < wa.n) out[row0 + r] = moe_epilogue<false>(acc[r][m], 0.0f, st.ep, gate);
      }
    }
  }
}

template <bool kGateUp>
void launch_stage(const float* in, int64_t in_ld, const GroupedStageArgs& args, bool fp4,
                  int64_t rows, int max_active, cudaStream_t stream) {
  if (max_active <= 0) return;
  constexpr int64_t kRowsPerBlock = kWarps * (kGateUp ? 1 : kRows);
  const dim3 grid(static_cast<unsigned>(max_active),
                  static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock));
  if (fp4) {
    grouped_stream_kernel<kGateUp, WFmt::kFp4><<<grid, kWarps * 32, 0, stream>>>(in, in_ld, args);
  } else {
    grouped_stream_kernel<kGateUp, WFmt::kFp8><<<grid, kWarps * 32, 0, stream>>>(in, in_ld, args);
  }
}

}  // namespace

bool moe_stream_supported(const WeightDesc& w1, const WeightDesc& w3, const WeightDesc& w2) {
  return stream_chunk_weight(w1) && stream_chunk_weight(w3) && stream_chunk_weight(w2) &&
         w1.fmt == w3.fmt && w1.fmt == w2.fmt;
}

void launch_moe_gate_up_stream(MatDesc x, const GroupedExpert* experts, bool fp4, int64_t inter,
                               MoeLayout l, int max_active, const float* gates, int64_t gates_ld,
                               int top_k, MoeEpilogue ep, float* h, int64_t h_ld,
                               cudaStream_t stream) {
  launch_stage<true>(x.data, x.ld, GroupedStageArgs{experts, l, gates, gates_ld, top_k, ep, h, h_ld},
                     fp4, inter, max_active, stream);
}

void launch_moe_down_stream(const float* h, int64_t h_ld, const GroupedExpert* experts, bool fp4,
                            int64_t dim, MoeLayout l, int max_active, const float* gates,
                            int64_t gates_ld, int top_k, MoeEpilogue ep, float* y, int64_t y_ld,
                            cudaStream_t stream) {
  launch_stage<false>(h, h_ld, GroupedStageArgs{experts, l, gates, gates_ld, top_k, ep, y, y_ld},
                      fp4, dim, max_active, stream);
}

}  // namespace deepinfer::kernels::cuda
