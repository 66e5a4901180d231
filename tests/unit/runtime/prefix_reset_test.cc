// Engine::reset_prefix_cache and the prefix-cache gauges of EngineStats: a finished request
// leaves cached KV blocks and snapshots behind (and the KV bytes they pin); a reset refuses
// while a request is live, and once idle brings every gauge (blocks in use and cached,
// snapshots, KV bytes in use) back to 0; the same prompt afterwards misses the cache and gives
// the same tokens. Both scheduling modes (asynchronous leaves a step in flight when idle).
#include <gtest/gtest.h>

#include <vector>

#include "deepinfer/engine.h"
#include "engine_run_util.h"

namespace deepinfer {
namespace {

using engine_test::greedy;
using engine_test::prompt;
using engine_test::tiny_dir;

std::vector<int32_t> run_one(Engine& e, const std::vector<int32_t>& ids) {
  auto h = e.submit(ids, greedy(6));
  EXPECT_TRUE(h.ok()) << h.status().message();
  std::vector<RequestOutput> outs = e.run_until_done();
  EXPECT_EQ(outs.size(), 1u);
  return outs.empty() ? std::vector<int32_t>{} : outs[0].outputs.at(0).token_ids;
}

void reset_round_trip(bool async_scheduling) {
  EngineOptions o;
  o.model_dir = tiny_dir();
  o.kv_block_size = 16;
  o.async_scheduling = async_scheduling;
  auto made = Engine::create(o);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Engine& e = **made;
  const std::vector<int32_t> ids = prompt(70, 3);  // four full 16-token blocks

  const std::vector<int32_t> first = run_one(e, ids);
  EngineStats s = e.stats();
  EXPECT_EQ(s.kv_blocks_in_use, 0);
  EXPECT_GT(s.kv_blocks_cached, 0);
  EXPECT_GT(s.prefix_snapshots, 0);
  EXPECT_GT(s.prefix_snapshot_bytes, 0);
  EXPECT_GT(s.kv_bytes_in_use, 0);  // the snapshots pin pages

  // Refused while a request is live; nothing changes.
  auto live = e.submit(prompt(20, 4), greedy(3));
  ASSERT_TRUE(live.ok());
  const Status busy = e.reset_prefix_cache();
  EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition) << busy.message();
  EXPECT_EQ(e.run_until_done().size(), 1u);

  ASSERT_TRUE(e.reset_prefix_cache().ok());
  s = e.stats();
  EXPECT_EQ(s.kv_blocks_in_use, 0);
  EXPECT_EQ(s.kv_blocks_cached, 0);
  EXPECT_EQ(s.prefix_snapshots, 0);
  EXPECT_EQ(s.prefix_snapshot_bytes, 0);
  EXPECT_EQ(s.kv_bytes_in_use, 0);
  EXPECT_EQ(s.num_running, 0);
  EXPECT_EQ(s.num_waiting, 0);

  // The same prompt again: no hit (the cache is empty), the same greedy tokens.
  const int64_t hits_before = s.prefix_hit_tokens;
  EXPECT_EQ(run_one(e, ids), first);
  EXPECT_EQ(e.stats().prefix_hit_tokens, hits_before);
  // And once more: now it hits what the previous run cached.
  EXPECT_EQ(run_one(e, ids), first);
  EXPECT_GT(e.stats().prefix_hit_tokens, hits_before);
  EXPECT_TRUE(e.reset_prefix_cache().ok());  // twice in a row is fine
  EXPECT_TRUE(e.reset_prefix_cache().ok());
  EXPECT_EQ(e.stats().kv_bytes_in_use, 0);
}

TEST(PrefixReset, ResetEmptiesTheCacheAndEveryGaugeReturnsToZero) {
  reset_round_trip(/*async_scheduling=*/false);
  reset_round_trip(/*async_scheduling=*/true);
}

// Without prefix caching nothing is cached, and an idle engine holds no KV byte at all, also
// right after a run_until_done that leaves an asynchronous step in flight.
TEST(PrefixReset, IdleEngineWithoutPrefixCachingHoldsNoKv) {
  for (const bool async_scheduling : {false, true}) {
    EngineOptions o;
    o.model_dir = tiny_dir();
    o.kv_block_size = 16;
    o.enable_prefix_caching = false;
    o.async_scheduling = async_scheduling;
    auto made = Engine::create(o);
    ASSERT_TRUE(made.ok()) << made.status().message();
    Engine& e = **made;
    const std::vector<int32_t> ids = prompt(70, 5);
    const std::vector<int32_t> full = run_one(e, ids);
    ASSERT_EQ(full.size(), 6u);
    EXPECT_EQ(e.stats().kv_bytes_in_use, 0) << "async " << async_scheduling;
    // Ended by a stop token: asynchronous scheduling has planned (and launched) one more step
    // for it, which is still in flight when run_until_done returns.
    SamplingParams p = greedy(6);
    p.stop_token_ids = {full[2]};
    ASSERT_TRUE(e.submit(ids, p).ok());
    const std::vector<RequestOutput> outs = e.run_until_done();
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].outputs.at(0).finish_reason, "stop");
    const EngineStats& s = e.stats();
    EXPECT_EQ(s.kv_blocks_cached, 0);
    EXPECT_EQ(s.prefix_snapshots, 0);
    EXPECT_EQ(s.kv_bytes_in_use, 0) << "async " << async_scheduling;
    EXPECT_TRUE((*made)->reset_prefix_cache().ok());
  }
}

}  // namespace
}  // namespace deepinfer
