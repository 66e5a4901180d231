// SpeculationGain (sched/speculation_gain.h): the varlen pause controller judges drafting by
// tokens per executor second against the step-cost curve's estimate of the same decodes without
// drafting: a clear loss pauses after three steps, a narrow one after eight (after a measured
// gain, both judged together with the gains before), pauses grow 4x per failed probe in a row, a
// probe that pays resets them, and each batch-size bucket is its own.
#include "sched/speculation_gain.h"

#include <gtest/gtest.h>

namespace deepinfer::sched {
namespace {

constexpr double kMs = 1e-3;

// One decode-only step of one request: `seconds` of forward (sampling and drafting free).
SpeculationGain::Step step(int64_t at, int64_t tokens, int64_t verified, int64_t proposed,
                           double seconds, double curve, int64_t decodes = 1) {
  SpeculationGain::Step s;
  s.plan_step = at;
  s.decodes = decodes;
  s.tokens = tokens;
  s.drafts_verified = verified;
  s.drafts_proposed = proposed;
  s.forward_seconds = seconds;
  s.curve_seconds = curve;
  return s;
}

// A drafter that costs twice the step for 4 tokens in 3 steps (0.67x): three steps show the
// clear loss and drafting pauses at that batch; the next pause is four times longer. Plain steps
// before any drafting are not a probe.
TEST(SpeculationGain, AClearLossPausesAfterThreeSteps) {
  SpeculationGain gain;
  int64_t at = 0;
  for (int i = 0; i < 4; ++i) gain.observe(step(at++, 1, 0, 0, kMs, kMs));
  const SpeculationGain::Bucket& g = gain.bucket(1);
  EXPECT_EQ(g.probe_steps(), 0);
  for (int i = 0; i < 3; ++i) gain.observe(step(at++, i == 0 ? 2 : 1, 1, 1, 2 * kMs, kMs));
  EXPECT_EQ(g.failed, 1);
  EXPECT_EQ(g.paused_until, at - 1 + 16);
  EXPECT_EQ(g.pause, 64);
  EXPECT_EQ(g.probe_steps(), 0);
  EXPECT_EQ(gain.counts().probes_failed, 1);
  // The decision is recorded with its sums: 4 tokens in 6 ms against 3 ms for 3 decodes.
  ASSERT_EQ(gain.recent_probes().size(), 1u);
  const SpeculationGain::Probe& p = gain.recent_probes().back();
  EXPECT_EQ(p.steps, 3);
  EXPECT_FALSE(p.passed);
  EXPECT_DOUBLE_EQ(p.decodes, 1.0);
  EXPECT_DOUBLE_EQ(p.tokens, 4.0);
  EXPECT_NEAR(p.spent_seconds, 6 * kMs, 1e-12);
  EXPECT_NEAR(p.plain_seconds, 3 * kMs, 1e-12);
  EXPECT_NEAR(p.ratio, (4.0 / 6) / (3.0 / 3), 1e-9);
  // Other batch sizes are judged on their own.
  EXPECT_EQ(gain.bucket(16).paused_until, -1);
  EXPECT_EQ(gain.bucket(16).failed, 0);
}

// Near parity eight steps decide: 4 decodes' tokens in 1.15x the plain step's time (0.87x)
// pause at the eighth step, not before. The next probe, after the pause, pays (5 tokens per
// step, 1.25x): it passes, and the pause and the failure count are reset.
TEST(SpeculationGain, ANarrowLossWaitsForEightStepsAndAGainResetsThePause) {
  SpeculationGain gain;
  const SpeculationGain::Bucket& g = gain.bucket(4);
  int64_t at = 0;
  for (int i = 0; i < 8; ++i) {
    gain.observe(step(at++, 4, 4, 4, 1.15 * kMs, kMs, 4));
    if (i < 7) {
      EXPECT_EQ(g.paused_until, -1) << "step " << i;
    }
  }
  EXPECT_EQ(g.failed, 1);
  EXPECT_EQ(g.pause, 64);
  EXPECT_EQ(g.paused_until, 7 + 16);
  SpeculationGain::Bucket& b = gain.bucket(4);
  EXPECT_EQ(gain.pause_state(b), SpeculationGain::Pause::kActive);
  // Steps planned before the pause still land during it: they are not a probe.
  for (int i = 0; i < 8; ++i) gain.observe(step(at++, 5, 4, 4, kMs, kMs, 4));
  EXPECT_EQ(gain.counts().probes_passed, 0);
  EXPECT_EQ(gain.pause_state(b), SpeculationGain::Pause::kActive);
  at = g.paused_until;
  gain.observe(step(at, 0, 0, 0, 0, 0, 0));  // a plan step (a step with a prefill) reaches its end
  EXPECT_EQ(gain.pause_state(b), SpeculationGain::Pause::kEnded);
  EXPECT_EQ(gain.pause_state(b), SpeculationGain::Pause::kNone);
  EXPECT_EQ(gain.counts().paused_plans, 2);
  for (int i = 0; i < 8; ++i) gain.observe(step(at++, 5, 4, 4, kMs, kMs, 4));
  EXPECT_EQ(gain.counts().probes_passed, 1);
  ASSERT_EQ(gain.recent_probes().size(), 2u);
  EXPECT_FALSE(gain.recent_probes()[0].passed);
  EXPECT_TRUE(gain.recent_probes()[1].passed);
  EXPECT_NEAR(gain.recent_probes()[1].ratio, 1.25, 1e-9);
  EXPECT_EQ(g.failed, 0);
  EXPECT_EQ(g.pause, 16);
  EXPECT_EQ(g.probe_steps(), 0);
}

// A probe's first steps only draft (the steps already planned had no draft slots): up to two
// of them are not its measure. Two such steps at twice the plain cost, then steps that verify 3
// drafts and emit 4 tokens in 1.5x the plain time: the probe passes on the eight verifying steps
// at 2.67x. A budget that admits nothing is not excused past two steps: a third step without
// verified drafts counts, at a loss, and three of them decide a clear one.
TEST(SpeculationGain, APipelineFillIsNotTheMeasure) {
  SpeculationGain gain;
  const SpeculationGain::Bucket& g = gain.bucket(1);
  int64_t at = 0;
  for (int i = 0; i < 2; ++i) gain.observe(step(at++, 1, 0, 3, 2 * kMs, kMs));
  EXPECT_EQ(g.probe_steps(), 0);
  EXPECT_EQ(g.filling, 2);
  for (int i = 0; i < 8; ++i) gain.observe(step(at++, 4, 3, 3, 1.5 * kMs, kMs));
  EXPECT_EQ(gain.counts().probes_passed, 1);
  ASSERT_EQ(gain.recent_probes().size(), 1u);
  EXPECT_EQ(gain.recent_probes()[0].steps, 8);
  EXPECT_NEAR(gain.recent_probes()[0].ratio, 4.0 / 1.5, 1e-9);
  EXPECT_EQ(g.filling, 0);

  SpeculationGain never;
  const SpeculationGain::Bucket& n = never.bucket(1);
  for (int i = 0; i < 5; ++i) never.observe(step(at++, 1, 0, 3, 2 * kMs, kMs));
  EXPECT_EQ(never.counts().probes_failed, 1);
  EXPECT_GE(n.paused_until, 0);
  ASSERT_EQ(never.recent_probes().size(), 1u);
  EXPECT_EQ(never.recent_probes()[0].steps, 3);
  EXPECT_NEAR(never.recent_probes()[0].ratio, 0.5, 1e-9);
}

// The bucket is the decode count's bit width: 32..63 decodes share one, 64 starts the next.
TEST(SpeculationGain, BucketsAreBitWidths) {
  SpeculationGain gain;
  EXPECT_EQ(&gain.bucket(32), &gain.bucket(63));
  EXPECT_NE(&gain.bucket(63), &gain.bucket(64));
  EXPECT_EQ(&gain.bucket(0), &gain.bucket(1));
}

// A loss the budget predicts pauses like a failed probe, from the latest observed plan step.
TEST(SpeculationGain, APredictedLossPausesFromTheLatestStep) {
  SpeculationGain gain;
  gain.observe(step(41, 1, 0, 0, kMs, kMs));
  SpeculationGain::Bucket& g = gain.bucket(1);
  g.draft_cost = 1.7 * kMs;  // what the prediction charged per step is reported with it
  gain.predicted_loss(g, 1, 0.6);
  EXPECT_EQ(g.paused_until, 41 + 16);
  EXPECT_EQ(g.failed, 1);
  EXPECT_EQ(gain.counts().probes_failed, 1);
  ASSERT_EQ(gain.recent_probes().size(), 1u);
  EXPECT_EQ(gain.recent_probes()[0].steps, 0);
  EXPECT_DOUBLE_EQ(gain.recent_probes()[0].ratio, 0.6);
  EXPECT_DOUBLE_EQ(gain.recent_probes()[0].draft_cost_seconds, 1.7 * kMs);
}

// After a predicted loss the next decision is measured: a paused batch learns nothing new, so a
// prediction from early estimates must not renew itself. The probe after the pause passes here
// (4 tokens per step at 1.5x the plain cost): no prediction may overrule that gain, until a
// measured probe fails (eight steps at 2x the plain cost for one token each: after gains, a loss
// that far below parity decides on eight steps of its own); then predictions are allowed again.
TEST(SpeculationGain, APredictedLossIsFollowedByAMeasuredProbe) {
  SpeculationGain gain;
  SpeculationGain::Bucket& g = gain.bucket(1);
  EXPECT_TRUE(SpeculationGain::may_predict_loss(g));
  gain.predicted_loss(g, 1, 0.76);
  EXPECT_FALSE(SpeculationGain::may_predict_loss(g));
  int64_t at = g.paused_until;
  gain.observe(step(at, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(gain.pause_state(g), SpeculationGain::Pause::kEnded);
  EXPECT_FALSE(SpeculationGain::may_predict_loss(g));  // still: the probe has not decided yet
  for (int i = 0; i < 8; ++i) gain.observe(step(at++, 4, 3, 3, 1.5 * kMs, kMs));
  EXPECT_EQ(gain.counts().probes_passed, 1);
  EXPECT_FALSE(SpeculationGain::may_predict_loss(g));  // the measured gain stands
  for (int i = 0; i < 8; ++i) gain.observe(step(at++, 4, 3, 3, 1.5 * kMs, kMs));
  EXPECT_EQ(gain.counts().probes_passed, 2);
  EXPECT_FALSE(SpeculationGain::may_predict_loss(g));
  for (int i = 0; i < 8; ++i) gain.observe(step(at++, 1, 1, 1, 2 * kMs, kMs));
  EXPECT_EQ(gain.counts().probes_failed, 1 + 1);
  EXPECT_TRUE(SpeculationGain::may_predict_loss(g));
}

// Only the latest decisions are kept, oldest first.
TEST(SpeculationGain, KeepsTheLatestDecisions) {
  SpeculationGain gain;
  SpeculationGain::Bucket& g = gain.bucket(1);
  for (int i = 0; i < 11; ++i) gain.predicted_loss(g, 1, 0.1 * i);
  ASSERT_EQ(gain.recent_probes().size(), SpeculationGain::kProbesKept);
  EXPECT_DOUBLE_EQ(gain.recent_probes().front().ratio, 0.1 * 3);
  EXPECT_DOUBLE_EQ(gain.recent_probes().back().ratio, 0.1 * 10);
}

// While the latest measured probe paid, the next is judged together with the gains measured since,
// each older window weighing half per decision: 1.5x, then 0.95x alone (1.22x with the first:
// drafting goes on), then 0.83x alone, judged with the history (half the 1.5x window and the
// 0.95x one: 0.97x over twenty steps): it pauses. After the pause the probe is judged alone; a
// severe loss (0.5x) after its gain is judged with it until eight steps of its own decide.
TEST(SpeculationGain, ALossAfterAGainIsJudgedWithTheGainsBefore) {
  SpeculationGain gain;
  const SpeculationGain::Bucket& g = gain.bucket(1);
  int64_t at = 0;
  for (int i = 0; i < 8; ++i) gain.observe(step(at++, 3, 2, 2, 2 * kMs, kMs));
  EXPECT_EQ(gain.counts().probes_passed, 1);
  for (int i = 0; i < 8; ++i) gain.observe(step(at++, 2, 2, 2, 2.1 * kMs, kMs));
  EXPECT_EQ(gain.counts().probes_passed, 2);
  EXPECT_EQ(g.paused_until, -1);
  ASSERT_EQ(gain.recent_probes().size(), 2u);
  EXPECT_EQ(gain.recent_probes().back().steps, 16);
  EXPECT_NEAR(gain.recent_probes().back().ratio, 40.0 / 32.8, 1e-9);
  EXPECT_DOUBLE_EQ(g.history.steps, 12.0);  // half the first window, all of the second
  for (int i = 0; i < 7; ++i) {
    gain.observe(step(at++, 3, 2, 2, 3.6 * kMs, kMs));
    EXPECT_EQ(g.paused_until, -1) << "step " << i;
  }
  gain.observe(step(at++, 3, 2, 2, 3.6 * kMs, kMs));
  EXPECT_EQ(gain.counts().probes_failed, 1);
  EXPECT_EQ(g.paused_until, at - 1 + 16);
  EXPECT_EQ(gain.recent_probes().back().steps, 20);
  EXPECT_NEAR(gain.recent_probes().back().ratio, (12 + 16 + 24.0) / (8 + 16.8 + 28.8), 1e-9);
  EXPECT_EQ(g.history.steps, 0);  // a measured loss ends the history
  // After the pause, a probe that pays, then a severe loss: 0.5x.
  at = g.paused_until;
  gain.observe(step(at, 0, 0, 0, 0, 0, 0));  // the plan step the pause ends at
  SpeculationGain::Bucket& b = gain.bucket(1);
  EXPECT_EQ(gain.pause_state(b), SpeculationGain::Pause::kEnded);
  for (int i = 0; i < 8; ++i) gain.observe(step(at++, 3, 2, 2, 2 * kMs, kMs));
  EXPECT_EQ(gain.counts().probes_passed, 3);
  EXPECT_EQ(gain.recent_probes().back().steps, 8);  // judged alone after the loss
  for (int i = 0; i < 7; ++i) {
    gain.observe(step(at++, 1, 2, 2, 2 * kMs, kMs));
    EXPECT_EQ(gain.counts().probes_failed, 1) << "step " << i;
  }
  gain.observe(step(at++, 1, 2, 2, 2 * kMs, kMs));
  EXPECT_EQ(gain.counts().probes_failed, 2);
  EXPECT_EQ(gain.recent_probes().back().steps, 8);
  EXPECT_NEAR(gain.recent_probes().back().ratio, 0.5, 1e-9);
}

// Stop 40, H100, models/v4-small, one request, k = 3: five probes of 1.24-1.47x, then four
// steps at a request's end at 0.74x (6 tokens in 4.494 ms against 2.232 ms plain). Judged alone
// that was a clear loss, and a prediction and a three-step probe after it kept the next request
// plain. Judged with the gains before it, drafting goes on, and no prediction may pause it.
TEST(SpeculationGain, AShortDipAfterGainsDoesNotPause) {
  SpeculationGain gain;
  const SpeculationGain::Bucket& g = gain.bucket(1);
  int64_t at = 0;
  const int64_t tokens[8] = {2, 3, 3, 3, 2, 3, 3, 2};  // 42 per 16 steps in 17.5 ms (8.8 plain)
  for (int probe = 0; probe < 5; ++probe) {
    for (const int64_t t : tokens) gain.observe(step(at++, t, 3, 3, 1.094 * kMs, 0.55 * kMs));
  }
  EXPECT_EQ(gain.counts().probes_passed, 5);
  for (int i = 0; i < 4; ++i)
    gain.observe(step(at++, i < 2 ? 2 : 1, 3, 3, 1.1235 * kMs, 0.558 * kMs));
  EXPECT_EQ(gain.counts().probes_failed, 0);
  EXPECT_EQ(g.paused_until, -1);
  EXPECT_FALSE(SpeculationGain::may_predict_loss(g));
  // The same four steps with nothing before them are a clear loss.
  SpeculationGain fresh;
  for (int i = 0; i < 4; ++i)
    fresh.observe(step(i, i < 2 ? 2 : 1, 3, 3, 1.1235 * kMs, 0.558 * kMs));
  EXPECT_EQ(fresh.counts().probes_failed, 1);
}

// The drafting cost charged is the median of the latest drafting steps: one slow step (a host
// hiccup) does not move it; a lasting change does, within a few steps.
TEST(SpeculationGain, TheDraftingCostIsAMedianOfRecentSteps) {
  SpeculationGain gain;
  const SpeculationGain::Bucket& g = gain.bucket(1);
  auto drafting = [&](int64_t at, double draft_ms) {
    SpeculationGain::Step s = step(at, 3, 2, 2, kMs, kMs);
    s.draft_seconds = draft_ms * kMs;
    gain.observe(s);
  };
  int64_t at = 0;
  drafting(at++, 9.0);  // the first drafting step warms up: not counted
  EXPECT_EQ(g.draft_cost, 0);
  for (int i = 0; i < 6; ++i) drafting(at++, 0.4);
  EXPECT_DOUBLE_EQ(g.draft_cost, 0.4 * kMs);
  drafting(at++, 4.0);  // a hiccup
  EXPECT_DOUBLE_EQ(g.draft_cost, 0.4 * kMs);
  for (int i = 0; i < 6; ++i) drafting(at++, 0.8);  // drafting got dearer for good
  EXPECT_DOUBLE_EQ(g.draft_cost, 0.8 * kMs);
}

}  // namespace
}  // namespace deepinfer::sched
