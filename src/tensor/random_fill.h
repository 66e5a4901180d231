// RandomFill: how the bytes of a generated tensor are made (`--load-format dummy`: weights with
// random contents instead of a checkpoint's). One rule, written once here, for the host loop
// (fill_random_host, the CPU backends) and the CUDA kernel (kernels/cuda/init/random_fill.cu):
// both call random_fill_bits, so a tensor filled on the GPU equals the host fill bit for bit.
//
// The generator is counter-based: element i of a tensor is a pure function of (key, i), key
// itself a hash of (seed, tensor index, part), so any thread can make any element with no state
// and no host buffer of the tensor's size. Only integer operations and one fmaf (correctly
// rounded on host and device alike) are used, never a transcendental function, whose last bit
// could differ between the host's libm and the device's.
//
// Which distribution each weight gets is decided in io/dummy_weights.cc.
// This header is compiled by nvcc too (C++17): no C++20, no host-only calls in the device part.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/dtype.h"

#if defined(__CUDACC__)
#define DI_FILL_HD __host__ __device__
#else
#define DI_FILL_HD
#endif

namespace deepinfer {

enum class FillKind : uint8_t {
  kNormalBf16,   // BF16 of mean + std * z, z a unit-variance bell (below)
  kNormalF32,    // F32 of the same
  kFp8NearOne,   // F8_E4M3 codes with exponent field 6..8: |x| in [0.5, 3.75], never NaN
  kBytes,        // uniform bytes (packed FP4 E2M1 pairs: all 16 codes are finite)
  kConstant,     // every element the same bits (E8M0 block scales)
  kDistinctIds,  // rows of `row_width` distinct ids in [0, id_range) (hash routing's tid2eid)
};

struct RandomFill {
  FillKind kind = FillKind::kBytes;
  int elem_bytes = 1;  // bytes per element: 1, 2, 4 or 8
  uint64_t key = 0;    // random_fill_key(seed, tensor, part)
  // kNormal*: mean + scale * c, c the centred sum of four 16-bit uniforms (Irwin-Hall: bounded
  // at 3.46 sd, variance 65536^2 / 3), so scale = std * sqrt(3) / 65536.
  float mean = 0.0f, scale = 0.0f;
  uint64_t constant = 0;                // kConstant
  int64_t id_range = 0, row_width = 0;  // kDistinctIds
};

// splitmix64's finaliser: a bijective 64-bit mix.
DI_FILL_HD inline uint64_t fill_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// Element i's 64 random bits: splitmix64's i-th output from state `key`.
DI_FILL_HD inline uint64_t fill_hash(uint64_t key, uint64_t i) {
  return fill_mix(key + (i + 1) * 0x9e3779b97f4a7c15ull);
}

// The key of part `part` (0: values, 1: scales) of tensor `tensor` under `seed`.
inline uint64_t random_fill_key(uint64_t seed, uint64_t tensor, uint64_t part) {
  return fill_mix(fill_mix(seed ^ 0x6a09e667f3bcc909ull) + tensor * 2 + part);
}

// The bits of element i (the low elem_bytes bytes are stored, little-endian).
DI_FILL_HD inline uint64_t random_fill_bits(const RandomFill& f, uint64_t i) {
  const uint64_t h = fill_hash(f.key, i);
  switch (f.kind) {
    case FillKind::kNormalBf16:
    case FillKind::kNormalF32: {
      const int32_t c = static_cast<int32_t>((h & 0xffff) + ((h >> 16) & 0xffff) +
                                             ((h >> 32) & 0xffff) + (h >> 48)) -
                        2 * 65535;
      const float x = fmaf(f.scale, static_cast<float>(c), f.mean);  // |c| < 2^24: exact
#if defined(__CUDA_ARCH__)
      const uint32_t u = __float_as_uint(x);
#else
      uint32_t u;
      std::memcpy(&u, &x, sizeof u);
#endif
      if (f.kind == FillKind::kNormalF32) return u;
      return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // round to nearest even (x is finite)
    }
    case FillKind::kFp8NearOne: {
      const uint64_t e = 6 + ((h >> 3) & 1) + ((h >> 4) & 1);
      return (h & 0x80) | (e << 3) | (h & 7);
    }
    case FillKind::kBytes:
      return h & 0xff;
    case FillKind::kConstant:
      return f.constant;
    case FillKind::kDistinctIds: {
      // A random start per row, then consecutive ids: distinct within the row as the routing
      // table requires (row_width <= id_range), with rows spread evenly over the ids.
      const uint64_t w = static_cast<uint64_t>(f.row_width);
      const uint64_t row = i / w, j = i % w;
      const uint64_t start =
          fill_hash(f.key ^ 0x5851f42d4c957f2dull, row) % static_cast<uint64_t>(f.id_range);
      return (start + j) % static_cast<uint64_t>(f.id_range);
    }
  }
  return 0;
}

// The fills the weights use, element size from `dtype` (host only).
RandomFill normal_fill(uint64_t key, DType dtype, float mean, float std);  // BF16 or F32
RandomFill fp8_near_one_fill(uint64_t key);
RandomFill byte_fill(uint64_t key);
RandomFill constant_fill(DType dtype, uint64_t bits);
RandomFill distinct_ids_fill(uint64_t key, DType dtype, int64_t id_range, int64_t row_width);

// n elements of `f` at dst (host memory), on the calling thread.
void fill_random_host(void* dst, int64_t n, const RandomFill& f);

}  // namespace deepinfer
