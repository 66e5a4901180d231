// numpy's SeedSequence -> PCG64 -> Generator.integers chain (see numpy_rng.h). Every
// arithmetic step is on fixed-width unsigned integers, wrapping exactly as numpy's C/Cython
// code wraps.
#include "model/deepseek_v41/numpy_rng.h"

#include <string>

namespace deepinfer::model::deepseek_v41::numpy_rng {
namespace {

__extension__ typedef unsigned __int128 U128;

// numpy/random/bit_generator.pyx.
constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;  // half the bits of a uint32
constexpr int kPoolSize = 4;

// PCG's default 128-bit multiplier (numpy/random/src/pcg64/pcg64.h).
constexpr U128 kPcgMultiplier =
    (static_cast<U128>(2549297995355413924ull) << 64) | 4865540595714422341ull;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

}  // namespace

SeedSequence::SeedSequence(uint64_t entropy) {
  // _int_to_uint32_array: lowest word first, at least one word.
  std::vector<uint32_t> words;
  do {
    words.push_back(static_cast<uint32_t>(entropy & 0xFFFFFFFFu));
    entropy >>= 32;
  } while (entropy != 0);

  // mix_entropy: fill the pool, mix every word into every other, then fold in the rest.
  uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i) {
    pool_[i] = hashmix(i < static_cast<int>(words.size()) ? words[i] : 0u, hash_const);
  }
  for (int src = 0; src < kPoolSize; ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      if (src != dst) pool_[dst] = mix(pool_[dst], hashmix(pool_[src], hash_const));
    }
  }
  for (size_t src = kPoolSize; src < words.size(); ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      pool_[dst] = mix(pool_[dst], hashmix(words[src], hash_const));
    }
  }
}

std::vector<uint32_t> SeedSequence::generate_state_u32(int n_words) const {
  std::vector<uint32_t> out(static_cast<size_t>(n_words));
  uint32_t hash_const = kInitB;
  for (int i = 0; i < n_words; ++i) {
    uint32_t v = pool_[i % kPoolSize];  // cycle(pool)
    v ^= hash_const;
    hash_const *= kMultB;
    v *= hash_const;
    v ^= v >> kXShift;
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

std::vector<uint64_t> SeedSequence::generate_state_u64(int n_words) const {
  const std::vector<uint32_t> w = generate_state_u32(2 * n_words);
  std::vector<uint64_t> out(static_cast<size_t>(n_words));
  for (int i = 0; i < n_words; ++i) {
    out[static_cast<size_t>(i)] = static_cast<uint64_t>(w[2 * static_cast<size_t>(i)]) |
                                  (static_cast<uint64_t>(w[2 * static_cast<size_t>(i) + 1]) << 32);
  }
  return out;
}

Pcg64::Pcg64(const SeedSequence& seed) {
  const std::vector<uint64_t> v = seed.generate_state_u64(4);
  const U128 init_state = (static_cast<U128>(v[0]) << 64) | v[1];
  const U128 init_seq = (static_cast<U128>(v[2]) << 64) | v[3];
  // pcg_setseq_128_srandom_r.
  state_ = 0;
  inc_ = (init_seq << 1) | 1u;
  step();
  state_ += init_state;
  step();
}

void Pcg64::step() { state_ = state_ * kPcgMultiplier + inc_; }

uint64_t Pcg64::next_uint64() {
  step();
  // XSL-RR: xor the halves, rotate right by the top 6 bits.
  const uint64_t x = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  return (x >> rot) | (x << ((64u - rot) & 63u));
}

uint32_t Pcg64::next_uint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const uint64_t next = next_uint64();
  has_uint32_ = true;
  uinteger_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next & 0xFFFFFFFFu);
}

void Pcg64::state(uint64_t* state_hi_lo, uint64_t* inc_hi_lo) const {
  state_hi_lo[0] = static_cast<uint64_t>(state_ >> 64);
  state_hi_lo[1] = static_cast<uint64_t>(state_);
  inc_hi_lo[0] = static_cast<uint64_t>(inc_ >> 64);
  inc_hi_lo[1] = static_cast<uint64_t>(inc_);
}

Expected<std::vector<int64_t>> Generator::integers(int64_t low, int64_t high, int64_t count) {
  if (low >= high) {
    return invalid_argument("numpy integers: low (" + std::to_string(low) +
                            ") must be below high (" + std::to_string(high) + ")");
  }
  if (count < 0) return invalid_argument("numpy integers: negative size " + std::to_string(count));
  // The closed range [low, high - 1], as numpy's random_bounded_uint64_fill sees it.
  const uint64_t off = static_cast<uint64_t>(low);
  const uint64_t rng = static_cast<uint64_t>(high - 1) - off;
  std::vector<uint64_t> out(static_cast<size_t>(count));
  if (rng == 0) {
    for (auto& v : out) v = off;
  } else if (rng <= 0xFFFFFFFFull) {
    if (rng == 0xFFFFFFFFull) {  // Lemire's 32-bit method cannot take rng + 1 = 2^32
      for (auto& v : out) v = off + bits_.next_uint32();
    } else {
      const uint32_t rng32 = static_cast<uint32_t>(rng);
      const uint32_t rng_excl = rng32 + 1;
      for (auto& v : out) {
        uint64_t m = static_cast<uint64_t>(bits_.next_uint32()) * rng_excl;
        uint32_t leftover = static_cast<uint32_t>(m);
        if (leftover < rng_excl) {
          const uint32_t threshold = (UINT32_MAX - rng32) % rng_excl;
          while (leftover < threshold) {
            m = static_cast<uint64_t>(bits_.next_uint32()) * rng_excl;
            leftover = static_cast<uint32_t>(m);
          }
        }
        v = off + (m >> 32);
      }
    }
  } else if (rng == UINT64_MAX) {
    for (auto& v : out) v = off + bits_.next_uint64();
  } else {
    const uint64_t rng_excl = rng + 1;
    for (auto& v : out) {
      U128 m = static_cast<U128>(bits_.next_uint64()) * rng_excl;
      uint64_t leftover = static_cast<uint64_t>(m);
      if (leftover < rng_excl) {
        const uint64_t threshold = (UINT64_MAX - rng) % rng_excl;
        while (leftover < threshold) {
          m = static_cast<U128>(bits_.next_uint64()) * rng_excl;
          leftover = static_cast<uint64_t>(m);
        }
      }
      v = off + static_cast<uint64_t>(m >> 64);
    }
  }
  std::vector<int64_t> result(out.size());
  for (size_t i = 0; i < out.size(); ++i) result[i] = static_cast<int64_t>(out[i]);
  return result;
}

}  // namespace deepinfer::model::deepseek_v41::numpy_rng
