// Grammar IR builders, the code point -> UTF-8 byte-range expansion, and a debug printer.
#include "structured/grammar.h"

#include "tokenizer/utf8.h"

#include <algorithm>
#include <cstdio>

namespace deepinfer::structured {

void append_utf8(uint32_t cp, std::string& out) { tokenizer::utf8::append_code_point(cp, out); }

int32_t Grammar::add_rule(std::string name) {
  const int32_t id = static_cast<int32_t>(rules_.size());
  rule_index_.emplace(name, id);  // keeps an earlier rule of the same name
  rules_.push_back(Rule{std::move(name), -1});
  return id;
}

// A hash lookup: a GBNF grammar of 1 MiB can name a hundred thousand rules, each looked up
// where it is used (a linear search made that quadratic).
int32_t Grammar::find_rule(std::string_view name) const {
  auto it = rule_index_.find(std::string(name));
  return it == rule_index_.end() ? -1 : it->second;
}

int32_t Grammar::push(Expr e) {
  exprs_.push_back(std::move(e));
  return static_cast<int32_t>(exprs_.size() - 1);
}

int32_t Grammar::empty() { return push(Expr{}); }

int32_t Grammar::bytes(const ByteSet& set) {
  Expr e;
  e.kind = ExprKind::kBytes;
  e.bytes = set;
  return push(std::move(e));
}

int32_t Grammar::literal(std::string_view text) {
  std::vector<int32_t> items;
  items.reserve(text.size());
  for (char c : text) items.push_back(byte(static_cast<uint8_t>(c)));
  return seq(std::move(items));
}

int32_t Grammar::seq(std::vector<int32_t> items) {
  if (items.empty()) return empty();
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = ExprKind::kSeq;
  e.children = std::move(items);
  return push(std::move(e));
}

int32_t Grammar::alt(std::vector<int32_t> items) {
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = ExprKind::kAlt;  // an empty alternation matches nothing
  e.children = std::move(items);
  return push(std::move(e));
}

int32_t Grammar::ref(int32_t rule) {
  Expr e;
  e.kind = ExprKind::kRef;
  e.rule = rule;
  return push(std::move(e));
}

int32_t Grammar::repeat(int32_t item, int32_t min, int32_t max) {
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = ExprKind::kRepeat;
  e.children = {item};
  e.min = min;
  e.max = max;
  return push(std::move(e));
}

namespace {

// Splits [lo, hi] (same UTF-8 length n) into ranges whose encodings are products of byte
// ranges (the classic utf8-ranges construction), appending one sequence per range.
void split_utf8(uint32_t lo, uint32_t hi, int n, Grammar& g, std::vector<int32_t>& out) {
  for (int i = 1; i < n; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_utf8(lo, lo | m, n, g, out);
        split_utf8((lo | m) + 1, hi, n, g, out);
        return;
      }
      if ((hi & m) != m) {
        split_utf8(lo, (hi & ~m) - 1, n, g, out);
        split_utf8(hi & ~m, hi, n, g, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(lo, a);
  append_utf8(hi, b);
  std::vector<int32_t> items;
  for (size_t k = 0; k < a.size(); ++k) {
    items.push_back(
        g.bytes(ByteSet::range(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]))));
  }
  out.push_back(g.seq(std::move(items)));
}

}  // namespace

int32_t Grammar::codepoints(std::vector<CodepointRange> ranges, bool negate) {
  // Normalise: sort, merge, drop surrogates, optionally complement.
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodepointRange> merged;
  for (auto [lo, hi] : ranges) {
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (lo > hi) continue;
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.push_back({lo, hi});
    }
  }
  if (negate) {
    std::vector<CodepointRange> comp;
    uint32_t next = 0;
    for (auto [lo, hi] : merged) {
      if (lo > next) comp.push_back({next, lo - 1});
      next = hi + 1;
    }
    if (next <= 0x10FFFF) comp.push_back({next, 0x10FFFF});
    merged = std::move(comp);
  }
  std::vector<CodepointRange> clean;
  for (auto [lo, hi] : merged) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      clean.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) clean.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) clean.push_back({0xE000, hi});
  }
  ByteSet ascii;
  std::vector<int32_t> alts;
  static constexpr uint32_t kBounds[4][2] = {
      {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xFFFF}, {0x10000, 0x10FFFF}};
  for (auto [lo, hi] : clean) {
    for (int n = 1; n <= 4; ++n) {
      uint32_t a = std::max(lo, kBounds[n - 1][0]);
      uint32_t b = std::min(hi, kBounds[n - 1][1]);
      if (a > b) continue;
      if (n == 1) {
        ascii.set_range(static_cast<int>(a), static_cast<int>(b));
      } else {
        split_utf8(a, b, n, *this, alts);
      }
    }
  }
  if (ascii.empty()) return alt(std::move(alts));
  std::vector<int32_t> all;
  all.reserve(alts.size() + 1);
  all.push_back(bytes(ascii));
  for (int32_t x : alts) all.push_back(x);
  return alt(std::move(all));
}

namespace {

void byte_set_to_string(const ByteSet& s, std::string& out) {
  auto esc = [&](int b) {
    char buf[8];
    if (b >= 0x21 && b < 0x7F && b != '\\' && b != ']' && b != '-' && b != '^') {
      out.push_back(static_cast<char>(b));
    } else {
      std::snprintf(buf, sizeof(buf), "\\x%02X", b);
      out += buf;
    }
  };
  if (s.count() == 1) {
    for (int b = 0; b < 256; ++b) {
      if (s.test(static_cast<uint8_t>(b))) {
        out += "[";
        esc(b);
        out += "]";
      }
    }
    return;
  }
  out += "[";
  for (int b = 0; b < 256;) {
    if (!s.test(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.test(static_cast<uint8_t>(e + 1))) ++e;
    esc(b);
    if (e > b) {
      out += "-";
      esc(e);
    }
    b = e + 1;
  }
  out += "]";
}

}  // namespace

void Grammar::expr_to_string(int32_t id, std::string& out) const {
  const Expr& e = exprs_[id];
  switch (e.kind) {
    case ExprKind::kEmpty:
      out += "\"\"";
      break;
    case ExprKind::kBytes:
      byte_set_to_string(e.bytes, out);
      break;
    case ExprKind::kSeq:
    case ExprKind::kAlt:
      out += "(";
      for (size_t i = 0; i < e.children.size(); ++i) {
        if (i) out += e.kind == ExprKind::kSeq ? " " : " | ";
        expr_to_string(e.children[i], out);
      }
      out += ")";
      break;
    case ExprKind::kRef:
      out += rules_[e.rule].name;
      break;
    case ExprKind::kRepeat:
      expr_to_string(e.children[0], out);
      out.push_back('{');
      out.append(std::to_string(e.min));
      out.push_back(',');
      if (e.max >= 0) out.append(std::to_string(e.max));
      out.push_back('}');
      break;
  }
}

std::string Grammar::to_string() const {
  std::string out;
  for (size_t i = 0; i < rules_.size(); ++i) {
    out += rules_[i].name + " ::= ";
    if (rules_[i].body >= 0) expr_to_string(rules_[i].body, out);
    out += "\n";
  }
  return out;
}

}  // namespace deepinfer::structured
