// SamplingParams::validate: defaults are valid, and each bad value is refused with a message
// that names the parameter, the value and the accepted range.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "sample/sampling_params.h"

namespace deepinfer::sample {
namespace {

struct BadCase {
  const char* label;
  std::function<void(SamplingParams&)> mutate;
  std::vector<std::string> must_mention;  // parameter, value, range
};

TEST(SamplingParamsTest, DefaultsMirrorVllmAndAreValid) {
  SamplingParams p;
  EXPECT_TRUE(p.validate().ok());
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_FALSE(p.logprobs.has_value());
  EXPECT_FALSE(p.has_penalties());
  EXPECT_FALSE(p.is_greedy());
}

TEST(SamplingParamsTest, AcceptsTheEdgesOfEachRange) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.top_k = -1;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.repetition_penalty = 1e-3f;
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.logprobs = 20;
  EXPECT_TRUE(p.validate().ok()) << p.validate().message();
  p.logprobs = 0;
  p.max_tokens.reset();
  p.top_k = 0;
  p.temperature = 2.0f;
  EXPECT_TRUE(p.validate().ok()) << p.validate().message();
}

TEST(SamplingParamsTest, RefusesBadValuesWithNamedMessages) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<BadCase> cases = {
      {"negative temperature",
       [](SamplingParams& p) { p.temperature = -0.5f; },
       {"temperature", "-0.5", "[0, 2]"}},
      {"temperature too high",
       [](SamplingParams& p) { p.temperature = 2.5f; },
       {"temperature", "2.5", "[0, 2]"}},
      {"nan temperature",
       [nan](SamplingParams& p) { p.temperature = nan; },
       {"temperature", "nan", "[0, 2]"}},
      {"top_p zero", [](SamplingParams& p) { p.top_p = 0.0f; }, {"top_p", "0", "(0, 1]"}},
      {"top_p above one", [](SamplingParams& p) { p.top_p = 1.5f; }, {"top_p", "1.5", "(0, 1]"}},
      {"top_k -2", [](SamplingParams& p) { p.top_k = -2; }, {"top_k", "-2", "0 or -1"}},
      {"min_p negative", [](SamplingParams& p) { p.min_p = -0.1f; }, {"min_p", "-0.1", "[0, 1]"}},
      {"min_p above one", [](SamplingParams& p) { p.min_p = 1.25f; }, {"min_p", "1.25", "[0, 1]"}},
      {"max_tokens zero",
       [](SamplingParams& p) { p.max_tokens = 0; },
       {"max_tokens", "0", "at least 1"}},
      {"repetition_penalty zero",
       [](SamplingParams& p) { p.repetition_penalty = 0.0f; },
       {"repetition_penalty", "0", "greater than 0"}},
      {"repetition_penalty inf",
       [](SamplingParams& p) { p.repetition_penalty = std::numeric_limits<float>::infinity(); },
       {"repetition_penalty", "inf", "finite"}},
      {"presence_penalty",
       [](SamplingParams& p) { p.presence_penalty = 3.0f; },
       {"presence_penalty", "3", "[-2, 2]"}},
      {"frequency_penalty",
       [](SamplingParams& p) { p.frequency_penalty = -2.5f; },
       {"frequency_penalty", "-2.5", "[-2, 2]"}},
      {"n zero", [](SamplingParams& p) { p.n = 0; }, {"n", "0", "at least 1"}},
      {"greedy with n > 1",
       [](SamplingParams& p) {
         p.temperature = 0.0f;
         p.n = 3;
       },
       {"n", "3", "greedy"}},
      {"logprobs negative",
       [](SamplingParams& p) { p.logprobs = -1; },
       {"logprobs", "-1", "[0, 20]"}},
      {"logprobs too many",
       [](SamplingParams& p) { p.logprobs = 21; },
       {"logprobs", "21", "[0, 20]"}},
      {"min_tokens negative",
       [](SamplingParams& p) { p.min_tokens = -1; },
       {"min_tokens", "-1", "at least 0"}},
      {"min_tokens above max_tokens",
       [](SamplingParams& p) {
         p.max_tokens = 4;
         p.min_tokens = 5;
       },
       {"min_tokens", "5", "max_tokens = 4"}},
      {"negative stop id",
       [](SamplingParams& p) {
         p.stop_token_ids = {3, -7};
       },
       {"stop_token_ids[1]", "-7", "non-negative"}},
      {"empty stop string",
       [](SamplingParams& p) {
         p.stop = {"ok", ""};
       },
       {"stop[1]", "\"\"", "must not be empty"}},
  };
  for (const BadCase& c : cases) {
    SamplingParams p;
    c.mutate(p);
    const Status s = p.validate();
    ASSERT_FALSE(s.ok()) << c.label;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.label;
    for (const std::string& word : c.must_mention) {
      EXPECT_NE(s.message().find(word), std::string::npos)
          << c.label << ": '" << word << "' missing from: " << s.message();
    }
  }
}

TEST(SamplingParamsTest, StopTokenIdsMustFitTheVocabulary) {
  SamplingParams p;
  p.stop_token_ids = {1, 1000};
  EXPECT_TRUE(p.validate().ok());
  EXPECT_TRUE(p.validate(1001).ok());
  const Status s = p.validate(1000);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stop_token_ids[1] = 1000"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[0, 1000)"), std::string::npos) << s.message();
}

TEST(SamplingParamsTest, LogitBiasIsCheckedByRangeCountAndVocabulary) {
  SamplingParams p;
  p.logit_bias = {{0, -100.0f}, {7, 100.0f}, {999, 0.5f}};
  EXPECT_TRUE(p.validate().ok());
  EXPECT_TRUE(p.validate(1000).ok());
  Status s = p.validate(999);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("logit_bias = {999: 0.5}"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[0, 999)"), std::string::npos) << s.message();
  for (const float bad : {100.5f, -101.0f, std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
    SamplingParams q;
    q.logit_bias = {{3, bad}};
    s = q.validate();
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.message().rfind("sampling parameter logit_bias = {3: ", 0), 0u) << s.message();
    EXPECT_NE(s.message().find("[-100, 100]"), std::string::npos) << s.message();
  }
  SamplingParams neg;
  neg.logit_bias = {{-1, 1.0f}};
  EXPECT_NE(neg.validate().message().find("non-negative"), std::string::npos);
  SamplingParams many;
  for (int32_t t = 0; t <= static_cast<int32_t>(SamplingParams::kMaxLogitBias); ++t) {
    many.logit_bias[t] = 1.0f;
  }
  s = many.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at most 4096"), std::string::npos) << s.message();
  many.logit_bias.erase(0);
  EXPECT_TRUE(many.validate().ok());
}

TEST(SamplingParamsTest, AllowedTokenIdsMustBeRealIds) {
  SamplingParams p;
  p.allowed_token_ids = {0, 5, 999};
  EXPECT_TRUE(p.validate(1000).ok());
  Status s = p.validate(999);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("allowed_token_ids[2] = 999"), std::string::npos) << s.message();
  p.allowed_token_ids = {3, -2};
  s = p.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("allowed_token_ids[1] = -2"), std::string::npos) << s.message();
  p.allowed_token_ids.assign(SamplingParams::kMaxAllowedTokenIds + 1, 1);
  EXPECT_NE(p.validate().message().find("at most 262144"), std::string::npos);
}

TEST(SamplingParamsTest, TinyTemperatureIsRaisedLikeVllm) {
  SamplingParams p;
  p.temperature = 0.001f;
  EXPECT_FALSE(p.is_greedy());
  EXPECT_EQ(p.effective_temperature(), SamplingParams::kMinTemperature);
  p.temperature = 0.7f;
  EXPECT_EQ(p.effective_temperature(), 0.7f);
  p.temperature = 0.0f;
  EXPECT_TRUE(p.is_greedy());
}

}  // namespace
}  // namespace deepinfer::sample
