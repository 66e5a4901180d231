// See input_limits.h.
#include "base/input_limits.h"

#include <algorithm>

namespace deepinfer {

std::string format_count(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  out.reserve(digits.size() + digits.size() / 3);
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string limit_message(std::string_view found, uint64_t limit, std::string_view limit_name,
                          std::string_view fix) {
  std::string m(found);
  m += " exceeds the limit of ";
  m += format_count(limit);
  m += " (";
  m += limit_name;
  m += ')';
  if (!fix.empty()) {
    m += "; ";
    m += fix;
  }
  return m;
}

size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Status check_json_depth(std::string_view text, size_t max_depth, std::string_view source,
                        std::string_view limit_name, std::string_view fix, StatusCode code) {
  const size_t depth = json_nesting_depth(text);
  if (depth <= max_depth) return Status::ok_status();
  std::string m(source);
  m += ": ";
  m += limit_message("JSON nesting depth " + format_count(depth), max_depth, limit_name, fix);
  return Status(code, std::move(m));
}

}  // namespace deepinfer
