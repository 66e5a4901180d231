// Asynchronous scheduling (plan step N+1 while step N runs) against the synchronous engine:
// the same requests must give bitwise the same tokens, logprobs, texts and finish reasons, for
// greedy and seeded sampling, n > 1, stop ids and stop strings, structured outputs, aborts in
// the middle of a stream, and a starved KV pool that forces preemptions; every submitted
// request must end exactly once. Batch invariance: a request's tokens and logprobs are the
// same alone and inside batches of other sizes and companions.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "deepinfer/engine.h"

namespace deepinfer {
namespace {

std::string source_dir() {
  const char* d = std::getenv("DEEPINFER_SOURCE_DIR");
  return d != nullptr ? d : DEEPINFER_TEST_SOURCE_DIR;
}
std::string tiny_dir() { return source_dir() + "/tests/data/model/v4_tiny_a/hf_fp32"; }
std::string default_dir() { return source_dir() + "/models/default"; }

struct Req {
  std::vector<int32_t> ids;  // token prompt, or
  std::string text;          // text prompt (default model)
  SamplingParams params;
  int abort_after = -1;  // abort once this many tokens were streamed (-1: never)
};

struct EngineRun {
  std::vector<RequestHandle> handles;  // submit order
  std::map<RequestHandle, RequestOutput> outputs;
  EngineStats stats;
  std::string describe;
};

EngineRun run_requests(EngineOptions o, const std::vector<Req>& reqs) {
  if (o.num_threads < 0) o.num_threads = 1;
  auto created = Engine::create(o);
  EXPECT_TRUE(created.ok()) << created.status().message();
  EngineRun r;
  if (!created.ok()) return r;
  Engine& e = **created;
  std::vector<int> streamed(reqs.size(), 0);
  std::vector<bool> aborted(reqs.size(), false);
  for (size_t i = 0; i < reqs.size(); ++i) {
    Engine::StreamCallback cb = [&streamed, i](const StreamDelta& d) {
      streamed[i] += static_cast<int>(d.token_ids.size());
    };
    auto h = reqs[i].text.empty() ? e.submit(reqs[i].ids, reqs[i].params, cb)
                                  : e.submit_text(reqs[i].text, reqs[i].params, cb);
    EXPECT_TRUE(h.ok()) << h.status().message();
    r.handles.push_back(h.ok() ? *h : -1);
  }
  int64_t steps = 0;
  while (e.has_unfinished() && steps++ < 100000) {
    // Aborts between steps, as a server would on a client disconnect.
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (!aborted[i] && reqs[i].abort_after >= 0 && streamed[i] >= reqs[i].abort_after) {
        EXPECT_TRUE(e.abort(r.handles[i]).ok());
        aborted[i] = true;
      }
    }
    for (RequestOutput& out : e.step()) {
      const RequestHandle h = out.id;
      EXPECT_TRUE(r.outputs.emplace(h, std::move(out)).second) << "request " << h << " ended twice";
    }
  }
  r.stats = e.stats();
  r.describe = e.describe();
  return r;
}

// Every request ended exactly once, and async == sync on everything a client observes.
void expect_same(const EngineRun& sync, const EngineRun& async) {
  ASSERT_EQ(sync.outputs.size(), sync.handles.size()) << "a request vanished (sync)";
  ASSERT_EQ(async.outputs.size(), async.handles.size()) << "a request vanished (async)";
  EXPECT_NE(sync.describe.find("scheduling sync"), std::string::npos) << sync.describe;
  EXPECT_NE(async.describe.find("scheduling async"), std::string::npos) << async.describe;
  for (size_t i = 0; i < sync.handles.size(); ++i) {
    const RequestOutput& a = sync.outputs.at(sync.handles[i]);
    const RequestOutput& b = async.outputs.at(async.handles[i]);
    EXPECT_EQ(a.error, b.error) << "request " << i;
    ASSERT_EQ(a.outputs.size(), b.outputs.size()) << "request " << i;
    for (size_t k = 0; k < a.outputs.size(); ++k) {
      const CompletionOutput& x = a.outputs[k];
      const CompletionOutput& y = b.outputs[k];
      SCOPED_TRACE("request " + std::to_string(i) + " sample " + std::to_string(k));
      EXPECT_EQ(x.token_ids, y.token_ids);
      EXPECT_EQ(x.text, y.text);
      EXPECT_EQ(x.finish_reason, y.finish_reason);
      EXPECT_EQ(x.stop_reason, y.stop_reason);
      ASSERT_EQ(x.logprobs.size(), y.logprobs.size());
      for (size_t t = 0; t < x.logprobs.size(); ++t) {
        EXPECT_EQ(x.logprobs[t].token, y.logprobs[t].token);
        EXPECT_EQ(x.logprobs[t].logprob, y.logprobs[t].logprob);  // bitwise: same float
        EXPECT_EQ(x.logprobs[t].rank, y.logprobs[t].rank);
        EXPECT_EQ(x.logprobs[t].top, y.logprobs[t].top);
      }
    }
  }
}

void expect_async_equals_sync(EngineOptions o, const std::vector<Req>& reqs) {
  o.async_scheduling = false;
  const EngineRun sync = run_requests(o, reqs);
  o.async_scheduling = true;
  const EngineRun async = run_requests(o, reqs);
  expect_same(sync, async);
}

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

SamplingParams seeded(uint64_t seed, int max_tokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.seq_seed = seed;
  p.logprobs = 2;
  return p;
}

std::vector<int32_t> prompt(int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((seed * 37 + i * 11) % 250 + 3);
  return p;
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
