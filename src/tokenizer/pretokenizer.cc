// Hand-written scanners for the pre-tokenizer regexes (see pretokenizer.h for the patterns).
//
// Each scanner works on one piece [b, e) of code points and appends the Isolated split of it.
// `match_*` functions return the end of the match that the regex finds when it tries to match
// at position i (alternatives in order, greedy with backtracking), or i when none matches.
#include "tokenizer/pretokenizer.h"

#include "tokenizer/unicode_classes.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

constexpr const char* kDigitsPattern = "\\p{N}{1,3}";
constexpr const char* kCjkPattern = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+";
constexpr const char* kDeepSeekPattern =
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

inline bool ascii_alpha(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
inline bool ascii_punct(uint32_t c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

// Emits the Isolated split: the unmatched stretch [gap, i) and the match [i, m).
struct Emitter {
  std::vector<uint32_t>& out;
  void piece(uint32_t b, uint32_t e) {
    if (b < e) {
      out.push_back(b);
      out.push_back(e);
    }
  }
};

void split_digits(const uint8_t* cls, uint32_t b, uint32_t e, Emitter& em) {
  uint32_t gap = b, i = b;
  while (i < e) {
    if (cls[i] & kClassN) {
      uint32_t m = i + 1;
      while (m < e && m < i + 3 && (cls[m] & kClassN)) ++m;
      em.piece(gap, i);
      em.piece(i, m);
      gap = i = m;
    } else {
      ++i;
    }
  }
  em.piece(gap, e);
}

void split_cjk(const uint8_t* cls, uint32_t b, uint32_t e, Emitter& em) {
  uint32_t gap = b, i = b;
  while (i < e) {
    if (cls[i] & kClassCjk) {
      uint32_t m = i + 1;
      while (m < e && (cls[m] & kClassCjk)) ++m;
      em.piece(gap, i);
      em.piece(i, m);
      gap = i = m;
    } else {
      ++i;
    }
  }
  em.piece(gap, e);
}

// \s*[\r\n]+ | \s+(?!\S) | \s+ at i, where cls[i] has kClassSpace. The first alternative
// ends after the last \r or \n of the whitespace run; the look-ahead one gives back the last
// whitespace character when a non-space follows (if the run has two or more characters).
inline uint32_t match_space(const uint8_t* cls, uint32_t i, uint32_t e, bool crlf_alternative) {
  uint32_t j = i;
  uint32_t last_crlf = UINT32_MAX;
  while (j < e && (cls[j] & kClassSpace)) {
    if (cls[j] & kClassCrLf) last_crlf = j;
    ++j;
  }
  if (crlf_alternative && last_crlf != UINT32_MAX) return last_crlf + 1;
  if (j == e) return j;
  if (j - i >= 2) return j - 1;
  return j;
}

inline uint32_t match_deepseek(const uint32_t* cp, const uint8_t* cls, uint32_t i, uint32_t e) {
  const uint32_t c = cp[i];
  const uint8_t k = cls[i];
  // [ASCII punctuation][A-Za-z]+
  if (c < 0x80 && ascii_punct(c) && i + 1 < e && ascii_alpha(cp[i + 1])) {
    uint32_t m = i + 2;
    while (m < e && ascii_alpha(cp[m])) ++m;
    return m;
  }
  // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
  if (!(k & (kClassCrLf | kClassL | kClassP | kClassS)) && i + 1 < e &&
      (cls[i + 1] & (kClassL | kClassM))) {
    uint32_t m = i + 2;
    while (m < e && (cls[m] & (kClassL | kClassM))) ++m;
    return m;
  }
  if (k & (kClassL | kClassM)) {
    uint32_t m = i + 1;
    while (m < e && (cls[m] & (kClassL | kClassM))) ++m;
    return m;
  }
  // ' '?[\p{P}\p{S}]+[\r\n]*
  uint32_t s = i;
  if (c == ' ' && i + 1 < e && (cls[i + 1] & (kClassP | kClassS))) s = i + 1;
  if (cls[s] & (kClassP | kClassS)) {
    uint32_t m = s + 1;
    while (m < e && (cls[m] & (kClassP | kClassS))) ++m;
    while (m < e && (cls[m] & kClassCrLf)) ++m;
    return m;
  }
  if (k & kClassSpace) return match_space(cls, i, e, /*crlf_alternative=*/true);
  return i;
}

inline uint32_t match_gpt2(const uint32_t* cp, const uint8_t* cls, uint32_t i, uint32_t e) {
  const uint32_t c = cp[i];
  if (c == '\'' && i + 1 < e) {
    uint32_t c1 = cp[i + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if (i + 2 < e) {
      uint32_t c2 = cp[i + 2];
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
        return i + 3;
    }
  }
  // ' '?\p{L}+, then ' '?\p{N}+, then ' '?[^\s\p{L}\p{N}]+ (a space is none of these).
  const bool space = c == ' ' && i + 1 < e;
  auto run = [&](uint8_t mask, bool negate) -> uint32_t {
    auto in = [&](uint32_t j) { return negate ? !(cls[j] & mask) : (cls[j] & mask) != 0; };
    uint32_t p = (space && in(i + 1)) ? i + 1 : i;
    if (!in(p)) return i;
    uint32_t m = p + 1;
    while (m < e && in(m)) ++m;
    return m;
  };
  if (uint32_t m = run(kClassL, false); m > i) return m;
  if (uint32_t m = run(kClassN, false); m > i) return m;
  if (uint32_t m = run(kClassSpace | kClassL | kClassN, true); m > i) return m;
  if (cls[i] & kClassSpace) return match_space(cls, i, e, /*crlf_alternative=*/false);
  return i;
}

template <typename Match>
void split_regex(uint32_t b, uint32_t e, Emitter& em, Match match) {
  uint32_t gap = b, i = b;
  while (i < e) {
    uint32_t m = match(i, e);
    if (m > i) {
      em.piece(gap, i);
      em.piece(i, m);
      gap = i = m;
    } else {
      ++i;
    }
  }
  em.piece(gap, e);
}

}  // namespace

const char* const kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

std::optional<SplitKind> split_kind_for_regex(std::string_view pattern) {
  if (pattern == kDigitsPattern) return SplitKind::kDigits;
  if (pattern == kCjkPattern) return SplitKind::kCjkKana;
  if (pattern == kDeepSeekPattern) return SplitKind::kDeepSeek;
  if (pattern == kGpt2Pattern) return SplitKind::kGpt2;
  return std::nullopt;
}

void PreTokenizer::split(std::string_view text, PreTokenizerScratch& s,
                         std::vector<ByteRange>& out) const {
  if (text.empty()) return;
  if (steps_.empty()) {
    out.push_back({0, static_cast<uint32_t>(text.size())});
    return;
  }
  // Decode once: code points, their classes and byte offsets.
  const auto& classes = UnicodeClasses::get();
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  s.cps.resize(n);
  s.cls.resize(n);
  s.offsets.resize(n + 1);
  uint32_t count = 0;
  for (size_t i = 0; i < n;) {
    uint32_t c;
    size_t len = 1;
    if (p[i] < 0x80) {
      c = p[i];
    } else {
      size_t bad = 0;
      len = utf8::sequence_length(p + i, n - i, &bad);
      if (len == 0) len = bad;  // unreachable for well-formed input; keeps going anyway
      c = len > 1 ? utf8::decode(p + i, len) : 0xFFFD;
    }
    s.cps[count] = c;
    s.cls[count] = classes.of(c);
    s.offsets[count] = static_cast<uint32_t>(i);
    ++count;
    i += len;
  }
  s.offsets[count] = static_cast<uint32_t>(n);
  const uint32_t* cp = s.cps.data();
  const uint8_t* cls = s.cls.data();

  s.a.clear();
  s.a.push_back(0);
  s.a.push_back(count);
  for (SplitKind kind : steps_) {
    s.b.clear();
    Emitter em{s.b};
    for (size_t k = 0; k < s.a.size(); k += 2) {
      uint32_t b = s.a[k], e = s.a[k + 1];
      switch (kind) {
        case SplitKind::kDigits:
          split_digits(cls, b, e, em);
          break;
        case SplitKind::kCjkKana:
          split_cjk(cls, b, e, em);
          break;
        case SplitKind::kDeepSeek:
          split_regex(b, e, em,
                      [&](uint32_t i, uint32_t end) { return match_deepseek(cp, cls, i, end); });
          break;
        case SplitKind::kGpt2:
          split_regex(b, e, em,
                      [&](uint32_t i, uint32_t end) { return match_gpt2(cp, cls, i, end); });
          break;
      }
    }
    s.a.swap(s.b);
  }
  for (size_t k = 0; k < s.a.size(); k += 2) {
    out.push_back({s.offsets[s.a[k]], s.offsets[s.a[k + 1]]});
  }
}

}  // namespace deepinfer::tokenizer
