// Accept/reject agreement with the Python references (re.fullmatch, jsonschema, lark): the
// labelled strings come from tests/reference/structured/make_cases.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "structured/ebnf.h"
#include "structured/json_schema.h"
#include "structured/regex.h"
#include "test_util.h"

namespace deepinfer::structured {
namespace {

using nlohmann::json;
using testing::byte_vocab;
using testing::compile_or_die;
using testing::full_match;

json load(const std::string& name) {
  std::string text = testing::read_file(testing::source_dir() + "/tests/data/structured/" + name);
  return json::parse(text);
}

TEST(StructuredReference, RegexAgreesWithPythonRe) {
  json data = load("regex_cases.json");
  ASSERT_GE(data.size(), 10u);
  auto tok = byte_vocab();
  int checked = 0;
  for (const json& entry : data) {
    const std::string pattern = entry["pattern"];
    auto g = grammar_from_regex(pattern);
    ASSERT_TRUE(g.ok()) << pattern << ": " << g.status().to_string();
    auto cg = compile_or_die(g.value(), tok);
    ASSERT_TRUE(cg);
    for (const json& c : entry["cases"]) {
      const std::string s = c["s"];
      EXPECT_EQ(full_match(cg, s), c["ok"].get<bool>())
          << "pattern " << pattern << " string '" << s << "'";
      ++checked;
    }
  }
  EXPECT_GE(checked, 50);
}

TEST(StructuredReference, JsonSchemaAgreesWithJsonschema) {
  json data = load("json_schema_cases.json");
  ASSERT_GE(data.size(), 10u);
  auto tok = byte_vocab();
  for (const json& entry : data) {
    const std::string name = entry["name"];
    auto g = grammar_from_json_schema(entry["schema"].get<std::string>());
    ASSERT_TRUE(g.ok()) << name << ": " << g.status().to_string();
    auto cg = compile_or_die(g.value(), tok);
    ASSERT_TRUE(cg);
    for (const json& c : entry["cases"]) {
      const std::string s = c["s"];
      const bool valid = c["ok"];
      const bool ours = full_match(cg, s);
      // Soundness always; completeness for strings in our documented generation subset.
      if (ours) {
        EXPECT_TRUE(valid) << name << ": we accept an invalid document " << s;
      }
      if (valid && !c["noncanon"].get<bool>()) {
        EXPECT_TRUE(ours) << name << ": we reject a valid document " << s;
      }
    }
  }
}

TEST(StructuredReference, EbnfAgreesWithLark) {
  json data = load("ebnf_cases.json");
  ASSERT_GE(data.size(), 3u);
  auto tok = byte_vocab();
  for (const json& entry : data) {
    const std::string name = entry["name"];
    auto g = grammar_from_ebnf(entry["grammar"].get<std::string>());
    ASSERT_TRUE(g.ok()) << name << ": " << g.status().to_string();
    auto cg = compile_or_die(g.value(), tok);
    ASSERT_TRUE(cg);
    for (const json& c : entry["cases"]) {
      const std::string s = c["s"];
      EXPECT_EQ(full_match(cg, s), c["ok"].get<bool>()) << name << " string '" << s << "'";
    }
  }
}

}  // namespace
}  // namespace deepinfer::structured

namespace deepinfer::structured {
namespace {

TEST(StructuredJsonOptions, WhitespaceAndSeparators) {
  auto tok = testing::byte_vocab();
  const char* schema =
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array","items":{"type":"boolean"}}},"required":["a","b"]})";
  JsonSchemaOptions flexible;
  flexible.any_whitespace = true;
  auto g = grammar_from_json_schema(schema, flexible);
  ASSERT_TRUE(g.ok());
  auto cg = testing::compile_or_die(g.value(), tok);
  EXPECT_TRUE(testing::full_match(cg, "{ \"a\" : 1 ,\n  \"b\": [ true , false ] }"));
  EXPECT_TRUE(testing::full_match(cg, "{\"a\":1,\"b\":[]}"));
  EXPECT_FALSE(testing::full_match(cg, "{ \"a\" : 1 , \"b\": [ true , ] }"));

  JsonSchemaOptions python_default;  // json.dumps default separators
  python_default.item_separator = ", ";
  python_default.key_separator = ": ";
  auto g2 = grammar_from_json_schema(schema, python_default);
  ASSERT_TRUE(g2.ok());
  auto cg2 = testing::compile_or_die(g2.value(), tok);
  EXPECT_TRUE(testing::full_match(cg2, "{\"a\": 1, \"b\": [true, false]}"));
  EXPECT_FALSE(testing::full_match(cg2, "{\"a\":1,\"b\":[true,false]}"));

  // Dates: days per month and leap years.
  auto gd = grammar_from_json_schema(R"({"type":"string","format":"date"})");
  ASSERT_TRUE(gd.ok());
  auto cgd = testing::compile_or_die(gd.value(), tok);
  for (const char* ok : {"\"2024-02-29\"", "\"2000-02-29\"", "\"2023-04-30\"", "\"2023-12-31\""}) {
    EXPECT_TRUE(testing::full_match(cgd, ok)) << ok;
  }
  for (const char* bad :
       {"\"2023-02-29\"", "\"1900-02-29\"", "\"2023-04-31\"", "\"2023-13-01\"", "\"2023-00-10\""}) {
    EXPECT_FALSE(testing::full_match(cgd, bad)) << bad;
  }

  // Compact default; an object schema without "properties" allows any members.
  auto g3 = grammar_from_json_schema(R"({"type":"object"})");
  ASSERT_TRUE(g3.ok());
  auto cg3 = testing::compile_or_die(g3.value(), tok);
  EXPECT_TRUE(testing::full_match(cg3, "{\"x\":[1,{\"y\":null}]}"));
  EXPECT_FALSE(testing::full_match(cg3, "{ }"));
}

}  // namespace
}  // namespace deepinfer::structured

namespace deepinfer::structured {
namespace {

// JSON-Schema-Test-Suite (draft 2020-12, the groups that apply to generation; extracted by
// tests/reference/structured/make_suite_cases.py). Supported schemas must be sound on every
// instance; unsupported ones must fail with a message.
TEST(StructuredReference, JsonSchemaTestSuiteSoundness) {
  nlohmann::json data = nlohmann::json::parse(
      testing::read_file(testing::source_dir() + "/tests/data/structured/suite_cases.json"));
  ASSERT_GE(data.size(), 100u);
  auto tok = testing::byte_vocab();
  int compiled = 0, rejected = 0, valid = 0, complete = 0;
  for (const auto& group : data) {
    const std::string name = group["name"];
    auto g = grammar_from_json_schema(group["schema"].get<std::string>());
    if (!g.ok()) {
      EXPECT_FALSE(g.status().message().empty()) << name;
      ++rejected;
      continue;
    }
    auto cg = CompiledGrammar::compile(g.value(), tok);
    if (!cg.ok()) {  // e.g. a schema that matches nothing
      ++rejected;
      continue;
    }
    ++compiled;
    for (const auto& c : group["cases"]) {
      const std::string s = c["s"];
      const bool ok = c["ok"];
      const bool ours = testing::full_match(cg.value(), s);
      if (ours) {
        EXPECT_TRUE(ok) << name << ": we accept an invalid instance " << s;
      }
      valid += ok;
      complete += ok && ours;
    }
  }
  std::printf(
      "suite: %d schemas compiled, %d rejected with an error; accepted %d of %d valid instances\n",
      compiled, rejected, complete, valid);
  EXPECT_GE(compiled, 100);
}

}  // namespace
}  // namespace deepinfer::structured
