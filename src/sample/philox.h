// Philox4x32-R, the counter-based RNG of Salmon, Moraes, Dror and Shaw, "Parallel Random
// Numbers: As Easy as 1, 2, 3" (SC'11), as specified by the Random123 library. Verified in
// tests/unit/sample/philox_test.cc against Random123's published known-answer vectors
// (tests/kat_vectors, lines "philox4x32 7 ..." and "philox4x32 10 ...").
//
// Why counter-based: a draw is a pure function of (key, counter), so a request's token at
// output position t depends only on (seq_seed, t, sample index) — never on call order, batch
// composition, preemption or chunking. There is no generator state to save or restore.
// The same function is trivial to run inside a CUDA kernel (it is only 32x32->64 multiplies).
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer::sample {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Random123 constants: multipliers and the Weyl key increments (golden ratio, sqrt(3) - 1).
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

template <int Rounds = 10>
constexpr PhiloxCounter philox4x32(PhiloxCounter ctr, PhiloxKey key) {
  for (int r = 0; r < Rounds; ++r) {
    if (r > 0) {  // the key is bumped between rounds, not before the first
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    const uint64_t p0 = uint64_t{kPhiloxM0} * ctr[0];
    const uint64_t p1 = uint64_t{kPhiloxM1} * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return ctr;
}

// Two 32-bit words -> a double uniform in [0, 1) with 53 random bits (top 53 of the 64).
constexpr double uniform_from_words(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (uint64_t{hi} << 32) | lo;
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// What a draw is for; the fourth counter word, so streams for different purposes never
// overlap. New purposes (e.g. speculative-decoding acceptance) take new values.
enum class RngDomain : uint32_t {
  kTokenSample = 0,
  // Speculative decoding with residual acceptance (runtime/engine_spec.cc): the drafter's draw
  // of a draft token from its own distribution q, the uniform that accepts a draft d with
  // probability min(1, p(d) / q(d)), and the draw from the residual after a rejection.
  kDraftSample = 1,
  kDraftAccept = 2,
  kResidualSample = 3,
};

// The address of one draw: the request's seed, the output position of the token being
// produced (0 = the first generated token) and the sample index (0..n-1).
struct SampleKey {
  uint64_t seed = 0;
  uint64_t position = 0;
  uint32_t sample_index = 0;
};

constexpr PhiloxCounter philox_counter(const SampleKey& k, RngDomain domain) {
  return {static_cast<uint32_t>(k.position), static_cast<uint32_t>(k.position >> 32),
          k.sample_index, static_cast<uint32_t>(domain)};
}

constexpr PhiloxKey philox_key(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

// The uniform in [0, 1) that decides the token at `k`.
constexpr double sample_uniform(const SampleKey& k, RngDomain domain = RngDomain::kTokenSample) {
  const PhiloxCounter out = philox4x32<10>(philox_counter(k, domain), philox_key(k.seed));
  return uniform_from_words(out[0], out[1]);
}

}  // namespace deepinfer::sample
