// DepthCalibration: what confidence-scheduled verification (varlen) knows about each draft depth
// from the steps that verified drafts: how often a draft at depth j survived given that the
// drafts before it did (an EMA, 0.5 before any), and the mean confidence its drafter gave those
// drafts. A drafter whose confidence is not a survival estimate (MTP: the block's own softmax
// probability of its token; on the trained small V4 those are 0.1-0.3 while 74-97 % of greedy
// drafts survive) is scaled by the depth's observed survival over its mean confidence, so the
// budget weighs it by what verification accepts while keeping the drafter's ranking of requests
// and positions. Drafters without confidences (n-gram) use the observed survival itself.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::sched {

class DepthCalibration {
 public:
  // A verified draft at 0-based depth j whose predecessors survived: whether it survived, and
  // the confidence its drafter gave it (negative: none).
  void observe(int32_t depth, bool survived, float confidence);
  // Observed survival at `depth` (0.5 before any observation); whether one was observed.
  double survival(int32_t depth) const;
  bool observed(int32_t depth) const {
    return depth >= 0 && depth < static_cast<int32_t>(rate_.size());
  }
  // `confidence` scaled by survival(depth) / mean confidence at `depth`, clamped to [0, 1];
  // survival(depth) itself (0.5 before any observation) until that depth has seen confidences.
  float calibrated(int32_t depth, float confidence) const;

 private:
  static constexpr double kEma = 0.05;
  std::vector<double> rate_;  // survival per depth (EMA)
  std::vector<double> conf_;  // mean confidence per depth (EMA; 0: none seen)
};

}  // namespace deepinfer::sched
