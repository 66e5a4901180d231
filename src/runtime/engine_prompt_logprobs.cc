// EngineCore, the executor's side of SamplingParams::prompt_logprobs (vLLM's name): the logprob,
// rank and top alternatives of every prompt token after the first, from the logits rows of the
// prompt's own forward (LogitsWanted::kAll for the request's prefill pieces). Kept apart from
// engine_exec.cc, which only asks for the rows and hands them here.
//
// Choices: a prefix-cache hit is recomputed instead of restored for such a request (the cached
// state has no logits), as vLLM also skips the prefix cache for prompt logprobs; a request
// preempted and recomputed is scored once (SeqExec::prompt_lp_next survives preemption); the
// logprobs come from the raw logits, as the sampled tokens' do (sample/logprobs.h).
#include "runtime/engine_core.h"
#include "sample/logprobs.h"

namespace deepinfer::runtime {

bool EngineCore::wants_prompt_logprobs(const SeqExec& e) {
  return e.params->prompt_logprobs.has_value() && e.prompt_lp_next < e.prompt_len;
}

int64_t EngineCore::score_prompt_rows(SeqExec& e, int64_t pos, int64_t count, const float* logits,
                                      int64_t row, bool last_sampled) {
  const int64_t V = vocab_size();
  const int32_t top = e.params->prompt_logprobs.value_or(0);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t target = pos + i + 1;  // row pos + i predicts the token at pos + i + 1
    if (target != e.prompt_lp_next || target >= e.prompt_len) continue;
    const std::span<const float> r(logits + (row + i) * V, static_cast<size_t>(V));
    const int32_t token = e.known[static_cast<size_t>(target)];
    const double lse = sample::log_sum_exp(r);
    TokenLogprobs lp;
    lp.token = token;
    lp.logprob = sample::logprob_of(r, token, lse);
    lp.rank = sample::logprob_rank(r, token);
    for (const sample::TokenLogprob& t : sample::top_logprobs(r, top, lse)) {
      lp.top.emplace_back(t.token, t.logprob);
    }
    e.prompt_lps.push_back(std::move(lp));
    ++e.prompt_lp_next;
  }
  return row + count - (last_sampled ? 1 : 0);
}

void EngineCore::hand_over_prompt_logprobs(StepJob& job) {
  for (size_t i = 0; i < job.seqs.size(); ++i) {
    SeqExec* e = job.seqs[i].get();
    if (e == nullptr || e->prompt_lps.empty()) continue;
    Sampled& s = job.sampled.emplace_back();
    s.id = job.plan.requests[i].id;
    s.prompt_logprobs = std::move(e->prompt_lps);
    e->prompt_lps.clear();
  }
}

}  // namespace deepinfer::runtime
