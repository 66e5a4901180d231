// Confidence-scheduled verification: see verify_budget.h.
#include "sched/verify_budget.h"

#include <algorithm>
#include <iterator>

namespace deepinfer::sched {

void StepCostCurve::observe(int64_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds > 0)) return;
  Live& l = live_[tokens];
  ++l.seen;
  const auto it = points_.find(tokens);
  if (l.seen == 1) {
    // The first step at a count often pays one-time costs (a CUDA graph captured, a pool grown):
    // it stands in only where nothing else is known.
    if (it == points_.end()) points_.emplace(tokens, seconds);
    return;
  }
  l.recent[static_cast<size_t>(l.next++ % l.recent.size())] = seconds;
  const size_t n = std::min<size_t>(static_cast<size_t>(l.seen - 1), l.recent.size());
  points_[tokens] = *std::min_element(l.recent.begin(), l.recent.begin() + static_cast<std::ptrdiff_t>(n));
  floor_dirty_ = true;
}

void StepCostCurve::seed(int64_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds > 0) || live_.count(tokens) != 0) return;
  points_[tokens] = seconds;
}

double StepCostCurve::seconds(int64_t tokens) const {
  if (points_.empty()) return 0;
  // A step of more tokens never costs less than a confirmed live step of fewer: the profile's
  // guesses at counts no live step has had yet may be far below what live steps show (a GPU's
  // batched decode step against a one-sequence prefill), and the budget would pick them.
  if (floor_dirty_) {  // rebuilt once after new observations, not per query
    live_floor_.clear();
    double most = 0;
    for (const auto& [n, l] : live_) {
      if (l.seen < 2) continue;
      most = std::max(most, points_.at(n));
      live_floor_.emplace_back(n, most);
    }
    floor_dirty_ = false;
  }
  const auto after = std::upper_bound(live_floor_.begin(), live_floor_.end(), tokens,
                                      [](int64_t t, const auto& p) { return t < p.first; });
  const double floor = after == live_floor_.begin() ? 0.0 : std::prev(after)->second;
  return std::max(floor, interpolated(tokens));
}

double StepCostCurve::interpolated(int64_t tokens) const {
  const auto hi = points_.lower_bound(tokens);
  if (hi != points_.end() && hi->first == tokens) return hi->second;
  if (hi == points_.begin()) {  // below the smallest measured count: no cheaper than it
    return hi->second;
  }
  const auto lo = std::prev(hi);
  if (hi != points_.end()) {
    const double f = static_cast<double>(tokens - lo->first) /
                     static_cast<double>(hi->first - lo->first);
    return lo->second + f * (hi->second - lo->second);
  }
  // Past the largest: the last segment's slope (or proportional growth with one point).
  if (lo == points_.begin()) {
    return lo->second * static_cast<double>(tokens) / static_cast<double>(lo->first);
  }
  const auto before = std::prev(lo);
  const double slope = (lo->second - before->second) / static_cast<double>(lo->first - before->first);
  return lo->second + std::max(0.0, slope) * static_cast<double>(tokens - lo->first);
}

std::vector<int32_t> choose_verify_lengths(std::span<const std::vector<float>> survival,
                                           int64_t base_tokens, int64_t max_tokens,
                                           const StepCostCurve& cost, double draft_seconds,
                                           double* best_ratio) {
  std::vector<int32_t> slots(survival.size(), 0);
  if (best_ratio != nullptr) *best_ratio = 0;
  struct Cand {
    float a;
    uint32_t r;
  };
  std::vector<Cand> cands;
  for (size_t r = 0; r < survival.size(); ++r) {
    for (const float a : survival[r]) cands.push_back({a, static_cast<uint32_t>(r)});
  }
  const int64_t room = std::max<int64_t>(0, max_tokens - base_tokens);
  if (cands.empty() || room == 0 || cost.empty()) return slots;
  // Decreasing survival; ties keep request order, and within a request a is non-increasing, so
  // every prefix of this order is prefix-closed per request.
  std::stable_sort(cands.begin(), cands.end(), [](const Cand& x, const Cand& y) { return x.a > y.a; });
  const auto limit = std::min<int64_t>(room, static_cast<int64_t>(cands.size()));
  const double base_yield = static_cast<double>(survival.size());
  const double plain_rate =
      base_yield / std::max(1e-12, cost.seconds(std::max<int64_t>(1, base_tokens)));
  double best_rate = plain_rate, best_draft_rate = 0;
  int64_t best_m = 0;
  double yield = base_yield;
  for (int64_t m = 1; m <= limit; ++m) {
    yield += cands[static_cast<size_t>(m - 1)].a;
    const double rate = yield / std::max(1e-12, cost.seconds(base_tokens + m) + draft_seconds);
    best_draft_rate = std::max(best_draft_rate, rate);
    if (rate > best_rate) {
      best_rate = rate;
      best_m = m;
    }
  }
  if (best_ratio != nullptr) *best_ratio = best_draft_rate / plain_rate;
  for (int64_t m = 0; m < best_m; ++m) ++slots[cands[static_cast<size_t>(m)].r];
  return slots;
}

}  // namespace deepinfer::sched
