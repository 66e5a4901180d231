// Scalar quantization rules shared by every CPU backend and the tests (spec §2.0, §2.3-§2.5).
//
// These are the definitions; kernels may vectorise them but must agree bit for bit. Scales are
// powers of two (the checkpoint's scale_fmt "ue8m0"), so x/s and q·s are exact in FP32 and the
// only rounding is the E4M3 / E2M1 one (round to nearest, ties to even).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "base/numeric_types.h"

namespace deepinfer::backend {

inline constexpr float kFp8Max = 448.0f;
inline constexpr float kFp4Max = 6.0f;
inline constexpr float kQuantAmaxFloor = 1e-4f;  // FP8 blocks (act quant, KV, weights)
// MXFP4 blocks (indexer q / keys): the official FP4 quantizer's floor 6·2^-126, so that amax / 6
// is a normal float (spec §6.7 item 6; NeMo's quantize_cache, V4's official_ref).
inline constexpr float kFp4AmaxFloor = 6.0f * 1.17549435e-38f;
// NVFP4 blocks (V4.1 compressed KV): the E4M3 scale e4m3(max(amax, 6·2^-9) / 6), so the scale is
// at least E4M3's smallest subnormal 2^-9.
inline constexpr float kNvfp4AmaxFloor = 6.0f / 512.0f;

// s = 2^ceil(log2(max(amax, 1e-4) / qmax)), computed the way the official kernel does it
// (fast_round_scale): ratio = amax · fl(1/qmax), then exponent(ratio) + 1 unless the mantissa
// bits are zero. Equals the exact formula except when amax/qmax lies within an ulp above a
// power of two, where the reciprocal product may round onto the power of two.
inline float pow2_scale(float amax, float qmax, float floor = kQuantAmaxFloor) {
  const float ratio = (amax < floor ? floor : amax) * (1.0f / qmax);
  const uint32_t bits = std::bit_cast<uint32_t>(ratio);
  const int e = static_cast<int>((bits >> 23) & 0xffu) - 127 + ((bits & 0x7fffffu) != 0 ? 1 : 0);
  return std::ldexp(1.0f, e);
}

// Value -> nearest E4M3 value (RNE, saturating at ±448): the round trip, not the byte. Same
// result as fp8_e4m3_to_float(float_to_fp8_e4m3(v)) (tests/ops checks it over a sweep), but
// branch-light so the quantization loops vectorise: normals keep 3 mantissa bits by the
// add-half-and-truncate RNE trick on the FP32 bits; below 2^-6 the grid is uniform (2^-9).
inline float fp8_e4m3_round(float v) {
  const float a = std::fabs(v) < kFp8Max ? std::fabs(v) : kFp8Max;
  uint32_t bits = std::bit_cast<uint32_t>(a);
  bits = (bits + 0x7ffffu + ((bits >> 20) & 1u)) & ~0xfffffu;
  const float normal = std::bit_cast<float>(bits);
  const float sub = std::nearbyint(a * 512.0f) * (1.0f / 512.0f);
  const float r = a < 0.015625f ? sub : normal;
  return v != v ? v : std::copysign(r, v);  // NaN stays NaN (poisoned inputs must show)
}

// Value -> E2M1 code (RNE between the grid 0, .5, 1, 1.5, 2, 3, 4, 6; saturating at ±6).
inline uint8_t float_to_fp4_e2m1(float v) {
  const uint8_t sign = std::signbit(v) ? 8 : 0;
  const float a = std::fabs(v);
  // Midpoints between neighbours; at an exact midpoint go to the even code (ties-to-even).
  uint8_t code;
  if (a <= 0.25f)
    code = 0;
  else if (a < 0.75f)
    code = 1;
  else if (a <= 1.25f)
    code = 2;
  else if (a < 1.75f)
    code = 3;
  else if (a <= 2.5f)
    code = 4;
  else if (a < 3.5f)
    code = 5;
  else if (a <= 5.0f)
    code = 6;
  else
    code = 7;
  return static_cast<uint8_t>(sign | code);
}
inline float fp4_e2m1_round(float v) { return fp4_e2m1_to_float(float_to_fp4_e2m1(v)); }

inline float bf16_round(float v) { return bf16_to_float(float_to_bf16(v)); }

// Quantize -> dequantize one block in place with a power-of-two scale (shared definition of
// act_quant_fp8 / fake_quant_fp8 / fake_quant_fp4).
inline void fake_quant_block_fp8(float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float s = pow2_scale(amax, kFp8Max);
  for (int64_t i = 0; i < n; ++i) {
    float q = x[i] / s;
    q = q > kFp8Max ? kFp8Max : (q < -kFp8Max ? -kFp8Max : q);
    x[i] = fp8_e4m3_round(q) * s;
  }
}
inline void fake_quant_block_fp4(float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float s = pow2_scale(amax, kFp4Max, kFp4AmaxFloor);
  for (int64_t i = 0; i < n; ++i) x[i] = fp4_e2m1_round(x[i] / s) * s;
}

// NVFP4 (V4.1 compressed KV, spec §6.7 item 6): E2M1 codes with an E4M3 scale per block,
// s = e4m3(max(amax, 6·2^-9) / 6) (RNE), x <- e2m1_rne(clamp(x / s, ±6)) · s. The scale is not a
// power of two, so x / s and the product round in FP32 as the reference's tensor ops do.
inline float nvfp4_scale(float amax) {
  return fp8_e4m3_round((amax < kNvfp4AmaxFloor ? kNvfp4AmaxFloor : amax) / kFp4Max);
}
inline void fake_quant_block_nvfp4(float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float s = nvfp4_scale(amax);
  for (int64_t i = 0; i < n; ++i) x[i] = fp4_e2m1_round(x[i] / s) * s;
}

}  // namespace deepinfer::backend
