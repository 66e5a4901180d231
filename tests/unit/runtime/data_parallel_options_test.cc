// The rank options and the data-parallel engine's own behaviour: refusals (rank counts below 1 or
// too many, ranks that exchange data on the CUDA backend, GPU ranks without a GPU each) with
// messages that name the option and the way out; the front scheduler spreading equal requests
// evenly; idle ranks serving their experts in lockstep; the EngineLoop (the server's engine thread)
// over ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "backend/select.h"
#include "deepinfer/engine.h"
#include "deepinfer/engine_loop.h"
#include "engine_run_util.h"
#include "runtime/data_parallel_engine.h"

namespace deepinfer {
namespace {

std::string v4_small() { return engine_test::source_dir() + "/models/v4-small"; }

Status create_status(const EngineOptions& o) {
  auto e = Engine::create(o);
  return e.ok() ? Status::ok_status() : e.status();
}

void expect_refused(const EngineOptions& o, StatusCode code,
                    const std::vector<std::string>& words) {
  const Status st = create_status(o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), code) << st.message();
  for (const std::string& w : words) {
    EXPECT_NE(st.message().find(w), std::string::npos) << "'" << w << "' not in: " << st.message();
  }
}

TEST(ParallelOptions, RefusedWithWhatToUseInstead) {
  EngineOptions o;
  o.model_dir = v4_small();
  o.num_threads = 1;
  o.tensor_parallel_size = 16;
  o.data_parallel_size = 8;
  expect_refused(o, StatusCode::kInvalidArgument, {"128 ranks", "at most 64"});
  o.tensor_parallel_size = 2;
  o.data_parallel_size = 1;
  o.backend = "cuda";
  expect_refused(o, StatusCode::kUnimplemented,
                 {"--tensor-parallel-size", "CUDA", "not built yet", "backend opt"});
  o.backend = "auto";
  o.tensor_parallel_size = 1000;
  expect_refused(o, StatusCode::kInvalidArgument, {"tensor_parallel_size", "up to 64"});
  o.tensor_parallel_size = 0;
  expect_refused(o, StatusCode::kInvalidArgument, {"tensor_parallel_size", "is 0"});
  o.tensor_parallel_size = 1;
  o.data_parallel_size = 0;
  expect_refused(o, StatusCode::kInvalidArgument, {"--data-parallel-size", "is 0", "give 1"});
  o.data_parallel_size = -3;
  expect_refused(o, StatusCode::kInvalidArgument, {"data_parallel_size", "is -3"});
  o.data_parallel_size = 1000;
  expect_refused(o, StatusCode::kInvalidArgument, {"data_parallel_size", "up to 64"});
  o.data_parallel_size = 2;
  o.backend = "cuda";
  o.enable_expert_parallel = true;
  expect_refused(o, StatusCode::kUnimplemented,
                 {"--enable-expert-parallel", "CUDA", "NCCL", "not built yet", "backend opt"});
  // One rank on any backend is the single engine: nothing to refuse (CUDA may still be absent).
  o.enable_expert_parallel = false;
  o.data_parallel_size = 1;
  o.backend = "opt";
  EXPECT_TRUE(create_status(o).ok());
}

// Data parallelism alone runs on GPUs, one rank per GPU: more ranks than GPUs without
// cuda_devices, and a cuda_devices list that does not fit the ranks or the machine, are refused
// (this machine's GPU count decides which of these can be asked: CI has none).
TEST(ParallelOptions, GpuRanksNeedOneGpuEach) {
  const int gpus = backend::cuda_device_count();
  EngineOptions o;
  o.model_dir = v4_small();
  o.num_threads = 1;
  o.cuda_devices = {0};
  expect_refused(o, StatusCode::kInvalidArgument, {"--cuda-devices", "CPU", "--backend cuda"});
  o.backend = "cuda";
  o.data_parallel_size = 2;
  expect_refused(o, StatusCode::kInvalidArgument,
                 {"--cuda-devices", "1 GPU for 2 data-parallel ranks", "one GPU id per rank"});
  o.cuda_devices = {0, gpus};
  expect_refused(o, StatusCode::kInvalidArgument,
                 {"--cuda-devices", "GPU " + std::to_string(gpus), "this machine has"});
  o.cuda_devices = {-1, 0};
  expect_refused(o, StatusCode::kInvalidArgument, {"--cuda-devices", "GPU -1"});
  o.cuda_devices.clear();
  o.data_parallel_size = std::max(2, gpus + 1);
  expect_refused(
      o, StatusCode::kInvalidArgument,
      gpus == 0 ? std::vector<std::string>{"--data-parallel-size", "a GPU of its own", "0 GPUs",
                                           "backend opt"}
                : std::vector<std::string>{"--data-parallel-size", "a GPU of its own",
                                           "at most " + std::to_string(gpus), "--cuda-devices"});
  // Ranks of other kinds need the device exchange (NCCL), not built: refused by name.
  o.data_parallel_size = 1;
  o.context_parallel_size = 2;
  expect_refused(o, StatusCode::kUnimplemented, {"CUDA"});
}

TEST(ParallelOptions, ARankThatCannotLoadNamesItself) {
  EngineOptions o;
  o.model_dir = "/nonexistent/model";
  o.num_threads = 1;
  o.data_parallel_size = 2;
  for (bool ep : {false, true}) {
    o.enable_expert_parallel = ep;
    const Status st = create_status(o);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("/nonexistent/model"), std::string::npos) << st.message();
  }
}

std::unique_ptr<runtime::DataParallelEngine> make_dp(int ranks, bool ep) {
  EngineOptions o;
  o.model_dir = v4_small();
  o.num_threads = 1;
  o.data_parallel_size = ranks;
  o.enable_expert_parallel = ep;
  auto e = runtime::DataParallelEngine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

// Varlen decisions are each rank's own (its batches): the engine reports the latest 8 over all
// ranks by plan step, each naming its rank, and none is lost or invented.
TEST(DataParallelEngine, VarlenDecisionsOfEveryRankAreReported) {
  EngineOptions o;
  o.model_dir = v4_small();
  o.num_threads = 1;
  o.data_parallel_size = 2;
  o.speculative_method = "mtp";
  o.num_speculative_tokens = 3;
  o.speculative_varlen = true;
  auto e = runtime::DataParallelEngine::create(o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  for (int i = 0; i < 8; ++i) {  // 4 per rank, long enough for the budget to decide
    ASSERT_TRUE((*e)->submit(engine_test::prompt(12, i), "", engine_test::greedy(48), {}).ok());
  }
  while ((*e)->has_unfinished()) (void)(*e)->step();
  std::vector<EngineStats::SpecProbe> want;
  for (int r = 0; r < 2; ++r) {
    for (EngineStats::SpecProbe p : (*e)->rank(r).stats().spec_varlen_recent_probes) {
      p.rank = r;
      want.push_back(p);
    }
  }
  const auto& got = (*e)->stats().spec_varlen_recent_probes;
  ASSERT_EQ(got.size(), std::min<size_t>(8, want.size()));
  std::vector<bool> ranks_seen(2, false);
  for (size_t i = 0; i < got.size(); ++i) {
    if (i > 0) {
      EXPECT_LE(got[i - 1].plan_step, got[i].plan_step);
    }
    ASSERT_GE(got[i].rank, 0);
    ASSERT_LT(got[i].rank, 2);
    ranks_seen[static_cast<size_t>(got[i].rank)] = true;
    const auto same = [&](const EngineStats::SpecProbe& p) {
      return p.rank == got[i].rank && p.plan_step == got[i].plan_step &&
             p.steps == got[i].steps && p.ratio == got[i].ratio;
    };
    EXPECT_TRUE(std::any_of(want.begin(), want.end(), same)) << "record " << i;
  }
  // Both ranks decode 4 requests alike, so both decide (the budget's prediction or a probe).
  EXPECT_TRUE(ranks_seen[0] && ranks_seen[1]);
  EXPECT_EQ((*e)->stats().spec_varlen_probes_passed + (*e)->stats().spec_varlen_probes_failed,
            (*e)->rank(0).stats().spec_varlen_probes_passed +
                (*e)->rank(0).stats().spec_varlen_probes_failed +
                (*e)->rank(1).stats().spec_varlen_probes_passed +
                (*e)->rank(1).stats().spec_varlen_probes_failed);
}

// 8 equal requests submitted together go 2-2-2-2 over 4 ranks (least live samples, ties to the
// lowest rank), the same way every time; handles are numbered over all ranks.
TEST(DataParallelEngine, FrontSchedulerSpreadsEqualRequestsEvenly) {
  for (bool ep : {false, true}) {
    auto e = make_dp(4, ep);
    ASSERT_NE(e, nullptr);
    std::vector<int> per_rank(4, 0);
    std::vector<int> order;
    for (int i = 0; i < 8; ++i) {
      auto h = e->submit(engine_test::prompt(10, 3), "", engine_test::greedy(3), {});
      ASSERT_TRUE(h.ok());
      EXPECT_EQ(*h, i + 1);
      const int r = e->rank_of(*h);
      ASSERT_GE(r, 0);
      ++per_rank[static_cast<size_t>(r)];
      order.push_back(r);
    }
    EXPECT_EQ(per_rank, (std::vector<int>{2, 2, 2, 2}));
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
    size_t ended = 0;
    while (e->has_unfinished()) ended += e->step().size();
    EXPECT_EQ(ended, 8u);
    EXPECT_EQ(e->rank_of(1), -1);  // ended
    EXPECT_EQ(e->stats().generated_tokens, 8 * 3);
    // A rank holds KV blocks while its requests run and gives every one back.
    EXPECT_EQ(e->stats().kv_blocks_in_use, 0);
  }
}

// With expert parallelism a rank without requests still steps: its empty forwards serve the
// experts it holds to the rank that has work. Without it, idle ranks do nothing.
TEST(DataParallelEngine, IdleRanksServeTheirExpertsInLockstep) {
  model::WeightStats whole;
  for (bool ep : {false, true}) {
    auto e = make_dp(2, ep);
    ASSERT_NE(e, nullptr);
    auto h = e->submit(engine_test::prompt(12, 5), "", engine_test::greedy(4), {});
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(e->rank_of(*h), 0);
    const auto outs = [&] {
      std::vector<RequestOutput> all;
      while (e->has_unfinished()) {
        for (RequestOutput& o : e->step()) all.push_back(std::move(o));
      }
      return all;
    }();
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].outputs[0].token_ids.size(), 4u);
    EXPECT_EQ(e->rank(0).lockstep_empty_forwards(), 0);
    const model::WeightStats w0 = e->rank(0).weight_stats(), w1 = e->rank(1).weight_stats();
    if (ep) {
      // Each rank bound only its share of the routed experts (the drafter keeps all of its
      // own, so the shares add up to at least the whole) and everything else in full.
      for (const model::WeightStats& w : {w0, w1}) {
        EXPECT_LT(w.routed_expert_bytes, whole.routed_expert_bytes);
        EXPECT_EQ(w.bytes - w.routed_expert_bytes, whole.bytes - whole.routed_expert_bytes);
      }
      EXPECT_GE(w0.routed_expert_bytes + w1.routed_expert_bytes, whole.routed_expert_bytes);
    } else {
      EXPECT_EQ(w0.bytes, w1.bytes);
      whole = w0;
    }
    if (ep) {
      EXPECT_GE(e->rank(1).lockstep_empty_forwards(), 4);  // a prefill and three decodes
    } else {
      EXPECT_EQ(e->rank(1).lockstep_empty_forwards(), 0);
      EXPECT_EQ(e->rank(1).stats().steps, 0);
    }
  }
}

// Aborting an unknown or ended handle is NotFound; reset_prefix_cache waits for no live request.
TEST(DataParallelEngine, AbortAndResetFollowTheEngineContract) {
  auto e = make_dp(2, true);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->abort(42).code(), StatusCode::kNotFound);
  auto h = e->submit(engine_test::prompt(300, 1), "", engine_test::greedy(2), {});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(e->reset_prefix_cache().code(), StatusCode::kFailedPrecondition);
  while (e->has_unfinished()) e->step();
  EXPECT_EQ(e->abort(*h).code(), StatusCode::kNotFound);
  EXPECT_TRUE(e->reset_prefix_cache().ok());
  EXPECT_EQ(e->stats().prefix_snapshots, 0);
  EXPECT_EQ(e->stats().kv_blocks_cached, 0);
}

// The EngineLoop (deepinfer serve, Python's streaming) over 2 expert-parallel ranks: streams
// from several threads' submissions end with the single engine's tokens.
TEST(DataParallelEngine, EngineLoopOverRanks) {
  EngineOptions o;
  o.model_dir = v4_small();
  o.num_threads = 1;
  const std::vector<int32_t> p = engine_test::prompt(15, 9);
  auto single = Engine::create(o);
  ASSERT_TRUE(single.ok());
  ASSERT_TRUE((*single)->submit(p, engine_test::greedy(5)).ok());
  const auto want = (*single)->run_until_done().at(0).outputs.at(0).token_ids;
  o.data_parallel_size = 2;
  o.enable_expert_parallel = true;
  auto loop = EngineLoop::create(o);
  ASSERT_TRUE(loop.ok()) << loop.status().message();
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i) {
    auto s = (*loop)->submit_stream(p, engine_test::greedy(5));
    ASSERT_TRUE(s.ok()) << s.status().message();
    streams.push_back(std::move(*s));
  }
  for (auto& s : streams) {
    std::vector<int32_t> got;
    while (auto ev = s->next(std::chrono::seconds(60))) {
      if (ev->done) {
        EXPECT_EQ(ev->output.outputs.at(0).token_ids, want);
        break;
      }
      got.insert(got.end(), ev->delta.token_ids.begin(), ev->delta.token_ids.end());
    }
    EXPECT_EQ(got, want);
  }
  EXPECT_NE((*loop)->describe().find("data parallel: 2 ranks"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
