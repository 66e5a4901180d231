// EngineLoop (include/deepinfer/engine_loop.h): the engine on its own thread. Outputs equal the
// single-threaded Engine's for the same requests submitted from many threads; streams deliver
// every delta then exactly one final event; aborts from other threads free the KV; overload and
// bad input are refused synchronously; shutdown drains; prompt logprobs agree with and without
// prefix caching and across chunkings.
#include "deepinfer/engine_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine_run_util.h"

namespace deepinfer {
namespace {

using engine_test::prompt;
using engine_test::seeded;

EngineOptions tiny_options() {
  EngineOptions o;
  o.model_dir = engine_test::tiny_dir();
  o.num_threads = 1;
  return o;
}

TEST(EngineLoop, ManyThreadsGetTheSingleThreadedEnginesOutputs) {
  std::vector<engine_test::Req> reqs;
  for (int i = 0; i < 24; ++i) reqs.push_back({prompt(5 + i % 7, i), "", seeded(100 + i, 9)});
  const engine_test::EngineRun ref = engine_test::run_requests(tiny_options(), reqs);
  auto loop = EngineLoop::create(tiny_options());
  ASSERT_TRUE(loop.ok()) << loop.status().message();
  std::vector<std::unique_ptr<RequestStream>> streams(reqs.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < reqs.size(); i += 4) {
        auto s = (*loop)->submit_stream(reqs[i].ids, reqs[i].params);
        ASSERT_TRUE(s.ok());
        streams[i] = std::move(*s);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::vector<int32_t> streamed;
    std::optional<RequestEvent> last;
    while (auto ev = streams[i]->next()) {
      ASSERT_FALSE(last && last->done) << "an event after the final one";
      if (!ev->done) {
        streamed.insert(streamed.end(), ev->delta.token_ids.begin(), ev->delta.token_ids.end());
        ASSERT_EQ(ev->delta.logprobs.size(), ev->delta.token_ids.size());
      }
      last = std::move(ev);
    }
    ASSERT_TRUE(last && last->done);
    const RequestOutput& want = ref.outputs.at(ref.handles[i]);
    EXPECT_EQ(last->output.outputs[0].token_ids, want.outputs[0].token_ids) << i;
    EXPECT_EQ(streamed, want.outputs[0].token_ids) << i;
    EXPECT_EQ(last->usage.completion_tokens,
              static_cast<int64_t>(want.outputs[0].token_ids.size()));
    EXPECT_EQ(last->usage.prompt_tokens, static_cast<int64_t>(reqs[i].ids.size()));
  }
  EXPECT_TRUE((*loop)->wait_idle(std::chrono::seconds(10)));
  EXPECT_EQ((*loop)->counters().finished, 24);
}

TEST(EngineLoop, AbortFromAnotherThreadFreesTheKv) {
  auto loop = EngineLoop::create(tiny_options());
  ASSERT_TRUE(loop.ok());
  SamplingParams p = seeded(1, 10000);
  p.ignore_eos = true;
  p.max_tokens = 400;
  auto s = (*loop)->submit_stream(prompt(6, 1), p);
  ASSERT_TRUE(s.ok());
  int tokens = 0;
  while (tokens < 3) {
    auto ev = (*s)->next();
    ASSERT_TRUE(ev && !ev->done);
    tokens += static_cast<int>(ev->delta.token_ids.size());
  }
  EXPECT_GT((*loop)->stats().kv_blocks_in_use, 0);
  std::thread([&] { ASSERT_TRUE((*loop)->abort((*s)->id()).ok()); }).join();
  std::optional<RequestEvent> last;
  while (auto ev = (*s)->next()) last = std::move(ev);
  ASSERT_TRUE(last && last->done);
  EXPECT_EQ(last->output.outputs[0].finish_reason, "abort");
  EXPECT_LT(last->usage.completion_tokens, 400);
  ASSERT_TRUE((*loop)->wait_idle(std::chrono::seconds(10)));
  // The final event follows the step that ended it, so the gauges are current.
  EXPECT_EQ((*loop)->stats().kv_blocks_in_use, 0);
  EXPECT_EQ((*loop)->stats().num_running, 0);
  EXPECT_EQ((*loop)->counters().aborted, 1);
  EXPECT_FALSE((*loop)->abort((*s)->id()).ok());  // already ended
}

TEST(EngineLoop, RefusesBadInputAndOverloadAtOnce) {
  EngineOptions o = tiny_options();
  o.max_num_seqs = 1;
  EngineLoopOptions lo;
  lo.max_waiting = 2;
  auto loop = EngineLoop::create(o, lo);
  ASSERT_TRUE(loop.ok());
  SamplingParams p = seeded(1, 50);
  EXPECT_EQ((*loop)->submit({}, p, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*loop)->submit({1, 100000}, p, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      (*loop)
          ->submit(std::vector<int32_t>(static_cast<size_t>((*loop)->max_model_len()), 5), p, {})
          .status()
          .code(),
      StatusCode::kInvalidArgument);
  SamplingParams bad = p;
  bad.temperature = -1;
  EXPECT_EQ((*loop)->submit(prompt(4, 1), bad, {}).status().code(), StatusCode::kInvalidArgument);
  // Three accepted at once (none running yet) -> the third is refused; retry later succeeds.
  p.max_tokens = 200;
  p.ignore_eos = true;
  std::vector<RequestHandle> ok;
  int refused = 0;
  for (int i = 0; i < 6; ++i) {
    auto h = (*loop)->submit(prompt(4, i), p, {});
    if (h.ok()) {
      ok.push_back(*h);
    } else {
      EXPECT_EQ(h.status().code(), StatusCode::kResourceExhausted);
      ++refused;
    }
  }
  EXPECT_GE(refused, 1);
  for (RequestHandle h : ok) (void)(*loop)->abort(h);
  ASSERT_TRUE((*loop)->wait_idle(std::chrono::seconds(10)));
  EXPECT_TRUE((*loop)->submit(prompt(4, 9), seeded(2, 3), {}).ok());
  EXPECT_GE((*loop)->counters().refused_overload, 1);
}

TEST(EngineLoop, ShutdownDrainsThenRefuses) {
  auto loop = EngineLoop::create(tiny_options());
  ASSERT_TRUE(loop.ok());
  std::atomic<int> done{0};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*loop)
                    ->submit(prompt(5, i), seeded(i, 6),
                             [&](RequestEvent&& ev) {
                               if (ev.done) {
                                 EXPECT_NE(ev.output.outputs[0].finish_reason, "abort");
                                 ++done;
                               }
                             })
                    .ok());
  }
  (*loop)->shutdown(/*drain=*/true);
  EXPECT_EQ(done.load(), 5);
  EXPECT_EQ((*loop)->submit(prompt(5, 1), seeded(1, 2), {}).status().code(),
            StatusCode::kFailedPrecondition);
}

std::vector<TokenLogprobs> prompt_logprobs(EngineOptions o, const std::vector<int32_t>& ids) {
  auto loop = EngineLoop::create(o);
  EXPECT_TRUE(loop.ok());
  SamplingParams p = seeded(3, 2);
  p.prompt_logprobs = 3;
  std::vector<TokenLogprobs> first;
  for (int round = 0; round < 2; ++round) {  // the second round may hit the prefix cache
    auto s = (*loop)->submit_stream(ids, p);
    EXPECT_TRUE(s.ok());
    std::optional<RequestEvent> last;
    while (auto ev = (*s)->next()) last = std::move(ev);
    if (round == 0) {
      first = last->output.prompt_logprobs;
    } else {
      EXPECT_EQ(last->output.prompt_logprobs.size(), first.size());
      for (size_t i = 0; i < first.size(); ++i) {
        EXPECT_EQ(last->output.prompt_logprobs[i].logprob, first[i].logprob) << i;
      }
    }
  }
  return first;
}

TEST(EngineLoop, PromptLogprobsAgreeAcrossChunkingAndPrefixHits) {
  const std::vector<int32_t> ids = prompt(40, 5);
  EngineOptions plain = tiny_options();
  plain.enable_prefix_caching = false;
  const std::vector<TokenLogprobs> ref = prompt_logprobs(plain, ids);
  ASSERT_EQ(ref.size(), ids.size() - 1);
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(ref[i].token, ids[i + 1]);
    EXPECT_LE(ref[i].logprob, 0.0f);
    EXPECT_GE(ref[i].rank, 1);
    EXPECT_EQ(ref[i].top.size(), 3u);
  }
  EngineOptions cached = tiny_options();
  cached.kv_block_size = 8;           // 40 tokens: hits at 32 on the second round
  cached.max_num_batched_tokens = 7;  // chunks crossing block boundaries
  const std::vector<TokenLogprobs> got = prompt_logprobs(cached, ids);
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(got[i].logprob, ref[i].logprob, 1e-5) << i;
    EXPECT_EQ(got[i].rank, ref[i].rank) << i;
  }
}

}  // namespace
}  // namespace deepinfer
