// DepthCalibration: what confidence-scheduled verification (varlen) knows about each draft depth
// from the steps that verified drafts: how often a draft at depth j survived given that the
// drafts before it did (an EMA, 0.5 before any), and, for a drafter whose confidence is not a
// survival estimate (MTP: the block's own softmax probability of its token; on the trained
// small V4 those are 0.1-0.3 while 74-97 % of greedy drafts survive), how often drafts of each
// confidence survived: a reliability table per depth, in bins of half an octave of confidence.
// A bin's estimate leans on the depth's survival until it has seen a few drafts, so a bin no
// draft has been verified in reads as a typical draft and gets verified (and so measured).
// Drafters without confidences (n-gram) use the observed survival itself.
//
// Why bins and not one scale factor per depth (confidence x survival / mean confidence, until
// stop 40): MTP's confidence ranks drafts only weakly, and scaling it linearly read a draft of
// half the mean confidence as half as likely to survive. On the H100 (stop 40, models/v4-small,
// 64 requests, k = 3) the budget then verified ~1.4 drafts per request where a fixed k verified
// 3 at 71 % survival each, and varlen's probes read 0.96x where the fixed k ran 1.21-1.27x.
#pragma once

#include <array>
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
  // The survival of drafts given `confidence` at `depth`: its bin's observed rate, leaning on
  // survival(depth) while the bin has seen few drafts (survival(depth) alone for a bin never
  // verified, and 0.5 before any verification at that depth).
  float calibrated(int32_t depth, float confidence) const;

  // Bin b >= 1 holds confidences in [2^((b - 13) / 2), 2^((b - 12) / 2)); bin 0 all below
  // 2^-6, bin 12 all from 2^-0.5 to 1.
  static constexpr int kBins = 13;
  static int bin(float confidence);

 private:
  static constexpr double kEma = 0.05;
  static constexpr double kPriorDrafts = 8;  // a bin's weight against its depth's: n / (n + 8)
  struct Bin {
    int64_t seen = 0;
    double rate = 0;  // running mean over the first 1 / kEma drafts, an EMA after
  };
  std::vector<double> rate_;                   // survival per depth (EMA)
  std::vector<std::array<Bin, kBins>> table_;  // per depth and confidence bin
};

}  // namespace deepinfer::sched
