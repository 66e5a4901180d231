// From the benchmark's few-layer checkpoint to the full model: a decode step measured on the
// first L_bench layers, scaled to the real model's layer count, and the published figures of a
// peer engine to set beside it (bench/README.md says why they are not the same measurement).
//
// The scaling: step_full = (step − outside) · L_full / L_bench + outside, where `outside` is the
// part of a step that does not grow with layers, estimated (not profiled) as
//   * the LM head: its weight bytes at the copy bandwidth, or its FLOPs for the batch's logits
//     rows at the measured BF16 rate (the head is BF16), whichever is longer;
//   * the copy of the logits rows to the host (B · vocab · 4 bytes) at the measured
//     device-to-host rate, for steps that return logits.
// The embedding gather (B rows) and hc_head are left in the per-layer part (tens of µs); so is
// the step's fixed host work, which the scaling then overstates: the estimate leans slow.
// The bench's layers are the model's first ones (hash-routed MoE, their own mix of attention
// kinds); scaling assumes an average layer costs what they cost.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ceilings.h"
#include "io/model_config.h"

namespace deepinfer::bench {

// num_hidden_layers of the released Flash models (spec deepseek_v4_family.md §1.1, §1.3):
// V4-Flash 43, V4.1-Flash 40 (drafter layers not counted).
int full_model_layers(io::ModelFamily family);

struct Ceilings {
  double copy_gbps = 0;
  double bf16_tflops = 0;  // 0: not measured (the head is then bounded by bytes only)
  double d2h_gbps = 0;
};

struct FullModelStep {
  double head_ms = 0, logits_ms = 0;  // the outside-the-layers estimate, its two parts
  double per_layer_ms = 0;            // (step − outside) / L_bench
  double step_ms = 0;                 // the extrapolated step
  double tokens_per_s = 0;            // batch / step_ms: what one GPU's share of work would give
};
FullModelStep extrapolate_step(double step_ms, int batch, bool logits_to_host, int64_t vocab,
                               const WeightBytes& w, const Ceilings& c, int bench_layers,
                               int full_layers);

// One row of the full-model table, and its JSON object.
std::string full_model_row(int batch, int64_t context, double step_ms, const FullModelStep& f);
std::string full_model_json(const FullModelStep& f);

// Prints the table's header, `rows`, what the estimate assumes, the full model's weight bytes
// against the card's memory, and the peer's published figures (V4-Flash only: "not found"
// otherwise).
void print_full_model_table(std::span<const std::string> rows, const WeightBytes& w,
                            int bench_layers, int full_layers, bool v4_flash, double card_bytes);
// The peer figures as a JSON array.
std::string published_json(bool v4_flash);

// The full model's weight bytes, scaled from this checkpoint's layers (head and embedding once).
double full_model_weight_bytes(const WeightBytes& w, int bench_layers, int full_layers);

// A figure another engine published for the real model, with where it comes from.
struct PublishedFigure {
  const char* engine;
  double tokens_per_s;
  const char* what;    // what the number measures
  const char* setup;   // what is known of their setup
  const char* source;  // where it was published
};
// SGLang's published DeepSeek-V4-Flash decode figures on H200 (empty span if none were found).
std::span<const PublishedFigure> published_v4_flash_h200();

}  // namespace deepinfer::bench
