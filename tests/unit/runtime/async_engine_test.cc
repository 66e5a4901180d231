// Asynchronous scheduling (plan step N+1 while step N runs) against the synchronous engine:
// the same requests must give bitwise the same tokens, logprobs, texts and finish reasons, for
// greedy and seeded sampling, n > 1, stop ids and stop strings, structured outputs, aborts in
// the middle of a stream, and a starved KV pool that forces preemptions; every submitted
// request must end exactly once. Batch invariance: a request's tokens and logprobs are the
// same alone and inside batches of other sizes and companions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "engine_run_util.h"

namespace deepinfer {
namespace {

using namespace engine_test;  // NOLINT: the shared runners

void expect_async_equals_sync(EngineOptions o, const std::vector<Req>& reqs) {
  o.async_scheduling = false;
  const EngineRun sync = run_requests(o, reqs);
  o.async_scheduling = true;
  const EngineRun async = run_requests(o, reqs);
  EXPECT_NE(sync.describe.find("scheduling sync"), std::string::npos) << sync.describe;
  EXPECT_NE(async.describe.find("scheduling async"), std::string::npos) << async.describe;
  expect_same(sync, async);
}

// Greedy and seeded requests of mixed lengths, n > 1, stop ids, chunked prefill mixed with
// decodes (budget 7), repetition penalties (they read the history the executor advances).
std::vector<Req> mixed_requests() {
  std::vector<Req> reqs;
  for (int i = 0; i < 8; ++i) {
    Req r;
    r.ids = prompt(1 + 3 * i, i);
    r.params = i % 2 == 0 ? greedy(6 + i) : seeded(100 + static_cast<uint64_t>(i), 6 + i);
    if (i == 3) r.params.n = 3;
    if (i == 5) r.params.repetition_penalty = 1.3f;
    if (i == 6) r.params.presence_penalty = 0.5f;
    reqs.push_back(r);
  }
  // Stop token ids: the first greedy token of request 0 ends request 8 at once (a finish the
  // scheduler cannot foresee, so its already-planned next step is wasted and dropped).
  Req stop;
  stop.ids = reqs[0].ids;
  stop.params = greedy(20);
  EngineOptions o;
  o.model_dir = tiny_dir();
  o.async_scheduling = false;
  const EngineRun ref = run_requests(o, {reqs[0]});
  stop.params.stop_token_ids = {ref.outputs.begin()->second.outputs[0].token_ids.at(2)};
  reqs.push_back(stop);
  return reqs;
}

TEST(AsyncEngine, GreedySeededNSamplesAndStopIdsMatchSync) {
  EngineOptions o;
  o.model_dir = tiny_dir();
  o.max_num_batched_tokens = 7;
  const std::vector<Req> reqs = mixed_requests();
  o.async_scheduling = false;
  const EngineRun sync = run_requests(o, reqs);
  o.async_scheduling = true;
  const EngineRun async = run_requests(o, reqs);
  expect_same(sync, async);
  EXPECT_EQ(sync.outputs.at(sync.handles.back()).outputs[0].finish_reason, "stop");
  // The same outputs also come with a roomy budget (batching differs, tokens do not).
  o.max_num_batched_tokens = 2048;
  expect_same(sync, run_requests(o, reqs));
}

// Draws on the backend (EngineOptions::sample_on = "backend"; on the CPU the backend's default
// Ops::sample, on a GPU the kernel) give the host Sampler's tokens: greedy, every filter, n > 1,
// min_tokens (host until it is reached), and steps that a logprobs request sends to the host.
TEST(AsyncEngine, BackendSamplingEqualsHostSampling) {
  std::vector<Req> reqs;
  for (int i = 0; i < 7; ++i) {
    Req r;
    r.ids = prompt(2 + 3 * i, 40 + i);
    r.params = greedy(10 + i);
    if (i > 0) {
      r.params.temperature = 0.6f + 0.2f * static_cast<float>(i % 3);
      r.params.seq_seed = 500 + static_cast<uint64_t>(i);
    }
    if (i == 2) r.params.top_k = 7;
    if (i == 3) r.params.top_p = 0.8f;
    if (i == 4) r.params.min_p = 0.1f;
    if (i == 5) r.params.n = 2;
    if (i == 6) r.params.min_tokens = 4;
    reqs.push_back(r);
  }
  EngineOptions o;
  o.model_dir = tiny_dir();
  o.max_num_batched_tokens = 9;
  o.sample_on = "host";
  const EngineRun host = run_requests(o, reqs);
  o.sample_on = "backend";
  const EngineRun dev = run_requests(o, reqs);
  EXPECT_NE(dev.describe.find("sampling on the backend"), std::string::npos) << dev.describe;
  expect_same(host, dev);
  // With a logprobs request in the mix, its steps are drawn on the host, the rest on the backend.
  reqs.push_back({});
  reqs.back().ids = prompt(5, 77);
  reqs.back().params = seeded(9, 12);
  o.sample_on = "host";
  const EngineRun host2 = run_requests(o, reqs);
  o.sample_on = "backend";
  expect_same(host2, run_requests(o, reqs));
  o.sample_on = "gpu";
  EXPECT_FALSE(Engine::create(o).ok());
}

// logit_bias through the engine: +100 forces a token at every greedy step, -100 bans one from
// a sampled request; allowed_token_ids keeps a request inside its ids. Such requests are drawn
// on the host (sample::backend_samplable: the backend's draw knows only the filters), so
// sampling on the backend gives the same tokens.
TEST(AsyncEngine, LogitBiasAndAllowedTokenIdsAreDrawnOnTheHost) {
  std::vector<Req> reqs(3);
  reqs[0].ids = prompt(6, 90);
  reqs[0].params = greedy(8);
  reqs[0].params.logit_bias = {{17, 100.0f}};
  reqs[1].ids = prompt(9, 91);
  reqs[1].params = seeded(5, 12);
  reqs[1].params.logprobs.reset();  // the bias alone sends it to the host
  reqs[2].ids = prompt(7, 92);
  reqs[2].params = greedy(8);  // unbiased: drawn on the backend
  EngineOptions o;
  o.model_dir = tiny_dir();
  o.sample_on = "host";
  const EngineRun plain = run_requests(o, reqs);
  const std::vector<int32_t>& unbiased = plain.outputs.at(plain.handles[1]).outputs[0].token_ids;
  ASSERT_FALSE(unbiased.empty());
  // Ban the sampled request's first token: it must never come again, and the draw moves.
  const int32_t banned = unbiased[0];
  reqs[1].params.logit_bias = {{banned, -100.0f}};
  const EngineRun host = run_requests(o, reqs);
  EXPECT_EQ(host.outputs.at(host.handles[0]).outputs[0].token_ids, std::vector<int32_t>(8, 17));
  const std::vector<int32_t>& biased = host.outputs.at(host.handles[1]).outputs[0].token_ids;
  EXPECT_EQ(std::count(biased.begin(), biased.end(), banned), 0);
  EXPECT_NE(biased, unbiased);
  EXPECT_EQ(host.outputs.at(host.handles[2]).outputs[0].token_ids,
            plain.outputs.at(plain.handles[2]).outputs[0].token_ids);
  o.sample_on = "backend";
  expect_same(host, run_requests(o, reqs));
  // allowed_token_ids: the unbiased request drawn from three ids only, also on the host.
  reqs[2].params.allowed_token_ids = {30, 31, 32};
  o.sample_on = "host";
  const EngineRun allowed = run_requests(o, reqs);
  for (const int32_t t : allowed.outputs.at(allowed.handles[2]).outputs[0].token_ids) {
    EXPECT_TRUE(t >= 30 && t <= 32) << t;
  }
  o.sample_on = "backend";
  expect_same(allowed, run_requests(o, reqs));
  // An id past the vocabulary is refused at submit, naming the field.
  auto e = Engine::create(o);
  ASSERT_TRUE(e.ok());
  SamplingParams far = greedy(4);
  far.logit_bias = {{1 << 30, 1.0f}};
  const auto h = (*e)->submit(prompt(4, 93), far);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("logit_bias"), std::string::npos) << h.status().message();
}

TEST(AsyncEngine, StarvedPoolPreemptsAndStillMatchesSync) {
  EngineOptions o;
  o.model_dir = tiny_dir();
  o.kv_block_size = 8;
  o.num_kv_blocks = 40;
  o.max_num_batched_tokens = 16;
  std::vector<Req> reqs;
  for (int i = 0; i < 10; ++i) {
    Req r;
    r.ids = prompt(4 + 2 * i, 50 + i);
    r.params = i % 3 == 0 ? greedy(24) : seeded(7 + static_cast<uint64_t>(i), 24);
    reqs.push_back(r);
  }
  o.async_scheduling = true;
  const EngineRun async = run_requests(o, reqs);
  EXPECT_GT(async.stats.preemptions, 0);
  // Reference: synchronous and with a roomy pool (no preemption at all).
  EngineOptions roomy;
  roomy.model_dir = tiny_dir();
  roomy.async_scheduling = false;
  const EngineRun ref = run_requests(roomy, reqs);
  EXPECT_EQ(ref.stats.preemptions, 0);
  expect_same(ref, async);
  o.async_scheduling = false;
  expect_same(run_requests(o, reqs), async);
}

TEST(AsyncEngine, AbortsMidStreamMatchSync) {
  EngineOptions o;
  o.model_dir = tiny_dir();
  std::vector<Req> reqs;
  for (int i = 0; i < 6; ++i) {
    Req r;
    r.ids = prompt(3 + i, 90 + i);
    r.params = i % 2 == 0 ? greedy(30) : seeded(40 + static_cast<uint64_t>(i), 30);
    reqs.push_back(r);
  }
  reqs[0].abort_after = 4;  // decoding
  reqs[3].abort_after = 0;  // before its first token
  reqs[4].abort_after = 1;
  reqs[4].params = seeded(8, 30);
  reqs[4].params.n = 2;
  o.async_scheduling = false;
  const EngineRun sync = run_requests(o, reqs);
  o.async_scheduling = true;
  const EngineRun async = run_requests(o, reqs);
  expect_same(sync, async);
  const CompletionOutput& v = async.outputs.at(async.handles[0]).outputs[0];
  EXPECT_EQ(v.finish_reason, "abort");
  EXPECT_EQ(v.token_ids.size(), 4u);  // exactly what had been streamed at abort()
  EXPECT_EQ(async.outputs.at(async.handles[1]).outputs[0].token_ids.size(), 30u);
}

TEST(AsyncEngine, ModelLengthAndBadRequestsNeverVanish) {
  EngineOptions o;
  o.model_dir = tiny_dir();
  o.max_model_len = 24;
  std::vector<Req> reqs;
  SamplingParams unbounded = greedy(1000);
  unbounded.max_tokens.reset();  // only the model length ends it
  reqs.push_back({prompt(5, 1), "", unbounded, -1});
  reqs.push_back({{}, "", greedy(3), -1});             // empty prompt
  reqs.push_back({{1, 9999}, "", greedy(3), -1});      // id outside the vocabulary
  reqs.push_back({prompt(30, 2), "", greedy(3), -1});  // longer than max_model_len
  reqs.push_back({prompt(20, 3), "", seeded(5, 50), -1});
  expect_async_equals_sync(o, reqs);
  o.async_scheduling = true;
  const EngineRun async = run_requests(o, reqs);
  EXPECT_EQ(async.outputs.at(async.handles[0]).outputs[0].token_ids.size(), 24u - 5u);
  EXPECT_EQ(async.outputs.at(async.handles[0]).outputs[0].finish_reason, "length");
  EXPECT_EQ(async.outputs.at(async.handles[1]).outputs[0].finish_reason, "error");
  EXPECT_EQ(async.outputs.at(async.handles[4]).outputs[0].token_ids.size(), 4u);
}

TEST(AsyncEngine, StopStringsAndStructuredOutputsMatchSync) {
  EngineOptions o;
  o.model_dir = default_dir();
  o.max_model_len = 256;
  std::vector<Req> reqs;
  SamplingParams text = seeded(11, 24);
  text.logprobs.reset();
  reqs.push_back({{}, "In the beginning God created", text, -1});
  SamplingParams stopped = text;
  stopped.stop = {"e", " the"};  // common enough to end early, possibly mid-token
  stopped.n = 2;
  reqs.push_back({{}, "In the beginning God created", stopped, -1});
  SamplingParams re = seeded(3, 48);
  re.ignore_eos = false;
  re.structured = SamplingParams::StructuredOutput{"regex", "[A-Z][a-z]{2,8} [0-9]{1,3}"};
  re.n = 2;
  reqs.push_back({{}, "The answer is", re, -1});
  SamplingParams json = seeded(5, 48);
  json.ignore_eos = false;
  json.structured = SamplingParams::StructuredOutput{
      "json", R"({"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]})"};
  reqs.push_back({{}, "Data:", json, -1});
  o.async_scheduling = false;
  const EngineRun sync = run_requests(o, reqs);
  o.async_scheduling = true;
  const EngineRun async = run_requests(o, reqs);
  expect_same(sync, async);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(async.outputs.at(async.handles[1]).outputs[k].finish_reason, "stop");
    EXPECT_EQ(async.outputs.at(async.handles[2]).outputs[k].finish_reason, "stop");
  }
}

// DEEPINFER_BATCH_INVARIANT's observable: one request's tokens and logprobs are bitwise the
// same alone and inside batches of 2, 4 and 8 with different companions (the CPU backend is
// batch-invariant by construction; this holds it to that at the engine level).
TEST(BatchInvariance, SameTokensAndLogprobsAloneAndInBatches) {
  EngineOptions o;
  o.model_dir = tiny_dir();
  o.batch_invariant = true;
  Req target;
  target.ids = prompt(13, 77);
  target.params = seeded(99, 12);
  target.params.logprobs = 5;
  Req target_greedy = target;
  target_greedy.params = greedy(12);
  target_greedy.params.logprobs = 3;
  const EngineRun alone = run_requests(o, {target, target_greedy});
  EXPECT_NE(alone.describe.find("batch-invariant on"), std::string::npos) << alone.describe;
  const RequestOutput& ref = alone.outputs.at(alone.handles[0]);
  const RequestOutput& ref_greedy = alone.outputs.at(alone.handles[1]);
  ASSERT_EQ(ref.outputs[0].logprobs.size(), 12u);
  for (const int companions : {1, 3, 7}) {
    std::vector<Req> batch;
    for (int c = 0; c < companions; ++c) {
      Req r;
      r.ids = prompt(2 + 5 * c, 300 + c * companions);
      r.params = c % 2 == 0 ? seeded(1000 + static_cast<uint64_t>(c), 4 + 3 * c) : greedy(9);
      batch.push_back(r);
    }
    batch.insert(batch.begin() + companions / 2, target);
    batch.push_back(target_greedy);
    for (const bool async : {false, true}) {
      o.async_scheduling = async;
      const EngineRun b = run_requests(o, batch);
      SCOPED_TRACE("companions " + std::to_string(companions) + (async ? " async" : " sync"));
      const CompletionOutput& got =
          b.outputs.at(b.handles[static_cast<size_t>(companions / 2)]).outputs[0];
      const CompletionOutput& got_greedy = b.outputs.at(b.handles.back()).outputs[0];
      EXPECT_EQ(got.token_ids, ref.outputs[0].token_ids);
      EXPECT_EQ(got_greedy.token_ids, ref_greedy.outputs[0].token_ids);
      ASSERT_EQ(got.logprobs.size(), ref.outputs[0].logprobs.size());
      for (size_t t = 0; t < got.logprobs.size(); ++t) {
        EXPECT_EQ(got.logprobs[t].logprob, ref.outputs[0].logprobs[t].logprob) << "token " << t;
        EXPECT_EQ(got.logprobs[t].top, ref.outputs[0].logprobs[t].top) << "token " << t;
      }
      for (size_t t = 0; t < got_greedy.logprobs.size(); ++t) {
        EXPECT_EQ(got_greedy.logprobs[t].top, ref_greedy.outputs[0].logprobs[t].top);
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer
