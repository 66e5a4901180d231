// The DeepSeek-V4 / V4.1 model on the CUDA backend at Flash shapes: load, prefill and decode steps,
// each figure next to its floor on this card (not a test; never fails on time).
//
//   decode_bench --model DIR [--batches 1,16,128,256] [--context 64] [--steps 8]
//                [--prefill 4096] [--out results.json] [--profile] [--batch-invariant]
//                [--graph-max-rows 256] [--verify-rows 2,4,6] [--mtp]
//
// --graph-max-rows: what DEEPINFER_CUDA_GRAPH_MAX_ROWS selects (0 = no CUDA graphs). With
// graphs, every batch is timed twice in the same run: replaying the graphs, and with replay off
// (CudaOps::set_replay(false): the same padded step form, every op launched eagerly), so the
// graphs' gain is a same-run A/B. A third timing draws the tokens on the GPU (Model::forward
// with StepInputs::sample_specs: temperature 0.8, top-k 50) so only token ids come back,
// against the default's copy of every logits row to the host (which the engine then samples).
// --batch-invariant: the CUDA backend's batch-invariant mode (what DEEPINFER_BATCH_INVARIANT=1
// selects), to show what it costs.
// --profile: after each batch's timed steps, one more step through backend::ProfilingOps
// (every op synchronised and timed) prints where the step's time goes, op by op.
//
// DIR is a checkpoint in the official layout, typically the V4-Flash-shaped random one of
// tools/gpu/make_synthetic_v4.py or the V4.1-Flash-shaped one of make_synthetic_v41.py (real
// dimensions, the first few layers; V4.1's Engram tables in host memory, not counted in the
// floor: a step reads a few rows of them per token).
//
// Ceilings, measured in the same run:
//   * copy bandwidth: a 2 GiB device-to-device cudaMemcpy (bytes read + written) / time;
//   * decode floor at batch B = the weight bytes one step must read / copy bandwidth, where the
//     bytes are every non-routed-expert weight (attention, shared experts, router, mHC, norms,
//     head) plus the routed experts the step touches: per MoE layer E·(1 − (1 − k/E)^B) distinct
//     experts of E for B tokens routed uniformly at random (the synthetic router is random);
//   * prefill floor = 2 · (active weights per token) · tokens / the dense BF16 matmul rate of
//     the card (--matmul-tflops, default 780: measured on an H200 of this workplace,
//     docs/cuda_backend.md); the FP8 tensor-core rate would halve it.
// Each sequence of a decode batch first gets --context prompt tokens (one batched prefill
// step), so attention reads a window and compressed rows as in serving. Timings are wall-clock
// around Model::forward, which ends with the logits' copy to the host (a full synchronisation).
#include <cuda_runtime_api.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/device.h"
#include "backend/profiling_ops.h"
#include "io/checkpoint.h"
#include "model/model.h"

namespace {

using Clock = std::chrono::steady_clock;

// The values of Model::host_counters (V4.1: Engram gather seconds, bytes sent, gathers).
std::vector<double> host_counter_values(const deepinfer::model::Model& m) {
  std::vector<double> v;
  for (const auto& [name, value] : m.host_counters()) v.push_back(value);
  return v;
}
using deepinfer::model::LogitsWanted;
using deepinfer::model::Model;
using deepinfer::model::SequenceCache;
using deepinfer::model::SequenceSpan;
using deepinfer::model::StepInputs;
using deepinfer::model::StepOutputs;

double seconds(Clock::time_point a) {
  return std::chrono::duration<double>(Clock::now() - a).count();
}

double peak_rss_gib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / (1024.0 * 1024.0);
}

double measure_copy_gbps() {
  const size_t bytes = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  DI_CUDA_CHECK(cudaMalloc(&a, bytes));
  DI_CUDA_CHECK(cudaMalloc(&b, bytes));
  DI_CUDA_CHECK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  DI_CUDA_CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  cudaEventRecord(e0);
  const int reps = 10;
  for (int i = 0; i < reps; ++i) DI_CUDA_CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * static_cast<double>(bytes) * reps / (ms * 1e-3) / 1e9;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) v.push_back(std::stoi(t));
  return v;
}

// Bytes of the weights a step must read (see the banner).
struct WeightBytes {
  double dense = 0;       // everything but routed experts (head included)
  double per_expert = 0;  // one routed expert's w1+w2+w3 (+ scales)
  int moe_layers = 0, experts = 0, top_k = 0;
  double active_params = 0;  // weights one token multiplies (for the prefill FLOPs)
  double step_bytes(int batch) const {
    const double distinct =
        experts * (1.0 - std::pow(1.0 - static_cast<double>(top_k) / experts, batch));
    return dense + moe_layers * distinct * per_expert;
  }
};

WeightBytes count_weights(const deepinfer::io::Checkpoint& ck) {
  WeightBytes w;
  const auto& c = ck.config();
  w.moe_layers = static_cast<int>(c.layers.size());
  w.experts = c.n_routed_experts;
  w.top_k = c.num_experts_per_tok;
  double expert_total = 0, expert_params = 0;
  for (const auto& e : ck.expected()) {
    const std::string& name = e.name;
    const deepinfer::io::Weight* t = ck.find(name);
    if (t == nullptr) continue;
    double b = static_cast<double>(t->data.nbytes());
    double params = static_cast<double>(t->data.numel());
    if (t->scale) b += static_cast<double>(t->scale->nbytes());
    if (t->data.dtype == deepinfer::DType::kI8 || t->data.dtype == deepinfer::DType::kU8) {
      params *= 2;  // FP4: two codes per byte
    }
    if (name.find(".ffn.experts.") != std::string::npos) {
      expert_total += b;
      expert_params += params;
    } else if (name == "embed.weight" || e.role == deepinfer::io::TensorRole::kEngramTable) {
      continue;  // a few rows per token are read (V4.1's Engram tables stay in host memory)
    } else if (e.mtp) {
      continue;  // drafter blocks (V4 MTP, V4.1 DSpark): not run by a plain decode step
    } else {
      w.dense += b;
      w.active_params += params;
    }
  }
  const double n_experts = static_cast<double>(w.moe_layers) * w.experts;
  w.per_expert = expert_total / n_experts;
  w.active_params += expert_params / n_experts * w.moe_layers * w.top_k;
  return w;
}

// A prefix-cache snapshot of a prefilled sequence (what the engine keeps at every cached block
// boundary): SequenceCache::clone copies the rings and shares the pages of compressed rows and
// index keys. Printed next to its floor (the copied bytes read + written at the copy
// bandwidth) and to a peer: one cudaMemcpy of as many bytes as every row the sequence holds,
// timed in the same run (what the unpaged clone moved, in one copy instead of one per ring and
// row list: a lower bound on its time). Returns the JSON object.
std::string snapshot_json(Model& model, const SequenceCache& seq, double copy_gbps) {
  const int reps = 10;
  const int64_t in_use0 = model.cache_memory().bytes_in_use;
  std::vector<SequenceCache> snaps;
  snaps.reserve(reps);
  snaps.push_back(seq.clone());  // warm: the pools' first pages of these sizes
  snaps.clear();
  DI_CUDA_CHECK(cudaDeviceSynchronize());
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) snaps.push_back(seq.clone());
  DI_CUDA_CHECK(cudaDeviceSynchronize());
  const double clone_ms = seconds(t0) / reps * 1e3;
  const int64_t copied = (model.cache_memory().bytes_in_use - in_use0) / reps;
  snaps.clear();
  const int64_t rows_bytes = seq.footprint_bytes();  // every readable row
  void *a = nullptr, *b = nullptr;
  DI_CUDA_CHECK(cudaMalloc(&a, static_cast<size_t>(rows_bytes)));
  DI_CUDA_CHECK(cudaMalloc(&b, static_cast<size_t>(rows_bytes)));
  DI_CUDA_CHECK(cudaMemcpy(b, a, static_cast<size_t>(rows_bytes), cudaMemcpyDeviceToDevice));
  const auto t1 = Clock::now();
  for (int i = 0; i < reps; ++i) {
    DI_CUDA_CHECK(cudaMemcpy(b, a, static_cast<size_t>(rows_bytes), cudaMemcpyDeviceToDevice));
  }
  DI_CUDA_CHECK(cudaDeviceSynchronize());
  const double deep_ms = seconds(t1) / reps * 1e3;
  DI_CUDA_CHECK(cudaFree(a));
  DI_CUDA_CHECK(cudaFree(b));
  const double floor_ms = 2.0 * static_cast<double>(copied) / (copy_gbps * 1e9) * 1e3;
  std::printf(
      "\nprefix snapshot at %lld tokens: %.3f ms, %.1f MiB copied (rings), %.1f MiB of pages "
      "shared; floor %.3f ms -> floor/ours %.3f; one cudaMemcpy of every row's bytes (%.1f MiB, "
      "what the unpaged clone moved) %.3f ms -> %.1fx\n",
      static_cast<long long>(seq.length()), clone_ms, static_cast<double>(copied) / (1 << 20),
      static_cast<double>(seq.page_bytes() - copied) / (1 << 20), floor_ms, floor_ms / clone_ms,
      static_cast<double>(rows_bytes) / (1 << 20), deep_ms, deep_ms / clone_ms);
  std::ostringstream j;
  j << "{\"tokens\": " << seq.length() << ", \"clone_ms\": " << clone_ms
    << ", \"copied_bytes\": " << copied << ", \"held_bytes\": " << seq.page_bytes()
    << ", \"floor_ms\": " << floor_ms << ", \"row_bytes\": " << rows_bytes
    << ", \"deep_copy_ms\": " << deep_ms << "}";
  return j.str();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, out_path, batches_s = "1,16,128,256", verify_rows_s;
  int context = 64, steps = 8, prefill = 4096;
  bool profile = false, batch_invariant = false, mtp = false;
  int graph_max_rows = 256;
  double matmul_tflops = 780;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--model")
      model_dir = next();
    else if (a == "--batches")
      batches_s = next();
    else if (a == "--context")
      context = std::stoi(next());
    else if (a == "--steps")
      steps = std::stoi(next());
    else if (a == "--prefill")
      prefill = std::stoi(next());
    else if (a == "--out")
      out_path = next();
    else if (a == "--matmul-tflops")
      matmul_tflops = std::stod(next());
    else if (a == "--profile")
      profile = true;
    else if (a == "--batch-invariant")
      batch_invariant = true;
    else if (a == "--graph-max-rows")
      graph_max_rows = std::stoi(next());
    else if (a == "--verify-rows")
      verify_rows_s = next();
    else if (a == "--mtp")
      mtp = true;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (model_dir.empty()) {
    std::fprintf(stderr, "usage: decode_bench --model DIR [--batches 1,16] [--out F]\n");
    return 2;
  }
  if (auto s = deepinfer::backend::cuda::cuda_available(); !s.ok()) {
    std::printf("SKIPPED: %s\n", s.message().c_str());
    return 77;
  }
  auto ck = deepinfer::io::Checkpoint::open(model_dir);
  if (!ck.ok()) {
    std::fprintf(stderr, "%s\n", ck.status().message().c_str());
    return 1;
  }
  const WeightBytes wb = count_weights(*ck);
  const double copy_gbps = measure_copy_gbps();
  std::printf(
      "copy bandwidth %.0f GB/s; weights: dense %.2f GB, %d MoE layers x %d experts of "
      "%.1f MB\n",
      copy_gbps, wb.dense / 1e9, wb.moe_layers, wb.experts, wb.per_expert / 1e6);

  auto gpu = deepinfer::backend::cuda::CudaOps::create(0, batch_invariant, graph_max_rows);
  if (!gpu.ok()) return 1;
  size_t free0 = 0, total = 0;
  cudaMemGetInfo(&free0, &total);
  const auto t_load = Clock::now();
  deepinfer::backend::ProfilingOps prof(**gpu);
  prof.set_enabled(false);
  auto loaded = deepinfer::model::load_model(model_dir, prof);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().message().c_str());
    return 1;
  }
  Model* model = loaded->get();
  const double load_s = seconds(t_load);
  size_t free1 = 0;
  cudaMemGetInfo(&free1, &total);
  std::printf("load %.1f s, GPU memory for weights %.2f GiB, host peak RSS %.2f GiB\n", load_s,
              static_cast<double>(free0 - free1) / (1 << 30), peak_rss_gib());
  const int64_t V = model->vocab_size();
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(V - 1));

  std::ostringstream json;
  json << "{\"model\": \"" << model_dir << "\", \"copy_gbps\": " << copy_gbps
       << ", \"load_s\": " << load_s << ", \"host_peak_rss_gib\": " << peak_rss_gib()
       << ", \"weights_gpu_gib\": " << static_cast<double>(free0 - free1) / (1 << 30)
       << ", \"decode\": [";

  std::printf("\n%-7s %12s %12s %14s %10s %12s %10s %14s\n", "batch", "step ms", "tok/s",
              "floor ms", "floor/ours", "eager ms", "eager/ours", "GPU-sampled ms");
  bool first = true;
  std::vector<std::string> profiles;
  for (int B : parse_list(batches_s)) {
    std::vector<SequenceCache> seqs;
    for (int b = 0; b < B; ++b) seqs.push_back(model->new_sequence());
    // Context: one batched prefill step of B x context tokens.
    std::vector<int32_t> ids, pos;
    std::vector<SequenceSpan> spans;
    for (int b = 0; b < B; ++b) {
      spans.push_back({&seqs[static_cast<size_t>(b)], static_cast<int64_t>(ids.size()), context,
                       LogitsWanted::kLast});
      for (int t = 0; t < context; ++t) {
        ids.push_back(tok(rng));
        pos.push_back(t);
      }
    }
    StepOutputs out;
    StepInputs in{ids, pos, spans, false};
    if (auto s = model->forward(in, out); !s.ok()) {
      std::fprintf(stderr, "context prefill: %s\n", s.message().c_str());
      return 1;
    }
    const double kv_mib = static_cast<double>(model->cache_memory().bytes_in_use) / (1 << 20);
    // Decode steps: one token per sequence. Four warm-up steps: a bucket's units run eagerly,
    // are recorded (and, when a bigger bucket grew the buffers, dropped and recorded again).
    std::vector<deepinfer::sample::SampleSpec> specs;
    auto decode_steps = [&](int n_timed, bool profiled_last, bool on_gpu = false) -> double {
      std::vector<double> times;
      const int warm = 4;
      for (int s = 0; s < n_timed + warm + (profiled_last ? 1 : 0); ++s) {
        const bool profiled = profiled_last && s == n_timed + warm;
        if (profiled) {
          prof.reset();
          prof.set_enabled(true);
        }
        ids.assign(static_cast<size_t>(B), 0);
        pos.assign(static_cast<size_t>(B), 0);
        spans.clear();
        for (int b = 0; b < B; ++b) {
          ids[static_cast<size_t>(b)] = tok(rng);
          pos[static_cast<size_t>(b)] = static_cast<int32_t>(seqs[static_cast<size_t>(b)].length());
          spans.push_back({&seqs[static_cast<size_t>(b)], b, 1, LogitsWanted::kLast});
        }
        StepInputs step{ids, pos, spans, false};
        specs.clear();
        for (int b = 0; on_gpu && b < B; ++b) {
          deepinfer::sample::SamplingParams sp;
          sp.temperature = 0.8f;
          sp.top_k = 50;  // top-p over the random model's flat rows would leave most to the host
          specs.push_back(deepinfer::sample::make_sample_spec(
              sp, {7, static_cast<uint64_t>(s), static_cast<uint32_t>(b)}));
        }
        step.sample_specs = specs;
        const auto t0 = Clock::now();
        if (auto st = model->forward(step, out); !st.ok()) {
          std::fprintf(stderr, "decode: %s\n", st.message().c_str());
          std::exit(1);
        }
        if (profiled) {
          prof.set_enabled(false);
          profiles.push_back("profile of one decode step at batch " + std::to_string(B) + ":");
          for (const auto& line : prof.report()) profiles.push_back("  " + line);
        } else if (s >= warm) {
          times.push_back(seconds(t0));
        }
      }
      std::sort(times.begin(), times.end());
      return times[times.size() / 2] * 1e3;
    };
    const std::vector<double> host0 = host_counter_values(*model);
    const double ms = decode_steps(steps, false);
    const std::vector<double> host1 = host_counter_values(*model);
    const double sampled_ms = decode_steps(steps, false, true);
    double eager_ms = ms;
    if (graph_max_rows > 0) {
      (*gpu)->set_replay(false);
      eager_ms = decode_steps(steps, profile);
      (*gpu)->set_replay(true);
    } else if (profile) {
      (void)decode_steps(1, true);
    }
    const double floor_ms = wb.step_bytes(B) / (copy_gbps * 1e9) * 1e3;
    std::printf("%-7d %12.2f %12.1f %14.3f %10.3f %12.2f %10.2f %14.2f\n", B, ms, B / ms * 1e3,
                floor_ms, floor_ms / ms, eager_ms, eager_ms / ms, sampled_ms);
    json << (first ? "" : ", ") << "{\"batch\": " << B << ", \"step_ms\": " << ms
         << ", \"tokens_per_s\": " << B / ms * 1e3 << ", \"floor_ms\": " << floor_ms
         << ", \"floor_over_ours\": " << floor_ms / ms << ", \"eager_step_ms\": " << eager_ms
         << ", \"graph_max_rows\": " << graph_max_rows
         << ", \"gpu_sampled_step_ms\": " << sampled_ms << ", \"kv_pages_mib\": " << kv_mib;
    std::printf("        KV pages of the %d sequences at %d tokens: %.1f MiB (%.2f MiB each)\n", B,
                context, kv_mib, kv_mib / B);
    if (!host0.empty()) {
      // V4.1's Engram lookup: host hashing + dequantizing into pinned staging and the upload,
      // per timed step; it runs while the layers before the Engram layer execute, so its share
      // of the step is at most this ratio.
      const double per_step = 1.0 / (steps + 4);
      const double gather_ms = (host1[0] - host0[0]) * per_step * 1e3;
      const double kib = (host1[1] - host0[1]) * per_step / 1024;
      std::printf("        Engram lookup (host, overlapped): %.3f ms/step = %.3f of the step, "
                  "%.1f KiB sent/step\n", gather_ms, gather_ms / ms, kib);
      json << ", \"engram_gather_ms\": " << gather_ms << ", \"engram_share_max\": "
           << gather_ms / ms << ", \"engram_upload_kib\": " << kib;
    }
    // Speculative verify steps (--verify-rows): every sequence feeds r rows (its last token and
    // r - 1 drafts) with logits for each, then rolls back r - 1 of them (one accepted token per
    // step keeps the context growing as in decode). The cost next to the decode step it
    // replaces says what verifying r - 1 drafts costs at this batch.
    json << ", \"verify\": [";
    bool vfirst = true;
    for (int r : parse_list(verify_rows_s)) {
      if (r < 2) continue;
      std::vector<double> times;
      for (int s = 0; s < steps + 2; ++s) {
        ids.clear();
        pos.clear();
        spans.clear();
        for (int b = 0; b < B; ++b) {
          SequenceCache& sq = seqs[static_cast<size_t>(b)];
          spans.push_back({&sq, static_cast<int64_t>(ids.size()), r, LogitsWanted::kAll});
          for (int t = 0; t < r; ++t) {
            ids.push_back(tok(rng));
            pos.push_back(static_cast<int32_t>(sq.length() + t));
          }
        }
        StepInputs step{ids, pos, spans, false};
        const auto t0 = Clock::now();
        if (auto st = model->forward(step, out); !st.ok()) {
          std::fprintf(stderr, "verify: %s\n", st.message().c_str());
          std::exit(1);
        }
        if (s >= 2) times.push_back(seconds(t0));
        for (auto& sq : seqs) (void)sq.rollback(r - 1);
      }
      std::sort(times.begin(), times.end());
      const double vms = times[times.size() / 2] * 1e3;
      std::printf("        verify %d rows/sequence (%d drafts): %.2f ms = %.2fx the decode step\n",
                  r, r - 1, vms, vms / ms);
      json << (vfirst ? "" : ", ") << "{\"rows_per_seq\": " << r << ", \"step_ms\": " << vms
           << ", \"over_decode\": " << vms / ms << "}";
      vfirst = false;
    }
    json << "]";
    // --mtp: one MTP block step over every sequence's last row (what batched drafting runs per
    // draft position), next to the decode step, and one profiled run of it.
    if (mtp && model->drafter() == deepinfer::model::DrafterKind::kMtp) {
      ids.clear();
      pos.clear();
      spans.clear();
      for (int b = 0; b < B; ++b) {
        SequenceCache& sq = seqs[static_cast<size_t>(b)];
        spans.push_back({&sq, b, 1, LogitsWanted::kLast});
        ids.push_back(tok(rng));
        pos.push_back(static_cast<int32_t>(sq.length()));
      }
      StepInputs step{ids, pos, spans, true};
      if (auto st = model->forward(step, out); !st.ok()) std::exit(1);
      const size_t width = out.hidden.size() / static_cast<size_t>(B);
      std::vector<deepinfer::model::MtpRows> rows;
      for (int b = 0; b < B; ++b) {
        rows.push_back({&seqs[static_cast<size_t>(b)],
                        std::span<const float>(out.hidden).subspan(static_cast<size_t>(b) * width, width),
                        {&ids[static_cast<size_t>(b)], 1}});
      }
      std::vector<double> times;
      for (int s = 0; s < steps + 3; ++s) {
        const bool profiled = s == steps + 2;
        if (profiled) {
          prof.reset();
          prof.set_enabled(true);
        }
        const int64_t keep = seqs[0].draft_length();
        const auto t0 = Clock::now();
        auto r = model->mtp_step(rows, /*run_ahead=*/true, deepinfer::model::MtpOutputs::kTokens);
        const double t = seconds(t0);
        if (!r.ok()) {
          std::fprintf(stderr, "mtp_step: %s\n", r.status().message().c_str());
          std::exit(1);
        }
        for (auto& sq : seqs) (void)sq.truncate_draft(std::min(keep, sq.draft_length()));
        if (profiled) {
          prof.set_enabled(false);
          profiles.push_back("profile of one MTP step over " + std::to_string(B) + " rows:");
          for (const auto& line : prof.report()) profiles.push_back("  " + line);
        } else if (s >= 2) {
          times.push_back(t);
        }
      }
      std::sort(times.begin(), times.end());
      const double mms = times[times.size() / 2] * 1e3;
      std::printf("        MTP step over %d rows (one draft position): %.2f ms = %.2fx the decode step\n",
                  B, mms, mms / ms);
      json << ", \"mtp_step_ms\": " << mms;
    }
    json << "}";
    first = false;
  }
  {
    const auto& st = (*gpu)->record_stats();
    std::printf(
        "CUDA graphs: %lld units captured, %lld replays, %lld eager runs, %lld refused%s%s\n",
        static_cast<long long>(st.captured), static_cast<long long>(st.replayed),
        static_cast<long long>(st.eager), static_cast<long long>(st.refused),
        st.refused > 0 ? ": " : "", st.last_refusal.c_str());
  }
  json << "]";
  for (const auto& line : profiles) std::printf("%s\n", line.c_str());

  if (prefill > 0) {
    SequenceCache seq = model->new_sequence();
    std::vector<int32_t> ids(static_cast<size_t>(prefill));
    for (auto& x : ids) x = tok(rng);
    const std::vector<double> host0 = host_counter_values(*model);
    const auto t0 = Clock::now();
    auto r = model->extend(seq, ids);
    const double s = seconds(t0);
    const std::vector<double> host1 = host_counter_values(*model);
    if (!r.ok()) {
      std::fprintf(stderr, "prefill: %s\n", r.status().message().c_str());
      return 1;
    }
    const double floor_s = 2.0 * wb.active_params * prefill / (matmul_tflops * 1e12);
    std::printf(
        "\nprefill %d tokens: %.2f s = %.0f tok/s; compute floor %.3f s (%.1f G active "
        "weights/token at %.0f TFLOP/s) -> floor/ours %.4f\n",
        prefill, s, prefill / s, floor_s, wb.active_params / 1e9, matmul_tflops, floor_s / s);
    double engram_s = 0;
    if (!host0.empty()) {
      engram_s = host1[0] - host0[0];
      std::printf("Engram lookup of the prefill (host, overlapped): %.1f ms = %.3f of it, %.1f MiB "
                  "sent\n", engram_s * 1e3, engram_s / s, (host1[1] - host0[1]) / (1 << 20));
    }
    if (profile) {
      SequenceCache again = model->new_sequence();
      prof.reset();
      prof.set_enabled(true);
      (void)model->extend(again, ids);
      prof.set_enabled(false);
      std::printf("profile of the prefill:\n");
      for (const auto& line : prof.report()) std::printf("  %s\n", line.c_str());
    }
    json << ", \"prefill\": {\"tokens\": " << prefill << ", \"seconds\": " << s
         << ", \"tokens_per_s\": " << prefill / s << ", \"floor_s\": " << floor_s
         << ", \"floor_over_ours\": " << floor_s / s << ", \"engram_gather_s\": " << engram_s
         << "}";
    json << ", \"snapshot\": " << snapshot_json(*model, seq, copy_gbps);
  }
  json << ", \"host_peak_rss_gib_end\": " << peak_rss_gib() << "}\n";
  if (!out_path.empty()) std::ofstream(out_path) << json.str();
  std::printf("%s", json.str().c_str());
  return 0;
}
