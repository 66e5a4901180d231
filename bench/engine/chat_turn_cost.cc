// A chat's next turn: the time to its first token when the engine still holds the previous
// turn (its prompt and answer hit the prefix cache) against a cold engine that computes all of
// it (the peer, in the same run). Until stop 45 asynchronous scheduling (the default) hit none
// of the previous answer, so the cold figure is also what the next turn cost then.
//
//   chat_turn_cost [--model DIR] [--answers 256,1024] [--repeats 5] [--method off|mtp|ngram]
//                  [--prefix-cache-bytes N] [--csv OUT]
//
// --prefix-cache-bytes 1 keeps no snapshot: the warm engine's hit is then served by recomputing
// the prefix from its tokens (EngineCore::restore_prefix), which costs about what cold does.
//
// Per answer length: a first turn (a 64-token prompt, that many greedy answer tokens), then
// the next turn (that context + 16 new tokens, max_tokens 1) on the same engine (warm) and on
// a fresh one (cold); medians of the next turn's seconds, and cold / warm.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench_args.h"
#include "deepinfer/engine.h"

namespace {

namespace bench = deepinfer::bench;
using deepinfer::Engine;
using deepinfer::EngineOptions;
using deepinfer::RequestOutput;
using deepinfer::SamplingParams;


double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = std::string(DEEPINFER_BENCH_SOURCE_DIR) + "/models/v4-small", csv_path;
  std::string method = "off";
  std::vector<int64_t> answers = {256, 1024};
  int repeats = 5;
  int64_t prefix_cache_bytes = -1;  // the engine's default
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* name) { return bench::flag_value(argv[i], name); };
    if (const char* m = arg("--model")) {
      model = m;
    } else if (const char* a = arg("--answers")) {
      answers = bench::int_list(a);
    } else if (const char* r = arg("--repeats")) {
      repeats = std::max(1, std::atoi(r));
    } else if (const char* sm = arg("--method")) {
      method = sm;
    } else if (const char* pb = arg("--prefix-cache-bytes")) {
      prefix_cache_bytes = std::atoll(pb);
    } else if (const char* c = arg("--csv")) {
      csv_path = c;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--model=DIR] [--answers=256,1024] [--repeats=5] "
                   "[--method=off|mtp|ngram] [--prefix-cache-bytes=N] [--csv=OUT]\n",
                   argv[0]);
      return 2;
    }
  }
  if (answers.empty()) return 2;
  EngineOptions o;
  o.model_dir = model;
  o.max_model_len = *std::max_element(answers.begin(), answers.end()) + 128;
  o.speculative_method = method;
  o.num_speculative_tokens = method == "off" ? 0 : 3;
  if (prefix_cache_bytes >= 0) o.prefix_cache_bytes = prefix_cache_bytes;
  auto make = [&] {
    auto e = Engine::create(o);
    if (!e.ok()) {
      std::fprintf(stderr, "chat_turn_cost: %s\n", e.status().to_string().c_str());
      std::exit(1);
    }
    return std::move(*e);
  };
  // One request to the end; its output.
  auto run = [](Engine& e, const std::vector<int32_t>& ids, int max_tokens) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    if (!e.submit(ids, p).ok()) std::exit(1);
    std::vector<RequestOutput> outs = e.run_until_done();
    if (outs.size() != 1 || !outs[0].error.empty()) std::exit(1);
    return outs[0];
  };
  std::printf("model %s, speculation %s, asynchronous scheduling (the default), prefix cache "
              "%s; next turn = previous prompt + answer + 16 tokens, first token only\n",
              model.c_str(), method.c_str(),
              prefix_cache_bytes >= 0 ? (std::to_string(prefix_cache_bytes) + " bytes").c_str()
                                      : "default");
  std::printf("%8s %12s %12s %10s %10s\n", "answer", "warm s", "cold s", "cold/warm", "hit");
  std::string csv = "answer_tokens,warm_seconds,cold_seconds,ratio,hit_tokens\n";
  for (const int64_t answer : answers) {
    std::vector<double> warm_s, cold_s;
    int64_t hit = 0;
    for (int rep = 0; rep <= repeats; ++rep) {  // rep 0 warms up, uncounted
      std::vector<int32_t> prompt;
      for (int i = 0; i < 64; ++i) prompt.push_back(100 + (rep * 131 + i * 37) % 3900);
      auto warm = make();
      const RequestOutput first = run(*warm, prompt, static_cast<int>(answer));
      std::vector<int32_t> next = first.prompt_token_ids;
      next.insert(next.end(), first.outputs[0].token_ids.begin(),
                  first.outputs[0].token_ids.end());
      for (int i = 0; i < 16; ++i) next.push_back(200 + i);
      auto cold = make();
      auto t0 = std::chrono::steady_clock::now();
      const RequestOutput w = run(*warm, next, 1);
      const double ws = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      t0 = std::chrono::steady_clock::now();
      run(*cold, next, 1);
      const double cs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rep > 0) {
        warm_s.push_back(ws);
        cold_s.push_back(cs);
        hit = w.num_cached_tokens;
      }
    }
    const double w = median(warm_s), c = median(cold_s);
    std::printf("%8lld %12.4f %12.4f %10.2f %10lld\n", static_cast<long long>(answer), w, c, c / w,
                static_cast<long long>(hit));
    csv += std::to_string(answer) + "," + std::to_string(w) + "," + std::to_string(c) + "," +
           std::to_string(c / w) + "," + std::to_string(hit) + "\n";
  }
  if (!csv_path.empty()) std::ofstream(csv_path) << csv;
  return 0;
}
