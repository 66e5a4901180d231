// DeepSeek-V4.1 through the engine, on the committed tiny V4.1 checkpoints
// (tests/data/model/v41_tiny_a: every CSA2 role, Engram, DSpark; vocab 320, window 8, ratios 2
// and 1). Their tokenizer.json is a WordLevel vocabulary that the model reads for its Engram
// token map and the text path cannot run, so the engine takes token-id prompts and says why
// text cannot be used. Greedy output == Model::extend by hand; several requests in one step ==
// each alone (tokens and logprobs, batch-invariant mode on); chunked prefill; prefix caching ==
// none; asynchronous == synchronous scheduling; a starved KV pool preempts and recomputes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "engine_run_util.h"

namespace deepinfer {
namespace {

using namespace engine_test;  // NOLINT: the shared runners

std::string v41_dir(const char* variant = "official_bf16") {
  return source_dir() + "/tests/data/model/v41_tiny_a/" + variant;
}

EngineOptions v41_options(const char* variant = "official_bf16") {
  EngineOptions o;
  o.model_dir = v41_dir(variant);
  o.num_threads = 1;
  o.kv_block_size = 16;  // a multiple of the ratios (2, 1): prefix hits on short prompts
  return o;
}

std::vector<Req> mixed_requests() {
  std::vector<Req> reqs;
  for (int i = 0; i < 6; ++i) {
    Req r;
    r.ids = prompt(5 + 13 * i, 20 + i);
    r.params = i % 2 == 0 ? greedy(9) : seeded(100 + static_cast<uint64_t>(i), 11);
    r.params.ignore_eos = true;
    reqs.push_back(r);
  }
  return reqs;
}

TEST(V41Engine, GreedyEqualsExtendForEveryVariant) {
  for (const char* variant : {"official_bf16", "official_quant"}) {
    EngineOptions o = v41_options(variant);
    o.max_num_batched_tokens = 7;  // chunked prefill mixed with decodes
    std::vector<Req> reqs;
    for (int n : {1, 9, 40}) {
      Req r;
      r.ids = prompt(n, n);
      r.params = greedy(12);
      r.params.ignore_eos = true;
      reqs.push_back(r);
    }
    const EngineRun run = run_requests(o, reqs);
    ASSERT_EQ(run.outputs.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      const CompletionOutput& c = run.outputs.at(run.handles[i]).outputs.at(0);
      EXPECT_EQ(c.token_ids, greedy_by_extend(v41_dir(variant), reqs[i].ids, 12))
          << variant << " prompt " << i;
      EXPECT_TRUE(c.text.empty());  // no text path for this tokenizer
    }
    EXPECT_GT(run.stats.steps, 5);
  }
}

TEST(V41Engine, BatchedEqualsAloneInBatchInvariantMode) {
  EngineOptions o = v41_options();
  o.batch_invariant = true;
  o.max_num_seqs = 1;
  const EngineRun alone = run_requests(o, mixed_requests());
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 24;
  const EngineRun batched = run_requests(o, mixed_requests());
  expect_same(alone, batched);
  EXPECT_NE(batched.describe.find("batch-invariant on"), std::string::npos) << batched.describe;
}

TEST(V41Engine, AsyncEqualsSyncAndPreemptionRecomputes) {
  EngineOptions o = v41_options();
  o.async_scheduling = false;
  const EngineRun sync = run_requests(o, mixed_requests());
  o.async_scheduling = true;
  expect_same(sync, run_requests(o, mixed_requests()));
  o.num_kv_blocks = 40;  // enough for the longest request, too few for all six at once
  o.max_num_batched_tokens = 16;
  const EngineRun starved = run_requests(o, mixed_requests());
  expect_same(sync, starved);
  EXPECT_GT(starved.stats.preemptions, 0);
}

TEST(V41Engine, PrefixCachingGivesTheSameOutputs) {
  const std::vector<int32_t> system = prompt(37, 1);
  std::vector<Req> reqs;
  for (int i = 0; i < 4; ++i) {
    Req r;
    r.ids = system;
    for (int32_t t : prompt(3 + 5 * i, 40 + i)) r.ids.push_back(t);
    r.params = i % 2 ? seeded(7 + static_cast<uint64_t>(i), 8) : greedy(8);
    reqs.push_back(r);
  }
  EngineOptions o = v41_options();
  o.max_num_seqs = 1;  // each starts after the previous one published its blocks
  o.enable_prefix_caching = false;
  const EngineRun plain = run_requests(o, reqs);
  o.enable_prefix_caching = true;
  const EngineRun cached = run_requests(o, reqs);
  expect_same(plain, cached);
  EXPECT_GE(cached.stats.prefix_hit_tokens, 3 * 32);
  EXPECT_LT(cached.stats.prompt_tokens, plain.stats.prompt_tokens);
}

TEST(V41Engine, TextFeaturesSayWhyTheTokenizerCannotBeUsed) {
  auto e = Engine::create(v41_options());
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_FALSE((*e)->has_tokenizer());
  EXPECT_NE((*e)->no_tokenizer_reason().find("WordLevel"), std::string::npos)
      << (*e)->no_tokenizer_reason();
  auto text = (*e)->submit_text("the cat", greedy(4));
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("WordLevel"), std::string::npos);
  EXPECT_NE(text.status().message().find("pass token ids"), std::string::npos);
  SamplingParams stop = greedy(4);
  stop.stop = {"cat"};
  auto s = (*e)->submit(prompt(5, 1), stop);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("stop_token_ids"), std::string::npos);
  // A tokenizer the caller names explicitly must work: that is an error at creation.
  EngineOptions named = v41_options();
  named.tokenizer_path = v41_dir();
  auto bad = Engine::create(named);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("WordLevel"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
