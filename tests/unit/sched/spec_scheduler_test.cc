// Speculative decoding in the scheduler: decodes carry draft slots, results bring runs of
// 1..slots + 1 accepted tokens, the KV rolls back by the rest. A fake runner keeps each
// request's true length (its "cache"), accepts a random prefix of the drafts, and checks what
// every plan feeds: the token at the true start (placeholders filled from the previous run),
// draft slots marked as such, optimistic start positions off by exactly the previous step's
// unaccepted slots. Randomized loops (sync and async, starved pools, aborts, prefix sharing,
// random budget policies) must end every request once with exactly the output it must have and
// leave the pool free.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <set>

#include "../kv/test_models.h"
#include "fake_runner.h"
#include "sched/scheduler.h"

namespace deepinfer::sched {
namespace {

using testing::fake_token;

struct SpecCase {
  int32_t block_size, num_blocks;
  int64_t budget;
  int32_t max_seqs, k;
  int num_requests;
  int64_t max_prompt, max_output;
  double abort_rate;
  bool random_policy;
  uint32_t seed;
};

void run_spec(const SpecCase& c, bool async) {
  SCOPED_TRACE(async ? "asynchronous scheduling" : "synchronous scheduling");
  kv::KvConfig kc;
  kc.block_size = c.block_size;
  kc.num_blocks = c.num_blocks;
  SchedulerConfig sc;
  sc.max_num_batched_tokens = c.budget;
  sc.max_num_seqs = c.max_seqs;
  sc.num_speculative_tokens = c.k;
  auto created = Scheduler::create(testing_models::tiny(8), kc, sc);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Scheduler s = std::move(created).value();
  std::mt19937 rng(c.seed);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  if (c.random_policy) {
    s.set_draft_budget([&](std::span<const DraftCandidate> cands, int64_t spare,
                           std::span<int32_t> slots) {
      for (size_t i = 0; i < cands.size(); ++i) {
        // Deliberately out of range sometimes: the scheduler clamps.
        slots[i] = static_cast<int32_t>(uni(-1, cands[i].max_slots + 1));
        if (spare <= 0) slots[i] = 0;
      }
    });
  }
  std::vector<std::vector<int32_t>> shared(2);
  for (size_t i = 0; i < shared.size(); ++i) {
    shared[i] = testing::prompt_of(uni(c.block_size, 2 * c.block_size), static_cast<int32_t>(i));
  }

  std::map<RequestId, std::vector<int32_t>> prompts;
  std::map<RequestId, int64_t> max_out;
  std::map<RequestId, int64_t> true_len;     // the runner's cache length per request
  std::map<RequestId, int64_t> last_unacc;   // unaccepted slots of its last verify step
  std::map<RequestId, int64_t> last_end;     // optimistic end of that step
  std::set<RequestId> aborted_by_us, ended_by_runner;
  std::map<RequestId, FinishedRequest> ended;
  RequestId next_id = 0;
  int64_t steps = 0, drafts_planned = 0, accepted_drafts = 0;
  std::optional<StepPlan> in_flight;
  StepResult in_flight_result;
  auto truth = [&](RequestId id, int64_t pos) {
    const auto& p = prompts.at(id);
    return pos < static_cast<int64_t>(p.size()) ? p[static_cast<size_t>(pos)] : fake_token(id, pos);
  };
  auto apply = [&](const StepPlan& plan, const StepResult& res) {
    const Status st = s.update(plan, res);
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (auto& f : s.take_finished()) {
      ASSERT_TRUE(ended.emplace(f.id, std::move(f)).second) << "request ended twice";
    }
    ASSERT_TRUE(s.kv().check_consistency().ok());
  };
  auto run = [&](const StepPlan& plan) {
    StepResult out;
    for (const ScheduledRequest& sr : plan.requests) {
      drafts_planned += sr.num_drafts;
      // Planned before the step that ended it was updated: a wasted step, its result dropped.
      if (ended_by_runner.count(sr.id) != 0) continue;
      int64_t start = sr.start_pos;
      if (sr.first_chunk) {
        true_len[sr.id] = sr.start_pos;
        last_unacc.erase(sr.id);
      } else if (last_unacc.count(sr.id) != 0 && sr.start_pos == last_end.at(sr.id) &&
                 last_unacc.at(sr.id) > 0) {
        start -= last_unacc.at(sr.id);  // planned before the previous verify's update
      }
      EXPECT_EQ(start, true_len.at(sr.id)) << "request " << sr.id;
      const int32_t fed = sr.num_tokens - sr.num_drafts;
      for (int32_t k = 0; k < sr.num_tokens; ++k) {
        const auto at = static_cast<size_t>(sr.token_offset + k);
        if (k >= fed) {
          EXPECT_EQ(plan.token_ids[at], kDraftSlot);
          continue;
        }
        EXPECT_EQ(plan.token_ids[at], truth(sr.id, start + k)) << "request " << sr.id;
      }
      RequestResult rr;
      rr.id = sr.id;
      // Feeds its real tokens and the first `good` drafts right, the rest wrong.
      const int64_t good = sr.num_drafts > 0 ? uni(0, sr.num_drafts) : 0;
      if (sr.needs_logits) {
        const int64_t run_len = 1 + good;
        for (int64_t j = 0; j < run_len; ++j) rr.tokens.push_back(truth(sr.id, start + fed + j));
        const int64_t outputs_after = start + fed + run_len - static_cast<int64_t>(prompts.at(sr.id).size());
        if (outputs_after >= max_out.at(sr.id)) {
          rr.tokens.resize(rr.tokens.size() - static_cast<size_t>(outputs_after - max_out.at(sr.id)));
          rr.finish = FinishReason::kLength;
          ended_by_runner.insert(sr.id);
        }
        accepted_drafts += good;
      }
      true_len[sr.id] = start + fed + (sr.num_drafts > 0 ? good : 0);
      last_unacc[sr.id] = sr.num_drafts - good;
      // A plan made before this step's update (and after the previous one's) continues from
      // its true start, optimistically past every slot.
      last_end[sr.id] = start + sr.num_tokens;
      out.requests.push_back(std::move(rr));
    }
    return out;
  };

  const int64_t step_limit = 100000;
  while ((next_id < c.num_requests || s.has_unfinished() || in_flight) && steps < step_limit) {
    for (int64_t k = uni(0, 2); k > 0 && next_id < c.num_requests; --k) {
      std::vector<int32_t> prompt;
      if (uni(0, 1) == 1) prompt = shared[static_cast<size_t>(uni(0, 1))];
      const int64_t len = uni(1, c.max_prompt);
      while (static_cast<int64_t>(prompt.size()) < len) prompt.push_back(static_cast<int32_t>(uni(0, 999)));
      const int64_t outputs = uni(1, c.max_output);
      prompts[next_id] = prompt;
      max_out[next_id] = outputs;
      ASSERT_TRUE(s.submit(next_id, prompt, uni(0, 1) == 1 ? outputs : 0).ok());
      if (uni(0, 3) == 0) s.set_max_drafts(next_id, static_cast<int32_t>(uni(0, c.k)));
      ++next_id;
    }
    StepPlan plan = s.schedule();
    ++steps;
    ASSERT_LE(plan.num_tokens(), c.budget);
    for (const ScheduledRequest& sr : plan.requests) {
      ASSERT_LE(sr.num_drafts, c.k);
      if (sr.num_drafts > 0) {
        ASSERT_TRUE(sr.is_decode);
      }
    }
    if (in_flight) {
      const std::vector<RequestId> unfilled = fill_placeholders(plan, in_flight_result);
      EXPECT_TRUE(unfilled.empty());
    }

    StepResult res = run(plan);
    if (c.abort_rate > 0 && !plan.requests.empty() &&
        std::uniform_real_distribution<double>(0, 1)(rng) < c.abort_rate) {
      const RequestId victim = uni(0, next_id - 1);
      if (s.abort(victim).ok()) aborted_by_us.insert(victim);
    }
    if (!async) {
      apply(plan, res);
      continue;
    }
    if (in_flight) apply(*in_flight, in_flight_result);
    if (plan.empty()) {
      in_flight.reset();
    } else {
      in_flight = std::move(plan);
      in_flight_result = std::move(res);
    }
  }
  ASSERT_LT(steps, step_limit) << "no progress";
  ASSERT_EQ(static_cast<int64_t>(ended.size()), c.num_requests);
  for (const auto& [id, f] : ended) {
    if (aborted_by_us.count(id) != 0) continue;
    ASSERT_EQ(f.state, RequestState::kFinished) << "request " << id << ": " << f.error.to_string();
    std::vector<int32_t> want;
    const auto p = static_cast<int64_t>(prompts.at(id).size());
    for (int64_t j = 0; j < max_out.at(id); ++j) want.push_back(fake_token(id, p + j));
    EXPECT_EQ(f.output, want) << "request " << id;
  }
  EXPECT_EQ(s.kv().num_free_blocks(), c.num_blocks);
  EXPECT_GT(drafts_planned, 0);
  EXPECT_GT(accepted_drafts, 0);
  EXPECT_EQ(s.stats().draft_slots, drafts_planned);
  EXPECT_GT(s.stats().rolled_back, 0);
}

TEST(SpecScheduler, RunsOfAcceptedTokensRollBackTheRest) {
  for (const bool async : {false, true}) {
    run_spec({8, 400, 64, 8, 5, 40, 30, 40, 0.0, false, 3u}, async);
  }
}

TEST(SpecScheduler, StarvedPoolAbortsAndARandomBudgetPolicy) {
  for (const bool async : {false, true}) {
    run_spec({8, 48, 24, 6, 7, 60, 40, 30, 0.1, true, 9u}, async);
  }
}

TEST(SpecScheduler, DraftsNeverPlanPastTheOutputLimitOrModelLength) {
  kv::KvConfig kc;
  kc.block_size = 8;
  kc.num_blocks = 64;
  SchedulerConfig sc;
  sc.num_speculative_tokens = 6;
  sc.max_model_len = 12;
  auto s = Scheduler::create(testing_models::tiny(8), kc, sc);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->submit(1, {1, 2, 3, 4}, 3).ok());    // 3 outputs
  ASSERT_TRUE(s->submit(2, {1, 2, 3, 4, 5, 6, 7, 8, 9}, 0).ok());  // 3 left before max_model_len
  StepPlan p = s->schedule();  // prefills
  StepResult r;
  r.requests.push_back({1, {50}, FinishReason::kNone});
  r.requests.push_back({2, {60}, FinishReason::kNone});
  ASSERT_TRUE(s->update(p, r).ok());
  p = s->schedule();
  ASSERT_EQ(p.requests.size(), 2u);
  for (const ScheduledRequest& sr : p.requests) {
    // Request 1 may sample 2 more outputs: 1 + 1 slot; request 2 is at 10 of 12 tokens: 1 + 1.
    EXPECT_EQ(sr.num_drafts, 1) << "request " << sr.id;
    EXPECT_EQ(p.token_ids[static_cast<size_t>(sr.token_offset + 1)], kDraftSlot);
  }
  // A run longer than 1 + slots is refused, and nothing is applied.
  StepResult bad;
  bad.requests.push_back({1, {1, 2, 3}, FinishReason::kNone});
  bad.requests.push_back({2, {1}, FinishReason::kNone});
  EXPECT_FALSE(s->update(p, bad).ok());
}

}  // namespace
}  // namespace deepinfer::sched
