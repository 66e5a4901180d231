// DepthCalibration (see depth_calibration.h).
#include "sched/depth_calibration.h"

#include <algorithm>

namespace deepinfer::sched {

void DepthCalibration::observe(int32_t depth, bool survived, float confidence) {
  if (depth < 0) return;
  const auto j = static_cast<size_t>(depth);
  if (rate_.size() <= j) {
    rate_.resize(j + 1, 0.5);
    conf_.resize(j + 1, 0.0);
  }
  rate_[j] += kEma * ((survived ? 1.0 : 0.0) - rate_[j]);
  if (confidence >= 0.0f) {
    const double c = std::min(1.0f, confidence);
    conf_[j] = conf_[j] == 0.0 ? c : conf_[j] + kEma * (c - conf_[j]);
  }
}

double DepthCalibration::survival(int32_t depth) const {
  return observed(depth) ? rate_[static_cast<size_t>(depth)] : 0.5;
}

float DepthCalibration::calibrated(int32_t depth, float confidence) const {
  // Nothing to scale by yet: the depth's survival (0.5 before any verification), not the raw
  // confidence, which for MTP (0.1-0.3) would keep the budget from admitting the drafts whose
  // verification calibrates it.
  if (!observed(depth) || conf_[static_cast<size_t>(depth)] <= 0.0) {
    return static_cast<float>(survival(depth));
  }
  const double scaled =
      confidence * rate_[static_cast<size_t>(depth)] / conf_[static_cast<size_t>(depth)];
  return static_cast<float>(std::clamp(scaled, 0.0, 1.0));
}

}  // namespace deepinfer::sched
