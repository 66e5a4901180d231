// DepthCalibration (see depth_calibration.h).
#include "sched/depth_calibration.h"

#include <algorithm>
#include <cmath>

namespace deepinfer::sched {

int DepthCalibration::bin(float confidence) {
  if (!(confidence > 0.0f)) return 0;
  const double half_octaves = std::floor(2.0 * std::log2(std::min(1.0f, confidence)));
  return static_cast<int>(std::clamp(half_octaves + kBins, 0.0, kBins - 1.0));
}

void DepthCalibration::observe(int32_t depth, bool survived, float confidence) {
  if (depth < 0) return;
  const auto j = static_cast<size_t>(depth);
  if (rate_.size() <= j) {
    rate_.resize(j + 1, 0.5);
    table_.resize(j + 1);
  }
  const double x = survived ? 1.0 : 0.0;
  rate_[j] += kEma * (x - rate_[j]);
  if (confidence >= 0.0f) {
    Bin& b = table_[j][static_cast<size_t>(bin(confidence))];
    ++b.seen;
    b.rate += std::max(kEma, 1.0 / static_cast<double>(b.seen)) * (x - b.rate);
  }
}

double DepthCalibration::survival(int32_t depth) const {
  return observed(depth) ? rate_[static_cast<size_t>(depth)] : 0.5;
}

float DepthCalibration::calibrated(int32_t depth, float confidence) const {
  // A bin without drafts reads as the depth's survival (0.5 before any verification), not as
  // the raw confidence, which for MTP (0.1-0.3) would keep the budget from admitting the drafts
  // whose verification calibrates it.
  const double depth_rate = survival(depth);
  if (!observed(depth)) return static_cast<float>(depth_rate);
  const Bin& b = table_[static_cast<size_t>(depth)][static_cast<size_t>(bin(confidence))];
  const double n = static_cast<double>(b.seen);
  const double w = n / (n + kPriorDrafts);
  return static_cast<float>(std::clamp(w * b.rate + (1.0 - w) * depth_rate, 0.0, 1.0));
}

}  // namespace deepinfer::sched
