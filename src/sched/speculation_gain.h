// SpeculationGain: whether speculative decoding pays at the current batch size, measured on the
// live steps (confidence-scheduled verification, DEEPINFER_ENABLE_MTP_VARLEN=1; the engine's
// half is runtime/engine_spec.cc, the per-step budget sched/verify_budget.h).
//
// Drafting and verification are nearly free at one sequence on a GPU and a loss at 64 on a CPU,
// so there is one controller per decode-count bucket (its bit width), each probing and pausing
// on its own. A probe sums, over the decode steps that drafted, the tokens emitted and the
// executor seconds spent (forward, sampling, drafting), and compares tokens per second with the
// same decodes' rate without drafting. Clearly slower (below 0.75 after three steps) or slower
// after eight: drafting pauses at that batch, each failed probe in a row pausing 4x longer.
//
// The rate without drafting comes from the step-cost curve (StepCostCurve), which keeps the
// least of a count's recent steps so that one slow step cannot make plain decoding look slow.
// That makes the curve an underestimate of a typical plain step: compared with the mean of the
// drafting steps, a drafter at parity read about 0.85 on the CPU, and the probes paused
// n-gram drafting that ran 1.85x faster with a fixed k on the H200 (2026-12-03). So the plain
// steps the engine still runs (the first plans, every 16th plan, pauses) calibrate it: the
// estimate is scaled by the median of their measured time over the curve's value, clamped to
// [1, 1.5] (the least-of filter only errs low; the cap bounds what a few slow early steps can
// do). Plain steps themselves never count in a probe: they say nothing about drafting; nor do
// the first two steps at a row count (one-time costs: on a GPU a CUDA graph captured).
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer::sched {

class SpeculationGain {
 public:
  // One finished decode-only step (every request of the plan a decode).
  struct Step {
    int64_t plan_step = 0;
    int64_t decodes = 0;
    int64_t tokens = 0;           // tokens emitted
    int64_t drafts_verified = 0;  // draft rows the step verified
    int64_t drafts_proposed = 0;  // drafts made after it for the next step
    double forward_seconds = 0, sample_seconds = 0, draft_seconds = 0;
    // The step-cost curve's forward seconds for `decodes` tokens (0: not known yet).
    double curve_seconds = 0;
    // Whether steps of this one's row count had run twice before: the first runs of a count
    // pay one-time costs (on a GPU the second captures CUDA graphs, several times a replay),
    // which would read as drafting's loss, or inflate the plain calibration.
    bool settled = true;
  };
  // What the controller did, cumulative (EngineStats' spec_varlen_* counters).
  struct Counts {
    int64_t probes_passed = 0, probes_failed = 0;
  };

  struct Bucket {
    // Sums over the drafting steps measured since drafting (re)started in this bucket: tokens
    // emitted, executor seconds spent, and the estimate of the same decodes without drafting.
    double tokens = 0, spent = 0, plain = 0, decodes = 0;
    int probe_steps = 0;
    int64_t paused_until = -1;  // plan step at which drafting resumes (-1: drafting)
    int64_t pause = 16;         // the next pause's length in steps (x4 while it does not pay)
    int failed = 0;             // failed probes in a row
    // Executor seconds drafting adds to a step at this batch size (drafting, and the verify
    // rows' sampling beyond a plain step's), an EMA over the steps that drafted; 0: not measured
    // yet. The budget charges it to every step that verifies drafts, so once it is known a batch
    // where drafting cannot pay is paused without probing it again.
    double draft_cost = 0;
    int draft_cost_steps = 0;  // drafting steps seen (the first, which warms up, is skipped)
    // Plain steps' measured seconds over the curve's estimate, the latest kPlainSamples.
    static constexpr int kPlainSamples = 8;
    std::array<double, kPlainSamples> plain_over_curve{};
    int plain_seen = 0;

    // What the curve's estimate is multiplied by: the median of plain_over_curve, in [1, 1.5];
    // 1 before any plain step.
    double plain_bias() const;
    // A probe found (or the draft-cost model predicts) a loss: pause from `step` on, the next
    // pause 4x longer; the probe's sums start over.
    void fail_probe(int64_t step);
    void end_probe();
  };

  // The bucket of steps with `decodes` decodes.
  Bucket& bucket(int64_t decodes);
  // Learns from a finished decode-only step: plain steps calibrate, drafting steps probe.
  void observe(const Step& s);

  int64_t step() const { return step_; }  // the latest plan step observed
  int64_t next_plan() { return plans_++; }  // counts the plans that asked for draft slots
  const Counts& counts() const { return counts_; }
  // A loss the budget predicted (the engine's draft-cost model) pauses `g` like a failed probe.
  void predicted_loss(Bucket& g) {
    g.fail_probe(step_);
    ++counts_.probes_failed;
  }

 private:
  std::array<Bucket, 24> by_size_;
  int64_t step_ = 0;
  int64_t plans_ = 0;
  double sample_per_decode_ = 0;  // plain steps' sampling seconds per decode (EMA)
  Counts counts_;
};

}  // namespace deepinfer::sched
