// EngineOptions::load_format: "dummy" serves a directory holding config.json alone (random
// weights, token-id prompts: no tokenizer), deterministically from run to run; a value other than
// "auto" or "dummy" is an error naming the option and both accepted values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config_only_dir.h"
#include "deepinfer/engine.h"
#include "engine_run_util.h"

namespace deepinfer {
namespace {

TEST(DummyEngine, ServesTokenPromptsFromAConfigAlone) {
  const deepinfer::testing::ConfigOnlyDir dir(engine_test::source_dir() +
                                              "/tests/data/model/v4_tiny_a/official_quant");
  EngineOptions o;
  o.model_dir = dir.path();
  o.load_format = "dummy";
  std::vector<engine_test::Req> reqs(2);
  reqs[0].ids = engine_test::prompt(9, 1);
  reqs[0].params = engine_test::greedy(6);
  reqs[0].params.ignore_eos = true;
  reqs[1].ids = engine_test::prompt(4, 2);
  reqs[1].params = engine_test::seeded(3, 5);
  reqs[1].params.ignore_eos = true;
  const engine_test::EngineRun a = engine_test::run_requests(o, reqs);
  ASSERT_EQ(a.outputs.size(), 2u);
  for (const auto& [id, out] : a.outputs) {
    ASSERT_EQ(out.outputs.size(), 1u);
    EXPECT_EQ(out.outputs[0].finish_reason, "length") << out.outputs[0].error;
    EXPECT_EQ(out.outputs[0].token_ids.size(), id == a.handles[0] ? 6u : 5u);
  }
  // The same weights every time: the runs agree on every token and logprob.
  engine_test::expect_same(a, engine_test::run_requests(o, reqs));

  auto e = Engine::create(o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_NE((*e)->describe().find("load format dummy"), std::string::npos) << (*e)->describe();
  EXPECT_FALSE((*e)->has_tokenizer());
  EXPECT_FALSE((*e)->submit_text("hello", engine_test::greedy(2), {}).ok());
}

TEST(DummyEngine, UnknownLoadFormatNamesTheOptionAndTheChoices) {
  EngineOptions o;
  o.model_dir = engine_test::tiny_dir();
  o.load_format = "random";
  auto e = Engine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  const std::string m = e.status().message();
  EXPECT_NE(m.find("EngineOptions.load_format is 'random'"), std::string::npos) << m;
  EXPECT_NE(m.find("'auto'"), std::string::npos) << m;
  EXPECT_NE(m.find("'dummy'"), std::string::npos) << m;
}

}  // namespace
}  // namespace deepinfer
