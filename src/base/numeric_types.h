// Scalar conversions for the checkpoint formats: BF16, FP16, FP8 E4M3, E8M0 scales, FP4 E2M1.
//
// These are the exact decodings of spec §4 (E8M0 byte e -> 2^(e-127); E2M1 codes
// 0,0.5,1,1.5,2,3,4,6 and their negatives; packed FP4: low nibble = even column). Kernels use
// them to dequantize inside the loop; nothing here allocates.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace deepinfer {

inline float bf16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Round-to-nearest-even, NaN kept quiet (the rounding torch and the CUDA intrinsics use).
inline uint16_t float_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// FP8 E4M3 (OCP "fn" variant: no infinities, 0x7f/0xff are NaN, max 448).
inline float fp8_e4m3_to_float(uint8_t v) {
  const bool negative = (v & 0x80u) != 0;
  const uint32_t exponent = (v >> 3) & 0xfu;
  const uint32_t mantissa = v & 0x7u;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7) {
    magnitude = std::nanf("");
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m/8 * 2^-6
  } else {
    magnitude = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f,
                           static_cast<int>(exponent) - 7);
  }
  return negative ? -magnitude : magnitude;
}

// Every E4M3 code decoded by fp8_e4m3_to_float, for loops over many values (a table lookup
// instead of an ldexp per value: the Engram gather decodes millions per prefill).
inline const std::array<float, 256>& fp8_e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) {
      t[static_cast<size_t>(v)] = fp8_e4m3_to_float(static_cast<uint8_t>(v));
    }
    return t;
  }();
  return table;
}

// Round-to-nearest-even into E4M3 with saturation to +-448 (the reference clamps first).
inline uint8_t float_to_fp8_e4m3(float value) {
  if (std::isnan(value)) return 0x7f;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  float a = std::fabs(value);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < std::ldexp(1.0f, -10)) return sign;  // below half the smallest subnormal
  int exp2;
  std::frexp(a, &exp2);   // a = f * 2^exp2, f in [0.5, 1)
  int e = exp2 - 1;       // a = 1.x * 2^e
  if (e < -6) e = -6;     // subnormal range shares the 2^-6 exponent
  const float step = std::ldexp(1.0f, e - 3);  // spacing of representable values
  float q = std::nearbyint(a / step) * step;   // ties-to-even under the default rounding mode
  if (q >= 448.0f) return sign | 0x7e;
  int qe;
  std::frexp(q, &qe);
  qe -= 1;
  if (q < std::ldexp(1.0f, -6)) {  // subnormal
    return sign | static_cast<uint8_t>(std::lround(q / std::ldexp(1.0f, -9)));
  }
  const uint32_t mant = static_cast<uint32_t>(std::lround((q / std::ldexp(1.0f, qe) - 1.0f) * 8.0f));
  return sign | static_cast<uint8_t>(((qe + 7) << 3) | mant);
}

// E8M0 scale byte: 2^(e-127); 0xff is NaN.
inline float e8m0_to_float(uint8_t e) {
  if (e == 0xff) return std::nanf("");
  return std::ldexp(1.0f, static_cast<int>(e) - 127);
}

// FP4 E2M1 code (low 4 bits) -> value.
inline float fp4_e2m1_to_float(uint8_t code) {
  static constexpr float kTable[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                       -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kTable[code & 0xfu];
}

// Element `col` of a packed FP4 row (two codes per byte, low nibble = even column).
inline float fp4_packed_at(const uint8_t* row, int64_t col) {
  const uint8_t byte = row[col >> 1];
  return fp4_e2m1_to_float((col & 1) ? static_cast<uint8_t>(byte >> 4) : byte);
}

}  // namespace deepinfer
