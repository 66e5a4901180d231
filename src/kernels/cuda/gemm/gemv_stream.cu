// Decode GEMV for M <= 4 rows on FP8 (128 x 128 E8M0 blocks) and FP4 (1 x 32 E8M0 blocks)
// weights: the step's bandwidth-bound products at batch 1-4 (V4's wq_a / wq_b / wkv / wo_b, the
// compressor and indexer projections, the experts when the MoE takes linears).
//
// gemv.cu's kernel gives each output row a group of threads and its whole block a few rows, so
// a thread has one or two 16-byte loads in flight and every block ends in a shared-memory
// reduction and barrier: it streams 32 MB weights at ~25% of the copy bandwidth on the H200
// (bench/results/cuda_fp8_gemm_perf_h200_2026-12-03_stop30.txt.xz, M=1). Here a warp owns R
// consecutive rows (or 1 row split over S warps of its block when rows are few) and walks them
// together: per iteration every lane issues R x U independent 16-byte loads before it decodes any
// of them, each activation chunk is loaded once for its R rows, and the block-scale index is a
// shift (the block shapes are compile-time). Lanes take chunks lane, lane + 32 S, ...; a lane sums
// each chunk in ascending k (FP32 FMAs), scales it by its block scale into its accumulator, the
// warp sums its lanes in a fixed butterfly and the S warps of a row add up in warp order. A row's
// value therefore depends only on its own input row, never on the batch or the grid. Chunks are
// decoded by gemm/stream_chunk.cuh.
//
// qblock > 0: x is act-quantized on the way in (FP8 E4M3 with a power-of-two scale per qblock
// channels of a row, backend/quant.h; the same helpers as quant.cu's act-quantized copy, so the
// same bits): the block first finds every (row, q-block) scale into shared memory, then each
// chunk's activations are quantized as they are loaded. One launch instead of two per FP8
// linear at batch 1-4 (the decode step's most frequent pair).
//
// Groups (Ops::linear_grouped, V4's wo_a: a block-diagonal product): the grid is `groups` runs of
// a one-group grid, group g's blocks reading x's columns [g·k, (g+1)·k) and W's and y's
// [g·n, (g+1)·n). The form (R, S) is picked for the whole weight, not for one group, so a
// group's values may differ in the last bits from its own launch's (S changes the summation
// order); a row's depend only on its row. Measured on an H100 (V4-Flash's wo_a, 8 groups of
// 1024 rows, 33.5 MB; bench/results/gpu_2026-12-07_stop43.txt): one group's form (2 warps per
// row, one round of loads per warp) took the 4-layer decode step to 0.97 / 0.96 of 8 separate
// linears at batch 1 / 4, the whole weight's form (4 rows per warp, 8 chunks per lane in
// flight) to 0.95 / 0.94, same build and machine, two alternating rounds each.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/gemm_internal.h"
#include "kernels/cuda/gemm/stream_chunk.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kWarps = 8;  // warps per block
constexpr int kLoadsPerLane = 8;  // R x U: 16-byte loads each lane has in flight per iteration

template <WFmt F, int MT, int R, int S>
__global__ void __launch_bounds__(kWarps * 32, 2)  // <= 128 registers: two blocks per SM
    gemv_stream_kernel(const float* __restrict__ x, int64_t xld, int M, WeightDesc w,
                       float* __restrict__ y, int64_t yld, bool round_out, int qblock,
                       int64_t group_n, int64_t group_xcols, unsigned group_blocks) {
  grid_dependency_sync();
  // This block's group: W rows [n_begin, n_end), x columns from g·group_xcols.
  const unsigned g = blockIdx.x / group_blocks, gblock = blockIdx.x % group_blocks;
  const int64_t n_begin = static_cast<int64_t>(g) * group_n, n_end = n_begin + group_n;
  x += static_cast<int64_t>(g) * group_xcols;
  extern __shared__ float xscale[];  // [MT][qblocks] when qblock > 0
  const int64_t qblocks = qblock > 0 ? (w.k + qblock - 1) / qblock : 0;
  if (qblock > 0) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int64_t t = warp; t < M * qblocks; t += kWarps) {
      const int64_t m = t / qblocks, b0 = (t % qblocks) * qblock;
      const int64_t len = w.k - b0 < qblock ? w.k - b0 : qblock;
      const float amax = warp_block_amax(x + m * xld + b0, len, lane);
      if (lane == 0) xscale[t] = pow2_scale_d(amax, kFp8MaxD);
    }
    __syncthreads();
  }
  constexpr int E = stream_chunk_elems<F>;
  constexpr int U = kLoadsPerLane / R;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int part = warp % S;
  const int64_t n0 = n_begin + (static_cast<int64_t>(gblock) * (kWarps / S) + warp / S) * R;
  const int64_t nchunks = w.k / E;
  const uint8_t* srow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {  // rows past the group's end read its last row, not stored
    srow[r] = stream_scale_row<F>(w, n0 + r < n_end ? n0 + r : n_end - 1);
  }
  float acc[R][MT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[r][m] = 0.0f;

  for (int64_t c0 = static_cast<int64_t>(part) * 32 + lane; c0 < nchunks; c0 += 32 * S * U) {
    uint4 raw[R][U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + static_cast<int64_t>(u) * 32 * S;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int64_t n = n0 + r < n_end ? n0 + r : n_end - 1;
        raw[r][u] = c < nchunks ? load_stream_chunk<F>(w, n, c) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + static_cast<int64_t>(u) * 32 * S;
      if (c >= nchunks) break;
      float wv[R][E];
      float cs[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        decode_stream_chunk<F>(raw[r][u], wv[r]);
        cs[r] = stream_chunk_multiplier<F>(srow[r], c);
      }
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        if (m >= M) break;
        const float4* xr = reinterpret_cast<const float4*>(x + m * xld + c * E);
        float s[R];
#pragma unroll
        for (int r = 0; r < R; ++r) s[r] = 0.0f;
        const float qs = qblock > 0 ? xscale[m * qblocks + c * E / qblock] : 0.0f;
#pragma unroll
        for (int i = 0; i < E / 4; ++i) {
          float4 xv = __ldg(xr + i);
          if (qblock > 0) {
            xv.x = act_quant_fp8_d(xv.x, qs);
            xv.y = act_quant_fp8_d(xv.y, qs);
            xv.z = act_quant_fp8_d(xv.z, qs);
            xv.w = act_quant_fp8_d(xv.w, qs);
          }
#pragma unroll
          for (int r = 0; r < R; ++r) {
            s[r] = fmaf(wv[r][4 * i], xv.x, s[r]);
            s[r] = fmaf(wv[r][4 * i + 1], xv.y, s[r]);
            s[r] = fmaf(wv[r][4 * i + 2], xv.z, s[r]);
            s[r] = fmaf(wv[r][4 * i + 3], xv.w, s[r]);
          }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r][m] = fmaf(s[r], cs[r], acc[r][m]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[r][m] = warp_sum(acc[r][m]);
  if constexpr (S > 1) {
    __shared__ float part_sums[kWarps][R][MT];
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < MT; ++m) part_sums[warp][r][m] = acc[r][m];
    }
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < MT; ++m)
        for (int p = 1; p < S; ++p) acc[r][m] += part_sums[warp + p][r][m];
  }
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (n0 + r >= n_end) break;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m >= M) break;
      y[m * yld + n0 + r] = round_out ? bf16_round_d(acc[r][m]) : acc[r][m];
    }
  }
}

// Enough warps for the card (~16 per SM on 132 SMs): rows per warp R while there are rows to
// spare, else one row per warp and its chunks split over S warps.
constexpr int64_t kTargetWarps = 2048;

template <WFmt F, int MT, int R, int S>
void launch_form(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, int qblock,
                 int64_t groups, cudaStream_t stream) {
  const int64_t rows_per_block = kWarps / S * R, n = w.n / groups;
  const auto group_blocks = static_cast<unsigned>((n + rows_per_block - 1) / rows_per_block);
  const auto grid = static_cast<unsigned>(groups) * group_blocks;
  const size_t smem =
      qblock > 0 ? static_cast<size_t>(MT * ((w.k + qblock - 1) / qblock)) * sizeof(float) : 0;
  launch_kernel(gemv_stream_kernel<F, MT, R, S>, grid, kWarps * 32, smem, stream, x.data, x.ld,
                static_cast<int>(x.rows), w, y.data, y.ld, round_out, qblock, n,
                groups > 1 ? w.k : int64_t{0}, group_blocks);
}

// The most rows a warp takes without spilling (ptxas, sm_90a, <= 128 registers): each row holds
// a decoded chunk per load in flight.
template <WFmt F, int MT>
constexpr int kMaxRows = F == WFmt::kFp8 ? (MT == 1 ? 4 : 2) : (MT == 1 ? 2 : 1);

template <WFmt F, int MT>
void launch_mt(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, int qblock,
               int64_t groups, cudaStream_t stream) {
  const int64_t nchunks = w.k / stream_chunk_elems<F>, n = w.n;  // the whole weight's rows
  if constexpr (kMaxRows<F, MT> >= 4) {
    if (n >= 4 * kTargetWarps)
      return launch_form<F, MT, 4, 1>(x, w, y, round_out, qblock, groups, stream);
  }
  if constexpr (kMaxRows<F, MT> >= 2) {
    if (n >= 2 * kTargetWarps)
      return launch_form<F, MT, 2, 1>(x, w, y, round_out, qblock, groups, stream);
  }
  if (n >= kTargetWarps || nchunks < 64) {
    launch_form<F, MT, 1, 1>(x, w, y, round_out, qblock, groups, stream);
  } else if (2 * n >= kTargetWarps || nchunks < 128) {
    launch_form<F, MT, 1, 2>(x, w, y, round_out, qblock, groups, stream);
  } else if (4 * n >= kTargetWarps || nchunks < 256) {
    launch_form<F, MT, 1, 4>(x, w, y, round_out, qblock, groups, stream);
  } else {
    launch_form<F, MT, 1, 8>(x, w, y, round_out, qblock, groups, stream);
  }
}

}  // namespace

bool gemv_stream_supported(MatDesc x, const WeightDesc& w) {
  if (x.rows < 1 || x.rows > kGemvStreamMaxM) return false;
  if (x.ld % 4 != 0 || reinterpret_cast<uintptr_t>(x.data) % 16 != 0) return false;
  return stream_chunk_weight(w);
}

bool gemv_stream_quantizes(MatDesc x, const WeightDesc& w, int qblock) {
  // Every chunk inside one q-block; the scales fit the default shared memory.
  return gemv_stream_supported(x, w) && qblock > 0 && qblock % 32 == 0 &&
         kGemvStreamMaxM * ((w.k + qblock - 1) / qblock) * 4 <= 16384;
}

void launch_gemv_stream(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, int qblock,
                        cudaStream_t stream, int64_t groups) {
  const bool one = x.rows == 1;
  if (w.fmt == WFmt::kFp8) {
    one ? launch_mt<WFmt::kFp8, 1>(x, w, y, round_out, qblock, groups, stream)
        : launch_mt<WFmt::kFp8, kGemvStreamMaxM>(x, w, y, round_out, qblock, groups, stream);
  } else {
    one ? launch_mt<WFmt::kFp4, 1>(x, w, y, round_out, qblock, groups, stream)
        : launch_mt<WFmt::kFp4, kGemvStreamMaxM>(x, w, y, round_out, qblock, groups, stream);
  }
}

}  // namespace deepinfer::kernels::cuda
