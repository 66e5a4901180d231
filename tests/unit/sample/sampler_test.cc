// The composed Sampler: its draws follow the filtered distribution, never pick a filtered
// token, depend only on (row, params, seed, position, sample index), and break ties by id.
// Every draw uses a fixed seed, so the statistical checks cannot flake: they either always
// pass or always fail for a given implementation.
#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace deepinfer::sample {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(p > 0 ? static_cast<float>(std::log(p)) : kNegInf);
  return out;
}

// Counts of 'draws' tokens sampled at positions 0..draws-1.
std::vector<int> histogram(const std::vector<float>& row, const SamplingParams& params, int draws,
                           uint64_t seed = 1234) {
  Sampler sampler;
  std::vector<int> counts(row.size(), 0);
  SampleContext ctx;
  ctx.params = &params;
  for (int i = 0; i < draws; ++i) {
    ctx.key = {seed, static_cast<uint64_t>(i), 0};
    auto r = sampler.sample(row, ctx);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return counts;
    ++counts[r->token];
  }
  return counts;
}

// Each count within 5 binomial standard deviations of draws x expected[i]; zero where the
// expected probability is zero.
void expect_frequencies(const std::vector<int>& counts, const std::vector<double>& expected,
                        int draws) {
  ASSERT_EQ(counts.size(), expected.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    const double mean = draws * expected[i];
    if (expected[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " should never be drawn";
      continue;
    }
    const double sd = std::sqrt(draws * expected[i] * (1.0 - expected[i]));
    EXPECT_NEAR(counts[i], mean, 5.0 * sd) << "token " << i;
  }
}

const std::vector<double> kProbs = {0.05, 0.4, 0.25, 0.2, 0.1, 0.0};

TEST(SamplerTest, FrequenciesMatchTheDistribution) {
  SamplingParams p;
  const int draws = 20000;
  expect_frequencies(histogram(log_of(kProbs), p, draws), kProbs, draws);
}

TEST(SamplerTest, TemperatureSharpensAsExpected) {
  // T = 0.5 squares the probabilities: q ~ p^2.
  SamplingParams p;
  p.temperature = 0.5f;
  std::vector<double> q;
  double z = 0.0;
  for (double x : kProbs) z += x * x;
  for (double x : kProbs) q.push_back(x * x / z);
  const int draws = 20000;
  expect_frequencies(histogram(log_of(kProbs), p, draws), q, draws);
}

TEST(SamplerTest, FiltersNeverLeakAndRenormalise) {
  const int draws = 20000;
  {
    SamplingParams p;  // top_k 2 -> {1: .4, 2: .25}
    p.top_k = 2;
    expect_frequencies(histogram(log_of(kProbs), p, draws), {0, 0.4 / 0.65, 0.25 / 0.65, 0, 0, 0},
                       draws);
  }
  {
    SamplingParams p;  // top_p 0.6: mass before t1 0, t2 .4, t3 .65 -> {1, 2}
    p.top_p = 0.6f;
    expect_frequencies(histogram(log_of(kProbs), p, draws), {0, 0.4 / 0.65, 0.25 / 0.65, 0, 0, 0},
                       draws);
  }
  {
    SamplingParams p;  // min_p 0.45: cut 0.18 -> {1, 2, 3}
    p.min_p = 0.45f;
    expect_frequencies(histogram(log_of(kProbs), p, draws),
                       {0, 0.4 / 0.85, 0.25 / 0.85, 0.2 / 0.85, 0, 0}, draws);
  }
}

TEST(SamplerTest, CombinedFiltersOnALargeVocabularyStayInside) {
  std::mt19937 gen(99);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(5000);
  for (float& x : row) x = normal(gen);
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.7f;
  p.min_p = 0.02f;
  // Which tokens survive, computed by the processors in the documented order.
  std::vector<float> ref = row;
  std::vector<float> scratch;
  TopPScratch tps;
  apply_temperature(ref, p.temperature);
  apply_min_p(ref, p.min_p);
  apply_top_k(ref, p.top_k, scratch);
  apply_top_p(ref, p.top_p, tps);
  const std::vector<int> counts = histogram(row, p, 3000, 5);
  int distinct = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    if (counts[i] > 0) {
      ++distinct;
      EXPECT_NE(ref[i], kNegInf) << "token " << i << " was filtered but sampled";
    }
  }
  EXPECT_GT(distinct, 1);
}

TEST(SamplerTest, SameKeySameTokenWhateverCameBefore) {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(3000);
  for (float& x : row) x = normal(gen);
  SamplingParams p;
  p.top_p = 0.95f;
  p.logprobs = 3;
  SampleContext ctx;
  ctx.params = &p;
  ctx.key = {77, 17, 0};

  Sampler fresh;
  auto alone = fresh.sample(row, ctx);
  ASSERT_TRUE(alone.ok());

  // A sampler that served other requests (other sizes, params, positions) first.
  Sampler busy;
  SamplingParams other;
  other.temperature = 1.7f;
  other.top_k = 5;
  for (int i = 0; i < 50; ++i) {
    std::vector<float> noise(100 + 37 * i);
    for (float& x : noise) x = normal(gen);
    SampleContext c2;
    c2.params = &other;
    c2.key = {static_cast<uint64_t>(i), static_cast<uint64_t>(i * 3), 0};
    ASSERT_TRUE(busy.sample(noise, c2).ok());
  }
  auto again = busy.sample(row, ctx);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->token, alone->token);
  EXPECT_EQ(again->logprob, alone->logprob);
  ASSERT_EQ(again->top.size(), alone->top.size());
  for (size_t i = 0; i < again->top.size(); ++i) {
    EXPECT_EQ(again->top[i].token, alone->top[i].token);
    EXPECT_EQ(again->top[i].logprob, alone->top[i].logprob);
  }
  EXPECT_EQ(sample_token(row, ctx)->token, alone->token);

  // And the key matters: other seeds/positions/sample indices give other tokens somewhere.
  int differ_seed = 0, differ_index = 0;
  for (uint64_t pos = 0; pos < 64; ++pos) {
    SampleContext a = ctx, b = ctx, c = ctx;
    a.key = {77, pos, 0};
    b.key = {78, pos, 0};
    c.key = {77, pos, 1};
    const int32_t ta = fresh.sample(row, a)->token;
    differ_seed += ta != fresh.sample(row, b)->token;
    differ_index += ta != fresh.sample(row, c)->token;
  }
  EXPECT_GT(differ_seed, 32);
  EXPECT_GT(differ_index, 32);
}

// A toy "model": the next row depends only on the last token.
std::vector<float> toy_logits(int32_t last_token) {
  std::mt19937 gen(static_cast<uint32_t>(last_token) * 2654435761u + 1u);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> row(512);
  for (float& x : row) x = normal(gen);
  return row;
}

// Generates `steps` tokens for one request with penalties and top-p. When `preempt_at` >= 0,
// the request is "preempted" there: a fresh Sampler and a history rebuilt from the tokens.
std::vector<int32_t> generate(const SamplingParams& p, uint64_t seed, int steps,
                              int preempt_at = -1) {
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65};
  std::vector<int32_t> out;
  Sampler sampler;
  TokenCounts history(prompt);
  for (int t = 0; t < steps; ++t) {
    if (t == preempt_at) {
      sampler = Sampler();
      history = TokenCounts(prompt);
      for (int32_t id : out) history.add_output(id);
    }
    SampleContext ctx;
    ctx.params = &p;
    ctx.history = &history;
    ctx.key = {seed, static_cast<uint64_t>(t), 0};
    const auto row = toy_logits(out.empty() ? prompt.back() : out.back());
    auto r = sampler.sample(row, ctx);
    EXPECT_TRUE(r.ok());
    if (!r.ok()) break;
    out.push_back(r->token);
    history.add_output(r->token);
  }
  return out;
}

TEST(SamplerTest, GenerationSurvivesPreemptionAndBatching) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.8f;
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.2f;
  const std::vector<int32_t> alone = generate(p, 2024, 40);
  EXPECT_EQ(generate(p, 2024, 40, 17), alone);
  EXPECT_EQ(generate(p, 2024, 40, 1), alone);
  EXPECT_NE(generate(p, 2025, 40), alone);  // the seed matters

  // Two requests interleaved step by step on one Sampler ("a batch") give what each gives
  // alone.
  SamplingParams q = p;
  q.top_k = 7;
  q.top_p = 1.0f;
  const std::vector<int32_t> other_alone = generate(q, 7, 40);
  Sampler shared;
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65};
  TokenCounts ha(prompt), hb(prompt);
  std::vector<int32_t> a, b;
  for (int t = 0; t < 40; ++t) {
    SampleContext ca{&p, {2024, static_cast<uint64_t>(t), 0}, &ha, {}, {}};
    SampleContext cb{&q, {7, static_cast<uint64_t>(t), 0}, &hb, {}, {}};
    const int32_t ta = shared.sample(toy_logits(a.empty() ? 65 : a.back()), ca)->token;
    const int32_t tb = shared.sample(toy_logits(b.empty() ? 65 : b.back()), cb)->token;
    a.push_back(ta);
    ha.add_output(ta);
    b.push_back(tb);
    hb.add_output(tb);
  }
  EXPECT_EQ(a, alone);
  EXPECT_EQ(b, other_alone);
}

TEST(SamplerTest, GreedyTakesTheLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  SampleContext ctx;
  ctx.params = &p;
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f};
  for (uint64_t pos = 0; pos < 5; ++pos) {
    ctx.key = {pos, pos, 0};
    EXPECT_EQ(sample_token(row, ctx)->token, 1);
  }
}

TEST(SamplerTest, GreedySeesPenaltiesButNotFilters) {
  // Repetition penalty 4 on token 1 (seen in the prompt): 2.0 -> 0.5 < 1.0, so token 0 wins.
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 4.0f;
  p.top_k = 1;  // ignored by greedy, as in vLLM
  TokenCounts history(std::vector<int32_t>{1});
  SampleContext ctx;
  ctx.params = &p;
  ctx.history = &history;
  EXPECT_EQ(sample_token(std::vector<float>{1.0f, 2.0f, 0.0f}, ctx)->token, 0);
}

TEST(SamplerTest, FrequencyPenaltyShiftsTheDistribution) {
  // Output history: token 1 twice. frequency 0.5 -> logit(1) -= 1: p1 drops by a factor e.
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  TokenCounts history;
  history.add_output(1);
  history.add_output(1);
  Sampler sampler;
  SampleContext ctx;
  ctx.params = &p;
  ctx.history = &history;
  const int draws = 20000;
  std::vector<int> counts(2, 0);
  for (int i = 0; i < draws; ++i) {
    ctx.key = {9, static_cast<uint64_t>(i), 0};
    ++counts[sampler.sample(std::vector<float>{0.0f, 0.0f}, ctx)->token];
  }
  const double p1 = std::exp(-1.0) / (1.0 + std::exp(-1.0));
  expect_frequencies(counts, {1.0 - p1, p1}, draws);
}

TEST(SamplerTest, MinTokensMasksEosAndStopIds) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  p.stop_token_ids = {2};
  const std::vector<int32_t> eos = {0};
  SampleContext ctx;
  ctx.params = &p;
  ctx.eos_token_ids = eos;
  const std::vector<float> row = {5.0f, 1.0f, 4.0f};  // EOS best, then stop id 2
  ctx.key.position = 0;
  EXPECT_EQ(sample_token(row, ctx)->token, 1);
  ctx.key.position = 1;
  EXPECT_EQ(sample_token(row, ctx)->token, 1);
  ctx.key.position = 2;
  EXPECT_EQ(sample_token(row, ctx)->token, 0);
  p.ignore_eos = true;  // vLLM masks EOS before min_tokens even then
  ctx.key.position = 0;
  EXPECT_EQ(sample_token(row, ctx)->token, 1);
  ctx.key.position = 2;
  EXPECT_EQ(sample_token(row, ctx)->token, 0);
}

TEST(SamplerTest, BitmaskRestrictsTheDraw) {
  SamplingParams p;
  std::vector<float> row(70, 0.0f);
  row[5] = 10.0f;  // the model's favourite, but not allowed
  const std::vector<int32_t> mask = {0, static_cast<int32_t>(1u << 8), 1 << 3};  // 40, 67
  SampleContext ctx;
  ctx.params = &p;
  ctx.allowed_bitmask = mask;
  Sampler sampler;
  int seen40 = 0, seen67 = 0;
  for (uint64_t i = 0; i < 400; ++i) {
    ctx.key = {1, i, 0};
    auto r = sampler.sample(row, ctx);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(r->token == 40 || r->token == 67) << r->token;
    (r->token == 40 ? seen40 : seen67)++;
  }
  EXPECT_GT(seen40, 100);
  EXPECT_GT(seen67, 100);
}

TEST(SamplerTest, LogitBiasMovesGreedyAndSampledDrawsButNotMaskedTokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  SampleContext ctx;
  ctx.params = &p;
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 1.0f};
  EXPECT_EQ(sample_token(row, ctx)->token, 1);
  p.logit_bias = {{1, -100.0f}};  // the favourite all but banned: the next best
  EXPECT_EQ(sample_token(row, ctx)->token, 3);
  p.logit_bias = {{2, 3.5f}};  // -1 + 3.5 = 2.5 > 2
  EXPECT_EQ(sample_token(row, ctx)->token, 2);
  p.logit_bias = {{2, 3.0f}};  // 2.0: a tie with token 1, the lower id wins
  EXPECT_EQ(sample_token(row, ctx)->token, 1);
  // A token the bitmask (or min_tokens) removed stays removed whatever its bias.
  const std::vector<int32_t> mask = {0b1011};  // tokens 0, 1, 3
  ctx.allowed_bitmask = mask;
  p.logit_bias = {{2, 100.0f}};
  EXPECT_EQ(sample_token(row, ctx)->token, 1);
  ctx.allowed_bitmask = {};
  // Sampled: a bias b multiplies a token's odds by e^b (before the temperature).
  SamplingParams t;
  t.logit_bias = {{0, std::log(3.0f)}};
  const int draws = 20000;
  expect_frequencies(histogram({0.0f, 0.0f}, t, draws), {0.75, 0.25}, draws);
  // The raw logprobs stay those of the model's row, as for every processor.
  t.logprobs = 1;
  ctx.params = &t;
  ctx.key = {3, 0, 0};
  auto r = sample_token(std::vector<float>{0.0f, 0.0f}, ctx);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->logprob, std::log(0.5), 1e-6);
  // A token outside the row (validate(vocab) refuses it at submit): an error, not a write.
  SamplingParams far;
  far.logit_bias = {{4, 1.0f}};
  ctx.params = &far;
  auto e = sample_token(row, ctx);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("outside the vocabulary of 4"), std::string::npos);
}

TEST(SamplerTest, AllowedTokenIdsKeepOnlyThoseAndComeBeforeTheBias) {
  SamplingParams p;
  p.allowed_token_ids = {2, 4, 2};  // repeats allowed
  const std::vector<float> row = {3.0f, 2.0f, 0.0f, 1.0f, 0.5f};
  const int draws = 20000;
  // Renormalised over {2, 4}: e^0 / (e^0 + e^0.5).
  const double p2 = 1.0 / (1.0 + std::exp(0.5));
  expect_frequencies(histogram(row, p, draws), {0, 0, p2, 0, 1.0 - p2}, draws);
  p.temperature = 0.0f;
  SampleContext ctx;
  ctx.params = &p;
  EXPECT_EQ(sample_token(row, ctx)->token, 4);
  p.logit_bias = {{0, 100.0f}, {2, 1.0f}};  // a bias cannot bring back a token left out
  EXPECT_EQ(sample_token(row, ctx)->token, 2);
  p.allowed_token_ids = {7};
  auto e = sample_token(row, ctx);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("allowed_token_ids names token 7"), std::string::npos);
}

TEST(SamplerTest, ErrorsNameTheProblem) {
  SamplingParams p;
  SampleContext ctx;
  ctx.params = &p;
  std::vector<float> row = {0.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f};
  auto r = sample_token(row, ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("token 1 is NaN"), std::string::npos) << r.status().message();

  row = {0.0f, 1.0f};
  const std::vector<int32_t> none = {0};
  ctx.allowed_bitmask = none;
  r = sample_token(row, ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("bitmask"), std::string::npos) << r.status().message();

  ctx.params = nullptr;
  EXPECT_FALSE(sample_token(row, ctx).ok());
}

}  // namespace
}  // namespace deepinfer::sample
