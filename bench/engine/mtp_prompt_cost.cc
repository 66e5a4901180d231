// What MTP speculation adds to a prompt's first token: one request, greedy, max_tokens 1, on a
// DeepSeek-V4 checkpoint with an MTP block (models/v4-small by default), with
// speculative_method "mtp" (k = 3, fixed) against the same request without speculation in the
// same run (the peer). The MTP block must take the prompt's hidden rows and run its layer over
// them before it drafts; since stop 45 it takes only the last window of them
// (model::SequenceSpan::hidden_tail), which is all its state depends on.
//
//   mtp_prompt_cost [--model DIR] [--lengths 256,1024,3072] [--repeats 5] [--csv OUT]
//
// Prints per prompt length the median seconds of each form and their ratio (mtp / off; 1.0 is
// free). Each repeat's prompt is new random ids, so no prefix-cache hit. A benchmark, not a
// test: it never fails on time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_args.h"
#include "deepinfer/engine.h"

namespace {

namespace bench = deepinfer::bench;
using deepinfer::Engine;
using deepinfer::EngineOptions;
using deepinfer::SamplingParams;

struct Options {
  std::string model = std::string(DEEPINFER_BENCH_SOURCE_DIR) + "/models/v4-small";
  std::vector<int64_t> lengths = {256, 1024, 3072};
  int repeats = 5;
  std::string csv;
};


std::unique_ptr<Engine> make_engine(const Options& opt, bool mtp, int64_t longest) {
  EngineOptions o;
  o.model_dir = opt.model;
  o.max_model_len = longest + 16;
  o.max_num_batched_tokens = longest + 16;  // the whole prompt in one step
  if (mtp) {
    o.speculative_method = "mtp";
    o.num_speculative_tokens = 3;
  }
  auto e = Engine::create(o);
  if (!e.ok()) {
    std::fprintf(stderr, "mtp_prompt_cost: %s\n", e.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(*e);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* name) { return bench::flag_value(argv[i], name); };
    if (const char* model = arg("--model")) {
      opt.model = model;
    } else if (const char* lengths = arg("--lengths")) {
      opt.lengths = bench::int_list(lengths);
    } else if (const char* repeats = arg("--repeats")) {
      opt.repeats = std::max(1, std::atoi(repeats));
    } else if (const char* csv_path = arg("--csv")) {
      opt.csv = csv_path;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--model=DIR] [--lengths=256,1024,3072] [--repeats=5] [--csv=OUT]\n",
                   argv[0]);
      return 2;
    }
  }
  if (opt.lengths.empty()) return 2;
  const int64_t longest = *std::max_element(opt.lengths.begin(), opt.lengths.end());
  std::unique_ptr<Engine> engines[2] = {make_engine(opt, false, longest),
                                        make_engine(opt, true, longest)};
  SamplingParams params;
  params.temperature = 0;
  params.max_tokens = 1;
  params.ignore_eos = true;
  std::mt19937 rng(45);
  std::uniform_int_distribution<int32_t> id(100, 4000);
  std::printf("model %s, one request, greedy, max_tokens 1; mtp: k = 3 fixed; peer: no "
              "speculation, same run\n",
              opt.model.c_str());
  std::printf("%8s %12s %12s %10s\n", "prompt", "off s", "mtp s", "mtp/off");
  std::string csv = "prompt_tokens,off_seconds,mtp_seconds,ratio\n";
  for (const int64_t len : opt.lengths) {
    std::vector<double> seconds[2];
    for (int rep = 0; rep <= opt.repeats; ++rep) {  // rep 0 warms up, uncounted
      for (int form = 0; form < 2; ++form) {
        std::vector<int32_t> prompt(static_cast<size_t>(len));
        for (int32_t& t : prompt) t = id(rng);
        const auto t0 = std::chrono::steady_clock::now();
        if (!engines[form]->submit(prompt, params).ok()) return 1;
        for (const auto& out : engines[form]->run_until_done()) {
          if (!out.error.empty()) {
            std::fprintf(stderr, "mtp_prompt_cost: %s\n", out.error.c_str());
            return 1;
          }
        }
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (rep > 0) seconds[form].push_back(s);
      }
    }
    const double off = median(seconds[0]), mtp = median(seconds[1]);
    std::printf("%8lld %12.4f %12.4f %10.3f\n", static_cast<long long>(len), off, mtp, mtp / off);
    csv += std::to_string(len) + "," + std::to_string(off) + "," + std::to_string(mtp) + "," +
           std::to_string(mtp / off) + "\n";
  }
  if (!opt.csv.empty()) std::ofstream(opt.csv) << csv;
  return 0;
}
