// Confidence-scheduled verification (sched/verify_budget.h): the step-cost curve's
// interpolation and refresh, and the admitted draft positions under bandwidth-bound (flat),
// compute-bound (linear) and jagged (bucketed) step costs.
#include <gtest/gtest.h>

#include <vector>

#include "sched/verify_budget.h"

namespace deepinfer::sched {
namespace {

TEST(StepCostCurve, InterpolatesExtrapolatesAndRefreshes) {
  StepCostCurve c;
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.seconds(8), 0.0);
  c.observe(4, 1.0);  // a count's first step stands in while nothing else is known
  EXPECT_DOUBLE_EQ(c.seconds(8), 2.0);  // one point: proportional
  c.observe(8, 3.0);
  EXPECT_DOUBLE_EQ(c.seconds(6), 2.0);   // between: linear
  EXPECT_DOUBLE_EQ(c.seconds(2), 1.0);   // below the smallest: its cost
  EXPECT_DOUBLE_EQ(c.seconds(12), 5.0);  // past the largest: the last slope
  c.observe(8, 9.0);  // from the second step on: the least of the last four after the first
  EXPECT_DOUBLE_EQ(c.seconds(8), 9.0);
  c.observe(8, 4.0);
  c.observe(8, 6.0);
  EXPECT_DOUBLE_EQ(c.seconds(8), 4.0);  // one slow step does not move it
  for (int i = 0; i < 4; ++i) c.observe(8, 5.0);
  EXPECT_DOUBLE_EQ(c.seconds(8), 5.0);  // but a lasting change does, within four steps
  c.observe(0, 1.0);  // ignored
  c.observe(3, -1.0);
  EXPECT_EQ(c.points().size(), 2u);
}

TEST(VerifyBudget, FlatCostAdmitsEveryUsefulDraft) {
  StepCostCurve c;
  for (int64_t b = 1; b <= 64; ++b) c.observe(b, 0.010);  // bandwidth-bound: B is free
  const std::vector<std::vector<float>> a = {{0.9f, 0.5f, 0.1f}, {0.8f}, {}};
  const auto slots = choose_verify_lengths(a, 3, 64, c);
  EXPECT_EQ(slots, (std::vector<int32_t>{3, 1, 0}));
  // The token budget caps them, best survival first.
  EXPECT_EQ(choose_verify_lengths(a, 3, 5, c), (std::vector<int32_t>{1, 1, 0}));
}

TEST(VerifyBudget, ComputeBoundCostAdmitsNothingBelowTheRate) {
  StepCostCurve c;
  for (int64_t b = 1; b <= 64; ++b) c.observe(b, 0.001 * static_cast<double>(b));
  // Every token costs the same: a draft pays only if it survives with probability > 1.
  const std::vector<std::vector<float>> a = {{0.95f, 0.9f}, {0.99f}};
  EXPECT_EQ(choose_verify_lengths(a, 2, 64, c), (std::vector<int32_t>{0, 0}));
  // With a fixed per-step cost next to the per-token one, the likely drafts pay.
  StepCostCurve mixed;
  for (int64_t b = 1; b <= 64; ++b) mixed.observe(b, 0.010 + 0.001 * static_cast<double>(b));
  const std::vector<std::vector<float>> b = {{0.95f, 0.9f, 0.05f}, {0.99f, 0.02f}};
  EXPECT_EQ(choose_verify_lengths(b, 2, 64, mixed), (std::vector<int32_t>{2, 1}));
}

TEST(VerifyBudget, JaggedCostIsSearchedPastTheFirstDecrease) {
  // Steps of up to 8 tokens cost 1, up to 16 cost 1.9 (a bucket edge), flat again after.
  StepCostCurve c;
  for (int64_t b = 1; b <= 32; ++b) c.observe(b, b <= 8 ? 1.0 : 1.9);
  // 4 requests with 4 likely drafts each: 8 admitted positions fit the first bucket; the next
  // ones cost the jump, but all 16 together still yield more per second.
  std::vector<std::vector<float>> a(4, {0.97f, 0.96f, 0.95f, 0.94f});
  const auto slots = choose_verify_lengths(a, 4, 64, c);
  int64_t total = 0;
  for (int32_t s : slots) total += s;
  EXPECT_EQ(total, 16);
  // Lower survival: the jump no longer pays; stop at the bucket edge (8 tokens = 4 drafts).
  std::vector<std::vector<float>> low(4, {0.6f, 0.3f, 0.2f, 0.1f});
  const auto few = choose_verify_lengths(low, 4, 64, c);
  total = 0;
  for (int32_t s : few) total += s;
  EXPECT_EQ(total, 4);
  EXPECT_EQ(few, (std::vector<int32_t>{1, 1, 1, 1}));
}

// The draft cost is paid by every step that verifies drafts: on a bandwidth-bound backend (flat
// curve) drafts pay for themselves while the expected tokens outgrow it, and a batch whose
// drafting costs more than its drafts can return admits nothing (the engine then pauses
// drafting there without probing: H200, DSpark at 64 requests, drafting 2.4 ms against a 3.1 ms
// decode step).
TEST(VerifyBudget, DraftCostIsChargedToEveryStepThatVerifies) {
  StepCostCurve c;
  // The H200's 64-request step: 3.1 ms, and 18 us per further row (8.8 ms at 384 rows).
  for (int64_t b = 1; b <= 512; ++b) c.observe(b, 0.00195 + 0.000018 * static_cast<double>(b));
  std::vector<std::vector<float>> a(64, {0.6f, 0.35f, 0.2f});
  int64_t total = 0;
  for (int32_t s : choose_verify_lengths(a, 64, 512, c)) total += s;
  EXPECT_EQ(total, 64);  // free drafting: the first positions (the later ones return less than
                         // their rows cost at this rate)
  double ratio = 0;
  EXPECT_EQ(choose_verify_lengths(a, 64, 512, c, 0.0024, &ratio), std::vector<int32_t>(64, 0));
  EXPECT_GT(ratio, 0.7);  // the best drafting mix, expected against the plain step: a clear
  EXPECT_LT(ratio, 0.85);  // loss, which the engine pauses without probing
  // One request: the same drafting cost is small next to what its drafts return.
  const std::vector<std::vector<float>> one = {{0.9f, 0.8f, 0.7f}};
  EXPECT_EQ(choose_verify_lengths(one, 1, 512, c, 0.0012), (std::vector<int32_t>{3}));
}

// The start-up profile only seeds the curve: the first live step at a count replaces its guess
// (a GPU's batched decode step is not a one-sequence prefill), and a count no live step has had
// is never cheaper than a live measurement at fewer tokens (else the budget would admit drafts
// into a guessed-cheap step).
TEST(VerifyBudget, LiveStepsOverrideTheProfilesGuesses) {
  StepCostCurve c;
  c.seed(64, 0.0060);  // the profile's one-sequence forward of 64 tokens
  c.seed(128, 0.0020);
  EXPECT_DOUBLE_EQ(c.seconds(64), 0.0060);
  EXPECT_FALSE(c.measured(64));
  c.observe(64, 0.0900);  // the first live step at 64 captured its CUDA graph: not taken
  EXPECT_DOUBLE_EQ(c.seconds(64), 0.0060);
  EXPECT_FALSE(c.measured(64));
  c.observe(64, 0.0035);  // a live decode step of 64 requests replaces the guess
  EXPECT_DOUBLE_EQ(c.seconds(64), 0.0035);
  EXPECT_TRUE(c.measured(64));
  EXPECT_FALSE(c.measured(128));
  c.observe(64, 0.0045);
  EXPECT_DOUBLE_EQ(c.seconds(64), 0.0035);
  EXPECT_GE(c.seconds(96), c.seconds(64));  // the guess at 128 does not pull 96 below 64's cost
  EXPECT_GE(c.seconds(128), c.seconds(64));
  c.seed(64, 0.0001);  // a later guess never overrides a live measurement
  EXPECT_DOUBLE_EQ(c.seconds(64), 0.0035);
}

}  // namespace
}  // namespace deepinfer::sched
