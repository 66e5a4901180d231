// UTF-8 helpers shared by the encoder and the decoders.
//
// Invalid input follows the Unicode "maximal subpart" rule (Unicode 15, section 3.9, U+FFFD
// substitution of maximal subparts), which is what Python's bytes.decode("utf-8",
// errors="replace") and Rust's String::from_utf8_lossy both do: each maximal prefix of a
// well-formed sequence that cannot be completed, or each single byte that cannot start one,
// becomes one U+FFFD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer::utf8 {

// Length of the well-formed sequence at p[0..n) (1..4), or 0 when it is not well formed; then
// *invalid_len is the length of its maximal subpart (>= 1).
inline size_t sequence_length(const unsigned char* p, size_t n, size_t* invalid_len) {
  unsigned char b = p[0];
  if (b < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    *invalid_len = 1;
    return 0;
  }
  for (size_t k = 1; k < need; ++k) {
    if (k >= n || p[k] < lo || p[k] > hi) {
      *invalid_len = k;
      return 0;
    }
    lo = 0x80;
    hi = 0xBF;
  }
  return need;
}

// Decodes the well-formed sequence of length len (from sequence_length) at p.
inline uint32_t decode(const unsigned char* p, size_t len) {
  switch (len) {
    case 1:
      return p[0];
    case 2:
      return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    case 3:
      return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default:
      return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
             (p[3] & 0x3Fu);
  }
}

void append_code_point(uint32_t cp, std::string& out);

// True when `s` is entirely well-formed UTF-8.
bool is_valid(std::string_view s);

// Appends `s` to `out` with each maximal invalid subpart replaced by U+FFFD.
void append_lossy(std::string_view s, std::string& out);

// The number of trailing bytes of `s` (0..3) that form an incomplete but so far well-formed
// sequence: bytes that a later append could still complete.
size_t incomplete_tail(std::string_view s);

}  // namespace deepinfer::tokenizer::utf8
