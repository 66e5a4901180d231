// Speculative decoding's step costs on the CUDA backend: what one batched draft (DSpark:
// Model::dspark_draft_all; MTP: the engine's chain of Model::mtp_step) and one verify step cost
// against the decode step they replace, at several batch sizes (not a test; never fails on time).
//
//   draft_bench --model DIR [--batches 1,16,64] [--k 5] [--context 64] [--reps 20]
//               [--out results.json] [--profile]
//
// Per batch N (N sequences of --context random prompt tokens each):
//   * draft ms: one batched draft of k tokens for all N sequences, wall-clock, mean of --reps.
//     DSpark: one dspark_draft_all of N blocks of k positions (tokens and confidences only, as
//     the engine asks). MTP (DeepSeek-V4): what the engine's MtpDrafter runs per step, one
//     Model::mtp_chain of k block steps over the N sequences: the catch-up step (here one row
//     per sequence: the verify step before accepted nothing) whose argmax is the first draft,
//     then k - 1 chained steps on the block's own streams, the drafts drawn and fed on the GPU;
//     then the MTP state cut back. "-" for a model without a drafter;
//   * MTP also prints the same chain made step by step (Model::mtp_step: ids and streams to the
//     host and back after every step; the engine's drafter before mtp_chain), in its own table;
//   * draft eager ms: the same draft with CUDA-graph replay off (CudaOps::set_replay(false):
//     every op launched from the host, the padded step form unchanged): the graphs' A/B;
//   * decode ms: one plain decode step of N rows (one token per sequence, the last row drawn on
//     the GPU: the engine's plain step), the peer: drafting pays when the accepted tokens per
//     verify step exceed (verify + draft) / decode;
//   * verify ms: one step of N·(k + 1) rows, every row drawn on the GPU (the engine's fixed-k
//     verify step);
//   * break-even acceptance = (verify + draft) / decode, the tokens per step a drafter must
//     average to match plain decoding at this batch (what the varlen controller weighs).
// Then, per batch, this library's kernel launches of one draft, decode step and verify step
// (kernels::cuda::kernel_launches() over one more run of each with replay off; cuBLAS calls not
// counted): what a launch-bound step costs is mostly how many there are.
// --fused-act-quant, --unfused-small-ops, --ungrouped-linear, --hc-dot-tokens=N (1-1024),
// --sample-cluster=N (1, 2, 4, 8), --pageable-outputs, --sparse-16-head, --staged-sparse-split: the CudaOps A/B switches
// (backend_switches.h says what each does).
// --profile: one more draft, decode step and verify step each through backend::ProfilingOps
// (every op synchronised and timed, so nothing is recorded as a CUDA graph; each profiled once
// after an untimed eager run); the gap between an op sum and its wall time is host work and
// copies.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/device.h"
#include "backend/profiling_ops.h"
#include "backend_switches.h"
#include "kernels/cuda/launch.h"
#include "launch_report.h"
#include "model/model.h"
#include "sample/sample_spec.h"

namespace {

using Clock = std::chrono::steady_clock;
using deepinfer::model::DSparkJob;
using deepinfer::model::LogitsWanted;
using deepinfer::model::Model;
using deepinfer::model::SequenceCache;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(std::stoi(x));
  return v;
}

// One step of `per` rows per sequence (tokens from `rng`), rolled back afterwards so every rep
// starts from the same caches. Every logits row (the last of a decode span, all of a verify
// span) is drawn greedily on the backend, as the engine's steps are: no logits leave the GPU.
double timed_step(Model& m, std::vector<SequenceCache>& seqs, int64_t per, std::mt19937& rng) {
  const int64_t V = m.vocab_size();
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(V - 1));
  std::vector<int32_t> ids, pos;
  std::vector<deepinfer::model::SequenceSpan> spans;
  for (SequenceCache& s : seqs) {
    deepinfer::model::SequenceSpan sp;
    sp.cache = &s;
    sp.begin = static_cast<int64_t>(ids.size());
    sp.count = per;
    sp.logits = per > 1 ? LogitsWanted::kAll : LogitsWanted::kLast;
    for (int64_t j = 0; j < per; ++j) {
      ids.push_back(tok(rng));
      pos.push_back(static_cast<int32_t>(s.length() + j));
    }
    spans.push_back(sp);
  }
  const std::vector<deepinfer::sample::SampleSpec> specs(per > 1 ? ids.size() : seqs.size());
  deepinfer::model::StepInputs in;
  in.token_ids = ids;
  in.positions = pos;
  in.sequences = spans;
  in.sample_specs = specs;
  deepinfer::model::StepOutputs out;
  const auto t0 = Clock::now();
  const auto st = m.forward(in, out);
  const double ms = ms_since(t0);
  if (!st.ok()) {
    std::fprintf(stderr, "forward: %s\n", st.message().c_str());
    std::exit(1);
  }
  for (SequenceCache& s : seqs) {
    if (!s.rollback(per).ok()) std::exit(1);
  }
  return ms;
}

// The MTP drafts of every sequence (see the header): k block steps, then the MTP state back
// to one behind the sequence. `last`: each sequence's final streams of its last position;
// `next`: the token after it (the verify step's bonus token). `stepwise`: step by step through
// mtp_step instead of the engine's one mtp_chain.
void mtp_chain(Model& m, std::vector<SequenceCache>& seqs, const std::vector<std::vector<float>>& last,
               const std::vector<int32_t>& next, int k, bool stepwise) {
  using deepinfer::model::MtpOutputs;
  using deepinfer::model::MtpRows;
  const size_t N = seqs.size();
  std::vector<MtpRows> rows;
  for (size_t i = 0; i < N; ++i) rows.push_back({&seqs[i], last[i], {&next[i], 1}});
  if (!stepwise) {
    auto chain = m.mtp_chain(rows, k, /*run_ahead=*/false, /*probs=*/false);
    if (!chain.ok()) {
      std::fprintf(stderr, "mtp chain: %s\n", chain.status().message().c_str());
      std::exit(1);
    }
    for (SequenceCache& s : seqs) {
      if (!s.truncate_draft(s.length() - 1).ok()) std::exit(1);
    }
    return;
  }
  auto step = m.mtp_step(rows, /*run_ahead=*/false, MtpOutputs::kTokens);
  std::vector<std::vector<float>> from(N);
  std::vector<int32_t> prev(N);
  const size_t S = step.ok() ? step->streams.size() / N : 0;
  for (int d = 1; d < k && step.ok(); ++d) {
    for (size_t i = 0; i < N; ++i) {
      from[i].assign(step->streams.begin() + static_cast<std::ptrdiff_t>(i * S),
                     step->streams.begin() + static_cast<std::ptrdiff_t>((i + 1) * S));
      prev[i] = step->tokens[i];
      rows[i] = {&seqs[i], from[i], {&prev[i], 1}};
    }
    step = m.mtp_step(rows, /*run_ahead=*/true, MtpOutputs::kTokens);
  }
  if (!step.ok()) {
    std::fprintf(stderr, "mtp draft: %s\n", step.status().message().c_str());
    std::exit(1);
  }
  for (SequenceCache& s : seqs) {
    if (!s.truncate_draft(s.length() - 1).ok()) std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, out_path, batches_s = "1,16,64";
  int k = 5, context = 64, reps = 20;
  bool profile = false;
  deepinfer::bench::BackendSwitches switches;  // backend_switches.h
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--model") model_dir = next();
    else if (a == "--batches") batches_s = next();
    else if (a == "--k") k = std::stoi(next());
    else if (a == "--context") context = std::stoi(next());
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--out") out_path = next();
    else if (a == "--profile") profile = true;
    else if (switches.parse(a))
      continue;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (model_dir.empty()) {
    std::fprintf(stderr, "usage: draft_bench --model DIR [--batches 1,16,64] [--k 5] [--out F]\n");
    return 2;
  }
  if (auto s = deepinfer::backend::cuda::cuda_available(); !s.ok()) {
    std::printf("SKIPPED: %s\n", s.message().c_str());
    return 77;
  }
  auto gpu = deepinfer::backend::cuda::CudaOps::create(0, false, 256);
  if (!gpu.ok()) return 1;
  switches.apply(**gpu);
  deepinfer::backend::ProfilingOps prof(**gpu);
  prof.set_enabled(false);
  auto loaded = deepinfer::model::load_model(model_dir, prof);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().message().c_str());
    return 1;
  }
  Model& m = **loaded;
  const bool dspark = m.drafter() == deepinfer::model::DrafterKind::kDSpark;
  const bool mtp = m.drafter() == deepinfer::model::DrafterKind::kMtp;
  const bool drafts = dspark || mtp;
  if (dspark) k = std::min(k, static_cast<int>(m.config().dspark.block_size));
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(m.vocab_size() - 1));
  std::ostringstream json;
  json << "{\"model\": \"" << model_dir << "\", \"k\": " << k << ", \"batches\": [";
  std::printf("%-6s %10s %15s %10s %10s %14s %14s\n", "batch", "draft ms", "draft eager ms",
              "decode ms", "verify ms", "draft/decode", "break-even τ");
  std::vector<std::string> profiles, stepwise_lines, launch_lines;
  bool first = true;
  for (const int N : parse_list(batches_s)) {
    std::vector<SequenceCache> seqs;
    // MTP: each sequence's last final streams and the token after them; the block one
    // position behind the sequence, as in the engine.
    std::vector<std::vector<float>> last(static_cast<size_t>(N));
    std::vector<int32_t> next(static_cast<size_t>(N));
    for (int s = 0; s < N; ++s) {
      seqs.push_back(m.new_sequence());
      std::vector<int32_t> ids(static_cast<size_t>(context));
      for (int32_t& t : ids) t = tok(rng);
      auto o = m.extend(seqs.back(), ids, LogitsWanted::kNone, /*keep_hidden=*/mtp);
      if (!o.ok()) return 1;
      if (mtp) {
        const size_t S = o->hidden.size() / static_cast<size_t>(context);
        last[static_cast<size_t>(s)].assign(o->hidden.end() - static_cast<std::ptrdiff_t>(S),
                                            o->hidden.end());
        next[static_cast<size_t>(s)] = tok(rng);
        const std::span<const float> rows(o->hidden.data(), S * static_cast<size_t>(context - 1));
        if (!m.mtp_draft(seqs.back(), rows, std::span<const int32_t>(ids).subspan(1)).ok()) return 1;
      }
    }
    std::vector<DSparkJob> jobs;
    for (SequenceCache& s : seqs) jobs.push_back({&s, tok(rng), {}, {}});
    const auto draft_once = [&] {
      if (dspark) {
        auto d = m.dspark_draft_all(jobs, k, /*logits=*/false);
        if (!d.ok()) {
          std::fprintf(stderr, "draft: %s\n", d.status().message().c_str());
          std::exit(1);
        }
      } else if (mtp) {
        mtp_chain(m, seqs, last, next, k, /*stepwise=*/false);
      }
    };
    double draft = 0, draft_eager = 0, decode = 0, verify = 0, stepwise = 0;
    for (int r = -2; r < reps; ++r) {  // two warm-up reps (graph capture, buffer growth)
      auto t0 = Clock::now();
      draft_once();
      const double ms = ms_since(t0);
      (*gpu)->set_replay(false);
      t0 = Clock::now();
      draft_once();
      const double eager_ms = ms_since(t0);
      (*gpu)->set_replay(true);
      double step_ms = 0;
      if (mtp) {
        t0 = Clock::now();
        mtp_chain(m, seqs, last, next, k, /*stepwise=*/true);
        step_ms = ms_since(t0);
      }
      const double dec = timed_step(m, seqs, 1, rng);
      const double ver = timed_step(m, seqs, k + 1, rng);
      if (r >= 0) {
        draft += ms / reps;
        draft_eager += eager_ms / reps;
        stepwise += step_ms / reps;
        decode += dec / reps;
        verify += ver / reps;
      }
    }
    // This library's kernel launches of each (counted over one more run of it with replay off:
    // a graph replays the kernels its capture launched; cuBLAS calls are not counted).
    const auto launches_of = [&](const std::function<void()>& run) {
      (*gpu)->set_replay(false);
      const uint64_t l0 = deepinfer::kernels::cuda::kernel_launches();
      run();
      const uint64_t n = deepinfer::kernels::cuda::kernel_launches() - l0;
      (*gpu)->set_replay(true);
      return n;
    };
    const uint64_t draft_launches = drafts ? launches_of(draft_once) : 0;
    const uint64_t decode_launches = launches_of([&] { timed_step(m, seqs, 1, rng); });
    const uint64_t verify_launches = launches_of([&] { timed_step(m, seqs, k + 1, rng); });
    launch_lines.push_back("batch " + std::to_string(N) + ": kernel launches (this library's, " +
                           "cuBLAS not counted): draft " + std::to_string(draft_launches) +
                           ", decode step " + std::to_string(decode_launches) + ", verify step " +
                           std::to_string(verify_launches));
    if (launch_lines.size() == 1) {  // the first batch: which kernels those launches are
      const auto by_kernel = [&](const std::string& what, const std::function<void()>& run) {
        (*gpu)->set_replay(false);
        launch_lines.push_back("  launches by kernel, " + what + " at batch " + std::to_string(N) +
                               ":");
        for (auto& l : deepinfer::bench::launches_by_kernel(run, 1, 30)) {
          launch_lines.push_back("  " + l);
        }
        (*gpu)->set_replay(true);
      };
      if (drafts) by_kernel("draft", draft_once);
      by_kernel("decode step", [&] { timed_step(m, seqs, 1, rng); });
      by_kernel("verify step", [&] { timed_step(m, seqs, k + 1, rng); });
    }
    const double even = (verify + draft) / decode;
    if (drafts) {
      std::printf("%-6d %10.3f %15.3f %10.3f %10.3f %14.2f %14.2f\n", N, draft, draft_eager,
                  decode, verify, draft / decode, even);
    } else {  // no draft timed: the break-even leaves drafting out (a lower bound)
      std::printf("%-6d %10s %15s %10.3f %10.3f %14s %13.2f*\n", N, "-", "-", decode, verify, "-",
                  even);
    }
    json << (first ? "" : ", ") << "{\"batch\": " << N << ", \"draft_ms\": " << draft
         << ", \"draft_eager_ms\": " << draft_eager << ", \"draft_stepwise_ms\": " << stepwise
         << ", \"decode_ms\": " << decode << ", \"verify_ms\": " << verify
         << ", \"draft_over_decode\": " << draft / decode << ", \"break_even_tokens\": " << even
         << ", \"draft_launches\": " << draft_launches
         << ", \"decode_launches\": " << decode_launches
         << ", \"verify_launches\": " << verify_launches << "}";
    first = false;
    if (mtp) {
      stepwise_lines.push_back("batch " + std::to_string(N) + ": MTP chain step by step (mtp_step, " +
                               "host round trip per draft) " + std::to_string(stepwise) +
                               " ms against mtp_chain " + std::to_string(draft) + " ms");
    }
    if (profile) {
      const auto profiled = [&](const std::string& what, const std::function<void()>& run) {
        // Profiled ops run eagerly: the first eager run of a shape pays its one-time setup
        // (cuBLAS plans, buffer growth), so it runs once before the one reported.
        prof.set_enabled(true);
        run();
        prof.reset();
        const auto t0 = Clock::now();
        run();
        const double wall = ms_since(t0);
        prof.set_enabled(false);
        profiles.push_back("batch " + std::to_string(N) + ": profiled " + what + ", wall " +
                           std::to_string(wall) + " ms");
        for (const auto& line : prof.report()) profiles.push_back("  " + line);
      };
      if (drafts) profiled("draft", draft_once);
      profiled("decode step", [&] { timed_step(m, seqs, 1, rng); });
      profiled("verify step (" + std::to_string(k + 1) + " rows per sequence)",
               [&] { timed_step(m, seqs, k + 1, rng); });
    }
  }
  json << "]}";
  if (!drafts) std::printf("* verify / decode only: this model has no drafter\n");
  for (const auto& l : stepwise_lines) std::printf("%s\n", l.c_str());
  for (const auto& l : launch_lines) std::printf("%s\n", l.c_str());
  for (const auto& l : profiles) std::printf("%s\n", l.c_str());
  if (!out_path.empty()) std::ofstream(out_path) << json.str() << "\n";
  return 0;
}
