// EngineCore, the executor's side: one step's model forward and sampling (a StepJob). Runs on
// the StepExecutor (a worker thread with asynchronous scheduling) and touches only the job,
// the SeqExec states it holds, the model, the sampler and the scratch below; never the
// scheduler, the tokenizer or engine-thread state (see engine_core.h).
#include <algorithm>
#include <bit>
#include <chrono>

#include "runtime/engine_core.h"

namespace deepinfer::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// True when the mask allows at least one token and every allowed token is an EOS id: the
// grammar is complete and cannot continue, so the sample ends here.
bool only_eos_allowed(std::span<const uint32_t> mask, const std::vector<int32_t>& eos) {
  bool any = false;
  for (size_t w = 0; w < mask.size(); ++w) {
    uint32_t word = mask[w];
    while (word != 0) {
      const int bit = std::countr_zero(word);
      word &= word - 1;
      const auto id = static_cast<int32_t>(w * 32 + static_cast<size_t>(bit));
      if (std::find(eos.begin(), eos.end(), id) == eos.end()) return false;
      any = true;
    }
  }
  return any;
}

}  // namespace

void EngineCore::fill_mask(SeqExec& e) {
  const int32_t words = e.matcher->grammar().tokenizer().mask_words();
  // The tokenizer may know fewer ids than the model (extra ids stay disallowed) or more (ids
  // past the model's vocabulary cannot be sampled anyway).
  const size_t model_words = static_cast<size_t>((vocab_size() + 31) / 32);
  const size_t n = std::max(model_words, static_cast<size_t>(words));
  e.mask.assign(n, 0u);
  e.matcher->fill_next_token_bitmask(
      std::span<uint32_t>(e.mask.data(), static_cast<size_t>(words)));
  e.mask_ready = true;
}

void EngineCore::sample_one(sched::RequestId id, SeqExec& e, std::span<const float> row,
                            Sampled& out) {
  out.id = id;
  if (e.grammar_done) return;  // ended by its grammar in the previous step: this one is wasted
  const SamplingParams& params = *e.params;
  sample::SampleContext ctx;
  ctx.params = &params;
  ctx.key.seed = e.seed;
  ctx.key.position = static_cast<uint64_t>(e.num_sampled);
  ctx.key.sample_index = static_cast<uint32_t>(e.index);
  ctx.history = params.has_penalties() ? &e.history : nullptr;
  ctx.eos_token_ids = eos_;
  if (e.matcher) {
    if (!e.mask_ready) fill_mask(e);
    ctx.allowed_bitmask =
        std::span<const int32_t>(reinterpret_cast<const int32_t*>(e.mask.data()), e.mask.size());
  }
  auto r = sampler_.sample(row, ctx);
  if (!r.ok()) {
    out.error = "sampling failed: " + r.status().message();
    return;
  }
  const int32_t token = r->token;
  if (e.matcher) {
    e.mask_ready = false;
    if (!e.matcher->accept_token(token)) {
      // The sampler drew from the matcher's own mask, so a refusal is our bug.
      out.error = "internal: structured output refused token " + std::to_string(token) +
                  " that its mask allowed";
      return;
    }
    if (e.matcher->is_terminated()) {
      e.grammar_done = true;
    } else if (e.matcher->can_terminate()) {
      fill_mask(e);
      e.grammar_done = only_eos_allowed(e.mask, e.matcher->grammar().tokenizer().eos_ids());
    }
  }
  if (params.has_penalties()) e.history.add_output(token);
  ++e.num_sampled;
  out.has_token = true;
  out.token = token;
  out.grammar_done = e.grammar_done;
  if (r->has_logprobs) {
    TokenLogprobs lp;
    lp.token = token;
    lp.logprob = r->logprob;
    lp.rank = r->rank;
    for (const auto& t : r->top) lp.top.emplace_back(t.token, t.logprob);
    out.logprobs = std::move(lp);
  }
}

void EngineCore::execute(StepJob& job) {
  using model::deepseek_v4::LogitsWanted;
  job.started = Clock::now();
  for (const auto& e : job.drop_caches) e->cache.reset();  // recomputed from prompt + outputs
  const sched::StepPlan& plan = job.plan;
  spans_.clear();
  order_.clear();
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    const sched::ScheduledRequest& sr = plan.requests[i];
    SeqExec* e = job.seqs[i].get();
    if (e == nullptr) continue;
    if (!stand_in_forward_ && (sr.first_chunk || !e->cache)) {
      e->cache.emplace(model_.new_sequence());
    }
    if (!stand_in_forward_ && e->cache->length() != sr.start_pos) {
      // Only possible with a prefix hit (disabled) or a bookkeeping bug: never feed the model
      // positions that do not continue its cache.
      Sampled& s = job.sampled.emplace_back();
      s.id = sr.id;
      s.error = "internal: request cache holds " + std::to_string(e->cache->length()) +
                " tokens but the plan starts at " + std::to_string(sr.start_pos);
      continue;
    }
    model::deepseek_v4::SequenceSpan span;
    span.cache = e->cache ? &*e->cache : nullptr;
    span.begin = sr.token_offset;
    span.count = sr.num_tokens;
    span.logits = sr.needs_logits ? LogitsWanted::kLast : LogitsWanted::kNone;
    spans_.push_back(span);
    order_.push_back(i);
  }
  if (spans_.empty()) {
    job.finished = Clock::now();
    return;
  }
  // A request left out above leaves a gap in the rows; the model requires contiguous spans
  // that cover the step, so feed only the kept requests' rows (rare path: copy).
  std::vector<int32_t> ids, pos;
  std::span<const int32_t> ids_view = plan.token_ids, pos_view = plan.positions;
  if (order_.size() != plan.requests.size()) {
    int64_t at = 0;
    for (auto& span : spans_) {
      ids.insert(ids.end(), plan.token_ids.begin() + span.begin,
                 plan.token_ids.begin() + span.begin + span.count);
      pos.insert(pos.end(), plan.positions.begin() + span.begin,
                 plan.positions.begin() + span.begin + span.count);
      span.begin = at;
      at += span.count;
    }
    ids_view = ids;
    pos_view = pos;
  }
  model::deepseek_v4::StepInputs in;
  in.token_ids = ids_view;
  in.positions = pos_view;
  in.sequences = spans_;
  const auto t0 = Clock::now();
  const Status st =
      stand_in_forward_ ? stand_in_forward_(in, step_out_) : model_.forward(in, step_out_);
  job.forward_seconds = seconds_since(t0);
  if (!st.ok()) {
    for (const size_t i : order_) {
      job.seqs[i]->cache.reset();
      Sampled& s = job.sampled.emplace_back();
      s.id = plan.requests[i].id;
      s.error = "model forward failed: " + st.message();
    }
    job.finished = Clock::now();
    return;
  }
  const auto t1 = Clock::now();
  const int64_t V = model_.vocab_size();
  int64_t row = 0;
  for (size_t k = 0; k < order_.size(); ++k) {
    if (spans_[k].logits == LogitsWanted::kNone) continue;
    const std::span<const float> logits(step_out_.logits.data() + row * V, static_cast<size_t>(V));
    ++row;
    const size_t i = order_[k];
    sample_one(plan.requests[i].id, *job.seqs[i], logits, job.sampled.emplace_back());
  }
  job.sample_seconds = seconds_since(t1);
  job.finished = Clock::now();
}

}  // namespace deepinfer::runtime
