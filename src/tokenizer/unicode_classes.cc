// Builds the class table of unicode_classes.h from ICU and the generated Oniguruma delta.
#include "tokenizer/unicode_classes.h"

#include <unicode/uchar.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace deepinfer::tokenizer {
namespace {

struct DeltaRange {
  uint32_t first, last;
  uint8_t bits;
};
#include "tokenizer/unicode_delta.inc"

// Oniguruma's CR_Space (Unicode White_Space).
constexpr uint32_t kWhiteSpace[] = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                                    0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                                    0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
                                    0x2029, 0x202F, 0x205F, 0x3000};

uint8_t icu_bits(UChar32 c) {
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return kClassL;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      return kClassM;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return kClassN;
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
      return kClassP;
    case U_MATH_SYMBOL:
    case U_CURRENCY_SYMBOL:
    case U_MODIFIER_SYMBOL:
    case U_OTHER_SYMBOL:
      return kClassS;
    default:
      return 0;
  }
}

bool assigned_in_baseline(UChar32 c) {
  UVersionInfo age;
  u_charAge(c, age);
  if (age[0] == 0 && age[1] == 0) return false;  // unassigned in this ICU
  return age[0] < kDeltaBaseMajor || (age[0] == kDeltaBaseMajor && age[1] <= kDeltaBaseMinor);
}

}  // namespace

const UnicodeClasses& UnicodeClasses::get() {
  static const UnicodeClasses* table = new UnicodeClasses();
  return *table;
}

UnicodeClasses::UnicodeClasses() {
  std::vector<uint8_t> flat(0x110000, 0);
  for (UChar32 c = 0; c < 0x110000; ++c) {
    uint8_t b = icu_bits(c);
    if (b != 0 && !assigned_in_baseline(c)) b = 0;
    flat[c] = b;
  }
  for (const DeltaRange& r : kDeltaRanges) {
    for (uint32_t c = r.first; c <= r.last; ++c) flat[c] = r.bits;
  }
  for (uint32_t c : kWhiteSpace) flat[c] |= kClassSpace;
  for (uint32_t c = 0x4E00; c <= 0x9FA5; ++c) flat[c] |= kClassCjk;
  for (uint32_t c = 0x3040; c <= 0x30FF; ++c) flat[c] |= kClassCjk;
  flat['\r'] |= kClassCrLf;
  flat['\n'] |= kClassCrLf;

  // Deduplicate 256-entry blocks (most of the planes are a handful of distinct blocks).
  std::vector<uint8_t> blocks;
  std::unordered_map<std::string, uint16_t> seen;
  for (uint32_t blk = 0; blk < 0x1100; ++blk) {
    std::string key(reinterpret_cast<const char*>(&flat[blk * 256]), 256);
    auto it = seen.find(key);
    if (it == seen.end()) {
      uint16_t index = static_cast<uint16_t>(blocks.size() / 256);
      blocks.insert(blocks.end(), flat.begin() + blk * 256, flat.begin() + (blk + 1) * 256);
      it = seen.emplace(std::move(key), index).first;
    }
    stage1_[blk] = it->second;
  }
  blocks_ = new uint8_t[blocks.size()];
  std::memcpy(blocks_, blocks.data(), blocks.size());
}

}  // namespace deepinfer::tokenizer
