// Engine tests on tests/data/model/v4_tiny_a/hf_fp32 (vocab 256, window 8, CSA ratio 4, HCA 8;
// committed as a recipe over official_fp32, materialized by engine_test::tiny_dir()).
// The reference for greedy output is Model::extend driven by hand, one request at a time.
#include "deepinfer/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine_run_util.h"

namespace deepinfer {
namespace {

using engine_test::greedy;
std::string model_dir() { return engine_test::tiny_dir(); }

std::unique_ptr<Engine> make_engine(EngineOptions o = {}) {
  o.model_dir = model_dir();
  if (o.num_threads < 0) o.num_threads = 1;
  auto e = Engine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(*e);
}

std::vector<std::vector<int32_t>> prompts() {
  return {
      {5, 17, 42, 7},
      {3},
      {100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 9},
      {200, 2, 2, 2, 250, 31},
      {11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33}};
}

std::vector<int32_t> reference_greedy(const std::vector<int32_t>& prompt, int n) {
  return engine_test::greedy_by_extend(model_dir(), prompt, n);
}

std::map<RequestHandle, RequestOutput> by_id(std::vector<RequestOutput> outs) {
  std::map<RequestHandle, RequestOutput> m;
  for (auto& o : outs) m.emplace(o.id, std::move(o));
  return m;
}

TEST(Engine, BatchedGreedyEqualsExtend) {
  EngineOptions o;
  o.max_num_batched_tokens = 7;  // forces chunked prefill mixed with decodes
  auto e = make_engine(o);
  std::vector<RequestHandle> hs;
  for (const auto& p : prompts()) hs.push_back(*e->submit(p, greedy(12)));
  auto outs = by_id(e->run_until_done());
  ASSERT_EQ(outs.size(), hs.size());
  for (size_t i = 0; i < hs.size(); ++i) {
    const CompletionOutput& c = outs.at(hs[i]).outputs.at(0);
    EXPECT_EQ(c.finish_reason, "length");
    EXPECT_EQ(c.token_ids, reference_greedy(prompts()[i], 12)) << "prompt " << i;
  }
  EXPECT_GT(e->stats().steps, 5);
}

std::vector<int32_t> sampled(Engine& e, const std::vector<int32_t>& prompt, uint64_t seed,
                             int companions) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.max_tokens = 10;
  p.ignore_eos = true;
  p.seq_seed = seed;
  for (int c = 0; c < companions; ++c) {
    SamplingParams q = p;
    q.seq_seed = 1000 + static_cast<uint64_t>(c);
    EXPECT_TRUE(e.submit(prompts()[static_cast<size_t>(c) % prompts().size()], q).ok());
  }
  const RequestHandle h = *e.submit(prompt, p);
  auto outs = by_id(e.run_until_done());
  return outs.at(h).outputs.at(0).token_ids;
}

TEST(Engine, SameSeedSameTokensAloneInBatchAndAfterPreemption) {
  auto alone_engine = make_engine();
  const auto alone = sampled(*alone_engine, prompts()[2], 7, 0);
  ASSERT_EQ(alone.size(), 10u);
  auto batch_engine = make_engine();
  EXPECT_EQ(sampled(*batch_engine, prompts()[2], 7, 4), alone);
  EXPECT_NE(sampled(*batch_engine, prompts()[2], 8, 0), alone);  // the seed matters
  // A starved pool: the newest requests get preempted and recomputed.
  EngineOptions tiny;
  tiny.kv_block_size = 8;
  tiny.num_kv_blocks = 40;
  tiny.max_num_batched_tokens = 16;
  auto starved = make_engine(tiny);
  EXPECT_EQ(sampled(*starved, prompts()[2], 7, 4), alone);
  EXPECT_GT(starved->stats().preemptions, 0);
}

// A preempted request's published blocks (its prompt's and its generated tokens' full blocks)
// stay in the prefix cache when it is freed, so its recompute on resuming hits them unless the
// pool evicted them meanwhile: in a pool starved enough to preempt, some resumptions hit, and
// every output equals the unstarved engine's. (The blocks published only at the preemption
// itself, KvCoordinator::free(id, known), add nothing here: with free(id) the hits are the same
// 64 tokens; SpecEngine.AChatsNextTurnHitsThePreviousAnswer checks it at a request's end.)
TEST(Engine, APreemptedRequestResumesFromItsOwnBlocks) {
  std::vector<std::vector<int32_t>> long_prompts;
  for (int i = 0; i < 4; ++i) long_prompts.push_back(engine_test::prompt(20 + 3 * i, 50 + i));
  const auto run = [&](EngineOptions o) {
    auto e = make_engine(o);
    std::vector<RequestHandle> hs;
    for (const auto& p : long_prompts) hs.push_back(*e->submit(p, greedy(40)));
    auto outs = by_id(e->run_until_done());
    std::vector<std::vector<int32_t>> tokens;
    for (const RequestHandle h : hs) tokens.push_back(outs.at(h).outputs.at(0).token_ids);
    return std::make_pair(tokens, e->stats());
  };
  EngineOptions roomy;
  roomy.kv_block_size = 8;
  const auto [want, roomy_stats] = run(roomy);
  EXPECT_EQ(roomy_stats.preemptions, 0);
  EngineOptions tiny = roomy;
  // 40 blocks of 8 (each group of the tiny model's caches takes its own): every request fits
  // alone (below ~32 blocks a request's last tokens do not, and it ends with that error), not
  // all four at their full length, so the newest are preempted (4 times here, 2 of the
  // resumptions hitting 64 tokens in all; 36 blocks: 2 and 32, 48 blocks: 7 and 144).
  tiny.num_kv_blocks = 40;
  const auto [got, stats] = run(tiny);
  EXPECT_EQ(got, want);
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_GT(stats.prefix_hit_tokens, 0) << "no preempted request resumed from its own blocks";
}

TEST(Engine, StopTokenIdsAndMaxTokens) {
  auto e = make_engine();
  const auto ref = reference_greedy(prompts()[0], 8);
  SamplingParams p = greedy(8);
  p.stop_token_ids = {ref[3]};
  const RequestHandle h = *e->submit(prompts()[0], p);
  const RequestHandle h2 = *e->submit(prompts()[0], greedy(3));
  auto outs = by_id(e->run_until_done());
  const CompletionOutput& c = outs.at(h).outputs[0];
  EXPECT_EQ(c.finish_reason, "stop");
  ASSERT_TRUE(c.stop_reason.has_value());
  EXPECT_EQ(*c.stop_reason, ref[3]);
  const size_t first = static_cast<size_t>(std::find(ref.begin(), ref.end(), ref[3]) - ref.begin());
  EXPECT_EQ(c.token_ids, std::vector<int32_t>(ref.begin(), ref.begin() + first + 1));
  EXPECT_EQ(outs.at(h2).outputs[0].token_ids.size(), 3u);
  EXPECT_EQ(outs.at(h2).outputs[0].finish_reason, "length");
}

TEST(Engine, NSamplesDifferAndLogprobs) {
  auto e = make_engine();
  SamplingParams p;
  p.n = 3;
  p.max_tokens = 8;
  p.ignore_eos = true;
  p.seq_seed = 3;
  p.logprobs = 2;
  const RequestHandle h = *e->submit(prompts()[1], p);
  auto outs = by_id(e->run_until_done());
  const RequestOutput& o = outs.at(h);
  ASSERT_EQ(o.outputs.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(o.outputs[static_cast<size_t>(i)].index, i);
    EXPECT_EQ(o.outputs[static_cast<size_t>(i)].token_ids.size(), 8u);
    ASSERT_EQ(o.outputs[static_cast<size_t>(i)].logprobs.size(), 8u);
    const TokenLogprobs& lp = o.outputs[static_cast<size_t>(i)].logprobs[0];
    EXPECT_LE(lp.logprob, 0.0f);
    EXPECT_EQ(lp.top.size(), 2u);
  }
  EXPECT_FALSE(o.outputs[0].token_ids == o.outputs[1].token_ids &&
               o.outputs[1].token_ids == o.outputs[2].token_ids);
}

TEST(Engine, AbortMidStreamLeavesOthersServed) {
  auto e = make_engine();
  int deltas = 0;
  const RequestHandle victim = *e->submit(prompts()[0], greedy(50), [&](const StreamDelta& d) {
    deltas += static_cast<int>(d.token_ids.size());
  });
  const RequestHandle other = *e->submit(prompts()[1], greedy(20));
  std::map<RequestHandle, RequestOutput> outs;
  bool aborted = false;
  while (e->has_unfinished()) {
    if (deltas >= 4 && !aborted) {
      ASSERT_TRUE(e->abort(victim).ok());
      aborted = true;
    }
    for (auto& o : e->step()) outs.emplace(o.id, std::move(o));
  }
  EXPECT_EQ(outs.at(victim).outputs[0].finish_reason, "abort");
  EXPECT_LT(outs.at(victim).outputs[0].token_ids.size(), 50u);
  EXPECT_EQ(outs.at(other).outputs[0].token_ids, reference_greedy(prompts()[1], 20));
  EXPECT_FALSE(e->abort(victim).ok());
}

TEST(Engine, BadInputEndsOnlyThatRequest) {
  EngineOptions o;
  o.max_model_len = 64;
  auto e = make_engine(o);
  SamplingParams bad;
  bad.temperature = -1.0f;
  auto r = e->submit(prompts()[0], bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("temperature"), std::string::npos);
  EXPECT_FALSE(e->submit_text("hi", greedy(2)).ok());  // no tokenizer
  SamplingParams stops = greedy(2);
  stops.stop = {"x"};
  EXPECT_FALSE(e->submit(prompts()[0], stops).ok());

  const RequestHandle empty = *e->submit(std::vector<int32_t>{}, greedy(2));
  const RequestHandle unknown = *e->submit(std::vector<int32_t>{1, 999}, greedy(2));
  const RequestHandle too_long = *e->submit(std::vector<int32_t>(80, 3), greedy(2));
  const RequestHandle good = *e->submit(prompts()[3], greedy(4));
  auto outs = by_id(e->run_until_done());
  ASSERT_EQ(outs.size(), 4u);
  EXPECT_EQ(outs.at(empty).outputs[0].finish_reason, "error");
  EXPECT_FALSE(outs.at(empty).error.empty());
  EXPECT_NE(outs.at(unknown).error.find("999"), std::string::npos) << outs.at(unknown).error;
  EXPECT_NE(outs.at(too_long).error.find("max_model_len"), std::string::npos)
      << outs.at(too_long).error;
  EXPECT_EQ(outs.at(good).outputs[0].token_ids, reference_greedy(prompts()[3], 4));
  EXPECT_TRUE(outs.at(good).error.empty());
}

// Text in, text out on the embedded default model (it has a tokenizer): the streamed deltas add
// up to the final text, and a stop string taken from the unconstrained output ends it early.
TEST(Engine, TextStreamingAndStopStringsOnDefaultModel) {
  EngineOptions o;
  o.model_dir = engine_test::default_dir();
  o.max_model_len = 256;
  auto created = Engine::create(o);
  ASSERT_TRUE(created.ok()) << created.status().message();
  Engine& e = **created;
  ASSERT_TRUE(e.has_tokenizer());
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 24;
  p.ignore_eos = true;
  std::string streamed;
  bool saw_final = false;
  const RequestHandle h =
      *e.submit_text("In the beginning God created", p, [&](const StreamDelta& sd) {
        streamed += sd.text;
        saw_final = saw_final || sd.finished;
      });
  auto outs = by_id(e.run_until_done());
  const CompletionOutput& full = outs.at(h).outputs[0];
  EXPECT_TRUE(saw_final);
  EXPECT_EQ(streamed, full.text);
  EXPECT_EQ(full.text, e.decode(full.token_ids));
  ASSERT_GT(full.text.size(), 8u);
  // A stop string from the middle of the text (it may span token boundaries).
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  p.stop = {stop};
  std::string streamed2;
  const RequestHandle h2 = *e.submit_text("In the beginning God created", p,
                                          [&](const StreamDelta& sd) { streamed2 += sd.text; });
  auto outs2 = by_id(e.run_until_done());
  const CompletionOutput& cut = outs2.at(h2).outputs[0];
  EXPECT_EQ(cut.finish_reason, "stop");
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_EQ(streamed2, cut.text);
}

}  // namespace
}  // namespace deepinfer
