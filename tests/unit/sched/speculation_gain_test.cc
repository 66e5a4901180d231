// SpeculationGain (sched/speculation_gain.h): the varlen pause controller judges drafting by
// tokens per executor second against the same decodes without drafting. Plain steps calibrate
// the step-cost curve's estimate (which keeps the least of recent steps, so it reads low), plain
// steps never count in a probe, and a clear loss pauses drafting.
#include "sched/speculation_gain.h"

#include <gtest/gtest.h>

namespace deepinfer::sched {
namespace {

constexpr double kMs = 1e-3;

// One decode-only step of one request: `seconds` of forward (sampling and drafting free).
SpeculationGain::Step step(int64_t at, int64_t tokens, int64_t verified, int64_t proposed,
                           double seconds, double curve) {
  SpeculationGain::Step s;
  s.plan_step = at;
  s.decodes = 1;
  s.tokens = tokens;
  s.drafts_verified = verified;
  s.drafts_proposed = proposed;
  s.forward_seconds = seconds;
  s.curve_seconds = curve;
  return s;
}

// The curve says a plain step costs 1.0 ms (its least recent step); plain steps really take
// 1.1-1.3 ms. Drafting emits 9 tokens per 8 steps of 1.25 ms: 1.08x of plain decoding's 1.2 ms.
// Judged against the raw curve it would read 0.90 and pause; calibrated it keeps drafting.
TEST(SpeculationGain, PlainStepsCalibrateTheCurvesLowEstimate) {
  SpeculationGain gain;
  int64_t at = 0;
  for (const double ms : {1.1, 1.3, 1.2, 1.1, 1.3}) gain.observe(step(at++, 1, 0, 0, ms * kMs, kMs));
  const SpeculationGain::Bucket& g = gain.bucket(1);
  EXPECT_NEAR(g.plain_bias(), 1.2, 1e-9);
  for (int i = 0; i < 40; ++i) gain.observe(step(at++, i % 8 == 0 ? 2 : 1, 1, 1, 1.25 * kMs, kMs));
  EXPECT_EQ(g.paused_until, -1);
  EXPECT_EQ(g.failed, 0);
}

// A drafter that costs twice the step for 1.1 tokens: three steps show the clear loss and
// drafting pauses at that batch; the next pause is four times longer.
TEST(SpeculationGain, AClearLossPausesAfterThreeSteps) {
  SpeculationGain gain;
  int64_t at = 0;
  for (int i = 0; i < 4; ++i) gain.observe(step(at++, 1, 0, 0, kMs, kMs));
  for (int i = 0; i < 3; ++i) gain.observe(step(at++, i == 0 ? 2 : 1, 1, 1, 2 * kMs, kMs));
  const SpeculationGain::Bucket& g = gain.bucket(1);
  EXPECT_EQ(g.failed, 1);
  EXPECT_EQ(g.paused_until, at - 1 + 16);
  EXPECT_EQ(g.pause, 64);
  EXPECT_EQ(g.probe_steps, 0);
  // Other batch sizes are judged on their own.
  EXPECT_EQ(gain.bucket(16).paused_until, -1);
}

// Plain steps (nothing verified, nothing proposed) inside a probe are not part of it: they would
// only pull the ratio towards parity (or below it, against a low estimate).
TEST(SpeculationGain, PlainStepsDoNotCountInAProbe) {
  SpeculationGain gain;
  gain.observe(step(0, 3, 2, 2, kMs, kMs));
  const SpeculationGain::Bucket& g = gain.bucket(1);
  EXPECT_EQ(g.probe_steps, 1);
  for (int i = 1; i < 20; ++i) gain.observe(step(i, 1, 0, 0, 1.4 * kMs, kMs));
  EXPECT_EQ(g.probe_steps, 1);
  EXPECT_EQ(g.paused_until, -1);
}

// The calibration is a median, clamped to [1, 1.5]: one very slow plain step (a graph captured,
// a pool grown) moves it little, and plain steps faster than the curve never scale it below 1.
TEST(SpeculationGain, CalibrationIsARobustClampedMedian) {
  SpeculationGain fast, slow, outlier;
  for (int i = 0; i < 6; ++i) {
    fast.observe(step(i, 1, 0, 0, 0.8 * kMs, kMs));
    slow.observe(step(i, 1, 0, 0, 3.0 * kMs, kMs));
    outlier.observe(step(i, 1, 0, 0, (i == 2 ? 40.0 : 1.1) * kMs, kMs));
  }
  EXPECT_DOUBLE_EQ(fast.bucket(1).plain_bias(), 1.0);
  EXPECT_DOUBLE_EQ(slow.bucket(1).plain_bias(), 1.5);
  EXPECT_NEAR(outlier.bucket(1).plain_bias(), 1.1, 1e-9);
  // Before any plain step there is nothing to calibrate with.
  EXPECT_DOUBLE_EQ(SpeculationGain().bucket(1).plain_bias(), 1.0);
}

}  // namespace
}  // namespace deepinfer::sched
