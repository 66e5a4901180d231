// The context-parallel engine (EngineOptions::context_parallel_size; the tensor-parallel
// engine's lockstep ranks over models that split each forward's rows zig-zag,
// model/context_parallel.h) against the single-rank engine: 2 and 4 ranks on models/v4-small,
// the tiny FP32 V4 and models/default (V4.1). Per request: the same tokens, text, finish reasons
// and logprobs, bit for bit. Requests: a 300-token prompt (window wrapped, every compressor
// emitting) beside short ones and decodes, greedy and seeded with logprobs, n = 2; whole prefills
// in one step and chunked ones; the V4.1 default model too; inside two data-parallel ranks; with
// expert parallelism over the same ranks (and over all the cores of two data-parallel ranks); as a
// context x tensor grid, alone and inside two data-parallel ranks. Also: the grid with expert
// parallelism, CP with bounded replay, and bad sizes, refused by name.
#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "engine_run_util.h"

namespace deepinfer {
namespace {

using engine_test::EngineRun;
using engine_test::greedy;
using engine_test::prompt;
using engine_test::Req;
using engine_test::seeded;

std::vector<Req> requests() {
  std::vector<Req> reqs;
  const int lengths[] = {300, 5, 131, 1, 64};
  const int max_tokens[] = {5, 7, 3, 6, 4};
  for (int i = 0; i < 5; ++i) {
    Req r;
    r.ids = prompt(lengths[i], i + 1);
    r.params = i % 2 == 0 ? greedy(max_tokens[i]) : seeded(200 + i, max_tokens[i]);
    if (i == 3) r.params.n = 2;
    reqs.push_back(r);
  }
  return reqs;
}

// The rank options of a run: context-parallel ranks, and optionally data-parallel ranks around
// them, tensor-parallel cores in each (a grid), the routed experts split over all cores, EPLB.
struct Ranks {
  int context = 1, data = 1, tensor = 1;
  bool expert = false, eplb = false;
};

EngineRun run(const std::string& dir, int32_t batched_tokens, Ranks ranks) {
  EngineOptions o;
  o.model_dir = dir;
  o.num_threads = 1;
  o.max_num_batched_tokens = batched_tokens;
  o.context_parallel_size = ranks.context;
  o.data_parallel_size = ranks.data;
  o.tensor_parallel_size = ranks.tensor;
  o.enable_expert_parallel = ranks.expert;
  if (ranks.eplb) {  // rebalanced every 2 steps, 2 replicas per core
    o.enable_eplb = true;
    o.num_redundant_experts = 2 * ranks.context * ranks.data * ranks.tensor;
    o.eplb_step_interval = 2;
  }
  auto created = Engine::create(o);
  EXPECT_TRUE(created.ok()) << created.status().message();
  EngineRun got;
  if (!created.ok()) return got;
  Engine& e = **created;
  for (const Req& r : requests()) {
    auto h = e.submit(r.ids, r.params);
    EXPECT_TRUE(h.ok()) << h.status().message();
    got.handles.push_back(h.ok() ? *h : -2);
  }
  while (e.has_unfinished()) {
    for (RequestOutput& out : e.step()) {
      const RequestHandle h = out.id;
      EXPECT_TRUE(got.outputs.emplace(h, std::move(out)).second) << "request " << h << " twice";
    }
  }
  got.stats = e.stats();
  got.describe = e.describe();
  return got;
}

// The single engine's run of a model at a token budget, made once per test binary.
const EngineRun& single_run(const std::string& dir, int32_t batched_tokens) {
  static std::map<std::pair<std::string, int32_t>, EngineRun> runs;
  const auto key = std::make_pair(dir, batched_tokens);
  auto it = runs.find(key);
  if (it == runs.end()) it = runs.emplace(key, run(dir, batched_tokens, {})).first;
  return it->second;
}

// Runs with `r` give the single engine's outputs, whole prefills together (512 batched tokens)
// and chunks beside decodes (48), and describe themselves with every one of `describes`.
void expect_like_one_rank(const std::string& dir, Ranks r,
                          std::initializer_list<std::string> describes) {
  for (int32_t batched : {512, 48}) {
    SCOPED_TRACE(dir + ": " + std::to_string(r.context) + " context x " + std::to_string(r.data) +
                 " data x " + std::to_string(r.tensor) + " tensor ranks" +
                 (r.expert ? ", expert parallel" : "") + (r.eplb ? ", EPLB" : "") + ", " +
                 std::to_string(batched) + " batched tokens");
    const EngineRun got = run(dir, batched, r);
    engine_test::expect_same(single_run(dir, batched), got);
    for (const std::string& d : describes) {
      EXPECT_NE(got.describe.find(d), std::string::npos) << got.describe;
    }
    if (r.eplb) {
      EXPECT_GT(got.stats.eplb_rebalances, 0) << got.describe;
    }
  }
}

const std::string kV4Small = engine_test::source_dir() + "/models/v4-small";
const std::string kDefault = engine_test::source_dir() + "/models/default";

void check_model(const std::string& dir) {
  for (int ranks : {2, 4}) {
    expect_like_one_rank(dir, {.context = ranks},
                         {"context parallel: " + std::to_string(ranks) + " ranks"});
  }
}

TEST(ContextParallelEngine, V4SmallSameOutputsAsOneRank) { check_model(kV4Small); }

TEST(ContextParallelEngine, TinyFp32SameOutputsAsOneRank) { check_model(engine_test::tiny_dir()); }

TEST(ContextParallelEngine, V41DefaultSameOutputsAsOneRank) { check_model(kDefault); }

// Inside data-parallel ranks (--data-parallel-size 2 --context-parallel-size 2, four cores):
// requests placed over the two ranks, each rank's forwards split over its two cores.
TEST(ContextParallelEngine, InsideDataParallelRanksSameOutputsAsOneRank) {
  for (const std::string& dir : {kV4Small, kDefault}) {
    expect_like_one_rank(dir, {.context = 2, .data = 2},
                         {"data parallel: 2 ranks", "each rank 2 context-parallel ranks"});
  }
}

// Balanced CP with MoE EP (--context-parallel-size 2 --enable-expert-parallel; the original
// engine's "balanced CP, MoE EP"): the routed experts split over the CP ranks; and inside two
// data-parallel ranks, the experts over all four cores; with EPLB moving experts every 2 steps,
// outputs unchanged.
TEST(ContextParallelEngine, WithExpertParallelismSameOutputsAsOneRank) {
  for (const std::string& dir : {kV4Small, kDefault}) {
    for (bool eplb : {false, true}) {
      expect_like_one_rank(dir, {.context = 2, .expert = true, .eplb = eplb}, {"expert parallel"});
      expect_like_one_rank(dir, {.context = 2, .data = 2, .expert = true, .eplb = eplb},
                           {"over all 4 cores"});
    }
  }
}

// A context x tensor grid (--context-parallel-size 2 --tensor-parallel-size 2, four cores): each
// context-parallel rank a tensor-parallel group.
TEST(ContextParallelEngine, WithTensorParallelismGridSameOutputsAsOneRank) {
  for (const std::string& dir : {kV4Small, kDefault}) {
    expect_like_one_rank(dir, {.context = 2, .tensor = 2},
                         {"context parallel: 2 ranks", "each rank 2 tensor-parallel cores"});
  }
}

// The grid inside data-parallel ranks (--data-parallel-size 2 --context-parallel-size 2
// --tensor-parallel-size 2, eight cores): requests placed over the two ranks, each a 2 x 2 grid.
TEST(ContextParallelEngine, GridInsideDataParallelRanksSameOutputsAsOneRank) {
  for (const std::string& dir : {kV4Small, kDefault}) {
    expect_like_one_rank(dir, {.context = 2, .data = 2, .tensor = 2},
                         {"data parallel: 2 ranks",
                          "each rank 2 context-parallel ranks of 2 tensor-parallel cores"});
  }
}

// The grid with the routed experts split over all its cores (--context-parallel-size 2
// --tensor-parallel-size 2 --enable-expert-parallel: each core sends its tensor-parallel share
// of its context rank's rows through the exchange), alone with EPLB rebalancing every 2 steps,
// and inside two data-parallel ranks (the experts over all eight cores).
TEST(ContextParallelEngine, GridWithExpertParallelismSameOutputsAsOneRank) {
  for (const std::string& dir : {kV4Small, kDefault}) {
    expect_like_one_rank(dir, {.context = 2, .tensor = 2, .expert = true, .eplb = true},
                         {"context parallel: 2 ranks", "EPLB"});
    expect_like_one_rank(dir, {.context = 2, .data = 2, .tensor = 2, .expert = true},
                         {"data parallel: 2 ranks", "over all 8 cores"});
  }
}

TEST(ContextParallelEngine, RefusalsNameTheFlag) {
  EngineOptions o;
  o.model_dir = engine_test::source_dir() + "/models/default";  // V4.1
  o.num_threads = 1;
  o.context_parallel_size = 2;
  o.prefill_truncation_mode = "compact";  // bounded replay: the upper layers on a row subset
  auto replay = Engine::create(o);
  ASSERT_FALSE(replay.ok());
  EXPECT_NE(replay.status().message().find("--context-parallel-size"), std::string::npos)
      << replay.status().message();
  o.prefill_truncation_mode = "none";
  o.model_dir = engine_test::source_dir() + "/models/v4-small";
  o.context_parallel_size = 0;
  auto zero = Engine::create(o);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("--context-parallel-size"), std::string::npos)
      << zero.status().message();
}

}  // namespace
}  // namespace deepinfer
