// Error messages name the problem and where: regex positions, EBNF line/column, JSON pointers;
// unsupported JSON Schema keywords are errors, annotations are ignored; the compiler cache.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "structured/compiler.h"
#include "structured/ebnf.h"
#include "structured/json_schema.h"
#include "structured/regex.h"
#include "test_util.h"

namespace deepinfer::structured {
namespace {

template <typename T>
std::string error_of(const Expected<T>& e) {
  return e.ok() ? std::string("<ok>") : e.status().message();
}

TEST(StructuredErrors, RegexPositions) {
  EXPECT_EQ(error_of(grammar_from_regex("ab(c")),
            "regex error at position 2: missing ')', unterminated subpattern");
  EXPECT_EQ(error_of(grammar_from_regex("a**")), "regex error at position 2: multiple repeat");
  EXPECT_EQ(error_of(grammar_from_regex("*a")), "regex error at position 0: nothing to repeat");
  EXPECT_EQ(error_of(grammar_from_regex("x[a-")),
            "regex error at position 1: unterminated character set");
  EXPECT_EQ(error_of(grammar_from_regex("a(?=b)")),
            "regex error at position 1: lookahead assertions are not supported");
  EXPECT_EQ(error_of(grammar_from_regex("(a)\\1")),
            "regex error at position 3: backreferences are not supported");
  EXPECT_EQ(error_of(grammar_from_regex("a{3,2}")),
            "regex error at position 1: min repeat greater than max repeat");
  EXPECT_EQ(error_of(grammar_from_regex("a)")),
            "regex error at position 1: unbalanced parenthesis ')'");
  EXPECT_EQ(error_of(grammar_from_regex("a^b")),
            "regex error at position 1: anchor '^' is only supported at the start of the pattern");
  EXPECT_EQ(error_of(grammar_from_regex("[z-a]")),
            "regex error at position 1: bad character range (end before start)");
  EXPECT_TRUE(grammar_from_regex("a{,3}x{").ok());  // '{' not starting a quantifier is literal
}

TEST(StructuredErrors, EbnfLineAndColumn) {
  EXPECT_EQ(error_of(grammar_from_ebnf("root ::= \"a\" item\n")),
            "ebnf error at line 1, column 14: undefined rule 'item'");
  EXPECT_EQ(error_of(grammar_from_ebnf("root ::= \"a\"\nx ::= [ab")),
            "ebnf error at line 2, column 7: unterminated character class");
  EXPECT_EQ(error_of(grammar_from_ebnf("# c\nroot ::= (\"a\" | \"b\"\n")),
            "ebnf error at line 2, column 10: missing ')' for this '('");
  EXPECT_EQ(error_of(grammar_from_ebnf("root ::= \"abc\n\"")),
            "ebnf error at line 1, column 10: unterminated string literal");
  EXPECT_EQ(error_of(grammar_from_ebnf("start ::= \"a\"\n")),
            "ebnf error: the grammar has no rule named 'root'");
  EXPECT_EQ(error_of(grammar_from_ebnf("root ::= \"a\"\nroot ::= \"b\"\n")),
            "ebnf error at line 2, column 1: rule 'root' is defined twice");
  EXPECT_EQ(error_of(grammar_from_ebnf("root ::= \"a\"{2,1}\n")),
            "ebnf error at line 1, column 13: repetition {m,n} with n < m");
  EXPECT_EQ(error_of(grammar_from_ebnf("root ::= \"\\q\"\n")),
            "ebnf error at line 1, column 11: unknown escape \\q");
}

TEST(StructuredErrors, JsonSchemaPaths) {
  EXPECT_EQ(error_of(grammar_from_json_schema(
                R"({"type":"object","properties":{"a":{"type":"strin"}}})")),
            "JSON Schema error at #/properties/a/type: unknown type 'strin'");
  EXPECT_EQ(
      error_of(grammar_from_json_schema(R"({"type":"object","properties":{"a":{"not":{}}}})")),
      "JSON Schema at #/properties/a: keyword 'not' is not supported (cannot be enforced during "
      "generation); remove it");
  EXPECT_EQ(error_of(grammar_from_json_schema(R"({"$ref":"#/$defs/missing"})")),
            "JSON Schema at #/$ref: JSON Schema error: '$ref' \"#/$defs/missing\" does not resolve "
            "(no '$defs')");
  // Found by the json_schema fuzz target: a bad percent escape and an index past size_t threw
  // (std::stoi, std::stoul) out of the compiler instead of failing the request.
  EXPECT_EQ(error_of(grammar_from_json_schema(
                R"({"prefixItems":[{"type":"integer"},{"$ref":"#/prefix%tems/5"}]})")),
            "JSON Schema at #/prefixItems/1/$ref: JSON Schema error: '$ref' \"#/prefix%tems/5\" "
            "has a bad percent escape '%te'");
  const std::string huge_index =
      R"({"prefixItems":[{"type":"integer"},{"$ref":"#/prefixItems/99999999999999999999"}]})";
  EXPECT_THAT(error_of(grammar_from_json_schema(huge_index)),
              ::testing::HasSubstr("does not resolve (no '99999999999999999999')"));
  EXPECT_EQ(error_of(grammar_from_json_schema(
                R"({"prefixItems":[{"type":"integer"},{"$ref":"#/prefix%49tems/0"}]})")),
            "<ok>");  // %49 is 'I': "#/prefixItems/0" resolves
  EXPECT_EQ(error_of(grammar_from_json_schema(R"({"type":"array","uniqueItems":true})")),
            "JSON Schema at #: 'uniqueItems': true cannot be enforced during generation");
  EXPECT_EQ(error_of(grammar_from_json_schema(R"({"type":"integer","minimum":5,"maximum":4})")),
            "JSON Schema error at #: no integer satisfies the bounds");
  EXPECT_EQ(
      error_of(grammar_from_json_schema(R"({"type":"string","pattern":"a(b"})")),
      "JSON Schema at #/pattern: regex error at position 1: missing ')', unterminated subpattern");
  EXPECT_EQ(error_of(grammar_from_json_schema(R"({"type":"string","format":"hostname"})")),
            "JSON Schema at #/format: format 'hostname' is not supported (supported: date-time, "
            "date, time, email, uuid, uri, ipv4, ipv6)");
  EXPECT_EQ(error_of(grammar_from_json_schema(
                R"({"allOf":[{"type":"string","pattern":"a"},{"pattern":"b"}]})")),
            "JSON Schema at #/allOf/1: allOf cannot merge two different values of 'pattern'");
  EXPECT_EQ(error_of(grammar_from_json_schema("{not json")),
            "JSON Schema error: the schema is not valid JSON");
  EXPECT_EQ(
      error_of(grammar_from_json_schema(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})")),
      "JSON Schema at #/oneOf: branches 0 and 1 may match the same value, so 'exactly one' cannot "
      "be "
      "enforced; use anyOf, or make the branches disjoint (different types, or a required property "
      "with "
      "different const values)");
  EXPECT_EQ(error_of(grammar_from_json_schema(
                R"({"allOf":[{"properties":{"a":{}}}],"additionalProperties":false})")),
            "JSON Schema at #/allOf/0: allOf cannot merge 'additionalProperties' with 'properties' "
            "from another "
            "subschema (they only see their own schema object)");
  // Disjoint oneOf: by type, or by a required const discriminator.
  EXPECT_TRUE(grammar_from_json_schema(
                  R"({"oneOf":[{"type":"string"},{"type":"integer"},{"enum":[true,null]}]})")
                  .ok());
  EXPECT_TRUE(
      grammar_from_json_schema(
          R"({"oneOf":[{"type":"object","properties":{"k":{"const":"a"},"x":{"type":"integer"}},"required":["k"]},)"
          R"({"type":"object","properties":{"k":{"const":"b"}},"required":["k"]}]})")
          .ok());
  // Annotations are ignored.
  EXPECT_TRUE(grammar_from_json_schema(
                  R"({"title":"t","description":"d","examples":[1],"default":2,"type":"integer"})")
                  .ok());
}

TEST(StructuredErrors, GrammarThatMatchesNothing) {
  auto tok = testing::byte_vocab();
  GrammarCompiler compiler(tok);
  auto r = compiler.compile("ebnf", "root ::= a\na ::= \"x\" a\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "the grammar matches no string (root rule 'root' can never complete)");
  auto bad = compiler.compile("yaml", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(StructuredErrors, CompilerCachesBySchemaText) {
  GrammarCompiler compiler(testing::byte_vocab());
  auto a = compiler.compile("json", R"({"type":"integer"})");
  auto b = compiler.compile("json_schema", R"({"type":"integer"})");
  auto c = compiler.compile("regex", "[0-9]+");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a.value().get(), b.value().get());
  EXPECT_NE(a.value().get(), c.value().get());
  EXPECT_EQ(compiler.cache_size(), 2u);
}

}  // namespace
}  // namespace deepinfer::structured
