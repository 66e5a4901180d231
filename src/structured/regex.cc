// Regex front end (recursive descent over code points); see regex.h.
#include "structured/regex.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <tuple>

#include "base/input_limits.h"
#include "structured/limits.h"

namespace deepinfer::structured {
namespace {

// Decodes UTF-8 (invalid bytes become U+FFFD, which then simply matches nothing useful).
std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

using Ranges = std::vector<CodepointRange>;

Ranges complement(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = std::max(next, hi + 1);
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};

class RegexParser {
 public:
  RegexParser(std::string_view pattern, Grammar& g, const RegexOptions& o)
      : cps_(decode_utf8(pattern)), g_(g), opts_(o) {}

  Expected<RegexExpr> parse() {
    RegexExpr out;
    if (pos_ < cps_.size() && cps_[pos_] == '^') {
      out.anchored_start = true;
      ++pos_;
    }
    end_ = cps_.size();
    if (end_ > pos_ && cps_[end_ - 1] == '$' &&
        !(end_ >= 2 && cps_[end_ - 2] == '\\' && !escaped_backslash(end_ - 2))) {
      out.anchored_end = true;
      --end_;
    }
    DI_ASSIGN_OR_RETURN(out.expr, parse_alt());
    if (pos_ < end_) return error(pos_, "unbalanced parenthesis ')'");
    return out;
  }

 private:
  // True if the backslash at `i` is itself escaped (preceded by an odd run of backslashes).
  bool escaped_backslash(size_t i) const {
    size_t n = 0;
    while (i > 0 && cps_[i - 1] == '\\') {
      ++n;
      --i;
    }
    return n % 2 == 1;
  }

  Status error(size_t at, const std::string& what) const {
    return invalid_argument("regex error at position " + std::to_string(at) + ": " + what);
  }
  bool at_end() const { return pos_ >= end_; }
  uint32_t peek() const { return cps_[pos_]; }

  int32_t emit(Ranges r, bool negate) {
    return emit_codepoints(g_, std::move(r), negate, opts_.json_string);
  }

  Expected<int32_t> parse_alt() {
    std::vector<int32_t> alts;
    DI_ASSIGN_OR_RETURN(int32_t first, parse_seq());
    alts.push_back(first);
    while (!at_end() && peek() == '|') {
      ++pos_;
      DI_ASSIGN_OR_RETURN(int32_t next, parse_seq());
      alts.push_back(next);
    }
    return g_.alt(std::move(alts));
  }

  Expected<int32_t> parse_seq() {
    std::vector<int32_t> items;
    while (!at_end() && peek() != '|' && peek() != ')') {
      DI_ASSIGN_OR_RETURN(int32_t item, parse_quantified());
      items.push_back(item);
    }
    return g_.seq(std::move(items));
  }

  // {m}, {m,}, {m,n}, {,n} at pos_; nullopt (pos_ unchanged) if not a valid quantifier.
  std::optional<std::pair<int32_t, int32_t>> parse_braces() {
    size_t p = pos_ + 1;
    auto number = [&](int32_t& v) {
      size_t start = p;
      v = 0;
      while (p < end_ && cps_[p] >= '0' && cps_[p] <= '9') {
        v = std::min<int64_t>(int64_t{v} * 10 + (cps_[p] - '0'), 1 << 30);
        ++p;
      }
      return p > start;
    };
    int32_t lo = 0, hi = -1;
    bool has_lo = number(lo);
    if (p < end_ && cps_[p] == '}') {
      if (!has_lo) return std::nullopt;
      pos_ = p + 1;
      return std::make_pair(lo, lo);
    }
    if (p >= end_ || cps_[p] != ',') return std::nullopt;
    ++p;
    bool has_hi = number(hi);
    if (!has_hi) hi = -1;
    if (p >= end_ || cps_[p] != '}') return std::nullopt;
    pos_ = p + 1;
    return std::make_pair(lo, hi);
  }

  Expected<int32_t> parse_quantified() {
    const size_t atom_pos = pos_;
    DI_ASSIGN_OR_RETURN(int32_t atom, parse_atom());
    bool quantified = false;
    while (!at_end()) {
      const size_t qpos = pos_;
      int32_t lo, hi;
      uint32_t c = peek();
      if (c == '*') {
        lo = 0, hi = -1, ++pos_;
      } else if (c == '+') {
        lo = 1, hi = -1, ++pos_;
      } else if (c == '?') {
        lo = 0, hi = 1, ++pos_;
      } else if (c == '{') {
        auto b = parse_braces();
        if (!b) break;
        std::tie(lo, hi) = *b;
        if (hi >= 0 && hi < lo) return error(qpos, "min repeat greater than max repeat");
        if (std::max(lo, hi) > kMaxRepeat) {
          return error(qpos, limit_message("repetition count " + format_count(std::max(lo, hi)),
                                           kMaxRepeat, "kMaxRepeat in src/structured/limits.h",
                                           "use '*' or '+' for a long or unbounded run"));
        }
      } else {
        break;
      }
      if (quantified) return error(qpos, "multiple repeat");
      quantified = true;
      if (!at_end() && peek() == '?') {
        ++pos_;  // lazy: same language
      } else if (!at_end() && peek() == '+') {
        return error(pos_, "possessive quantifiers are not supported");
      }
      (void)atom_pos;
      atom = g_.repeat(atom, lo, hi);
    }
    return atom;
  }

  Expected<int32_t> parse_atom() {
    const size_t at = pos_;
    uint32_t c = peek();
    ++pos_;
    switch (c) {
      case '(': {
        if (!at_end() && peek() == '?') {
          ++pos_;
          if (at_end()) return error(at, "unexpected end of pattern after '(?'");
          uint32_t k = peek();
          if (k == ':') {
            ++pos_;
          } else if (k == 'P' || k == '<') {
            if (k == 'P') ++pos_;
            if (at_end() || peek() != '<') return error(at, "unsupported group syntax");
            if (pos_ + 1 < end_ && (cps_[pos_ + 1] == '=' || cps_[pos_ + 1] == '!')) {
              return error(at, "lookbehind assertions are not supported");
            }
            while (!at_end() && peek() != '>') ++pos_;
            if (at_end()) return error(at, "missing '>' in group name");
            ++pos_;
          } else if (k == '=' || k == '!') {
            return error(at, "lookahead assertions are not supported");
          } else {
            return error(at, "inline flags and other '(?' groups are not supported");
          }
        }
        if (++depth_ > kMaxRegexDepth) {
          return error(
              at, limit_message("group nesting depth " + format_count(depth_), kMaxRegexDepth,
                                "kMaxRegexDepth in src/structured/limits.h", "nest fewer groups"));
        }
        DI_ASSIGN_OR_RETURN(int32_t inner, parse_alt());
        --depth_;
        if (at_end() || peek() != ')') return error(at, "missing ')', unterminated subpattern");
        ++pos_;
        return inner;
      }
      case ')':
        return error(at, "unbalanced parenthesis ')'");
      case '*':
      case '+':
      case '?':
        return error(at, "nothing to repeat");
      case '{':
        if (parse_braces_lookahead(at)) return error(at, "nothing to repeat");
        return emit({{c, c}}, false);
      case '[':
        return parse_class(at);
      case '.':
        return emit({{'\n', '\n'}}, true);
      case '^':
        return error(at, "anchor '^' is only supported at the start of the pattern");
      case '$':
        return error(at, "anchor '$' is only supported at the end of the pattern");
      case '\\': {
        DI_ASSIGN_OR_RETURN(auto r, parse_escape(at, false));
        return emit(r.first, r.second);
      }
      default:
        return emit({{c, c}}, false);
    }
  }

  bool parse_braces_lookahead(size_t at) {
    size_t save = pos_;
    pos_ = at;
    bool ok = parse_braces().has_value();
    pos_ = save;
    return ok;
  }

  Expected<uint32_t> hex(size_t at, int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (at_end()) return error(at, "incomplete escape");
      uint32_t d = peek();
      int x = d >= '0' && d <= '9'   ? int(d - '0')
              : d >= 'a' && d <= 'f' ? int(d - 'a' + 10)
              : d >= 'A' && d <= 'F' ? int(d - 'A' + 10)
                                     : -1;
      if (x < 0) return error(at, "bad hex digit in escape");
      v = v * 16 + x;
      ++pos_;
    }
    if (v > 0x10FFFF) return error(at, "code point out of range");
    return v;
  }

  // After a backslash: a set of ranges and whether it is negated.
  Expected<std::pair<Ranges, bool>> parse_escape(size_t at, bool in_class) {
    if (at_end()) return error(at, "bad escape (end of pattern)");
    uint32_t c = peek();
    ++pos_;
    auto one = [](uint32_t v) { return std::make_pair(Ranges{{v, v}}, false); };
    switch (c) {
      case 'd':
        return std::make_pair(kDigit, false);
      case 'D':
        return std::make_pair(kDigit, true);
      case 'w':
        return std::make_pair(kWord, false);
      case 'W':
        return std::make_pair(kWord, true);
      case 's':
        return std::make_pair(kSpace, false);
      case 'S':
        return std::make_pair(kSpace, true);
      case 'n':
        return one('\n');
      case 't':
        return one('\t');
      case 'r':
        return one('\r');
      case 'f':
        return one('\f');
      case 'v':
        return one('\v');
      case 'a':
        return one('\a');
      case '0':
        return one(0);
      case 'b':
        if (in_class) return one('\b');
        return error(at, "word boundaries (\\b) are not supported");
      case 'x': {
        DI_ASSIGN_OR_RETURN(uint32_t v, hex(at, 2));
        return one(v);
      }
      case 'u': {
        DI_ASSIGN_OR_RETURN(uint32_t v, hex(at, 4));
        return one(v);
      }
      case 'U': {
        DI_ASSIGN_OR_RETURN(uint32_t v, hex(at, 8));
        return one(v);
      }
      default:
        if (c >= '1' && c <= '9') return error(at, "backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          return error(at, std::string("bad or unsupported escape \\") + static_cast<char>(c));
        }
        return one(c);
    }
  }

  Expected<int32_t> parse_class(size_t at) {
    bool negate = false;
    if (!at_end() && peek() == '^') {
      negate = true;
      ++pos_;
    }
    Ranges ranges;
    bool first = true;
    while (true) {
      if (at_end()) return error(at, "unterminated character set");
      uint32_t c = peek();
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      const size_t item_pos = pos_;
      ++pos_;
      uint32_t lo;
      if (c == '\\') {
        DI_ASSIGN_OR_RETURN(auto r, parse_escape(item_pos, true));
        if (r.first.size() != 1 || r.first[0].first != r.first[0].second || r.second) {
          Ranges add = r.second ? complement(r.first) : r.first;
          ranges.insert(ranges.end(), add.begin(), add.end());
          continue;
        }
        lo = r.first[0].first;
      } else {
        lo = c;
      }
      if (pos_ + 1 < end_ && peek() == '-' && cps_[pos_ + 1] != ']') {
        const size_t dash = pos_;
        ++pos_;
        uint32_t hc = peek();
        ++pos_;
        uint32_t hi = hc;
        if (hc == '\\') {
          DI_ASSIGN_OR_RETURN(auto r, parse_escape(dash + 1, true));
          if (r.first.size() != 1 || r.first[0].first != r.first[0].second || r.second) {
            return error(dash, "bad character range");
          }
          hi = r.first[0].first;
        }
        if (hi < lo) return error(item_pos, "bad character range (end before start)");
        ranges.push_back({lo, hi});
      } else {
        ranges.push_back({lo, lo});
      }
    }
    return emit(std::move(ranges), negate);
  }

  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
  size_t end_ = 0;
  int depth_ = 0;  // groups open at pos_
  Grammar& g_;
  RegexOptions opts_;
};

}  // namespace

int32_t emit_codepoints(Grammar& g, std::vector<CodepointRange> ranges, bool negate,
                        bool json_string) {
  if (!json_string) return g.codepoints(std::move(ranges), negate);
  Ranges r = negate ? complement(std::move(ranges)) : std::move(ranges);
  // Characters that JSON must escape: control characters, '"' and '\'.
  Ranges plain;
  std::vector<int32_t> alts;
  auto escaped = [&](uint32_t cp) {
    std::string e;
    switch (cp) {
      case '"':
        e = "\\\"";
        break;
      case '\\':
        e = "\\\\";
        break;
      case '\n':
        e = "\\n";
        break;
      case '\t':
        e = "\\t";
        break;
      case '\r':
        e = "\\r";
        break;
      case '\b':
        e = "\\b";
        break;
      case '\f':
        e = "\\f";
        break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
        e = buf;
      }
    }
    alts.push_back(g.literal(e));
  };
  for (auto [lo, hi] : r) {
    for (uint32_t cp = lo; cp <= std::min<uint32_t>(hi, 0x5C); ++cp) {
      if (cp < 0x20 || cp == '"' || cp == '\\') escaped(cp);
    }
    // The plain part: [lo, hi] minus the specials.
    uint32_t a = lo;
    for (uint32_t special : {0x1Fu, 0x22u, 0x5Cu}) {
      if (a > hi) break;
      uint32_t start = special == 0x1F ? 0 : special;
      if (a <= special && hi >= start) {
        if (a < start) plain.push_back({a, start - 1});
        a = special + 1;
      }
    }
    if (a <= hi) plain.push_back({a, hi});
  }
  if (plain.empty()) return g.alt(std::move(alts));
  std::vector<int32_t> all;
  all.reserve(alts.size() + 1);
  all.push_back(g.codepoints(std::move(plain), false));
  for (int32_t x : alts) all.push_back(x);
  return g.alt(std::move(all));
}

Expected<RegexExpr> parse_regex(std::string_view pattern, Grammar& g, const RegexOptions& options) {
  if (pattern.size() > kMaxRegexBytes) {
    return invalid_argument(
        "regex error: " + limit_message("a pattern of " + format_count(pattern.size()) + " bytes",
                                        kMaxRegexBytes, "kMaxRegexBytes in src/structured/limits.h",
                                        "shorten the pattern"));
  }
  RegexParser p(pattern, g, options);
  return p.parse();
}

Expected<Grammar> grammar_from_regex(std::string_view pattern) {
  Grammar g;
  int32_t root = g.add_rule("root");
  DI_ASSIGN_OR_RETURN(RegexExpr e, parse_regex(pattern, g));
  g.set_body(root, e.expr);
  g.set_root(root);
  return g;
}

}  // namespace deepinfer::structured
