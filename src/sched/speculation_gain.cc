// SpeculationGain (speculation_gain.h): the pause controller of confidence-scheduled
// verification.
#include "sched/speculation_gain.h"

#include <algorithm>
#include <bit>
#include <vector>

namespace deepinfer::sched {

double SpeculationGain::Bucket::plain_bias() const {
  const int n = std::min(plain_seen, kPlainSamples);
  if (n == 0) return 1.0;
  std::vector<double> v(plain_over_curve.begin(), plain_over_curve.begin() + n);
  std::sort(v.begin(), v.end());
  const double median = n % 2 == 1 ? v[static_cast<size_t>(n / 2)]
                                   : 0.5 * (v[static_cast<size_t>(n / 2 - 1)] +
                                            v[static_cast<size_t>(n / 2)]);
  return std::clamp(median, 1.0, 1.5);
}

void SpeculationGain::Bucket::fail_probe(int64_t step) {
  paused_until = step + pause;
  pause = std::min<int64_t>(pause * 4, 1024);
  ++failed;
  end_probe();
}

void SpeculationGain::Bucket::end_probe() {
  tokens = spent = plain = decodes = 0;
  probe_steps = 0;
}

SpeculationGain::Bucket& SpeculationGain::bucket(int64_t decodes) {
  const auto b =
      static_cast<size_t>(std::bit_width(static_cast<uint64_t>(std::max<int64_t>(1, decodes))));
  return by_size_[std::min(b, by_size_.size() - 1)];
}

void SpeculationGain::observe(const Step& s) {
  step_ = std::max(step_, s.plan_step);
  if (s.decodes <= 0) return;
  const auto B = static_cast<double>(s.decodes);
  Bucket& g = bucket(s.decodes);
  if (s.drafts_verified == 0 && s.drafts_proposed == 0) {
    // A plain step: what sampling costs without drafts, and how the curve's estimate compares
    // with a measured step (its forward and sampling; a hidden-reading drafter's catch-up is
    // drafting's cost, not plain decoding's).
    const double per = s.sample_seconds / B;
    sample_per_decode_ =
        sample_per_decode_ == 0 ? per : sample_per_decode_ + 0.2 * (per - sample_per_decode_);
    const double estimate = s.curve_seconds + sample_per_decode_ * B;
    if (s.settled && s.curve_seconds > 0 && estimate > 0) {
      g.plain_over_curve[static_cast<size_t>(g.plain_seen % Bucket::kPlainSamples)] =
          (s.forward_seconds + s.sample_seconds) / estimate;
      ++g.plain_seen;
    }
    return;
  }
  if (s.drafts_proposed > 0 && g.draft_cost_steps++ > 0) {  // its cost beyond a plain step
    const double cost = s.draft_seconds + std::max(0.0, s.sample_seconds - sample_per_decode_ * B);
    g.draft_cost = g.draft_cost == 0 ? cost : g.draft_cost + 0.2 * (cost - g.draft_cost);
  }
  if (g.paused_until >= 0) return;  // paused (steps planned before the pause still land here)
  if (!s.settled) return;
  // Every step that drafted counts, also those whose drafts the budget did not admit (drafting
  // then costs without any gain).
  const double plain = (s.curve_seconds + sample_per_decode_ * B) * g.plain_bias();
  const double spent = s.forward_seconds + s.sample_seconds + s.draft_seconds;
  if (s.tokens == 0 || plain <= 0 || spent <= 0) return;
  g.tokens += static_cast<double>(s.tokens);
  g.spent += spent;
  g.plain += plain;
  g.decodes += B;
  ++g.probe_steps;
  const double ratio = (g.tokens / g.spent) / (g.decodes / g.plain);
  // Far below parity, three steps decide (the first of a probe only drafts); near it, eight.
  const bool clear_loss = g.probe_steps >= 3 && ratio < 0.75;
  if (!clear_loss && g.probe_steps < 8) return;
  if (ratio < 1.0) {  // slower than plain decoding: stop drafting at this batch for a while
    g.fail_probe(s.plan_step);
    ++counts_.probes_failed;
    return;
  }
  ++counts_.probes_passed;
  g.pause = 16;
  g.failed = 0;
  g.end_probe();
}

}  // namespace deepinfer::sched
