// The automaton's construction (src/structured/automaton.cc): byte classes, the subset
// construction over them and minimisation. Sizes are checked against the minimal DFAs of
// languages whose minimal size is known; what each state accepts is checked byte by byte
// against the patterns. Compile time is in docs/fuzzing.md ("Compile time"), not tested here.
#include "structured/automaton.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/ebnf.h"
#include "structured/limits.h"
#include "structured/regex.h"

namespace deepinfer::structured {
namespace {

using ::testing::HasSubstr;

Automaton automaton_of(const std::string& pattern, const AutomatonLimits& limits = {}) {
  auto g = grammar_from_regex(pattern);
  EXPECT_TRUE(g.ok()) << pattern;
  auto a = build_automaton(*g, limits);
  EXPECT_TRUE(a.ok()) << pattern << ": " << a.status().message();
  return a.ok() ? std::move(*a) : Automaton{};
}

// Whether the root rule's DFA (the only rule of a regex) accepts `text`.
bool accepts(const Automaton& a, const std::string& text) {
  int32_t s = a.rule_start[a.root];
  for (char ch : text) {
    s = a.next(s, static_cast<uint8_t>(ch));
    if (s < 0) return false;
  }
  return a.accepting[s] != 0;
}

TEST(StructuredAutomaton, ByteClasses) {
  // [a-c], x, the digits and everything else: four classes, whatever order they appear in.
  const Automaton a = automaton_of("([a-c]x|\\d)+");
  EXPECT_EQ(a.num_classes, 4);
  for (int b = 0; b < 256; ++b) {
    const ByteSet& mine = a.class_bytes[a.byte_class[b]];
    EXPECT_TRUE(mine.test(static_cast<uint8_t>(b)));
    for (int o = 0; o < 256; ++o) {  // bytes of one class are interchangeable in every state
      if (!mine.test(static_cast<uint8_t>(o))) continue;
      for (int32_t s = 0; s < a.num_states; ++s) {
        ASSERT_EQ(a.next(s, static_cast<uint8_t>(b)), a.next(s, static_cast<uint8_t>(o)));
      }
    }
  }
  EXPECT_TRUE(accepts(a, "ax7bx"));
  EXPECT_FALSE(accepts(a, "a7"));
  EXPECT_FALSE(accepts(a, "dx"));
}

TEST(StructuredAutomaton, MinimalStates) {
  // "the (k+1)-th symbol from the end is a": the minimal DFA has 2^(k+1) states.
  EXPECT_EQ(automaton_of("(a|b)*a(a|b){10}").num_states, 2048);
  // One UTF-8 character: a start, three "continuation bytes to go" states and four whose next
  // byte is restricted (after E0, ED, F0, F4). Its expansion has 9 branches, and the subset
  // construction alone made 27 states per character.
  EXPECT_EQ(automaton_of(".").num_states, 9);
  EXPECT_EQ(automaton_of(".{100}").num_states, 801);
  // Equivalent branches merge: both are one state per position.
  EXPECT_EQ(automaton_of("(abc|abd|abe)").num_states, 4);
  EXPECT_EQ(automaton_of("(x[0-4]|x[5-9])*").num_states, 2);
}

TEST(StructuredAutomaton, MinimisedLanguageIsKept) {
  const Automaton a = automaton_of("(a|b)*a(a|b){3}");
  for (int len = 0; len <= 8; ++len) {
    for (int bits = 0; bits < (1 << len); ++bits) {
      std::string s;
      for (int i = 0; i < len; ++i) s += ((bits >> i) & 1) ? 'a' : 'b';
      const bool want = len >= 4 && s[len - 4] == 'a';
      EXPECT_EQ(accepts(a, s), want) << s;
    }
  }
  const Automaton u = automaton_of(".{2}");
  EXPECT_TRUE(accepts(u, "a\xc3\xa9"));
  EXPECT_TRUE(accepts(u, "\xe4\xbd\xa0\xf0\x9f\x98\x80"));
  EXPECT_FALSE(accepts(u, "\xed\xa0\x80z"));  // a surrogate is not UTF-8
  EXPECT_FALSE(accepts(u, "\xe0\x80\x80z"));  // nor an overlong form
  EXPECT_FALSE(accepts(u, "a\nb"));
}

// Random patterns over a, b, c, each automaton checked against its own grammar IR on every
// string of up to five letters: classes, subsets (both constructions) and minimisation together
// keep the language.
// The reference reads the IR directly (which end positions each expression reaches from a
// start), without NFA or DFA.
class IrReference {
 public:
  IrReference(const Grammar& g, const std::string& text) : g_(g), text_(text) {}
  bool matches() { return (ends(g_.rules()[g_.root()].body, 0) >> text_.size()) & 1; }

 private:
  // Bit j set: expression e matches text[i, j).
  uint32_t ends(int32_t e, size_t i) {
    const uint64_t key = static_cast<uint64_t>(e) * 64 + i;
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    const Expr& x = g_.expr(e);
    uint32_t out = 0;
    switch (x.kind) {
      case ExprKind::kEmpty:
        out = 1u << i;
        break;
      case ExprKind::kBytes:
        if (i < text_.size() && x.bytes.test(static_cast<uint8_t>(text_[i]))) out = 1u << (i + 1);
        break;
      case ExprKind::kRef:
        break;  // regexes have one rule
      case ExprKind::kSeq: {
        out = 1u << i;
        for (int32_t c : x.children) out = step(c, out);
        break;
      }
      case ExprKind::kAlt:
        for (int32_t c : x.children) out |= ends(c, i);
        break;
      case ExprKind::kRepeat: {
        uint32_t cur = 1u << i;
        for (int32_t k = 0; k < x.min; ++k) cur = step(x.children[0], cur);
        out = cur;
        for (int32_t k = x.min; (x.max < 0 || k < x.max) && cur; ++k) {
          cur = step(x.children[0], cur);
          if ((cur | out) == out) break;  // nothing new: more repetitions add nothing either
          out |= cur;
        }
        break;
      }
    }
    memo_[key] = out;
    return out;
  }
  uint32_t step(int32_t e, uint32_t starts) {
    uint32_t out = 0;
    for (size_t i = 0; i <= text_.size(); ++i) {
      if ((starts >> i) & 1) out |= ends(e, i);
    }
    return out;
  }

  const Grammar& g_;
  const std::string& text_;
  std::unordered_map<uint64_t, uint32_t> memo_;
};

std::string random_pattern(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  auto atom = [&]() -> std::string {
    static const char* const kAtoms[] = {"a", "b", "c", "[ab]", "(?:)"};
    const int r = pick(16);  // "." and "[^a]" (every other code point) now and then
    return r == 0 ? "." : r == 1 ? "[^a]" : kAtoms[r % 5];
  };
  static const char* const kQuantifiers[] = {"", "", "*", "+", "?", "{2}", "{0,2}", "{1,3}"};
  std::string out;
  const int items = 1 + pick(3);
  for (int i = 0; i < items; ++i) {
    if (depth > 0 && pick(3) == 0) {  // (appends only: GCC 12's -Wrestrict, bug 105329)
      out += '(';
      out += random_pattern(rng, depth - 1);
      if (pick(2) == 0) {
        out += '|';
        out += random_pattern(rng, depth - 1);
      }
      out += ')';
    } else {
      out += atom();
    }
    out += kQuantifiers[pick(8)];
  }
  return out;
}

TEST(StructuredAutomaton, AgreesWithTheGrammar) {
  std::mt19937 rng(7);
  std::vector<std::string> texts{""};
  for (size_t i = 0; i < texts.size() && texts[i].size() < 5; ++i) {
    for (char ch : {'a', 'b', 'c'}) {
      texts.push_back(texts[i]);
      texts.back() += ch;
    }
  }
  int checked = 0, matched = 0;
  for (int n = 0; n < 150; ++n) {
    std::string pattern = random_pattern(rng, 2);
    // Every other pattern gets a tail that takes its NFA past kBitsetNfaStates (1,024), so
    // both subset constructions (bitsets for small NFAs, sorted lists for the rest) are checked.
    if (n % 2 == 1) pattern += "c{0,1100}";
    auto g = grammar_from_regex(pattern);
    ASSERT_TRUE(g.ok()) << pattern;
    auto a = build_automaton(*g);
    if (!a.ok()) {  // nested repetitions of "." can exceed kMaxSubsetWork
      EXPECT_THAT(a.status().message(), HasSubstr("kMaxSubsetWork")) << pattern;
      continue;
    }
    ++checked;
    for (const std::string& text : texts) {
      const bool want = IrReference(*g, text).matches();
      ASSERT_EQ(accepts(*a, text), want) << pattern << " on '" << text << "'";
      matched += want ? 1 : 0;
    }
  }
  EXPECT_GE(checked, 140);
  EXPECT_GT(matched, 5000);  // of 54,600 pairs: not a vacuous agreement
}

TEST(StructuredAutomaton, MinimisedReferences) {
  // Rule references are symbols of the alphabet: states differing only in where a reference
  // leads stay apart, equal ones merge.
  auto g = grammar_from_ebnf("root ::= x \"a\" | x \"b\" | y \"a\"\nx ::= \"1\"\ny ::= \"2\"");
  ASSERT_TRUE(g.ok());
  auto a = build_automaton(*g);
  ASSERT_TRUE(a.ok());
  const int32_t root = a->rule_start[a->root];
  // From the root's start: one reference to x, one to y; x leads to a state that takes a or b,
  // y to one that takes only a.
  ASSERT_EQ(a->ref_begin[root + 1] - a->ref_begin[root], 2);
  int32_t after_x = -1, after_y = -1;
  for (int32_t k = a->ref_begin[root]; k < a->ref_begin[root + 1]; ++k) {
    (a->rule_names[a->ref_rule[k]] == "x" ? after_x : after_y) = a->ref_target[k];
  }
  ASSERT_GE(after_x, 0);
  ASSERT_GE(after_y, 0);
  EXPECT_NE(after_x, after_y);
  EXPECT_GE(a->next(after_x, 'b'), 0);
  EXPECT_LT(a->next(after_y, 'b'), 0);
  EXPECT_EQ(a->next(after_x, 'a'), a->next(after_y, 'a'));  // the one accepting state
}

// Nullable rules, FIRST and FOLLOW are least fixpoints over references; a chain of rules that
// each refer to the next, nullable only at the far end, took one pass per rule (quadratic:
// seconds for 9,999 rules) before they were solved with work lists. The GBNF front end's rule
// lookup was quadratic too (50,000 rule names took 8 s before kMaxRules refused them).
TEST(StructuredAutomaton, LongRuleChains) {
  auto chain = [](int rules) {
    std::string g = "root ::= r1 \"z\"\n";
    for (int i = 1; i + 1 < rules; ++i) {
      g += 'r';
      g += std::to_string(i);
      g += " ::= r";
      g += std::to_string(i + 1);
      g += '\n';
    }
    g += 'r';
    g += std::to_string(rules - 1);
    g += " ::= \"a\"?\n";
    return g;
  };
  auto g = grammar_from_ebnf(chain(kMaxRules));
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto a = build_automaton(*g);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_FALSE(a->rule_nullable[a->root]);  // "z" at the end
  EXPECT_TRUE(a->rule_follow[a->root].empty());
  for (size_t r = 0; r < a->rule_start.size(); ++r) {
    if (static_cast<int32_t>(r) == a->root) continue;
    ASSERT_TRUE(a->rule_nullable[r]) << a->rule_names[r];
    // Each rule ends where the one referring to it ends: before root's "z".
    ASSERT_EQ(a->rule_follow[r], ByteSet::single('z')) << a->rule_names[r];
  }
  auto big = grammar_from_ebnf(chain(50'000));
  ASSERT_TRUE(big.ok());
  EXPECT_THAT(build_automaton(*big).status().message(), HasSubstr("kMaxRules"));
}

// The fuzzer's slow inputs (docs/fuzzing.md, finding 1) build under the limits; the work they
// need is the same as before the construction got faster (the limit means the same).
TEST(StructuredAutomaton, PathologicalPatternsUnderTheLimits) {
  EXPECT_EQ(automaton_of("[9a]+\\d{233}").subset_work, 2'191'607);
  EXPECT_EQ(automaton_of(".{10000}").num_states, 80'001);
  auto g = grammar_from_regex("[9a]+\\d{400}");
  ASSERT_TRUE(g.ok());
  auto a = build_automaton(*g);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("kMaxSubsetWork"));
}

}  // namespace
}  // namespace deepinfer::structured
