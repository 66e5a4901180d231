// Prefix caching through the engine: a repeated prompt prefix (the same prompt again, a longer
// prompt continuing an earlier one, several requests sharing a system prompt) is restored from
// the executor's snapshots instead of being recomputed, and every output is bitwise what the
// same requests give with prefix caching off: tokens, logprobs, finish reasons. Also when a
// chunked prefill crosses block boundaries mid-chunk, when the snapshot store is too small to
// keep anything (hits recompute their prefix), and when a starved pool preempts requests.
#include <gtest/gtest.h>

#include <vector>

#include "deepinfer/engine.h"
#include "engine_run_util.h"

namespace deepinfer {
namespace {

using namespace engine_test;  // NOLINT: the shared runners

EngineOptions tiny_options() {
  EngineOptions o;
  o.model_dir = tiny_dir();
  o.kv_block_size = 16;  // a multiple of the tiny model's ratios (4, 8): hits on short prompts
  return o;
}

void expect_cached_equals_uncached(EngineOptions o, const std::vector<Req>& reqs,
                                   int64_t min_hit_tokens, EngineStats* stats = nullptr) {
  o.enable_prefix_caching = false;
  const EngineRun plain = run_requests(o, reqs);
  o.enable_prefix_caching = true;
  const EngineRun cached = run_requests(o, reqs);
  expect_same(plain, cached);
  EXPECT_EQ(plain.stats.prefix_hit_tokens, 0);
  EXPECT_GE(cached.stats.prefix_hit_tokens, min_hit_tokens);
  EXPECT_LT(cached.stats.prompt_tokens, plain.stats.prompt_tokens) << "no prefill was saved";
  EXPECT_NE(cached.describe.find("prefix caching on"), std::string::npos) << cached.describe;
  if (stats != nullptr) *stats = cached.stats;
}

// Requests that share prefixes, submitted together with max_num_seqs = 1 so each starts after
// the previous one finished and published its blocks.
std::vector<Req> shared_prefix_requests() {
  const std::vector<int32_t> system = prompt(37, 1);
  std::vector<Req> reqs;
  Req a;
  a.ids = system;
  a.params = greedy(10);
  reqs.push_back(a);
  Req again = a;  // the same prompt again
  again.params = seeded(7, 9);
  reqs.push_back(again);
  Req longer;  // a later turn: the first prompt + its continuation
  longer.ids = system;
  for (int32_t t : prompt(12, 2)) longer.ids.push_back(t);
  longer.params = seeded(8, 12);
  reqs.push_back(longer);
  Req other;  // nothing shared
  other.ids = prompt(20, 9);
  other.params = greedy(5);
  reqs.push_back(other);
  return reqs;
}

TEST(PrefixCacheEngine, RepeatedPrefixesHitAndGiveTheSameOutputs) {
  EngineOptions o = tiny_options();
  o.max_num_seqs = 1;
  EngineStats s;
  // Prompt 37 tokens = 2 whole blocks of 16: the repeat and the later turn reuse 32 each.
  expect_cached_equals_uncached(o, shared_prefix_requests(), 64, &s);
  EXPECT_GT(s.prefix_restores, 0);
  EXPECT_EQ(s.prefix_recomputes, 0);
}

TEST(PrefixCacheEngine, ChunksCrossingBoundariesAndAsyncOrSync) {
  for (bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    EngineOptions o = tiny_options();
    o.max_num_seqs = 1;
    o.max_num_batched_tokens = 7;  // chunks end mid-block; boundaries fall inside chunks
    o.async_scheduling = async;
    expect_cached_equals_uncached(o, shared_prefix_requests(), 64);
  }
}

TEST(PrefixCacheEngine, EvictedSnapshotsRecomputeTheirPrefix) {
  EngineOptions o = tiny_options();
  o.max_num_seqs = 1;
  o.prefix_cache_bytes = 1;  // smaller than any snapshot: none is kept
  EngineStats s;
  expect_cached_equals_uncached(o, shared_prefix_requests(), 64, &s);
  EXPECT_GT(s.prefix_recomputes, 0);
}

TEST(PrefixCacheEngine, ConcurrentSharersAndAStarvedPool) {
  // Eight requests on one system prompt, running together in a pool too small for all of
  // them: preempted requests restart and may hit their own published blocks.
  const std::vector<int32_t> system = prompt(33, 4);
  std::vector<Req> reqs;
  for (int i = 0; i < 8; ++i) {
    Req r;
    r.ids = system;
    for (int32_t t : prompt(3 + i, 10 + i)) r.ids.push_back(t);
    r.params = i % 2 ? greedy(8 + i) : seeded(50 + static_cast<uint64_t>(i), 8 + i);
    reqs.push_back(r);
  }
  EngineOptions o = tiny_options();
  o.num_kv_blocks = 24;
  o.max_num_batched_tokens = 32;
  expect_cached_equals_uncached(o, reqs, 32);
}

// More requests than max_num_seqs, several samples each: every request ends once and the engine
// is idle afterwards (a freed sample's parent handle was once read after its erase, leaving a
// parent behind and has_unfinished() true forever).
TEST(PrefixCacheEngine, ManyMoreRequestsThanSequencesAllEnd) {
  // The case that showed it: the embedded default model, 8 sampled requests, 4 at a time.
  std::vector<Req> reqs;
  for (int i = 0; i < 8; ++i) {
    Req r;
    r.ids = prompt(268, 70 + i);
    r.params = seeded(200 + static_cast<uint64_t>(i), 16);
    if (i % 3 == 0) r.params.n = 2;
    reqs.push_back(r);
  }
  EngineOptions o;
  o.model_dir = default_dir();
  o.kv_block_size = 64;
  o.max_model_len = 768;
  o.max_num_seqs = 4;
  const EngineRun run = run_requests(o, reqs);
  EXPECT_EQ(run.outputs.size(), reqs.size());
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

using namespace engine_test;  // NOLINT: the shared runners

// The KV page pools recycle: requests run one after another take no more backend memory than
// one of them alone (a leaked page, or a free that did not reach the pool, would grow it), and
// the engine reports what the pools hold.
TEST(PrefixCacheEngine, KvPagesAreRecycledAcrossRequests) {
  EngineOptions o = tiny_options();
  o.max_num_seqs = 1;
  o.enable_prefix_caching = false;
  std::vector<Req> reqs;
  for (int i = 0; i < 5; ++i) {
    Req r;
    r.ids = prompt(60, 20 + i);
    r.params = greedy(12);
    reqs.push_back(r);
  }
  const EngineRun one = run_requests(o, {reqs[0]});
  const EngineRun five = run_requests(o, reqs);
  EXPECT_GT(one.stats.kv_bytes_in_use_peak, 0);
  EXPECT_LE(one.stats.kv_bytes_in_use_peak, one.stats.kv_bytes_reserved);
  EXPECT_EQ(five.stats.kv_bytes_reserved, one.stats.kv_bytes_reserved);
  EXPECT_EQ(five.stats.kv_bytes_in_use_peak, one.stats.kv_bytes_in_use_peak);
}

}  // namespace
}  // namespace deepinfer
