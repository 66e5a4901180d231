// top_p's fixed-point masses and the step of its radix select by mass (sample.cu), host and
// device, so that the CPU test (tests/ops/cuda/kernels_host_test.cu) runs the same select over
// whole rows and checks its cut against the host sampler's (sample/processors.h apply_top_p).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {

// sample/processors.h: a weight w in [0, 1] counts as floor(w * 2^36).
inline constexpr int kTopPMassBits = 36;

DI_HD unsigned long long top_p_mass_of(float w) {
#ifdef __CUDA_ARCH__
  return __float2ull_rz(__fmul_rn(w, 68719476736.0f));  // * 2^36 is exact; then truncated
#else
  return static_cast<unsigned long long>(w * 68719476736.0f);
#endif
}

// ceil(top_p x total), the product in double (processors.h top_p_threshold): a token is kept
// iff the mass before it is below this.
DI_HD unsigned long long top_p_threshold_of(float top_p, unsigned long long total) {
#ifdef __CUDA_ARCH__
  const double t = __dmul_rn(static_cast<double>(top_p), __ull2double_rn(total));
  const unsigned long long floor_t = __double2ull_rz(t);
  return __ull2double_rn(floor_t) < t ? floor_t + 1 : floor_t;
#else
  const double t = static_cast<double>(top_p) * static_cast<double>(total);
  const auto floor_t = static_cast<unsigned long long>(t);
  return static_cast<double>(floor_t) < t ? floor_t + 1 : floor_t;
#endif
}

// The canonical order (weight descending, id ascending) as one unsigned key: the weight's bits
// inverted above the id (positive floats order like their bits).
DI_HD unsigned long long top_p_key(uint32_t weight_bits, uint32_t id) {
  return (static_cast<unsigned long long>(~weight_bits) << 32) | id;
}
DI_HD uint32_t top_p_key_weight_bits(unsigned long long key) {
  return ~static_cast<uint32_t>(key >> 32);
}

// One pass of the radix select, 8 bits from `shift` down: `digit_mass[d]` is the mass of the
// keys that match the prefix found so far and have digit d there, `below` the mass of every key
// under that prefix. The cut token (the one whose preceding mass is below `threshold` and whose
// own mass reaches it) has the digit returned; *below_out is then the mass under the longer
// prefix. Digits past the last one holding mass are never returned (the threshold is at most
// the total, so some digit reaches it).
DI_HD int top_p_radix_digit(const unsigned long long* digit_mass, unsigned long long below,
                            unsigned long long threshold, unsigned long long* below_out) {
  int d = 0;
  for (; d < 255; ++d) {
    if (below + digit_mass[d] >= threshold) break;
    below += digit_mass[d];
  }
  *below_out = below;
  return d;
}

}  // namespace deepinfer::kernels::cuda
