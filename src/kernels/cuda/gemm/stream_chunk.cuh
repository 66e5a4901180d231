// The 16-byte weight chunk of the streaming GEMV (gemm/gemv_stream.cu): FP8 with 128 x 128 E8M0 blocks (16 weights) or FP4 with 1 x 32 E8M0 blocks (32 weights),
// decoded in registers through the hardware E4M3x2 -> half2 conversion. FP4 codes are widened to
// E4M3 bytes first (e2m1 -> e4m3 is a bit move giving the value times 2^-6); the 2^6 is folded
// into the chunk's multiplier, exactly (a power of two).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {

template <WFmt F>
constexpr int stream_chunk_elems = F == WFmt::kFp8 ? 16 : 32;  // weights per 16-byte chunk

// Two E4M3 bytes (low 16 bits of v) -> two floats, exactly.
__device__ __forceinline__ float2 e4m3x2_to_float2(uint32_t v) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xffffu), __NV_E4M3);
  return __half22float2(__half2(h));
}

// The chunk's 16 or 32 weights as floats, in k order (FP4: times 2^-6, see the file comment).
template <WFmt F>
__device__ __forceinline__ void decode_stream_chunk(const uint4& raw, float* wv) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  if constexpr (F == WFmt::kFp8) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float2 a = e4m3x2_to_float2(words[q]), b = e4m3x2_to_float2(words[q] >> 16);
      wv[4 * q] = a.x, wv[4 * q + 1] = a.y, wv[4 * q + 2] = b.x, wv[4 * q + 3] = b.y;
    }
  } else {
    // Byte j of `even` holds nibble 2j as an E4M3 code, byte j of `odd` nibble 2j + 1: the
    // magnitude bits (e1 e0 m) move to bits 4..2, the sign to bit 7.
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint32_t lo = words[q] & 0x0f0f0f0fu, hi = (words[q] >> 4) & 0x0f0f0f0fu;
      const uint32_t even = ((lo & 0x07070707u) << 2) | ((lo & 0x08080808u) << 4);
      const uint32_t odd = ((hi & 0x07070707u) << 2) | ((hi & 0x08080808u) << 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 e = e4m3x2_to_float2(even >> (16 * h)), o = e4m3x2_to_float2(odd >> (16 * h));
        float* d = wv + 8 * q + 4 * h;
        d[0] = e.x, d[1] = o.x, d[2] = e.y, d[3] = o.y;
      }
    }
  }
}

// The FP32 multiplier of a chunk's partial sum: its E8M0 block scale (FP4: times 2^6).
template <WFmt F>
__device__ __forceinline__ float stream_chunk_multiplier(const uint8_t* scale_row, int64_t c) {
  if constexpr (F == WFmt::kFp8) return e8m0_to_f(__ldg(scale_row + (c >> 3)));  // 128 / 16
  return e8m0_to_f(__ldg(scale_row + c)) * 64.0f;
}

// Chunk c of row n of w (16-byte aligned rows), read through the non-coherent cache.
template <WFmt F>
__device__ __forceinline__ uint4 load_stream_chunk(const WeightDesc& w, int64_t n, int64_t c) {
  const int64_t row_bytes = F == WFmt::kFp8 ? w.k : w.k / 2;
  return __ldg(reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.w) + n * row_bytes) +
               c);
}

// The E8M0 scales of row n (FP8: of its 128-row block).
template <WFmt F>
__device__ __forceinline__ const uint8_t* stream_scale_row(const WeightDesc& w, int64_t n) {
  return static_cast<const uint8_t*>(w.scale) + (F == WFmt::kFp8 ? n / 128 : n) * w.scale_ld;
}

// Whether w has the layout these helpers assume.
__host__ __device__ inline bool stream_chunk_weight(const WeightDesc& w) {
  if (w.sfmt != SFmt::kE8m0 || reinterpret_cast<uintptr_t>(w.w) % 16 != 0) return false;
  if (w.fmt == WFmt::kFp8) return w.block_n == 128 && w.block_k == 128 && w.k % 16 == 0;
  if (w.fmt == WFmt::kFp4) return w.block_n == 1 && w.block_k == 32 && w.k % 32 == 0;
  return false;
}

}  // namespace deepinfer::kernels::cuda
