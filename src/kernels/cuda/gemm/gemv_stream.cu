// Decode GEMV for M <= 4 rows on FP8 (128 x 128 E8M0 blocks) and FP4 (1 x 32 E8M0 blocks)
// weights: the step's bandwidth-bound products at batch 1-4 (V4's wq_a / wq_b / wkv / wo_b, the
// compressor and indexer projections, the experts when the MoE takes linears).
//
// gemv.cu's kernel gives each output row a group of threads and its whole block a few rows, so
// a thread has one or two 16-byte loads in flight and every block ends in a shared-memory
// reduction and barrier: it streams 32 MB weights at ~25% of the copy bandwidth on the H200
// (bench/results/cuda_fp8_gemm_perf_h200_2026-12-03_stop30.txt, M=1). Here a warp owns R
// consecutive rows (or 1 row split over S warps of its block when rows are few) and walks them
// together: per iteration every lane issues R x U independent 16-byte loads before it decodes any
// of them, each activation chunk is loaded once for its R rows, and the block-scale index is a
// shift (the block shapes are compile-time). Lanes take chunks lane, lane + 32 S, ...; a lane sums
// each chunk in ascending k (FP32 FMAs), scales it by its block scale into its accumulator, the
// warp sums its lanes in a fixed butterfly and the S warps of a row add up in warp order. A row's
// value therefore depends only on its own input row, never on the batch or the grid. Chunks are
// decoded by gemm/stream_chunk.cuh.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/gemm_internal.h"
#include "kernels/cuda/gemm/stream_chunk.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kWarps = 8;  // warps per block
constexpr int kLoadsPerLane = 8;  // R x U: 16-byte loads each lane has in flight per iteration

// The loaded chunks c0 + u * stride (u < U) of R rows: decoded, dotted with the M input rows'
// chunks (each input chunk read once for the R rows), scaled into acc.
template <WFmt F, int MT, int R, int U>
__device__ __forceinline__ void accumulate_loaded(const uint4 (&raw)[R][U], int64_t c0,
                                                  int64_t stride, int64_t nchunks,
                                                  const uint8_t* const (&srow)[R],
                                                  const float* __restrict__ x, int64_t xld, int M,
                                                  float (&acc)[R][MT]) {
  constexpr int E = stream_chunk_elems<F>;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t c = c0 + static_cast<int64_t>(u) * stride;
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
#pragma unroll
      for (int i = 0; i < E / 4; ++i) {
        const float4 xv = __ldg(xr + i);
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

// Chunks c0 + u * stride (u < U) of rows n0 .. n0 + R - 1 (rows past N read row N - 1; chunks
// past the row read zeros), all loads issued before any is used.
template <WFmt F, int R, int U>
__device__ __forceinline__ void load_chunks(const WeightDesc& w, int64_t n0, int64_t c0,
                                            int64_t stride, int64_t nchunks, uint4 (&raw)[R][U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t c = c0 + static_cast<int64_t>(u) * stride;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t n = n0 + r < w.n ? n0 + r : w.n - 1;
      raw[r][u] = c < nchunks ? load_stream_chunk<F>(w, n, c) : make_uint4(0, 0, 0, 0);
    }
  }
}

template <WFmt F, int MT, int R, int S>
__global__ void __launch_bounds__(kWarps * 32, 2)  // <= 128 registers: two blocks per SM
    gemv_stream_kernel(const float* __restrict__ x, int64_t xld, int M, WeightDesc w,
                       float* __restrict__ y, int64_t yld, bool round_out) {
  constexpr int E = stream_chunk_elems<F>;
  constexpr int U = kLoadsPerLane / R;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int part = warp % S;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / S) + warp / S) * R;
  const int64_t nchunks = w.k / E;
  const uint8_t* srow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {  // rows past N read row N - 1 and are not stored
    srow[r] = stream_scale_row<F>(w, n0 + r < w.n ? n0 + r : w.n - 1);
  }
  float acc[R][MT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[r][m] = 0.0f;

  for (int64_t c0 = static_cast<int64_t>(part) * 32 + lane; c0 < nchunks; c0 += 32 * S * U) {
    uint4 raw[R][U];
    load_chunks<F, R, U>(w, n0, c0, 32 * S, nchunks, raw);
    accumulate_loaded<F, MT, R, U>(raw, c0, 32 * S, nchunks, srow, x, xld, M, acc);
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
    if (n0 + r >= w.n) break;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m >= M) break;
      y[m * yld + n0 + r] = round_out ? bf16_round_d(acc[r][m]) : acc[r][m];
    }
  }
}

// Rows to spare: a grid of two blocks per SM whose warps walk row groups g, g + G, ... (G warps
// in all), the next step's loads (the group's next chunks, or the next group's first) issued
// before the current step is decoded. gemv_stream_kernel's warps own one group each and drain
// their loads at its end (ncu, wq_b at M = 1: 43% of the DRAM bandwidth, 4 warps per scheduler
// stalled on L1TEX). A lane takes its chunks in the same order as there, so the bits are the same.
template <WFmt F, int MT, int R, int U>
__global__ void __launch_bounds__(kWarps * 32, 2)  // <= 128 registers: two blocks per SM
    gemv_persistent_kernel(const float* __restrict__ x, int64_t xld, int M, WeightDesc w,
                           float* __restrict__ y, int64_t yld, bool round_out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t nchunks = w.k / stream_chunk_elems<F>;
  const int64_t groups = (w.n + R - 1) / R, gstride = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t iters = (nchunks + 32 * U - 1) / (32 * U);
  int64_t g = static_cast<int64_t>(blockIdx.x) * kWarps + warp, it = 0;
  if (g >= groups) return;  // whole warps; no block barrier below
  uint4 cur[R][U], nxt[R][U];
  load_chunks<F, R, U>(w, g * R, lane, 32, nchunks, cur);
  float acc[R][MT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[r][m] = 0.0f;
  while (true) {
    int64_t ng = g, nit = it + 1;
    if (nit == iters) ng = g + gstride, nit = 0;
    const bool more = ng < groups;
    if (more) load_chunks<F, R, U>(w, ng * R, lane + 32 * U * nit, 32, nchunks, nxt);
    const uint8_t* srow[R];
#pragma unroll
    for (int r = 0; r < R; ++r) srow[r] = stream_scale_row<F>(w, g * R + r < w.n ? g * R + r : w.n - 1);
    accumulate_loaded<F, MT, R, U>(cur, lane + 32 * U * it, 32, nchunks, srow, x, xld, M, acc);
    if (nit == 0) {  // group g is complete
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const float v = warp_sum(acc[r][m]);
          acc[r][m] = 0.0f;
          if (lane == 0 && m < M && g * R + r < w.n)
            y[m * yld + g * R + r] = round_out ? bf16_round_d(v) : v;
        }
      }
    }
    if (!more) break;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < U; ++u) cur[r][u] = nxt[r][u];
    g = ng, it = nit;
  }
}

int multiprocessors() {
  static const int count = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
      n = 132;  // an H100/H200's count: only the grid size depends on it
    return n;
  }();
  return count;
}

template <WFmt F, int MT, int R, int U>
void launch_persistent(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out,
                       cudaStream_t stream) {
  const int64_t groups = (w.n + R - 1) / R;
  const int64_t blocks = std::min<int64_t>((groups + kWarps - 1) / kWarps, 2 * multiprocessors());
  gemv_persistent_kernel<F, MT, R, U><<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(
      x.data, x.ld, static_cast<int>(x.rows), w, y.data, y.ld, round_out);
}

// Enough warps for the card (~16 per SM on 132 SMs): rows per warp R while there are rows to
// spare, else one row per warp and its chunks split over S warps.
constexpr int64_t kTargetWarps = 2048;

template <WFmt F, int MT, int R, int S>
void launch_form(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, cudaStream_t stream) {
  const int64_t rows_per_block = kWarps / S * R;
  const unsigned grid = static_cast<unsigned>((w.n + rows_per_block - 1) / rows_per_block);
  gemv_stream_kernel<F, MT, R, S><<<grid, kWarps * 32, 0, stream>>>(
      x.data, x.ld, static_cast<int>(x.rows), w, y.data, y.ld, round_out);
}

// The most rows a warp takes without spilling (ptxas, sm_90a, <= 128 registers): each row holds
// a decoded chunk per load in flight.
template <WFmt F, int MT>
constexpr int kMaxRows = F == WFmt::kFp8 ? (MT == 1 ? 4 : 2) : (MT == 1 ? 2 : 1);

template <WFmt F, int MT>
void launch_mt(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, bool persistent,
               cudaStream_t stream) {
  const int64_t nchunks = w.k / stream_chunk_elems<F>;
  if (persistent && w.n >= kTargetWarps) {  // two FP8 rows per warp; FP4 rows hold 32 weights
    if constexpr (F == WFmt::kFp8) {
      return launch_persistent<F, MT, 2, MT == 1 ? 4 : 2>(x, w, y, round_out, stream);
    } else {
      return launch_persistent<F, MT, 1, 4>(x, w, y, round_out, stream);
    }
  }
  if constexpr (kMaxRows<F, MT> >= 4) {
    if (w.n >= 4 * kTargetWarps) return launch_form<F, MT, 4, 1>(x, w, y, round_out, stream);
  }
  if constexpr (kMaxRows<F, MT> >= 2) {
    if (w.n >= 2 * kTargetWarps) return launch_form<F, MT, 2, 1>(x, w, y, round_out, stream);
  }
  if (w.n >= kTargetWarps || nchunks < 64) {
    launch_form<F, MT, 1, 1>(x, w, y, round_out, stream);
  } else if (2 * w.n >= kTargetWarps || nchunks < 128) {
    launch_form<F, MT, 1, 2>(x, w, y, round_out, stream);
  } else if (4 * w.n >= kTargetWarps || nchunks < 256) {
    launch_form<F, MT, 1, 4>(x, w, y, round_out, stream);
  } else {
    launch_form<F, MT, 1, 8>(x, w, y, round_out, stream);
  }
}

}  // namespace

bool gemv_stream_supported(MatDesc x, const WeightDesc& w) {
  if (x.rows < 1 || x.rows > kGemvStreamMaxM) return false;
  if (x.ld % 4 != 0 || reinterpret_cast<uintptr_t>(x.data) % 16 != 0) return false;
  return stream_chunk_weight(w);
}

void launch_gemv_stream(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, bool persistent,
                        cudaStream_t stream) {
  const bool one = x.rows == 1;
  if (w.fmt == WFmt::kFp8) {
    one ? launch_mt<WFmt::kFp8, 1>(x, w, y, round_out, persistent, stream)
        : launch_mt<WFmt::kFp8, kGemvStreamMaxM>(x, w, y, round_out, persistent, stream);
  } else {
    one ? launch_mt<WFmt::kFp4, 1>(x, w, y, round_out, persistent, stream)
        : launch_mt<WFmt::kFp4, kGemvStreamMaxM>(x, w, y, round_out, persistent, stream);
  }
}

}  // namespace deepinfer::kernels::cuda
