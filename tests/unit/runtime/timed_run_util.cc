// Timed engine runs (timed_run_util.h).
#include "timed_run_util.h"

#include <map>
#include <thread>

namespace deepinfer::engine_test {

std::vector<Timed> mixed_requests(bool staggered) {
  std::vector<Timed> reqs;
  const int lengths[] = {5, 23, 1, 40, 9, 17, 3, 30};
  const int max_tokens[] = {6, 3, 9, 4, 7, 1, 5, 8};
  for (int i = 0; i < 8; ++i) {
    Timed t;
    t.req.ids = prompt(lengths[i], i + 1);
    t.req.params = i % 2 == 0 ? greedy(max_tokens[i]) : seeded(100 + i, max_tokens[i]);
    if (i == 2) t.req.params.ignore_eos = false;  // EOS may end it
    if (i == 5) t.req.params.n = 2;
    t.at_step = staggered ? (i * 3) % 7 : 0;
    reqs.push_back(t);
  }
  // A stop id: the second token of request 0's greedy continuation ends request 8 there.
  Timed stop;
  stop.req.ids = reqs[0].req.ids;
  stop.req.params = greedy(6);
  stop.at_step = staggered ? 2 : 0;
  reqs.push_back(stop);
  return reqs;
}

EngineRun run_timed(EngineOptions o, const std::vector<Timed>& reqs,
                    const BetweenSteps& between_steps) {
  if (o.num_threads < 0) o.num_threads = 1;
  auto created = Engine::create(o);
  EXPECT_TRUE(created.ok()) << created.status().message();
  EngineRun run;
  if (!created.ok()) return run;
  Engine& e = **created;
  const std::thread::id caller = std::this_thread::get_id();
  std::map<RequestHandle, std::map<int32_t, std::vector<int32_t>>> streamed;
  std::vector<bool> aborted(reqs.size(), false);
  run.handles.assign(reqs.size(), -1);
  size_t submitted = 0;
  for (int step = 0; step < 10000; ++step) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (run.handles[i] != -1 || reqs[i].at_step > step) continue;
      auto h = e.submit(reqs[i].req.ids, reqs[i].req.params, [&](const StreamDelta& d) {
        EXPECT_EQ(std::this_thread::get_id(), caller) << "a callback ran on a rank's thread";
        auto& toks = streamed[d.id][d.index];
        toks.insert(toks.end(), d.token_ids.begin(), d.token_ids.end());
      });
      EXPECT_TRUE(h.ok()) << h.status().message();
      run.handles[i] = h.ok() ? *h : -2;
      ++submitted;
    }
    if (submitted == reqs.size() && !e.has_unfinished()) break;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const int after = reqs[i].req.abort_after;
      if (aborted[i] || after < 0 || run.handles[i] < 0) continue;
      const auto s = streamed.find(run.handles[i]);
      if (s != streamed.end() && static_cast<int>(s->second[0].size()) >= after) {
        EXPECT_TRUE(e.abort(run.handles[i]).ok());
        aborted[i] = true;
      }
    }
    if (between_steps) between_steps(e, step);
    for (RequestOutput& out : e.step()) {
      const RequestHandle h = out.id;
      EXPECT_TRUE(run.outputs.emplace(h, std::move(out)).second) << "request " << h << " twice";
    }
  }
  EXPECT_FALSE(e.has_unfinished());
  for (const auto& [h, out] : run.outputs) {
    for (const CompletionOutput& c : out.outputs) {
      EXPECT_EQ(streamed[h][c.index], c.token_ids) << "request " << h << " sample " << c.index;
    }
  }
  run.stats = e.stats();
  run.describe = e.describe();
  return run;
}

EngineOptions options_for(const std::string& dir, int ranks, bool ep) {
  EngineOptions o;
  o.model_dir = dir;
  o.max_num_batched_tokens = 24;  // chunked prefills mixed with decodes
  o.data_parallel_size = ranks;
  o.enable_expert_parallel = ep;
  return o;
}

}  // namespace deepinfer::engine_test
