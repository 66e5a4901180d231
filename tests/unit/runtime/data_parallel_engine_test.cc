// The data-parallel engine (runtime/data_parallel_engine.h: EngineOptions::data_parallel_size,
// enable_expert_parallel) against the single-rank engine: 1, 2 and 4 ranks, with and without
// expert parallelism, on models/v4-small (V4), models/default (V4.1) and the tiny FP32 V4.
// What is asserted, per request: the same tokens, text, finish and stop reasons and logprobs,
// bit for bit (EngineRun / expect_same). That holds because a request's rows are computed
// independently of the rows beside them on the CPU backends (batch invariance), and expert
// parallelism gives every token the single-rank bits (docs/parallel.md), so which rank a request
// runs on, with whom, and when, changes nothing. Requests: different prompt lengths and
// max_tokens, greedy and seeded sampling with logprobs, n = 2, stop ids, EOS allowed; submitted
// together and staggered over steps; an abort; failing requests among running ones.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/engine.h"
#include "engine_run_util.h"
#include "timed_run_util.h"

namespace deepinfer {
namespace {

using engine_test::EngineRun;
using engine_test::greedy;
using engine_test::mixed_requests;
using engine_test::options_for;
using engine_test::prompt;
using engine_test::run_timed;
using engine_test::Timed;

void check_model(const std::string& dir) {
  for (bool staggered : {false, true}) {
    std::vector<Timed> reqs = mixed_requests(staggered);
    const EngineRun single = run_timed(options_for(dir, 1, false), reqs);
    // Request 8 stops at request 0's second greedy token (a stop id, not a length finish).
    const auto& first = single.outputs.at(single.handles[0]).outputs.at(0).token_ids;
    ASSERT_GE(first.size(), 2u);
    reqs[8].req.params.stop_token_ids = {first[1]};
    const EngineRun with_stop = run_timed(options_for(dir, 1, false), reqs);
    EXPECT_EQ(with_stop.outputs.at(with_stop.handles[8]).outputs[0].finish_reason, "stop");
    for (int ranks : {2, 4}) {
      for (bool ep : {false, true}) {
        SCOPED_TRACE(dir + ": " + std::to_string(ranks) + " ranks, expert parallel " +
                     (ep ? "on" : "off") + (staggered ? ", staggered" : ", together"));
        const EngineRun got = run_timed(options_for(dir, ranks, ep), reqs);
        engine_test::expect_same(with_stop, got);
        EXPECT_NE(got.describe.find("data parallel: " + std::to_string(ranks) + " ranks"),
                  std::string::npos)
            << got.describe;
      }
    }
  }
}

TEST(DataParallelEngine, V4SmallSameOutputsAsOneRank) {
  check_model(engine_test::source_dir() + "/models/v4-small");
}

TEST(DataParallelEngine, V41DefaultSameOutputsAsOneRank) {
  check_model(engine_test::source_dir() + "/models/default");
}

TEST(DataParallelEngine, TinyFp32SameOutputsAsOneRank) { check_model(engine_test::tiny_dir()); }

// One rank's expert parallelism changes nothing either (every expert is local).
TEST(DataParallelEngine, OneRankWithExpertParallelIsTheSingleEngine) {
  const std::string dir = engine_test::source_dir() + "/models/v4-small";
  const auto reqs = mixed_requests(false);
  engine_test::expect_same(run_timed(options_for(dir, 1, false), reqs),
                           run_timed(options_for(dir, 1, true), reqs));
}

// An abort of a request on one rank while the others run: it ends as "abort" after at least the
// tokens streamed before it, and every other request is the single rank's.
TEST(DataParallelEngine, AbortOnOneRankLeavesTheOthers) {
  const std::string dir = engine_test::source_dir() + "/models/v4-small";
  for (bool ep : {false, true}) {
    std::vector<Timed> reqs = mixed_requests(false);
    for (Timed& t : reqs) t.req.params.max_tokens = 12;
    const EngineRun single = run_timed(options_for(dir, 1, false), reqs);
    reqs[3].req.abort_after = 2;
    const EngineRun got = run_timed(options_for(dir, 4, ep), reqs);
    ASSERT_EQ(got.outputs.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      const RequestOutput& a = single.outputs.at(single.handles[i]);
      const RequestOutput& b = got.outputs.at(got.handles[i]);
      if (i == 3) {
        EXPECT_EQ(b.outputs[0].finish_reason, "abort");
        ASSERT_GE(b.outputs[0].token_ids.size(), 2u);
        EXPECT_LT(b.outputs[0].token_ids.size(), 12u);
        // What it produced before the abort is the single rank's prefix.
        EXPECT_TRUE(std::equal(b.outputs[0].token_ids.begin(), b.outputs[0].token_ids.end(),
                               a.outputs[0].token_ids.begin()));
        continue;
      }
      ASSERT_EQ(a.outputs.size(), b.outputs.size());
      for (size_t k = 0; k < a.outputs.size(); ++k) {
        EXPECT_EQ(a.outputs[k].token_ids, b.outputs[k].token_ids) << "request " << i;
      }
    }
  }
}

// Prefix-aware placement: a prompt that extends one a rank has cached goes to that rank while
// its load is near the least (sched::place_request), and reuses the prefix there. A and C run
// first (rank 0 and rank 1); then E takes rank 0, so the least loaded rank is 1, yet B, A's
// prompt and 4 more tokens, goes to rank 0 and skips A's cached blocks. Its tokens are still
// the single engine's (placement changes nothing in the outputs).
TEST(DataParallelEngine, APromptGoesToTheRankThatCachedItsPrefix) {
  const std::string dir = engine_test::source_dir() + "/models/v4-small";
  EngineOptions o = options_for(dir, 2, false);
  o.kv_block_size = 16;
  auto engine = Engine::create(o);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const std::vector<int32_t> a = prompt(40, 101), c = prompt(40, 202), e = prompt(8, 303);
  std::vector<int32_t> b = a;
  for (int32_t t : prompt(4, 404)) b.push_back(t);
  ASSERT_TRUE((*engine)->submit(a, greedy(4)).ok());
  ASSERT_TRUE((*engine)->submit(c, greedy(4)).ok());
  (void)(*engine)->run_until_done();
  ASSERT_TRUE((*engine)->submit(e, greedy(8)).ok());
  auto hb = (*engine)->submit(b, greedy(4));
  ASSERT_TRUE(hb.ok());
  RequestOutput got_b;
  for (const RequestOutput& out : (*engine)->run_until_done()) {
    if (out.id == *hb) got_b = out;
  }
  EXPECT_EQ(got_b.num_cached_tokens, 32) << "B did not reuse A's two cached blocks";

  EngineOptions one = options_for(dir, 1, false);
  one.kv_block_size = 16;
  auto single = Engine::create(one);
  ASSERT_TRUE(single.ok());
  auto hs = (*single)->submit(b, greedy(4));
  ASSERT_TRUE(hs.ok());
  const std::vector<RequestOutput> want = (*single)->run_until_done();
  ASSERT_EQ(want.size(), 1u);
  ASSERT_FALSE(got_b.outputs.empty());
  EXPECT_EQ(got_b.outputs[0].token_ids, want[0].outputs[0].token_ids);
}

// Requests that fail on their rank (a prompt longer than max_model_len, a token id outside the
// vocabulary) answer with their error; the requests running beside them finish as on one rank.
TEST(DataParallelEngine, FailingRequestsAnswerAndTheOthersFinish) {
  const std::string dir = engine_test::source_dir() + "/models/default";
  for (bool ep : {false, true}) {
    std::vector<Timed> reqs = mixed_requests(true);
    Timed too_long;
    too_long.req.ids = prompt(80, 7);
    too_long.req.params = greedy(4);
    too_long.at_step = 3;
    Timed bad_id;
    bad_id.req.ids = {5, 1 << 30, 6};
    bad_id.req.params = greedy(4);
    bad_id.at_step = 1;
    reqs.push_back(too_long);
    reqs.push_back(bad_id);
    EngineOptions one = options_for(dir, 1, false);
    one.max_model_len = 64;
    EngineOptions four = options_for(dir, 4, ep);
    four.max_model_len = 64;
    const EngineRun single = run_timed(one, reqs);
    const EngineRun got = run_timed(four, reqs);
    ASSERT_EQ(got.outputs.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      const RequestOutput& a = single.outputs.at(single.handles[i]);
      const RequestOutput& b = got.outputs.at(got.handles[i]);
      // The scheduler's messages name its own sequence id, which is per rank: compare the
      // errors' presence, and everything else exactly.
      EXPECT_EQ(a.error.empty(), b.error.empty()) << "request " << i;
      ASSERT_EQ(a.outputs.size(), b.outputs.size());
      for (size_t k = 0; k < a.outputs.size(); ++k) {
        EXPECT_EQ(a.outputs[k].token_ids, b.outputs[k].token_ids) << "request " << i;
        EXPECT_EQ(a.outputs[k].finish_reason, b.outputs[k].finish_reason) << "request " << i;
      }
    }
    const RequestOutput& long_out = got.outputs.at(got.handles[reqs.size() - 2]);
    EXPECT_NE(long_out.error.find("max_model_len"), std::string::npos) << long_out.error;
    EXPECT_EQ(long_out.outputs[0].finish_reason, "error");
    const RequestOutput& bad_out = got.outputs.at(got.handles[reqs.size() - 1]);
    EXPECT_NE(bad_out.error.find("vocabulary"), std::string::npos) << bad_out.error;
  }
}

}  // namespace
}  // namespace deepinfer
