// Logprobs: values against a log-softmax computed here in long double, raw (not processed)
// logits as vLLM's default, top-n order with ties by id, ranks, and the bitmask's effect.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "sample/sampler.h"

namespace deepinfer::sample {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Reference log-softmax in long double over the finite entries.
std::vector<long double> ref_log_softmax(const std::vector<float>& row) {
  long double m = -INFINITY;
  for (float x : row) {
    if (x != kNegInf) m = std::max<long double>(m, x);
  }
  long double sum = 0;
  for (float x : row) {
    if (x != kNegInf) sum += std::exp(static_cast<long double>(x) - m);
  }
  std::vector<long double> out;
  for (float x : row) out.push_back(x == kNegInf ? -INFINITY : x - m - std::log(sum));
  return out;
}

std::vector<float> random_row(size_t n, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> row(n);
  for (float& x : row) x = normal(gen);
  return row;
}

TEST(LogprobsTest, MatchDoublePrecisionLogSoftmax) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<float> row = random_row(4096, seed, 4.0f);
    const auto ref = ref_log_softmax(row);
    SamplingParams p;
    p.logprobs = 20;
    SampleContext ctx;
    ctx.params = &p;
    ctx.key = {seed, 0, 0};
    auto r = sample_token(row, ctx);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(r->has_logprobs);
    const auto tol = [](long double v) { return 2e-6 * std::max(1.0L, std::fabs(v)); };
    EXPECT_NEAR(r->logprob, ref[r->token], tol(ref[r->token]));
    // Top 20 by the reference, ties by id.
    std::vector<int> order(row.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ref[a] > ref[b]; });
    ASSERT_EQ(r->top.size(), 20u);
    for (size_t i = 0; i < 20; ++i) {
      EXPECT_EQ(r->top[i].token, order[i]) << "rank " << i;
      EXPECT_NEAR(r->top[i].logprob, ref[order[i]], tol(ref[order[i]]));
    }
    const auto rank =
        std::count_if(ref.begin(), ref.end(), [&](long double v) { return v > ref[r->token]; });
    EXPECT_EQ(r->rank, rank + 1);
  }
}

TEST(LogprobsTest, AreRawNotProcessed) {
  // Penalties, temperature and top-k change what is sampled, not the reported logprobs.
  const std::vector<float> row = random_row(500, 11, 2.0f);
  const auto ref = ref_log_softmax(row);
  SamplingParams p;
  p.logprobs = 5;
  p.temperature = 0.3f;
  p.top_k = 3;
  p.repetition_penalty = 1.7f;
  p.frequency_penalty = 1.0f;
  TokenCounts history(std::vector<int32_t>{1, 2, 3});
  history.add_output(4);
  SampleContext ctx;
  ctx.params = &p;
  ctx.history = &history;
  ctx.key = {5, 2, 0};
  auto r = sample_token(row, ctx);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->logprob, ref[r->token], 1e-5);
  for (const TokenLogprob& t : r->top) EXPECT_NEAR(t.logprob, ref[t.token], 1e-5);
}

TEST(LogprobsTest, TopNTiesGoToTheLowerId) {
  const std::vector<float> row = {2.0f, 5.0f, 5.0f, 1.0f, 5.0f};
  const double lse = log_sum_exp(row);
  auto top = top_logprobs(row, 2, lse);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].token, 1);
  EXPECT_EQ(top[1].token, 2);
  top = top_logprobs(row, 4, lse);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[2].token, 4);
  EXPECT_EQ(top[3].token, 0);
  EXPECT_EQ(top[0].logprob, top[2].logprob);
  EXPECT_TRUE(top_logprobs(row, 0, lse).empty());
  EXPECT_EQ(logprob_rank(row, 4), 1);  // ties share the best rank
  EXPECT_EQ(logprob_rank(row, 3), 5);
  // Hand value: lse = log(e^2 + 3e^5 + e^1); logprob(0) = 2 - lse (to float-exp accuracy).
  const double expected_lse = std::log(std::exp(2.0) + 3 * std::exp(5.0) + std::exp(1.0));
  EXPECT_NEAR(lse, expected_lse, 1e-6);
  EXPECT_NEAR(top[3].logprob, 2.0 - expected_lse, 1e-6);
}

TEST(LogprobsTest, BitmaskedTokensAreNeitherListedNorCounted) {
  // Allowed: tokens 1 and 3 with logits 0 and log 3 -> logprobs log .25, log .75.
  const std::vector<float> row = {9.0f, 0.0f, 8.0f, static_cast<float>(std::log(3.0))};
  const std::vector<int32_t> mask = {0b1010};
  SamplingParams p;
  p.logprobs = 3;
  SampleContext ctx;
  ctx.params = &p;
  ctx.allowed_bitmask = mask;
  auto r = sample_token(row, ctx);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->top.size(), 2u);
  EXPECT_EQ(r->top[0].token, 3);
  EXPECT_NEAR(r->top[0].logprob, std::log(0.75), 1e-6);
  EXPECT_EQ(r->top[1].token, 1);
  EXPECT_NEAR(r->top[1].logprob, std::log(0.25), 1e-6);
}

}  // namespace
}  // namespace deepinfer::sample
