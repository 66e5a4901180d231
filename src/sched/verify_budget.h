// Confidence-scheduled ("varlen") verification (spec speculative_decoding.md §3;
// DEEPINFER_ENABLE_MTP_VARLEN=1): how many draft positions each decode verifies in a step.
//
// Verifying drafts costs target compute: nearly free while decode is bandwidth-bound, not once
// the step's rows make it compute-bound, where a fixed k makes serving slower than no
// speculation. With c_{r,j} the estimated probability that draft j of request r survives given
// j - 1 did, its survival is a_{r,j} = Π_{i<=j} c_{r,i}; a step verifying the set S of
// positions yields τ(S) = Σ_r (1 + Σ_{j∈S_r} a_{r,j}) tokens in T(B0 + |S|) seconds (B0: the
// step's tokens without drafts). Positions are admitted in decreasing a (prefix-closed per
// request, since a falls with j) and the admitted count is the one maximising τ / T over every
// count, not the first local maximum, because the measured T is jagged (kernel tiles, graph
// buckets).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

namespace deepinfer::sched {

// Step time as a function of the tokens in a step, measured on the backend: seeded by a
// start-up profile and replaced by live steps; counts between measured ones are interpolated
// linearly, counts past the last extrapolated with the last slope. A count's live value is the
// least of its last four steps after its first (step times are noisy upward only: a graph
// captured, a pool grown, another process), so one slow step cannot make plain decoding look
// slow and drafting look like a gain (2026-12-03, H200: an EMA over such outliers kept DSpark
// varlen drafting at 0.70x at 64 requests).
class StepCostCurve {
 public:
  // A live step of `tokens` tokens took `seconds`.
  void observe(int64_t tokens, double seconds);
  // A guess from the start-up profile (forwards of one sequence, which a batched decode step on
  // a GPU need not resemble); ignored at counts a live step has measured.
  void seed(int64_t tokens, double seconds);
  // Seconds for a step of `tokens` tokens (at least any confirmed live measurement at fewer
  // tokens); 0 before any observation.
  double seconds(int64_t tokens) const;
  bool empty() const { return points_.empty(); }
  // Whether live steps have measured `tokens` (beyond the first step at that count, which may
  // pay one-time costs and stands in only where nothing else is known).
  bool measured(int64_t tokens) const {
    const auto it = live_.find(tokens);
    return it != live_.end() && it->second.seen >= 2;
  }
  const std::map<int64_t, double>& points() const { return points_; }

 private:
  struct Live {
    int64_t seen = 0;
    int64_t next = 0;
    std::array<double, 4> recent{};
  };
  double interpolated(int64_t tokens) const;
  std::map<int64_t, double> points_;
  std::map<int64_t, Live> live_;  // counts measured by live steps
  // (count, the most any confirmed live count <= it costs), rebuilt lazily after observations.
  mutable std::vector<std::pair<int64_t, double>> live_floor_;
  mutable bool floor_dirty_ = false;
};

// Chooses the draft positions to verify. survival[r] holds a_{r,1..} for candidate r (at most
// its slot cap, non-increasing); base_tokens = B0; max_tokens caps B0 + |S| (the step budget).
// draft_seconds: what drafting costs per step at this batch (0: unknown); a step that verifies
// any draft pays it on top of T, so every count m >= 1 is judged at T(B0 + m) + draft_seconds
// against the plain step's T(B0). Returns slots[r] = how many leading positions of r to verify
// (all 0 when no count beats plain decoding). `best_ratio`, when given, receives the best
// expected tokens per second of any count m >= 1 over the plain step's (0 without candidates).
std::vector<int32_t> choose_verify_lengths(std::span<const std::vector<float>> survival,
                                           int64_t base_tokens, int64_t max_tokens,
                                           const StepCostCurve& cost, double draft_seconds = 0,
                                           double* best_ratio = nullptr);

}  // namespace deepinfer::sched
