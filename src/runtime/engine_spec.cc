// EngineCore, speculative decoding on the executor (engine_core.h; docs/speculative.md).
//
// A decode with draft slots feeds [last accepted token, d_1 .. d_m] (m <= slots, the drafter's
// proposal) and gets logits for every row. Verification draws the target's token at row i with
// the very key plain decoding uses at that output position (seq_seed, output index, sample
// index), after every logits processor and the grammar mask, and accepts it; the run continues
// while that token equals d_{i+1}. So a draft survives exactly when the target would have
// produced it, and the emitted tokens are bitwise those of decoding without speculation, for
// greedy and seeded sampling alike, whatever the drafter, k, batch or preemption (for a
// one-token proposal this is rejection sampling with q = one-hot: accept with p(d)). The
// rows after the first mismatch are discarded: the cache rolls back to the accepted tokens.
#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "runtime/engine_core.h"
#include "sample/sampler.h"

namespace deepinfer::runtime {

void EngineCore::prepare_verify(const sched::ScheduledRequest& sr, SeqExec& e, int64_t start,
                                int32_t last) const {
  const std::vector<int32_t>& drafts = e.draft.proposal.tokens;
  int64_t m = std::min<int64_t>(sr.num_drafts, static_cast<int64_t>(drafts.size()));
  // A verify span ends at the next block boundary at the latest: the prefix cache's snapshot
  // there is taken once the drafts before it are accepted (finish_spec_step), and never holds
  // a rejected token.
  if (block_size_ > 0) m = std::min(m, (start / block_size_ + 1) * block_size_ - start - 1);
  // Structured outputs: drafts the grammar refuses would only be rejected by verification at
  // the cost of their rows; keep the prefix the matcher accepts, then restore the matcher (its
  // mask for the current state stays valid).
  e.grammar_cut = 0;
  if (e.matcher && m > 0 && !e.grammar_done) {
    int32_t ok = 0;
    while (ok < m && e.matcher->accept_token(drafts[static_cast<size_t>(ok)])) ++ok;
    if (ok > 0) e.matcher->rollback(ok);
    e.grammar_cut = static_cast<int32_t>(m - ok);
    m = ok;
  }
  e.fed.assign(1, last);  // the plan's token: the last known one, or a filled placeholder
  e.fed.insert(e.fed.end(), drafts.begin(), drafts.begin() + std::max<int64_t>(0, m));
}

void EngineCore::verify_rows(sched::RequestId id, SeqExec& e, std::span<const float> rows,
                             int64_t count, sample::Sampler& sampler, Sampled& out) {
  const auto V = static_cast<size_t>(vocab_size());
  out.id = id;
  out.drafts_verified = static_cast<int32_t>(count - 1);
  for (int64_t i = 0; i < count; ++i) {
    const size_t before = out.tokens.size();
    sample_one(id, e, rows.subspan(static_cast<size_t>(i) * V, V), sampler, out);
    if (out.tokens.size() == before || !out.error.empty() || e.grammar_done) return;
    if (i + 1 == count || out.tokens.back() != e.fed[static_cast<size_t>(i + 1)]) return;
  }
}

void EngineCore::verify_residual(sched::RequestId id, SeqExec& e, std::span<const float> rows,
                                 int64_t count, sample::Sampler& sampler, Sampled& out) {
  const auto V = static_cast<size_t>(vocab_size());
  out.id = id;
  out.drafts_verified = static_cast<int32_t>(count - 1);
  if (e.grammar_done) return;
  const spec::DraftProposal& prop = e.draft.proposal;
  // The drafts judged: those fed, and the one the grammar refused after them (it was drawn
  // from q like the others, and its refusal is its rejection: p(d) = 0). Drafts the slot budget
  // or a block boundary left out were decided before they were drawn: not judged.
  const int64_t judged =
      std::min<int64_t>(count - 1 + (e.grammar_cut > 0 ? 1 : 0),
                        static_cast<int64_t>(std::min(prop.tokens.size(), prop.q.size() / V)));
  // Vocabulary-sized scratch, per sampling thread (verify_residual runs on the sampling pool).
  thread_local std::vector<float> p, residual;
  for (int64_t i = 0; i < count; ++i) {
    const std::span<const float> row = rows.subspan(static_cast<size_t>(i) * V, V);
    if (i >= judged) {  // past the judged drafts: the target's own draw, as plain decoding
      sample_one(id, e, row, sampler, out);
      return;
    }
    const sample::SampleContext ctx = sample_context(e);
    if (const Status st = sampler.probabilities(row, ctx, p); !st.ok()) {
      out.error = "sampling failed: " + st.message();
      return;
    }
    const auto d = static_cast<size_t>(prop.tokens[static_cast<size_t>(i)]);
    const std::span<const float> q(prop.q.data() + static_cast<size_t>(i) * V, V);
    // Accept with probability min(1, p(d) / q(d)) (q(d) > 0: d was drawn from q).
    const double u = sample::sample_uniform(ctx.key, sample::RngDomain::kDraftAccept);
    if (i + 1 < count && u * static_cast<double>(q[d]) < static_cast<double>(p[d])) {
      if (!accept_token(e, static_cast<int32_t>(d), out) || e.grammar_done) return;
      continue;
    }
    const int32_t t = sample::draw_residual(
        p, q, sample::sample_uniform(ctx.key, sample::RngDomain::kResidualSample), residual);
    if (t < 0) {  // no residual mass (p <= q up to rounding): p itself
      sample_one(id, e, row, sampler, out);
    } else {
      accept_token(e, t, out);
    }
    return;
  }
}

// q may be any distribution (the output follows p whatever it is); what it decides is how many
// drafts survive, sum_x min(p(x), q(x)). The trained default's drafter is less sure than its
// target, so q at the request's own temperature is too flat; a sharper one accepts more
// (models/default, the 320 three-token requests of SpecEngine.ResidualAcceptance... with the
// scale and T set by a temporary hook, one run each, about +-0.03: at T 1.0 0.51 -> 0.54 of
// drafts with a scale of 0.8, at T 0.7 0.52 -> 0.60; 0.6 gains no more). A judgement on a
// small sample, to revisit with a drafter trained differently.
constexpr float kDraftTemperatureScale = 0.8f;

void EngineCore::prepare_draft_draws(SeqExec& e) {
  // Draft j would be output position num_sampled + j. The round goes into the counter's high
  // position word (positions stay below 2^32), so every draft draws fresh uniforms.
  const uint64_t round = uint64_t{e.draft_round++} << 32;
  e.draws.resize(static_cast<size_t>(spec_tokens_));
  for (int32_t j = 0; j < spec_tokens_; ++j) {
    const sample::SampleKey key{e.seed, (static_cast<uint64_t>(e.num_sampled) + j) | round,
                                static_cast<uint32_t>(e.index)};
    sample::SampleSpec& s = e.draws[static_cast<size_t>(j)];
    s = sample::make_sample_spec(*e.params, key, sample::RngDomain::kDraftSample);
    s.temperature *= kDraftTemperatureScale;
  }
}

void EngineCore::verify_drawn(SeqExec& e, std::span<const int32_t> drawn, Sampled& out) {
  out.drafts_verified = static_cast<int32_t>(drawn.size() - 1);
  if (e.grammar_done) return;
  for (size_t i = 0; i < drawn.size(); ++i) {
    if (!accept_token(e, drawn[i], out) || e.grammar_done) return;
    if (i + 1 == drawn.size() || drawn[i] != e.fed[i + 1]) return;
  }
}

void EngineCore::observe_hidden(SeqExec& e, int64_t first, std::span<const float> hidden) {
  if (drafter_ == nullptr || !drafter_->wants_hidden() || !e.cache || hidden.empty()) return;
  if (drafter_asleep_.load(std::memory_order_relaxed)) {  // kept for waking, not run
    drafter_->hold(first, hidden, e.draft);
    return;
  }
  if (!drafter_->observe(*e.cache, e.known, first, hidden, e.draft).ok()) {
    e.draft.lost = true;  // a drafter failure costs speed, never output
  }
}

void EngineCore::finish_spec_step(const sched::ScheduledRequest& sr, SeqExec& e, int64_t start,
                                  int64_t fed, std::span<const float> hidden, Sampled& out) {
  if (!e.cache || !out.error.empty()) return;  // a failed request's state is dropped
  if (sr.num_drafts > 0) out.drafts_grammar_cut = e.grammar_cut;
  const int64_t kept_rows = std::min<int64_t>(fed, std::max<size_t>(1, out.tokens.size()));
  if (sr.num_drafts > 0) {
    // Rows past the accepted run held rejected drafts: undo them in every cache kind.
    const int64_t undo = fed - kept_rows;
    if (undo > 0) {
      if (const Status st = e.cache->rollback(undo); !st.ok()) {
        out.error = "internal: speculative rollback failed: " + st.message();
        return;
      }
    }
    e.spec_planned_end = start + sr.num_tokens;
    e.spec_kept_end = e.cache->length();
    if (block_size_ > 0 && undo == 0 && fed > 1 && e.cache->length() % block_size_ == 0) {
      snapshot_after_drafting(sr, e);
    }
  }
  e.draft.proposal.clear();
  if (drafter_ == nullptr || spec_tokens_ <= 0 || out.tokens.empty() || e.grammar_done) return;
  // Paused (varlen found drafting does not pay): only a drafter that follows the hidden streams
  // still takes them, so that it can resume; asleep, it only holds the latest of them.
  if (draft_depth_.load(std::memory_order_relaxed) == 0) {
    if (!drafter_->wants_hidden()) return;
    if (drafter_asleep_.load(std::memory_order_relaxed)) {
      if (!hidden.empty()) {
        const size_t width = hidden.size() / static_cast<size_t>(fed);
        drafter_->hold(start, hidden.first(static_cast<size_t>(kept_rows) * width), e.draft);
      }
      return;
    }
  }
  // Drafted for the next step together with the step's other sequences (draft_all).
  spec::Drafter::Job& job = draft_jobs_.emplace_back();
  job.cache = &*e.cache;
  job.context = e.known;
  job.state = &e.draft;
  job.first = start;
  if (e.residual) {
    prepare_draft_draws(e);
    job.draws = e.draws;
  }
  if (!hidden.empty()) {
    const size_t width = hidden.size() / static_cast<size_t>(fed);
    job.hidden = hidden.first(static_cast<size_t>(kept_rows) * width);
  }
  draft_outs_.push_back(&out);
}

void EngineCore::snapshot_after_drafting(const sched::ScheduledRequest& sr, SeqExec& e) {
  if (drafter_ != nullptr && drafter_->wants_hidden()) {
    deferred_snapshots_.emplace_back(&sr, &e);
  } else {
    save_snapshot_at(sr, e);
  }
}

void EngineCore::draft_all() {
  if (!draft_jobs_.empty()) {
    // A failure costs speed, never output.
    drafter_->propose_all(draft_jobs_, draft_depth_.load(std::memory_order_relaxed));
    for (size_t i = 0; i < draft_jobs_.size(); ++i) {
      const spec::DraftProposal& p = draft_jobs_[i].state->proposal;
      draft_outs_[i]->drafts_proposed = static_cast<int32_t>(p.tokens.size());
      draft_outs_[i]->next_confidence = p.confidence;
    }
    draft_jobs_.clear();
    draft_outs_.clear();
  }
  for (const auto& [sr, e] : deferred_snapshots_) {
    if (e->cache) save_snapshot_at(*sr, *e);  // (a request that failed since keeps none)
  }
  deferred_snapshots_.clear();
}

// Confidence-scheduled verification, the engine thread's half (sched/verify_budget.h decides).

void EngineCore::update_gain(const StepJob& job) {
  const sched::StepPlan& plan = job.plan;
  // Decode-only steps: tokens per executor second (forward, sampling and drafting: what
  // speculation adds on the executor) against the curve's estimate of the same decodes without
  // speculation (sched/speculation_gain.h).
  const bool decode_only =
      plan.num_decodes > 0 && plan.num_decodes == static_cast<int32_t>(plan.requests.size());
  sched::SpeculationGain::Step ran;  // the step as it ran (the trace's)
  ran.plan_step = plan.step;
  for (const Sampled& sm : job.sampled) {
    ran.tokens += static_cast<int64_t>(sm.tokens.size());
    ran.drafts_verified += sm.drafts_verified;
    ran.drafts_proposed += sm.drafts_proposed;
  }
  ran.forward_seconds = job.forward_seconds;
  ran.sample_seconds = job.sample_seconds;
  ran.draft_seconds = job.draft_seconds;
  sched::SpeculationGain::Step s;  // what the controller measures
  s.plan_step = plan.step;
  if (decode_only && !job.recording_setup) {  // a step that recorded graphs is not measured
    s = ran;
    s.decodes = plan.num_decodes;
    s.curve_seconds = step_cost_.seconds(plan.num_decodes);
    // The curve's steps computed the drafter's context, plain decoding would not.
    if (job.draft_context) s.curve_seconds *= 1.0 - draft_context_share(plan.num_decodes);
  }
  const sched::SpeculationGain::Counts before = gain_.counts();
  gain_.observe(s);
  if (varlen_trace_ != nullptr) trace_step(job, ran, s, before);
}

void EngineCore::trace_step(const StepJob& job, const sched::SpeculationGain::Step& ran,
                            const sched::SpeculationGain::Step& measured,
                            const sched::SpeculationGain::Counts& before) {
  VarlenTrace::Step t;
  t.plan_step = ran.plan_step;
  t.decodes = measured.decodes;
  t.fed_tokens = job.fed_tokens;
  t.forwards = job.forwards;
  t.forward_seconds = ran.forward_seconds;
  t.sample_seconds = ran.sample_seconds;
  t.draft_seconds = ran.draft_seconds;
  t.curve_seconds = measured.curve_seconds;
  t.tokens = ran.tokens;
  t.drafts_verified = ran.drafts_verified;
  t.drafts_proposed = ran.drafts_proposed;
  t.recording_setup = job.recording_setup;
  t.draft_context = job.draft_context;
  t.draft_depth = draft_depth_.load(std::memory_order_relaxed);
  t.asleep = drafter_asleep_.load(std::memory_order_relaxed);
  if (measured.decodes > 0) t.window_steps = gain_.bucket(measured.decodes).probe_steps();
  const sched::SpeculationGain::Counts& now = gain_.counts();
  const bool decided =
      now.probes_passed + now.probes_failed != before.probes_passed + before.probes_failed;
  if (decided && !gain_.recent_probes().empty()) {
    t.decision_ratio = gain_.recent_probes().back().ratio;
    t.decision_steps = gain_.recent_probes().back().steps;
  }
  varlen_trace_->step(t);
}

void EngineCore::profile_step_cost() {
  // One scratch sequence per size: a forward of B tokens stands in for a step of B rows (the
  // dense parts, which dominate, are the same work); live steps refine the curve. The seed is
  // the first forward after the first (which pays one-time setup) that ran no recorded unit's
  // setup either (Ops::recording_setups): a seed taken at a setup priced verify sizes several
  // times their replayed cost, so the budget never admitted them (docs/speculative.md, stop
  // 34). Since the engine records its graphs first (capture_graphs), sizes up to the graph limit
  // are replays at once; larger ones, and a backend that never records, take the second.
  constexpr int kMostRuns = 6;  // a size whose setups outlast this is seeded by its last run
  const int64_t most = std::min<int64_t>(sched_->config().max_num_batched_tokens, 512);
  bool measure_context =
      drafter_ != nullptr && drafter_->reads_draft_context() && !lockstep_ && !stand_in_forward_;
  for (int64_t b = 1; b <= most; b *= 2) {
    std::vector<int32_t> ids(static_cast<size_t>(b), 0);
    for (int rep = 0; rep < kMostRuns; ++rep) {
      try {
        model::SequenceCache seq = model_->new_sequence();
        const int64_t setups = ops_->recording_setups();
        const auto t0 = SteadyClock::now();
        if (!extend_model(seq, ids, model::LogitsWanted::kLast).ok()) return;
        const double s = seconds_since(t0);
        const bool steady = rep > 0 && ops_->recording_setups() == setups;
        if (steady || rep + 1 == kMostRuns) {
          step_cost_.seed(b, s);
          break;
        }
      } catch (const backend::OutOfMemory&) {
        return;  // the live steps measure the rest
      }
    }
    if (measure_context && !measure_draft_context_share(b, ids)) measure_context = false;
  }
}

bool EngineCore::measure_draft_context_share(int64_t tokens, const std::vector<int32_t>& ids) {
  // The least of three forwards with the context and three without (both forms recorded at
  // start-up: replays), as a share of the first.
  constexpr int kRuns = 3;
  double on = 0, off = 0;
  bool ok = true;
  try {
    for (int rep = 0; rep < 2 * kRuns && ok; ++rep) {
      const bool context = rep % 2 == 0;
      model_->set_draft_context(context);
      model::SequenceCache seq = model_->new_sequence();
      const auto t0 = SteadyClock::now();
      ok = extend_model(seq, ids, model::LogitsWanted::kLast).ok();
      const double s = seconds_since(t0);
      double& least = context ? on : off;
      least = least == 0 ? s : std::min(least, s);
    }
  } catch (const backend::OutOfMemory&) {
    ok = false;
  }
  model_->set_draft_context(true);
  if (!ok || on <= 0 || off <= 0) return false;
  draft_context_share_[tokens] = std::clamp(1.0 - off / on, 0.0, 0.5);
  return true;
}

double EngineCore::draft_context_share(int64_t tokens) const {
  // The measured count at or below `tokens` (the profile's powers of two), else the smallest.
  if (draft_context_share_.empty()) return 0;
  auto it = draft_context_share_.upper_bound(tokens);
  if (it != draft_context_share_.begin()) --it;
  return it->second;
}

void EngineCore::choose_draft_slots(std::span<const sched::DraftCandidate> cands, int64_t spare,
                                    std::span<int32_t> slots) {
  // This batch's controller (update_gain): paused, drafting stops (depth 0: the executor drafts
  // nothing; from the second failed probe in a row the drafter also sleeps: MTP keeps no
  // hidden streams, DSpark no context in the forwards, execute_unguarded);
  // when its pause is over, drafting resumes at full depth and it probes again.
  sched::SpeculationGain::Bucket& g = gain_.bucket(static_cast<int64_t>(cands.size()));
  const sched::SpeculationGain::Pause pause = gain_.pause_state(g);
  if (pause == sched::SpeculationGain::Pause::kActive) {
    std::fill(slots.begin(), slots.end(), 0);
    draft_depth_ = 0;
    drafter_asleep_ = g.failed >= 2;
    return;
  }
  if (pause == sched::SpeculationGain::Pause::kEnded ||
      draft_depth_.load(std::memory_order_relaxed) == 0) {
    draft_depth_ = spec_tokens_;
    drafter_asleep_ = false;
  }
  // The first two plans, and every 16th until live plain steps have measured this batch's
  // count (every 64th after, to follow drift), a plain step, so that the curve knows what the
  // same decodes cost without drafts (the start-up profile's single-sequence forwards misjudge
  // batched decode steps on a GPU, where those are graph replays; a profile point above the live
  // decode step makes plain decoding look slow and drafting look like a gain: the likely reason
  // DSpark varlen drafted through a whole 64-request run on the H200 at 0.80x, 2026-12-03). Once
  // measured, every 16th is a cost for little: at one request each gives 1 token in 0.55 ms
  // where a drafting step gives 3.1 in 1.16 ms (stop 40, H100, models/v4-small, k = 3), about 1 %
  // of the speed by that arithmetic (not measured alone).
  const int64_t plan_index = gain_.next_plan();
  const int64_t plain_every = step_cost_.measured(static_cast<int64_t>(cands.size())) ? 64 : 16;
  if (plan_index < 2 || plan_index % plain_every == 0) {  // a count's first step is not taken
    std::fill(slots.begin(), slots.end(), 0);
    return;
  }
  // Each draft position's survival as this step's confidences estimate it (what the budget
  // admits by).
  std::vector<std::vector<float>> survival(cands.size());
  for (size_t r = 0; r < cands.size(); ++r) {
    const auto it = draft_confidence_.find(cands[r].id);
    float a = 1.0f;
    for (int32_t j = 0; j < cands[r].max_slots; ++j) {
      float c = 0.5f;  // no estimate yet
      if (it != draft_confidence_.end() && j < static_cast<int32_t>(it->second.size())) {
        c = it->second[static_cast<size_t>(j)];
        if (!drafter_->confidence_is_survival()) c = depth_calibration_.calibrated(j, c);
      } else if (depth_calibration_.observed(j)) {
        c = static_cast<float>(depth_calibration_.survival(j));
      }
      a *= std::clamp(c, 0.0f, 1.0f);
      survival[r].push_back(a);
    }
  }
  const int64_t base = static_cast<int64_t>(cands.size());
  // The drafts this step verifies are made already (the executor drafts after the step before,
  // while this plan is made): their cost is spent whatever is verified, so the budget weighs
  // only what verifying them costs (the step's extra rows). Charging it the drafting too made
  // it admit nothing where drafting pays: the probe then measured drafting's cost alone, a clear
  // loss by construction (stop 40, H100, MTP at 64 requests, k = 3: probes of 0.52-0.72x over
  // 3 steps that verified no draft, while a fixed k ran 1.21x; before it, DSpark at 64 requests
  // and MTP at 16 on the CPU, stop 38). Whether drafting pays at all, its cost included, is the
  // probes' question and the prediction's below.
  const std::vector<int32_t> chosen =
      sched::choose_verify_lengths(survival, base, base + spare, step_cost_);
  std::copy(chosen.begin(), chosen.end(), slots.begin());
  // The model says no verify length comes near paying for the drafting it needs (measured, with
  // the depths' observed survival): a failed probe without spending steps on it. Only a clear loss:
  // near parity the estimates (confidences, the curve, the drafting cost) are too rough to
  // overrule what the gain controller measures. (The 0.85 is a judgement, not a measurement.)
  // Not right after a predicted pause, nor while the latest measured probe paid: a prediction
  // never overrules a measurement (speculation_gain.h).
  // And only once verification has shown how often drafts survive (before that a depth's
  // survival is a guess of 0.5: stop 40, H100, MTP at 64 requests predicted 0.80x at plan 3).
  // A prediction judges a typical step, each depth at its observed survival, not this step's
  // confidences: a pause holds for 16 steps or more, and one step's confidences are too noisy
  // to decide that on (stop 40, H100, one request: predicted 0.67x at a request's start, where
  // probes measured 1.2-1.5x).
  constexpr double kClearPredictedLoss = 0.85;
  double best_ratio = 0;
  if (sched::SpeculationGain::may_predict_loss(g) && g.draft_cost > 0 &&
      depth_calibration_.observed(0)) {
    std::vector<float> depths;  // a typical request's survival by depth
    float t = 1.0f;
    for (int32_t j = 0; j < spec_tokens_; ++j) {
      t *= static_cast<float>(std::clamp(depth_calibration_.survival(j), 0.0, 1.0));
      depths.push_back(t);
    }
    std::vector<std::vector<float>> typical(cands.size());
    for (size_t r = 0; r < cands.size(); ++r) {
      const auto n = static_cast<size_t>(std::clamp<int32_t>(cands[r].max_slots, 0, spec_tokens_));
      typical[r].assign(depths.begin(), depths.begin() + static_cast<std::ptrdiff_t>(n));
    }
    sched::choose_verify_lengths(typical, base, base + spare, step_cost_, g.draft_cost,
                                 &best_ratio);
  }
  if (best_ratio > 0 && best_ratio < kClearPredictedLoss) {
    std::fill(slots.begin(), slots.end(), 0);
    gain_.predicted_loss(g, static_cast<double>(cands.size()), best_ratio);
    if (varlen_trace_ != nullptr) {
      varlen_trace_->predicted(gain_.step(), static_cast<int64_t>(cands.size()), best_ratio,
                               g.draft_cost);
    }
    draft_depth_ = 0;
    drafter_asleep_ = g.failed >= 2;
    return;
  }
  // Draft no deeper than the budget admits (+ 1, to keep measuring the next position).
  int32_t deepest = 0;
  for (const int32_t c : chosen) deepest = std::max(deepest, c);
  if (!cands.empty()) draft_depth_ = std::clamp(deepest + 1, 1, spec_tokens_);
}

void EngineCore::note_spec_results(const StepJob& job) {
  // The step's cost: a single forward's time for its rows (split steps mix several shapes).
  // Steps without drafts teach the curve what plain decoding costs.
  // A step that recorded CUDA graphs (a first run or a capture) costs what later steps of its
  // shape do not: measured at 2.4 ms against a 0.6-0.8 ms replay on an H100, it priced a verify
  // size out for good (the budget never admitted it again to measure it; stop 34).
  // A step without the drafter's context (DSpark asleep) is not what a drafting step costs.
  const bool context_off = drafter_->reads_draft_context() && !job.draft_context;
  if (job.forwards == 1 && job.fed_tokens > 0 && !job.recording_setup && !context_off)
    step_cost_.observe(job.fed_tokens, job.forward_seconds);
  update_gain(job);
  for (const Sampled& sm : job.sampled) {
    if (!sm.error.empty() || sm.tokens.empty()) continue;
    // Depth j was reached when the j - 1 drafts before it were accepted; accepted when it was.
    // The verified drafts' confidences are still the request's (replaced below by the next
    // proposal's).
    const auto accepted = static_cast<int32_t>(sm.tokens.size()) - 1;
    const auto conf = draft_confidence_.find(sm.id);
    for (int32_t j = 0; j < sm.drafts_verified && j <= accepted; ++j) {
      const float c = conf != draft_confidence_.end() &&
                              j < static_cast<int32_t>(conf->second.size())
                          ? conf->second[static_cast<size_t>(j)]
                          : -1.0f;
      depth_calibration_.observe(j, j < accepted, c);
    }
    if (!sm.next_confidence.empty()) {
      draft_confidence_[sm.id] = sm.next_confidence;
    } else if (sm.drafts_proposed > 0) {
      draft_confidence_.erase(sm.id);  // the depth rates stand in
    }
  }
}

}  // namespace deepinfer::runtime
