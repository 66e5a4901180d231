// Which ids of a row each block of the GPU sampler's cluster owns (sample.cu): whole mass blocks
// of 64 ids (sample/processors.h's blocked_mass), as even a share as whole blocks allow, in rank
// order. A rank past the row's blocks owns nothing (lo >= hi). Host and device, so the CPU test
// (tests/ops/cuda/kernels_host_test.cu) checks that the slices cover each id exactly once.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {

inline constexpr int kSampleMassBlock = 64;

struct SampleSlice {
  int64_t lo, hi;      // ids [lo, hi)
  int64_t b_lo, b_hi;  // mass blocks [b_lo, b_hi)
};

DI_HD SampleSlice sample_slice(int64_t vocab, unsigned size, unsigned rank) {
  const int64_t nb = (vocab + kSampleMassBlock - 1) / kSampleMassBlock;
  const int64_t per = (nb + size - 1) / size;
  const int64_t want = static_cast<int64_t>(rank) * per;
  const int64_t b_lo = want < nb ? want : nb;
  const int64_t b_hi = b_lo + per < nb ? b_lo + per : nb;
  const int64_t hi = b_hi * kSampleMassBlock < vocab ? b_hi * kSampleMassBlock : vocab;
  return {b_lo * kSampleMassBlock, hi, b_lo, b_hi};
}

}  // namespace deepinfer::kernels::cuda
