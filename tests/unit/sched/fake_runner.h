// A stand-in for model runner + sampler + stop checker in scheduler tests: the token sampled
// after position p of request id is a fixed function of (id, p), so a request's output is the
// same whatever the batching, chunking or preemptions, and any token fed to the "model" can be
// checked against what it must be.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "sched/scheduler.h"

namespace deepinfer::sched::testing {

inline int32_t fake_token(RequestId id, int64_t pos) {
  return static_cast<int32_t>((id * 1000003 + pos * 7919) % 50021);
}

struct FakeRunner {
  std::map<RequestId, std::vector<int32_t>> prompts;
  std::map<RequestId, int64_t> max_out;  // kLength once this many outputs exist

  // `tell_limit`: pass the output limit to the scheduler (which then never plans past it);
  // without it a request whose last token is in flight is planned once more, in vain.
  Status submit(Scheduler& s, RequestId id, std::vector<int32_t> prompt, int64_t outputs,
                bool tell_limit = true) {
    prompts[id] = prompt;
    max_out[id] = outputs;
    return s.submit(id, std::move(prompt), tell_limit ? outputs : 0);
  }

  // Checks what the plan feeds against the request's true token stream, then "samples".
  StepResult run(const Scheduler& /*s*/, const StepPlan& plan) {
    StepResult out;
    for (const ScheduledRequest& sr : plan.requests) {
      const auto& prompt = prompts.at(sr.id);
      for (int32_t k = 0; k < sr.num_tokens; ++k) {
        const int64_t pos = sr.start_pos + k;
        const auto at = static_cast<size_t>(sr.token_offset + k);
        EXPECT_EQ(plan.positions[at], pos);
        const int32_t want = pos < static_cast<int64_t>(prompt.size())
                                 ? prompt[static_cast<size_t>(pos)]
                                 : fake_token(sr.id, pos);
        EXPECT_EQ(plan.token_ids[at], want) << "request " << sr.id << " position " << pos;
      }
      RequestResult rr;
      rr.id = sr.id;
      if (sr.needs_logits) {
        const int64_t next = sr.start_pos + sr.num_tokens;
        rr.tokens.push_back(fake_token(sr.id, next));
        // The sampled token is output number next - prompt + 1. Counted from the position, not
        // from the scheduler's request, whose outputs lag one step behind when planning is
        // asynchronous.
        const auto num_prompt = static_cast<int64_t>(prompt.size());
        if (next - num_prompt + 1 >= max_out.at(sr.id)) rr.finish = FinishReason::kLength;
      }
      out.requests.push_back(std::move(rr));
    }
    return out;
  }

  std::vector<int32_t> expected_output(RequestId id, int64_t n) const {
    std::vector<int32_t> o;
    const auto p = static_cast<int64_t>(prompts.at(id).size());
    for (int64_t j = 0; j < n; ++j) o.push_back(fake_token(id, p + j));
    return o;
  }
};

inline std::vector<int32_t> prompt_of(int64_t n, int32_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    p[static_cast<size_t>(i)] = static_cast<int32_t>((seed * 31 + i * 17) % 1000);
  return p;
}

}  // namespace deepinfer::sched::testing
