// Decode GEMV for 4 < M <= 16 (FP8, FP4, BF16, F16 rows that are 16-byte aligned).
//
// With M activation rows every weight element feeds M FMAs, and in the one-row-per-group GEMV
// (gemv.cu) each of those FMAs fetches its activation from L1: at M = 16 the activation reads
// outnumber the weight bytes 64 to 1 and L1, not HBM, sets the speed. Here a thread group owns
// kRows = 4 consecutive output rows: it loads the 4 rows' 16-byte chunks at the same k (four
// loads in flight), decodes them 8 elements at a time, and reuses each activation value it
// fetches for all 4 rows, cutting activation traffic 4x. Sums per (row, m) are FP32 in a fixed
// order, reduced warp by warp, so results are deterministic and independent of other rows.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/gemm_internal.h"
#include "kernels/cuda/gemm/gemv_chunk.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kBlock = 128;
constexpr int kRows = 4;
constexpr int kMT = 16;

// Elements [8·sub, 8·sub + 8) of a 16-byte chunk, unscaled. `sub` is a run-time value (the sub
// loop is not unrolled, to bound register use), so words are picked with selects, never by
// indexing a register array.
template <WFmt F>
__device__ __forceinline__ void decode8(const uint4& raw, int sub, float* wv) {
  if constexpr (F == WFmt::kFp8) {
    const uint32_t lo = sub == 0 ? raw.x : raw.z, hi = sub == 0 ? raw.y : raw.w;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t word = i < 2 ? lo : hi;
      const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
          static_cast<__nv_fp8x2_storage_t>((word >> (16 * (i % 2))) & 0xffffu), __NV_E4M3);
      const float2 f = __half22float2(__half2(h));
      wv[2 * i] = f.x;
      wv[2 * i + 1] = f.y;
    }
  } else if constexpr (F == WFmt::kFp4) {
    const uint32_t word = sub == 0 ? raw.x : (sub == 1 ? raw.y : (sub == 2 ? raw.z : raw.w));
#pragma unroll
    for (int i = 0; i < 8; ++i) wv[i] = fp4_e2m1_to_f((word >> (4 * i)) & 0xfu);
  } else {
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint16_t b = static_cast<uint16_t>((words[i / 2] >> (16 * (i % 2))) & 0xffffu);
      wv[i] = F == WFmt::kBf16 ? bf16_bits_to_f(b) : f16_bits_to_f(b);
    }
  }
}

template <WFmt F>
__global__ void __launch_bounds__(kBlock)
    gemv_rows_kernel(const float* __restrict__ x, int64_t xld, int M, WeightDesc w,
                     float* __restrict__ y, int64_t yld, int tpr, bool x_vec4, bool round_out) {
  grid_dependency_sync();
  constexpr int E = chunk_elems(F);
  const int64_t n0 =
      (static_cast<int64_t>(blockIdx.x) * (kBlock / tpr) + threadIdx.x / tpr) * kRows;
  const int t = threadIdx.x % tpr;
  const int64_t row_bytes = weight_row_bytes(F, w.k);
  const uint8_t* base = static_cast<const uint8_t*>(w.w);
  float acc[kRows][kMT];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int m = 0; m < kMT; ++m) acc[r][m] = 0.0f;
  if (n0 < w.n) {
    const int64_t nchunks = w.k / E;
    for (int64_t c = t; c < nchunks; c += tpr) {
      uint4 raw[kRows];
      float cs[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        // Rows past N re-read the last row; their sums are never stored.
        const int64_t n = n0 + r < w.n ? n0 + r : w.n - 1;
        raw[r] = __ldg(reinterpret_cast<const uint4*>(base + n * row_bytes) + c);
        cs[r] = chunk_scale<F>(w, n, c);
      }
#pragma unroll 1
      for (int sub = 0; sub < E / 8; ++sub) {
        float wv[kRows][8];
#pragma unroll
        for (int r = 0; r < kRows; ++r) decode8<F>(raw[r], sub, wv[r]);
        const int64_t k0 = c * E + sub * 8;
#pragma unroll
        for (int m = 0; m < kMT; ++m) {
          if (m < M) {
            const float* xr = x + m * xld + k0;
            float xv[8];
            if (x_vec4) {
              const float4 a = __ldg(reinterpret_cast<const float4*>(xr));
              const float4 b = __ldg(reinterpret_cast<const float4*>(xr + 4));
              xv[0] = a.x, xv[1] = a.y, xv[2] = a.z, xv[3] = a.w;
              xv[4] = b.x, xv[5] = b.y, xv[6] = b.z, xv[7] = b.w;
            } else {
#pragma unroll
              for (int i = 0; i < 8; ++i) xv[i] = __ldg(xr + i);
            }
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              float s = 0.0f;
#pragma unroll
              for (int i = 0; i < 8; ++i) s = fmaf(wv[r][i], xv[i], s);
              acc[r][m] = fmaf(s, cs[r], acc[r][m]);
            }
          }
        }
      }
    }
  }
  __shared__ float red[kBlock / 32][kRows * kMT];
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int m = 0; m < kMT; ++m) {
      const float v = warp_sum(acc[r][m]);
      if (lane == 0) red[wid][r * kMT + m] = v;
    }
  }
  __syncthreads();
  const int w0 = (threadIdx.x / tpr) * (tpr / 32), nw = tpr / 32;
  for (int i = t; i < kRows * kMT; i += tpr) {
    const int r = i / kMT, m = i % kMT;
    const int64_t n = n0 + r;
    if (m < M && n < w.n) {
      float s = 0.0f;
      for (int j = 0; j < nw; ++j) s += red[w0 + j][i];
      y[m * yld + n] = round_out ? bf16_round_d(s) : s;
    }
  }
}

}  // namespace

bool gemv_rows_supported(const WeightDesc& w) {
  return w.fmt == WFmt::kFp8 || w.fmt == WFmt::kFp4 || w.fmt == WFmt::kBf16 || w.fmt == WFmt::kF16;
}

void launch_gemv_rows(MatDesc x, const WeightDesc& w, MatDesc y, int tpr, bool x_vec4,
                      bool round_out, cudaStream_t stream) {
  const int64_t rows_per_block = static_cast<int64_t>(kBlock / tpr) * kRows;
  const unsigned grid = static_cast<unsigned>((w.n + rows_per_block - 1) / rows_per_block);
  const int M = static_cast<int>(x.rows);
  dispatch_wfmt(w.fmt, [&](auto f) {
    // gemv_rows_supported() is false for F32: gemv.cu keeps it.
    if constexpr (decltype(f)::value != WFmt::kF32) {
      launch_kernel(gemv_rows_kernel<decltype(f)::value>, grid, kBlock, 0, stream, x.data, x.ld, M,
                    w, y.data, y.ld, tpr, x_vec4, round_out);
    }
  });
}

}  // namespace deepinfer::kernels::cuda
