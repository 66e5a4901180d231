// Prefix caching through the engine: a repeated prompt prefix (the same prompt again, a longer
// prompt continuing an earlier one, several requests sharing a system prompt) is restored from
// the executor's snapshots instead of being recomputed, and every output is bitwise what the
// same requests give with prefix caching off: tokens, logprobs, finish reasons. Also when a
// chunked prefill crosses block boundaries mid-chunk, when the snapshot store is too small to
// keep anything (hits recompute their prefix), when a starved pool preempts requests, and when
// the samples of one request start together on blocks the pool took back from other prompts.
#include <gtest/gtest.h>

#include <string>
#include <utility>
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

namespace deepinfer {
namespace {

using namespace engine_test;  // NOLINT: the shared runners

// `earlier` requests of other prompts, one after another, then one request of two samples
// (n = 2); every output, in submit order.
EngineRun earlier_requests_then_two_samples(EngineOptions o, int earlier) {
  auto created = Engine::create(o);
  EXPECT_TRUE(created.ok()) << created.status().message();
  EngineRun r;
  if (!created.ok()) return r;
  Engine& e = **created;
  const auto run = [&](const std::vector<int32_t>& ids, const SamplingParams& p) {
    auto h = e.submit(ids, p);
    EXPECT_TRUE(h.ok()) << h.status().message();
    r.handles.push_back(h.ok() ? *h : -1);
    for (int steps = 0; e.has_unfinished() && steps < 1000; ++steps) {
      for (RequestOutput& out : e.step()) r.outputs.emplace(out.id, std::move(out));
    }
  };
  for (int k = 0; k < earlier; ++k) run(prompt(24, 100 + k), greedy(1));
  SamplingParams two = seeded(5, 6);
  two.n = 2;
  run(prompt(24, 99), two);
  r.stats = e.stats();
  return r;
}

// The samples of a request start in one step: sample 0 computes the prompt, and its blocks are
// published when that step is planned, so sample 1, admitted behind it in the same plan, hits
// them and restores its state at the boundary before sample 0's forward has saved it there.
// The snapshot store is keyed by the window block that ends at the boundary, and the pool hands
// a block to other tokens once it evicts it: the store still held the state of the block's
// previous owner, of the same length (another 24-token prompt's state at 16), and sample 1
// continued from it (the soak's "seeded n > 1 with penalties" finding, docs/soak.md). A snapshot
// now carries the hash of its tokens and is restored only for the same tokens; otherwise the
// prefix is recomputed. The earlier requests leave such states under the blocks the pool reuses;
// without the check, all four runs below (two pool sizes, sync and async) restored one.
TEST(PrefixCacheEngine, SamplesStartedTogetherNeverRestoreAnotherPromptsState) {
  for (const auto& [blocks, earlier] : {std::pair{24, 8}, std::pair{16, 16}}) {
    for (bool async : {false, true}) {
      SCOPED_TRACE(std::to_string(blocks) + " blocks, " + std::to_string(earlier) +
                   " earlier requests, " + (async ? "async" : "sync"));
      EngineOptions o = tiny_options();
      o.num_kv_blocks = blocks;
      o.async_scheduling = async;
      o.enable_prefix_caching = false;
      const EngineRun plain = earlier_requests_then_two_samples(o, earlier);
      o.enable_prefix_caching = true;
      const EngineRun cached = earlier_requests_then_two_samples(o, earlier);
      expect_same(plain, cached);
      EXPECT_GE(cached.stats.prefix_hit_tokens, 16) << "sample 1 did not hit sample 0's block";
    }
  }
}

}  // namespace
}  // namespace deepinfer
