// Decode GEMV (M <= 16): the bandwidth-bound path, where each weight byte is read once per call.
//
// A group of `tpr` threads (32, 64 or 128) owns one output row n. Its threads walk the row in
// 16-byte chunks (16 FP8, 32 FP4, 8 BF16/F16 or 4 F32 weights), decode each chunk in registers
// (FP8 through the hardware E4M3x2 -> half2 conversion), dot it with all M activation rows and
// scale each chunk's partial sum by its block scale (read through L1, float4 when
// aligned). Partial sums are reduced warp by warp in a fixed order, so the result does not depend
// on the grid and a row's output does not depend on the other rows of the batch. A scalar
// variant (one element at a time through weight_at_d) covers rows that are not 16-byte aligned
// or FP8 blocks that are not a multiple of 16 wide. Two variants of the activation load are
// chosen at run time, never per element.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/gemm_internal.h"
#include "kernels/cuda/gemm/gemv_chunk.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kBlock = 128;
constexpr int kRowsMT = 16;

// Decodes the 16 bytes at chunk c of row n into wv, unscaled (chunk_scale gives the scale).
template <WFmt F>
__device__ __forceinline__ void decode_chunk(const WeightDesc& w, int64_t n, int64_t c, float* wv) {
  const int64_t row_bytes = weight_row_bytes(F, w.k);
  const uint4 raw =
      __ldg(reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.w) + n * row_bytes) + c);
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  if constexpr (F == WFmt::kFp8) {
    // Two E4M3 codes -> half2 in one hardware conversion (exact), then to FP32. The block scale
    // is applied by the caller to the chunk's partial sum.
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
          static_cast<__nv_fp8x2_storage_t>((words[i / 2] >> (16 * (i % 2))) & 0xffffu), __NV_E4M3);
      const float2 f = __half22float2(__half2(h));
      wv[2 * i] = f.x;
      wv[2 * i + 1] = f.y;
    }
  } else if constexpr (F == WFmt::kFp4) {
#pragma unroll
    for (int i = 0; i < 32; ++i) wv[i] = fp4_e2m1_to_f((words[i / 8] >> (4 * (i % 8))) & 0xfu);
  } else if constexpr (F == WFmt::kBf16) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      wv[i] = bf16_bits_to_f(static_cast<uint16_t>((words[i / 2] >> (16 * (i % 2))) & 0xffffu));
  } else if constexpr (F == WFmt::kF16) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      wv[i] = f16_bits_to_f(static_cast<uint16_t>((words[i / 2] >> (16 * (i % 2))) & 0xffffu));
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) wv[i] = __uint_as_float(words[i]);
  }
}

// Group reduction of acc[MT] over the tpr threads of each row; thread 0 of the group writes.
template <int MT>
__device__ __forceinline__ void reduce_and_store(float* acc, int M, int tpr, int64_t n, int64_t N,
                                                 float* y, int64_t yld, bool round_out) {
  __shared__ float red[kBlock / 32][MT];
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < MT; ++m) acc[m] = warp_sum(acc[m]);
  if (lane == 0) {
#pragma unroll
    for (int m = 0; m < MT; ++m) red[wid][m] = acc[m];
  }
  __syncthreads();
  const int t = threadIdx.x % tpr;
  if (t == 0 && n < N) {
    const int w0 = threadIdx.x >> 5, nw = tpr / 32;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m >= M) break;
      float s = 0.0f;
      for (int i = 0; i < nw; ++i) s += red[w0 + i][m];
      y[m * yld + n] = round_out ? bf16_round_d(s) : s;
    }
  }
}

template <WFmt F, int MT>
__global__ void __launch_bounds__(kBlock)
    gemv_vec(const float* __restrict__ x, int64_t xld, int M, WeightDesc w, float* __restrict__ y,
             int64_t yld, int tpr, bool x_vec4, bool round_out) {
  grid_dependency_sync();
  constexpr int E = chunk_elems(F);
  const int64_t n = static_cast<int64_t>(blockIdx.x) * (kBlock / tpr) + threadIdx.x / tpr;
  const int t = threadIdx.x % tpr;
  float acc[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) acc[m] = 0.0f;
  if (n < w.n) {
    const int64_t nchunks = w.k / E;
#pragma unroll 2
    for (int64_t c = t; c < nchunks; c += tpr) {
      float wv[E];
      decode_chunk<F>(w, n, c, wv);
      const float cs = chunk_scale<F>(w, n, c);
      const int64_t k0 = c * E;
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        if (m < M) {
          const float* xr = x + m * xld + k0;
          float s = 0.0f;
          if (x_vec4) {
#pragma unroll
            for (int i = 0; i < E; i += 4) {
              const float4 xv = __ldg(reinterpret_cast<const float4*>(xr + i));
              s = fmaf(wv[i], xv.x, s);
              s = fmaf(wv[i + 1], xv.y, s);
              s = fmaf(wv[i + 2], xv.z, s);
              s = fmaf(wv[i + 3], xv.w, s);
            }
          } else {
#pragma unroll
            for (int i = 0; i < E; ++i) s = fmaf(wv[i], __ldg(xr + i), s);
          }
          acc[m] = fmaf(s, cs, acc[m]);
        }
      }
    }
  }
  reduce_and_store<MT>(acc, M, tpr, n, w.n, y, yld, round_out);
}

template <int MT>
__global__ void __launch_bounds__(kBlock)
    gemv_scalar(const float* __restrict__ x, int64_t xld, int M, WeightDesc w,
                float* __restrict__ y, int64_t yld, int tpr, bool round_out) {
  grid_dependency_sync();
  const int64_t n = static_cast<int64_t>(blockIdx.x) * (kBlock / tpr) + threadIdx.x / tpr;
  const int t = threadIdx.x % tpr;
  float acc[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) acc[m] = 0.0f;
  if (n < w.n) {
    for (int64_t k = t; k < w.k; k += tpr) {
      const float wv = weight_at_d(w, n, k);
#pragma unroll
      for (int m = 0; m < MT; ++m)
        if (m < M) acc[m] = fmaf(wv, x[m * xld + k], acc[m]);
    }
  }
  reduce_and_store<MT>(acc, M, tpr, n, w.n, y, yld, round_out);
}

template <int MT>
void launch_mt(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, cudaStream_t stream) {
  const int E = chunk_elems(w.fmt);
  const int64_t row_bytes = weight_row_bytes(w.fmt, w.k);
  const bool vec = row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(w.w) % 16 == 0 &&
                   (w.fmt != WFmt::kFp8 || w.block_k % 16 == 0) &&
                   (w.fmt != WFmt::kFp4 || w.block_k % 32 == 0);
  const bool x_vec4 = x.ld % 4 == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
  // Threads per row: enough chunks for each thread to load at least two.
  const int64_t units = vec ? w.k / E : w.k;
  const int tpr = units >= 256 ? 128 : (units >= 128 ? 64 : 32);
  const int rows_per_block = kBlock / tpr;
  const unsigned grid = static_cast<unsigned>((w.n + rows_per_block - 1) / rows_per_block);
  const int M = static_cast<int>(x.rows);
  if (!vec) {
    launch_kernel(gemv_scalar<MT>, grid, kBlock, 0, stream, x.data, x.ld, M, w, y.data, y.ld, tpr,
                  round_out);
    return;
  }
  if constexpr (MT == kRowsMT) {  // 4 < M <= 16: four rows per group (gemv_rows.cu)
    if (gemv_rows_supported(w)) {
      launch_gemv_rows(x, w, y, tpr, x_vec4, round_out, stream);
    } else {
      launch_kernel(gemv_vec<WFmt::kF32, MT>, grid, kBlock, 0, stream, x.data, x.ld, M, w, y.data,
                    y.ld, tpr, x_vec4, round_out);
    }
    return;
  }
  dispatch_wfmt(w.fmt, [&](auto f) {
    launch_kernel(gemv_vec<decltype(f)::value, MT>, grid, kBlock, 0, stream, x.data, x.ld, M, w,
                  y.data, y.ld, tpr, x_vec4, round_out);
  });
}

}  // namespace

void launch_gemv(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, cudaStream_t stream) {
  if (x.rows <= 1) {
    launch_mt<1>(x, w, y, round_out, stream);
  } else if (x.rows <= 4) {
    launch_mt<4>(x, w, y, round_out, stream);
  } else {
    launch_mt<16>(x, w, y, round_out, stream);
  }
}

void launch_linear_invariant(MatDesc x, const WeightDesc& w, MatDesc y, cudaStream_t stream) {
  if (x.rows == 0 || w.n == 0) return;
  launch_gemm_tiled(x, w, y, stream);
}

void launch_linear(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, cudaStream_t stream,
                   bool stream_gemv) {
  if (x.rows == 0 || w.n == 0) return;
  if (stream_gemv && gemv_stream_supported(x, w)) {
    launch_gemv_stream(x, w, y, round_out, 0, stream);
  } else if (x.rows <= kGemvMaxM) {
    launch_gemv(x, w, y, round_out, stream);
  } else {
    launch_gemm_tiled(x, w, y, stream);
    if (round_out) launch_round_bf16(y, stream);
  }
}

bool launch_linear_grouped(MatDesc x, const WeightDesc& w, int64_t groups, MatDesc y,
                           bool round_out, cudaStream_t stream) {
  if (groups < 1 || w.n % groups != 0 || x.cols != groups * w.k || w.k % 4 != 0) return false;
  MatDesc first = x;  // a group's view of x: what the GEMV's alignment rules look at
  first.cols = w.k;
  if (!gemv_stream_supported(first, w)) return false;
  if (x.rows > 0 && w.n > 0) launch_gemv_stream(x, w, y, round_out, 0, stream, groups);
  return true;
}

bool launch_linear_quantized(MatDesc x, const WeightDesc& w, MatDesc y, int act_block,
                             bool round_out, cudaStream_t stream) {
  if (x.rows == 0 || w.n == 0 || !gemv_stream_quantizes(x, w, act_block)) return false;
  launch_gemv_stream(x, w, y, round_out, act_block, stream);
  return true;
}

}  // namespace deepinfer::kernels::cuda
