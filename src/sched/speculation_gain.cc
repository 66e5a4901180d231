// SpeculationGain (speculation_gain.h): the pause controller of confidence-scheduled
// verification.
#include "sched/speculation_gain.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace deepinfer::sched {

void SpeculationGain::Bucket::fail_probe(int64_t step) {
  paused_until = step + pause;
  pause = std::min<int64_t>(pause * 4, 1024);
  ++failed;
  end_probe();
}

SpeculationGain::Window& SpeculationGain::Window::operator+=(const Window& o) {
  tokens += o.tokens;
  spent += o.spent;
  plain += o.plain;
  decodes += o.decodes;
  draft_spent += o.draft_spent;
  plain_sample += o.plain_sample;
  steps += o.steps;
  return *this;
}

SpeculationGain::Window SpeculationGain::Window::scaled(double f) const {
  Window w = *this;
  w.tokens *= f;
  w.spent *= f;
  w.plain *= f;
  w.decodes *= f;
  w.draft_spent *= f;
  w.plain_sample *= f;
  w.steps *= f;
  return w;
}

void SpeculationGain::Bucket::end_probe() {
  window = {};
  filling = 0;
}

SpeculationGain::Bucket& SpeculationGain::bucket(int64_t decodes) {
  const auto b =
      static_cast<size_t>(std::bit_width(static_cast<uint64_t>(std::max<int64_t>(1, decodes))));
  return by_size_[std::min(b, by_size_.size() - 1)];
}

void SpeculationGain::record(Probe p) {
  if (recent_.size() == kProbesKept) recent_.erase(recent_.begin());
  recent_.push_back(p);
}

void SpeculationGain::predicted_loss(Bucket& g, double decodes, double ratio) {
  Probe p;
  p.plan_step = step_;
  p.decodes = decodes;
  p.ratio = ratio;
  p.draft_cost_seconds = g.draft_cost;
  record(p);
  g.fail_probe(step_);
  g.predicted = true;
  ++counts_.probes_failed;
}

SpeculationGain::Pause SpeculationGain::pause_state(Bucket& g) {
  if (g.paused_until < 0) return Pause::kNone;
  if (step_ < g.paused_until) {
    ++counts_.paused_plans;
    return Pause::kActive;
  }
  g.paused_until = -1;
  return Pause::kEnded;
}

void SpeculationGain::observe(const Step& s) {
  step_ = std::max(step_, s.plan_step);
  if (s.decodes <= 0) return;
  const auto B = static_cast<double>(s.decodes);
  const bool plain_step = s.drafts_verified == 0 && s.drafts_proposed == 0;
  if (plain_step) {  // what sampling costs without drafts
    const double per = s.sample_seconds / B;
    sample_per_decode_ =
        sample_per_decode_ == 0 ? per : sample_per_decode_ + 0.2 * (per - sample_per_decode_);
  }
  Bucket& g = bucket(s.decodes);
  if (s.drafts_proposed > 0 && g.draft_cost_steps++ > 0) {  // its cost beyond a plain step
    const double cost = s.draft_seconds + std::max(0.0, s.sample_seconds - sample_per_decode_ * B);
    const auto seen = static_cast<size_t>(g.draft_cost_steps - 1);  // costs recorded so far
    g.recent_costs[seen % Bucket::kCostsKept] = cost;
    const size_t n = std::min(seen + 1, Bucket::kCostsKept);
    std::array<double, Bucket::kCostsKept> sorted = g.recent_costs;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(n / 2),
                     sorted.begin() + static_cast<std::ptrdiff_t>(n));
    g.draft_cost = sorted[n / 2];
  }
  if (g.paused_until >= 0) return;  // paused (steps planned before the pause still land here)
  if (plain_step && g.window.steps == 0 && g.filling == 0) return;  // not drafting yet
  // A probe's first steps draft for steps already planned without draft slots (the pipeline
  // fills: with asynchronous scheduling the first two), a cost every resumption pays once and
  // not the rate drafting goes on at: up to two leading steps that verified nothing are left
  // out of the sums. Later ones count (a budget that admits nothing is a loss like any other).
  constexpr int kFillSteps = 2;
  if (g.window.steps == 0 && s.drafts_verified == 0 && g.filling < kFillSteps) {
    ++g.filling;
    return;
  }
  const double plain = s.curve_seconds + sample_per_decode_ * B;
  const double spent = s.forward_seconds + s.sample_seconds + s.draft_seconds;
  if (s.tokens == 0 || plain <= 0 || spent <= 0) return;
  Window& w = g.window;
  w.tokens += static_cast<double>(s.tokens);
  w.spent += spent;
  w.plain += plain;
  w.decodes += B;
  w.draft_spent += s.draft_seconds;
  w.plain_sample += sample_per_decode_ * B;
  ++w.steps;
  // Far below parity, three steps decide; near it, eight. While the latest measured probe paid,
  // both are judged together with the gains measured since (noise, not a change, is the likelier
  // reason a few steps read below parity right after a gain).
  // Eight steps far below parity on their own are a change, whatever came before: judged alone.
  Window judged = w;
  if (g.measured_gain) judged += g.history;
  const bool loss_alone = w.steps >= 8 && w.ratio() < 0.75;
  const bool clear_loss = loss_alone || (w.steps >= 3 && judged.ratio() < 0.75);
  if (!clear_loss && w.steps < 8) return;
  if (loss_alone) judged = w;
  const double ratio = judged.ratio();
  Probe p;
  p.plan_step = s.plan_step;
  p.decodes = judged.decodes / judged.steps;
  p.steps = static_cast<int>(std::lround(judged.steps));
  p.ratio = ratio;
  p.passed = ratio >= 1.0;
  p.tokens = judged.tokens;
  p.spent_seconds = judged.spent;
  p.plain_seconds = judged.plain;
  p.draft_spent_seconds = judged.draft_spent;
  p.plain_sample_seconds = judged.plain_sample;
  p.draft_cost_seconds = g.draft_cost;
  record(p);
  g.predicted = false;
  g.measured_gain = ratio >= 1.0;  // a measured gain stands until a measured loss
  // Older gains weigh half per decision; a measured loss ends the history (the next probe, after
  // the pause, is judged alone).
  Window history;
  if (g.measured_gain) (history = g.history.scaled(0.5)) += w;
  g.history = history;
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
