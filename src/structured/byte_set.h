// ByteSet: a set of byte values (256 bits). Every terminal of the grammar IR is one of these,
// so a character class, a literal byte and "any byte" all cost the same to match.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace deepinfer::structured {

struct ByteSet {
  std::array<uint64_t, 4> words{};

  static ByteSet single(uint8_t b) {
    ByteSet s;
    s.set(b);
    return s;
  }
  static ByteSet range(int lo, int hi) {
    ByteSet s;
    s.set_range(lo, hi);
    return s;
  }
  void set(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(int lo, int hi) {
    for (int b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool test(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  int count() const {
    int n = 0;
    for (uint64_t w : words) n += std::popcount(w);
    return n;
  }
  ByteSet& operator|=(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) words[i] |= o.words[i];
    return *this;
  }
  bool operator==(const ByteSet& o) const = default;
};

}  // namespace deepinfer::structured
