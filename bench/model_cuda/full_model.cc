// The few-layer to full-model scaling and the peer's published figures (full_model.h).
#include "full_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace deepinfer::bench {

int full_model_layers(io::ModelFamily family) {
  return family == io::ModelFamily::kDeepseekV41 ? 40 : 43;
}

FullModelStep extrapolate_step(double step_ms, int batch, bool logits_to_host, int64_t vocab,
                               const WeightBytes& w, const Ceilings& c, int bench_layers,
                               int full_layers) {
  FullModelStep f;
  const double head_read_ms = c.copy_gbps > 0 ? w.head_bytes / (c.copy_gbps * 1e9) * 1e3 : 0;
  const double head_math_ms =
      c.bf16_tflops > 0 ? w.head_flops(batch) / (c.bf16_tflops * 1e12) * 1e3 : 0;
  f.head_ms = std::max(head_read_ms, head_math_ms);
  if (logits_to_host && c.d2h_gbps > 0) {
    f.logits_ms =
        static_cast<double>(batch) * static_cast<double>(vocab) * 4.0 / (c.d2h_gbps * 1e9) * 1e3;
  }
  // A step faster than the estimate of its outside part leaves nothing to scale: keep it as is
  // rather than scale a negative.
  const double outside = std::min(step_ms, f.head_ms + f.logits_ms);
  f.per_layer_ms = (step_ms - outside) / bench_layers;
  f.step_ms = f.per_layer_ms * full_layers + outside;
  f.tokens_per_s = f.step_ms > 0 ? batch / f.step_ms * 1e3 : 0;
  return f;
}

double full_model_weight_bytes(const WeightBytes& w, int bench_layers, int full_layers) {
  const double layers = (w.dense - w.head_bytes) + w.per_expert * w.experts * w.moe_layers;
  // The embedding table is as large as the head (vocab x hidden, BF16) and is not in `dense`.
  return layers * full_layers / bench_layers + 2 * w.head_bytes;
}

std::string full_model_row(int batch, int64_t context, double step_ms, const FullModelStep& f) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%-7d %8lld %12.2f %9.3f %10.3f %12.3f %12.2f %12.1f", batch,
                static_cast<long long>(context), step_ms, f.head_ms, f.logits_ms, f.per_layer_ms,
                f.step_ms, f.tokens_per_s);
  return buf;
}

std::string full_model_json(const FullModelStep& f) {
  std::ostringstream j;
  j << "{\"head_ms_estimate\": " << f.head_ms << ", \"logits_to_host_ms_estimate\": " << f.logits_ms
    << ", \"per_layer_ms\": " << f.per_layer_ms << ", \"step_ms\": " << f.step_ms
    << ", \"tokens_per_s_per_gpu\": " << f.tokens_per_s << "}";
  return j.str();
}

void print_full_model_table(std::span<const std::string> rows, const WeightBytes& w,
                            int bench_layers, int full_layers, bool v4_flash, double card_bytes) {
  std::printf(
      "\nfull model: each decode step above scaled from this checkpoint's %d layers to the real "
      "model's %d (num_hidden_layers),\n  step = (ours - outside) x %d/%d + outside, outside = "
      "head + logits, both estimated, not profiled:\n  head = max(its weight bytes / copy "
      "bandwidth, its FLOPs for B rows / BF16 rate); logits = B x vocab x 4 bytes / "
      "device-to-host rate\n",
      bench_layers, full_layers, full_layers, bench_layers);
  char layers_col[32], full_col[32];
  std::snprintf(layers_col, sizeof layers_col, "ms (%d lay.)", bench_layers);
  std::snprintf(full_col, sizeof full_col, "%d-lay. ms", full_layers);
  std::printf("%-7s %8s %12s %9s %10s %12s %12s %12s\n", "batch", "context", layers_col, "head ms",
              "logits ms", "per layer ms", full_col, "tok/s/GPU");
  for (const auto& r : rows) std::printf("%s\n", r.c_str());
  const double full_bytes = full_model_weight_bytes(w, bench_layers, full_layers);
  const int gpus = card_bytes > 0 ? static_cast<int>(std::ceil(full_bytes / card_bytes)) : 0;
  std::printf(
      "  the full model's weights: ~%.0f GB (this checkpoint's layers x %d/%d, head and "
      "embedding once) on a card of %.0f GB: %d such GPU(s) for the weights alone. Split over "
      "them, each reads its share per step, so tok/s/GPU is one GPU's share of the work (the "
      "exchange between GPUs not counted).\n",
      full_bytes / 1e9, full_layers, bench_layers, card_bytes / 1e9, gpus);
  if (!v4_flash) {
    std::printf("  peer: not found (no published DeepSeek-V4.1-Flash decode figure)\n");
    return;
  }
  std::printf("  peer, published (not the same measurement; bench/README.md says why):\n");
  for (const auto& p : published_v4_flash_h200()) {
    std::printf("    %s %.0f tok/s: %s; %s. Source: %s\n", p.engine, p.tokens_per_s, p.what,
                p.setup, p.source);
  }
  std::printf(
      "    beside it: our batch-1 tok/s/GPU (one request, one GPU's share, no speculative "
      "decoding)\n");
}

std::string published_json(bool v4_flash) {
  std::ostringstream j;
  j << "[";
  bool first = true;
  for (const auto& p : v4_flash ? published_v4_flash_h200() : std::span<const PublishedFigure>{}) {
    j << (first ? "" : ", ") << "{\"engine\": \"" << p.engine
      << "\", \"tokens_per_s\": " << p.tokens_per_s << ", \"what\": \"" << p.what
      << "\", \"source\": \"" << p.source << "\"}";
    first = false;
  }
  j << "]";
  return j.str();
}

std::span<const PublishedFigure> published_v4_flash_h200() {
  // Found with the project's search tool (pages corpus), 2026-12. The LMSYS blog post's own
  // benchmark notes were not in the stored excerpt: the GPU count, batch and spec settings below
  // are what the excerpts say, nothing more.
  static const PublishedFigure kFigures[] = {
      {"SGLang", 266, "decode tok/s at 4K context",
       "V4-Flash, H200, real weights; speculative decoding likely on (the post's decode "
       "figure used each engine's best-effort MTP spec configuration); GPU count and "
       "concurrency not stated in the excerpts found",
       "LMSYS launch thread / blog 2026-04-25 'DeepSeek-V4 on Day 0', as summarised by "
       "ai-primer.com"},
      {"SGLang", 240, "decode tok/s at 900K context",
       "as above; HiSparse (CPU-extended KV) is their long-context feature",
       "LMSYS launch thread / blog 2026-04-25, as summarised by ai-primer.com"},
  };
  return kFigures;
}

}  // namespace deepinfer::bench
