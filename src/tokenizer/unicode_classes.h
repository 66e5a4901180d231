// Unicode character classes as the pre-tokenizer regexes see them (Oniguruma semantics, as in
// Hugging Face `tokenizers`).
//
// One byte of class bits per code point, in a two-stage table built once at start-up from ICU
// (u_charType) plus unicode_delta.inc: ICU answers for code points assigned in the delta's
// baseline Unicode version; newer code points take Oniguruma's class from the delta, so an ICU
// that is older (Debian 12: Unicode 15.0) or newer than HF's Oniguruma (Unicode 16.0) gives the
// same table, provided ICU knows the baseline version (ICU >= 70 for Unicode 14.0). `\s` is
// Oniguruma's Unicode White_Space (25 code points; U+200B and U+FEFF are not in it).
// tests/unit/tokenizer compares the whole table with what HF's engine reports.
#pragma once

#include <cstdint>

namespace deepinfer::tokenizer {

enum CharClass : uint8_t {
  kClassL = 1,       // \p{L}
  kClassM = 2,       // \p{M}
  kClassN = 4,       // \p{N}
  kClassP = 8,       // \p{P}
  kClassS = 16,      // \p{S}
  kClassSpace = 32,  // \s (White_Space)
  kClassCjk = 64,    // [一-龥぀-ゟ゠-ヿ]: U+4E00..U+9FA5, U+3040..U+30FF
  kClassCrLf = 128,  // \r or \n
};

class UnicodeClasses {
 public:
  // The process-wide table (built on first use; thread-safe).
  static const UnicodeClasses& get();

  uint8_t of(uint32_t cp) const {
    if (cp > 0x10FFFF) return 0;
    return blocks_[static_cast<uint32_t>(stage1_[cp >> 8]) * 256 + (cp & 0xFF)];
  }

 private:
  UnicodeClasses();
  uint16_t stage1_[0x1100];
  uint8_t* blocks_ = nullptr;  // unique 256-entry blocks, owned (never freed: process lifetime)
};

}  // namespace deepinfer::tokenizer
