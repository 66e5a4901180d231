// Each logits processor on a small row whose result was worked out by hand (the expected
// values are in the comments), plus top-p on a large random row against the plain definition
// (full sort), which checks the bucketed shortcut of the implementation.
#include "sample/processors.h"

#include <gtest/gtest.h>

#include <algorithm>
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

std::vector<int> finite_ids(const std::vector<float>& row) {
  std::vector<int> ids;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] != kNegInf) ids.push_back(static_cast<int>(i));
  }
  return ids;
}

TEST(ProcessorsTest, BitmaskKeepsOnlySetBits) {
  std::vector<float> row(40, 1.0f);
  // word 0: bits 0, 3, 31; word 1: bit 1 (token 33). Bit 31 checks the sign bit of int32.
  const std::vector<int32_t> mask = {static_cast<int32_t>(0x80000009u), 0x2};
  ASSERT_TRUE(apply_token_bitmask(row, mask).ok());
  EXPECT_EQ(finite_ids(row), (std::vector<int>{0, 3, 31, 33}));
}

TEST(ProcessorsTest, BitmaskTooShortIsAnError) {
  std::vector<float> row(33, 0.0f);
  const std::vector<int32_t> mask = {-1};
  const Status s = apply_token_bitmask(row, mask);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("1 32-bit words"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("needs 2"), std::string::npos) << s.message();
}

TEST(ProcessorsTest, AllowedTokensKeepOnlyTheListedIds) {
  // 40 tokens (two bitmask words): keep 1, 33 (second word) and 39 (listed twice).
  std::vector<float> row(40, 0.5f);
  row[2] = kNegInf;
  std::vector<int32_t> words;
  ASSERT_TRUE(apply_allowed_tokens(row, std::vector<int32_t>{39, 1, 33, 39}, words).ok());
  EXPECT_EQ(finite_ids(row), (std::vector<int>{1, 33, 39}));
  EXPECT_EQ(row[33], 0.5f);
  std::vector<float> row2(40, 0.5f);
  const Status s = apply_allowed_tokens(row2, std::vector<int32_t>{3, 40}, words);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("allowed_token_ids names token 40, outside the vocabulary of 40"),
            std::string::npos);
  EXPECT_EQ(finite_ids(row2).size(), 40u);  // nothing changed
}

TEST(ProcessorsTest, LogitBiasAddsAndKeepsMaskedTokensMasked) {
  std::vector<float> row = {1.0f, kNegInf, -2.0f};
  ASSERT_TRUE(apply_logit_bias(row, {{1, 100.0f}, {2, 3.5f}}).ok());
  EXPECT_EQ(row, (std::vector<float>{1.0f, kNegInf, 1.5f}));
  const Status s = apply_logit_bias(row, {{0, 1.0f}, {3, 1.0f}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("logit_bias names token 3, outside the vocabulary of 3"),
            std::string::npos);
  EXPECT_EQ(row[0], 1.0f);  // nothing changed
  EXPECT_FALSE(apply_logit_bias(row, {{-1, 1.0f}}).ok());
}

TEST(ProcessorsTest, PenaltiesFollowVllmDefinitions) {
  // logits [2, -2, 1, 0.5, 3]; prompt {0, 2}; output [1, 1, 3];
  // repetition 2, presence 0.25, frequency 0.5.
  //   token 0 (prompt only): 2 / 2                        = 1
  //   token 1 (output x2):  -2 * 2 - 0.5 * 2 - 0.25       = -5.25
  //   token 2 (prompt only): 1 / 2                        = 0.5
  //   token 3 (output x1):   0.5 / 2 - 0.5 * 1 - 0.25     = -0.5
  //   token 4 (unseen):      3
  std::vector<float> row = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  TokenCounts counts(std::vector<int32_t>{0, 2});
  for (int32_t id : {1, 1, 3}) counts.add_output(id);
  ASSERT_TRUE(apply_penalties(row, counts, 2.0f, 0.25f, 0.5f).ok());
  EXPECT_EQ(row, (std::vector<float>{1.0f, -5.25f, 0.5f, -0.5f, 3.0f}));
}

TEST(ProcessorsTest, PresenceAndFrequencyIgnoreThePrompt) {
  std::vector<float> row = {1.0f, 1.0f};
  TokenCounts counts(std::vector<int32_t>{0, 0, 0});
  counts.add_output(1);
  ASSERT_TRUE(apply_penalties(row, counts, 1.0f, 1.0f, 1.0f).ok());
  EXPECT_EQ(row, (std::vector<float>{1.0f, -1.0f}));  // token 1: 1 - 1*1 - 1
}

TEST(ProcessorsTest, RemoveOutputUndoesAddOutput) {
  TokenCounts counts;
  counts.add_output(4);
  counts.add_output(4);
  EXPECT_TRUE(counts.remove_output(4));
  EXPECT_FALSE(counts.remove_output(5));
  EXPECT_EQ(counts.num_output_tokens(), 1);
  std::vector<float> row(5, 0.0f);
  ASSERT_TRUE(apply_penalties(row, counts, 1.0f, 0.0f, 1.0f).ok());
  EXPECT_EQ(row[4], -1.0f);
}

TEST(ProcessorsTest, PenaltyHistoryOutsideTheRowIsAnError) {
  std::vector<float> row(4, 0.0f);
  TokenCounts counts(std::vector<int32_t>{9});
  const Status s = apply_penalties(row, counts, 1.5f, 0.0f, 0.0f);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("token id 9"), std::string::npos) << s.message();
}

TEST(ProcessorsTest, TemperatureDivides) {
  std::vector<float> row = {1.0f, -2.0f, 0.5f, kNegInf};
  apply_temperature(row, 0.5f);
  EXPECT_EQ(row, (std::vector<float>{2.0f, -4.0f, 1.0f, kNegInf}));
}

TEST(ProcessorsTest, MinPIsRelativeToTheTopProbability) {
  // p = [0.5, 0.3, 0.15, 0.05]. min_p 0.2 -> cut 0.1: drops 0.05. min_p 0.7 -> cut 0.35.
  std::vector<float> row = log_of({0.5, 0.3, 0.15, 0.05});
  apply_min_p(row, 0.2f);
  EXPECT_EQ(finite_ids(row), (std::vector<int>{0, 1, 2}));
  row = log_of({0.5, 0.3, 0.15, 0.05});
  for (float& x : row) x += 7.0f;  // same distribution, shifted logits
  apply_min_p(row, 0.7f);
  EXPECT_EQ(finite_ids(row), (std::vector<int>{0}));
  row = log_of({0.5, 0.3, 0.15, 0.05});
  apply_min_p(row, 0.0f);
  EXPECT_EQ(finite_ids(row).size(), 4u);
}

TEST(ProcessorsTest, TopKKeepsTiesAtTheKthValue) {
  std::vector<float> scratch;
  std::vector<float> row = {1, 3, 2, 3, 0};
  apply_top_k(row, 2, scratch);  // 2nd largest is 3 -> {1, 3}
  EXPECT_EQ(finite_ids(row), (std::vector<int>{1, 3}));
  row = {1, 3, 2, 2, 0};
  apply_top_k(row, 2, scratch);  // 2nd largest is 2, tied -> {1, 2, 3}
  EXPECT_EQ(finite_ids(row), (std::vector<int>{1, 2, 3}));
  row = {1, 3, 2, 2, 0};
  apply_top_k(row, 1, scratch);
  EXPECT_EQ(finite_ids(row), (std::vector<int>{1}));
  row = {1, kNegInf, 2};
  apply_top_k(row, 2, scratch);  // only 2 finite: no-op
  EXPECT_EQ(finite_ids(row), (std::vector<int>{0, 2}));
  row = {1, 3, 2};
  apply_top_k(row, 0, scratch);   // off
  apply_top_k(row, -1, scratch);  // off
  EXPECT_EQ(finite_ids(row).size(), 3u);
}

TEST(ProcessorsTest, TopPKeepsTheSmallestNucleus) {
  // p = [0.1, 0.5, 0.05, 0.3, 0.05]; order: t1 .5, t3 .3, t0 .1, t2 .05, t4 .05 (tie by id).
  // Mass before each: 0, .5, .8, .9, .95. Keep while mass before < top_p.
  TopPScratch s;
  const std::vector<double> p = {0.1, 0.5, 0.05, 0.3, 0.05};
  auto run = [&](float top_p) {
    std::vector<float> row = log_of(p);
    apply_top_p(row, top_p, s);
    return finite_ids(row);
  };
  EXPECT_EQ(run(0.1f), (std::vector<int>{1}));
  EXPECT_EQ(run(0.75f), (std::vector<int>{1, 3}));
  EXPECT_EQ(run(0.85f), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(run(0.92f), (std::vector<int>{0, 1, 2, 3}));  // t2 in, t4 (same p) out
  EXPECT_EQ(run(1.0f).size(), 5u);
}

TEST(ProcessorsTest, TopPRenormalisesOverSurvivors) {
  // After t1 is removed, p' = [0.2, -, 0.1, 0.6, 0.1]: top_p 0.7 keeps t3 (0) and t0 (0.6).
  TopPScratch s;
  std::vector<float> row = log_of({0.1, 0.0, 0.05, 0.3, 0.05});
  apply_top_p(row, 0.7f, s);
  EXPECT_EQ(finite_ids(row), (std::vector<int>{0, 3}));
}

TEST(ProcessorsTest, TopPMatchesTheDefinitionOnALargeRow) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  TopPScratch s;
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<float> row(20000);
    for (float& x : row) x = std::round(normal(gen) * 8.0f) / 8.0f;  // many exact ties
    if (trial % 3 == 0) {
      for (size_t i = 0; i < row.size(); i += 5) row[i] = kNegInf;
    }
    const float top_p = 0.05f + 0.09f * static_cast<float>(trial);
    // Definition: full sort by (weight desc, id asc), keep while mass before < p * total, the
    // masses in fixed point (processors.h: floor(w * 2^36), the threshold ceil(p * total)).
    float m = kNegInf;
    for (float x : row) m = std::max(m, x);
    std::vector<float> w(row.size(), 0.0f);
    std::vector<int> order;
    uint64_t total = 0;
    for (size_t i = 0; i < row.size(); ++i) {
      if (row[i] == kNegInf) continue;
      w[i] = exp_nonpositive(row[i] - m);
      total += static_cast<uint64_t>(std::ldexp(static_cast<double>(w[i]), 36));
      order.push_back(static_cast<int>(i));
    }
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return w[a] != w[b] ? w[a] > w[b] : a < b; });
    std::vector<int> expected;
    uint64_t before = 0;
    const double bound = static_cast<double>(top_p) * static_cast<double>(total);
    for (int id : order) {
      if (!(static_cast<double>(before) < std::ceil(bound))) break;
      expected.push_back(id);
      before += static_cast<uint64_t>(std::ldexp(static_cast<double>(w[id]), 36));
    }
    std::sort(expected.begin(), expected.end());

    apply_top_p(row, top_p, s);
    EXPECT_EQ(finite_ids(row), expected) << "trial " << trial << " top_p " << top_p;
  }
}

TEST(ProcessorsTest, ExpNonpositiveIsAccurate) {
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(kNegInf), 0.0f);
  EXPECT_EQ(exp_nonpositive(-100.0f), 0.0f);
  double worst = 0.0;
  for (int i = 0; i <= 870000; ++i) {
    const float x = -0.0001f * static_cast<float>(i);  // [-87, 0]
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(exp_nonpositive(x) - ref) / ref);
  }
  EXPECT_LT(worst, 3e-7);
}

TEST(ProcessorsTest, SparseAndDenseInverseCdfAgree) {
  // One distribution, two rows: 300 finite logits among 4096 (-inf elsewhere: the sparse
  // walk), and the same with -1000 instead of -inf (finite, weight exactly 0: the dense
  // walk). Every u must give the same token.
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> sparse(4096, kNegInf);
  for (int k = 0; k < 300; ++k) sparse[gen() % sparse.size()] = normal(gen);
  std::vector<float> dense = sparse;
  for (float& x : dense) x = x == kNegInf ? -1000.0f : x;
  InverseCdfScratch scratch;
  int distinct = 0, last = -1;
  for (int k = 0; k < 2000; ++k) {
    const double u = (k + 0.5) / 2000.0;
    const int32_t a = sample_inverse_cdf(dense, u, scratch);
    const int32_t b = sample_inverse_cdf(sparse, u, scratch);
    ASSERT_EQ(a, b) << "u " << u;
    ASSERT_NE(sparse[a], kNegInf);
    ASSERT_GE(a, last);  // monotone in u
    distinct += a != last;
    last = a;
  }
  EXPECT_GT(distinct, 100);
}

TEST(ProcessorsTest, BlockedMassAssociation) {
  // 300 weights: blocks of 64 (four interleaved, then the rest) must equal the plain
  // definition: each block in id order, block sums in block order.
  std::vector<float> w(300);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0f / static_cast<float>(i + 1);
  std::vector<double> sums;
  const double total = blocked_mass(w, &sums);
  ASSERT_EQ(sums.size(), 5u);
  double expected_total = 0.0;
  for (size_t b = 0; b < 5; ++b) {
    double sum = 0.0;
    for (size_t i = b * 64; i < std::min<size_t>(300, (b + 1) * 64); ++i) sum += w[i];
    EXPECT_EQ(sums[b], sum) << "block " << b;
    expected_total += sum;
  }
  EXPECT_EQ(total, expected_total);
}

TEST(ProcessorsTest, ArgmaxTakesTheLowestIdOnTies) {
  EXPECT_EQ(argmax_lowest_id(std::vector<float>{1, 5, 5, kNegInf}), 1);
  EXPECT_EQ(argmax_lowest_id(std::vector<float>{kNegInf, -3, -3}), 1);
  EXPECT_EQ(argmax_lowest_id(std::vector<float>{kNegInf, kNegInf}), -1);
}

TEST(ProcessorsTest, InverseCdfWalksIdsInOrder) {
  // p = [0.25, 0.25, 0.5]: cumulative 0.25, 0.5, 1.0.
  InverseCdfScratch w;
  const std::vector<float> row = log_of({0.25, 0.25, 0.5});
  EXPECT_EQ(sample_inverse_cdf(row, 0.0, w), 0);
  EXPECT_EQ(sample_inverse_cdf(row, 0.1, w), 0);
  EXPECT_EQ(sample_inverse_cdf(row, 0.3, w), 1);
  EXPECT_EQ(sample_inverse_cdf(row, 0.6, w), 2);
  EXPECT_EQ(sample_inverse_cdf(row, 0.999999, w), 2);
  const std::vector<float> masked = {kNegInf, 0.0f, 0.0f};
  EXPECT_EQ(sample_inverse_cdf(masked, 0.49, w), 1);
  EXPECT_EQ(sample_inverse_cdf(masked, 0.51, w), 2);
  EXPECT_EQ(sample_inverse_cdf(std::vector<float>{kNegInf}, 0.5, w), -1);
}

}  // namespace
}  // namespace deepinfer::sample
