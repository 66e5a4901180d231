// Device helpers shared by every kernel family: scalar format decoders, the quantization rules
// of backend/quant.h in device form (bit-identical to the host definitions: same operations in
// the same order, no fast-math), warp/block reductions and launch-geometry helpers.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {

// The first statement of every kernel of this library (tools/check_kernel_launches.py checks it):
// with programmatic dependent launch (launch.h) a kernel may start before the previous kernel
// of its stream has finished; griddepcontrol.wait holds it until that kernel has completed and
// its writes are visible (and, as that kernel waited for its own predecessor, every earlier
// one). launch_dependents then lets the next kernel start launching while this one runs: its
// blocks are scheduled only once all of this grid's have started, so it never takes an SM this
// grid still needs. Both are no-ops in a plain launch.
__device__ __forceinline__ void grid_dependency_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream serialization when
// programmatic_launch() is on, and with the grid's blocks in clusters of `cluster` along x when
// it is not 0 (grid.x a multiple of it; distributed shared memory and cluster barriers, sm_90
// and later). Only for kernels that begin with grid_dependency_sync().
template <typename... Params, typename... Args>
inline void launch_kernel_in_clusters(void (*kernel)(Params...), dim3 grid, dim3 block,
                                      unsigned cluster, size_t smem, cudaStream_t stream,
                                      Args&&... args) {
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = programmatic_launch() ? 1 : 0;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = cluster;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = cluster > 0 ? 2 : 1;
  cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
  count_kernel_launch(reinterpret_cast<const void*>(kernel));
}

template <typename... Params, typename... Args>
inline void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, Args&&... args) {
  launch_kernel_in_clusters(kernel, grid, block, 0, smem, stream, std::forward<Args>(args)...);
}

inline constexpr float kFp8MaxD = 448.0f;
inline constexpr float kFp4MaxD = 6.0f;
inline constexpr float kAmaxFloorD = 1e-4f;
inline constexpr float kFp4AmaxFloorD = 6.0f * 1.17549435e-38f;  // backend/quant.h kFp4AmaxFloor
inline constexpr float kNvfp4AmaxFloorD = 6.0f / 512.0f;  // backend/quant.h kNvfp4AmaxFloor

// Bit casts usable on host and device (memcpy of 4 bytes compiles to a register move), so the
// scalar rules below can be checked exhaustively on the CPU (tests/ops/cuda/kernels_host_test.cu).
#define DI_HD __host__ __device__ __forceinline__
DI_HD uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
DI_HD float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

DI_HD float bf16_bits_to_f(uint16_t b) { return u2f(static_cast<uint32_t>(b) << 16); }
DI_HD float f16_bits_to_f(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float mag = static_cast<float>(m) * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -mag : mag;
  }
  if (e == 31) return u2f(sign | 0x7f800000u | (m << 13));
  return u2f(sign | ((e + 112u) << 23) | (m << 13));
}
// E4M3 (no inf; 0x7f/0xff = NaN) -> float, by bit arithmetic.
DI_HD float fp8_e4m3_to_f(uint32_t v) {
  const uint32_t sign = (v & 0x80u) << 24;
  const uint32_t e = (v >> 3) & 0xfu, m = v & 7u;
  if (e == 15 && m == 7) return u2f(0x7fc00000u);
  if (e == 0) {
    const float mag = static_cast<float>(m) * 0.001953125f;  // m · 2^-9
    return sign ? -mag : mag;
  }
  return u2f(sign | ((e + 120u) << 23) | (m << 20));
}
DI_HD float e8m0_to_f(uint32_t e) {
  if (e == 0xffu) return u2f(0x7fc00000u);
  if (e == 0) return 5.877471754111438e-39f;  // 2^-127, subnormal
  return u2f(e << 23);
}
DI_HD float fp4_e2m1_to_f(uint32_t code) {
  const uint32_t c = code & 7u;
  // 0, .5, 1, 1.5, 2, 3, 4, 6
  const float mag =
      c < 2 ? 0.5f * static_cast<float>(c) : u2f(((126u + (c >> 1)) << 23) | ((c & 1u) << 22));
  return (code & 8u) ? -mag : mag;
}

// One RoPE pair rotation, (a + ib)·(c + is), each product and the sum rounded on its own
// (__fmul_rn / __fadd_rn are never contracted into an FMA): every kernel that rotates (rope.cu,
// rows_finish.cu) then gives the same bits, whatever the compiler fuses around it, and they
// are the CPU reference's arithmetic.
__device__ __forceinline__ void rope_rotate_d(float& a, float& b, float c, float s) {
  const float ra = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  const float rb = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
  a = ra;
  b = rb;
}
// The pair of frequency `freq` at position `pos` (the angle pos · freq in FP32, accurate
// cosf / sinf; `inverse`: the conjugate): the whole RoPE step of every rotating kernel.
__device__ __forceinline__ void rope_pair_d(float& a, float& b, float pos, float freq,
                                            bool inverse) {
  const float angle = pos * freq;
  const float s = sinf(angle);
  rope_rotate_d(a, b, cosf(angle), inverse ? -s : s);
}

// Round to nearest even BF16, NaN kept quiet (same as base/numeric_types.h float_to_bf16).
DI_HD float bf16_round_d(float v) {
  uint32_t bits = f2u(v);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return u2f(((bits >> 16) | 0x40u) << 16);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  return u2f(bits);
}

// backend/quant.h pow2_scale: ratio = max(amax, floor) · fl(1/qmax); 2^(exp + (mantissa != 0)).
DI_HD float pow2_scale_d(float amax, float qmax, float floor = kAmaxFloorD) {
  const float ratio = (amax < floor ? floor : amax) * (1.0f / qmax);
  const uint32_t bits = f2u(ratio);
  const int e = static_cast<int>((bits >> 23) & 0xffu) - 127 + ((bits & 0x7fffffu) != 0 ? 1 : 0);
  return ldexpf(1.0f, e);
}
// backend/quant.h fp8_e4m3_round.
DI_HD float fp8_e4m3_round_d(float v) {
  const float av = fabsf(v);
  const float a = av < kFp8MaxD ? av : kFp8MaxD;
  uint32_t bits = f2u(a);
  bits = (bits + 0x7ffffu + ((bits >> 20) & 1u)) & ~0xfffffu;
  const float normal = u2f(bits);
  const float sub = rintf(a * 512.0f) * (1.0f / 512.0f);
  const float r = a < 0.015625f ? sub : normal;
  return v != v ? v : copysignf(r, v);
}
// One element of an FP8 act-quantization round trip with block scale s (backend/quant.h): the
// value v / s clamped to ±448, rounded to E4M3, times s.
DI_HD float act_quant_fp8_d(float v, float s) {
  float q = v / s;
  q = q > kFp8MaxD ? kFp8MaxD : (q < -kFp8MaxD ? -kFp8MaxD : q);
  return fp8_e4m3_round_d(q) * s;
}
// backend/quant.h float_to_fp4_e2m1 + decode.
DI_HD float fp4_e2m1_round_d(float v) {
  const float a = fabsf(v);
  float r;
  if (a <= 0.25f)
    r = 0.0f;
  else if (a < 0.75f)
    r = 0.5f;
  else if (a <= 1.25f)
    r = 1.0f;
  else if (a < 1.75f)
    r = 1.5f;
  else if (a <= 2.5f)
    r = 2.0f;
  else if (a < 3.5f)
    r = 3.0f;
  else if (a <= 5.0f)
    r = 4.0f;
  else
    r = 6.0f;
  return signbit(v) ? -r : r;
}

__device__ __forceinline__ float scale_at(const WeightDesc& w, int64_t srow, int64_t scol) {
  const int64_t i = srow * w.scale_ld + scol;
  switch (w.sfmt) {
    case SFmt::kE8m0:
      return e8m0_to_f(static_cast<const uint8_t*>(w.scale)[i]);
    case SFmt::kF32:
      return static_cast<const float*>(w.scale)[i];
    case SFmt::kBf16:
      return bf16_bits_to_f(static_cast<const uint16_t*>(w.scale)[i]);
  }
  return 0.0f;
}

// Element (row, col) of any weight, dequantized: the slow generic path (tiles, odd shapes).
__device__ __forceinline__ float weight_at_d(const WeightDesc& w, int64_t row, int64_t col) {
  switch (w.fmt) {
    case WFmt::kBf16:
      return bf16_bits_to_f(static_cast<const uint16_t*>(w.w)[row * w.k + col]);
    case WFmt::kF16:
      return f16_bits_to_f(static_cast<const uint16_t*>(w.w)[row * w.k + col]);
    case WFmt::kF32:
      return static_cast<const float*>(w.w)[row * w.k + col];
    case WFmt::kFp8:
      return fp8_e4m3_to_f(static_cast<const uint8_t*>(w.w)[row * w.k + col]) *
             scale_at(w, row / w.block_n, col / w.block_k);
    case WFmt::kFp4: {
      const uint8_t b = static_cast<const uint8_t*>(w.w)[row * (w.k / 2) + col / 2];
      return fp4_e2m1_to_f((col & 1) ? (b >> 4) : (b & 0xfu)) * scale_at(w, row, col / w.block_k);
    }
  }
  return 0.0f;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// The largest |p[i]| of a block of len values, one warp reading lane, lane + 32, ... (every lane
// gets it): the amax of a block quantization round trip.
__device__ __forceinline__ float warp_block_amax(const float* p, int64_t len, int lane) {
  float amax = 0.0f;
  for (int64_t i = lane; i < len; i += 32) amax = fmaxf(amax, fabsf(p[i]));
  return warp_max(amax);
}
// The official per-head norm of one group of `group` values by one warp, in place, in BF16
// arithmetic: ms = bf16(mean(bf16(x²))) (lanes sum channels lane, lane + 32, ..., then
// warp_sum), r = bf16(1/sqrt(bf16(ms + eps))), x = bf16(x·r). rms_norm_bf16_kernel and
// q_heads_finish_kernel share it, so they have the same bits.
__device__ __forceinline__ void rms_norm_bf16_warp(float* p, int64_t group, float eps, int lane) {
  float ss = 0.0f;
  for (int64_t c = lane; c < group; c += 32) ss += bf16_round_d(p[c] * p[c]);
  ss = warp_sum(ss);
  const float ms = bf16_round_d(ss / static_cast<float>(group));
  const float r = bf16_round_d(1.0f / sqrtf(bf16_round_d(ms + eps)));
  for (int64_t c = lane; c < group; c += 32) p[c] = bf16_round_d(p[c] * r);
}
// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
// `red` is 32 floats of shared memory; the fixed tree order keeps results deterministic.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) red[wid] = v;
  __syncthreads();
  float t = lane < nw ? red[lane] : 0.0f;
  return warp_sum(t);
}
__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[wid] = v;
  __syncthreads();
  float t = lane < nw ? red[lane] : -__int_as_float(0x7f800000);
  return warp_max(t);
}

// RMS norm of one row (or group) of g values by a whole block, the steps of rms_norm_kernel;
// every kernel that norms a row (rowwise.cu, and the fused chains of rows_finish.cu and hc.cu)
// takes them, with rms_norm_threads(g) threads, so they share one reduction tree and its bits.
inline int rms_norm_threads(int64_t g) { return g >= 1024 ? 512 : (g >= 256 ? 256 : 128); }
// This thread's part of Σ x_c²: channels tid, tid + blockDim, ... in ascending order (FMAs).
__device__ __forceinline__ float rms_sumsq_thread(const float* x, int64_t g) {
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < g; c += blockDim.x) ss = fmaf(x[c], x[c], ss);
  return ss;
}
// y_c = x_c · r (· w_c with has_w), r = 1/sqrt(sumsq/g + eps), sumsq the block_sum of the
// threads' parts; rounded to BF16 when round_out. y may alias x (each thread its own channels).
__device__ __forceinline__ void rms_norm_apply(const float* x, float* y, int64_t g, float sumsq,
                                               float eps, const WeightDesc& w, bool has_w,
                                               bool round_out) {
  const float r = 1.0f / sqrtf(sumsq / static_cast<float>(g) + eps);
  for (int64_t c = threadIdx.x; c < g; c += blockDim.x) {
    const float v = x[c] * r;
    const float out = has_w ? v * weight_at_d(w, 0, c) : v;
    y[c] = round_out ? bf16_round_d(out) : out;
  }
}

// The FP8 round trip of one block of len values by one warp (fake_quant_kernel's kFp8 form):
// amax a warp max, a power-of-two scale, each lane its elements; q may alias p.
__device__ __forceinline__ void act_quant_fp8_warp(const float* p, float* q, int64_t len,
                                                   int lane) {
  const float s = pow2_scale_d(warp_block_amax(p, len, lane), kFp8MaxD);
  for (int64_t i = lane; i < len; i += 32) q[i] = act_quant_fp8_d(p[i], s);
}

inline unsigned grid_for(int64_t work, int block) {
  const int64_t g = (work + block - 1) / block;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 65535LL * 1024 ? 65535LL * 1024 : g));
}

}  // namespace deepinfer::kernels::cuda
