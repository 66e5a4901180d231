// The ordering key of the radix-select top-k (topk.cu): a score as an unsigned 32-bit integer
// whose order is the scores' order, so the k-th largest score can be found a digit at a time.
// Host and device, so tests/ops/cuda/kernels_host_test.cu checks the mapping on the CPU.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {

// The key of scores that are never picked (-inf: rows restrict_to_blocks masked out; NaN):
// below every other key, and excluded from the select altogether.
inline constexpr uint32_t kTopkNeverKey = 0;

// For scores a, b that can be picked: a > b <=> key(a) > key(b) and a == b <=> key(a) ==
// key(b). Positive floats order like their bit patterns, negative ones in reverse, so the sign
// bit is set on positives and every bit flipped on negatives. -0 takes +0's key because the two
// compare equal: the host oracle breaks their tie by index, and so must the select. The smallest
// pickable key, -FLT_MAX's, is 0x00800000, so kTopkNeverKey is below all of them.
DI_HD uint32_t topk_key(float s) {
  const uint32_t u = f2u(s);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u || u == 0xff800000u) return kTopkNeverKey;  // NaN, -inf
  if (magnitude == 0) return 0x80000000u;                                 // +0 and -0
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

}  // namespace deepinfer::kernels::cuda
