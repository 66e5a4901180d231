// Shared pieces of the engine tests (see engine_run_util.h).
#include "engine_run_util.h"

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "backend/cpu/cpu_ops.h"
#include "derived_checkpoint.h"
#include "model/model.h"

namespace deepinfer::engine_test {

std::string source_dir() {
  const char* d = std::getenv("DEEPINFER_SOURCE_DIR");
  return d != nullptr ? d : DEEPINFER_TEST_SOURCE_DIR;
}
std::string tiny_dir() {
  return deepinfer::testing::checkpoint_dir(source_dir() + "/tests/data/model/v4_tiny_a/hf_fp32");
}
std::string default_dir() { return source_dir() + "/models/v4-small"; }

std::vector<int32_t> greedy_by_extend(const std::string& model_dir,
                                      const std::vector<int32_t>& prompt, int n) {
  auto ops = backend::cpu::make_opt_ops(1);
  auto loaded = model::load_model(model_dir, *ops);
  EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
  if (!loaded.ok()) return {};
  model::Model* m = loaded->get();
  auto seq = m->new_sequence();
  std::vector<int32_t> out, feed = prompt;
  for (int i = 0; i < n; ++i) {
    auto r = m->extend(seq, feed);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) return out;
    const auto& l = r->logits;
    const int32_t best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    out.push_back(best);
    feed = {best};
  }
  return out;
}

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
  EXPECT_FALSE(e.has_unfinished()) << "every request returned, but the engine still has work";
  r.stats = e.stats();
  r.describe = e.describe();
  return r;
}

// Every request ended exactly once, and both runs agree on everything a client observes.
void expect_same(const EngineRun& sync, const EngineRun& async) {
  ASSERT_EQ(sync.outputs.size(), sync.handles.size()) << "a request vanished (first run)";
  ASSERT_EQ(async.outputs.size(), async.handles.size()) << "a request vanished (second run)";
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

}  // namespace deepinfer::engine_test
