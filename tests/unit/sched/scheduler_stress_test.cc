// Randomized engine loops with a fixed seed: requests arrive over time with shared prefixes,
// random prompt and output lengths, and random aborts, into a pool small enough to force
// preemptions. Every step is checked (token budget, running cap, decodes first, chunks that
// continue exactly where the KV ends, the right token at every position) and at the end every
// request has ended exactly once with the output it must have, within a bounded number of
// steps, and the pool is entirely free. Every case runs twice: the synchronous loop, and the
// asynchronous one (plan N+1 before N's update, placeholders filled from N's tokens).
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

struct StressCase {
  io::ModelConfig model;
  int32_t block_size;
  int32_t num_blocks;
  int64_t budget;
  int32_t max_seqs;
  int num_requests;
  int64_t max_prompt;
  int64_t max_output;
  double abort_rate;
  uint32_t seed;
};

void run_stress(const StressCase& c, bool expect_preemption, bool async) {
  SCOPED_TRACE(async ? "asynchronous scheduling" : "synchronous scheduling");
  kv::KvConfig kc;
  kc.block_size = c.block_size;
  kc.num_blocks = c.num_blocks;
  SchedulerConfig sc;
  sc.max_num_batched_tokens = c.budget;
  sc.max_num_seqs = c.max_seqs;
  auto created = Scheduler::create(c.model, kc, sc);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Scheduler s = std::move(created).value();
  testing::FakeRunner fr;
  std::mt19937 rng(c.seed);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<std::vector<int32_t>> shared(3);
  for (size_t i = 0; i < shared.size(); ++i) {
    shared[i] = testing::prompt_of(uni(c.block_size, 2 * c.block_size), static_cast<int32_t>(i));
  }

  RequestId next_id = 0;
  std::map<RequestId, int64_t> next_start;  // where the next chunk must start
  std::set<RequestId> aborted_by_us;
  std::map<RequestId, FinishedRequest> ended;
  int64_t steps = 0;
  int64_t placeholders_fed = 0;
  const int64_t step_limit = 200000;
  // Asynchronous loop: the plan whose result is computed but not yet applied by update().
  std::optional<StepPlan> in_flight;
  StepResult in_flight_result;
  auto apply = [&](const StepPlan& plan, const StepResult& res) {
    const Status st = s.update(plan, res);
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (auto& f : s.take_finished()) {
      next_start.erase(f.id);
      ASSERT_TRUE(ended.emplace(f.id, std::move(f)).second) << "request ended twice";
    }
    ASSERT_TRUE(s.kv().check_consistency().ok());
  };
  while ((next_id < c.num_requests || s.has_unfinished() || in_flight) && steps < step_limit) {
    // Arrivals: a few per step until all are submitted.
    for (int64_t k = uni(0, 2); k > 0 && next_id < c.num_requests; --k) {
      std::vector<int32_t> prompt;
      if (uni(0, 1) == 1) prompt = shared[static_cast<size_t>(uni(0, 2))];
      const int64_t len = uni(1, c.max_prompt);
      while (static_cast<int64_t>(prompt.size()) < len) {
        prompt.push_back(static_cast<int32_t>(uni(0, 999)));
      }
      const int64_t outputs = uni(1, c.max_output);
      ASSERT_TRUE(fr.submit(s, next_id, prompt, outputs, /*tell_limit=*/uni(0, 1) == 1).ok());
      ++next_id;
    }
    StepPlan plan = s.schedule();
    ++steps;
    ASSERT_LE(plan.num_tokens(), c.budget);
    ASSERT_LE(static_cast<int64_t>(plan.requests.size()), c.max_seqs);
    ASSERT_LE(static_cast<int64_t>(s.num_running()), c.max_seqs);
    for (const RequestId id : plan.preempted) next_start.erase(id);
    std::set<RequestId> seen;
    for (size_t i = 0; i < plan.requests.size(); ++i) {
      const ScheduledRequest& sr = plan.requests[i];
      ASSERT_TRUE(seen.insert(sr.id).second);
      ASSERT_EQ(sr.is_decode, static_cast<int32_t>(i) < plan.num_decodes);
      ASSERT_GT(sr.num_tokens, 0);
      if (sr.first_chunk) {
        ASSERT_EQ(next_start.count(sr.id), 0u);
        ASSERT_EQ(sr.start_pos, sr.num_prefix_hit);
        ASSERT_EQ(sr.num_prefix_hit % c.block_size, 0);
      } else {
        ASSERT_EQ(sr.start_pos, next_start.at(sr.id));
      }
      next_start[sr.id] = sr.start_pos + sr.num_tokens;
      // Full groups cover every token the step writes.
      const int64_t want_blocks = (sr.start_pos + sr.num_tokens + c.block_size - 1) / c.block_size;
      ASSERT_EQ(static_cast<int64_t>(sr.tables.groups[1].ids.size()), want_blocks);
    }
    for (const ScheduledRequest& sr : plan.requests) placeholders_fed += sr.num_placeholders;
    if (in_flight) {
      // The previous step has "run": its tokens go into this plan's placeholders. The fake
      // runner samples for every request, so none may be left unfilled.
      EXPECT_TRUE(fill_placeholders(plan, in_flight_result).empty());
    } else {
      for (const ScheduledRequest& sr : plan.requests) ASSERT_EQ(sr.num_placeholders, 0);
    }
    StepResult res = fr.run(s, plan);  // checks every fed token, placeholders included
    // Random aborts, some while the request is in flight.
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
  ASSERT_LT(steps, step_limit) << "no progress: scheduler deadlocked or livelocked";
  ASSERT_EQ(static_cast<int64_t>(ended.size()), c.num_requests);  // none lost
  int64_t completed = 0;
  for (const auto& [id, f] : ended) {
    if (aborted_by_us.count(id) != 0) {
      EXPECT_EQ(f.state, RequestState::kAborted);
      continue;
    }
    ASSERT_EQ(f.state, RequestState::kFinished) << "request " << id << ": " << f.error.to_string();
    EXPECT_EQ(f.reason, FinishReason::kLength);
    EXPECT_EQ(f.output, fr.expected_output(id, fr.max_out.at(id))) << "request " << id;
    ++completed;
  }
  EXPECT_GT(completed, c.num_requests / 2);
  EXPECT_EQ(s.kv().num_free_blocks(), c.num_blocks);
  if (expect_preemption) {
    EXPECT_GT(s.stats().preemptions, 0);
  }
  EXPECT_GT(s.kv().prefix_stats().hit_tokens, 0);
  // The asynchronous loop really planned ahead: decodes fed a token not sampled yet.
  EXPECT_EQ(placeholders_fed > 0, async);
  std::printf("  steps %lld, preemptions %lld, prefix hit rate %.3f, saved prefill tokens %lld\n",
              static_cast<long long>(steps), static_cast<long long>(s.stats().preemptions),
              s.kv().prefix_stats().hit_rate(),
              static_cast<long long>(s.kv().prefix_stats().hit_tokens));
}

TEST(SchedulerStress, StarvedPoolTinyModelEveryRequestEnds) {
  // 40 blocks hold about two 60-token requests; 60 requests of up to 60 + 40 tokens.
  for (const bool async : {false, true}) {
    run_stress({testing_models::tiny(8), 8, 40, 16, 8, 60, 60, 40, 0.0, 11u}, true, async);
  }
}

TEST(SchedulerStress, StarvedPoolWithAbortsAnywhere) {
  for (const bool async : {false, true}) {
    run_stress({testing_models::tiny(8), 8, 48, 24, 6, 80, 50, 30, 0.15, 5u}, true, async);
  }
}

TEST(SchedulerStress, RoomyPoolBigBatch) {
  for (const bool async : {false, true}) {
    run_stress({testing_models::tiny(16), 16, 2000, 256, 64, 200, 120, 30, 0.02, 3u}, false, async);
  }
}

TEST(SchedulerStress, V4FlashShapedStarved) {
  for (const bool async : {false, true}) {
    run_stress({testing_models::v4_flash_shaped(), 256, 90, 512, 16, 40, 3000, 60, 0.05, 17u}, true,
               async);
  }
}

}  // namespace
}  // namespace deepinfer::sched
