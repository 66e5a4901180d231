// EBNF (GBNF) front end: recursive descent over bytes; see ebnf.h.
#include "structured/ebnf.h"

#include <algorithm>
#include <map>
#include <optional>

#include "base/input_limits.h"
#include "structured/limits.h"
#include "structured/regex.h"

namespace deepinfer::structured {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

class EbnfParser {
 public:
  explicit EbnfParser(std::string_view text) : s_(text) {}

  Expected<Grammar> parse(std::string_view root_name) {
    skip_space();
    if (pos_ >= s_.size())
      return error(pos_, "empty grammar: expected a rule such as `root ::= \"a\"`");
    while (pos_ < s_.size()) {
      const size_t at = pos_;
      std::string name = parse_name();
      if (name.empty()) return error(at, "expected a rule name");
      skip_space();
      if (s_.substr(pos_, 3) != "::=")
        return error(pos_, "expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      int32_t rule = rule_id(name, at);
      if (g_.rules()[rule].body >= 0) return error(at, "rule '" + name + "' is defined twice");
      DI_ASSIGN_OR_RETURN(int32_t body, parse_alt(0));
      g_.set_body(rule, body);
      skip_space();
      if (pos_ < s_.size() && !at_rule_start()) {
        return error(pos_, std::string("unexpected '") + s_[pos_] + "'");
      }
    }
    for (const auto& [name, use] : first_use_) {
      if (g_.rules()[g_.find_rule(name)].body < 0)
        return error(use, "undefined rule '" + name + "'");
    }
    int32_t root = g_.find_rule(root_name);
    if (root < 0 || g_.rules()[root].body < 0) {
      return invalid_argument("ebnf error: the grammar has no rule named '" +
                              std::string(root_name) + "'");
    }
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  Status error(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return invalid_argument("ebnf error at line " + std::to_string(line) + ", column " +
                            std::to_string(col) + ": " + what);
  }

  void skip_space() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    size_t b = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(b, pos_ - b));
  }

  // True at `name ::=` (does not move).
  bool at_rule_start() {
    size_t save = pos_;
    std::string name = parse_name();
    skip_space();
    bool yes = !name.empty() && s_.substr(pos_, 3) == "::=";
    pos_ = save;
    return yes;
  }

  int32_t rule_id(const std::string& name, size_t at) {
    int32_t id = g_.find_rule(name);
    if (id < 0) {
      id = g_.add_rule(name);
      first_use_.emplace(name, at);
    }
    return id;
  }

  Expected<int32_t> parse_alt(int depth) {
    std::vector<int32_t> alts;
    while (true) {
      DI_ASSIGN_OR_RETURN(int32_t seq, parse_seq(depth));
      alts.push_back(seq);
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    return g_.alt(std::move(alts));
  }

  Expected<int32_t> parse_seq(int depth) {
    std::vector<int32_t> items;
    while (true) {
      skip_space();
      if (pos_ >= s_.size()) break;
      char c = s_[pos_];
      if (c == '|' || c == ')') break;
      if (is_name_char(c) && at_rule_start()) break;
      DI_ASSIGN_OR_RETURN(int32_t item, parse_postfix(depth));
      items.push_back(item);
    }
    return g_.seq(std::move(items));
  }

  Expected<int32_t> parse_postfix(int depth) {
    DI_ASSIGN_OR_RETURN(int32_t item, parse_primary(depth));
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '*') {
        item = g_.star(item), ++pos_;
      } else if (c == '+') {
        item = g_.plus(item), ++pos_;
      } else if (c == '?') {
        item = g_.optional(item), ++pos_;
      } else if (c == '{') {
        const size_t at = pos_;
        ++pos_;
        auto num = [&]() -> std::optional<int32_t> {
          skip_space();
          size_t b = pos_;
          int64_t v = 0;
          while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9')
            v = std::min<int64_t>(v * 10 + (s_[pos_++] - '0'), 1 << 30);
          if (pos_ == b) return std::nullopt;
          return static_cast<int32_t>(v);
        };
        auto lo = num();
        skip_space();
        int32_t min = lo.value_or(0), max = min;
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          auto hi = num();
          max = hi.value_or(-1);
        } else if (!lo) {
          return error(at, "expected a repetition count in '{...}'");
        }
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '}')
          return error(at, "expected '}' to close the repetition");
        ++pos_;
        if (max >= 0 && max < min) return error(at, "repetition {m,n} with n < m");
        if (std::max(min, max) > kMaxRepeat) {
          return error(at, limit_message("repetition count " + format_count(std::max(min, max)),
                                         kMaxRepeat, "kMaxRepeat in src/structured/limits.h",
                                         "use '*' or '+' for a long or unbounded run"));
        }
        item = g_.repeat(item, min, max);
      } else {
        break;
      }
    }
    return item;
  }

  // One escape after a backslash (pos_ at the char after '\'); returns the code point.
  Expected<uint32_t> parse_escape(size_t at) {
    if (pos_ >= s_.size()) return error(at, "unfinished escape");
    char c = s_[pos_++];
    auto hexn = [&](int n) -> Expected<uint32_t> {
      uint32_t v = 0;
      for (int i = 0; i < n; ++i) {
        if (pos_ >= s_.size()) return error(at, "unfinished \\x/\\u escape");
        char d = s_[pos_++];
        int x = d >= '0' && d <= '9'   ? d - '0'
                : d >= 'a' && d <= 'f' ? d - 'a' + 10
                : d >= 'A' && d <= 'F' ? d - 'A' + 10
                                       : -1;
        if (x < 0) return error(at, "bad hex digit in escape");
        v = v * 16 + static_cast<uint32_t>(x);
      }
      if (v > 0x10FFFF) return error(at, "code point out of range");
      return v;
    };
    switch (c) {
      case 'n':
        return uint32_t{'\n'};
      case 'r':
        return uint32_t{'\r'};
      case 't':
        return uint32_t{'\t'};
      case '0':
        return uint32_t{0};
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
        return static_cast<uint32_t>(c);
      case 'x':
        return hexn(2);
      case 'u':
        return hexn(4);
      case 'U':
        return hexn(8);
      default:
        return error(at, std::string("unknown escape \\") + c);
    }
  }

  // One UTF-8 code point from the text.
  uint32_t next_cp() {
    uint8_t c = static_cast<uint8_t>(s_[pos_]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (pos_ + n > s_.size()) n = 1;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s_[pos_ + k]) & 0x3F);
    pos_ += n;
    return cp;
  }

  Expected<int32_t> parse_primary(int depth) {
    const size_t at = pos_;
    char c = s_[pos_];
    if (c == '"' || c == '\'') {
      ++pos_;
      std::string bytes;
      while (true) {
        if (pos_ >= s_.size() || s_[pos_] == '\n') return error(at, "unterminated string literal");
        if (s_[pos_] == c) {
          ++pos_;
          break;
        }
        if (s_[pos_] == '\\') {
          const size_t esc = pos_++;
          DI_ASSIGN_OR_RETURN(uint32_t cp, parse_escape(esc));
          append_utf8(cp, bytes);
        } else {
          bytes.push_back(s_[pos_++]);
        }
      }
      return g_.literal(bytes);
    }
    if (c == '[') {
      ++pos_;
      bool negate = false;
      if (pos_ < s_.size() && s_[pos_] == '^') {
        negate = true;
        ++pos_;
      }
      std::vector<CodepointRange> ranges;
      while (true) {
        if (pos_ >= s_.size()) return error(at, "unterminated character class");
        if (s_[pos_] == ']') {
          ++pos_;
          break;
        }
        auto one = [&]() -> Expected<uint32_t> {
          if (s_[pos_] == '\\') {
            const size_t esc = pos_++;
            return parse_escape(esc);
          }
          return next_cp();
        };
        const size_t item = pos_;
        DI_ASSIGN_OR_RETURN(uint32_t lo, one());
        uint32_t hi = lo;
        if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
          ++pos_;
          DI_ASSIGN_OR_RETURN(hi, one());
          if (hi < lo) return error(item, "bad character range (end before start)");
        }
        ranges.push_back({lo, hi});
      }
      return g_.codepoints(std::move(ranges), negate);
    }
    if (c == '.') {
      ++pos_;
      return g_.codepoints({}, true);
    }
    if (c == '(') {
      ++pos_;
      if (depth + 1 > kMaxGrammarDepth) {
        return error(at,
                     limit_message("parenthesis nesting depth " + format_count(depth + 1),
                                   kMaxGrammarDepth, "kMaxGrammarDepth in src/structured/limits.h",
                                   "move inner groups into rules of their own"));
      }
      DI_ASSIGN_OR_RETURN(int32_t inner, parse_alt(depth + 1));
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ')') return error(at, "missing ')' for this '('");
      ++pos_;
      return inner;
    }
    if (is_name_char(c)) {
      std::string name = parse_name();
      return g_.ref(rule_id(name, at));
    }
    if (c == ')') return error(at, "unbalanced ')'");
    return error(at, std::string("unexpected '") + c + "'");
  }

  std::string_view s_;
  size_t pos_ = 0;
  Grammar g_;
  std::map<std::string, size_t> first_use_;
};

}  // namespace

Expected<Grammar> grammar_from_ebnf(std::string_view text, std::string_view root_rule) {
  if (text.size() > kMaxGrammarBytes) {
    return invalid_argument(
        "ebnf error: " +
        limit_message("a grammar of " + format_count(text.size()) + " bytes", kMaxGrammarBytes,
                      "kMaxGrammarBytes in src/structured/limits.h", "shorten the grammar"));
  }
  EbnfParser p(text);
  return p.parse(root_rule);
}

}  // namespace deepinfer::structured
