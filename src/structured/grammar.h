// Grammar IR: a context-free grammar over bytes that every front end (regex, JSON Schema,
// EBNF) compiles to. A rule's body is a regular expression over byte sets and references to
// rules (an "extended" CFG), so that repetition and alternation stay inside one rule: the
// automaton (automaton.h) turns each body into a DFA, and the token-mask precompute is
// context-independent within a rule, so bigger rules mean fewer run-time checks.
//
// Expressions live in one arena and are referred to by int32 ids; they are immutable once
// built, so sub-expressions may be shared between rules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "structured/byte_set.h"

namespace deepinfer::structured {

enum class ExprKind : uint8_t { kEmpty, kBytes, kSeq, kAlt, kRef, kRepeat };

struct Expr {
  ExprKind kind = ExprKind::kEmpty;
  ByteSet bytes;                  // kBytes
  std::vector<int32_t> children;  // kSeq, kAlt; kRepeat has exactly one
  int32_t rule = -1;              // kRef
  int32_t min = 0;                // kRepeat
  int32_t max = -1;               // kRepeat; -1 = unbounded
};

struct Rule {
  std::string name;
  int32_t body = -1;  // -1 until defined
};

// A Unicode code point range, both ends included.
using CodepointRange = std::pair<uint32_t, uint32_t>;

class Grammar {
 public:
  // Rules.
  int32_t add_rule(std::string name);
  int32_t find_rule(std::string_view name) const;
  void set_body(int32_t rule, int32_t expr) { rules_[rule].body = expr; }
  void set_root(int32_t rule) { root_ = rule; }
  int32_t root() const { return root_; }
  const std::vector<Rule>& rules() const { return rules_; }
  const Expr& expr(int32_t id) const { return exprs_[id]; }
  size_t num_exprs() const { return exprs_.size(); }

  // Expression builders (each returns a new expression id).
  int32_t empty();
  int32_t bytes(const ByteSet& set);
  int32_t byte(uint8_t b) { return bytes(ByteSet::single(b)); }
  int32_t literal(std::string_view text);  // the bytes of `text` in order
  int32_t seq(std::vector<int32_t> items);
  int32_t alt(std::vector<int32_t> items);
  int32_t ref(int32_t rule);
  int32_t repeat(int32_t item, int32_t min, int32_t max);
  int32_t optional(int32_t item) { return repeat(item, 0, 1); }
  int32_t star(int32_t item) { return repeat(item, 0, -1); }
  int32_t plus(int32_t item) { return repeat(item, 1, -1); }
  // Any one code point in `ranges` (or, negated, any code point outside them), as UTF-8 byte
  // sequences. Surrogates (U+D800..U+DFFF) are never produced: they are not valid UTF-8.
  int32_t codepoints(std::vector<CodepointRange> ranges, bool negate = false);

  // EBNF-like text for debugging and error messages.
  std::string to_string() const;

 private:
  int32_t push(Expr e);
  void expr_to_string(int32_t id, std::string& out) const;

  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  std::unordered_map<std::string, int32_t> rule_index_;  // name -> first rule of that name
  int32_t root_ = -1;
};

// Appends the UTF-8 encoding of `cp` (which must be <= 0x10FFFF).
void append_utf8(uint32_t cp, std::string& out);

}  // namespace deepinfer::structured
