// UTF-8 validation, lossy repair and the incomplete-tail test (see utf8.h for the rule).
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer::utf8 {

void append_code_point(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    size_t bad = 0;
    size_t len = sequence_length(p + i, n - i, &bad);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

void append_lossy(std::string_view s, std::string& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0, run = 0;  // [run, i) is valid and not yet copied
  out.reserve(out.size() + n);
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    size_t bad = 0;
    size_t len = sequence_length(p + i, n - i, &bad);
    if (len != 0) {
      i += len;
      continue;
    }
    out.append(s.data() + run, i - run);
    out.append("\xEF\xBF\xBD");
    i += bad;
    run = i;
  }
  out.append(s.data() + run, n - run);
}

size_t incomplete_tail(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned char b = p[n - back];
    if (b >= 0x80 && b <= 0xBF) continue;  // continuation byte: look further back
    if (b < 0xC2 || b > 0xF4) return 0;    // ASCII or a byte that never starts a sequence
    size_t bad = 0;
    size_t len = sequence_length(p + n - back, back, &bad);
    // Incomplete when the sequence needs more bytes than there are and every byte present
    // so far is valid (the maximal subpart reaches the end of the input).
    return (len == 0 && bad == back) ? back : 0;
  }
  return 0;
}

}  // namespace deepinfer::tokenizer::utf8
