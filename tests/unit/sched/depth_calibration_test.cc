// DepthCalibration: the observed survival per draft depth, and drafters' confidences scaled to it.
#include "sched/depth_calibration.h"

#include <gtest/gtest.h>

namespace deepinfer::sched {
namespace {

TEST(DepthCalibration, SurvivalIsAnEmaFromOneHalf) {
  DepthCalibration c;
  EXPECT_FALSE(c.observed(0));
  EXPECT_DOUBLE_EQ(c.survival(0), 0.5);
  c.observe(0, true, -1.0f);
  EXPECT_TRUE(c.observed(0));
  EXPECT_DOUBLE_EQ(c.survival(0), 0.5 + 0.05 * 0.5);
  c.observe(2, false, -1.0f);  // a deeper depth creates the ones before it, unobserved values 0.5
  EXPECT_DOUBLE_EQ(c.survival(1), 0.5);
  EXPECT_DOUBLE_EQ(c.survival(2), 0.5 - 0.05 * 0.5);
  for (int i = 0; i < 400; ++i) c.observe(0, true, -1.0f);
  EXPECT_NEAR(c.survival(0), 1.0, 1e-6);
}

// An MTP-like drafter: confidences 0.25 at depth 0 (its softmax maximum) while 90 % of its
// drafts survive. Calibrated, a typical draft reads ~0.9, a less sure one proportionally less,
// and nothing exceeds 1. Without confidences seen at a depth, a confidence reads as the depth's
// survival (the 0.5 prior before any verification): the raw 0.25 would make the budget admit
// almost no drafts, so none would ever be verified to calibrate it (MTP varlen on the H100,
// stop 36: paused at one request where a fixed k = 3 ran 1.46x).
TEST(DepthCalibration, ScalesConfidencesToObservedSurvival) {
  DepthCalibration c;
  EXPECT_FLOAT_EQ(c.calibrated(0, 0.25f), 0.5f);
  EXPECT_FLOAT_EQ(c.calibrated(0, 0.05f), 0.5f);
  for (int i = 0; i < 2000; ++i) c.observe(0, i % 10 != 0, 0.25f);
  EXPECT_NEAR(c.survival(0), 0.9, 0.03);
  EXPECT_NEAR(c.calibrated(0, 0.25f), 0.9f, 0.03f);
  EXPECT_NEAR(c.calibrated(0, 0.125f), 0.45f, 0.02f);
  EXPECT_FLOAT_EQ(c.calibrated(0, 0.9f), 1.0f);
  EXPECT_FLOAT_EQ(c.calibrated(1, 0.3f), 0.5f);  // depth 1 never observed: the prior
  c.observe(1, true, -1.0f);                     // observed, but without a confidence
  EXPECT_FLOAT_EQ(c.calibrated(1, 0.3f), static_cast<float>(c.survival(1)));
}

}  // namespace
}  // namespace deepinfer::sched
