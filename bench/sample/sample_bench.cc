// sample_bench: host time to sample one token from a DeepSeek-V4-sized row (vocab 129,280)
// with several parameter sets, against the ceiling of one read pass over the fp32 row (the
// least any sampler must do). Numbers, not pass/fail; it does check that every draw is a
// valid token. Usage: sample_bench [iterations]   (default 300)
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "sample/sampler.h"

namespace {

using Clock = std::chrono::steady_clock;
using deepinfer::sample::SampleContext;
using deepinfer::sample::Sampler;
using deepinfer::sample::SamplingParams;

constexpr size_t kVocab = 129280;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 300;
  if (iters <= 0) {
    std::fprintf(stderr, "sample_bench: error: iterations must be a positive integer\n");
    return 2;
  }
  // Logits shaped like a language model's: a Gaussian bulk plus a few strong candidates.
  std::mt19937 gen(2026);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> row(kVocab);
  for (float& x : row) x = normal(gen);
  for (int i = 0; i < 20; ++i) row[gen() % kVocab] += 12.0f;

  // Ceiling: one read pass over the row, best of several: an integer sum of the bit
  // patterns, a reduction the compiler vectorises, so the pass is bound by memory.
  double pass_s = 1e9;
  volatile uint32_t sink = 0;
  for (int rep = 0; rep < 50; ++rep) {
    const auto t0 = Clock::now();
    uint32_t acc = 0;
    for (float x : row) acc += std::bit_cast<uint32_t>(x);
    sink = sink + acc;
    pass_s = std::min(pass_s, seconds_since(t0));
  }
  std::printf("vocab %zu, fp32 row %.0f KiB, one read pass %.1f us (ceiling)\n", kVocab,
              kVocab * 4 / 1024.0, pass_s * 1e6);

  struct Case {
    const char* name;
    SamplingParams params;
  };
  std::vector<Case> cases;
  {
    SamplingParams p;
    p.temperature = 0.0f;
    cases.push_back({"greedy", p});
  }
  cases.push_back({"temperature 1 (no filter)", SamplingParams{}});
  {
    SamplingParams p;
    p.temperature = 0.7f;
    p.top_p = 0.9f;
    cases.push_back({"T 0.7, top_p 0.9", p});
  }
  {
    SamplingParams p;
    p.temperature = 0.7f;
    p.top_k = 50;
    cases.push_back({"T 0.7, top_k 50", p});
  }
  {
    SamplingParams p;
    p.temperature = 0.7f;
    p.top_p = 0.9f;
    p.logprobs = 5;
    cases.push_back({"T 0.7, top_p 0.9, logprobs 5", p});
  }

  Sampler sampler;
  for (const Case& c : cases) {
    SampleContext ctx;
    ctx.params = &c.params;
    double best = 1e9, total = 0.0;
    for (int i = 0; i < iters; ++i) {
      ctx.key = {7, static_cast<uint64_t>(i), 0};
      const auto t0 = Clock::now();
      auto r = sampler.sample(row, ctx);
      const double dt = seconds_since(t0);
      if (!r.ok() || r->token < 0 || static_cast<size_t>(r->token) >= kVocab) {
        std::fprintf(stderr, "sample_bench: error: %s: bad draw\n", c.name);
        return 1;
      }
      best = std::min(best, dt);
      total += dt;
    }
    std::printf("%-32s mean %8.1f us  best %8.1f us  = %5.1fx one pass\n", c.name,
                total / iters * 1e6, best * 1e6, best / pass_s);
  }
  return 0;
}
