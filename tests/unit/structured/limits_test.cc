// The structured-output limits (src/structured/limits.h, docs/limits.md): a pattern, grammar or
// schema just over each limit gives an error naming the limit, the value found and the fix; one
// at the limit (or a normal one) still converts.
#include "structured/limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "structured/automaton.h"
#include "structured/ebnf.h"
#include "structured/json_schema.h"
#include "structured/regex.h"

namespace deepinfer::structured {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::string error_of(const Expected<T>& e) {
  return e.ok() ? std::string("<ok>") : e.status().message();
}

std::string nested(const std::string& open, const std::string& inner, const std::string& close,
                   size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += open;
  s += inner;
  for (size_t i = 0; i < depth; ++i) s += close;
  return s;
}

TEST(StructuredLimits, RegexSize) {
  EXPECT_TRUE(grammar_from_regex(std::string(kMaxRegexBytes, 'a')).ok());
  EXPECT_EQ(error_of(grammar_from_regex(std::string(kMaxRegexBytes + 1, 'a'))),
            "regex error: a pattern of 65,537 bytes exceeds the limit of 65,536 (kMaxRegexBytes "
            "in src/structured/limits.h); shorten the pattern");
}

TEST(StructuredLimits, RegexGroupDepth) {
  EXPECT_TRUE(grammar_from_regex(nested("(", "a", ")", kMaxRegexDepth)).ok());
  EXPECT_EQ(error_of(grammar_from_regex(nested("(", "a", ")", 10000))),
            "regex error at position 256: group nesting depth 257 exceeds the limit of 256 "
            "(kMaxRegexDepth in src/structured/limits.h); nest fewer groups");
  EXPECT_THAT(error_of(grammar_from_regex(nested("(?:", "a", ")", 10000))),
              HasSubstr("kMaxRegexDepth"));
}

TEST(StructuredLimits, RegexRepeat) {
  EXPECT_TRUE(grammar_from_regex("a{10000}").ok());
  EXPECT_EQ(error_of(grammar_from_regex("a{1000000}")),
            "regex error at position 1: repetition count 1,000,000 exceeds the limit of 10,000 "
            "(kMaxRepeat in src/structured/limits.h); use '*' or '+' for a long or unbounded run");
  EXPECT_THAT(error_of(grammar_from_regex("a{2,10001}")), HasSubstr("repetition count 10,001"));
}

TEST(StructuredLimits, GrammarSize) {
  const std::string head = "root ::= \"";
  std::string ok = head + std::string(kMaxGrammarBytes - head.size() - 1, 'a') + "\"";
  EXPECT_TRUE(grammar_from_ebnf(ok).ok());
  EXPECT_EQ(error_of(grammar_from_ebnf(ok + " ")),
            "ebnf error: a grammar of 1,048,577 bytes exceeds the limit of 1,048,576 "
            "(kMaxGrammarBytes in src/structured/limits.h); shorten the grammar");
}

TEST(StructuredLimits, GrammarDepth) {
  EXPECT_TRUE(grammar_from_ebnf("root ::= " + nested("(", "\"a\"", ")", kMaxGrammarDepth)).ok());
  EXPECT_EQ(error_of(grammar_from_ebnf("root ::= " + nested("(", "\"a\"", ")", 100000))),
            "ebnf error at line 1, column 266: parenthesis nesting depth 257 exceeds the limit of "
            "256 (kMaxGrammarDepth in src/structured/limits.h); move inner groups into rules of "
            "their own");
}

TEST(StructuredLimits, GrammarRepeat) {
  EXPECT_TRUE(grammar_from_ebnf("root ::= \"a\"{0,10000}").ok());
  EXPECT_EQ(error_of(grammar_from_ebnf("root ::= \"a\"{1000000}")),
            "ebnf error at line 1, column 13: repetition count 1,000,000 exceeds the limit of "
            "10,000 (kMaxRepeat in src/structured/limits.h); use '*' or '+' for a long or "
            "unbounded run");
}

TEST(StructuredLimits, SchemaSize) {
  const std::string head = R"({"type": "string", "description": ")";
  std::string ok = head + std::string(kMaxSchemaBytes - head.size() - 2, 'd') + "\"}";
  EXPECT_TRUE(grammar_from_json_schema(ok).ok()) << error_of(grammar_from_json_schema(ok));
  EXPECT_EQ(error_of(grammar_from_json_schema(ok + " ")),
            "JSON Schema error: a schema of 1,048,577 bytes exceeds the limit of 1,048,576 "
            "(kMaxSchemaBytes in src/structured/limits.h); shorten the schema, or share parts "
            "through $defs");
}

TEST(StructuredLimits, SchemaJsonDepth) {
  // 100,000 levels of JSON: refused on the text, before any parser or walker sees it.
  EXPECT_EQ(error_of(grammar_from_json_schema(R"({"type": "array", "items": {"enum": [)" +
                                              nested("[", "1", "]", 100000) + "]}}")),
            "JSON Schema error: JSON nesting depth 100,003 exceeds the limit of 512 "
            "(kMaxSchemaJsonDepth in src/structured/limits.h); nest fewer schemas, or share "
            "parts through $defs");
  // A deep enum value under the limit converts (and is walked) fine.
  EXPECT_TRUE(grammar_from_json_schema(R"({"enum": [)" + nested("[", "1", "]", 500) + "]}").ok());
}

TEST(StructuredLimits, SchemaNesting) {
  auto schema = [](size_t depth) {
    return nested(R"({"type": "array", "items": )", R"({"type": "integer"})", "}", depth);
  };
  EXPECT_TRUE(grammar_from_json_schema(schema(kMaxSchemaDepth - 1)).ok());
  EXPECT_THAT(error_of(grammar_from_json_schema(schema(kMaxSchemaDepth))),
              HasSubstr("schema nesting depth 201 exceeds the limit of 200 (kMaxSchemaDepth in "
                        "src/structured/limits.h)"));
}

TEST(StructuredLimits, AutomatonRules) {
  auto chain = [](int rules) {
    std::string g;
    for (int i = 0; i + 1 < rules; ++i) {
      if (i == 0) {
        g += "root";
      } else {
        g += 'r';
        g += std::to_string(i);
      }
      g += " ::= r";
      g += std::to_string(i + 1);
      g += '\n';
    }
    g += 'r';
    g += std::to_string(rules - 1);
    return g + " ::= \"a\"\n";
  };
  auto small = grammar_from_ebnf(chain(100));
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(build_automaton(*small).ok());
  auto big = grammar_from_ebnf(chain(kMaxRules + 1));
  ASSERT_TRUE(big.ok()) << big.status().message();
  EXPECT_EQ(error_of(build_automaton(*big)),
            "grammar too large: 10,001 rules exceeds the limit of 10,000 (kMaxRules in "
            "src/structured/limits.h); merge rules or share them");
}

TEST(StructuredLimits, AutomatonStatesAndRepeat) {
  AutomatonLimits small;
  small.max_states = 1000;  // the default, kMaxAutomatonStates, is reached the same way
  auto g = grammar_from_regex("a{2000}");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(error_of(build_automaton(*g, small)),
            "grammar too large: its automaton needs more than 1,000 states "
            "(kMaxAutomatonStates in src/structured/limits.h); bound fewer repetitions or "
            "simplify the grammar");
  auto g10 = grammar_from_regex("a{10}");
  ASSERT_TRUE(g10.ok());
  EXPECT_TRUE(build_automaton(*g10, small).ok());
  // A repetition built directly in the IR (no front end) is checked by the automaton.
  Grammar ir;
  const int32_t root = ir.add_rule("root");
  ir.set_body(root, ir.repeat(ir.byte('a'), kMaxRepeat + 1, kMaxRepeat + 1));
  ir.set_root(root);
  EXPECT_THAT(error_of(build_automaton(ir)),
              HasSubstr("repetition count 10,001 exceeds the limit of 10,000 (kMaxRepeat"));
}

// Found by the regex fuzz target (tests/fuzz/corpus/regex/slow_class_plus_digit_repeat_233):
// "[…9…]+\d{233}" took seconds, and "\d{10000}" would take hours, in the subset construction.
TEST(StructuredLimits, SubsetWork) {
  AutomatonLimits small;
  small.max_subset_work = 100'000;  // the default, kMaxSubsetWork, is reached the same way
  auto g = grammar_from_regex("[9a]+\\d{200}");
  ASSERT_TRUE(g.ok());
  EXPECT_THAT(error_of(build_automaton(*g, small)),
              HasSubstr("grammar too complex: building its automaton exceeds the limit of 100,000 "
                        "(NFA states gathered into subsets, kMaxSubsetWork"));
  auto g10 = grammar_from_regex("[9a]+\\d{10}");
  ASSERT_TRUE(g10.ok());
  EXPECT_TRUE(build_automaton(*g10, small).ok());
}

}  // namespace
}  // namespace deepinfer::structured
