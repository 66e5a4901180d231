// Structured outputs through the engine, on the embedded default model (it has a tokenizer):
// sampled outputs fully match their regex and end with "stop", a schema that does not compile
// refuses only its own request, max_tokens still cuts ("length"), preemption keeps the
// matcher in step with the outputs, and a model without a tokenizer refuses the constraint.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "engine_run_util.h"

namespace deepinfer {
namespace {

std::string source_dir() {
  const char* d = std::getenv("DEEPINFER_SOURCE_DIR");
  return d != nullptr ? d : DEEPINFER_TEST_SOURCE_DIR;
}

std::unique_ptr<Engine> default_engine(EngineOptions o = {}) {
  o.model_dir = source_dir() + "/models/v4-small";
  o.max_model_len = 256;
  auto e = Engine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

SamplingParams constrained(std::string type, std::string schema, uint64_t seed) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.max_tokens = 48;
  p.seq_seed = seed;
  p.structured = SamplingParams::StructuredOutput{std::move(type), std::move(schema)};
  return p;
}

std::map<RequestHandle, RequestOutput> by_id(std::vector<RequestOutput> outs) {
  std::map<RequestHandle, RequestOutput> m;
  for (auto& o : outs) m.emplace(o.id, std::move(o));
  return m;
}

constexpr const char* kRegex = "[A-Z][a-z]{2,8} [0-9]{1,3}";

TEST(EngineStructured, SampledOutputsFullyMatchTheRegex) {
  auto e = default_engine();
  ASSERT_NE(e, nullptr);
  const std::regex re(kRegex);
  std::vector<RequestHandle> hs;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SamplingParams p = constrained("regex", kRegex, seed);
    p.n = 3;
    hs.push_back(*e->submit_text("The answer is", p));
  }
  auto outs = by_id(e->run_until_done());
  int distinct = 0;
  std::string first;
  for (RequestHandle h : hs) {
    for (const CompletionOutput& c : outs.at(h).outputs) {
      EXPECT_EQ(c.finish_reason, "stop") << c.text << " " << c.error;
      EXPECT_TRUE(std::regex_match(c.text, re)) << "'" << c.text << "'";
      if (first.empty()) first = c.text;
      distinct += c.text != first ? 1 : 0;
    }
  }
  EXPECT_GT(distinct, 0);  // random sampling: the constraint does not force one answer
}

TEST(EngineStructured, JsonAndEbnfEndWithStop) {
  auto e = default_engine();
  ASSERT_NE(e, nullptr);
  const RequestHandle hj = *e->submit_text(
      "Data:", constrained("json",
                           R"({"type":"object","properties":{"ok":{"type":"boolean"},)"
                           R"("n":{"type":"integer","minimum":0,"maximum":99}},)"
                           R"("required":["ok","n"]})",
                           5));
  const RequestHandle he =
      *e->submit_text("Say:", constrained("ebnf", "root ::= (\"yes\" | \"no\") \" \" [0-9]", 6));
  auto outs = by_id(e->run_until_done());
  const CompletionOutput& j = outs.at(hj).outputs[0];
  EXPECT_EQ(j.finish_reason, "stop") << j.error;
  EXPECT_TRUE(std::regex_match(j.text, std::regex(R"(\{"ok":(true|false),"n":[0-9]{1,2}\})")))
      << j.text;
  const CompletionOutput& eb = outs.at(he).outputs[0];
  EXPECT_EQ(eb.finish_reason, "stop") << eb.error;
  EXPECT_TRUE(std::regex_match(eb.text, std::regex("(yes|no) [0-9]"))) << eb.text;
}

TEST(EngineStructured, BadSchemaRefusesOnlyItsRequest) {
  auto e = default_engine();
  ASSERT_NE(e, nullptr);
  const RequestHandle good = *e->submit_text("Hi", constrained("regex", kRegex, 1));
  auto bad = e->submit_text("Hi", constrained("regex", "[a-z", 2));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("regex"), std::string::npos) << bad.status().message();
  auto unknown = e->submit_text("Hi", constrained("xml", "<a/>", 3));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("xml"), std::string::npos);
  auto outs = by_id(e->run_until_done());
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs.at(good).outputs[0].finish_reason, "stop");
}

TEST(EngineStructured, MaxTokensStillCuts) {
  auto e = default_engine();
  ASSERT_NE(e, nullptr);
  SamplingParams p = constrained("regex", "[a-z]{40,60}", 9);
  p.max_tokens = 3;
  const RequestHandle h = *e->submit_text("Hi", p);
  auto outs = by_id(e->run_until_done());
  const CompletionOutput& c = outs.at(h).outputs[0];
  EXPECT_EQ(c.finish_reason, "length");
  EXPECT_EQ(c.token_ids.size(), 3u);
  EXPECT_TRUE(std::regex_match(c.text, std::regex("[a-z]+"))) << c.text;
}

TEST(EngineStructured, PreemptionKeepsTheMatcherInStep) {
  const std::string pattern = "[a-z]{150,200}[.]";
  auto run = [&](EngineOptions o) {
    auto e = default_engine(o);
    std::vector<std::string> texts;
    if (e == nullptr) return std::make_pair(texts, int64_t{0});
    std::vector<RequestHandle> hs;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      SamplingParams p = constrained("regex", pattern, seed);
      p.max_tokens = 200;
      hs.push_back(*e->submit_text("Once upon a time", p));
    }
    auto outs = by_id(e->run_until_done());
    for (RequestHandle h : hs) {
      const CompletionOutput& c = outs.at(h).outputs[0];
      EXPECT_EQ(c.finish_reason, "stop") << c.error;
      EXPECT_TRUE(std::regex_match(c.text, std::regex(pattern))) << c.text;
      texts.push_back(c.text);
    }
    return std::make_pair(texts, e->stats().preemptions);
  };
  const auto [roomy, no_preemptions] = run({});
  EXPECT_EQ(no_preemptions, 0);
  EngineOptions starved;
  starved.kv_block_size = 16;
  starved.num_kv_blocks = 40;
  starved.max_num_batched_tokens = 16;
  const auto [squeezed, preemptions] = run(starved);
  EXPECT_GT(preemptions, 0);
  EXPECT_EQ(squeezed, roomy);
}

TEST(EngineStructured, NoTokenizerRefusesTheConstraint) {
  EngineOptions o;
  o.model_dir = engine_test::tiny_dir();  // tests/data/model/v4_tiny_a/hf_fp32
  o.num_threads = 1;
  auto e = Engine::create(o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  SamplingParams p = constrained("regex", "[a-z]+", 1);
  auto h = (*e)->submit(std::vector<int32_t>{5, 17}, p);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("tokenizer"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
