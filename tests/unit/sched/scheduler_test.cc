// Scheduler policy, case by case: chunked prefill, decode-first ordering under the token budget,
// the running cap, prefix hits, abort in every state, requests that can never run, the model's
// length limit, malformed step results, and a request too big for the pool on its own.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include "../kv/test_models.h"
#include "fake_runner.h"

namespace deepinfer::sched {
namespace {

using testing::FakeRunner;
using testing::prompt_of;

Scheduler make(int32_t blocks, int64_t budget, int32_t max_seqs = 64, int64_t max_len = 0,
               bool caching = true, const io::ModelConfig& m = testing_models::tiny(8)) {
  kv::KvConfig kc;
  kc.block_size = 8;
  kc.num_blocks = blocks;
  kc.enable_prefix_caching = caching;
  kc.max_rollback_tokens = 0;
  SchedulerConfig sc;
  sc.max_num_batched_tokens = budget;
  sc.max_num_seqs = max_seqs;
  sc.max_model_len = max_len;
  auto s = Scheduler::create(m, kc, sc);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return std::move(s).value();
}

// One schedule/run/update round; returns the plan.
StepPlan step(Scheduler& s, FakeRunner& fr) {
  StepPlan plan = s.schedule();
  const StepResult res = fr.run(s, plan);
  const Status st = s.update(plan, res);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return plan;
}

TEST(Scheduler, ChunkedPrefillCoversExactlyThePrompt) {
  Scheduler s = make(200, 32);
  FakeRunner fr;
  ASSERT_TRUE(fr.submit(s, 1, prompt_of(100, 1), 3).ok());
  const int64_t starts[] = {0, 32, 64, 96};
  const int32_t sizes[] = {32, 32, 32, 4};
  for (int i = 0; i < 4; ++i) {
    const StepPlan p = step(s, fr);
    ASSERT_EQ(p.requests.size(), 1u);
    EXPECT_EQ(p.requests[0].start_pos, starts[i]);
    EXPECT_EQ(p.requests[0].num_tokens, sizes[i]);
    EXPECT_EQ(p.requests[0].needs_logits, i == 3);
    EXPECT_EQ(p.requests[0].first_chunk, i == 0);
    EXPECT_FALSE(p.requests[0].is_decode);
  }
  const StepPlan d = step(s, fr);
  ASSERT_EQ(d.requests.size(), 1u);
  EXPECT_TRUE(d.requests[0].is_decode);
  EXPECT_EQ(d.requests[0].start_pos, 100);
  EXPECT_EQ(d.num_decodes, 1);
  step(s, fr);
  auto done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].reason, FinishReason::kLength);
  EXPECT_EQ(done[0].output, fr.expected_output(1, 3));
  EXPECT_EQ(s.kv().num_free_blocks(), 200);
}

TEST(Scheduler, DecodesFirstThenPrefillWithinTheBudget) {
  Scheduler s = make(200, 16);
  FakeRunner fr;
  ASSERT_TRUE(fr.submit(s, 1, prompt_of(5, 1), 10).ok());
  step(s, fr);  // 1 prefills and samples
  ASSERT_TRUE(fr.submit(s, 2, prompt_of(40, 2), 10).ok());
  const StepPlan p = step(s, fr);
  ASSERT_EQ(p.requests.size(), 2u);
  EXPECT_EQ(p.requests[0].id, 1);
  EXPECT_TRUE(p.requests[0].is_decode);
  EXPECT_EQ(p.requests[1].id, 2);
  EXPECT_EQ(p.requests[1].num_tokens, 15);  // what is left of the budget
  EXPECT_EQ(p.num_tokens(), 16);
  EXPECT_EQ(p.num_decodes, 1);
}

TEST(Scheduler, RunningCapHoldsBackNewRequests) {
  Scheduler s = make(200, 100, /*max_seqs=*/2);
  FakeRunner fr;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(fr.submit(s, i, prompt_of(4, i), 5).ok());
  const StepPlan p = step(s, fr);
  EXPECT_EQ(p.requests.size(), 2u);
  EXPECT_EQ(s.num_running(), 2u);
  EXPECT_EQ(s.num_waiting(), 1u);
}

TEST(Scheduler, PrefixHitSkipsCachedTokensAndRestoresState) {
  Scheduler s = make(200, 64);
  FakeRunner fr;
  const auto prompt = prompt_of(40, 5);
  ASSERT_TRUE(fr.submit(s, 1, prompt, 1).ok());
  step(s, fr);
  ASSERT_EQ(s.take_finished().size(), 1u);
  ASSERT_TRUE(fr.submit(s, 2, prompt, 1).ok());
  const StepPlan p = step(s, fr);
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_TRUE(p.requests[0].first_chunk);
  EXPECT_EQ(p.requests[0].num_prefix_hit, 32);
  EXPECT_EQ(p.requests[0].start_pos, 32);
  EXPECT_EQ(p.requests[0].num_tokens, 8);
  EXPECT_NE(p.requests[0].state_restore, kv::kNullBlock);
  EXPECT_EQ(p.requests[0].tables.groups[1].ids.size(), 5u);
  EXPECT_EQ(s.kv().prefix_stats().hit_tokens, 32);
  const auto done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].output, fr.expected_output(2, 1));
}

TEST(Scheduler, AbortWorksInEveryState) {
  // Each request needs 5 blocks for an 8-token prompt, 4 more at token 9: two fit, then the
  // older one's growth preempts the newer.
  Scheduler s = make(10, 100, 64, 0, /*caching=*/false);
  FakeRunner fr;
  ASSERT_TRUE(fr.submit(s, 1, prompt_of(8, 1), 50).ok());
  ASSERT_TRUE(fr.submit(s, 2, prompt_of(8, 2), 50).ok());
  ASSERT_TRUE(fr.submit(s, 3, prompt_of(8, 3), 50).ok());
  step(s, fr);  // 1 and 2 prefill; 3 waits (no blocks)
  EXPECT_EQ(s.find(3)->state, RequestState::kWaiting);
  ASSERT_TRUE(s.abort(3).ok());  // waiting
  const StepPlan p = step(s, fr);
  ASSERT_EQ(p.preempted, std::vector<RequestId>{2});
  EXPECT_EQ(s.find(2)->state, RequestState::kPreempted);
  EXPECT_EQ(s.find(2)->num_output(), 1);  // kept across the preemption
  ASSERT_TRUE(s.abort(2).ok());           // preempted
  // In flight: abort between schedule and update applies at update, results ignored.
  StepPlan q = s.schedule();
  ASSERT_EQ(q.requests.size(), 1u);
  ASSERT_TRUE(s.abort(1).ok());
  EXPECT_EQ(s.find(1)->state, RequestState::kRunning);
  ASSERT_TRUE(s.update(q, fr.run(s, q)).ok());
  EXPECT_EQ(s.find(1), nullptr);
  EXPECT_EQ(s.abort(1).code(), StatusCode::kNotFound);  // already ended
  auto done = s.take_finished();
  ASSERT_EQ(done.size(), 3u);
  for (const auto& f : done) EXPECT_EQ(f.state, RequestState::kAborted);
  EXPECT_EQ(s.kv().num_free_blocks(), 10);
  EXPECT_FALSE(s.has_unfinished());

  // Running, not in flight.
  ASSERT_TRUE(fr.submit(s, 4, prompt_of(8, 4), 50).ok());
  step(s, fr);
  EXPECT_EQ(s.find(4)->state, RequestState::kRunning);
  ASSERT_TRUE(s.abort(4).ok());
  EXPECT_EQ(s.kv().num_free_blocks(), 10);
  EXPECT_EQ(s.take_finished().at(0).reason, FinishReason::kAborted);
}

TEST(Scheduler, RequestsThatCanNeverRunFailWithAClearError) {
  Scheduler s = make(20, 64, 64, /*max_len=*/64);
  ASSERT_TRUE(s.submit(1, {}).ok());
  ASSERT_TRUE(s.submit(2, prompt_of(64, 2)).ok());
  ASSERT_TRUE(s.submit(3, prompt_of(63, 3)).ok());  // fits the length, not the 20-block pool
  ASSERT_TRUE(s.submit(4, prompt_of(4, 4)).ok());
  EXPECT_EQ(s.submit(4, prompt_of(4, 4)).code(), StatusCode::kInvalidArgument);  // duplicate
  auto done = s.take_finished();
  ASSERT_EQ(done.size(), 3u);
  for (const auto& f : done) EXPECT_EQ(f.state, RequestState::kFailed);
  EXPECT_NE(done[0].error.message().find("empty prompt"), std::string::npos);
  EXPECT_NE(done[1].error.message().find("max_model_len 64"), std::string::npos);
  EXPECT_EQ(done[2].error.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(done[2].error.message().find("KV blocks"), std::string::npos);
  EXPECT_EQ(s.num_waiting(), 1u);  // only the valid request 4 is queued
}

TEST(Scheduler, ModelLengthEndsARequest) {
  Scheduler s = make(200, 64, 64, /*max_len=*/20);
  FakeRunner fr;
  ASSERT_TRUE(fr.submit(s, 1, prompt_of(10, 1), 1000).ok());
  for (int i = 0; i < 30 && s.has_unfinished(); ++i) step(s, fr);
  auto done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].reason, FinishReason::kModelLength);
  EXPECT_EQ(done[0].output.size(), 10u);
}

TEST(Scheduler, UpdateRejectsResultsThatDoNotMatchThePlan) {
  Scheduler s = make(200, 64);
  FakeRunner fr;
  ASSERT_TRUE(fr.submit(s, 1, prompt_of(10, 1), 5).ok());
  StepPlan p = s.schedule();
  StepResult none;
  none.requests.push_back({1, {}, FinishReason::kNone});
  EXPECT_EQ(s.update(p, none).code(), StatusCode::kInvalidArgument);
  StepResult stranger = fr.run(s, p);
  stranger.requests.push_back({77, {}, FinishReason::kNone});
  EXPECT_EQ(s.update(p, stranger).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.update(p, fr.run(s, p)).ok());
  EXPECT_EQ(s.find(1)->num_output(), 1);
  EXPECT_EQ(s.update(p, fr.run(s, p)).code(), StatusCode::kFailedPrecondition);  // stale plan
}

TEST(Scheduler, RequestTooBigForThePoolAloneFailsInsteadOfLooping) {
  // 16 blocks: the 8-token prompt fits; every 8 tokens add 4 blocks, so outputs run out of room.
  Scheduler s = make(16, 64, 64, 0, /*caching=*/false);
  FakeRunner fr;
  ASSERT_TRUE(fr.submit(s, 1, prompt_of(8, 1), 1000).ok());
  int steps = 0;
  while (s.has_unfinished() && steps < 100) {
    step(s, fr);
    ++steps;
  }
  ASSERT_FALSE(s.has_unfinished());
  auto done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].state, RequestState::kFailed);
  EXPECT_EQ(done[0].error.code(), StatusCode::kResourceExhausted);
  EXPECT_GT(done[0].output.size(), 0u);
  EXPECT_EQ(s.kv().num_free_blocks(), 16);
}

TEST(Scheduler, CreateRejectsBadConfig) {
  kv::KvConfig kc;
  kc.block_size = 8;
  kc.num_blocks = 10;
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 0;
  auto s = Scheduler::create(testing_models::tiny(), kc, sc);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("max_num_batched_tokens"), std::string::npos);
  sc.max_num_batched_tokens = 8;
  kc.block_size = 12;  // not a multiple of ratio 8
  EXPECT_FALSE(Scheduler::create(testing_models::tiny(), kc, sc).ok());
}

}  // namespace
}  // namespace deepinfer::sched
