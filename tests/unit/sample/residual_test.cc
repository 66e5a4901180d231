// The pieces of speculative decoding's residual acceptance (runtime/engine_spec.cc,
// verify_residual): filtered_probabilities is the distribution draw_filtered draws from,
// draw_residual draws from max(0, p - q), and the two composed as rejection sampling (draft
// d ~ q, accepted with min(1, p(d) / q(d)), else a residual token) produce exactly p. The
// checks walk a fine grid of uniforms instead of random draws, so they are exact up to the grid
// (1 / kGrid) and cannot flake.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "sample/sampler.h"

namespace deepinfer::sample {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kGrid = 200000;

double grid_u(int i) { return (i + 0.5) / kGrid; }

// Frequencies of draw_filtered's tokens over the uniform grid.
std::vector<double> draw_frequencies(const std::vector<float>& logits, SampleSpec s) {
  std::vector<double> f(logits.size(), 0.0);
  DrawScratch scratch;
  std::vector<float> row;
  for (int i = 0; i < kGrid; ++i) {
    row = logits;
    s.u = grid_u(i);
    const int32_t t = draw_filtered(row, s, scratch);
    EXPECT_GE(t, 0);
    if (t >= 0) f[static_cast<size_t>(t)] += 1.0 / kGrid;
  }
  return f;
}

SampleSpec sampled(float temperature, int32_t top_k = 0, float top_p = 1.0f, float min_p = 0.0f) {
  SampleSpec s;
  s.greedy = false;
  s.temperature = temperature;
  s.top_k = top_k;
  s.top_p = top_p;
  s.min_p = min_p;
  s.log_min_p = min_p > 0.0f ? std::log(static_cast<double>(min_p)) : 0.0;
  return s;
}

const std::vector<float> kLogits = {1.5f, -0.25f, 0.75f, kNegInf, 2.0f, 0.0f, -3.0f, 1.0f};

TEST(ResidualAcceptance, FilteredProbabilitiesAreWhatTheDrawDrawsFrom) {
  for (const SampleSpec& s : {sampled(1.0f), sampled(0.7f), sampled(1.3f, 4), sampled(1.0f, 0, 0.8f),
                              sampled(0.9f, 0, 1.0f, 0.1f)}) {
    std::vector<float> row = kLogits, probs;
    DrawScratch scratch;
    ASSERT_TRUE(filtered_probabilities(row, s, scratch, probs));
    double total = 0.0;
    for (float p : probs) total += p;
    EXPECT_NEAR(total, 1.0, 1e-6);
    EXPECT_EQ(probs[3], 0.0f);  // -inf is never drawn
    const std::vector<double> f = draw_frequencies(kLogits, s);
    for (size_t i = 0; i < probs.size(); ++i) {
      EXPECT_NEAR(f[i], probs[i], 2e-5) << "token " << i << " T " << s.temperature;
      EXPECT_EQ(f[i] == 0.0, probs[i] == 0.0f) << "token " << i;  // the same support
    }
  }
  // Greedy: one-hot at the lowest-id maximum; an all -inf row has no distribution.
  std::vector<float> row = {0.5f, 2.0f, 2.0f}, probs;
  DrawScratch scratch;
  ASSERT_TRUE(filtered_probabilities(row, SampleSpec{}, scratch, probs));
  EXPECT_EQ(probs, (std::vector<float>{0.0f, 1.0f, 0.0f}));
  row = {kNegInf, kNegInf};
  EXPECT_FALSE(filtered_probabilities(row, sampled(1.0f), scratch, probs));
}

TEST(ResidualAcceptance, ResidualDrawFollowsTheNormalisedPositivePart) {
  const std::vector<float> p = {0.1f, 0.4f, 0.0f, 0.3f, 0.2f};
  const std::vector<float> q = {0.3f, 0.1f, 0.2f, 0.3f, 0.1f};
  // max(0, p - q) = {0, 0.3, 0, 0, 0.1}: tokens 1 and 4 in the ratio 3 : 1.
  std::vector<double> f(p.size(), 0.0);
  std::vector<float> scratch;
  for (int i = 0; i < kGrid; ++i) ++f[static_cast<size_t>(draw_residual(p, q, grid_u(i), scratch))];
  EXPECT_NEAR(f[1] / kGrid, 0.75, 1e-5);
  EXPECT_NEAR(f[4] / kGrid, 0.25, 1e-5);
  EXPECT_EQ(f[0] + f[2] + f[3], 0.0);
  EXPECT_EQ(draw_residual(p, p, 0.5, scratch), -1);  // no mass: the caller draws from p
}

// Rejection sampling with the residual, composed from the pieces as verify_residual composes
// them, produces exactly the target distribution for drafts drawn from any q, whatever its
// temperature or filters (q's support need not cover p's, and may hold tokens p excludes); and
// it accepts sum_x min(p(x), q(x)) of the drafts, more than a one-hot proposal at q's argmax
// accepts (p(argmax q)) when q is close to p.
TEST(ResidualAcceptance, RejectionSamplingWithTheResidualGivesTheTargetExactly) {
  const std::vector<float> target_logits = {0.2f, 1.1f, -0.4f, 0.9f, kNegInf, 0.3f, 1.0f, -1.0f};
  const SampleSpec target = sampled(0.8f, 0, 0.95f);
  std::vector<float> p, row = target_logits;
  DrawScratch scratch;
  ASSERT_TRUE(filtered_probabilities(row, target, scratch, p));
  const std::vector<float> draft_logits = {0.0f, 1.3f, -0.2f, 0.6f, 0.5f, 0.1f, 1.2f, -2.0f};
  for (const SampleSpec& draft : {sampled(0.8f), sampled(1.0f, 3), sampled(0.5f, 0, 0.7f)}) {
    std::vector<float> q;
    row = draft_logits;
    ASSERT_TRUE(filtered_probabilities(row, draft, scratch, q));
    // Exact over the draft d (weight q(d)); acceptance min(1, p/q) exactly; the residual token
    // over the uniform grid.
    std::vector<double> out(p.size(), 0.0), residual(p.size(), 0.0);
    std::vector<float> rs;
    for (int i = 0; i < kGrid; ++i) {
      const int32_t t = draw_residual(p, q, grid_u(i), rs);
      ASSERT_GE(t, 0);
      residual[static_cast<size_t>(t)] += 1.0 / kGrid;
    }
    double accepted = 0.0;
    for (size_t d = 0; d < q.size(); ++d) {
      if (q[d] == 0.0f) continue;
      const double a = std::min(1.0, static_cast<double>(p[d]) / q[d]);
      accepted += q[d] * a;
      out[d] += q[d] * a;
      for (size_t x = 0; x < p.size(); ++x) out[x] += q[d] * (1.0 - a) * residual[x];
    }
    for (size_t x = 0; x < p.size(); ++x) EXPECT_NEAR(out[x], p[x], 3e-5) << "token " << x;
    double overlap = 0.0;
    for (size_t x = 0; x < p.size(); ++x) overlap += std::min(p[x], q[x]);
    EXPECT_NEAR(accepted, overlap, 1e-6);
    const auto top = static_cast<size_t>(std::max_element(q.begin(), q.end()) - q.begin());
    std::printf("  draft T %.1f top_k %d top_p %.2f: accepts %.3f (one-hot at its argmax: %.3f)\n",
                static_cast<double>(draft.temperature), draft.top_k,
                static_cast<double>(draft.top_p), accepted, static_cast<double>(p[top]));
  }
}

}  // namespace
}  // namespace deepinfer::sample
