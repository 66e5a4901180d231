// DepthCalibration: the observed survival per draft depth, and drafters' confidences read through
// a reliability table per depth.
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

TEST(DepthCalibration, BinsAreHalfOctavesOfConfidence) {
  EXPECT_EQ(DepthCalibration::bin(1.0f), 12);
  EXPECT_EQ(DepthCalibration::bin(0.75f), 12);
  EXPECT_EQ(DepthCalibration::bin(0.7f), 11);
  EXPECT_EQ(DepthCalibration::bin(0.5f), 11);
  EXPECT_EQ(DepthCalibration::bin(0.3f), 9);
  EXPECT_EQ(DepthCalibration::bin(0.25f), 9);
  EXPECT_EQ(DepthCalibration::bin(0.24f), 8);
  EXPECT_EQ(DepthCalibration::bin(0.016f), 1);
  EXPECT_EQ(DepthCalibration::bin(0.01f), 0);
  EXPECT_EQ(DepthCalibration::bin(0.0f), 0);
  EXPECT_EQ(DepthCalibration::bin(2.0f), 12);
}

// An MTP-like drafter whose confidence ranks its drafts only weakly: at confidence 0.25 (its
// usual softmax maximum) 90 % of the drafts survive, at 0.06 still 80 %, at 0.6 95 %. Each
// confidence reads as its own bin's survival, not as the confidence scaled (a linear scale by
// the mean would read 0.06 as ~0.2); a confidence no draft has been verified at reads as the
// depth's survival, a bin that has seen few drafts leans on it, and before any verification
// every confidence reads 0.5 (the raw 0.25 would make the budget admit almost no drafts, so
// none would ever be verified to calibrate it: MTP varlen on the H100, stop 36).
TEST(DepthCalibration, ReadsConfidencesAsTheirBinsObservedSurvival) {
  DepthCalibration c;
  EXPECT_FLOAT_EQ(c.calibrated(0, 0.25f), 0.5f);
  EXPECT_FLOAT_EQ(c.calibrated(0, 0.05f), 0.5f);
  for (int i = 0; i < 2000; ++i) {
    c.observe(0, i % 10 != 0, 0.25f);
    c.observe(0, i % 5 != 0, 0.06f);
    c.observe(0, i % 20 != 0, 0.6f);
  }
  EXPECT_NEAR(c.calibrated(0, 0.25f), 0.9f, 0.05f);
  EXPECT_NEAR(c.calibrated(0, 0.06f), 0.8f, 0.05f);
  EXPECT_NEAR(c.calibrated(0, 0.6f), 0.95f, 0.05f);
  const auto depth = static_cast<float>(c.survival(0));
  EXPECT_FLOAT_EQ(c.calibrated(0, 0.01f), depth);  // never verified at that confidence
  // Eight drafts that all failed at 0.015: half the way from the depth's survival to 0.
  for (int i = 0; i < 8; ++i) c.observe(0, false, 0.015f);
  EXPECT_NEAR(c.calibrated(0, 0.015f), 0.5 * c.survival(0), 1e-6);
  EXPECT_FLOAT_EQ(c.calibrated(1, 0.3f), 0.5f);  // depth 1 never observed: the prior
  c.observe(1, true, -1.0f);                     // observed, but without a confidence
  EXPECT_FLOAT_EQ(c.calibrated(1, 0.3f), static_cast<float>(c.survival(1)));
}

}  // namespace
}  // namespace deepinfer::sched
