// Token-mask exactness (fast precomputed mask == naive per-token check == brute force over
// completions), rollback, jump-forward and EOS/special-token handling on small vocabularies.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <regex>

#include "structured/ebnf.h"
#include "structured/json_schema.h"
#include "structured/regex.h"
#include "test_util.h"

namespace deepinfer::structured {
namespace {

using testing::compile_or_die;
using testing::fast_mask;
using testing::naive_mask;

bool bit(const std::vector<uint32_t>& m, int32_t id) { return (m[id >> 5] >> (id & 31)) & 1; }

std::vector<int32_t> allowed(const std::vector<uint32_t>& m, int32_t vocab) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < vocab; ++id) {
    if (bit(m, id)) out.push_back(id);
  }
  return out;
}

// Random walks; at every step the fast mask must equal the naive one.
void check_walks(const std::shared_ptr<const CompiledGrammar>& cg, int walks, int steps,
                 uint32_t seed) {
  std::mt19937 rng(seed);
  const int32_t vocab = cg->tokenizer().vocab_size();
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(cg);
    std::string text;
    for (int s = 0; s < steps && !m.is_terminated(); ++s) {
      auto fast = fast_mask(m);
      auto naive = naive_mask(m);
      auto diff = testing::mask_diff(fast, naive, vocab);
      ASSERT_TRUE(diff.empty()) << "after '" << text << "': token " << diff[0] << " ('"
                                << cg->tokenizer().bytes(diff[0])
                                << "') fast=" << bit(fast, diff[0]);
      auto ids = allowed(fast, vocab);
      ASSERT_FALSE(ids.empty()) << "dead end after '" << text << "'";
      int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
      ASSERT_TRUE(m.accept_token(id));
      text += cg->tokenizer().bytes(id);
    }
  }
}

std::vector<std::string> json_vocab() {
  std::vector<std::string> v;
  for (char c = 0x20; c < 0x7F; ++c) v.push_back(std::string(1, c));  // no dead ends
  std::vector<std::string> more = {
      "{",    "}",  "[",   "]",        "\"",  ":",   ",",    "\":",  "\",",    "\"}",     "{\"",
      "\"]",  "}]", "},",  "],",       "a",   "b",   "ab",   "name", "\"name", "name\":", "1",
      "2",    "12", "0",   "-",        "-1",  ".",   "5",    "e",    "true",   "tr",      "ue",
      "null", "nu", "ll",  "false",    " ",   "\\",  "\\\"", "\\u",  "00e9",   "é",       "\xc3",
      "\xa9", "x",  "age", "\"age\":", ":\"", ",\"", "\"\"", "[]",   "{}",     "10",      "99"};
  v.insert(v.end(), more.begin(), more.end());
  return v;
}

TEST(StructuredMask, FastEqualsNaiveJsonSchemas) {
  const char* schemas[] = {
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name"]})",
      R"({"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"string","maxLength":3},{"type":"null"}]},"maxItems":4})",
      R"({"$defs":{"n":{"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"})",
      R"({"enum":["name","nab","ab",12,true,null]})",
      R"({})",
  };
  auto tok = testing::small_vocab(json_vocab());
  uint32_t seed = 1;
  for (const char* schema : schemas) {
    auto g = grammar_from_json_schema(schema);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    auto cg = compile_or_die(g.value(), tok);
    ASSERT_TRUE(cg);
    check_walks(cg, 20, 25, seed++);
  }
}

TEST(StructuredMask, FastEqualsNaiveEbnf) {
  const char* grammars[] = {
      "root ::= expr\nexpr ::= term (\"+\" term)*\nterm ::= [0-9]+ | \"(\" expr \")\"\n",
      "root ::= a | b\na ::= \"ab\" a | \"\"\nb ::= \"b\"* \"x\"\n",
      "root ::= (\"a\" root \"b\")?\n",  // nested, context-dependent at every step
      "root ::= x+\nx ::= \"(\" y? \")\" | \"a\"\ny ::= x (\"+\" x)* | \"1\"\n",
  };
  // Every string of 1..3 characters over the grammars' alphabet: many tokens cross rule ends.
  const std::string alphabet = "ab()x1+";
  std::vector<std::string> tokens;
  for (char p : alphabet) {
    tokens.push_back(std::string(1, p));
    for (char q : alphabet) {
      tokens.push_back(std::string{p, q});
      for (char r : alphabet) tokens.push_back(std::string{p, q, r});
    }
  }
  auto tok = testing::small_vocab(tokens);
  uint32_t seed = 100;
  for (const char* text : grammars) {
    auto g = grammar_from_ebnf(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    auto cg = compile_or_die(g.value(), tok);
    ASSERT_TRUE(cg);
    // The run-time check is exercised (except in grammar 2, where nothing follows a rule).
    if (seed != 101) {
      EXPECT_GT(cg->stats().num_uncertain, 0) << text;
    }
    check_walks(cg, 30, 20, seed++);
  }
  // A JSON grammar written in GBNF, on the JSON-ish vocabulary.
  auto json_g = grammar_from_ebnf(
      "root ::= value\nvalue ::= object | array | string | [0-9]+ | \"true\" | \"null\"\n"
      "object ::= \"{\" (member (\",\" member)*)? \"}\"\nmember ::= string \":\" value\n"
      "array ::= \"[\" (value (\",\" value)*)? \"]\"\nstring ::= \"\\\"\" [a-z]* \"\\\"\"\n");
  ASSERT_TRUE(json_g.ok()) << json_g.status().to_string();
  auto cg = compile_or_die(json_g.value(), testing::small_vocab(json_vocab()));
  check_walks(cg, 30, 30, 999);
}

// Random small grammars (recursion, nullable rules, repetition) over {a, b, c}: the
// precomputed masks must equal the per-token chart check at every step of random walks.
TEST(StructuredMask, FastEqualsNaiveRandomGrammars) {
  std::mt19937 rng(2024);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const char* names[] = {"root", "r1", "r2"};
  std::function<void(int, std::string&)> item = [&](int depth, std::string& out) {
    switch (pick(depth > 1 ? 4 : 7)) {
      case 0:
        out.append("\"a\"");
        break;
      case 1:
        out.append("\"b\"");
        break;
      case 2:
        out.append("[bc]");
        break;
      case 3:
        out.append(names[pick(3)]);
        break;
      case 4:
        out.append("(");
        item(depth + 1, out);
        out.append(" ");
        item(depth + 1, out);
        out.append(")?");
        break;
      case 5:
        out.append("(");
        item(depth + 1, out);
        out.append(")*");
        break;
      default:
        out.append("(");
        item(depth + 1, out);
        out.append(" | ");
        item(depth + 1, out);
        out.append(")");
    }
  };
  std::vector<std::string> tokens;
  for (char x : std::string("abc")) {
    tokens.push_back(std::string(1, x));
    for (char y : std::string("abc")) {
      tokens.push_back(std::string{x, y});
      for (char z : std::string("abc")) tokens.push_back(std::string{x, y, z});
    }
  }
  auto tok = testing::small_vocab(tokens);
  int compiled = 0;
  for (int trial = 0; trial < 100; ++trial) {
    std::string text;
    for (const char* name : names) {
      text.append(name);
      text.append(" ::= ");
      const int alts = 1 + pick(3);
      for (int a = 0; a < alts; ++a) {
        if (a) text.append(" | ");
        const int len = 1 + pick(3);
        for (int k = 0; k < len; ++k) {
          item(0, text);
          text.append(" ");
        }
      }
      text.append("\n");
    }
    auto g = grammar_from_ebnf(text);
    ASSERT_TRUE(g.ok()) << text << g.status().to_string();
    auto cg = CompiledGrammar::compile(g.value(), tok);
    if (!cg.ok()) continue;  // e.g. a grammar that matches no string
    ++compiled;
    SCOPED_TRACE(text);
    check_walks(cg.value(), 4, 10, static_cast<uint32_t>(trial));
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GE(compiled, 30);
}

// Brute force: a token is allowed iff some completion of at most kMaxTail bytes over the
// alphabet makes prefix + token + completion a full match (std::regex as the oracle).
TEST(StructuredMask, RegexMaskEqualsBruteForce) {
  const std::string alphabet = "abc";
  std::vector<std::string> tokens;
  for (char x : alphabet) {
    tokens.push_back(std::string(1, x));
    for (char y : alphabet) {
      tokens.push_back(std::string{x, y});
      for (char z : alphabet) tokens.push_back(std::string{x, y, z});
    }
  }
  std::vector<std::string> tails{""};
  constexpr int kMaxTail = 5;
  for (int len = 1; len <= kMaxTail; ++len) {
    const size_t n = tails.size();
    for (size_t i = 0; i < n; ++i) {
      if (static_cast<int>(tails[i].size()) != len - 1) continue;
      for (char x : alphabet) tails.push_back(tails[i] + x);
    }
  }
  auto tok = testing::small_vocab(tokens);
  const int32_t eos = tok->vocab_size() - 1;
  const char* patterns[] = {"(ab|c)*a?b{1,2}", "a(b|c)*c", "(a|b)*a(a|b){2}", "c{2,3}(ab)?|b+"};
  std::mt19937 rng(7);
  for (const char* p : patterns) {
    auto g = grammar_from_regex(p);
    ASSERT_TRUE(g.ok());
    auto cg = compile_or_die(g.value(), tok);
    ASSERT_TRUE(cg);
    std::regex re(p);
    for (int walk = 0; walk < 10; ++walk) {
      GrammarMatcher m(cg);
      std::string prefix;
      for (int step = 0; step < 6; ++step) {
        auto mask = fast_mask(m);
        for (int32_t id = 0; id < static_cast<int32_t>(tokens.size()); ++id) {
          bool expect = false;
          for (const std::string& tail : tails) {
            if (std::regex_match(prefix + tokens[id] + tail, re)) {
              expect = true;
              break;
            }
          }
          ASSERT_EQ(bit(mask, id), expect)
              << p << " prefix '" << prefix << "' token '" << tokens[id] << "'";
        }
        ASSERT_EQ(bit(mask, eos), std::regex_match(prefix, re))
            << p << " EOS after '" << prefix << "'";
        std::vector<int32_t> ids;
        for (int32_t id = 0; id < static_cast<int32_t>(tokens.size()); ++id) {
          if (bit(mask, id)) ids.push_back(id);
        }
        if (ids.empty()) break;
        int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
        ASSERT_TRUE(m.accept_token(id));
        prefix += tokens[id];
      }
    }
  }
}

TEST(StructuredMask, RollbackRestoresMasks) {
  auto g = grammar_from_json_schema(
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}}})");
  ASSERT_TRUE(g.ok());
  auto tok = testing::small_vocab(json_vocab());
  auto cg = compile_or_die(g.value(), tok);
  GrammarMatcher m(cg);
  std::vector<std::vector<uint32_t>> masks{fast_mask(m)};
  std::mt19937 rng(3);
  for (int i = 0; i < 8; ++i) {
    auto ids = allowed(masks.back(), tok->vocab_size());
    ASSERT_FALSE(ids.empty());
    ASSERT_TRUE(m.accept_token(ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)]));
    masks.push_back(fast_mask(m));
  }
  EXPECT_FALSE(m.rollback(9));  // only 8 accepted
  ASSERT_TRUE(m.rollback(3));
  EXPECT_EQ(fast_mask(m), masks[5]);
  ASSERT_TRUE(m.rollback(5));
  EXPECT_EQ(fast_mask(m), masks[0]);
  EXPECT_EQ(m.num_accepted_tokens(), 0);
}

TEST(StructuredMask, RollbackOverEos) {
  auto g = grammar_from_regex("ab");
  ASSERT_TRUE(g.ok());
  auto tok = testing::small_vocab({"a", "b", "ab"});
  auto cg = compile_or_die(g.value(), tok);
  GrammarMatcher m(cg);
  const int32_t eos = 3;
  EXPECT_FALSE(m.accept_token(eos));
  ASSERT_TRUE(m.accept_token(2));
  ASSERT_TRUE(m.accept_token(eos));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token(0));
  ASSERT_TRUE(m.rollback(2));
  EXPECT_FALSE(m.is_terminated());
  EXPECT_TRUE(m.accept_token(0));
}

TEST(StructuredMask, EosAndSpecialTokens) {
  auto g = grammar_from_regex("a*");
  ASSERT_TRUE(g.ok());
  auto tok = testing::byte_vocab();  // 256 = EOS, 257 = special
  auto cg = compile_or_die(g.value(), tok);
  GrammarMatcher m(cg);
  auto mask = fast_mask(m);
  EXPECT_TRUE(bit(mask, 256));   // "" is complete
  EXPECT_FALSE(bit(mask, 257));  // special: never
  EXPECT_TRUE(bit(mask, 'a'));
  EXPECT_FALSE(bit(mask, 'b'));
  EXPECT_FALSE(m.accept_token(257));
}

TEST(StructuredMask, JumpForward) {
  auto tok = testing::byte_vocab();
  auto g = grammar_from_json_schema(
      R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name","n"]})");
  ASSERT_TRUE(g.ok());
  auto cg = compile_or_die(g.value(), tok);
  GrammarMatcher m(cg);
  EXPECT_EQ(m.find_jump_forward_string(), "{\"name\":\"");
  ASSERT_TRUE(m.accept_bytes("{\"name\":\"x\""));
  EXPECT_EQ(m.find_jump_forward_string(), ",\"n\":");
  ASSERT_TRUE(m.accept_bytes(",\"n\":5"));
  EXPECT_EQ(m.find_jump_forward_string(), "");  // more digits or '}'
  ASSERT_TRUE(m.accept_bytes("}"));
  EXPECT_EQ(m.find_jump_forward_string(), "");  // complete: EOS is possible
  EXPECT_TRUE(m.can_terminate());

  auto r = grammar_from_regex("abc(d|e)f");
  ASSERT_TRUE(r.ok());
  GrammarMatcher mr(compile_or_die(r.value(), tok));
  EXPECT_EQ(mr.find_jump_forward_string(), "abc");
  ASSERT_TRUE(mr.accept_bytes("abcd"));
  EXPECT_EQ(mr.find_jump_forward_string(), "f");
  // Jump-forward does not change the state.
  EXPECT_TRUE(mr.accept_bytes("f"));
  EXPECT_TRUE(mr.can_terminate());
}

}  // namespace
}  // namespace deepinfer::structured
