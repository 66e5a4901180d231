// EPLB in the data-parallel engine (EngineOptions::enable_eplb; runtime/expert_rebalancer.h,
// DataParallelEngine::rebalance_experts): experts re-placed while requests run, by period and by
// command, on models/v4-small (V4) and models/default (V4.1), 2 and 4 ranks with expert
// parallelism. What is asserted: every request's tokens, text, finish reasons and logprobs are
// bit for bit the single engine's and expert parallelism's without EPLB (replicas hold the same
// weights, and the exchange sums a token's experts in a fixed order, so neither where an expert
// lives nor which copy serves a pair changes a bit); after a rebalance each rank holds exactly
// the experts the plan gives it (WeightStats); a skewed counted load gives a better-balanced
// plan; the EPLB options are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine_run_util.h"
#include "io/model_config.h"
#include "runtime/data_parallel_engine.h"
#include "runtime/expert_rebalancer.h"
#include "timed_run_util.h"

namespace deepinfer {
namespace {

using engine_test::EngineRun;
using engine_test::Timed;

std::string v4_small() { return engine_test::source_dir() + "/models/v4-small"; }

// Both test models have 8 routed experts: `ranks` redundant ones make 8 + ranks slots, a
// multiple of 2 and of 4.
EngineOptions eplb_options(const std::string& dir, int ranks, int interval, int window) {
  EngineOptions o = engine_test::options_for(dir, ranks, true);
  o.enable_eplb = true;
  o.num_redundant_experts = ranks;
  o.eplb_step_interval = interval;
  o.eplb_window_size = window;
  return o;
}

// The mixed requests, staggered, two of them long enough to run through several rebalances.
std::vector<Timed> long_requests() {
  std::vector<Timed> reqs = engine_test::mixed_requests(true);
  reqs[1].req.params.max_tokens = 18;
  reqs[4].req.params.max_tokens = 16;
  return reqs;
}

void check_periodic(const std::string& dir) {
  const std::vector<Timed> reqs = long_requests();
  const EngineRun single = engine_test::run_timed(engine_test::options_for(dir, 1, false), reqs);
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(dir + ": " + std::to_string(ranks) + " ranks");
    const EngineRun ep = engine_test::run_timed(engine_test::options_for(dir, ranks, true), reqs);
    engine_test::expect_same(single, ep);
    // A rebalance every 2 steps from the last 3 steps' loads.
    const EngineRun got = engine_test::run_timed(eplb_options(dir, ranks, 2, 3), reqs);
    engine_test::expect_same(single, got);
    engine_test::expect_same(ep, got);
    EXPECT_GE(got.stats.eplb_rebalances, 4);
    EXPECT_GT(got.stats.eplb_experts_bound, 0) << "no rebalance moved an expert";
    EXPECT_GE(got.stats.eplb_balance_before, 1.0);
    EXPECT_GE(got.stats.eplb_balance_after, 1.0);
    EXPECT_NE(got.describe.find("placed by EPLB"), std::string::npos) << got.describe;
  }
}

TEST(EplbEngine, V4SmallPeriodicRebalancesKeepOutputs) { check_periodic(v4_small()); }

TEST(EplbEngine, V41DefaultPeriodicRebalancesKeepOutputs) {
  check_periodic(engine_test::default_dir());
}

// EPLB over tensor-parallel ranks that hold the experts (--tensor-parallel-size 2
// --enable-expert-parallel --enable-eplb): rebalances every 2 steps keep the single engine's
// outputs, and they move experts.
TEST(EplbEngine, TensorParallelRanksRebalanceAndKeepOutputs) {
  for (const std::string& dir : {v4_small(), engine_test::default_dir()}) {
    SCOPED_TRACE(dir);
    const std::vector<Timed> reqs = long_requests();
    const EngineRun single = engine_test::run_timed(engine_test::options_for(dir, 1, false), reqs);
    EngineOptions o = eplb_options(dir, 1, 2, 3);
    o.tensor_parallel_size = 2;
    o.num_redundant_experts = 2;
    const EngineRun got = engine_test::run_timed(o, reqs);
    engine_test::expect_same(single, got);
    EXPECT_GE(got.stats.eplb_rebalances, 4);
    EXPECT_GT(got.stats.eplb_experts_bound, 0) << "no rebalance moved an expert";
    EXPECT_NE(got.describe.find("placed by EPLB"), std::string::npos) << got.describe;
    EXPECT_NE(got.describe.find("tensor parallel: 2 ranks"), std::string::npos) << got.describe;
  }
}

// Rebalances by command between steps, in the middle of generation (requests running, others
// still to come), with no period.
TEST(EplbEngine, RebalanceByCommandMidGeneration) {
  for (const std::string& dir : {v4_small(), engine_test::default_dir()}) {
    const std::vector<Timed> reqs = long_requests();
    const EngineRun single = engine_test::run_timed(engine_test::options_for(dir, 1, false), reqs);
    int commanded = 0;
    const EngineRun got =
        engine_test::run_timed(eplb_options(dir, 4, 0, 1000), reqs, [&](Engine& e, int step) {
          if (step == 4 || step == 9) {
            const Status st = e.rebalance_experts();
            EXPECT_TRUE(st.ok()) << st.message();
            ++commanded;
          }
        });
    engine_test::expect_same(single, got);
    EXPECT_EQ(commanded, 2);
    EXPECT_EQ(got.stats.eplb_rebalances, 2);  // interval 0: only the commands
    EXPECT_GT(got.stats.eplb_experts_bound, 0);
  }
}

// Each rank's bound routed experts follow the plan: after a rebalance from counted loads, rank r
// holds, per main layer, exactly experts_of(r) of the new placement (plus the drafter's experts,
// which every rank holds), and its bytes change by the experts it gained and lost.
TEST(EplbEngine, RanksHoldThePlansExperts) {
  EngineOptions o = eplb_options(v4_small(), 4, 0, 1000);
  o.num_threads = 1;
  auto created = runtime::DataParallelEngine::create(o);
  ASSERT_TRUE(created.ok()) << created.status().message();
  runtime::DataParallelEngine& e = **created;
  const std::vector<parallel::ExpertPlacement> initial = e.expert_placements();
  ASSERT_FALSE(initial.empty());

  auto held = [](const std::vector<parallel::ExpertPlacement>& p, int rank) {
    int64_t n = 0;
    for (const parallel::ExpertPlacement& layer : p) {
      n += static_cast<int64_t>(layer.experts_of(rank).size());
    }
    return n;
  };
  std::vector<model::WeightStats> before;
  for (int r = 0; r < 4; ++r) before.push_back(e.rank(r).weight_stats());
  // Every expert of one layer has the same stored size (one format per checkpoint's experts).
  const int64_t expert_bytes = before[0].routed_expert_bytes / before[0].routed_experts;
  ASSERT_EQ(expert_bytes * before[0].routed_experts, before[0].routed_expert_bytes);

  for (int i = 0; i < 6; ++i) {
    auto h = e.submit(engine_test::prompt(12 + 5 * i, i + 1), "", engine_test::greedy(4), {});
    ASSERT_TRUE(h.ok()) << h.status().message();
  }
  while (e.has_unfinished()) e.step();
  ASSERT_TRUE(e.rebalance_experts().ok());
  const std::vector<parallel::ExpertPlacement>& now = e.expert_placements();
  bool moved = false;
  for (size_t l = 0; l < now.size(); ++l) moved = moved || now[l].replicas != initial[l].replicas;
  EXPECT_TRUE(moved) << "the counted load gave the initial placement back";
  int64_t bound = 0;
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const model::WeightStats& b = before[static_cast<size_t>(r)];
    const model::WeightStats a = e.rank(r).weight_stats();
    const int64_t drafter = b.routed_experts - held(initial, r);  // MTP block: all experts
    EXPECT_EQ(a.routed_experts, drafter + held(now, r));
    EXPECT_EQ(a.routed_expert_bytes, a.routed_experts * expert_bytes);
    EXPECT_EQ(a.bytes - b.bytes, a.routed_expert_bytes - b.routed_expert_bytes);
    for (size_t l = 0; l < now.size(); ++l) {
      const auto old_ids = initial[l].experts_of(r);
      for (int32_t x : now[l].experts_of(r)) {
        bound += std::binary_search(old_ids.begin(), old_ids.end(), x) ? 0 : 1;
      }
    }
  }
  EXPECT_EQ(e.stats().eplb_experts_bound, bound);
  EXPECT_EQ(e.stats().eplb_rebalances, 1);
  EXPECT_LT(e.stats().eplb_balance_after, e.stats().eplb_balance_before);
}

// The rebalancer on its own: a skewed routing counted over a step (Zipf-like, expert e of layer
// l gets 1200 / (((e + l) mod 8) + 1) pairs) under the initial placement (the policy on a
// uniform load: 8 experts + 4 replicas over 4 ranks) is balanced far better by the plan.
// Measured: mean over layers of max / mean rank load 1.7663 before, 1.0426 after.
TEST(ExpertRebalancer, SkewedCountedLoadImprovesBalance) {
  auto config = io::load_model_config(v4_small());
  ASSERT_TRUE(config.ok());
  EngineOptions o = eplb_options(v4_small(), 4, 0, 2);
  auto r = runtime::ExpertRebalancer::create(o, *config);
  ASSERT_TRUE(r.ok()) << r.status().message();
  runtime::ExpertRebalancer& rb = **r;
  const int layers = static_cast<int>(config->layers.size());
  for (int l = 0; l < layers; ++l) {
    std::vector<int32_t> ids;
    for (int32_t x = 0; x < 8; ++x) ids.insert(ids.end(), 1200 / ((x + l) % 8 + 1), x);
    ASSERT_TRUE(rb.counter()->add(l, ids).ok());
  }
  EXPECT_FALSE(rb.end_step());  // interval 0: never due by itself
  auto plan = rb.plan();
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  std::printf("EPLB, 4 ranks, 8 experts + 4 replicas, skewed counted load: balance %.4f -> %.4f\n",
              plan->balance_before, plan->balance_after);
  EXPECT_GT(plan->balance_before, 1.5);
  EXPECT_LT(plan->balance_after, 1.1);
  // The window (2 steps) forgets: two empty steps later the load is all zero.
  rb.end_step();
  EXPECT_GT(rb.window_load()[0][0], 0);
  rb.end_step();
  for (const auto& layer : rb.window_load()) {
    for (double x : layer) EXPECT_EQ(x, 0);
  }
}

Status create_status(const EngineOptions& o) {
  auto e = Engine::create(o);
  return e.ok() ? Status::ok_status() : e.status();
}

void expect_refused(const EngineOptions& o, const std::vector<std::string>& words) {
  const Status st = create_status(o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  for (const std::string& w : words) {
    EXPECT_NE(st.message().find(w), std::string::npos) << "'" << w << "' in: " << st.message();
  }
}

TEST(EplbEngine, BadOptionsRefusedByName) {
  EngineOptions o = eplb_options(v4_small(), 2, 10, 10);
  o.num_threads = 1;
  o.enable_expert_parallel = false;
  expect_refused(o, {"--enable-eplb", "--enable-expert-parallel", "--data-parallel-size"});
  o.enable_expert_parallel = true;
  o.data_parallel_size = 1;
  o.num_redundant_experts = 0;
  expect_refused(o, {"--enable-eplb", "--tensor-parallel-size) >= 2"});
  o.data_parallel_size = 4;
  o.num_redundant_experts = 2;  // 10 slots over 4 ranks
  expect_refused(o, {"--num-redundant-experts", "10 slots", "give 4"});
  o.num_redundant_experts = -1;
  expect_refused(o, {"num_redundant_experts", "is -1"});
  o.num_redundant_experts = 4;
  o.eplb_step_interval = -1;
  expect_refused(o, {"--eplb-step-interval", "is -1"});
  o.eplb_step_interval = 10;
  o.eplb_window_size = 0;
  expect_refused(o, {"--eplb-window-size", "is 0"});
  o.eplb_window_size = 10;
  o.enable_eplb = false;
  expect_refused(o, {"--num-redundant-experts", "--enable-eplb"});
  // Without EPLB there is nothing to rebalance.
  o.num_redundant_experts = 0;
  auto e = Engine::create(o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  const Status st = (*e)->rebalance_experts();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("--enable-eplb"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace deepinfer
