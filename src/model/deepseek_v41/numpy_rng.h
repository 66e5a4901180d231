// numpy's default random generator, bit for bit: `numpy.random.default_rng(seed)` followed by
// `Generator.integers(low, high, size, dtype=np.int64)`.
//
// V4.1's Engram hash multipliers are drawn this way (spec §6.7 item 2), so any other generator,
// or the same one seeded differently, hashes every n-gram into different table rows. The chain
// reproduced here (numpy 1.17 and later; checked against numpy 2.4 by
// tests/reference/engram/make_engram_vectors.py):
//
//   SeedSequence(seed)   the integer becomes 32-bit words (lowest first; 0 gives one word 0),
//                        hashed into a pool of 4 words (hashmix/mix, numpy's constants);
//   PCG64                generate_state(4, uint64) gives seed = w0:w1 and increment = w2:w3
//                        (128-bit, high word first); the 128-bit LCG is stepped before each
//                        output, output = XSL-RR of the new state;
//   next_uint32          the low half of a 64-bit output, the high half kept for the next call
//                        (the kept half survives 64-bit draws in between, as in numpy);
//   integers             [low, high) becomes the inclusive range rng = high - 1 - low: rng 0
//                        gives low without drawing, rng < 2^32 - 1 Lemire's method on 32-bit
//                        draws, rng == 2^32 - 1 a raw 32-bit draw, otherwise Lemire's method on
//                        64-bit draws (rng == 2^64 - 1: a raw 64-bit draw).
//
// Only what Engram needs is here: integer seeds, int64 integers, no spawn keys, no floats.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace deepinfer::model::deepseek_v41::numpy_rng {

// numpy.random.SeedSequence(entropy) for a non-negative integer entropy (no spawn key, pool of
// 4 words).
class SeedSequence {
 public:
  explicit SeedSequence(uint64_t entropy);
  // generate_state(n_words, np.uint32).
  std::vector<uint32_t> generate_state_u32(int n_words) const;
  // generate_state(n_words, np.uint64): pairs of 32-bit words, the first one low.
  std::vector<uint64_t> generate_state_u64(int n_words) const;
  const uint32_t* pool() const { return pool_; }

 private:
  uint32_t pool_[4];
};

// numpy.random.PCG64 seeded from a SeedSequence.
class Pcg64 {
 public:
  explicit Pcg64(const SeedSequence& seed);
  uint64_t next_uint64();
  uint32_t next_uint32();
  // The 128-bit state and increment, each as {high, low} (numpy's bit_generator.state).
  void state(uint64_t* state_hi_lo, uint64_t* inc_hi_lo) const;

 private:
  __extension__ typedef unsigned __int128 Uint128;  // GCC/Clang; -Wpedantic-clean spelling
  void step();
  Uint128 state_ = 0, inc_ = 0;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

// numpy.random.default_rng(seed), the integer-drawing part of Generator.
class Generator {
 public:
  explicit Generator(uint64_t seed) : bits_(SeedSequence(seed)) {}

  // Generator.integers(low, high, size=count, dtype=np.int64) (endpoint=False).
  // InvalidArgument when low >= high.
  Expected<std::vector<int64_t>> integers(int64_t low, int64_t high, int64_t count);

  Pcg64& bit_generator() { return bits_; }

 private:
  Pcg64 bits_;
};

}  // namespace deepinfer::model::deepseek_v41::numpy_rng
