// Host time of a whole engine step, and the executor's wait for the host (the "gap"), at 1, 64
// and 256 running requests, on the embedded default model's configuration and tokenizer
// (models/default: vocab 8192) with a stand-in for the model forward: random logits of the real
// vocabulary size (so sampling, stop checks and detokenization do their real work) and a
// fixed device time (--device-us, default 2000 us: the V4-Flash batch-1 decode floor of
// docs/engine.md) during which the stand-in sleeps, as the CPU thread would while a GPU runs.
//
//   step_host_time [--model DIR] [--steps N] [--device-us US] [--real-steps N]
//                  [--sampling-threads N] [--csv OUT] [--json OUT]
//
// Figures per step, for synchronous and asynchronous scheduling (EngineStats deltas):
//   host_us   engine thread: schedule + prepare inputs + stop checks + detokenize + callbacks
//             + Scheduler::update (waits for the executor excluded)
//   sample_us sampling + structured masks (on the executor: host CPU work in both modes)
//   gap_us    executor idle between two steps waiting for the host; asynchronous scheduling
//             hides host_us under the device step, so only the placeholder fill remains
// Each is printed next to two ceilings as a ratio: the 2 ms V4-Flash floor, and the measured
// CPU forward of models/default at the same batch (real Model::forward, --real-steps decode
// steps). A benchmark, not a test: it never fails on time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine_core.h"

namespace {

using deepinfer::EngineOptions;
using deepinfer::SamplingParams;
using deepinfer::runtime::EngineCore;
using Clock = std::chrono::steady_clock;
namespace v4 = deepinfer::model;

constexpr double kFloorUs = 2000.0;  // V4-Flash batch-1 decode weight-read floor on one H200

struct Options {
  std::string model = std::string(DEEPINFER_BENCH_SOURCE_DIR) + "/models/default";
  int steps = 300;
  double device_us = kFloorUs;
  int real_steps = 8;
  int sampling_threads = 0;  // EngineOptions::sampling_threads (0: automatic)
  std::string csv, json;
};

struct Row {
  int running = 0;
  bool async = false;
  double host_us = 0, sample_us = 0, gap_us = 0, requests_per_step = 0, cpu_forward_us = 0;
};

std::unique_ptr<EngineCore> make_core(const Options& opt, int n, bool async) {
  EngineOptions o;
  o.model_dir = opt.model;
  o.max_num_seqs = n;
  o.max_num_batched_tokens = n + 256;  // every decode plus one prefill chunk
  o.max_model_len = 1024;
  o.num_threads = 1;
  o.async_scheduling = async;
  o.sampling_threads = opt.sampling_threads;
  auto core = EngineCore::create(o);
  if (!core.ok()) {
    std::fprintf(stderr, "step_host_time: %s\n", core.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(*core);
}

// Keeps `n` requests live: seeded top-p sampling, a stop string (the stop checker scans every
// delta), 64..256 outputs, prompts of 16..128 random tokens.
struct Load {
  std::mt19937 rng{7};
  int64_t live = 0;
  uint64_t next_seed = 1;
  void top_up(EngineCore& core, int n) {
    while (live < n) {
      std::vector<int32_t> prompt(std::uniform_int_distribution<size_t>(16, 128)(rng));
      for (auto& t : prompt) {
        t = std::uniform_int_distribution<int32_t>(
            2, static_cast<int32_t>(core.vocab_size()) - 1)(rng);
      }
      SamplingParams p;
      p.temperature = 0.8f;
      p.top_p = 0.95f;
      p.max_tokens = std::uniform_int_distribution<int32_t>(64, 256)(rng);
      p.ignore_eos = true;
      p.seq_seed = next_seed++;
      p.stop = {"\n\n\n\n"};
      if (!core.submit(prompt, {}, p, {}).ok()) std::exit(1);
      ++live;
    }
  }
  void step(EngineCore& core) { live -= static_cast<int64_t>(core.step().size()); }
};

Row measure(const Options& opt, int n, bool async) {
  auto core = make_core(opt, n, async);
  const int64_t V = core->vocab_size();
  const auto device = std::chrono::duration<double, std::micro>(opt.device_us);
  std::mt19937 lrng(3);
  int64_t rows_sum = 0;
  core->replace_forward_for_benchmark([&](const v4::StepInputs& in, v4::StepOutputs& out) {
    const auto t0 = Clock::now();
    int64_t rows = 0;
    for (const auto& s : in.sequences) rows += s.logits == v4::LogitsWanted::kNone ? 0 : 1;
    const size_t need = static_cast<size_t>(rows * V);
    if (out.logits.size() < need) {  // random rows once; sampling keys differ every step
      std::normal_distribution<float> nd(0.0f, 3.0f);
      const size_t old = out.logits.size();
      out.logits.resize(need);
      for (size_t i = old; i < need; ++i) out.logits[i] = nd(lrng);
    }
    out.logit_rows = rows;
    rows_sum += static_cast<int64_t>(in.sequences.size());
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(device));
    return deepinfer::Status::ok_status();
  });
  Load load;
  const int warmup = 60;
  deepinfer::EngineStats before{};
  int64_t rows_before = 0;
  for (int i = 0; i < warmup + opt.steps; ++i) {
    if (i == warmup) {
      before = core->stats();
      rows_before = rows_sum;
    }
    load.top_up(*core, n);
    load.step(*core);
  }
  const deepinfer::EngineStats& after = core->stats();
  const double steps = static_cast<double>(std::max<int64_t>(1, after.steps - before.steps));
  Row r;
  r.running = n;
  r.async = async;
  r.host_us = 1e6 * (after.host_seconds - before.host_seconds) / steps;
  r.sample_us = 1e6 * (after.sample_seconds - before.sample_seconds) / steps;
  r.gap_us = 1e6 * (after.gap_seconds - before.gap_seconds) / steps;
  r.requests_per_step = static_cast<double>(rows_sum - rows_before) / steps;
  return r;
}

// The real CPU forward of the model at batch n: n requests decoding (after their prefill).
double cpu_forward_us(const Options& opt, int n) {
  auto core = make_core(opt, n, /*async=*/false);
  Load load;
  load.top_up(*core, n);
  for (int i = 0; i < 4 + (n * 128) / (n + 256); ++i) load.step(*core);  // prefill
  const deepinfer::EngineStats before = core->stats();
  for (int i = 0; i < opt.real_steps; ++i) load.step(*core);
  const deepinfer::EngineStats& after = core->stats();
  return 1e6 * (after.forward_seconds - before.forward_seconds) /
         static_cast<double>(std::max<int64_t>(1, after.steps - before.steps));
}

// Real CPU model, fixed work: n concurrent requests (32-token prompts, 32 greedy tokens each,
// ignore_eos). Returns output tokens/s; `tokens` gets every output, to compare modes.
double throughput(const Options& opt, int n, bool async,
                  std::vector<std::vector<int32_t>>& tokens) {
  auto core = make_core(opt, n, async);
  std::mt19937 rng(11);
  std::vector<deepinfer::RequestHandle> hs;
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 32;
  p.ignore_eos = true;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> prompt(32);
    for (auto& t : prompt) t = std::uniform_int_distribution<int32_t>(2, 8000)(rng);
    hs.push_back(*core->submit(prompt, {}, p, {}));
  }
  const auto t0 = Clock::now();
  std::vector<deepinfer::RequestOutput> outs;
  while (core->has_unfinished()) {
    for (auto& o : core->step()) outs.push_back(std::move(o));
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::sort(outs.begin(), outs.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  tokens.clear();
  int64_t total = 0;
  for (const auto& o : outs) {
    tokens.push_back(o.outputs[0].token_ids);
    total += static_cast<int64_t>(o.outputs[0].token_ids.size());
  }
  return static_cast<double>(total) / s;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* a = argv[i];
    const char* v = nullptr;
    if (std::strcmp(a, "--model") == 0 && (v = next()))
      opt.model = v;
    else if (std::strcmp(a, "--steps") == 0 && (v = next()))
      opt.steps = std::max(1, std::atoi(v));
    else if (std::strcmp(a, "--device-us") == 0 && (v = next()))
      opt.device_us = std::atof(v);
    else if (std::strcmp(a, "--real-steps") == 0 && (v = next()))
      opt.real_steps = std::atoi(v);
    else if (std::strcmp(a, "--sampling-threads") == 0 && (v = next()))
      opt.sampling_threads = std::max(0, std::atoi(v));
    else if (std::strcmp(a, "--csv") == 0 && (v = next()))
      opt.csv = v;
    else if (std::strcmp(a, "--json") == 0 && (v = next()))
      opt.json = v;
    else {
      std::fprintf(stderr,
                   "usage: step_host_time [--model DIR] [--steps N] [--device-us US] "
                   "[--real-steps N] [--sampling-threads N] [--csv OUT] [--json OUT]\n");
      return 2;
    }
  }
  std::printf("host time per engine step, %s, stand-in forward = random logits + %.0f us device\n",
              opt.model.c_str(), opt.device_us);
  std::printf(
      "ceilings: floor = %.0f us (V4-Flash batch-1 decode), cpu_fwd = measured CPU forward "
      "of the model at that batch\n\n",
      kFloorUs);
  std::printf("%7s %5s %6s %9s %9s %9s %8s %10s %11s %10s\n", "running", "mode", "req/st",
              "host_us", "sample_us", "gap_us", "cpu_fwd", "host/floor", "host/cpu_fwd",
              "gap/floor");
  std::vector<Row> rows;
  for (const int n : {1, 64, 256}) {
    const double fwd = opt.real_steps > 0 ? cpu_forward_us(opt, n) : 0.0;
    for (const bool async : {false, true}) {
      Row r = measure(opt, n, async);
      r.cpu_forward_us = fwd;
      const double host = r.host_us + r.sample_us;
      std::printf("%7d %5s %6.1f %9.1f %9.1f %9.1f %8.0f %9.3fx %10.3fx %9.3fx\n", n,
                  async ? "async" : "sync", r.requests_per_step, r.host_us, r.sample_us, r.gap_us,
                  fwd, host / kFloorUs, fwd > 0 ? host / fwd : 0.0, r.gap_us / kFloorUs);
      rows.push_back(r);
    }
  }
  std::printf("\nreal CPU model (%s), n concurrent x 32 greedy tokens, output tokens/s\n",
              opt.model.c_str());
  std::printf("%7s %10s %10s %7s %10s\n", "requests", "sync", "async", "ratio", "identical");
  struct Tput {
    int n;
    double sync, async;
    bool same;
  };
  std::vector<Tput> tputs;
  for (const int n : {1, 16, 64}) {
    if (opt.real_steps <= 0) break;
    std::vector<std::vector<int32_t>> a, b;
    const double ts = throughput(opt, n, false, a);
    const double ta = throughput(opt, n, true, b);
    tputs.push_back({n, ts, ta, a == b});
    std::printf("%7d %10.1f %10.1f %6.3fx %10s\n", n, ts, ta, ta / ts, a == b ? "yes" : "NO");
  }
  if (!opt.csv.empty()) {
    std::ofstream out(opt.csv);
    out << "running,mode,requests_per_step,host_us,sample_us,gap_us,cpu_forward_us,floor_us\n";
    for (const Row& r : rows) {
      out << r.running << ',' << (r.async ? "async" : "sync") << ',' << r.requests_per_step << ','
          << r.host_us << ',' << r.sample_us << ',' << r.gap_us << ',' << r.cpu_forward_us << ','
          << kFloorUs << '\n';
    }
  }
  if (!opt.json.empty()) {
    std::ofstream out(opt.json);
    out << "[\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << "  {\"running\": " << r.running << ", \"mode\": \"" << (r.async ? "async" : "sync")
          << "\", \"requests_per_step\": " << r.requests_per_step << ", \"host_us\": " << r.host_us
          << ", \"sample_us\": " << r.sample_us << ", \"gap_us\": " << r.gap_us
          << ", \"cpu_forward_us\": " << r.cpu_forward_us << ", \"floor_us\": " << kFloorUs << "}"
          << (i + 1 < rows.size() ? ",\n" : "\n");
    }
    out << "]\n";
  }
  if (!opt.csv.empty() && !tputs.empty()) {
    std::ofstream out(opt.csv + ".throughput.csv");
    out << "requests,sync_tok_s,async_tok_s,ratio,identical\n";
    for (const Tput& t : tputs) {
      out << t.n << ',' << t.sync << ',' << t.async << ',' << t.async / t.sync << ','
          << (t.same ? 1 : 0) << '\n';
    }
  }
  for (const Tput& t : tputs) {
    if (!t.same) return 1;  // a correctness failure, not a timing one
  }
  return 0;
}
