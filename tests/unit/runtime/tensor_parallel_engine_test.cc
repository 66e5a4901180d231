// The tensor-parallel engine (runtime/tensor_parallel_engine.h: EngineOptions::
// tensor_parallel_size) against the single-rank engine: 2 and 4 ranks on models/v4-small (V4),
// models/default (V4.1) and the tiny FP32 V4. Per request: the same tokens, text, finish reasons
// and logprobs, bit for bit (the model's tensor parallelism gives every rank the single-rank
// logits, docs/parallel.md). Requests: different prompt lengths and max_tokens, greedy and
// seeded sampling with logprobs, n = 2, EOS allowed, a stop id (engine_test::mixed_requests);
// submitted together and staggered; an
// unseeded request (the ranks share one engine seed, so they never diverge); a bad request.
// With --enable-expert-parallel beside it (the routed experts split over the same ranks): the
// same outputs again, on models/v4-small and models/default; and all three of tensor, data and
// expert parallelism (EPLB too) at 2 x 2 cores.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "engine_run_util.h"
#include "timed_run_util.h"

namespace deepinfer {
namespace {

using engine_test::EngineRun;
using engine_test::greedy;
using engine_test::prompt;
using engine_test::seeded;

EngineOptions options_for(const std::string& dir, int ranks, bool expert_parallel = false) {
  EngineOptions o;
  o.model_dir = dir;
  o.num_threads = 1;
  o.max_num_batched_tokens = 24;  // chunked prefills mixed with decodes
  o.tensor_parallel_size = ranks;
  o.enable_expert_parallel = expert_parallel;
  return o;
}

// expert_parallel: --enable-expert-parallel beside it (the routed experts split over the ranks).
void check_model(const std::string& dir, bool expert_parallel = false) {
  for (bool staggered : {false, true}) {
    const std::vector<engine_test::Timed> reqs = engine_test::mixed_requests(staggered);
    const EngineRun single = engine_test::run_timed(options_for(dir, 1), reqs);
    for (int ranks : {2, 4}) {
      SCOPED_TRACE(dir + ": " + std::to_string(ranks) + " ranks" +
                   (staggered ? ", staggered" : ", together") +
                   (expert_parallel ? ", expert parallel" : ""));
      const EngineRun got = engine_test::run_timed(options_for(dir, ranks, expert_parallel), reqs);
      engine_test::expect_same(single, got);
      EXPECT_NE(got.describe.find("tensor parallel: " + std::to_string(ranks) + " ranks"),
                std::string::npos)
          << got.describe;
      EXPECT_EQ(got.describe.find("routed experts split") != std::string::npos, expert_parallel)
          << got.describe;
    }
  }
}

TEST(TensorParallelEngine, V4SmallSameOutputsAsOneRank) {
  check_model(engine_test::source_dir() + "/models/v4-small");
}

TEST(TensorParallelEngine, V41DefaultSameOutputsAsOneRank) {
  check_model(engine_test::source_dir() + "/models/default");
}

TEST(TensorParallelEngine, TinyFp32SameOutputsAsOneRank) { check_model(engine_test::tiny_dir()); }

// Tensor parallelism inside data-parallel ranks (--data-parallel-size 2 --tensor-parallel-size
// 2, four cores): requests placed over the two ranks, each computed by its rank's two
// tensor-parallel cores; the same outputs as one engine.
TEST(TensorParallelEngine, InsideDataParallelRanksSameOutputsAsOneRank) {
  for (const std::string& dir : {engine_test::source_dir() + "/models/v4-small",
                                 engine_test::source_dir() + "/models/default"}) {
    for (bool staggered : {false, true}) {
      SCOPED_TRACE(dir + (staggered ? ", staggered" : ", together"));
      const std::vector<engine_test::Timed> reqs = engine_test::mixed_requests(staggered);
      const EngineRun single = engine_test::run_timed(options_for(dir, 1), reqs);
      EngineOptions o = options_for(dir, 2);
      o.data_parallel_size = 2;
      const EngineRun got = engine_test::run_timed(o, reqs);
      engine_test::expect_same(single, got);
      EXPECT_NE(got.describe.find("data parallel: 2 ranks"), std::string::npos) << got.describe;
      EXPECT_NE(got.describe.find("each rank 2 tensor-parallel ranks"), std::string::npos)
          << got.describe;
    }
  }
}

// All three (--data-parallel-size 2 --tensor-parallel-size 2 --enable-expert-parallel, four
// cores): each rank's two cores compute its requests, the routed experts are split over all four
// cores (each core exchanging its share of its rank's rows with every core), and a rank with
// nothing to do serves its experts through empty forwards. With EPLB too (rebalanced every 2
// steps over the four cores): the same outputs, experts moved.
TEST(TensorParallelEngine, InsideDataParallelRanksWithExpertParallelismSameOutputsAsOneRank) {
  for (const std::string& dir : {engine_test::source_dir() + "/models/v4-small",
                                 engine_test::source_dir() + "/models/default"}) {
    for (bool eplb : {false, true}) {
      for (bool staggered : {false, true}) {
        SCOPED_TRACE(dir + (staggered ? ", staggered" : ", together") + (eplb ? ", EPLB" : ""));
        const std::vector<engine_test::Timed> reqs = engine_test::mixed_requests(staggered);
        const EngineRun single = engine_test::run_timed(options_for(dir, 1), reqs);
        EngineOptions o = options_for(dir, 2, /*expert_parallel=*/true);
        o.data_parallel_size = 2;
        if (eplb) {
          o.enable_eplb = true;
          o.num_redundant_experts = 4;  // 12 slots over the 4 cores
          o.eplb_step_interval = 2;
        }
        const EngineRun got = engine_test::run_timed(o, reqs);
        engine_test::expect_same(single, got);
        EXPECT_NE(got.describe.find("each rank 2 tensor-parallel ranks"), std::string::npos)
            << got.describe;
        EXPECT_NE(got.describe.find("over all 4 cores"), std::string::npos) << got.describe;
        if (eplb) {
          EXPECT_GT(got.stats.eplb_rebalances, 0) << got.describe;
        }
      }
    }
  }
}

TEST(TensorParallelEngine, WithExpertParallelismSameOutputsAsOneRank) {
  check_model(engine_test::source_dir() + "/models/v4-small", /*expert_parallel=*/true);
  check_model(engine_test::source_dir() + "/models/default", /*expert_parallel=*/true);
}

// Unseeded sampling draws from the engine's seed: the ranks share rank 0's, so they sample the
// same tokens and never diverge; a request that fails (a token id outside the vocabulary) ends
// with its error, once, and the other goes on.
TEST(TensorParallelEngine, UnseededSamplingAndABadRequest) {
  // Alone, and inside two data-parallel ranks (each rank's copies share its seed).
  for (int dp : {1, 2}) {
    EngineOptions o = options_for(engine_test::source_dir() + "/models/v4-small", 2);
    o.data_parallel_size = dp;
    auto created = Engine::create(o);
    ASSERT_TRUE(created.ok()) << created.status().message();
    Engine& e = **created;
    SamplingParams p = greedy(8);
    p.temperature = 1.0f;
    auto h = e.submit(prompt(7, 3), p);
    ASSERT_TRUE(h.ok()) << h.status().message();
    const std::vector<int32_t> bad = {1, 2, 1 << 30};
    auto hb = e.submit(bad, greedy(3));
    ASSERT_TRUE(hb.ok()) << hb.status().message();
    std::map<RequestHandle, RequestOutput> done;
    while (e.has_unfinished()) {
      for (RequestOutput& out : e.step()) {
        const RequestHandle id = out.id;
        EXPECT_TRUE(done.emplace(id, std::move(out)).second) << "request " << id << " twice";
      }
    }
    ASSERT_EQ(done.size(), 2u);
    EXPECT_FALSE(done.at(*hb).error.empty());
    EXPECT_TRUE(done.at(*h).error.empty()) << done.at(*h).error;
    EXPECT_EQ(done.at(*h).outputs[0].token_ids.size(), 8u);
  }
}

}  // namespace
}  // namespace deepinfer
