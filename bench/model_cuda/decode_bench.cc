// The DeepSeek-V4 / V4.1 model on the CUDA backend at Flash shapes: load, prefill and decode steps,
// each figure next to its floor on this card (not a test; never fails on time).
//
//   decode_bench --model DIR [--batches 1,16,128,256] [--context 64] [--steps 8]
//                [--prefill 4096] [--out results.json] [--profile] [--batch-invariant]
//                [--graph-max-rows 256] [--verify-rows 2,4,6] [--mtp]
//                [--long-context N] [--long-batches 1,16] [--matmul-tflops T]
//                [--full-layers L] [--load-format auto|dummy]
//
// --graph-max-rows: what DEEPINFER_CUDA_GRAPH_MAX_ROWS selects (0 = no CUDA graphs). With
// graphs, every batch is timed twice in the same run: replaying the graphs, and with replay off
// (CudaOps::set_replay(false): the same padded step form, every op launched eagerly), so the
// graphs' gain is a same-run A/B. A third timing draws the tokens on the GPU (Model::forward
// with StepInputs::sample_specs: temperature 0.8, top-k 50) so only token ids come back,
// against the default's copy of every logits row to the host (which the engine then samples).
// --batch-invariant: the CUDA backend's batch-invariant mode (what DEEPINFER_BATCH_INVARIANT=1
// selects), to show what it costs.
// --fused-act-quant, --unfused-small-ops, --ungrouped-linear, --hc-dot-tokens=N (1-1024),
// --sample-cluster=N (1, 2, 4, 8), --pageable-outputs, --sparse-16-head, --staged-sparse-split: the CudaOps A/B switches
// (backend_switches.h says what each does).
// --profile: after each batch's timed steps, one more step through backend::ProfilingOps
// (every op synchronised and timed) prints where the step's time goes, op by op.
// --long-context N: after the batches above, decode again at --long-batches with every sequence
// first prefilled with N tokens (sequence by sequence, in chunks of at most 4,096 rows), so the
// sliding window is full and the compressed rows, the indexer's keys and its top-k selection
// are at that context's size.
//
// DIR is a checkpoint in the official layout, typically the V4-Flash-shaped random one of
// tools/gpu/make_synthetic_v4.py or the V4.1-Flash-shaped one of make_synthetic_v41.py (real
// dimensions, the first few layers; V4.1's Engram tables in host memory, not counted in the
// floor: a step reads a few rows of them per token). With --load-format dummy DIR needs only
// config.json (`make_synthetic_v4.py DIR --config-only --layers N`; V4.1: config.json and
// tokenizer.json, `make_synthetic_v41.py DIR --config-only`): the same layouts and value
// distributions generated on the GPU at load (EngineOptions::load_format), so many layers need
// no multi-GB file. --mtp needs a checkpoint (a dummy model has no drafter).
//
// Ceilings, measured in the same run (ceilings.h):
//   * copy bandwidth: a 2 GiB device-to-device cudaMemcpy (bytes read + written) / time;
//   * tensor-core rates: an 8192^3 GEMM, FP8 E4M3 x E4M3 -> BF16 (cuBLASLt) and BF16 (cuBLAS);
//   * decode floor at batch B = the weight bytes one step must read / copy bandwidth, where the
//     bytes are every non-routed-expert weight (attention, shared experts, router, mHC, norms,
//     head) plus the routed experts the step touches: per MoE layer E·(1 − (1 − k/E)^B) distinct
//     experts of E for B tokens routed uniformly at random (the synthetic router is random);
//   * long-context decode floor = that weight floor + the KV / compressed-cache bytes of the B
//     sequences at the copy bandwidth, taken as the cache pages each sequence holds
//     (cache_memory().bytes_in_use): an upper bound on what a step reads (it reads the window,
//     the indexer's keys and the top-k compressed rows, not every byte of every page), so this
//     floor may sit above the true one and its floor/ours overstates how close a step is;
//   * prefill floor = matmul FLOPs / the measured FP8 rate (the linears are FP8/FP4: the best a
//     prefill could do), FLOPs = 2 · body weights · tokens + 2 · head weights · 1 (a prefill
//     computes logits for its last row only). Attention's own FLOPs are not counted.
//     --matmul-tflops T replaces the measured rate; without an FP8 algorithm on the card the
//     BF16 rate is used, and the output says so.
// The full-model table scales each decode step to the released model's layer count (V4-Flash
// 43, V4.1-Flash 40; --full-layers L replaces it; full_model.h says how and what is estimated)
// and prints SGLang's published V4-Flash figures beside it (bench/README.md: why these are not
// the same measurement).
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
#include "backend_switches.h"
#include "ceilings.h"
#include "full_model.h"
#include "io/checkpoint.h"
#include "kernels/cuda/launch.h"
#include "launch_report.h"
#include "long_context.h"
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

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) v.push_back(std::stoi(t));
  return v;
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
  std::string long_batches_s = "1,16";
  std::string load_format_s = "auto";
  int context = 64, steps = 8, prefill = 4096, long_context = 0;
  int full_layers_arg = 0;  // 0: the released Flash model's layer count for the family
  bool profile = false, batch_invariant = false, mtp = false;
  deepinfer::bench::BackendSwitches switches;  // backend_switches.h
  int graph_max_rows = 256;
  double matmul_tflops = 0;  // 0: the rate measured in this run
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
    else if (a == "--long-context")
      long_context = std::stoi(next());
    else if (a == "--long-batches")
      long_batches_s = next();
    else if (a == "--full-layers")
      full_layers_arg = std::stoi(next());
    else if (a == "--load-format")
      load_format_s = next();
    else if (switches.parse(a))
      continue;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (model_dir.empty()) {
    std::fprintf(stderr, "usage: decode_bench --model DIR [--batches 1,16] [--out F]\n");
    return 2;
  }
  auto load_format = deepinfer::io::parse_load_format(load_format_s, "--load-format");
  if (!load_format.ok()) {
    std::fprintf(stderr, "%s\n", load_format.status().message().c_str());
    return 2;
  }
  const deepinfer::io::LoadOptions load{*load_format, 0};
  if (auto s = deepinfer::backend::cuda::cuda_available(); !s.ok()) {
    std::printf("SKIPPED: %s\n", s.message().c_str());
    return 77;
  }
  auto ck = deepinfer::io::Checkpoint::open(model_dir, load);
  if (!ck.ok()) {
    std::fprintf(stderr, "%s\n", ck.status().message().c_str());
    return 1;
  }
  const deepinfer::bench::WeightBytes wb = deepinfer::bench::count_weights(*ck);
  const double copy_gbps = deepinfer::bench::measure_copy_gbps();
  std::printf(
      "copy bandwidth %.0f GB/s; weights: dense %.2f GB, %d MoE layers x %d experts of "
      "%.1f MB\n",
      copy_gbps, wb.dense / 1e9, wb.moe_layers, wb.experts, wb.per_expert / 1e6);
  // The card's matmul rates, before the model takes its memory.
  const deepinfer::bench::GemmRates gemm = deepinfer::bench::measure_gemm_tflops(8192);
  std::printf("tensor-core rates (%d^3 GEMM, this run): FP8 E4M3 x E4M3 -> BF16 (cuBLASLt) ",
              gemm.n);
  if (gemm.fp8_tflops > 0) {
    std::printf("%.0f TFLOP/s", gemm.fp8_tflops);
  } else {
    std::printf("not measured (%s)", gemm.fp8_note.c_str());
  }
  if (gemm.bf16_tflops > 0) {
    std::printf(", BF16 (cuBLAS) %.0f TFLOP/s\n", gemm.bf16_tflops);
  } else {
    std::printf(", BF16 (cuBLAS) not measured (%s)\n", gemm.bf16_note.c_str());
  }
  // The prefill floor's rate: the override, else FP8 (the checkpoint's linears are FP8/FP4),
  // else BF16, else the BF16 rate once measured on an H200 here (docs/cuda_backend.md).
  double prefill_tflops = matmul_tflops;
  std::string prefill_rate_source;
  if (matmul_tflops > 0) {
    prefill_rate_source = "--matmul-tflops, replacing the measured rate";
  } else if (gemm.fp8_tflops > 0) {
    prefill_tflops = gemm.fp8_tflops;
    prefill_rate_source = "the measured FP8 rate";
  } else if (gemm.bf16_tflops > 0) {
    prefill_tflops = gemm.bf16_tflops;
    prefill_rate_source = "the measured BF16 rate: no FP8 GEMM on this card";
  } else {
    prefill_tflops = 780;
    prefill_rate_source = "780, an H200's BF16 rate from docs/cuda_backend.md: no GEMM measured";
  }
  std::printf("prefill floor rate: %.0f TFLOP/s (%s)\n", prefill_tflops,
              prefill_rate_source.c_str());
  // The logits' copy to the host, per byte, at the largest batch's size (for the 43-layer
  // lines: it does not grow with layers).
  int max_batch = 1;
  for (int B : parse_list(batches_s)) max_batch = std::max(max_batch, B);
  const size_t logits_bytes =
      static_cast<size_t>(max_batch) * static_cast<size_t>(ck->config().vocab_size) * 4;
  const double d2h_gbps = deepinfer::bench::measure_d2h_gbps(logits_bytes);
  const double d2h_pinned_gbps = deepinfer::bench::measure_d2h_pinned_gbps(logits_bytes);
  // The host-sampled "step ms" carries this copy; the GPU-sampled column does not.
  std::printf(
      "logits to the host at batch %d (%.1f MB): %.1f GB/s into pageable memory (%.2f ms), "
      "%.1f GB/s into pinned memory (%.2f ms)\n",
      max_batch, logits_bytes / 1e6, d2h_gbps, logits_bytes / (d2h_gbps * 1e6), d2h_pinned_gbps,
      d2h_pinned_gbps > 0 ? logits_bytes / (d2h_pinned_gbps * 1e6) : 0.0);
  const deepinfer::bench::Ceilings ceilings{copy_gbps, gemm.bf16_tflops, d2h_gbps};
  const int bench_layers = static_cast<int>(ck->config().layers.size());
  const int full_layers = full_layers_arg > 0
                              ? full_layers_arg
                              : deepinfer::bench::full_model_layers(ck->config().family);
  // The peer's figures are for V4-Flash (hidden size 4096); other shapes get "not found".
  const bool v4_flash = ck->config().family == deepinfer::io::ModelFamily::kDeepseekV4 &&
                        ck->config().hidden_size == 4096;

  auto gpu = deepinfer::backend::cuda::CudaOps::create(0, batch_invariant, graph_max_rows);
  if (!gpu.ok()) return 1;
  switches.apply(**gpu);
  size_t free0 = 0, total = 0;
  DI_CUDA_CHECK(cudaMemGetInfo(&free0, &total));
  const auto t_load = Clock::now();
  deepinfer::backend::ProfilingOps prof(**gpu);
  prof.set_enabled(false);
  auto loaded = deepinfer::model::load_model(model_dir, prof, load);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().message().c_str());
    return 1;
  }
  Model* model = loaded->get();
  const double load_s = seconds(t_load);
  size_t free1 = 0;
  DI_CUDA_CHECK(cudaMemGetInfo(&free1, &total));
  std::printf("load %.1f s, GPU memory for weights %.2f GiB, host peak RSS %.2f GiB\n", load_s,
              static_cast<double>(free0 - free1) / (1 << 30), peak_rss_gib());
  const int64_t V = model->vocab_size();
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(V - 1));

  std::ostringstream json;
  json << "{\"model\": \"" << model_dir << "\", \"load_format\": \"" << load_format_s
       << "\", \"copy_gbps\": " << copy_gbps << ", \"gemm_n\": " << gemm.n
       << ", \"fp8_gemm_tflops\": " << gemm.fp8_tflops
       << ", \"bf16_gemm_tflops\": " << gemm.bf16_tflops << ", \"fp8_gemm_note\": \""
       << gemm.fp8_note << "\", \"bf16_gemm_note\": \"" << gemm.bf16_note
       << "\", \"prefill_floor_tflops\": " << prefill_tflops
       << ", \"matmul_tflops_override\": " << matmul_tflops << ", \"d2h_gbps\": " << d2h_gbps
       << ", \"d2h_pinned_gbps\": " << d2h_pinned_gbps << ", \"bench_layers\": " << bench_layers
       << ", \"full_layers\": " << full_layers << ", \"load_s\": " << load_s
       << ", \"host_peak_rss_gib\": " << peak_rss_gib()
       << ", \"weights_gpu_gib\": " << static_cast<double>(free0 - free1) / (1 << 30)
       << ", \"decode\": [";

  std::printf("\n%-7s %12s %12s %14s %10s %12s %10s %14s\n", "batch", "step ms", "tok/s",
              "floor ms", "floor/ours", "eager ms", "eager/ours", "GPU-sampled ms");
  bool first = true;
  std::vector<std::string> profiles;
  std::vector<std::string> full_rows;  // the 43-layer table, printed after the batches
  std::vector<std::pair<int, double>> short_steps;  // (batch, step ms), for the long-context ratio
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
    // This library's kernel launches per step, counted over eager steps (a graph replays what
    // its capture launched): issue 19's "launches per decode step".
    uint64_t launches0 = deepinfer::kernels::cuda::kernel_launches();
    int counted_steps = 0;
    if (graph_max_rows > 0) {
      (*gpu)->set_replay(false);
      eager_ms = decode_steps(steps, profile);
      counted_steps = steps + 4 + (profile ? 1 : 0);
      (*gpu)->set_replay(true);
    } else {
      if (profile) (void)decode_steps(1, true);
      launches0 = deepinfer::kernels::cuda::kernel_launches();
      (void)decode_steps(1, false);  // four warm-up steps and one timed: five eager steps
      counted_steps = 5;
    }
    const double launches_per_step =
        counted_steps > 0
            ? static_cast<double>(deepinfer::kernels::cuda::kernel_launches() - launches0) /
                  counted_steps
            : 0.0;
    const double floor_ms = wb.step_bytes(B) / (copy_gbps * 1e9) * 1e3;
    std::printf("%-7d %12.2f %12.1f %14.3f %10.3f %12.2f %10.2f %14.2f\n", B, ms, B / ms * 1e3,
                floor_ms, floor_ms / ms, eager_ms, eager_ms / ms, sampled_ms);
    json << (first ? "" : ", ") << "{\"batch\": " << B << ", \"step_ms\": " << ms
         << ", \"tokens_per_s\": " << B / ms * 1e3 << ", \"floor_ms\": " << floor_ms
         << ", \"floor_over_ours\": " << floor_ms / ms << ", \"eager_step_ms\": " << eager_ms
         << ", \"graph_max_rows\": " << graph_max_rows
         << ", \"gpu_sampled_step_ms\": " << sampled_ms << ", \"kv_pages_mib\": " << kv_mib;
    short_steps.emplace_back(B, ms);
    const auto full = deepinfer::bench::extrapolate_step(ms, B, /*logits_to_host=*/true, V, wb,
                                                         ceilings, bench_layers, full_layers);
    full_rows.push_back(deepinfer::bench::full_model_row(B, context, ms, full));
    json << ", \"full_model\": " << deepinfer::bench::full_model_json(full);
    std::printf("        KV pages of the %d sequences at %d tokens: %.1f MiB (%.2f MiB each)\n", B,
                context, kv_mib, kv_mib / B);
    std::printf(
        "        kernel launches per decode step: %.0f (this library's kernels, counted "
        "over eager steps; cuBLAS / cuBLASLt calls not counted; issue 19 aims at <= 100 "
        "for the 4-layer model)\n",
        launches_per_step);
    json << ", \"kernel_launches_per_step\": " << launches_per_step;
    {  // which kernels those launches are: five more eager steps (four warm-up, one timed)
      if (graph_max_rows > 0) (*gpu)->set_replay(false);
      profiles.push_back("launches per decode step by kernel at batch " + std::to_string(B) +
                         " (this library's, eager steps):");
      for (auto& line : deepinfer::bench::launches_by_kernel(
               [&] { (void)decode_steps(1, false); }, 5, 40)) {
        profiles.push_back(std::move(line));
      }
      if (graph_max_rows > 0) (*gpu)->set_replay(true);
    }
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

  if (long_context > 0) {
    const deepinfer::bench::LongContextOptions lo{long_context, parse_list(long_batches_s),
                                                  steps};
    const deepinfer::bench::LongContextInputs li{wb, ceilings, bench_layers, full_layers,
                                                 short_steps};
    json << ", \"long_context\": "
         << deepinfer::bench::run_long_context(*model, lo, li, rng, full_rows);
  }
  deepinfer::bench::print_full_model_table(full_rows, wb, bench_layers, full_layers, v4_flash,
                                           static_cast<double>(total));
  json << ", \"published_peer\": " << deepinfer::bench::published_json(v4_flash);

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
    // One sequence: the body's weights multiply every token, the head only the last row.
    const double body_flops = wb.body_flops(prefill), head_flops = wb.head_flops(1);
    const double floor_s = (body_flops + head_flops) / (prefill_tflops * 1e12);
    std::printf(
        "\nprefill %d tokens: %.2f s = %.0f tok/s; compute floor %.4f s -> floor/ours %.4f\n"
        "  floor = (body %.2f TFLOP [2 x %.2f G weights/token x %d tokens] + head %.4f TFLOP "
        "[2 x %.2f G weights x 1 logits row]) / %.0f TFLOP/s (%s); attention's own FLOPs not "
        "counted\n",
        prefill, s, prefill / s, floor_s, floor_s / s, body_flops / 1e12, wb.body_params / 1e9,
        prefill, head_flops / 1e12, wb.head_params / 1e9, prefill_tflops,
        prefill_rate_source.c_str());
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
         << ", \"floor_over_ours\": " << floor_s / s << ", \"floor_body_flops\": " << body_flops
         << ", \"floor_head_flops\": " << head_flops << ", \"floor_tflops\": " << prefill_tflops
         << ", \"engram_gather_s\": " << engram_s
         << "}";
    json << ", \"snapshot\": " << snapshot_json(*model, seq, copy_gbps);
  }
  json << ", \"host_peak_rss_gib_end\": " << peak_rss_gib() << "}\n";
  if (!out_path.empty()) std::ofstream(out_path) << json.str();
  std::printf("%s", json.str().c_str());
  return 0;
}
